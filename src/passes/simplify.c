/* simplify.c - the first pass: cleans the ATen-shaped graph so that later
 * passes see ops directly. In rounds until nothing changes:
 *   1. GEMM operands: addmm(b, x, permute(w, [1, 0])) and mm(x, permute(w))
 *      become linear(x, w, b) (linear reads w transposed, so the permute,
 *      a full copy per call, goes away and w reaches the kernel directly);
 *      reshape(linear(reshape(y))) that only splits leading dims becomes
 *      linear on y's shape (linear takes [..., K]).
 *   2. Compositions: reshape of reshape, permute of permute.
 *   3. No-ops: a node whose output equals an input (reshape/expand to the
 *      same shape, identity permute, whole slice, copy, cast to the same
 *      dtype, x * 1, x / 1, x + (-0.0), x - (+0.0)) is replaced by it.
 *   4. Repeats: a node with the same op, inputs and attributes as an
 *      earlier one (BERT computes its attention mask once per layer) is
 *      replaced by it.
 *   5. Constant folding: a node whose inputs are all constants runs its
 *      reference kernel now; the result becomes an owned constant, unless
 *      it would add more than FOLD_GROWTH bytes beyond its inputs or is a
 *      product of more than FOLD_WORK multiply-adds.
 *   6. Dead nodes (no output used) are dropped.
 * The graph is functional (values are never written after their node), so
 * replacing a value by an equal one is always valid, graph outputs
 * included: the runtime copies an output that is an input or a constant.
 * Requires: node order is execution order.
 * Rules 1-3 are in simplify_rules.c, 4 in simplify_repeats.c, 5 in
 * simplify_fold.c; 6 and the rounds are here. */
#include "passes/simplify_internal.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

enum { MAX_ROUNDS = 16 };

/* One per rewrite kind, in the order of simplify_internal.h's enum. */
static const char *const RW_NAME[RW_COUNT] = {
	"addmm->linear",      "mm->linear",         "mm(a^T, b)",         "linear rank",        "reshape(reshape)",
	"permute(permute)",   "reshape sunk below unary op", "no-op reshape",      "no-op permute",      "no-op expand",
	"no-op slice",        "copy",               "no-op cast",         "x*1 x/1 x+-0 x-0",
	"repeated",           "folded",             "fold skipped (size/work)", "fold failed",       "dead",
};

/* ---- bookkeeping ------------------------------------------------------- */

static air_status count_uses(simp *s)
{
	free(s->uses);
	s->uses = ir_count_uses(s->g);
	s->n_uses = s->g->n_values;
	if (!s->uses)
		return air_error(AIR_OUT_OF_MEMORY, "simplify: no memory");
	return AIR_OK;
}

/* ---- 6. dead nodes ----------------------------------------------------- */

static void drop_dead(simp *s)
{
	air_graph *g = s->g;
	for (int k = g->n_nodes - 1; k >= 0; k--) {
		if (s->dead[k])
			continue;
		const ir_node *n = &g->nodes[k];
		bool used = false;
		for (int o = 0; o < n->n_out; o++)
			used |= s->uses[n->out[o]] > 0;
		if (used)
			continue;
		s->dead[k] = 1;
		for (int o = 0; o < n->n_out; o++)
			g->values[n->out[o]].kind = IR_DEAD;
		for (int i = 0; i < n->n_in; i++)
			s->uses[n->in[i]]--;
		s->count[RW_DEAD]++;
		s->changed = true;
	}
}

/* Constants nothing refers to any more (folded intermediates, weights
 * replaced by their folded form) are let go: owned memory is freed, and
 * borrowed memory no longer counts as the model's. Their values stay,
 * empty and dead, so ids stay stable. */
static size_t release_unused_constants(simp *s)
{
	air_graph *g = s->g;
	size_t freed = 0;
	for (int c = 0; c < g->n_consts; c++) {
		ir_constant *k = &g->consts[c];
		if (s->uses[k->value] > 0 || g->values[k->value].kind != IR_CONSTANT)
			continue;
		if (k->owned)
			freed += k->nbytes;
		free(k->owned);
		k->owned = NULL;
		k->data = NULL;
		k->nbytes = 0;
		g->values[k->value].kind = IR_DEAD;
	}
	return freed;
}

static air_status round_once(simp *s)
{
	air_graph *g = s->g;
	AIR_TRY(count_uses(s));
	memset(s->dead, 0, (size_t)g->n_nodes + 1);
	for (int k = 0; k < g->n_nodes; k++)
		simp_rule_gemm(s, k);
	for (int k = 0; k < g->n_nodes; k++) {
		if (s->dead[k])
			continue;
		AIR_TRY(simp_rule_linear_rank(s, k));
		if (s->dead[k])
			continue;
		simp_rule_sink_reshape(s, k);
		simp_rule_compose(s, k);
		simp_rule_noop(s, k);
	}
	AIR_TRY(simp_rule_repeats(s));
	drop_dead(s);
	for (int k = 0; k < g->n_nodes; k++)
		if (!s->dead[k])
			AIR_TRY(simp_rule_fold(s, k));
	drop_dead(s);
	pass_compact(g, s->dead);
	return AIR_OK;
}

air_status pass_simplify(air_graph *g, const pass_options *po, pass_log *log)
{
	simp s;
	memset(&s, 0, sizeof s);
	s.g = g;
	s.log = log;
	s.dead = malloc((size_t)g->n_nodes + 1);
	if (!s.dead)
		return air_error(AIR_OUT_OF_MEMORY, "simplify: no memory");
	air_status st = AIR_OK;
	int rounds = 0;
	do {
		s.changed = false;
		st = round_once(&s);
		rounds++;
	} while (st == AIR_OK && s.changed && rounds < MAX_ROUNDS);
	size_t freed = 0;
	if (st == AIR_OK && (st = count_uses(&s)) == AIR_OK)
		freed = release_unused_constants(&s);
	free(s.uses);
	free(s.dead);
	AIR_TRY(st);
	pass_logf(log, "simplify: %d round(s);", rounds);
	int any = 0;
	for (int r = 0; r < RW_COUNT; r++)
		if (s.count[r]) {
			pass_logf(log, "%s %s %d", any ? "," : "", RW_NAME[r], s.count[r]);
			any = 1;
		}
	if (!any)
		pass_logf(log, " nothing to do");
	if (s.count[RW_FOLD])
		pass_logf(log, "; constants made: %zu bytes, unused owned constants freed: %zu bytes",
			  s.folded_bytes, freed);
	pass_logf(log, "\n");
	return AIR_OK;
}

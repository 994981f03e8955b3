/* simplify_repeats.c - the simplify pass's rule 4: a node repeating an
 * earlier one (same op, inputs and attributes) is replaced by it. */
#include "passes/simplify_internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "ops/op.h"

/* ---- 4. repeats -------------------------------------------------------- */

static uint64_t mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	return h;
}

static uint64_t node_hash(const ir_node *n)
{
	uint64_t h = mix((uint64_t)n->op, (uint64_t)n->n_in);
	for (int i = 0; i < n->n_in; i++)
		h = mix(h, n->in[i]);
	for (int a = 0; a < IR_MAX_ATTRS; a++) {
		uint64_t f;
		memcpy(&f, &n->attrs[a].f, sizeof f);
		h = mix(mix(h, (uint64_t)n->attrs[a].i), f);
		for (int j = 0; j < n->attrs[a].n; j++)
			h = mix(h, (uint64_t)n->attrs[a].ints[j]);
	}
	return h;
}

static bool same_node(const ir_node *a, const ir_node *b)
{
	if (a->op != b->op || a->n_in != b->n_in || a->n_out != b->n_out)
		return false;
	for (int i = 0; i < a->n_in; i++)
		if (a->in[i] != b->in[i])
			return false;
	for (int k = 0; k < IR_MAX_ATTRS; k++) {
		const ir_attr *x = &a->attrs[k], *y = &b->attrs[k];
		if (x->set != y->set || x->i != y->i || memcmp(&x->f, &y->f, sizeof x->f) != 0 || x->n != y->n)
			return false;
		if (x->n && memcmp(x->ints, y->ints, sizeof *x->ints * (size_t)x->n) != 0)
			return false;
	}
	return true;
}

/* Views and copies are left alone: later passes fold a permute or expand
 * into its one consumer (sdpa, layout edges), which a shared one would
 * stop, and a reshape costs nothing anyway. */
static bool repeat_candidate(int op)
{
	switch (op) {
	case OP_reshape:
	case OP_permute:
	case OP_expand:
	case OP_slice:
	case OP_copy: return false;
	default: return true;
	}
}

/* Every op is a pure function of its inputs and attributes (there are no
 * random or stateful ops), so an identical later node can reuse the
 * earlier one's outputs; node order is execution order, so the earlier one
 * has run before any user of the later one. */
air_status simp_rule_repeats(simp *s)
{
	air_graph *g = s->g;
	size_t cap = 16;
	while (cap < 2 * (size_t)g->n_nodes)
		cap *= 2;
	int *slot = malloc(sizeof *slot * cap);
	if (!slot)
		return air_error(AIR_OUT_OF_MEMORY, "simplify: no memory");
	for (size_t i = 0; i < cap; i++)
		slot[i] = -1;
	for (int k = 0; k < g->n_nodes; k++) {
		if (s->dead[k] || !repeat_candidate(g->nodes[k].op))
			continue;
		const ir_node *n = &g->nodes[k];
		size_t i = (size_t)node_hash(n) & (cap - 1);
		while (slot[i] >= 0 && !same_node(&g->nodes[slot[i]], n))
			i = (i + 1) & (cap - 1);
		if (slot[i] < 0) {
			slot[i] = k;
			continue;
		}
		const ir_node *first = &g->nodes[slot[i]];
		for (int o = 0; o < n->n_out; o++) {
			ir_replace_uses(g, n->out[o], first->out[o]);
			s->uses[first->out[o]] += s->uses[n->out[o]];
			s->uses[n->out[o]] = 0;
			g->values[n->out[o]].kind = IR_DEAD;
		}
		for (int j = 0; j < n->n_in; j++)
			s->uses[n->in[j]]--;
		s->dead[k] = 1;
		s->count[RW_CSE]++;
		s->changed = true;
	}
	free(slot);
	return AIR_OK;
}

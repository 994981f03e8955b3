/* simplify_fold.c - the simplify pass's rule 5: a node whose inputs are all
 * constants runs its reference kernel now and its outputs become constants. */
#include "passes/simplify_internal.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "ops/op.h"

enum { MAX_SKIP_LOG = 8 };
#define FOLD_GROWTH ((size_t)64 << 20)
#define FOLD_WORK 2.7e8 /* multiply-adds: about a second in the reference kernels at worst */

/* ---- 5. constant folding ----------------------------------------------- */

static size_t value_bytes(const ir_value *v)
{
	size_t n = air_dtype_size(v->dtype);
	for (int d = 0; d < v->rank; d++)
		n *= (size_t)v->dims[d];
	return n;
}

static void to_tensor(const ir_value *v, void *data, k_tensor *t)
{
	memset(t, 0, sizeof *t);
	t->data = data;
	t->dtype = v->dtype;
	t->rank = v->rank;
	t->numel = 1;
	for (int d = 0; d < v->rank; d++) {
		t->dims[d] = v->dims[d];
		t->numel *= v->dims[d];
	}
}

/* Can node n be evaluated now: every input constant, every size known? */
static bool foldable(const simp *s, const ir_node *n)
{
	const air_graph *g = s->g;
	const op_def *def = op_get(n->op);
	if (n->n_in > OP_MAX_IN || n->n_out > OP_MAX_OUT)
		return false;
	bool used = false;
	for (int o = 0; o < n->n_out; o++) {
		const ir_value *v = &g->values[n->out[o]];
		used |= s->uses[n->out[o]] > 0;
		for (int d = 0; d < v->rank; d++)
			if (!ir_dim_is_const(v->dims[d]))
				return false;
	}
	if (!used)
		return false;
	for (int i = 0; i < n->n_in; i++)
		if (g->values[n->in[i]].kind != IR_CONSTANT)
			return false;
	for (int a = 0; a < def->n_attrs; a++) {
		const ir_attr *at = &n->attrs[a];
		if (def->attrs[a].type == OPA_DIM && !ir_dim_is_const(at->i))
			return false;
		if (def->attrs[a].type == OPA_DIMS)
			for (int j = 0; j < at->n; j++)
				if (!ir_dim_is_const(at->ints[j]))
					return false;
	}
	return true;
}

/* Multiply-adds of the products (the reference kernels are plain loops:
 * a large product of constants would make compiling slow), else 0. */
static double product_work(const air_graph *g, const ir_node *n)
{
	const ir_value *out = &g->values[n->out[0]];
	double m = 1;
	for (int d = 0; d < out->rank; d++)
		m *= (double)out->dims[d];
	const ir_value *a = n->n_in > 1 ? &g->values[n->in[n->op == OP_addmm ? 1 : 0]] : NULL;
	switch (n->op) {
	case OP_mm:
		if (a && n->attrs[0].i != 0) /* a^T b: K is a's first dim */
			return m * (double)a->dims[0];
		return a && a->rank > 0 ? m * (double)a->dims[a->rank - 1] : m;
	case OP_bmm:
	case OP_addmm:
	case OP_linear:
	case OP_sdpa: return a && a->rank > 0 ? m * (double)a->dims[a->rank - 1] : m;
	case OP_conv2d: {
		const ir_value *w = &g->values[n->in[1]];
		double k = 1;
		for (int d = 1; d < w->rank; d++)
			k *= (double)w->dims[d];
		return m * k;
	}
	default: return 0;
	}
}

/* Runs node k's reference kernel on its constant inputs into outs[]. */
static air_status evaluate(simp *s, int k, void **outs)
{
	const air_graph *g = s->g;
	const ir_node *n = &g->nodes[k];
	const k_kernel *ref = &op_get(n->op)->ref;
	k_tensor tin[OP_MAX_IN], tout[OP_MAX_OUT];
	k_attr attrs[IR_MAX_ATTRS];
	bool in_const[OP_MAX_IN];
	for (int i = 0; i < n->n_in; i++) {
		const ir_value *v = &g->values[n->in[i]];
		to_tensor(v, (void *)g->consts[v->index].data, &tin[i]);
		in_const[i] = true;
	}
	for (int o = 0; o < n->n_out; o++)
		to_tensor(&g->values[n->out[o]], outs[o], &tout[o]);
	for (int a = 0; a < IR_MAX_ATTRS; a++)
		attrs[a] = (k_attr){n->attrs[a].i, n->attrs[a].f, n->attrs[a].ints, n->attrs[a].n};
	k_call call = {.attrs = attrs, .in = tin, .n_in = n->n_in, .out = tout, .n_out = n->n_out, .in_const = in_const};
	void *ws = NULL, *prepared = NULL;
	if (ref->workspace) {
		size_t bytes = ref->workspace(&call, 1);
		if (bytes && posix_memalign(&ws, 64, bytes) != 0)
			return air_error(AIR_OUT_OF_MEMORY, "simplify: no memory for a workspace of %zu bytes", bytes);
		call.workspace = ws;
	}
	air_status st = AIR_OK;
	if (ref->prepare)
		st = ref->prepare(&call, &prepared);
	call.prepared = prepared;
	if (st == AIR_OK)
		st = ref->run(&call);
	if (prepared && ref->release)
		ref->release(prepared);
	free(ws);
	return st;
}

air_status simp_rule_fold(simp *s, int k)
{
	air_graph *g = s->g;
	const ir_node *n = &g->nodes[k];
	if (!foldable(s, n))
		return AIR_OK;
	const op_def *def = op_get(n->op);
	size_t in_bytes = 0, out_bytes = 0;
	for (int i = 0; i < n->n_in; i++)
		in_bytes += value_bytes(&g->values[n->in[i]]);
	for (int o = 0; o < n->n_out; o++)
		out_bytes += value_bytes(&g->values[n->out[o]]);
	if (out_bytes > in_bytes + FOLD_GROWTH) {
		if (s->count[RW_FOLD_SKIPPED]++ < MAX_SKIP_LOG)
			pass_logf(s->log, "  not folded: node %d (%s), %zu MiB from %zu MiB of constants\n", k,
				  def->name, out_bytes >> 20, in_bytes >> 20);
		return AIR_OK;
	}
	double work = product_work(g, n);
	if (work > FOLD_WORK) {
		if (s->count[RW_FOLD_SKIPPED]++ < MAX_SKIP_LOG)
			pass_logf(s->log, "  not folded: node %d (%s), %.0f M multiply-adds\n", k, def->name, work / 1e6);
		return AIR_OK;
	}
	air_value old[OP_MAX_OUT];
	void *outs[OP_MAX_OUT] = {0};
	int n_out = n->n_out;
	for (int o = 0; o < n_out; o++)
		old[o] = n->out[o];
	const ir_constant *src = NULL;
	if (n->n_in == 1 && g->values[n->in[0]].kind == IR_CONSTANT)
		src = &g->consts[g->values[n->in[0]].index];
	if ((def->flags & OPF_ALIAS) && src && !src->owned) {
		/* a view of borrowed memory: borrow it again in the new shape */
		const ir_value *v = &g->values[old[0]];
		int64_t dims[AIR_MAX_RANK];
		for (int d = 0; d < v->rank; d++)
			dims[d] = v->dims[d];
		air_value c;
		AIR_TRY(air_graph_add_constant(g, v->dtype, v->rank, dims, src->data, AIR_CONSTANT_BORROW, &c));
		AIR_TRY(simp_grow_uses(s));
		simp_replace_output(s, k, old[0], c, RW_FOLD);
		return AIR_OK;
	}
	air_status st = AIR_OK;
	for (int o = 0; o < n_out && st == AIR_OK; o++) {
		size_t bytes = value_bytes(&g->values[old[o]]);
		if (posix_memalign(&outs[o], 64, bytes ? bytes : 1) != 0) {
			outs[o] = NULL;
			st = air_error(AIR_OUT_OF_MEMORY, "simplify: no memory to fold a %zu-byte constant", bytes);
		}
	}
	if (st == AIR_OK && evaluate(s, k, outs) != AIR_OK) {
		/* the same error would come at run time; leave it to the run */
		for (int o = 0; o < n_out; o++)
			free(outs[o]);
		if (s->count[RW_FOLD_FAILED]++ < MAX_SKIP_LOG)
			pass_logf(s->log, "  not folded: node %d (%s): %s\n", k, def->name, air_last_error());
		return AIR_OK;
	}
	for (int o = 0; o < n_out; o++) {
		if (st != AIR_OK) {
			free(outs[o]);
			continue;
		}
		const ir_value *v = &g->values[old[o]];
		int64_t dims[AIR_MAX_RANK];
		for (int d = 0; d < v->rank; d++)
			dims[d] = v->dims[d];
		air_value c;
		/* takes outs[o] over, even when it fails */
		st = ir_add_owned_constant(g, v->dtype, v->rank, dims, outs[o], &c);
		if (st == AIR_OK)
			st = simp_grow_uses(s);
		if (st == AIR_OK) {
			ir_replace_uses(g, old[o], c);
			s->uses[c] += s->uses[old[o]];
			s->uses[old[o]] = 0;
			g->values[old[o]].kind = IR_DEAD;
		}
	}
	AIR_TRY(st);
	s->dead[k] = 1;
	for (int i = 0; i < g->nodes[k].n_in; i++)
		s->uses[g->nodes[k].in[i]]--;
	s->folded_bytes += out_bytes;
	s->count[RW_FOLD]++;
	s->changed = true;
	return AIR_OK;
}

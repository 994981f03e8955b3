/* attention_views.c - sdpa reads its heads where the projections left them
 * and writes its output where the next projection reads it:
 *
 *   linear -> [slice] -> reshape -> permute(0, 2, 1, 3) -> sdpa q/k/v
 *   linear -> reshape -> permute(2, 0, 3, 1, 4) -> slice -> reshape -> sdpa q/k/v
 *   sdpa -> permute(0, 2, 1, 3) -> reshape -> linear
 *
 * (BERT's and GPT-2's head split, ViT's fused qkv, the head merge), and
 * LLaMA's repeat_kv (reshape, expand, reshape) in front of k and v. Each of
 * those permutes and slices copied its tensor; here each operand of sdpa
 * follows its chain of permute, slice and reshape nodes back as far as a
 * strided view of the chain's first tensor describes it, and reads that
 * tensor through the view (sdpa's q_view, k_view, v_view: kernels/attention/
 * attention_ref.h); the output takes the place of a permute(0, 2, 1, 3) that was
 * its only reader (out_bshd). Nodes nothing reads any more go.
 *
 * Only static sizes (a view is a list of numbers), rank-4 operands, and a
 * last dim of stride 1. A reshape must be a view of what it reshapes (as
 * torch's view() decides: it may split and merge dims only where their
 * elements are evenly spaced).
 * Requires: node order is execution order. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kernels/attention/attention_ref.h"
#include "ops/op.h"
#include "passes/pass.h"

/* A strided view of a dense tensor: element i[] is at offset + sum of
 * i[d] * st[d]. */
typedef struct strided {
	int rank;
	int64_t offset, dims[AIR_MAX_RANK], st[AIR_MAX_RANK];
} strided;

typedef struct av_state {
	air_graph *g;
	int *uses; /* per value: node inputs and graph outputs that read it */
	char *dead; /* per node */
} av_state;

static bool static_dims(const ir_value *v)
{
	for (int d = 0; d < v->rank; d++)
		if (!ir_dim_is_const(v->dims[d]))
			return false;
	return true;
}

static int producer(const av_state *s, air_value v)
{
	const ir_value *x = &s->g->values[v];
	return x->kind == IR_NODE_OUTPUT ? x->index : -1;
}

static bool is_view_op(int op)
{
	return op == OP_permute || op == OP_slice || op == OP_reshape;
}

static void dense(const ir_value *v, strided *out)
{
	out->rank = v->rank;
	out->offset = 0;
	int64_t s = 1;
	for (int d = v->rank - 1; d >= 0; d--) {
		out->dims[d] = v->dims[d];
		out->st[d] = s;
		s *= v->dims[d];
	}
}

/* The strides a reshape to `to` gives a view, if it is one: the view's dims
 * fall into runs that each span one block of evenly spaced elements
 * (adjacent dims with st[d] == st[d + 1] * dims[d + 1], dims of size 1
 * aside), and the new dims must cover those blocks run by run. */
static bool reshape_view(strided *v, const ir_value *to)
{
	int64_t numel = 1;
	for (int d = 0; d < v->rank; d++)
		numel *= v->dims[d];
	strided out = {to->rank, v->offset, {0}, {0}};
	for (int d = 0; d < to->rank; d++)
		out.dims[d] = to->dims[d];
	if (numel == 0) { /* nothing is read: any strides */
		dense(to, &out);
		out.offset = v->offset;
		*v = out;
		return true;
	}
	int nd = to->rank - 1; /* the next new dim to place, from the last */
	int d = v->rank - 1;
	while (d >= 0) {
		if (v->dims[d] == 1) { /* adds nothing to a block */
			d--;
			continue;
		}
		/* the block: dims first..d, evenly spaced from st[d] */
		int first = d;
		int64_t size = v->dims[d], base = v->st[d];
		while (first > 0 && (v->dims[first - 1] == 1 || v->st[first - 1] == base * size)) {
			size *= v->dims[first - 1];
			first--;
		}
		/* new dims, from the last, until they make up the block */
		int64_t have = 1;
		while (nd >= 0 && have < size) {
			out.st[nd] = base * have;
			have *= to->dims[nd];
			nd--;
		}
		if (have != size)
			return false;
		d = first - 1;
	}
	for (; nd >= 0; nd--) { /* leading dims of size 1 */
		if (to->dims[nd] != 1)
			return false;
		out.st[nd] = 0;
	}
	*v = out;
	return true;
}

/* v through node n (a permute, slice or reshape whose output is `to`). */
static bool apply(const ir_node *n, const ir_value *to, strided *v)
{
	if (n->op == OP_permute) {
		const ir_attr *perm = &n->attrs[0];
		if (perm->n != v->rank)
			return false;
		strided out = *v;
		for (int i = 0; i < v->rank; i++) {
			int64_t p = perm->ints[i] < 0 ? perm->ints[i] + v->rank : perm->ints[i];
			if (p < 0 || p >= v->rank)
				return false;
			out.dims[i] = v->dims[p];
			out.st[i] = v->st[p];
		}
		*v = out;
		return true;
	}
	if (n->op == OP_slice) {
		int64_t axis = n->attrs[0].i < 0 ? n->attrs[0].i + v->rank : n->attrs[0].i;
		int64_t start = n->attrs[1].i, step = n->attrs[3].i;
		if (axis < 0 || axis >= v->rank || !ir_dim_is_const(start) || step < 1)
			return false;
		v->offset += start * v->st[axis];
		v->st[axis] *= step;
		v->dims[axis] = to->dims[axis];
		return true;
	}
	return n->op == OP_reshape && reshape_view(v, to);
}

/* Is x LLaMA's repeat_kv of a rank-4 y [B, Hkv, S, E]: reshape to
 * [B, Hkv, 1, S, E], expand to [B, Hkv, rep, S, E], reshape to
 * [B, Hkv * rep, S, E]? sdpa reads y itself: query head h uses key head
 * h / rep, which is the head the copy put there. */
static bool repeat_kv(const av_state *s, air_value x, air_value *y)
{
	const air_graph *g = s->g;
	int r2 = producer(s, x);
	if (r2 < 0 || g->nodes[r2].op != OP_reshape)
		return false;
	int ex = producer(s, g->nodes[r2].in[0]);
	if (ex < 0 || g->nodes[ex].op != OP_expand)
		return false;
	int r1 = producer(s, g->nodes[ex].in[0]);
	if (r1 < 0 || g->nodes[r1].op != OP_reshape)
		return false;
	const ir_value *xv = &g->values[x], *e = &g->values[g->nodes[ex].out[0]];
	const ir_value *one = &g->values[g->nodes[r1].out[0]], *yv = &g->values[g->nodes[r1].in[0]];
	if (xv->rank != 4 || e->rank != 5 || one->rank != 5 || yv->rank != 4 || !static_dims(xv) || !static_dims(e) ||
	    !static_dims(one) || !static_dims(yv))
		return false;
	const int64_t want_one[5] = {yv->dims[0], yv->dims[1], 1, yv->dims[2], yv->dims[3]};
	const int64_t want_e[5] = {yv->dims[0], yv->dims[1], e->dims[2], yv->dims[2], yv->dims[3]};
	const int64_t want_x[4] = {yv->dims[0], yv->dims[1] * e->dims[2], yv->dims[2], yv->dims[3]};
	for (int d = 0; d < 5; d++)
		if (one->dims[d] != want_one[d] || e->dims[d] != want_e[d] || (d < 4 && xv->dims[d] != want_x[d]))
			return false;
	*y = g->nodes[r1].in[0];
	return true;
}

/* The longest chain of view ops that ends in operand x and whose start is
 * a tensor of static size: *root and the view of it that x is. Chains of
 * reshapes alone gain nothing (a reshape copies nothing); for k and v
 * (kv) a repeat_kv in front of sdpa is a copy that the view leaves out. */
static bool find_view(const av_state *s, air_value x, bool kv, air_value *root, strided *view)
{
	const air_graph *g = s->g;
	enum { MAX_CHAIN = 8 };
	int chain[MAX_CHAIN], n = 0;
	bool repeated = kv && repeat_kv(s, x, &x);
	air_value cur = x;
	while (n < MAX_CHAIN) {
		int k = producer(s, cur);
		if (k < 0 || !is_view_op(g->nodes[k].op) || g->nodes[k].n_in != 1 || !static_dims(&g->values[cur]))
			break;
		chain[n++] = k;
		cur = g->nodes[k].in[0];
	}
	/* from the farthest start back to the nearest, the first that works */
	for (int start = n; start >= 0; start--) {
		air_value r = start > 0 ? g->nodes[chain[start - 1]].in[0] : x;
		if (!static_dims(&g->values[r]))
			continue;
		strided v;
		dense(&g->values[r], &v);
		bool ok = true, copies = repeated;
		for (int i = start - 1; i >= 0 && ok; i--) {
			const ir_node *node = &g->nodes[chain[i]];
			ok = apply(node, &g->values[node->out[0]], &v);
			copies |= node->op != OP_reshape;
		}
		if (ok && copies && v.rank == 4 && v.st[3] == 1) {
			*root = r;
			*view = v;
			return true;
		}
	}
	return false;
}

static air_status set_ints(ir_node *n, int a, const int64_t *ints, int count)
{
	int64_t *p = malloc(sizeof *p * (size_t)count);
	if (!p)
		return air_error(AIR_OUT_OF_MEMORY, "attention_views: no memory");
	memcpy(p, ints, sizeof *p * (size_t)count);
	free(n->attrs[a].ints);
	n->attrs[a].ints = p;
	n->attrs[a].n = count;
	n->attrs[a].set = true;
	return AIR_OK;
}

/* The one node that reads v, or -1 (uses count graph outputs too: an
 * output has no reader here). */
static int only_reader(const av_state *s, air_value v, int after)
{
	if (s->uses[v] != 1)
		return -1;
	for (int k = after + 1; k < s->g->n_nodes; k++)
		for (int i = 0; i < s->g->nodes[k].n_in; i++)
			if (!s->dead[k] && s->g->nodes[k].in[i] == v)
				return k;
	return -1;
}

/* Nodes that nothing reads any more, back from v (every op is pure). */
static void kill_unused_back(av_state *s, air_value v)
{
	int k = producer(s, v);
	if (k < 0 || s->dead[k] || s->uses[v] != 0 || s->g->nodes[k].n_out != 1)
		return;
	ir_node *n = &s->g->nodes[k];
	s->dead[k] = 1;
	s->g->values[v].kind = IR_DEAD;
	for (int i = 0; i < n->n_in; i++) {
		s->uses[n->in[i]]--;
		kill_unused_back(s, n->in[i]);
	}
}

/* sdpa node k: its operands through views, its output in place of a
 * permute(0, 2, 1, 3). Counts what changed. */
static air_status rewrite(av_state *s, int k, int *viewed, int *merged)
{
	air_graph *g = s->g;
	ir_node *n = &g->nodes[k];
	for (int i = 0; i < 3; i++) {
		if (n->attrs[KSDPA_ATTR_Q_VIEW + i].n != 0)
			continue;
		air_value x = n->in[i], root;
		strided v;
		if (!find_view(s, x, i > 0, &root, &v))
			continue;
		int64_t ints[KSDPA_VIEW_INTS] = {v.offset, v.dims[0], v.dims[1], v.dims[2], v.dims[3],
						 v.st[0], v.st[1], v.st[2]};
		AIR_TRY(set_ints(n, KSDPA_ATTR_Q_VIEW + i, ints, KSDPA_VIEW_INTS));
		n->in[i] = root;
		s->uses[root]++;
		s->uses[x]--;
		kill_unused_back(s, x);
		(*viewed)++;
	}
	air_value o = n->out[0];
	const ir_value *ov = &g->values[o];
	int p = ov->rank == 4 && n->attrs[KSDPA_ATTR_OUT_BSHD].i == 0 ? only_reader(s, o, k) : -1;
	if (p >= 0 && g->nodes[p].op == OP_permute && g->nodes[p].n_out == 1) {
		const ir_attr *perm = &g->nodes[p].attrs[0];
		static const int64_t swap12[4] = {0, 2, 1, 3};
		bool is_swap = perm->n == 4;
		for (int d = 0; d < 4 && is_swap; d++)
			is_swap = (perm->ints[d] < 0 ? perm->ints[d] + 4 : perm->ints[d]) == swap12[d];
		if (is_swap) {
			air_value po = g->nodes[p].out[0];
			n->out[0] = po;
			g->values[po].index = k;
			g->values[o].kind = IR_DEAD;
			s->uses[o] = 0;
			s->dead[p] = 1;
			g->nodes[p].n_out = 0; /* its output now comes from the sdpa node */
			n->attrs[KSDPA_ATTR_OUT_BSHD].i = 1;
			n->attrs[KSDPA_ATTR_OUT_BSHD].set = true;
			(*merged)++;
		}
	}
	return AIR_OK;
}

air_status pass_attention_views(air_graph *g, const pass_options *po, pass_log *log)
{
	(void)po;
	av_state s = {g, ir_count_uses(g), calloc((size_t)g->n_nodes + 1, 1)};
	if (!s.uses || !s.dead) {
		free(s.uses);
		free(s.dead);
		return air_error(AIR_OUT_OF_MEMORY, "attention_views: no memory");
	}
	int viewed = 0, merged = 0, before = g->n_nodes;
	air_status st = AIR_OK;
	for (int k = 0; k < g->n_nodes && st == AIR_OK; k++)
		if (!s.dead[k] && g->nodes[k].op == OP_sdpa)
			st = rewrite(&s, k, &viewed, &merged);
	int gone = 0;
	for (int k = 0; k < g->n_nodes; k++)
		gone += s.dead[k];
	if (st == AIR_OK)
		pass_compact(g, s.dead);
	free(s.uses);
	free(s.dead);
	if (st == AIR_OK)
		pass_logf(log, "attention_views: %d sdpa operand(s) read through views, %d output(s) written [B, L, H, Ev]; "
			       "%d of %d nodes gone\n",
			  viewed, merged, gone, before);
	return st;
}

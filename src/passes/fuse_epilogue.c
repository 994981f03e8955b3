/* fuse_epilogue.c - conv2d / linear with what follows them fused into the
 * GEMM's epilogue (kernels/common/epilogue.h): C = act(A @ B + bias + residual).
 *
 * First the products are put in one form: mm(a, permute(w, [1, 0])) and
 * addmm(bias [N], a, permute(w, [1, 0])) (what nn.Linear lowers to) become
 * linear(a, w, bias), so the transposed weight is read in place instead of
 * copied on every call; with a constant B, linear gets a transposed copy.
 * A linear between two reshapes that only flatten and restore its leading
 * dims runs on the unflattened input (the reshapes were there for addmm).
 *
 * Then, for each conv2d / linear, the chain of single-use ops after it is
 * taken while it fits the epilogue, in this order:
 *   add of a per-output-channel bias (conv: a constant [C,1,1] or
 *     [1,C,1,1] etc.; linear: an [N] vector, or a constant broadcasting as
 *     one), at most one;
 *   add of a residual of exactly the output's shape, at most one (a bias add
 *     may still come after it);
 *   an activation: relu, clamp(0, 6), gelu, gelu_tanh, silu, hardswish,
 *     sigmoid, tanh.
 * The fused node takes the place of the chain's last op (so the residual is
 * defined before it). An intermediate with another use or that is a graph
 * output ends the chain. Requires: node order is execution order. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kernels/common/epilogue.h"
#include "ops/op.h"
#include "passes/pass.h"

#define NO_VALUE ((air_value)UINT32_MAX)

typedef struct fuse_state {
	air_graph *g;
	int *uses;  /* node inputs + graph outputs per value */
	int *user;  /* a node reading the value (the only one when uses == 1) */
	int nv;     /* values when counted (values added later have no entry) */
	char *dead; /* per node */
	int canon, lifted, fused, acts, residuals, biases;
} fuse_state;

static air_status oom(void)
{
	return air_error(AIR_OUT_OF_MEMORY, "fuse_epilogue: no memory");
}

static air_status count(fuse_state *s)
{
	air_graph *g = s->g;
	free(s->uses);
	free(s->user);
	free(s->dead);
	s->uses = ir_count_uses(g);
	s->user = malloc(sizeof *s->user * ((size_t)g->n_values + 1));
	s->dead = calloc((size_t)g->n_nodes + 1, 1);
	if (!s->uses || !s->user || !s->dead)
		return oom();
	s->nv = g->n_values;
	for (int v = 0; v < g->n_values; v++)
		s->user[v] = -1;
	for (int k = 0; k < g->n_nodes; k++)
		for (int i = 0; i < g->nodes[k].n_in; i++)
			s->user[g->nodes[k].in[i]] = k;
	return AIR_OK;
}

/* The node that reads v, if v has exactly that one use and is not a graph
 * output (ir_count_uses counts outputs as uses); -1 otherwise. */
static int only_user(const fuse_state *s, air_value v)
{
	return v < (air_value)s->nv && s->uses[v] == 1 ? s->user[v] : -1;
}

/* The producing node of v, or -1. */
static int producer(const air_graph *g, air_value v)
{
	return g->values[v].kind == IR_NODE_OUTPUT ? g->values[v].index : -1;
}

static bool same_shape(const air_graph *g, const ir_value *a, const ir_value *b)
{
	if (a->dtype != b->dtype || a->rank != b->rank)
		return false;
	for (int d = 0; d < a->rank; d++)
		if (!ir_dim_equal(g, a->dims[d], b->dims[d]))
			return false;
	return true;
}

static air_status set_inputs(ir_node *n, const air_value *in, int n_in)
{
	if (n_in > n->n_in) {
		air_value *p = realloc(n->in, sizeof *p * (size_t)n_in);
		if (!p)
			return oom();
		n->in = p;
	}
	memcpy(n->in, in, sizeof *in * (size_t)n_in);
	n->n_in = n_in;
	return AIR_OK;
}

/* ---- products in one form ------------------------------------------------ */

/* A [K, N] constant as an owned [N, K] copy. */
static air_status transposed_constant(air_graph *g, air_value b, air_value *out)
{
	const ir_value *v = &g->values[b];
	int64_t K = v->dims[0], N = v->dims[1];
	size_t es = air_dtype_size(v->dtype);
	air_dtype dt = v->dtype;
	const char *src = ir_constant_data(g, b);
	char *dst = malloc(es * (size_t)(K * N > 0 ? K * N : 1));
	if (!dst)
		return oom();
	for (int64_t k = 0; k < K; k++)
		for (int64_t j = 0; j < N; j++)
			memcpy(dst + (size_t)(j * K + k) * es, src + (size_t)(k * N + j) * es, es);
	int64_t dims[2] = {N, K};
	return ir_add_owned_constant(g, dt, 2, dims, dst, out);
}

/* mm / addmm -> linear where B is a transposed weight or a constant. */
static air_status to_linear(fuse_state *s, int k)
{
	air_graph *g = s->g;
	ir_node *n = &g->nodes[k];
	bool addmm = n->op == OP_addmm;
	air_value a = n->in[addmm], b = n->in[addmm + 1], bias = addmm ? n->in[0] : NO_VALUE;
	const ir_value *bv = &g->values[b], *out = &g->values[n->out[0]];
	if (out->dtype != AIR_F32 && out->dtype != AIR_F64)
		return AIR_OK;
	if (!addmm && n->attrs[0].i != 0)
		return AIR_OK; /* mm(a^T, b): linear has no transposed input */
	if (addmm) {
		/* only a plain [N] bias: linear has no alpha, beta or 2-d bias */
		const ir_value *bi = &g->values[bias];
		if (n->attrs[0].f != 1.0 || n->attrs[1].f != 1.0 || bi->rank != 1 ||
		    !ir_dim_equal(g, bi->dims[0], out->dims[1]))
			return AIR_OK;
	}
	int q = producer(g, b);
	air_value w;
	if (q >= 0 && g->nodes[q].op == OP_permute && only_user(s, b) == k && g->nodes[q].attrs[0].n == 2 &&
	    g->nodes[q].attrs[0].ints[0] == 1 && g->nodes[q].attrs[0].ints[1] == 0) {
		w = g->nodes[q].in[0];
		s->dead[q] = 1;
		g->values[b].kind = IR_DEAD;
	} else if (bv->kind == IR_CONSTANT && bv->dims[0] >= 0 && bv->dims[1] >= 0) {
		AIR_TRY(transposed_constant(g, b, &w));
		n = &g->nodes[k];
		if (s->uses[b] > 0)
			s->uses[b]--;
	} else {
		return AIR_OK;
	}
	air_value in[3] = {a, w, bias};
	AIR_TRY(set_inputs(n, in, addmm ? 3 : 2));
	pass_set_op(n, OP_linear);
	n->attrs[0].i = addmm;
	s->canon++;
	return AIR_OK;
}

/* reshape(x [..., K] -> [M, K]) -> linear -> reshape(-> [..., N]) becomes
 * linear(x) -> [..., N]: the reshapes only flattened the leading dims. */
static void lift_linear(fuse_state *s, int k)
{
	air_graph *g = s->g;
	ir_node *n = &g->nodes[k];
	if (n->attrs[2].i != 0)
		return; /* a residual has the flattened shape */
	int ri = producer(g, n->in[0]), ro = only_user(s, n->out[0]);
	if (ri < 0 || ro < 0 || g->nodes[ri].op != OP_reshape || g->nodes[ro].op != OP_reshape || s->dead[ro])
		return;
	air_value src = g->nodes[ri].in[0], y = g->nodes[ro].out[0];
	const ir_value *x = &g->values[src], *yv = &g->values[y], *lin = &g->values[n->out[0]];
	if (x->rank < 1 || x->rank != yv->rank || lin->rank != 2)
		return;
	if (!ir_dim_equal(g, x->dims[x->rank - 1], g->values[n->in[0]].dims[1]) ||
	    !ir_dim_equal(g, yv->dims[yv->rank - 1], lin->dims[1]))
		return;
	for (int d = 0; d < x->rank - 1; d++)
		if (!ir_dim_equal(g, x->dims[d], yv->dims[d]))
			return;
	air_value old = n->out[0];
	s->uses[n->in[0]]--;
	n->in[0] = src;
	s->uses[src]++;
	s->user[src] = k;
	n->out[0] = y;
	g->values[y].index = k;
	g->values[old].kind = IR_DEAD;
	s->dead[ro] = 1;
	if (s->uses[g->nodes[ri].out[0]] == 0) {
		/* the input reshape fed only this linear */
		s->dead[ri] = 1;
		g->values[g->nodes[ri].out[0]].kind = IR_DEAD;
		s->uses[src]--;
	}
	s->lifted++;
}

/* ---- the epilogue chain -------------------------------------------------- */

static int act_of(const air_graph *g, const ir_node *n)
{
	switch (n->op) {
	case OP_relu: return K_ACT_RELU;
	case OP_gelu: return K_ACT_GELU;
	case OP_gelu_tanh: return K_ACT_GELU_TANH;
	case OP_silu: return K_ACT_SILU;
	case OP_hardswish: return K_ACT_HARDSWISH;
	case OP_sigmoid: return K_ACT_SIGMOID;
	case OP_tanh: return K_ACT_TANH;
	case OP_clamp: {
		/* clamp(0, 6) is relu6, clamp(min=0) is relu (both keep NaN) */
		bool has_min = n->attrs[2].i != 0, has_max = n->attrs[3].i != 0;
		if (has_min && n->attrs[0].f == 0.0 && has_max && n->attrs[1].f == 6.0)
			return K_ACT_RELU6;
		if (has_min && n->attrs[0].f == 0.0 && !has_max)
			return K_ACT_RELU;
		return -1;
	}
	default: return -1;
	}
}

static int bias_attr(int op)
{
	return op == OP_conv2d ? 4 : 0;
}

/* Has product n (no residual yet) a bias input? */
static bool has_bias_of(const ir_node *n)
{
	int64_t b = n->attrs[bias_attr(n->op)].i;
	return b < 0 ? n->n_in > 2 : b != 0;
}

/* For an add of the product's output y and c: a bias, if c varies only
 * along the output channel (conv: axis 1; linear: the last), does not
 * broadcast y larger, and can be given as a 1-d [C] input. Returns the
 * value to use as the bias (maybe a new constant, summed with a constant
 * bias the product already has), or NO_VALUE. */
static air_status as_bias(fuse_state *s, int p, air_value c, air_value *bias_out)
{
	air_graph *g = s->g;
	ir_node *n = &g->nodes[p];
	*bias_out = NO_VALUE;
	const ir_value *cv = &g->values[c], *y = &g->values[n->out[0]];
	air_dim C = g->values[n->in[1]].dims[0];
	if (cv->dtype != y->dtype || cv->rank > y->rank)
		return AIR_OK;
	int axis = n->op == OP_conv2d ? 1 : y->rank - 1;
	bool varies = false;
	for (int i = 0; i < cv->rank; i++) {
		int d = y->rank - cv->rank + i;
		if (cv->dims[i] == 1)
			continue;
		if (d != axis || !ir_dim_equal(g, cv->dims[i], C))
			return AIR_OK;
		varies = true;
	}
	bool has_bias = has_bias_of(n);
	if (cv->kind != IR_CONSTANT) {
		/* a tensor: usable as it is only as linear's [C] input, with no
		 * bias yet (conv's [C] would broadcast along W, not C) */
		if (!has_bias && cv->rank == 1 && ir_dim_equal(g, cv->dims[0], C) && n->op == OP_linear)
			*bias_out = c;
		return AIR_OK;
	}
	if (C < 0)
		return AIR_OK;
	const void *old = NULL;
	if (has_bias) {
		if (g->values[n->in[2]].kind != IR_CONSTANT)
			return AIR_OK;
		old = ir_constant_data(g, n->in[2]);
	}
	air_dtype dt = cv->dtype;
	size_t es = air_dtype_size(dt);
	void *b = malloc(es * (size_t)(C ? C : 1));
	if (!b)
		return oom();
	const void *cd = ir_constant_data(g, c);
	for (int64_t i = 0; i < C; i++) {
		int64_t at = varies ? i : 0;
		if (dt == AIR_F32)
			((float *)b)[i] = ((const float *)cd)[at] + (old ? ((const float *)old)[i] : 0.0f);
		else
			((double *)b)[i] = ((const double *)cd)[at] + (old ? ((const double *)old)[i] : 0.0);
	}
	int64_t dims[1] = {C};
	return ir_add_owned_constant(g, dt, 1, dims, b, bias_out);
}

enum { MAX_CHAIN = 4 };

/* A conv2d / linear with nothing fused yet, f32 or f64. */
static bool fresh_product(const air_graph *g, const ir_node *n)
{
	if (n->op != OP_conv2d && n->op != OP_linear)
		return false;
	int a = bias_attr(n->op);
	air_dtype dt = g->values[n->out[0]].dtype;
	return n->attrs[a + 1].i == 0 && n->attrs[a + 2].i == 0 && (dt == AIR_F32 || dt == AIR_F64);
}

/* Takes the chain after product p (see the top of the file) and rewrites
 * it as one node in the slot of its last op. */
static air_status fuse_chain(fuse_state *s, int p, pass_log *log)
{
	air_graph *g = s->g;
	air_value y = g->nodes[p].out[0];
	int members[MAX_CHAIN], len = 0, act = K_ACT_NONE;
	air_value bias = NO_VALUE, residual = NO_VALUE;
	while (len < MAX_CHAIN && act == K_ACT_NONE) {
		int u = only_user(s, y);
		if (u < 0 || s->dead[u])
			break;
		const ir_node *un = &g->nodes[u];
		const ir_value *yv = &g->values[y], *uo = &g->values[un->out[0]];
		if (un->n_out != 1 || !same_shape(g, uo, yv))
			break; /* an op that changes the type or broadcasts y larger */
		int a = act_of(g, un);
		if (a >= 0) {
			act = a;
		} else if (un->op == OP_add && un->n_in == 2) {
			air_value other = un->in[0] == y ? un->in[1] : un->in[0];
			if (other == y)
				break;
			bool full = same_shape(g, &g->values[other], yv);
			air_value b = NO_VALUE;
			if (bias == NO_VALUE && !full)
				AIR_TRY(as_bias(s, p, other, &b)); /* may move g->values */
			if (b != NO_VALUE)
				bias = b;
			else if (residual == NO_VALUE && full)
				residual = other;
			else
				break;
		} else {
			break;
		}
		members[len++] = u;
		y = g->nodes[u].out[0];
	}
	if (len == 0)
		return AIR_OK;
	ir_node *n = &g->nodes[p];
	int ba = bias_attr(n->op);
	air_value in[4];
	int n_in = 0;
	in[n_in++] = n->in[0];
	in[n_in++] = n->in[1];
	if (bias != NO_VALUE)
		in[n_in++] = bias;
	else if (has_bias_of(n))
		in[n_in++] = n->in[2];
	if (residual != NO_VALUE)
		in[n_in++] = residual;
	pass_logf(log, "  %s (node %d)", op_get(n->op)->name, p);
	for (int m = 0; m < len; m++)
		pass_logf(log, " + %s", op_get(g->nodes[members[m]].op)->name);
	pass_logf(log, "\n");
	AIR_TRY(set_inputs(n, in, n_in));
	n->attrs[ba].i = n_in - (residual != NO_VALUE) > 2;
	n->attrs[ba].set = true;
	n->attrs[ba + 1].i = act;
	n->attrs[ba + 1].set = true;
	n->attrs[ba + 2].i = residual != NO_VALUE;
	n->attrs[ba + 2].set = true;
	/* the product now defines the chain's last value; the others die */
	g->values[n->out[0]].kind = IR_DEAD;
	for (int m = 0; m < len - 1; m++)
		g->values[g->nodes[members[m]].out[0]].kind = IR_DEAD;
	n->out[0] = y;
	int last = members[len - 1];
	ir_node tmp = g->nodes[last];
	g->nodes[last] = g->nodes[p];
	g->nodes[p] = tmp;
	g->values[y].index = last;
	s->dead[p] = 1;
	for (int m = 0; m < len - 1; m++)
		s->dead[members[m]] = 1;
	for (int i = 0; i < n_in; i++)
		if (in[i] < (air_value)s->nv)
			s->user[in[i]] = last;
	s->fused++;
	s->acts += act != K_ACT_NONE;
	s->residuals += residual != NO_VALUE;
	s->biases += bias != NO_VALUE;
	return AIR_OK;
}

/* Compacts away the dead nodes and recounts uses. */
static air_status settle(fuse_state *s)
{
	pass_compact(s->g, s->dead);
	return count(s);
}

air_status pass_fuse_epilogue(air_graph *g, const pass_options *po, pass_log *log)
{
	fuse_state s = {g, NULL, NULL, 0, NULL, 0, 0, 0, 0, 0, 0};
	air_status st = count(&s);
	for (int k = 0; k < g->n_nodes && st == AIR_OK; k++)
		if (!s.dead[k] && (g->nodes[k].op == OP_mm || g->nodes[k].op == OP_addmm))
			st = to_linear(&s, k);
	if (st == AIR_OK)
		st = settle(&s);
	for (int k = 0; k < g->n_nodes && st == AIR_OK; k++)
		if (!s.dead[k] && g->nodes[k].op == OP_linear)
			lift_linear(&s, k);
	if (st == AIR_OK)
		st = settle(&s);
	for (int k = 0; k < g->n_nodes && st == AIR_OK; k++)
		if (!s.dead[k] && fresh_product(g, &g->nodes[k]))
			st = fuse_chain(&s, k, log);
	if (st == AIR_OK) {
		pass_compact(g, s.dead);
		pass_logf(log,
			  "fuse_epilogue: %d mm/addmm made linear, %d linear(s) lifted over reshapes; %d product(s) "
			  "took %d bias(es), %d residual(s), %d activation(s)\n",
			  s.canon, s.lifted, s.fused, s.biases, s.residuals, s.acts);
	}
	free(s.uses), free(s.user), free(s.dead);
	return st;
}

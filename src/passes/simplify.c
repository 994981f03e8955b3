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
 * Requires: node order is execution order. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "ops/op.h"
#include "passes/pass.h"

enum { MAX_ROUNDS = 16, MAX_SKIP_LOG = 8 };
#define FOLD_GROWTH ((size_t)64 << 20)
#define FOLD_WORK 2.7e8 /* multiply-adds: about a second in the reference kernels at worst */

typedef enum rewrite {
	RW_ADDMM_LINEAR,
	RW_MM_LINEAR,
	RW_MM_TRANS_A,
	RW_LINEAR_RANK,
	RW_RESHAPE_RESHAPE,
	RW_PERMUTE_PERMUTE,
	RW_SINK_RESHAPE,
	RW_NOOP_RESHAPE,
	RW_NOOP_PERMUTE,
	RW_NOOP_EXPAND,
	RW_NOOP_SLICE,
	RW_NOOP_COPY,
	RW_NOOP_CAST,
	RW_NOOP_ARITH,
	RW_CSE,
	RW_FOLD,
	RW_FOLD_SKIPPED,
	RW_FOLD_FAILED,
	RW_DEAD,
	RW_COUNT
} rewrite;

static const char *const RW_NAME[RW_COUNT] = {
	"addmm->linear",      "mm->linear",         "mm(a^T, b)",         "linear rank",        "reshape(reshape)",
	"permute(permute)",   "reshape sunk below unary op", "no-op reshape",      "no-op permute",      "no-op expand",
	"no-op slice",        "copy",               "no-op cast",         "x*1 x/1 x+-0 x-0",
	"repeated",           "folded",             "fold skipped (size/work)", "fold failed",       "dead",
};

typedef struct simp {
	air_graph *g;
	pass_log *log;
	int *uses;  /* per value; grown as constants are added */
	int n_uses; /* entries of uses */
	char *dead; /* per node of the current round */
	int count[RW_COUNT];
	size_t folded_bytes;
	bool changed;
} simp;

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

static air_status grow_uses(simp *s)
{
	if (s->n_uses >= s->g->n_values)
		return AIR_OK;
	int *p = realloc(s->uses, sizeof *p * ((size_t)s->g->n_values + 1));
	if (!p)
		return air_error(AIR_OUT_OF_MEMORY, "simplify: no memory");
	for (int v = s->n_uses; v <= s->g->n_values; v++)
		p[v] = 0;
	s->uses = p;
	s->n_uses = s->g->n_values;
	return AIR_OK;
}

/* Node k's output old is equal to new: every use moves, node k dies. */
static void replace_output(simp *s, int k, air_value old_value, air_value new_value, rewrite why)
{
	ir_replace_uses(s->g, old_value, new_value);
	s->uses[new_value] += s->uses[old_value];
	s->uses[old_value] = 0;
	s->g->values[old_value].kind = IR_DEAD;
	s->dead[k] = 1;
	for (int i = 0; i < s->g->nodes[k].n_in; i++)
		s->uses[s->g->nodes[k].in[i]]--;
	s->count[why]++;
	s->changed = true;
}

static void set_input(simp *s, ir_node *n, int i, air_value v)
{
	s->uses[n->in[i]]--;
	s->uses[v]++;
	n->in[i] = v;
}

/* The live node producing v, or NULL. */
static ir_node *producer(simp *s, air_value v)
{
	const ir_value *x = &s->g->values[v];
	if (x->kind != IR_NODE_OUTPUT || s->dead[x->index])
		return NULL;
	return &s->g->nodes[x->index];
}

static void set_int_attr(ir_node *n, const char *name, int64_t value)
{
	int a = pass_attr_index(n->op, name);
	if (a >= 0) {
		n->attrs[a].set = true;
		n->attrs[a].i = value;
	}
}

static bool same_dims(const air_graph *g, const ir_value *a, const ir_value *b)
{
	if (a->rank != b->rank)
		return false;
	for (int d = 0; d < a->rank; d++)
		if (!ir_dim_equal(g, a->dims[d], b->dims[d]))
			return false;
	return true;
}

static bool same_type(const air_graph *g, const ir_value *a, const ir_value *b)
{
	return a->dtype == b->dtype && same_dims(g, a, b);
}

/* ---- 1. GEMM operands -------------------------------------------------- */

/* v = permute(w, [1, 0]) of a rank-2 w: returns w, else -1. */
static int64_t transposed_of(simp *s, air_value v)
{
	const ir_node *p = producer(s, v);
	if (!p || p->op != OP_permute || p->attrs[0].n != 2)
		return -1;
	int64_t a = p->attrs[0].ints[0], b = p->attrs[0].ints[1];
	if ((a == 1 || a == -1) && (b == 0 || b == -2))
		return p->in[0];
	return -1;
}

static void rule_gemm(simp *s, int k)
{
	ir_node *n = &s->g->nodes[k];
	if (n->op == OP_addmm) {
		/* addmm(bias, x, w^T) with alpha = beta = 1 and bias [N] */
		int64_t w = transposed_of(s, n->in[2]);
		if (w < 0 || n->attrs[0].f != 1.0 || n->attrs[1].f != 1.0)
			return;
		const ir_value *bias = &s->g->values[n->in[0]], *wv = &s->g->values[w];
		if (bias->rank != 1 || !ir_dim_equal(s->g, bias->dims[0], wv->dims[0]))
			return;
		air_value b = n->in[0], x = n->in[1];
		set_input(s, n, 2, (air_value)w); /* uses stay right while moving */
		n->in[0] = x;
		n->in[1] = (air_value)w;
		n->in[2] = b;
		pass_set_op(n, OP_linear);
		set_int_attr(n, "has_bias", 1);
		s->count[RW_ADDMM_LINEAR]++;
		s->changed = true;
	} else if (n->op == OP_mm && n->attrs[0].i == 0) {
		int64_t w = transposed_of(s, n->in[1]);
		if (w >= 0) {
			set_input(s, n, 1, (air_value)w);
			pass_set_op(n, OP_linear);
			set_int_attr(n, "has_bias", 0);
			s->count[RW_MM_LINEAR]++;
			s->changed = true;
			return;
		}
		/* mm(a^T, b): the GEMM reads a through strides as it packs
		 * it, where the permute was a copy of a (a training step's
		 * weight gradients, dY^T x: ViT-Tiny's [394, 576] took 132 us
		 * to transpose for a 250 us product) */
		int64_t a = transposed_of(s, n->in[0]);
		if (a < 0)
			return;
		set_input(s, n, 0, (air_value)a);
		set_int_attr(n, "trans_a", 1);
		s->count[RW_MM_TRANS_A]++;
		s->changed = true;
	}
}

/* reshape(linear(reshape(y) -> [M, K]) -> [M, N]) -> [D..., N], the
 * reshapes only merging and splitting leading dims: linear runs on
 * [D..., K] and defines the outer reshape's value itself. Node k is the
 * outer reshape. */
static air_status rule_linear_rank(simp *s, int k)
{
	air_graph *g = s->g;
	ir_node *r2 = &g->nodes[k];
	if (r2->op != OP_reshape)
		return AIR_OK;
	air_value v = r2->in[0];
	ir_node *lin = producer(s, v);
	if (!lin || lin->op != OP_linear || s->uses[v] != 1)
		return AIR_OK;
	int res = pass_attr_index(OP_linear, "has_residual");
	if (res >= 0 && lin->attrs[res].i != 0)
		return AIR_OK; /* the residual has the output's shape */
	air_value x = lin->in[0];
	const ir_value *xv = &g->values[x], *vv = &g->values[v], *out = &g->values[r2->out[0]];
	int r = out->rank;
	if (xv->rank != 2 || r < 2 || !ir_dim_equal(g, out->dims[r - 1], vv->dims[vv->rank - 1]))
		return AIR_OK;
	ir_node *r1 = producer(s, x);
	if (!r1 || r1->op != OP_reshape)
		return AIR_OK;
	air_value y = r1->in[0];
	const ir_value *yv = &g->values[y];
	bool direct = yv->rank == r && ir_dim_equal(g, yv->dims[r - 1], xv->dims[1]);
	for (int d = 0; direct && d < r - 1; d++)
		direct = ir_dim_equal(g, yv->dims[d], out->dims[d]);
	if (direct) {
		set_input(s, lin, 0, y);
	} else {
		/* reshape y to [D..., K] instead (r1 feeds only linear) */
		int64_t m = 1;
		bool known = s->uses[x] == 1 && ir_dim_is_const(xv->dims[0]) && ir_dim_is_const(xv->dims[1]);
		for (int d = 0; known && d < r - 1; d++) {
			known = ir_dim_is_const(out->dims[d]);
			m *= known ? out->dims[d] : 1;
		}
		if (!known || m != xv->dims[0])
			return AIR_OK;
		int64_t *shape = malloc(sizeof *shape * (size_t)r);
		if (!shape)
			return air_error(AIR_OUT_OF_MEMORY, "simplify: no memory");
		for (int d = 0; d < r - 1; d++)
			shape[d] = out->dims[d];
		shape[r - 1] = xv->dims[1];
		free(r1->attrs[0].ints);
		r1->attrs[0].ints = shape;
		r1->attrs[0].n = r;
		ir_value *nx = &g->values[x];
		nx->rank = r;
		for (int d = 0; d < r; d++)
			nx->dims[d] = shape[d];
	}
	/* linear now defines the reshape's value */
	air_value o = r2->out[0];
	g->values[o].index = g->values[v].index;
	lin->out[0] = o;
	g->values[v].kind = IR_DEAD;
	s->uses[v] = 0;
	s->dead[k] = 1;
	s->count[RW_LINEAR_RANK]++;
	s->changed = true;
	return AIR_OK;
}

/* ---- 2. compositions --------------------------------------------------- */

static void rule_compose(simp *s, int k)
{
	ir_node *n = &s->g->nodes[k];
	if (n->op != OP_reshape && n->op != OP_permute)
		return;
	ir_node *p = producer(s, n->in[0]);
	if (!p || p->op != n->op)
		return;
	if (n->op == OP_reshape) {
		set_input(s, n, 0, p->in[0]);
		s->count[RW_RESHAPE_RESHAPE]++;
		s->changed = true;
	} else if (n->op == OP_permute) {
		/* out2[j] = out1[p2[j]] = x[p1[p2[j]]] */
		int r = n->attrs[0].n;
		if (p->attrs[0].n != r)
			return;
		int64_t q[AIR_MAX_RANK];
		for (int j = 0; j < r; j++) {
			int64_t a = n->attrs[0].ints[j] < 0 ? n->attrs[0].ints[j] + r : n->attrs[0].ints[j];
			int64_t b = p->attrs[0].ints[a];
			q[j] = b < 0 ? b + r : b;
		}
		for (int j = 0; j < r; j++)
			n->attrs[0].ints[j] = q[j];
		set_input(s, n, 0, p->in[0]);
		s->count[RW_PERMUTE_PERMUTE]++;
		s->changed = true;
	}
}

/* f(reshape(x)) -> reshape(f(x)) for a unary elementwise f (not cast) when
 * the reshape feeds nothing else: the two nodes trade ops and attributes in
 * place (order stays valid) and the middle value takes x's shape. A 1-d
 * convolution lowers to reshape, conv2d, reshape; with the reshape sunk
 * below its relu, the next one's reshape cancels it (reshape(reshape), then
 * a no-op) and fuse_epilogue puts the relu into the conv. */
static void rule_sink_reshape(simp *s, int k)
{
	ir_node *n = &s->g->nodes[k];
	const op_def *def = op_get(n->op);
	if (!(def->flags & OPF_ELEMENTWISE) || n->n_in != 1 || n->n_out != 1 || n->op == OP_cast)
		return;
	air_value v = n->in[0];
	ir_node *r = producer(s, v);
	if (!r || r->op != OP_reshape || s->uses[v] != 1)
		return;
	ir_value *mid = &s->g->values[v];
	const ir_value *x = &s->g->values[r->in[0]], *y = &s->g->values[n->out[0]];
	if (x->dtype != mid->dtype || y->dtype != mid->dtype)
		return;
	int op = r->op;
	r->op = n->op;
	n->op = op;
	ir_attr tmp[IR_MAX_ATTRS];
	memcpy(tmp, r->attrs, sizeof tmp);
	memcpy(r->attrs, n->attrs, sizeof tmp);
	memcpy(n->attrs, tmp, sizeof tmp);
	mid->rank = x->rank;
	memcpy(mid->dims, x->dims, sizeof mid->dims);
	s->count[RW_SINK_RESHAPE]++;
	s->changed = true;
}

/* ---- 3. no-ops --------------------------------------------------------- */

/* A one-element constant's value, for dtypes where reading it is exact. */
static bool scalar_value(const air_graph *g, air_value v, double *out)
{
	const ir_value *x = &g->values[v];
	if (x->kind != IR_CONSTANT)
		return false;
	for (int d = 0; d < x->rank; d++)
		if (x->dims[d] != 1)
			return false;
	const void *p = g->consts[x->index].data;
	switch (x->dtype) {
	case AIR_F32: { float f; memcpy(&f, p, 4); *out = f; return true; }
	case AIR_F64: memcpy(out, p, 8); return true;
	case AIR_I64: { int64_t i; memcpy(&i, p, 8); *out = (double)i; return i == (int64_t)*out; }
	case AIR_I32: { int32_t i; memcpy(&i, p, 4); *out = i; return true; }
	case AIR_I16: { int16_t i; memcpy(&i, p, 2); *out = i; return true; }
	case AIR_I8: { int8_t i; memcpy(&i, p, 1); *out = i; return true; }
	case AIR_U8: { uint8_t i; memcpy(&i, p, 1); *out = i; return true; }
	default: return false;
	}
}

static bool is_float(air_dtype d)
{
	return d == AIR_F32 || d == AIR_F64;
}

/* Is op(x, c) (c the operand at position ci) always exactly x? x * 1 and
 * x / 1 are exact for every x (NaN stays NaN, -0 stays -0). x + 0 is not:
 * -0 + +0 = +0. But x + (-0) is exact (+0 + -0 = +0, -0 + -0 = -0), and so
 * is x - (+0). For integers, 0 is 0. */
static bool identity_operand(const air_graph *g, int op, int ci, air_dtype dt, air_value c)
{
	double v;
	if (!scalar_value(g, c, &v) || g->values[c].dtype != dt)
		return false;
	bool fl = is_float(dt);
	switch (op) {
	case OP_mul: return v == 1.0;
	case OP_div: return ci == 1 && v == 1.0;
	case OP_add: return v == 0.0 && (!fl || __builtin_signbit(v));
	case OP_sub: return ci == 1 && v == 0.0 && (!fl || !__builtin_signbit(v));
	default: return false;
	}
}

/* The input equal to node n's output, or -1. */
static int64_t noop_input(simp *s, const ir_node *n, rewrite *why)
{
	const air_graph *g = s->g;
	if (n->n_out != 1 || n->n_in < 1)
		return -1;
	const ir_value *out = &g->values[n->out[0]], *in = &g->values[n->in[0]];
	switch (n->op) {
	case OP_reshape:
		*why = RW_NOOP_RESHAPE;
		return same_dims(g, in, out) ? (int64_t)n->in[0] : -1;
	case OP_copy:
		*why = RW_NOOP_COPY;
		return n->in[0];
	case OP_cast:
		*why = RW_NOOP_CAST;
		return in->dtype == out->dtype ? (int64_t)n->in[0] : -1;
	case OP_expand:
		*why = RW_NOOP_EXPAND;
		return same_type(g, in, out) ? (int64_t)n->in[0] : -1;
	case OP_slice:
		*why = RW_NOOP_SLICE;
		/* start 0 and nothing dropped: every element, in order */
		return n->attrs[1].i == 0 && same_type(g, in, out) ? (int64_t)n->in[0] : -1;
	case OP_permute:
		*why = RW_NOOP_PERMUTE;
		for (int j = 0; j < n->attrs[0].n; j++) {
			int64_t p = n->attrs[0].ints[j];
			if (p != j && p + n->attrs[0].n != j)
				return -1;
		}
		return n->in[0];
	case OP_mul:
	case OP_div:
	case OP_add:
	case OP_sub:
		*why = RW_NOOP_ARITH;
		for (int ci = 0; ci < 2; ci++) {
			air_value x = n->in[1 - ci];
			if (same_type(g, &g->values[x], out) && identity_operand(g, n->op, ci, out->dtype, n->in[ci]))
				return x;
		}
		return -1;
	default:
		return -1;
	}
}

static void rule_noop(simp *s, int k)
{
	rewrite why = RW_COUNT;
	int64_t x = noop_input(s, &s->g->nodes[k], &why);
	if (x >= 0)
		replace_output(s, k, s->g->nodes[k].out[0], (air_value)x, why);
}

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
static air_status rule_repeats(simp *s)
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

static air_status rule_fold(simp *s, int k)
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
		AIR_TRY(grow_uses(s));
		replace_output(s, k, old[0], c, RW_FOLD);
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
			st = grow_uses(s);
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
		rule_gemm(s, k);
	for (int k = 0; k < g->n_nodes; k++) {
		if (s->dead[k])
			continue;
		AIR_TRY(rule_linear_rank(s, k));
		if (s->dead[k])
			continue;
		rule_sink_reshape(s, k);
		rule_compose(s, k);
		rule_noop(s, k);
	}
	AIR_TRY(rule_repeats(s));
	drop_dead(s);
	for (int k = 0; k < g->n_nodes; k++)
		if (!s->dead[k])
			AIR_TRY(rule_fold(s, k));
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

/* simplify_rules.c - the simplify pass's rules on single nodes: GEMM
 * operands (1), compositions (2) and no-ops (3). */
#include "passes/simplify_internal.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "ops/op.h"

/* ---- helpers ----------------------------------------------------------- */

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
	const ir_node *p = simp_producer(s, v);
	if (!p || p->op != OP_permute || p->attrs[0].n != 2)
		return -1;
	int64_t a = p->attrs[0].ints[0], b = p->attrs[0].ints[1];
	if ((a == 1 || a == -1) && (b == 0 || b == -2))
		return p->in[0];
	return -1;
}

void simp_rule_gemm(simp *s, int k)
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
		simp_set_input(s, n, 2, (air_value)w); /* uses stay right while moving */
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
			simp_set_input(s, n, 1, (air_value)w);
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
		simp_set_input(s, n, 0, (air_value)a);
		set_int_attr(n, "trans_a", 1);
		s->count[RW_MM_TRANS_A]++;
		s->changed = true;
	}
}

/* reshape(linear(reshape(y) -> [M, K]) -> [M, N]) -> [D..., N], the
 * reshapes only merging and splitting leading dims: linear runs on
 * [D..., K] and defines the outer reshape's value itself. Node k is the
 * outer reshape. */
air_status simp_rule_linear_rank(simp *s, int k)
{
	air_graph *g = s->g;
	ir_node *r2 = &g->nodes[k];
	if (r2->op != OP_reshape)
		return AIR_OK;
	air_value v = r2->in[0];
	ir_node *lin = simp_producer(s, v);
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
	ir_node *r1 = simp_producer(s, x);
	if (!r1 || r1->op != OP_reshape)
		return AIR_OK;
	air_value y = r1->in[0];
	const ir_value *yv = &g->values[y];
	bool direct = yv->rank == r && ir_dim_equal(g, yv->dims[r - 1], xv->dims[1]);
	for (int d = 0; direct && d < r - 1; d++)
		direct = ir_dim_equal(g, yv->dims[d], out->dims[d]);
	if (direct) {
		simp_set_input(s, lin, 0, y);
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

void simp_rule_compose(simp *s, int k)
{
	ir_node *n = &s->g->nodes[k];
	if (n->op != OP_reshape && n->op != OP_permute)
		return;
	ir_node *p = simp_producer(s, n->in[0]);
	if (!p || p->op != n->op)
		return;
	if (n->op == OP_reshape) {
		simp_set_input(s, n, 0, p->in[0]);
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
		simp_set_input(s, n, 0, p->in[0]);
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
void simp_rule_sink_reshape(simp *s, int k)
{
	ir_node *n = &s->g->nodes[k];
	const op_def *def = op_get(n->op);
	if (!(def->flags & OPF_ELEMENTWISE) || n->n_in != 1 || n->n_out != 1 || n->op == OP_cast)
		return;
	air_value v = n->in[0];
	ir_node *r = simp_producer(s, v);
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

void simp_rule_noop(simp *s, int k)
{
	rewrite why = RW_COUNT;
	int64_t x = noop_input(s, &s->g->nodes[k], &why);
	if (x >= 0)
		simp_replace_output(s, k, s->g->nodes[k].out[0], (air_value)x, why);
}

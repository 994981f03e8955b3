/* fold_batchnorm.c - folds a per-output-channel affine map that follows a
 * conv2d or linear with constant weights into those weights:
 *   batch_norm (inference, every parameter constant):
 *       s = gamma / sqrt(var + eps), t = beta - mean * s
 *   mul / div by a constant, add / sub of a constant, per channel (conv:
 *   [C,1,1], [1,C,1,1], ...; linear: [N] on the last dim) or one element
 * become W'[o] = W[o] * s[o] and b'[o] = b[o] * s[o] + t[o], computed in
 * double and rounded once. The product's output must have no other use and
 * not be a graph output, and the affine op must not broadcast it to a
 * larger shape. Without constants (parameters not frozen) nothing folds.
 * Requires: node order is execution order. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kernels/common/half.h"
#include "ops/op.h"
#include "passes/pass.h"

#define NO_VALUE ((air_value)UINT32_MAX)

/* conv2d attrs: has_bias 4, act 5, has_residual 6; linear: 0, 1, 2 */
static int bias_attr(int op)
{
	return op == OP_conv2d ? 4 : 0;
}

static double get(const void *p, air_dtype dt, int64_t i)
{
	switch (dt) {
	case AIR_F32: return (double)((const float *)p)[i];
	case AIR_BF16: return (double)k_bf16_to_f32(((const uint16_t *)p)[i]);
	case AIR_F16: return (double)k_f16_to_f32(((const uint16_t *)p)[i]);
	default: return ((const double *)p)[i];
	}
}

/* v rounded to dt; to a 16-bit type through f32, so it may round twice
 * (off by at most a 16-bit ulp, against half an ulp rounded once). */
static void put(void *p, air_dtype dt, int64_t i, double v)
{
	switch (dt) {
	case AIR_F32: ((float *)p)[i] = (float)v; break;
	case AIR_BF16: ((uint16_t *)p)[i] = k_f32_to_bf16((float)v); break;
	case AIR_F16: ((uint16_t *)p)[i] = k_f32_to_f16((float)v); break;
	default: ((double *)p)[i] = v;
	}
}

static bool is_16bit(air_dtype dt)
{
	return dt == AIR_BF16 || dt == AIR_F16;
}

static int64_t numel_of(const ir_value *v)
{
	int64_t n = 1;
	for (int d = 0; d < v->rank; d++)
		n *= v->dims[d];
	return n;
}

/* A conv2d or linear whose weights can take a fold: constant weight (and
 * bias, if any), no fused residual or activation, a float dtype. Gives the
 * number of output channels. */
static bool foldable_product(const air_graph *g, const ir_node *n, int64_t *channels)
{
	if (n->op != OP_conv2d && n->op != OP_linear)
		return false;
	int a = bias_attr(n->op);
	if (n->attrs[a + 1].i != 0 || n->attrs[a + 2].i != 0)
		return false;
	const ir_value *w = &g->values[n->in[1]];
	if (w->kind != IR_CONSTANT || (w->dtype != AIR_F32 && w->dtype != AIR_F64 && !is_16bit(w->dtype)))
		return false;
	if (n->n_in > 2 && g->values[n->in[2]].kind != IR_CONSTANT)
		return false;
	*channels = w->dims[0];
	return true;
}

/* Is v (a constant) per output channel for a product output of type out:
 * broadcasting it against out leaves out's shape, and it varies (if at all)
 * only along the channel axis (1 for conv2d, the last for linear)? Gives
 * the element stride per channel (0: one value for all). */
static bool per_channel(const ir_value *c, const ir_value *out, int op, int64_t channels, int64_t *stride)
{
	if (c->kind != IR_CONSTANT || c->dtype != out->dtype || c->rank > out->rank)
		return false;
	int axis = op == OP_conv2d ? 1 : out->rank - 1;
	*stride = 0;
	for (int i = 0; i < c->rank; i++) {
		int d = out->rank - c->rank + i;
		if (c->dims[i] == 1)
			continue;
		if (d != axis || c->dims[i] != channels)
			return false;
		*stride = 1;
	}
	return true;
}

typedef struct affine {
	double *s, *t; /* per channel; s NULL means 1, t NULL means 0 */
} affine;

/* The batch_norm node n as an affine map, if every parameter is constant. */
static bool bn_affine(const air_graph *g, const ir_node *n, int64_t C, double *s, double *t)
{
	int hw = n->attrs[1].i < 0 ? n->n_in > 3 : n->attrs[1].i != 0;
	int hb = n->attrs[2].i < 0 ? n->n_in > 3 : n->attrs[2].i != 0;
	int i = 1;
	air_value wv = hw ? n->in[i++] : NO_VALUE, bv = hb ? n->in[i++] : NO_VALUE, mv = n->in[i++], vv = n->in[i];
	air_value params[4] = {wv, bv, mv, vv};
	for (int k = 0; k < 4; k++) {
		if (params[k] == NO_VALUE)
			continue;
		const ir_value *p = &g->values[params[k]];
		if (p->kind != IR_CONSTANT || p->rank != 1 || p->dims[0] != C)
			return false;
	}
	air_dtype dt = g->values[mv].dtype;
	const void *w = hw ? ir_constant_data(g, wv) : NULL, *b = hb ? ir_constant_data(g, bv) : NULL;
	const void *mean = ir_constant_data(g, mv), *var = ir_constant_data(g, vv);
	double eps = n->attrs[0].f;
	for (int64_t c = 0; c < C; c++) {
		double sc = (w ? get(w, dt, c) : 1.0) / sqrt(get(var, dt, c) + eps);
		s[c] = sc;
		t[c] = (b ? get(b, dt, c) : 0.0) - get(mean, dt, c) * sc;
	}
	return true;
}

/* The elementwise node n reading the product's output x, with a constant
 * per-channel operand, as an affine map; fills s and t (per channel). */
static bool op_affine(const air_graph *g, const ir_node *n, air_value x, int prod_op, int64_t C, double *s,
		      double *t)
{
	if (n->n_in != 2 || (n->op != OP_mul && n->op != OP_add && n->op != OP_sub && n->op != OP_div))
		return false;
	int xi = n->in[0] == x ? 0 : 1;
	if (n->in[xi] != x || n->in[1 - xi] == x)
		return false;
	/* x - c and x / c only; c - x and c / x are not affine in the weights' sense */
	if (xi == 1 && (n->op == OP_sub || n->op == OP_div))
		return false;
	const ir_value *cv = &g->values[n->in[1 - xi]], *out = &g->values[n->out[0]], *xv = &g->values[x];
	if (out->rank != xv->rank)
		return false;
	for (int d = 0; d < out->rank; d++)
		if (out->dims[d] != xv->dims[d])
			return false;
	int64_t st;
	if (!per_channel(cv, xv, prod_op, C, &st))
		return false;
	const void *cd = ir_constant_data(g, n->in[1 - xi]);
	for (int64_t c = 0; c < C; c++) {
		double v = get(cd, cv->dtype, c * st);
		s[c] = n->op == OP_mul ? v : n->op == OP_div ? 1.0 / v : 1.0;
		t[c] = n->op == OP_add ? v : n->op == OP_sub ? -v : 0.0;
	}
	return true;
}

/* Is constant value v one this pass made (owned, used by one node only)? */
static bool made_here(const air_graph *g, air_value v, int first_const)
{
	return g->values[v].kind == IR_CONSTANT && g->values[v].index >= first_const;
}

/* Rewrites product node p so that its output becomes out * s + t. */
static air_status apply(air_graph *g, int p, const double *s, const double *t, int64_t C, int first_const)
{
	ir_node *n = &g->nodes[p];
	air_value wv = n->in[1];
	air_dtype dt = g->values[wv].dtype;
	int64_t wn = numel_of(&g->values[wv]), per = C ? wn / C : 0;
	size_t es = air_dtype_size(dt);
	/* a 16-bit weight's bias is f32 (the op's rule: everything but the
	 * weight f32); the new weight keeps the weight's own type */
	air_dtype bdt = is_16bit(dt) ? AIR_F32 : dt;
	/* the new weight: in place if this pass made it already */
	void *w = made_here(g, wv, first_const) ? (void *)ir_constant_data(g, wv) : NULL;
	if (w) {
		/* scaled twice: W'' = (W * s1) * s2 is not W * (s1 * s2) once
		 * rounded, so it can no longer be rebuilt from W */
		ir_constant *k = &g->consts[g->values[wv].index];
		free(k->row_scale);
		k->row_scale = NULL;
		k->row_base = NULL;
	} else {
		const ir_constant *src = &g->consts[g->values[wv].index];
		w = malloc(es * (size_t)(wn ? wn : 1));
		double *rs = !src->owned && dt == AIR_F32 ? malloc(sizeof *rs * (size_t)(C ? C : 1)) : NULL;
		if (!w) {
			free(rs);
			return air_error(AIR_OUT_OF_MEMORY, "fold_batchnorm: no memory for a weight");
		}
		const float *base = src->data;
		memcpy(w, base, es * (size_t)wn);
		int64_t dims[AIR_MAX_RANK];
		int rank = g->values[wv].rank;
		for (int d = 0; d < rank; d++)
			dims[d] = g->values[wv].dims[d];
		air_status st = ir_add_owned_constant(g, dt, rank, dims, w, &wv);
		if (st != AIR_OK) {
			free(rs);
			return st;
		}
		n = &g->nodes[p];
		n->in[1] = wv;
		if (rs) {
			/* borrowed: caller memory that outlives the model */
			memcpy(rs, s, sizeof *rs * (size_t)C);
			ir_constant *k = &g->consts[g->values[wv].index];
			k->row_base = base;
			k->row_scale = rs;
		}
	}
	for (int64_t c = 0; c < C; c++)
		for (int64_t i = 0; i < per; i++)
			put(w, dt, c * per + i, get(w, dt, c * per + i) * s[c]);
	/* the new bias */
	int a = bias_attr(n->op);
	bool has_bias = n->n_in > 2;
	air_value bv = has_bias ? n->in[2] : NO_VALUE;
	void *b = has_bias && made_here(g, bv, first_const) ? (void *)ir_constant_data(g, bv) : NULL;
	if (!b) {
		b = malloc(air_dtype_size(bdt) * (size_t)(C ? C : 1));
		if (!b)
			return air_error(AIR_OUT_OF_MEMORY, "fold_batchnorm: no memory for a bias");
		const void *old = has_bias ? ir_constant_data(g, bv) : NULL;
		for (int64_t c = 0; c < C; c++)
			put(b, bdt, c, old ? get(old, bdt, c) : 0.0);
		if (!has_bias) {
			air_value *in = realloc(n->in, sizeof *in * 3);
			if (!in) {
				free(b);
				return air_error(AIR_OUT_OF_MEMORY, "fold_batchnorm: no memory");
			}
			n->in = in;
			n->n_in = 3;
		}
		int64_t dims[1] = {C};
		AIR_TRY(ir_add_owned_constant(g, bdt, 1, dims, b, &bv));
		n = &g->nodes[p];
		n->in[2] = bv;
		n->attrs[a].i = 1;
		n->attrs[a].set = true;
	}
	for (int64_t c = 0; c < C; c++)
		put(b, bdt, c, get(b, bdt, c) * s[c] + t[c]);
	return AIR_OK;
}

air_status pass_fold_batchnorm(air_graph *g, const pass_options *po, pass_log *log)
{
	int nn = g->n_nodes, first_const = g->n_consts;
	int *uses = ir_count_uses(g);
	char *dead = calloc((size_t)nn + 1, 1);
	double *s = NULL, *t = NULL;
	int64_t cap = 0;
	air_status st = AIR_OK;
	int n_bn = 0, n_ops = 0;
	if (!uses || !dead) {
		st = air_error(AIR_OUT_OF_MEMORY, "fold_batchnorm: no memory");
		goto done;
	}
	for (int k = 0; k < nn; k++) {
		const ir_node *n = &g->nodes[k];
		if (n->n_in < 1 || (n->op != OP_batch_norm && n->op != OP_mul && n->op != OP_add && n->op != OP_sub &&
				    n->op != OP_div))
			continue;
		/* the product feeding it: for mul/add either operand may be it */
		int p = -1;
		air_value x = NO_VALUE;
		int64_t C = 0;
		for (int i = 0; i < (n->op == OP_batch_norm ? 1 : n->n_in) && p < 0; i++) {
			const ir_value *v = &g->values[n->in[i]];
			if (v->kind == IR_NODE_OUTPUT && uses[n->in[i]] == 1 &&
			    foldable_product(g, &g->nodes[v->index], &C)) {
				p = v->index;
				x = n->in[i];
			}
		}
		if (p < 0)
			continue;
		if (n->op == OP_batch_norm && g->nodes[p].op == OP_linear && g->values[x].rank != 2)
			continue; /* batch_norm's channels are dim 1: linear's features only at rank 2 */
		if (C > cap) {
			free(s), free(t);
			s = malloc(sizeof *s * (size_t)C);
			t = malloc(sizeof *t * (size_t)C);
			cap = C;
			if (!s || !t) {
				st = air_error(AIR_OUT_OF_MEMORY, "fold_batchnorm: no memory");
				goto done;
			}
		}
		bool ok = n->op == OP_batch_norm ? bn_affine(g, n, C, s, t) : op_affine(g, n, x, g->nodes[p].op, C, s, t);
		/* an infinite or NaN scale would turn x * s into sums of
		 * inf - inf inside the product: leave those to the op itself (a
		 * zero scale is fine: 0 * x is NaN for x non-finite either way) */
		for (int64_t c = 0; c < C && ok; c++)
			ok = isfinite(s[c]) && isfinite(t[c]);
		if (!ok)
			continue;
		const char *what = op_get(n->op)->name, *into = op_get(g->nodes[p].op)->name;
		air_value y = n->out[0];
		st = apply(g, p, s, t, C, first_const);
		if (st != AIR_OK)
			goto done;
		/* the product now defines y; x and node k are gone */
		g->nodes[p].out[0] = y;
		g->values[y].index = p;
		g->values[x].kind = IR_DEAD;
		dead[k] = 1;
		if (g->nodes[k].op == OP_batch_norm)
			n_bn++;
		else
			n_ops++;
		pass_logf(log, "  folded %s into %s (node %d)\n", what, into, p);
	}
	pass_compact(g, dead);
	pass_logf(log, "fold_batchnorm: %d batch_norm(s) and %d scale/shift op(s) folded\n", n_bn, n_ops);
done:
	free(uses), free(dead), free(s), free(t);
	return st;
}

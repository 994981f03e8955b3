/* linalg.c - op table entries of the matrix products and attention: mm,
 * bmm, addmm, linear and sdpa (scaled dot-product attention). Shape
 * inference accepts symbolic sizes; where two symbolic sizes must agree
 * (a contraction dim, a batch dim) and are not provably equal, the kernel
 * checks them with the concrete sizes. */
#include <stdio.h>

#include "core/error.h"
#include "kernels/attention/attention_ref.h"
#include "kernels/common/epilogue.h"
#include "kernels/matmul/matmul_ref.h"
#include "ops/op.h"

static bool is_float(air_dtype d)
{
	return d == AIR_F32 || d == AIR_F64;
}

/* Two sizes that cannot be equal: both known and different. */
static bool conflict(air_dim a, air_dim b)
{
	return a >= 0 && b >= 0 && a != b;
}

static air_status float_operands(op_infer_ctx *c, int first, int last)
{
	if (!is_float(c->in[first]->dtype))
		return op_fail(c, AIR_UNSUPPORTED, "takes f32 or f64, not %s", air_dtype_name(c->in[first]->dtype));
	return op_same_dtype(c, first, last);
}

static air_status want_rank(op_infer_ctx *c, int i, int rank, const char *what)
{
	if (c->in[i]->rank != rank)
		return op_fail(c, AIR_SHAPE_MISMATCH, "%s must have rank %d, got rank %d", what, rank, c->in[i]->rank);
	return AIR_OK;
}

/* mm's trans_a (set by fuse_epilogue, not by callers' graphs as a rule):
 * the product is a^T b, a given as [K, M] */
static air_status infer_mm(op_infer_ctx *c)
{
	AIR_TRY(float_operands(c, 0, 1));
	AIR_TRY(want_rank(c, 0, 2, "a"));
	AIR_TRY(want_rank(c, 1, 2, "b"));
	const ir_value *a = c->in[0], *b = c->in[1];
	const int ta = op_attr(c, 0)->i != 0;
	if (conflict(a->dims[ta ? 0 : 1], b->dims[0]))
		return op_fail(c, AIR_SHAPE_MISMATCH, "a%s is %lldx%lld but b is %lldx%lld", ta ? " (transposed)" : "",
			       (long long)a->dims[0], (long long)a->dims[1], (long long)b->dims[0],
			       (long long)b->dims[1]);
	c->out[0].dtype = a->dtype;
	c->out[0].rank = 2;
	c->out[0].dims[0] = a->dims[ta ? 1 : 0];
	c->out[0].dims[1] = b->dims[1];
	return AIR_OK;
}

static air_status infer_bmm(op_infer_ctx *c)
{
	AIR_TRY(float_operands(c, 0, 1));
	AIR_TRY(want_rank(c, 0, 3, "a"));
	AIR_TRY(want_rank(c, 1, 3, "b"));
	const ir_value *a = c->in[0], *b = c->in[1];
	if (conflict(a->dims[0], b->dims[0]))
		return op_fail(c, AIR_SHAPE_MISMATCH, "batch sizes differ: %lld and %lld", (long long)a->dims[0],
			       (long long)b->dims[0]);
	if (conflict(a->dims[2], b->dims[1]))
		return op_fail(c, AIR_SHAPE_MISMATCH, "a has %lld columns but b has %lld rows", (long long)a->dims[2],
			       (long long)b->dims[1]);
	c->out[0].dtype = a->dtype;
	c->out[0].rank = 3;
	c->out[0].dims[0] = a->dims[0] >= 0 ? a->dims[0] : b->dims[0];
	c->out[0].dims[1] = a->dims[1];
	c->out[0].dims[2] = b->dims[2];
	return AIR_OK;
}

/* addmm(bias, a, b): bias must broadcast to [M, N] (like torch's addmm,
 * which takes [N], [1, N], [M, 1], [M, N] and scalars). */
static air_status infer_addmm(op_infer_ctx *c)
{
	AIR_TRY(float_operands(c, 0, 2));
	AIR_TRY(want_rank(c, 1, 2, "a"));
	AIR_TRY(want_rank(c, 2, 2, "b"));
	const ir_value *bias = c->in[0], *a = c->in[1], *b = c->in[2];
	if (conflict(a->dims[1], b->dims[0]))
		return op_fail(c, AIR_SHAPE_MISMATCH, "a is %lldx%lld but b is %lldx%lld", (long long)a->dims[0],
			       (long long)a->dims[1], (long long)b->dims[0], (long long)b->dims[1]);
	if (bias->rank > 2)
		return op_fail(c, AIR_SHAPE_MISMATCH, "bias has rank %d; it must broadcast to [M, N]", bias->rank);
	air_dim target[2] = {a->dims[0], b->dims[1]};
	for (int i = 0; i < bias->rank; i++) {
		air_dim d = bias->dims[i], t = target[2 - bias->rank + i];
		if (d != 1 && conflict(d, t))
			return op_fail(c, AIR_SHAPE_MISMATCH, "bias size %lld does not broadcast to %lld at dim %d",
				       (long long)d, (long long)t, i);
	}
	c->out[0].dtype = a->dtype;
	c->out[0].rank = 2;
	c->out[0].dims[0] = target[0];
	c->out[0].dims[1] = target[1];
	return AIR_OK;
}

/* linear(x [..., K], w [N, K], bias [N]?, residual [..., N]?)
 *   = act(x @ w^T + bias + residual), the epilogue fused into the GEMM */
static air_status infer_linear(op_infer_ctx *c)
{
	int64_t act = op_attr(c, 1)->i, has_res = op_attr(c, 2)->i;
	if (act < K_ACT_NONE || act > K_ACT_HARDSWISH)
		return op_fail(c, AIR_INVALID_ARGUMENT, "act is %lld; it must be in [0, %d]", (long long)act,
			       (int)K_ACT_HARDSWISH);
	if (has_res != 0 && has_res != 1)
		return op_fail(c, AIR_INVALID_ARGUMENT, "has_residual is %lld; it must be 0 or 1", (long long)has_res);
	int has_bias = kref_present(op_attr(c, 0)->i, c->n_in - (int)has_res, 2);
	if (c->n_in != 2 + has_bias + has_res)
		return op_fail(c, AIR_INVALID_ARGUMENT, "has_bias is %d and has_residual %d but there are %d inputs",
			       has_bias, (int)has_res, c->n_in);
	const ir_value *x = c->in[0], *w = c->in[1];
	bool lowp; /* a 16-bit weight read in place: kernels/matmul/linear_lowp.h */
	AIR_TRY(op_lowp_weight(c, &lowp));
	if (!lowp)
		AIR_TRY(float_operands(c, 0, c->n_in - 1));
	if (x->rank < 1)
		return op_fail(c, AIR_SHAPE_MISMATCH, "x must have rank 1 or more");
	AIR_TRY(want_rank(c, 1, 2, "weight"));
	if (conflict(x->dims[x->rank - 1], w->dims[1]))
		return op_fail(c, AIR_SHAPE_MISMATCH, "x has %lld features but the weight takes %lld",
			       (long long)x->dims[x->rank - 1], (long long)w->dims[1]);
	if (has_bias) {
		AIR_TRY(want_rank(c, 2, 1, "bias"));
		if (conflict(c->in[2]->dims[0], w->dims[0]))
			return op_fail(c, AIR_SHAPE_MISMATCH, "bias has %lld entries for %lld outputs",
				       (long long)c->in[2]->dims[0], (long long)w->dims[0]);
	}
	c->out[0] = *x;
	c->out[0].dims[x->rank - 1] = w->dims[0];
	int64_t out_dtype = op_attr(c, 3)->i;
	if (out_dtype != -1) {
		bool lowp_w = w->dtype == AIR_BF16 || w->dtype == AIR_F16;
		if ((out_dtype != AIR_BF16 && out_dtype != AIR_F16) || !lowp_w || x->dtype != AIR_F32 || has_res)
			return op_fail(c, AIR_UNSUPPORTED,
				       "out_dtype %lld needs bf16 or f16, a 16-bit weight, an f32 x and no residual",
				       (long long)out_dtype);
		c->out[0].dtype = (air_dtype)out_dtype;
	}
	if (has_res) {
		const ir_value *r = c->in[c->n_in - 1];
		bool bad = r->rank != x->rank;
		for (int d = 0; d < r->rank && !bad; d++)
			bad = conflict(r->dims[d], c->out[0].dims[d]);
		if (bad)
			return op_fail(c, AIR_SHAPE_MISMATCH, "the residual must have the output's shape");
	}
	return AIR_OK;
}

/* sdpa operand i as the kernel reads it: the input, or the rank-4 view of
 * it that the operand's view attribute describes; a view needs an input
 * of static size that holds it. */
static air_status sdpa_operand(op_infer_ctx *c, int i, ir_value *out)
{
	const ir_attr *view = op_attr(c, KSDPA_ATTR_Q_VIEW + i);
	*out = *c->in[i];
	if (view->n == 0)
		return AIR_OK;
	air_dim numel;
	AIR_TRY(ir_value_numel(c->g, c->in[i], &numel));
	if (!ir_dim_is_const(numel))
		return op_fail(c, AIR_SHAPE_MISMATCH, "input %d is read through a view but its size is not static", i);
	ksdpa_view v;
	air_status st = ksdpa_view_read(view->ints, view->n, numel, &v);
	if (st != AIR_OK) {
		char why[200];
		snprintf(why, sizeof why, "%s", air_last_error());
		return op_fail(c, st, "input %d's view: %s", i, why);
	}
	out->rank = 4;
	for (int d = 0; d < 4; d++)
		out->dims[d] = v.dims[d];
	return AIR_OK;
}

/* sdpa(q [..., L, E], k [..., S, E], v [..., S, Ev], mask?) -> [..., L, Ev].
 * k and v have q's rank; each of their leading dims equals q's or is 1,
 * except dim -3 (heads), which may divide q's (grouped-query attention:
 * q head h reads k/v head h / (Hq / Hk)). The mask is bool (true means
 * attend) or q's float dtype (added to the scores) and broadcasts to
 * [..., L, S]. */
static air_status infer_sdpa(op_infer_ctx *c)
{
	int has_mask = kref_present(op_attr(c, 2)->i, c->n_in, 3);
	if (c->n_in != 3 + has_mask)
		return op_fail(c, AIR_INVALID_ARGUMENT, "has_mask is %d but there are %d inputs", has_mask, c->n_in);
	AIR_TRY(float_operands(c, 0, 2));
	ir_value viewed[3];
	for (int i = 0; i < 3; i++)
		AIR_TRY(sdpa_operand(c, i, &viewed[i]));
	const ir_value *q = &viewed[0], *k = &viewed[1], *v = &viewed[2];
	int r = q->rank;
	if (r < 2)
		return op_fail(c, AIR_SHAPE_MISMATCH, "q must have rank 2 or more, got %d", r);
	if (k->rank != r || v->rank != r)
		return op_fail(c, AIR_SHAPE_MISMATCH, "q, k and v must have one rank; got %d, %d, %d", r, k->rank,
			       v->rank);
	if (conflict(q->dims[r - 1], k->dims[r - 1]))
		return op_fail(c, AIR_SHAPE_MISMATCH, "q has embedding size %lld but k has %lld",
			       (long long)q->dims[r - 1], (long long)k->dims[r - 1]);
	if (conflict(k->dims[r - 2], v->dims[r - 2]))
		return op_fail(c, AIR_SHAPE_MISMATCH, "k has %lld positions but v has %lld", (long long)k->dims[r - 2],
			       (long long)v->dims[r - 2]);
	for (int d = 0; d < r - 2; d++) {
		air_dim qd = q->dims[d];
		for (int t = 1; t <= 2; t++) {
			air_dim kd = viewed[t].dims[d];
			bool ok = kd == 1 || !conflict(kd, qd) || (d == r - 3 && kd > 0 && qd >= 0 && qd % kd == 0);
			if (!ok)
				return op_fail(c, AIR_SHAPE_MISMATCH, "%s has size %lld at dim %d where q has %lld",
					       t == 1 ? "k" : "v", (long long)kd, d, (long long)qd);
		}
	}
	if (has_mask) {
		const ir_value *m = c->in[3];
		if (m->dtype != AIR_BOOL && m->dtype != q->dtype)
			return op_fail(c, AIR_DTYPE_MISMATCH, "the mask must be bool or %s, not %s",
				       air_dtype_name(q->dtype), air_dtype_name(m->dtype));
		if (m->rank > r)
			return op_fail(c, AIR_SHAPE_MISMATCH, "the mask has rank %d, above q's %d", m->rank, r);
		for (int i = 0; i < m->rank; i++) {
			int d = r - m->rank + i;
			air_dim want = d == r - 1 ? k->dims[r - 2] : q->dims[d];
			if (m->dims[i] != 1 && conflict(m->dims[i], want))
				return op_fail(c, AIR_SHAPE_MISMATCH,
					       "the mask has size %lld at dim %d where [..., L, S] has %lld",
					       (long long)m->dims[i], i, (long long)want);
		}
	}
	c->out[0] = *q;
	c->out[0].dims[r - 1] = v->dims[r - 1];
	int64_t bshd = op_attr(c, KSDPA_ATTR_OUT_BSHD)->i;
	if (bshd != 0 && bshd != 1)
		return op_fail(c, AIR_INVALID_ARGUMENT, "out_bshd is %lld; it must be 0 or 1", (long long)bshd);
	if (bshd) {
		if (r != 4)
			return op_fail(c, AIR_SHAPE_MISMATCH, "out_bshd needs rank 4, not %d", r);
		c->out[0].dims[1] = q->dims[2];
		c->out[0].dims[2] = q->dims[1];
	}
	return AIR_OK;
}

/* sdpa_lse: sdpa that also gives each query row's log-sum-exp of its
 * scaled, masked scores [..., L] (what the training backward,
 * sdpa_backward, recomputes the softmax from): -inf for a row with no key.
 * The passes that rewrite sdpa (views, out_bshd) leave it alone. */
static air_status infer_sdpa_lse(op_infer_ctx *c)
{
	AIR_TRY(infer_sdpa(c));
	if (op_attr(c, KSDPA_ATTR_OUT_BSHD)->i)
		return op_fail(c, AIR_INVALID_ARGUMENT, "sdpa_lse takes no out_bshd");
	for (int i = 0; i < 3; i++)
		if (op_attr(c, KSDPA_ATTR_Q_VIEW + i)->n)
			return op_fail(c, AIR_INVALID_ARGUMENT, "sdpa_lse takes no views");
	c->out[1] = c->out[0];
	c->out[1].rank--;
	return AIR_OK;
}

static const op_attr_spec mm_attrs[] = {
	{"trans_a", OPA_INT, false, 0, 0}, /* 1: a^T b */
};
static const op_attr_spec addmm_attrs[] = {
	{"alpha", OPA_FLOAT, false, 0, 1.0},
	{"beta", OPA_FLOAT, false, 0, 1.0},
};
static const op_attr_spec linear_attrs[] = {
	{"has_bias", OPA_INT, false, -1, 0},
	{"act", OPA_INT, false, K_ACT_NONE, 0},  /* k_act, applied last */
	{"has_residual", OPA_INT, false, 0, 0}, /* the last input is added before act */
	/* -1: x's dtype; bf16/f16 with a 16-bit weight and no residual: the
	 * result narrowed as it is stored (passes/narrow_outputs.c) */
	{"out_dtype", OPA_INT, false, -1, 0},
};
static const op_attr_spec sdpa_attrs[] = {
	{"scale", OPA_FLOAT, false, 0, 0.0}, /* 0: 1 / sqrt(E) */
	{"is_causal", OPA_INT, false, 0, 0},
	{"has_mask", OPA_INT, false, -1, 0},
	/* a row with every key excluded: 0 (torch's CPU flash kernel) or, when
	 * 1, NaN (softmax over all -inf, as decomposed attention gives) */
	{"empty_nan", OPA_INT, false, 0, 0},
	/* q, k, v as strided rank-4 views of their inputs (kernels/matmul/matmul_ref.h,
	 * ksdpa_view): none, or [offset, B, H, L, E, stride B, stride H, stride L] */
	{"q_view", OPA_INTS, false, 0, 0},
	{"k_view", OPA_INTS, false, 0, 0},
	{"v_view", OPA_INTS, false, 0, 0},
	/* 1: the output is [B, L, H, Ev], the heads side by side in each row */
	{"out_bshd", OPA_INT, false, 0, 0},
};

#define KREF(name) {#name "_ref", 0, NULL, NULL, NULL, NULL, kref_##name}
#define KREF_WS(name) {#name "_ref", 0, NULL, NULL, NULL, kref_##name##_workspace, kref_##name}

const op_def op_def_mm = {"mm", 2, 2, 1, mm_attrs, 1, infer_mm, KREF(mm), 0};
const op_def op_def_bmm = {"bmm", 2, 2, 1, NULL, 0, infer_bmm, KREF(bmm), 0};
const op_def op_def_addmm = {"addmm", 3, 3, 1, addmm_attrs, 2, infer_addmm, KREF(addmm), 0};
const op_def op_def_linear = {"linear", 2, 4, 1, linear_attrs, 4, infer_linear, KREF(linear), 0};
const op_def op_def_sdpa = {"sdpa", 3, 4, 1, sdpa_attrs, KSDPA_NATTRS, infer_sdpa, KREF_WS(sdpa), 0};
const op_def op_def_sdpa_lse = {"sdpa_lse", 3, 4, 2, sdpa_attrs, KSDPA_NATTRS, infer_sdpa_lse, KREF_WS(sdpa), 0};

/* conv_nhwc.c - op table entries of the channels-last (NHWC) convolution and
 * pooling ops that only the layout pass creates (passes/layout.c). Values
 * are [N, H, W, C]; the weight stays OIHW (a constant the fast kernel
 * repacks at compile time). Output sizes are built with the same dim
 * expressions as the NCHW ops' (ops/conv.c), so a value keeps its expression
 * ids when the pass moves it between layouts. */
#include "core/error.h"
#include "kernels/epilogue.h"
#include "kernels/ref/conv_nhwc.h"
#include "ops/op.h"

static bool conflict(air_dim a, air_dim b)
{
	return a >= 0 && b >= 0 && a != b;
}

/* An INTS attribute of two entries, each at least min (as conv2d's). */
static air_status pair(op_infer_ctx *c, int i, const int64_t def[2], int64_t min, int64_t out[2])
{
	const ir_attr *a = op_attr(c, i);
	const char *name = op_get(c->node->op)->attrs[i].name;
	if (a->n > 2)
		return op_fail(c, AIR_INVALID_ARGUMENT, "%s has %d entries; it takes 2", name, a->n);
	kref_pair(a->ints, a->n, def, out);
	for (int k = 0; k < 2; k++)
		if (out[k] < min)
			return op_fail(c, AIR_INVALID_ARGUMENT, "%s[%d] is %lld; it must be at least %lld", name, k,
				       (long long)out[k], (long long)min);
	return AIR_OK;
}

/* conv2d's output size (in + 2 pad - dil (k - 1) - 1) // stride + 1, built
 * in the same order as ops/conv.c builds it, so the ids match. */
static air_status conv_size(op_infer_ctx *c, const char *what, air_dim in, air_dim k, int64_t pad, int64_t stride,
			    int64_t dil, air_dim *out)
{
	air_graph *g = c->g;
	air_dim ext, num, q;
	AIR_TRY(air_graph_dim_expr(g, AIR_DIM_SUB, k, 1, &ext));
	AIR_TRY(air_graph_dim_expr(g, AIR_DIM_MUL, ext, dil, &ext));
	AIR_TRY(air_graph_dim_expr(g, AIR_DIM_ADD, ext, 1, &ext));
	AIR_TRY(air_graph_dim_expr(g, AIR_DIM_ADD, in, 2 * pad, &num));
	if (num >= 0 && ext >= 0 && num < ext)
		return op_fail(c, AIR_SHAPE_MISMATCH, "%s size %lld with padding %lld is smaller than the window (%lld)",
			       what, (long long)in, (long long)pad, (long long)ext);
	AIR_TRY(air_graph_dim_expr(g, AIR_DIM_SUB, num, ext, &num));
	AIR_TRY(air_graph_dim_expr(g, AIR_DIM_FLOORDIV, num, stride, &q));
	return air_graph_dim_expr(g, AIR_DIM_ADD, q, 1, out);
}

static const int64_t ONES[2] = {1, 1}, ZEROS[2] = {0, 0};

/* conv2d_nhwc(x [N, H, W, C], weight [O, C/groups, KH, KW], bias? [O],
 * residual? [N, OH, OW, O]) -> act(conv + bias + residual) */
static air_status infer_conv2d_nhwc(op_infer_ctx *c)
{
	int64_t has_res = op_attr(c, 6)->i;
	if (has_res != 0 && has_res != 1)
		return op_fail(c, AIR_INVALID_ARGUMENT, "has_residual is %lld; it must be 0 or 1", (long long)has_res);
	int has_bias = kref_present(op_attr(c, 4)->i, c->n_in - (int)has_res, 2);
	if (c->n_in != 2 + has_bias + (int)has_res)
		return op_fail(c, AIR_INVALID_ARGUMENT, "has_bias %d and has_residual %lld but there are %d inputs",
			       has_bias, (long long)has_res, c->n_in);
	int64_t act = op_attr(c, 5)->i;
	if (act < K_ACT_NONE || act > K_ACT_HARDSWISH)
		return op_fail(c, AIR_INVALID_ARGUMENT, "unknown act %lld", (long long)act);
	const ir_value *x = c->in[0], *w = c->in[1];
	if (x->dtype != AIR_F32)
		return op_fail(c, AIR_UNSUPPORTED, "takes f32, not %s", air_dtype_name(x->dtype));
	AIR_TRY(op_same_dtype(c, 0, c->n_in - 1));
	if (x->rank != 4 || w->rank != 4)
		return op_fail(c, AIR_SHAPE_MISMATCH, "x and weight must have rank 4 (NHWC, OIHW), got %d and %d",
			       x->rank, w->rank);
	int64_t stride[2], pad[2], dil[2];
	AIR_TRY(pair(c, 0, ONES, 1, stride));
	AIR_TRY(pair(c, 1, ZEROS, 0, pad));
	AIR_TRY(pair(c, 2, ONES, 1, dil));
	int64_t groups = op_attr(c, 3)->i;
	if (groups < 1)
		return op_fail(c, AIR_INVALID_ARGUMENT, "groups is %lld; it must be at least 1", (long long)groups);
	air_dim C = x->dims[3], O = w->dims[0], Cg = w->dims[1];
	if (C >= 0 && Cg >= 0 && C != Cg * groups)
		return op_fail(c, AIR_SHAPE_MISMATCH, "x has %lld channels but the weight takes %lld x %lld groups",
			       (long long)C, (long long)Cg, (long long)groups);
	if (O >= 0 && O % groups != 0)
		return op_fail(c, AIR_SHAPE_MISMATCH, "%lld output channels do not split into %lld groups",
			       (long long)O, (long long)groups);
	if (has_bias && (c->in[2]->rank != 1 || conflict(c->in[2]->dims[0], O)))
		return op_fail(c, AIR_SHAPE_MISMATCH, "bias must be [%lld]", (long long)O);
	ir_value *y = &c->out[0];
	y->dtype = AIR_F32;
	y->rank = 4;
	y->dims[0] = x->dims[0];
	y->dims[3] = O;
	for (int k = 0; k < 2; k++)
		AIR_TRY(conv_size(c, k ? "width" : "height", x->dims[1 + k], w->dims[2 + k], pad[k], stride[k], dil[k],
				  &y->dims[1 + k]));
	if (has_res) {
		const ir_value *r = c->in[c->n_in - 1];
		bool bad = r->rank != 4;
		for (int d = 0; !bad && d < 4; d++)
			bad = conflict(r->dims[d], y->dims[d]);
		if (bad)
			return op_fail(c, AIR_SHAPE_MISMATCH, "residual must have the output's shape [N, OH, OW, O]");
	}
	return AIR_OK;
}

/* The pooling ops take the NCHW op's attributes in the same order; their
 * shape rules are the NCHW op's, applied to x seen as NCHW. */
static air_status infer_pool_nhwc(op_infer_ctx *c, int nchw_op)
{
	const ir_value *x = c->in[0];
	if (x->dtype != AIR_F32)
		return op_fail(c, AIR_UNSUPPORTED, "takes f32, not %s", air_dtype_name(x->dtype));
	if (x->rank != 4)
		return op_fail(c, AIR_SHAPE_MISMATCH, "x must have rank 4 (NHWC), got %d", x->rank);
	ir_value t = *x;
	t.dims[1] = x->dims[3];
	t.dims[2] = x->dims[1];
	t.dims[3] = x->dims[2];
	op_infer_ctx d = *c;
	d.in[0] = &t;
	AIR_TRY(op_get(nchw_op)->infer(&d));
	c->out[0] = d.out[0];
	c->out[0].dims[1] = d.out[0].dims[2];
	c->out[0].dims[2] = d.out[0].dims[3];
	c->out[0].dims[3] = d.out[0].dims[1];
	return AIR_OK;
}

static air_status infer_max_pool2d_nhwc(op_infer_ctx *c)
{
	return infer_pool_nhwc(c, OP_max_pool2d);
}

static air_status infer_avg_pool2d_nhwc(op_infer_ctx *c)
{
	return infer_pool_nhwc(c, OP_avg_pool2d);
}

static air_status infer_adaptive_avg_pool2d_nhwc(op_infer_ctx *c)
{
	return infer_pool_nhwc(c, OP_adaptive_avg_pool2d);
}

static const op_attr_spec conv2d_nhwc_attrs[] = {
	{"stride", OPA_INTS, false, 0, 0},   /* default [1, 1] */
	{"padding", OPA_INTS, false, 0, 0},  /* default [0, 0] */
	{"dilation", OPA_INTS, false, 0, 0}, /* default [1, 1] */
	{"groups", OPA_INT, false, 1, 0},
	{"has_bias", OPA_INT, false, -1, 0},
	{"act", OPA_INT, false, 0, 0}, /* k_act */
	{"has_residual", OPA_INT, false, 0, 0},
};
/* the same schemas as the NCHW ops (ops/conv.c) */
static const op_attr_spec max_pool2d_attrs[] = {
	{"kernel", OPA_INTS, true, 0, 0},
	{"stride", OPA_INTS, false, 0, 0}, /* default: the kernel */
	{"padding", OPA_INTS, false, 0, 0},
	{"dilation", OPA_INTS, false, 0, 0},
	{"ceil_mode", OPA_INT, false, 0, 0},
};
static const op_attr_spec avg_pool2d_attrs[] = {
	{"kernel", OPA_INTS, true, 0, 0},
	{"stride", OPA_INTS, false, 0, 0},
	{"padding", OPA_INTS, false, 0, 0},
	{"ceil_mode", OPA_INT, false, 0, 0},
	{"count_include_pad", OPA_INT, false, 1, 0},
	{"divisor_override", OPA_INT, false, 0, 0}, /* 0: none */
};
static const op_attr_spec adaptive_attrs[] = {{"output_size", OPA_INTS, true, 0, 0}};

#define KREF(name) {#name "_ref", 0, NULL, NULL, NULL, NULL, kref_##name}

const op_def op_def_conv2d_nhwc = {"conv2d_nhwc", 2, 4, 1, conv2d_nhwc_attrs, 7, infer_conv2d_nhwc,
				   KREF(conv2d_nhwc), 0};
const op_def op_def_max_pool2d_nhwc = {"max_pool2d_nhwc", 1, 1, 1, max_pool2d_attrs, 5, infer_max_pool2d_nhwc,
				       KREF(max_pool2d_nhwc), 0};
const op_def op_def_avg_pool2d_nhwc = {"avg_pool2d_nhwc", 1, 1, 1, avg_pool2d_attrs, 6, infer_avg_pool2d_nhwc,
				       KREF(avg_pool2d_nhwc), 0};
const op_def op_def_adaptive_avg_pool2d_nhwc = {"adaptive_avg_pool2d_nhwc", 1, 1, 1, adaptive_attrs, 1,
						infer_adaptive_avg_pool2d_nhwc, KREF(adaptive_avg_pool2d_nhwc), 0};

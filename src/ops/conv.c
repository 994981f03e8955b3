/* conv.c - op table entries of convolution, inference batch norm and 2-D
 * pooling (NCHW). Output sizes follow PyTorch's rules exactly, built as dim
 * expressions so that they hold for symbolic heights and widths too. */
#include "core/error.h"
#include "kernels/common/epilogue.h"
#include "kernels/conv/conv_ref.h"
#include "kernels/norm/norm_ref.h"
#include "kernels/pool/pool_ref.h"
#include "ops/op.h"

static bool is_float(air_dtype d)
{
	return d == AIR_F32 || d == AIR_F64;
}

static bool conflict(air_dim a, air_dim b)
{
	return a >= 0 && b >= 0 && a != b;
}

/* An INTS attribute of two entries (one entry means both; none means def),
 * each at least min. */
static air_status pair(op_infer_ctx *c, int i, const int64_t def[2], int64_t min, int64_t out[2])
{
	const ir_attr *a = op_attr(c, i);
	const char *name = op_get(c->node->op)->attrs[i].name;
	if (a->n > 2)
		return op_fail(c, AIR_INVALID_ARGUMENT, "%s has %d entries; it takes 2", name, a->n);
	kref_pair(a->ints, a->n, def, out);
	for (int k = 0; k < 2; k++) {
		if (out[k] < min)
			return op_fail(c, AIR_INVALID_ARGUMENT, "%s[%d] is %lld; it must be at least %lld", name, k,
				       (long long)out[k], (long long)min);
		/* far beyond any real window, and keeps 2 * pad + stride in range */
		if (out[k] > ((int64_t)1 << 31))
			return op_fail(c, AIR_UNSUPPORTED, "%s[%d] is %lld; above 2^31", name, k, (long long)out[k]);
	}
	return AIR_OK;
}

/* The number of windows of extent dil*(k-1)+1 that fit, PyTorch's
 * pooling_output_shape:
 *   out = (in + 2*pad - extent [+ stride - 1 in ceil mode]) // stride + 1
 * and in ceil mode one less if the last window would start at or past
 * in + pad (it must start inside the input or the left padding). The
 * indicator of that is min(max(start + 1, in + pad) - (in + pad), 1), which
 * never goes negative, as a symbolic dim may not. */
static air_status window_count(op_infer_ctx *c, const char *what, air_dim in, air_dim k, int64_t pad,
			       int64_t stride, int64_t dil, bool ceil_mode, air_dim *out)
{
	air_graph *g = c->g;
	air_dim ext, num, q, start, end, ind;
	AIR_TRY(air_graph_dim_expr(g, AIR_DIM_SUB, k, 1, &ext));
	AIR_TRY(air_graph_dim_expr(g, AIR_DIM_MUL, ext, dil, &ext));
	AIR_TRY(air_graph_dim_expr(g, AIR_DIM_ADD, ext, 1, &ext));
	AIR_TRY(air_graph_dim_expr(g, AIR_DIM_ADD, in, 2 * pad + (ceil_mode ? stride - 1 : 0), &num));
	if (num >= 0 && ext >= 0 && num < ext)
		return op_fail(c, AIR_SHAPE_MISMATCH, "%s size %lld with padding %lld is smaller than the window (%lld)",
			       what, (long long)in, (long long)pad, (long long)ext);
	AIR_TRY(air_graph_dim_expr(g, AIR_DIM_SUB, num, ext, &num));
	AIR_TRY(air_graph_dim_expr(g, AIR_DIM_FLOORDIV, num, stride, &q));
	AIR_TRY(air_graph_dim_expr(g, AIR_DIM_MUL, q, stride, &start)); /* of the last window, + pad */
	AIR_TRY(air_graph_dim_expr(g, AIR_DIM_ADD, q, 1, &q));
	if (!ceil_mode) {
		*out = q;
		return AIR_OK;
	}
	AIR_TRY(air_graph_dim_expr(g, AIR_DIM_ADD, in, pad, &end));
	AIR_TRY(air_graph_dim_expr(g, AIR_DIM_ADD, start, 1, &start));
	AIR_TRY(air_graph_dim_expr(g, AIR_DIM_MAX, start, end, &ind));
	AIR_TRY(air_graph_dim_expr(g, AIR_DIM_SUB, ind, end, &ind));
	AIR_TRY(air_graph_dim_expr(g, AIR_DIM_MIN, ind, 1, &ind));
	return air_graph_dim_expr(g, AIR_DIM_SUB, q, ind, out);
}

static const int64_t ONES[2] = {1, 1}, ZEROS[2] = {0, 0};

/* The fused epilogue's attributes (act, has_residual) at a and a + 1: the
 * activation is one of k_act, has_residual 0 or 1. */
static air_status epilogue_attrs(op_infer_ctx *c, int a, int *has_res)
{
	int64_t act = op_attr(c, a)->i, res = op_attr(c, a + 1)->i;
	if (act < K_ACT_NONE || act > K_ACT_HARDSWISH)
		return op_fail(c, AIR_INVALID_ARGUMENT, "act is %lld; it must be in [0, %d]", (long long)act,
			       (int)K_ACT_HARDSWISH);
	if (res != 0 && res != 1)
		return op_fail(c, AIR_INVALID_ARGUMENT, "has_residual is %lld; it must be 0 or 1", (long long)res);
	*has_res = (int)res;
	return AIR_OK;
}

/* conv2d(x, w, [bias], [residual]): the residual (the output's shape) is
 * added after the bias and before the activation, all in the kernel. */
static air_status infer_conv2d(op_infer_ctx *c)
{
	int has_res = 0;
	AIR_TRY(epilogue_attrs(c, 5, &has_res));
	int has_bias = kref_present(op_attr(c, 4)->i, c->n_in - has_res, 2);
	if (c->n_in != 2 + has_bias + has_res)
		return op_fail(c, AIR_INVALID_ARGUMENT, "has_bias is %d and has_residual %d but there are %d inputs",
			       has_bias, has_res, c->n_in);
	const ir_value *x = c->in[0], *w = c->in[1];
	if (!is_float(x->dtype))
		return op_fail(c, AIR_UNSUPPORTED, "takes f32 or f64, not %s", air_dtype_name(x->dtype));
	bool lowp; /* a 16-bit weight: kernels/conv/conv_nhwc_lowp.c */
	AIR_TRY(op_lowp_weight(c, &lowp));
	if (!lowp)
		AIR_TRY(op_same_dtype(c, 0, c->n_in - 1));
	if (x->rank != 4 || w->rank != 4)
		return op_fail(c, AIR_SHAPE_MISMATCH, "x and weight must have rank 4 (NCHW, OIHW), got %d and %d",
			       x->rank, w->rank);
	int64_t stride[2], pad[2], dil[2];
	AIR_TRY(pair(c, 0, ONES, 1, stride));
	AIR_TRY(pair(c, 1, ZEROS, 0, pad));
	AIR_TRY(pair(c, 2, ONES, 1, dil));
	int64_t groups = op_attr(c, 3)->i;
	if (groups < 1)
		return op_fail(c, AIR_INVALID_ARGUMENT, "groups is %lld; it must be at least 1", (long long)groups);
	air_dim C = x->dims[1], O = w->dims[0], Cg = w->dims[1];
	if (C >= 0 && Cg >= 0 && C != Cg * groups)
		return op_fail(c, AIR_SHAPE_MISMATCH, "x has %lld channels but the weight takes %lld x %lld groups",
			       (long long)C, (long long)Cg, (long long)groups);
	if (O >= 0 && O % groups != 0)
		return op_fail(c, AIR_SHAPE_MISMATCH, "%lld output channels do not split into %lld groups",
			       (long long)O, (long long)groups);
	if (has_bias) {
		if (c->in[2]->rank != 1 || conflict(c->in[2]->dims[0], O))
			return op_fail(c, AIR_SHAPE_MISMATCH, "bias must be [%lld]", (long long)O);
	}
	c->out[0].dtype = x->dtype;
	c->out[0].rank = 4;
	c->out[0].dims[0] = x->dims[0];
	c->out[0].dims[1] = O;
	for (int k = 0; k < 2; k++)
		AIR_TRY(window_count(c, k ? "width" : "height", x->dims[2 + k], w->dims[2 + k], pad[k], stride[k],
				     dil[k], false, &c->out[0].dims[2 + k]));
	if (has_res) {
		const ir_value *r = c->in[c->n_in - 1];
		bool bad = r->rank != 4;
		for (int d = 0; d < 4 && !bad; d++)
			bad = conflict(r->dims[d], c->out[0].dims[d]);
		if (bad)
			return op_fail(c, AIR_SHAPE_MISMATCH, "the residual must have the output's shape");
	}
	return AIR_OK;
}

/* batch_norm(x [N, C, ...], weight?, bias?, running_mean, running_var) */
static air_status infer_batch_norm(op_infer_ctx *c)
{
	int64_t hw = op_attr(c, 1)->i, hb = op_attr(c, 2)->i;
	if ((hw < 0 || hb < 0) && c->n_in == 4)
		return op_fail(c, AIR_INVALID_ARGUMENT, "with 4 inputs, has_weight and has_bias must say which is there");
	int want = 3 + kref_present(hw, c->n_in, 3) + kref_present(hb, c->n_in, 3);
	if (c->n_in != want)
		return op_fail(c, AIR_INVALID_ARGUMENT, "has_weight and has_bias call for %d inputs, got %d", want,
			       c->n_in);
	const ir_value *x = c->in[0];
	if (!is_float(x->dtype))
		return op_fail(c, AIR_UNSUPPORTED, "takes f32 or f64, not %s", air_dtype_name(x->dtype));
	AIR_TRY(op_same_dtype(c, 0, c->n_in - 1));
	if (x->rank < 2)
		return op_fail(c, AIR_SHAPE_MISMATCH, "x must have rank 2 or more (N, C, ...), got %d", x->rank);
	if (op_attr(c, 0)->f < 0)
		return op_fail(c, AIR_INVALID_ARGUMENT, "eps is negative");
	for (int i = 1; i < c->n_in; i++)
		if (c->in[i]->rank != 1 || conflict(c->in[i]->dims[0], x->dims[1]))
			return op_fail(c, AIR_SHAPE_MISMATCH, "input %d must be [%lld], one entry per channel", i,
				       (long long)x->dims[1]);
	c->out[0] = *x;
	return AIR_OK;
}

/* pooling input: [N, C, H, W] or [C, H, W], float */
static air_status pool_input(op_infer_ctx *c)
{
	const ir_value *x = c->in[0];
	if (!is_float(x->dtype))
		return op_fail(c, AIR_UNSUPPORTED, "takes f32 or f64, not %s", air_dtype_name(x->dtype));
	if (x->rank != 3 && x->rank != 4)
		return op_fail(c, AIR_SHAPE_MISMATCH, "x must have rank 3 or 4, got %d", x->rank);
	return AIR_OK;
}

static air_status infer_pool(op_infer_ctx *c, int a_pad, int a_dil, int a_ceil)
{
	AIR_TRY(pool_input(c));
	const ir_value *x = c->in[0];
	int64_t kernel[2], stride[2], pad[2], dil[2] = {1, 1};
	if (op_attr(c, 0)->n == 0)
		return op_fail(c, AIR_INVALID_ARGUMENT, "kernel is required");
	AIR_TRY(pair(c, 0, ONES, 1, kernel));
	AIR_TRY(pair(c, 1, kernel, 1, stride)); /* the default stride is the kernel */
	AIR_TRY(pair(c, a_pad, ZEROS, 0, pad));
	if (a_dil >= 0)
		AIR_TRY(pair(c, a_dil, ONES, 1, dil));
	bool ceil_mode = op_attr(c, a_ceil)->i != 0;
	c->out[0] = *x;
	int r = x->rank;
	for (int k = 0; k < 2; k++) {
		int64_t ext = dil[k] * (kernel[k] - 1) + 1;
		/* max pool allows half the dilated window; avg pool half the kernel */
		int64_t limit = a_dil >= 0 ? ext / 2 : kernel[k] / 2;
		if (pad[k] > limit)
			return op_fail(c, AIR_INVALID_ARGUMENT, "padding %lld is more than half the window (%lld)",
				       (long long)pad[k], (long long)ext);
		AIR_TRY(window_count(c, k ? "width" : "height", x->dims[r - 2 + k], kernel[k], pad[k], stride[k],
				     dil[k], ceil_mode, &c->out[0].dims[r - 2 + k]));
	}
	return AIR_OK;
}

static air_status infer_max_pool2d(op_infer_ctx *c)
{
	return infer_pool(c, 2, 3, 4);
}

static air_status infer_avg_pool2d(op_infer_ctx *c)
{
	if (op_attr(c, 5)->i < 0)
		return op_fail(c, AIR_INVALID_ARGUMENT, "divisor_override is negative");
	return infer_pool(c, 2, -1, 3);
}

static air_status infer_adaptive_avg_pool2d(op_infer_ctx *c)
{
	AIR_TRY(pool_input(c));
	const ir_attr *os = op_attr(c, 0);
	if (os->n != 2)
		return op_fail(c, AIR_INVALID_ARGUMENT, "output_size has %d entries; it takes 2", os->n);
	const ir_value *x = c->in[0];
	int r = x->rank;
	c->out[0] = *x;
	for (int k = 0; k < 2; k++) {
		if (os->ints[k] < 0)
			return op_fail(c, AIR_INVALID_ARGUMENT, "output_size[%d] is negative", k);
		if (x->dims[r - 2 + k] == 0 && os->ints[k] > 0)
			return op_fail(c, AIR_SHAPE_MISMATCH, "cannot pool an empty %s", k ? "width" : "height");
		c->out[0].dims[r - 2 + k] = os->ints[k];
	}
	return AIR_OK;
}

/* col2im(cols [N, C*KH*KW, L], [bias [C]]) -> [N, C, OH, OW], torch's fold
 * plus a per-channel bias: column l is the block at (l / LW, l % LW) of the
 * LH x LW blocks (windows) that fit output_size, and its entry (c, ki, kj)
 * adds into y[c, lh*sh - ph + ki*dh, lw*sw - pw + kj*dw] where that lies
 * inside. With channels_last, cols is [N, L, KH*KW*C] (a block's taps, each
 * tap's C channels contiguous) and y is [N, OH, OW, C]. A transposed
 * convolution is a GEMM into cols and then this. */
static air_status infer_col2im(op_infer_ctx *c)
{
	const ir_attr *os = op_attr(c, 0);
	if (os->n != 2)
		return op_fail(c, AIR_INVALID_ARGUMENT, "output_size has %d entries; it takes 2", os->n);
	int64_t k[2], dil[2], pad[2], stride[2];
	if (op_attr(c, 1)->n != 2)
		return op_fail(c, AIR_INVALID_ARGUMENT, "kernel has %d entries; it takes 2", op_attr(c, 1)->n);
	AIR_TRY(pair(c, 1, ONES, 1, k));
	AIR_TRY(pair(c, 2, ONES, 1, dil));
	AIR_TRY(pair(c, 3, ZEROS, 0, pad));
	AIR_TRY(pair(c, 4, ONES, 1, stride));
	const ir_value *x = c->in[0];
	int64_t last = op_attr(c, 5)->i; /* channels_last */
	int has_bias = kref_present(op_attr(c, 6)->i, c->n_in, 1);
	if (last != 0 && last != 1)
		return op_fail(c, AIR_INVALID_ARGUMENT, "channels_last is %lld; it must be 0 or 1", (long long)last);
	if (c->n_in != 1 + has_bias)
		return op_fail(c, AIR_INVALID_ARGUMENT, "has_bias is %d but there are %d inputs", has_bias, c->n_in);
	if (!is_float(x->dtype))
		return op_fail(c, AIR_UNSUPPORTED, "takes f32 or f64, not %s", air_dtype_name(x->dtype));
	AIR_TRY(op_same_dtype(c, 0, c->n_in - 1));
	if (x->rank != 3)
		return op_fail(c, AIR_SHAPE_MISMATCH, "cols must have rank 3, got %d", x->rank);
	air_dim CK = x->dims[last ? 2 : 1], blocks[2], L, C;
	if (CK >= 0 && CK % (k[0] * k[1]) != 0)
		return op_fail(c, AIR_SHAPE_MISMATCH, "%lld rows of cols are not a whole number of %lldx%lld kernels",
			       (long long)CK, (long long)k[0], (long long)k[1]);
	for (int d = 0; d < 2; d++) {
		if (os->ints[d] == 0)
			return op_fail(c, AIR_SHAPE_MISMATCH, "output_size[%d] is 0", d);
		AIR_TRY(window_count(c, d ? "width" : "height", os->ints[d], k[d], pad[d], stride[d], dil[d], false,
				     &blocks[d]));
	}
	AIR_TRY(air_graph_dim_expr(c->g, AIR_DIM_MUL, blocks[0], blocks[1], &L));
	if (conflict(L, x->dims[last ? 1 : 2]))
		return op_fail(c, AIR_SHAPE_MISMATCH, "cols has %lld blocks but output_size fits %lld x %lld",
			       (long long)x->dims[last ? 1 : 2], (long long)blocks[0], (long long)blocks[1]);
	AIR_TRY(air_graph_dim_expr(c->g, AIR_DIM_FLOORDIV, CK, k[0] * k[1], &C));
	if (has_bias && (c->in[1]->rank != 1 || conflict(c->in[1]->dims[0], C)))
		return op_fail(c, AIR_SHAPE_MISMATCH, "bias must be [%lld]", (long long)C);
	c->out[0].dtype = x->dtype;
	c->out[0].rank = 4;
	c->out[0].dims[0] = x->dims[0];
	c->out[0].dims[last ? 3 : 1] = C;
	c->out[0].dims[last ? 1 : 2] = os->ints[0];
	c->out[0].dims[last ? 2 : 3] = os->ints[1];
	return AIR_OK;
}

static const op_attr_spec conv2d_attrs[] = {
	{"stride", OPA_INTS, false, 0, 0},   /* default [1, 1] */
	{"padding", OPA_INTS, false, 0, 0},  /* default [0, 0] */
	{"dilation", OPA_INTS, false, 0, 0}, /* default [1, 1] */
	{"groups", OPA_INT, false, 1, 0},
	{"has_bias", OPA_INT, false, -1, 0},
	{"act", OPA_INT, false, K_ACT_NONE, 0},  /* k_act, applied last */
	{"has_residual", OPA_INT, false, 0, 0}, /* the last input is added before act */
};
static const op_attr_spec batch_norm_attrs[] = {
	{"eps", OPA_FLOAT, false, 0, 1e-5},
	{"has_weight", OPA_INT, false, -1, 0},
	{"has_bias", OPA_INT, false, -1, 0},
};
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
static const op_attr_spec col2im_attrs[] = {
	{"output_size", OPA_DIMS, true, 0, 0},
	{"kernel", OPA_INTS, true, 0, 0},
	{"dilation", OPA_INTS, false, 0, 0}, /* default [1, 1] */
	{"padding", OPA_INTS, false, 0, 0},  /* default [0, 0] */
	{"stride", OPA_INTS, false, 0, 0},   /* default [1, 1] */
	{"channels_last", OPA_INT, false, 0, 0}, /* cols [N, L, KH*KW*C], y [N, OH, OW, C] */
	{"has_bias", OPA_INT, false, -1, 0},
};

#define KREF(name) {#name "_ref", 0, NULL, NULL, NULL, NULL, kref_##name}

const op_def op_def_conv2d = {"conv2d", 2, 4, 1, conv2d_attrs, 7, infer_conv2d, KREF(conv2d), 0};
const op_def op_def_batch_norm = {"batch_norm", 3, 5, 1, batch_norm_attrs, 3, infer_batch_norm,
				  KREF(batch_norm), 0};
const op_def op_def_max_pool2d = {"max_pool2d", 1, 1, 1, max_pool2d_attrs, 5, infer_max_pool2d,
				  KREF(max_pool2d), 0};
const op_def op_def_avg_pool2d = {"avg_pool2d", 1, 1, 1, avg_pool2d_attrs, 6, infer_avg_pool2d,
				  KREF(avg_pool2d), 0};
const op_def op_def_adaptive_avg_pool2d = {"adaptive_avg_pool2d", 1, 1, 1, adaptive_attrs, 1,
					   infer_adaptive_avg_pool2d, KREF(adaptive_avg_pool2d), 0};
const op_def op_def_col2im = {"col2im", 1, 2, 1, col2im_attrs, 7, infer_col2im, KREF(col2im), 0};

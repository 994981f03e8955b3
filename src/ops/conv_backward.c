/* conv_backward.c - op table entries of the 2-D convolution's gradients
 * (NCHW, not transposed), what aten.convolution_backward lowers to:
 *   conv2d_backward_input(dy [N, O, OH, OW], w [O, C/g, KH, KW]) -> dx [N, C, H, W]
 *   conv2d_backward_weight(dy [N, O, OH, OW], x [N, C, H, W]) -> dw [O, C/g, KH, KW]
 * with the forward's stride, padding, dilation and groups; the bias's
 * gradient is a plain sum of dy. Each takes the one size it cannot infer:
 * input_size [H, W] (may be symbolic) or kernel [KH, KW]. */
#include "core/error.h"
#include "kernels/conv/conv_backward.h"
#include "ops/op.h"

static bool conflict(air_dim a, air_dim b)
{
	return a >= 0 && b >= 0 && a != b;
}

static const int64_t ONES[2] = {1, 1}, ZEROS[2] = {0, 0};

/* stride, padding, dilation (two entries each, or one meaning both, or
 * none for the default) and groups */
static air_status conv_attrs(op_infer_ctx *c, int64_t s[2], int64_t p[2], int64_t d[2], int64_t *groups)
{
	const int64_t *defs[3] = {ONES, ZEROS, ONES};
	int64_t *outs[3] = {s, p, d};
	for (int i = 0; i < 3; i++) {
		const ir_attr *a = op_attr(c, i);
		if (a->n > 2)
			return op_fail(c, AIR_INVALID_ARGUMENT, "%s has %d entries; it takes 2",
				       op_get(c->node->op)->attrs[i].name, a->n);
		kref_pair(a->ints, a->n, defs[i], outs[i]);
		for (int k = 0; k < 2; k++)
			if (outs[i][k] < (i == 1 ? 0 : 1))
				return op_fail(c, AIR_INVALID_ARGUMENT, "%s[%d] is %lld", op_get(c->node->op)->attrs[i].name,
					       k, (long long)outs[i][k]);
	}
	*groups = op_attr(c, KCONVB_GROUPS)->i;
	if (*groups < 1)
		return op_fail(c, AIR_INVALID_ARGUMENT, "groups is %lld; it must be at least 1", (long long)*groups);
	return AIR_OK;
}

/* the forward's output size along one axis, (in + 2p - d(k-1) - 1) // s + 1,
 * which dy must have */
static air_status check_out(op_infer_ctx *c, const char *what, air_dim in, air_dim k, int64_t p, int64_t s,
			    int64_t d, air_dim got)
{
	air_graph *g = c->g;
	air_dim ext, num, q;
	AIR_TRY(air_graph_dim_expr(g, AIR_DIM_SUB, k, 1, &ext));
	AIR_TRY(air_graph_dim_expr(g, AIR_DIM_MUL, ext, d, &ext));
	AIR_TRY(air_graph_dim_expr(g, AIR_DIM_ADD, in, 2 * p, &num));
	if (num >= 0 && ext >= 0 && num < ext + 1)
		return op_fail(c, AIR_SHAPE_MISMATCH, "%s %lld with padding %lld is smaller than the kernel", what,
			       (long long)in, (long long)p);
	AIR_TRY(air_graph_dim_expr(g, AIR_DIM_SUB, num, ext, &num));
	AIR_TRY(air_graph_dim_expr(g, AIR_DIM_SUB, num, 1, &num));
	AIR_TRY(air_graph_dim_expr(g, AIR_DIM_FLOORDIV, num, s, &q));
	AIR_TRY(air_graph_dim_expr(g, AIR_DIM_ADD, q, 1, &q));
	if (conflict(q, got))
		return op_fail(c, AIR_SHAPE_MISMATCH, "dy has %s %lld but the convolution gives %lld", what,
			       (long long)got, (long long)q);
	return AIR_OK;
}

/* What both ops check: f32 or f64 alike, rank 4, channels in groups. */
static air_status common(op_infer_ctx *c, int64_t s[2], int64_t p[2], int64_t d[2], int64_t *groups)
{
	const ir_value *dy = c->in[0], *other = c->in[1];
	if (dy->dtype != AIR_F32 && dy->dtype != AIR_F64)
		return op_fail(c, AIR_UNSUPPORTED, "takes f32 or f64, not %s", air_dtype_name(dy->dtype));
	AIR_TRY(op_same_dtype(c, 0, 1));
	if (dy->rank != 4 || other->rank != 4)
		return op_fail(c, AIR_SHAPE_MISMATCH, "dy and %s must have rank 4, got %d and %d",
			       c->node->op == OP_conv2d_backward_input ? "weight" : "x", dy->rank, other->rank);
	AIR_TRY(conv_attrs(c, s, p, d, groups));
	if (dy->dims[1] >= 0 && dy->dims[1] % *groups != 0)
		return op_fail(c, AIR_SHAPE_MISMATCH, "%lld output channels do not split into %lld groups",
			       (long long)dy->dims[1], (long long)*groups);
	return AIR_OK;
}

static air_status infer_backward_input(op_infer_ctx *c)
{
	int64_t s[2], p[2], d[2], groups;
	AIR_TRY(common(c, s, p, d, &groups));
	const ir_value *dy = c->in[0], *w = c->in[1];
	const ir_attr *size = op_attr(c, KCONVB_SIZE);
	if (size->n != 2)
		return op_fail(c, AIR_INVALID_ARGUMENT, "input_size has %d entries; it takes 2", size->n);
	if (conflict(dy->dims[1], w->dims[0]))
		return op_fail(c, AIR_SHAPE_MISMATCH, "dy has %lld channels, the weight %lld", (long long)dy->dims[1],
			       (long long)w->dims[0]);
	for (int k = 0; k < 2; k++)
		AIR_TRY(check_out(c, k ? "width" : "height", size->ints[k], w->dims[2 + k], p[k], s[k], d[k],
				  dy->dims[2 + k]));
	c->out[0].dtype = dy->dtype;
	c->out[0].rank = 4;
	c->out[0].dims[0] = dy->dims[0];
	AIR_TRY(air_graph_dim_expr(c->g, AIR_DIM_MUL, w->dims[1], groups, &c->out[0].dims[1]));
	c->out[0].dims[2] = size->ints[0];
	c->out[0].dims[3] = size->ints[1];
	return AIR_OK;
}

static air_status infer_backward_weight(op_infer_ctx *c)
{
	int64_t s[2], p[2], d[2], groups;
	AIR_TRY(common(c, s, p, d, &groups));
	const ir_value *dy = c->in[0], *x = c->in[1];
	const ir_attr *kernel = op_attr(c, KCONVB_SIZE);
	if (kernel->n != 2 || kernel->ints[0] < 1 || kernel->ints[1] < 1)
		return op_fail(c, AIR_INVALID_ARGUMENT, "kernel must be two sizes of at least 1");
	if (conflict(dy->dims[0], x->dims[0]))
		return op_fail(c, AIR_SHAPE_MISMATCH, "dy has batch %lld, x %lld", (long long)dy->dims[0],
			       (long long)x->dims[0]);
	if (x->dims[1] >= 0 && x->dims[1] % groups != 0)
		return op_fail(c, AIR_SHAPE_MISMATCH, "%lld input channels do not split into %lld groups",
			       (long long)x->dims[1], (long long)groups);
	for (int k = 0; k < 2; k++)
		AIR_TRY(check_out(c, k ? "width" : "height", x->dims[2 + k], kernel->ints[k], p[k], s[k], d[k],
				  dy->dims[2 + k]));
	c->out[0].dtype = dy->dtype;
	c->out[0].rank = 4;
	c->out[0].dims[0] = dy->dims[1];
	AIR_TRY(air_graph_dim_expr(c->g, AIR_DIM_FLOORDIV, x->dims[1], groups, &c->out[0].dims[1]));
	c->out[0].dims[2] = kernel->ints[0];
	c->out[0].dims[3] = kernel->ints[1];
	return AIR_OK;
}

static const op_attr_spec backward_input_attrs[] = {
	{"stride", OPA_INTS, false, 0, 0},   /* default [1, 1] */
	{"padding", OPA_INTS, false, 0, 0},  /* default [0, 0] */
	{"dilation", OPA_INTS, false, 0, 0}, /* default [1, 1] */
	{"groups", OPA_INT, false, 1, 0},
	{"input_size", OPA_DIMS, true, 0, 0}, /* the input's [H, W] */
};
static const op_attr_spec backward_weight_attrs[] = {
	{"stride", OPA_INTS, false, 0, 0},
	{"padding", OPA_INTS, false, 0, 0},
	{"dilation", OPA_INTS, false, 0, 0},
	{"groups", OPA_INT, false, 1, 0},
	{"kernel", OPA_INTS, true, 0, 0}, /* [KH, KW] */
};

const op_def op_def_conv2d_backward_input = {"conv2d_backward_input", 2, 2, 1, backward_input_attrs, 5,
					     infer_backward_input,
					     {"conv2d_backward_input_ref", 0, NULL, NULL, NULL, NULL,
					      kref_conv2d_backward_input},
					     0};
const op_def op_def_conv2d_backward_weight = {"conv2d_backward_weight", 2, 2, 1, backward_weight_attrs, 5,
					      infer_backward_weight,
					      {"conv2d_backward_weight_ref", 0, NULL, NULL, NULL, NULL,
					       kref_conv2d_backward_weight},
					      0};

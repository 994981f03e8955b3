/* conv_nhwc.c - op table entries of the channels-last (NHWC) convolution and
 * pooling ops that only the layout pass creates (passes/layout.c). Values
 * are [N, H, W, C]; the weight stays OIHW (a constant the fast kernel
 * repacks at compile time). Shapes come from the NCHW ops' rules
 * (infer_as_nchw). */
#include "core/error.h"
#include "kernels/conv/conv_nhwc_ref.h"
#include "ops/op.h"

/* [N, H, W, C] seen as [N, C, H, W], and back */
static ir_value as_nchw(const ir_value *v)
{
	ir_value t = *v;
	t.dims[1] = v->dims[3];
	t.dims[2] = v->dims[1];
	t.dims[3] = v->dims[2];
	return t;
}

static ir_value as_nhwc(const ir_value *v)
{
	ir_value t = *v;
	t.dims[1] = v->dims[2];
	t.dims[2] = v->dims[3];
	t.dims[3] = v->dims[1];
	return t;
}

/* Every op here takes its NCHW twin's attributes, in the same order, and
 * its shape rule: the twin's (ops/conv.c), applied to x (and conv2d_nhwc's
 * residual) and the output seen as NCHW. So a value keeps its dim
 * expressions when the layout pass moves it between layouts. f32 only. */
static air_status infer_as_nchw(op_infer_ctx *c, int nchw_op)
{
	const ir_value *x = c->in[0];
	if (x->dtype != AIR_F32)
		return op_fail(c, AIR_UNSUPPORTED, "takes f32, not %s", air_dtype_name(x->dtype));
	if (x->rank != 4)
		return op_fail(c, AIR_SHAPE_MISMATCH, "x must have rank 4 (NHWC), got %d", x->rank);
	op_infer_ctx d = *c;
	ir_value xt = as_nchw(x), rt;
	d.in[0] = &xt;
	const ir_value *r = c->in[c->n_in - 1];
	if (nchw_op == OP_conv2d && op_attr(c, 6)->i == 1 && c->n_in > 2 && r->rank == 4) {
		rt = as_nchw(r);
		d.in[c->n_in - 1] = &rt;
	}
	AIR_TRY(op_get(nchw_op)->infer(&d));
	c->out[0] = as_nhwc(&d.out[0]);
	return AIR_OK;
}

/* conv2d_nhwc(x [N, H, W, C], weight [O, C/groups, KH, KW], bias? [O],
 * residual? [N, OH, OW, O]) -> act(conv + bias + residual) */
static air_status infer_conv2d_nhwc(op_infer_ctx *c)
{
	return infer_as_nchw(c, OP_conv2d);
}

static air_status infer_max_pool2d_nhwc(op_infer_ctx *c)
{
	return infer_as_nchw(c, OP_max_pool2d);
}

static air_status infer_avg_pool2d_nhwc(op_infer_ctx *c)
{
	return infer_as_nchw(c, OP_avg_pool2d);
}

static air_status infer_adaptive_avg_pool2d_nhwc(op_infer_ctx *c)
{
	return infer_as_nchw(c, OP_adaptive_avg_pool2d);
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

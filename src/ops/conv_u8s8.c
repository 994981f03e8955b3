/* conv_u8s8.c - op table entry of conv2d_u8s8: PT2E's static int8 2-D convolution (torchao's
 * X86InductorQuantizer: u8 input with one scale and zero point, s8 weight [O, C, KH, KW] with a
 * scale per output channel and zero point 0), NCHW, one group, matched from its dequantize /
 * convolution / quantize pattern by python/torchair/lowering/pt2e.py; kernels/gemm_q/conv_u8s8.h.
 *
 * conv2d_u8s8(x [N, C, H, W] u8, w [O, C, KH, KW] i8, w_scale [O] f32, bias [O] f32?)
 *   -> [N, O, OH, OW] f32, or u8 when out_u8. Static sizes only; anything the kernels cannot do
 *   (grouped, symbolic sizes, other dtypes, K = C * KH * KW past KU8_MAX_K) is refused here and
 *   lowers through the generic ops instead. */
#include "kernels/gemm_q/conv_u8s8.h"
#include "kernels/gemm_q/gemm_u8s8.h"
#include "ops/op.h"

static air_status infer_conv2d_u8s8(op_infer_ctx *c)
{
	const int has_bias = kref_present(op_attr(c, KCU8_ATTR_HAS_BIAS)->i, c->n_in, 3);
	if (c->n_in != 3 + has_bias)
		return op_fail(c, AIR_INVALID_ARGUMENT, "has_bias is %d but there are %d inputs", has_bias, c->n_in);
	const int64_t xzp = op_attr(c, KCU8_ATTR_X_ZP)->i, ozp = op_attr(c, KCU8_ATTR_OUT_ZP)->i;
	const int64_t out_u8 = op_attr(c, KCU8_ATTR_OUT_U8)->i;
	if (xzp < 0 || xzp > 255 || ozp < 0 || ozp > 255 || (out_u8 != 0 && out_u8 != 1))
		return op_fail(c, AIR_UNSUPPORTED, "zero points must be in [0, 255] and out_u8 0 or 1");
	const double xs = op_attr(c, KCU8_ATTR_X_SCALE)->f, oinv = op_attr(c, KCU8_ATTR_OUT_INV_SCALE)->f;
	if (!(xs > 0.0) || !(oinv > 0.0) || xs > 3.4e38 || oinv > 3.4e38)
		return op_fail(c, AIR_UNSUPPORTED, "scales must be positive finite f32 numbers");
	const ir_attr *st = op_attr(c, KCU8_ATTR_STRIDE), *pd = op_attr(c, KCU8_ATTR_PADDING);
	const ir_attr *dl = op_attr(c, KCU8_ATTR_DILATION);
	if (st->n != 2 || pd->n != 2 || dl->n != 2)
		return op_fail(c, AIR_INVALID_ARGUMENT, "stride, padding and dilation need 2 values each");
	const ir_value *x = c->in[0], *w = c->in[1], *s = c->in[2];
	if (x->dtype != AIR_U8 || x->rank != 4 || w->dtype != AIR_I8 || w->rank != 4)
		return op_fail(c, AIR_UNSUPPORTED, "x must be u8 [N, C, H, W] and the weight i8 [O, C, KH, KW]");
	for (int i = 0; i < 4; i++)
		if (x->dims[i] < 0 || w->dims[i] < 0)
			return op_fail(c, AIR_UNSUPPORTED, "static sizes only");
	if (w->dims[1] != x->dims[1])
		return op_fail(c, AIR_SHAPE_MISMATCH, "the weight has %lld input channels, x %lld (one group only)",
			       (long long)w->dims[1], (long long)x->dims[1]);
	if (w->dims[1] * w->dims[2] * w->dims[3] > KU8_MAX_K)
		return op_fail(c, AIR_UNSUPPORTED, "C * KH * KW past %d", (int)KU8_MAX_K);
	const air_dim O = w->dims[0];
	if (s->dtype != AIR_F32 || s->rank != 1 || s->dims[0] != O)
		return op_fail(c, AIR_SHAPE_MISMATCH, "the weight scales must be f32 [%lld]", (long long)O);
	if (has_bias) {
		const ir_value *b = c->in[3];
		if (b->dtype != AIR_F32 || b->rank != 1 || b->dims[0] != O)
			return op_fail(c, AIR_SHAPE_MISMATCH, "the bias must be f32 [%lld]", (long long)O);
	}
	int64_t out[2];
	for (int i = 0; i < 2; i++) {
		const int64_t in = x->dims[2 + i], k = w->dims[2 + i];
		if (st->ints[i] < 1 || dl->ints[i] < 1 || pd->ints[i] < 0)
			return op_fail(c, AIR_INVALID_ARGUMENT, "stride and dilation must be >= 1, padding >= 0");
		const int64_t span = dl->ints[i] * (k - 1) + 1;
		if (in + 2 * pd->ints[i] < span)
			return op_fail(c, AIR_SHAPE_MISMATCH, "the kernel is larger than the padded input");
		out[i] = (in + 2 * pd->ints[i] - span) / st->ints[i] + 1;
	}
	c->out[0] = *x;
	c->out[0].dtype = out_u8 ? AIR_U8 : AIR_F32;
	c->out[0].dims[1] = O;
	c->out[0].dims[2] = out[0];
	c->out[0].dims[3] = out[1];
	return AIR_OK;
}

static const op_attr_spec conv2d_u8s8_attrs[] = {
	{"stride", OPA_INTS, true, 0, 0},
	{"padding", OPA_INTS, true, 0, 0},
	{"dilation", OPA_INTS, true, 0, 0},
	{"x_scale", OPA_FLOAT, true, 0, 0},
	{"x_zp", OPA_INT, true, 0, 0},
	{"relu", OPA_INT, false, 0, 0},
	{"out_u8", OPA_INT, false, 0, 0},
	{"out_inv_scale", OPA_FLOAT, false, 0, 1.0},
	{"out_zp", OPA_INT, false, 0, 0},
	{"has_bias", OPA_INT, false, -1, 0},
};

const op_def op_def_conv2d_u8s8 = {"conv2d_u8s8", 3, 4, 1, conv2d_u8s8_attrs, KCU8_NATTRS, infer_conv2d_u8s8,
				   {"conv2d_u8s8_ref", 0, NULL, NULL, NULL, NULL, kref_conv2d_u8s8}, 0};

/* linear_u8s8.c - op table entry of linear_u8s8: PT2E's static int8 linear (torchao's
 * X86InductorQuantizer: u8 activations with one scale and zero point, s8 weights with a scale
 * per output channel and zero point 0), matched from its dequantize/linear/quantize pattern by
 * python/torchair/lowering/pt2e.py. kernels/gemm_q/gemm_u8s8.h gives the arithmetic.
 *
 * linear_u8s8(x [..., K] u8, w [N, K] i8, w_scale [N] f32, bias [N] f32?) -> [..., N] f32, or u8
 *   when out_u8 (requantized with out_inv_scale and out_zp). Shape inference rejects what the
 *   kernels cannot do (other dtypes, zero points outside [0, 255], K past KU8_MAX_K, a symbolic
 *   K), so such a call falls back instead of computing something else. */
#include "kernels/gemm_q/gemm_u8s8.h"
#include "kernels/gemm_q/linear_u8s8.h"
#include "ops/op.h"

static air_status infer_linear_u8s8(op_infer_ctx *c)
{
	const int has_bias = kref_present(op_attr(c, KLU8_ATTR_HAS_BIAS)->i, c->n_in, 3);
	if (c->n_in != 3 + has_bias)
		return op_fail(c, AIR_INVALID_ARGUMENT, "has_bias is %d but there are %d inputs", has_bias, c->n_in);
	const int64_t xzp = op_attr(c, KLU8_ATTR_X_ZP)->i, ozp = op_attr(c, KLU8_ATTR_OUT_ZP)->i;
	const int64_t out_u8 = op_attr(c, KLU8_ATTR_OUT_U8)->i;
	if (xzp < 0 || xzp > 255 || ozp < 0 || ozp > 255)
		return op_fail(c, AIR_UNSUPPORTED, "zero points must be in [0, 255] (u8), not %lld and %lld",
			       (long long)xzp, (long long)ozp);
	if (out_u8 != 0 && out_u8 != 1)
		return op_fail(c, AIR_INVALID_ARGUMENT, "out_u8 is %lld; it must be 0 or 1", (long long)out_u8);
	const double xs = op_attr(c, KLU8_ATTR_X_SCALE)->f, oinv = op_attr(c, KLU8_ATTR_OUT_INV_SCALE)->f;
	if (!(xs > 0.0) || !(oinv > 0.0) || xs > 3.4e38 || oinv > 3.4e38)
		return op_fail(c, AIR_UNSUPPORTED, "scales must be positive finite f32 numbers");
	const ir_value *x = c->in[0], *w = c->in[1], *s = c->in[2];
	if (x->dtype != AIR_U8 || x->rank < 1)
		return op_fail(c, AIR_UNSUPPORTED, "x must be u8 of rank 1 or more, not %s rank %d",
			       air_dtype_name(x->dtype), x->rank);
	if (w->dtype != AIR_I8 || w->rank != 2)
		return op_fail(c, AIR_UNSUPPORTED, "the weight must be a 2-D i8 tensor, not %s rank %d",
			       air_dtype_name(w->dtype), w->rank);
	const air_dim N = w->dims[0], K = w->dims[1];
	if (N < 0 || K < 0 || x->dims[x->rank - 1] != K)
		return op_fail(c, AIR_SHAPE_MISMATCH, "x's last dim must be the weight's static K");
	if (K > KU8_MAX_K)
		return op_fail(c, AIR_UNSUPPORTED, "K is %lld; the s32 sums allow at most %d", (long long)K,
			       (int)KU8_MAX_K);
	if (s->dtype != AIR_F32 || s->rank != 1 || s->dims[0] != N)
		return op_fail(c, AIR_SHAPE_MISMATCH, "the weight scales must be f32 [%lld]", (long long)N);
	if (has_bias) {
		const ir_value *b = c->in[3];
		if (b->dtype != AIR_F32 || b->rank != 1 || b->dims[0] != N)
			return op_fail(c, AIR_SHAPE_MISMATCH, "the bias must be f32 [%lld]", (long long)N);
	}
	c->out[0] = *x;
	c->out[0].dtype = out_u8 ? AIR_U8 : AIR_F32;
	c->out[0].dims[x->rank - 1] = N;
	return AIR_OK;
}

static const op_attr_spec linear_u8s8_attrs[] = {
	{"x_scale", OPA_FLOAT, true, 0, 0},
	{"x_zp", OPA_INT, true, 0, 0},
	{"relu", OPA_INT, false, 0, 0},
	{"out_u8", OPA_INT, false, 0, 0},
	{"out_inv_scale", OPA_FLOAT, false, 0, 1.0},
	{"out_zp", OPA_INT, false, 0, 0},
	{"has_bias", OPA_INT, false, -1, 0},
};

const op_def op_def_linear_u8s8 = {"linear_u8s8", 3, 4, 1, linear_u8s8_attrs, KLU8_NATTRS, infer_linear_u8s8,
				   {"linear_u8s8_ref", 0, NULL, NULL, NULL, NULL, kref_linear_u8s8}, 0};

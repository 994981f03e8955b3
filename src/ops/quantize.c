/* quantize.c - op table entry of quantize: PT2E's quantize_per_tensor (torchao / torch.ao's
 * quantized_decomposed op), x f32 -> u8 or i8 (attribute dtype), as kernels/gemm_q/quantize.h
 * computes it. Shape inference rejects bounds outside the dtype and scales that are not
 * positive finite f32, so those fall back to the generic lowering or eager. */
#include "kernels/gemm_q/quantize.h"
#include "ops/op.h"

static air_status infer_quantize(op_infer_ctx *c)
{
	const ir_value *x = c->in[0];
	if (x->dtype != AIR_F32)
		return op_fail(c, AIR_UNSUPPORTED, "x must be f32, not %s", air_dtype_name(x->dtype));
	const int64_t dt = op_attr(c, KQZ_ATTR_DTYPE)->i, zp = op_attr(c, KQZ_ATTR_ZP)->i;
	const int64_t lo = op_attr(c, KQZ_ATTR_QMIN)->i, hi = op_attr(c, KQZ_ATTR_QMAX)->i;
	const int64_t dmin = dt == AIR_I8 ? -128 : 0, dmax = dt == AIR_I8 ? 127 : 255;
	if (dt != AIR_U8 && dt != AIR_I8)
		return op_fail(c, AIR_UNSUPPORTED, "dtype must be u8 or i8");
	if (lo < dmin || hi > dmax || lo > hi)
		return op_fail(c, AIR_UNSUPPORTED, "bounds [%lld, %lld] do not fit %s", (long long)lo, (long long)hi,
			       air_dtype_name((air_dtype)dt));
	if (zp < -1000000 || zp > 1000000)
		return op_fail(c, AIR_UNSUPPORTED, "zero point %lld is out of range", (long long)zp);
	const double inv = op_attr(c, KQZ_ATTR_INV_SCALE)->f;
	if (!(inv > 0.0) || inv > 3.4e38)
		return op_fail(c, AIR_UNSUPPORTED, "inv_scale must be a positive finite f32 number");
	c->out[0] = *x;
	c->out[0].dtype = (air_dtype)dt;
	return AIR_OK;
}

static const op_attr_spec quantize_attrs[] = {
	{"inv_scale", OPA_FLOAT, true, 0, 0},
	{"zp", OPA_INT, true, 0, 0},
	{"qmin", OPA_INT, true, 0, 0},
	{"qmax", OPA_INT, true, 0, 0},
	{"dtype", OPA_INT, true, 0, 0},
};

const op_def op_def_quantize = {"quantize", 1, 1, 1, quantize_attrs, KQZ_NATTRS, infer_quantize,
				{"quantize_ref", 0, NULL, NULL, NULL, NULL, kref_quantize}, 0};

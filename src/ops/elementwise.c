/* elementwise.c - op table entries of the elementwise family: unary ops,
 * binary ops with broadcasting (inputs share one dtype; the lowering
 * inserts casts for type promotion), where, and cast. */
#include "core/error.h"
#include "kernels/elementwise/elementwise_ref.h"
#include "ops/op.h"

static bool is_float(air_dtype d)
{
	return d == AIR_F32 || d == AIR_F64;
}

static bool is_int(air_dtype d)
{
	return d == AIR_I64 || d == AIR_I32 || d == AIR_I16 || d == AIR_I8 || d == AIR_U8;
}

static air_status same_shape(op_infer_ctx *c, air_dtype dtype)
{
	c->out[0] = *c->in[0];
	c->out[0].dtype = dtype;
	return AIR_OK;
}

static air_status infer_float_unary(op_infer_ctx *c)
{
	if (!is_float(c->in[0]->dtype))
		return op_fail(c, AIR_UNSUPPORTED, "takes f32 or f64, not %s", air_dtype_name(c->in[0]->dtype));
	return same_shape(c, c->in[0]->dtype);
}

static air_status infer_num_unary(op_infer_ctx *c)
{
	air_dtype d = c->in[0]->dtype;
	if (!is_float(d) && !is_int(d))
		return op_fail(c, AIR_UNSUPPORTED, "takes a float or integer tensor, not %s", air_dtype_name(d));
	return same_shape(c, d);
}

static air_status infer_to_bool(op_infer_ctx *c)
{
	air_dtype d = c->in[0]->dtype;
	if (!is_float(d) && !is_int(d) && d != AIR_BOOL)
		return op_fail(c, AIR_UNSUPPORTED, "no kernel for %s", air_dtype_name(d));
	return same_shape(c, AIR_BOOL);
}

static air_status infer_bitwise_not(op_infer_ctx *c)
{
	air_dtype d = c->in[0]->dtype;
	if (!is_int(d) && d != AIR_BOOL)
		return op_fail(c, AIR_UNSUPPORTED, "takes an integer or bool tensor, not %s", air_dtype_name(d));
	return same_shape(c, d);
}

static air_status binary_shape(op_infer_ctx *c, air_dtype out)
{
	AIR_TRY(op_same_dtype(c, 0, 1));
	c->out[0].dtype = out;
	return op_broadcast(c, c->in[0], c->in[1], &c->out[0].rank, c->out[0].dims);
}

static air_status infer_num_binary(op_infer_ctx *c)
{
	air_dtype d = c->in[0]->dtype;
	if (!is_float(d) && !is_int(d))
		return op_fail(c, AIR_UNSUPPORTED, "takes float or integer tensors, not %s", air_dtype_name(d));
	return binary_shape(c, d);
}

static air_status infer_float_binary(op_infer_ctx *c)
{
	if (!is_float(c->in[0]->dtype))
		return op_fail(c, AIR_UNSUPPORTED, "takes f32 or f64, not %s", air_dtype_name(c->in[0]->dtype));
	return binary_shape(c, c->in[0]->dtype);
}

static air_status infer_compare(op_infer_ctx *c)
{
	air_dtype d = c->in[0]->dtype;
	if (!is_float(d) && !is_int(d) && d != AIR_BOOL)
		return op_fail(c, AIR_UNSUPPORTED, "no kernel for %s", air_dtype_name(d));
	return binary_shape(c, AIR_BOOL);
}

static air_status infer_bitwise(op_infer_ctx *c)
{
	air_dtype d = c->in[0]->dtype;
	if (!is_int(d) && d != AIR_BOOL)
		return op_fail(c, AIR_UNSUPPORTED, "takes integer or bool tensors, not %s", air_dtype_name(d));
	return binary_shape(c, d);
}

static air_status infer_where(op_infer_ctx *c)
{
	if (c->in[0]->dtype != AIR_BOOL)
		return op_fail(c, AIR_DTYPE_MISMATCH, "condition must be bool, not %s", air_dtype_name(c->in[0]->dtype));
	AIR_TRY(op_same_dtype(c, 1, 2));
	ir_value ab;
	ab.dtype = c->in[1]->dtype;
	AIR_TRY(op_broadcast(c, c->in[1], c->in[2], &ab.rank, ab.dims));
	c->out[0].dtype = ab.dtype;
	return op_broadcast(c, c->in[0], &ab, &c->out[0].rank, c->out[0].dims);
}

static air_status infer_cast(op_infer_ctx *c)
{
	int64_t to = op_attr(c, 0)->i;
	if (to < 0 || to >= AIR_DTYPE_COUNT)
		return op_fail(c, AIR_INVALID_ARGUMENT, "unknown dtype %lld", (long long)to);
	return same_shape(c, (air_dtype)to);
}

static const op_attr_spec clamp_attrs[] = {
	{"min", OPA_FLOAT, false, 0, 0.0},
	{"max", OPA_FLOAT, false, 0, 0.0},
	{"has_min", OPA_INT, false, 0, 0.0},
	{"has_max", OPA_INT, false, 0, 0.0},
};
static const op_attr_spec leaky_attrs[] = {{"negative_slope", OPA_FLOAT, false, 0, 0.01}};
/* torch's elu: x > 0 ? scale * x : alpha * scale * expm1(input_scale * x) */
static const op_attr_spec elu_attrs[] = {
	{"alpha", OPA_FLOAT, false, 0, 1.0},
	{"scale", OPA_FLOAT, false, 0, 1.0},
	{"input_scale", OPA_FLOAT, false, 0, 1.0},
};
static const op_attr_spec cast_attrs[] = {{"dtype", OPA_INT, true, 0, 0.0}};

#define DEF(name, nin, infer, attrs, nattrs)                                                       \
	const op_def op_def_##name = {#name, nin, nin, 1, attrs, nattrs, infer,                    \
				      {#name "_ref", 0, NULL, NULL, NULL, NULL, kref_##name},     \
				      OPF_ELEMENTWISE};

DEF(neg, 1, infer_num_unary, NULL, 0)
DEF(abs, 1, infer_num_unary, NULL, 0)
DEF(exp, 1, infer_float_unary, NULL, 0)
DEF(log, 1, infer_float_unary, NULL, 0)
DEF(log1p, 1, infer_float_unary, NULL, 0)
DEF(expm1, 1, infer_float_unary, NULL, 0)
DEF(sqrt, 1, infer_float_unary, NULL, 0)
DEF(rsqrt, 1, infer_float_unary, NULL, 0)
DEF(sin, 1, infer_float_unary, NULL, 0)
DEF(cos, 1, infer_float_unary, NULL, 0)
DEF(tanh, 1, infer_float_unary, NULL, 0)
DEF(sigmoid, 1, infer_float_unary, NULL, 0)
DEF(erf, 1, infer_float_unary, NULL, 0)
DEF(relu, 1, infer_num_unary, NULL, 0)
DEF(gelu, 1, infer_float_unary, NULL, 0)
DEF(gelu_tanh, 1, infer_float_unary, NULL, 0)
DEF(silu, 1, infer_float_unary, NULL, 0)
DEF(hardswish, 1, infer_float_unary, NULL, 0)
DEF(hardsigmoid, 1, infer_float_unary, NULL, 0)
DEF(reciprocal, 1, infer_float_unary, NULL, 0)
DEF(floor, 1, infer_float_unary, NULL, 0)
DEF(ceil, 1, infer_float_unary, NULL, 0)
DEF(round, 1, infer_float_unary, NULL, 0)
DEF(trunc, 1, infer_float_unary, NULL, 0)
DEF(sign, 1, infer_num_unary, NULL, 0)
DEF(logical_not, 1, infer_to_bool, NULL, 0)
DEF(bitwise_not, 1, infer_bitwise_not, NULL, 0)
DEF(isnan, 1, infer_to_bool, NULL, 0)
DEF(clamp, 1, infer_num_unary, clamp_attrs, 4)
DEF(leaky_relu, 1, infer_float_unary, leaky_attrs, 1)
DEF(elu, 1, infer_float_unary, elu_attrs, 3)
DEF(add, 2, infer_num_binary, NULL, 0)
DEF(sub, 2, infer_num_binary, NULL, 0)
DEF(mul, 2, infer_num_binary, NULL, 0)
DEF(div, 2, infer_float_binary, NULL, 0)
DEF(floor_divide, 2, infer_num_binary, NULL, 0)
DEF(remainder, 2, infer_num_binary, NULL, 0)
DEF(fmod, 2, infer_num_binary, NULL, 0)
DEF(pow, 2, infer_num_binary, NULL, 0)
DEF(maximum, 2, infer_num_binary, NULL, 0)
DEF(minimum, 2, infer_num_binary, NULL, 0)
DEF(eq, 2, infer_compare, NULL, 0)
DEF(ne, 2, infer_compare, NULL, 0)
DEF(lt, 2, infer_compare, NULL, 0)
DEF(le, 2, infer_compare, NULL, 0)
DEF(gt, 2, infer_compare, NULL, 0)
DEF(ge, 2, infer_compare, NULL, 0)
DEF(logical_and, 2, infer_compare, NULL, 0)
DEF(logical_or, 2, infer_compare, NULL, 0)
DEF(logical_xor, 2, infer_compare, NULL, 0)
DEF(bitwise_and, 2, infer_bitwise, NULL, 0)
DEF(bitwise_or, 2, infer_bitwise, NULL, 0)
DEF(bitwise_xor, 2, infer_bitwise, NULL, 0)
DEF(where, 3, infer_where, NULL, 0)
DEF(cast, 1, infer_cast, cast_attrs, 1)

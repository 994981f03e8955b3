/* unary_ref.c - reference kernels of the unary elementwise ops over f32,
 * f64 and the integer types: math, activations, rounding, clamp, the
 * logical and bitwise nots and isnan. */
#include "kernels/elementwise/elementwise_ref.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/elementwise/elementwise_ref_internal.h"

/* the same generated loop serves signed and unsigned types, where "x < 0"
 * is always false for the unsigned ones; that is intended */
#pragma GCC diagnostic ignored "-Wtype-limits"

typedef struct {
	const void *x;
	void *y;
	int64_t n;
	double a, b, d; /* op parameters (clamp bounds, slope, elu's three) */
	int has_a, has_b;
} unary_ctx;

#define UNARY_TASK(name, TI, TO, EXPR)                                          \
	static void name##_task_##TI(void *p, int64_t t, int th)                \
	{                                                                       \
		const unary_ctx *c = p;                                         \
		int64_t lo = t * K_GRAIN, hi = lo + K_GRAIN < c->n ? lo + K_GRAIN : c->n; \
		const TI *xs = c->x;                                            \
		TO *ys = c->y;                                                  \
		for (int64_t i = lo; i < hi; i++) {                             \
			TI x = xs[i];                                           \
			ys[i] = (TO)(EXPR);                                     \
		}                                                               \
	}

static air_status run_unary(const k_call *call, rt_task_fn fn, unary_ctx *c)
{
	c->x = call->in[0].data;
	c->y = call->out[0].data;
	c->n = call->out[0].numel;
	rt_pool_run(call->pool, (c->n + K_GRAIN - 1) / K_GRAIN, fn, c);
	return AIR_OK;
}


/* float-only unary ops: EXPR in terms of x, for float and double */
#define FLOAT_UNARY(name, EXPRF, EXPRD)                                         \
	UNARY_TASK(name, float, float, EXPRF)                                   \
	UNARY_TASK(name, double, double, EXPRD)                                 \
	air_status kref_##name(const k_call *call)                              \
	{                                                                       \
		unary_ctx c = {0};                                              \
		switch (call->in[0].dtype) {                                    \
		case AIR_F32: return run_unary(call, name##_task_float, &c);    \
		case AIR_F64: return run_unary(call, name##_task_double, &c);   \
		default: return bad_dtype(#name, call->in[0].dtype);            \
		}                                                               \
	}

static inline float gelu_f(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }
static inline double gelu_d(double x) { return 0.5 * x * (1.0 + erf(x * 0.70710678118654752)); }
static inline float gelu_tanh_f(float x)
{
	return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}
static inline double gelu_tanh_d(double x)
{
	return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}
static inline float sigmoid_f(float x) { return 1.0f / (1.0f + expf(-x)); }
static inline double sigmoid_d(double x) { return 1.0 / (1.0 + exp(-x)); }
static inline float relu6_f(float x) { return x < 0.0f ? 0.0f : (x > 6.0f ? 6.0f : x); }
static inline double relu6_d(double x) { return x < 0.0 ? 0.0 : (x > 6.0 ? 6.0 : x); }
/* NaN propagates through relu/clamp like PyTorch: comparisons with NaN are
 * false, so these keep x when x is NaN */
static inline float relu_f(float x) { return x < 0.0f ? 0.0f : x; }
static inline double relu_d(double x) { return x < 0.0 ? 0.0 : x; }

FLOAT_UNARY(exp, expf(x), exp(x))
FLOAT_UNARY(log, logf(x), log(x))
FLOAT_UNARY(log1p, log1pf(x), log1p(x))
FLOAT_UNARY(expm1, expm1f(x), expm1(x))
FLOAT_UNARY(sqrt, sqrtf(x), sqrt(x))
FLOAT_UNARY(rsqrt, 1.0f / sqrtf(x), 1.0 / sqrt(x))
FLOAT_UNARY(sin, sinf(x), sin(x))
FLOAT_UNARY(cos, cosf(x), cos(x))
FLOAT_UNARY(tanh, tanhf(x), tanh(x))
FLOAT_UNARY(sigmoid, sigmoid_f(x), sigmoid_d(x))
FLOAT_UNARY(erf, erff(x), erf(x))
FLOAT_UNARY(gelu, gelu_f(x), gelu_d(x))
FLOAT_UNARY(gelu_tanh, gelu_tanh_f(x), gelu_tanh_d(x))
FLOAT_UNARY(silu, x * sigmoid_f(x), x * sigmoid_d(x))
FLOAT_UNARY(hardswish, x * relu6_f(x + 3.0f) / 6.0f, x * relu6_d(x + 3.0) / 6.0)
FLOAT_UNARY(hardsigmoid, relu6_f(x + 3.0f) / 6.0f, relu6_d(x + 3.0) / 6.0)
FLOAT_UNARY(reciprocal, 1.0f / x, 1.0 / x)
FLOAT_UNARY(floor, floorf(x), floor(x))
FLOAT_UNARY(ceil, ceilf(x), ceil(x))
FLOAT_UNARY(round, nearbyintf(x), nearbyint(x)) /* half to even, as torch.round */
FLOAT_UNARY(trunc, truncf(x), trunc(x))

/* ops that also take integers: one task per dtype */
#define ALL_INT_TASKS(name, EXPR)                          \
	UNARY_TASK(name, int64_t, int64_t, EXPR)           \
	UNARY_TASK(name, int32_t, int32_t, EXPR)           \
	UNARY_TASK(name, int16_t, int16_t, EXPR)           \
	UNARY_TASK(name, int8_t, int8_t, EXPR)             \
	UNARY_TASK(name, uint8_t, uint8_t, EXPR)

#define INT_CASES(name)                                                     \
	case AIR_I64: return run_unary(call, name##_task_int64_t, &c);      \
	case AIR_I32: return run_unary(call, name##_task_int32_t, &c);      \
	case AIR_I16: return run_unary(call, name##_task_int16_t, &c);      \
	case AIR_I8: return run_unary(call, name##_task_int8_t, &c);        \
	case AIR_U8: return run_unary(call, name##_task_uint8_t, &c);

/* numeric unary ops over floats and integers (unsigned wraps like torch) */
#define NUM_UNARY(name, EXPRF, EXPRD, EXPRI)                                    \
	UNARY_TASK(name, float, float, EXPRF)                                   \
	UNARY_TASK(name, double, double, EXPRD)                                 \
	ALL_INT_TASKS(name, EXPRI)                                              \
	air_status kref_##name(const k_call *call)                              \
	{                                                                       \
		unary_ctx c = {0};                                              \
		switch (call->in[0].dtype) {                                    \
		case AIR_F32: return run_unary(call, name##_task_float, &c);    \
		case AIR_F64: return run_unary(call, name##_task_double, &c);   \
		INT_CASES(name)                                                 \
		default: return bad_dtype(#name, call->in[0].dtype);            \
		}                                                               \
	}

/* negation through unsigned arithmetic: wraps instead of overflowing */
#define INEG(x) (-(uint64_t)(x))
NUM_UNARY(neg, -x, -x, INEG(x))
NUM_UNARY(abs, fabsf(x), fabs(x), (x < 0 ? INEG(x) : (uint64_t)x))
NUM_UNARY(relu, relu_f(x), relu_d(x), (x < 0 ? 0 : x))
/* sign(NaN) is 0, as torch gives on the CPU (not NaN as numpy does) */
NUM_UNARY(sign, (float)((x > 0.0f) - (x < 0.0f)), (double)((x > 0.0) - (x < 0.0)), (x > 0) - (x < 0))

/* logical_not: any dtype -> bool */
UNARY_TASK(logical_not, float, kbool, x == 0.0f)
UNARY_TASK(logical_not, double, kbool, x == 0.0)
UNARY_TASK(logical_not, int64_t, kbool, x == 0)
UNARY_TASK(logical_not, int32_t, kbool, x == 0)
UNARY_TASK(logical_not, int16_t, kbool, x == 0)
UNARY_TASK(logical_not, int8_t, kbool, x == 0)
UNARY_TASK(logical_not, uint8_t, kbool, x == 0)
air_status kref_logical_not(const k_call *call)
{
	unary_ctx c = {0};
	switch (call->in[0].dtype) {
	case AIR_F32: return run_unary(call, logical_not_task_float, &c);
	case AIR_F64: return run_unary(call, logical_not_task_double, &c);
	case AIR_BOOL: return run_unary(call, logical_not_task_uint8_t, &c);
	INT_CASES(logical_not)
	default: return bad_dtype("logical_not", call->in[0].dtype);
	}
}

/* bitwise_not: integers; on bool it is logical not */
ALL_INT_TASKS(bitwise_not, ~x)
UNARY_TASK(bitwise_not_bool, uint8_t, kbool, !x)
air_status kref_bitwise_not(const k_call *call)
{
	unary_ctx c = {0};
	switch (call->in[0].dtype) {
	case AIR_BOOL: return run_unary(call, bitwise_not_bool_task_uint8_t, &c);
	INT_CASES(bitwise_not)
	default: return bad_dtype("bitwise_not", call->in[0].dtype);
	}
}

UNARY_TASK(isnan, float, kbool, x != x)
UNARY_TASK(isnan, double, kbool, x != x)
air_status kref_isnan(const k_call *call)
{
	unary_ctx c = {0};
	switch (call->in[0].dtype) {
	case AIR_F32: return run_unary(call, isnan_task_float, &c);
	case AIR_F64: return run_unary(call, isnan_task_double, &c);
	default:
		/* integers are never NaN */
		if (call->out[0].numel > 0) /* empty tensors may have NULL data */
			memset(call->out[0].data, 0, (size_t)call->out[0].numel);
		return AIR_OK;
	}
}

/* clamp(x, min, max): attrs min, max (float), has_min, has_max. As torch,
 * min(max(x, min), max): NaN stays NaN, and max wins when min > max. */
#define CLAMP_LO(T, v) (c->has_a && (v) < (T)c->a ? (T)c->a : (v))
#define CLAMP_EXPR(T) (x != x ? x : c->has_b && CLAMP_LO(T, x) > (T)c->b ? (T)c->b : CLAMP_LO(T, x))
UNARY_TASK(clamp, float, float, CLAMP_EXPR(float))
UNARY_TASK(clamp, double, double, CLAMP_EXPR(double))
ALL_INT_TASKS(clamp, CLAMP_EXPR(int64_t))
air_status kref_clamp(const k_call *call)
{
	unary_ctx c = {0};
	c.a = call->attrs[0].f;
	c.b = call->attrs[1].f;
	c.has_a = (int)call->attrs[2].i;
	c.has_b = (int)call->attrs[3].i;
	switch (call->in[0].dtype) {
	case AIR_F32: return run_unary(call, clamp_task_float, &c);
	case AIR_F64: return run_unary(call, clamp_task_double, &c);
	INT_CASES(clamp)
	default: return bad_dtype("clamp", call->in[0].dtype);
	}
}

UNARY_TASK(leaky_relu, float, float, x < 0.0f ? x * (float)c->a : x)
UNARY_TASK(leaky_relu, double, double, x < 0.0 ? x * c->a : x)
air_status kref_leaky_relu(const k_call *call)
{
	unary_ctx c = {0};
	c.a = call->attrs[0].f;
	switch (call->in[0].dtype) {
	case AIR_F32: return run_unary(call, leaky_relu_task_float, &c);
	case AIR_F64: return run_unary(call, leaky_relu_task_double, &c);
	default: return bad_dtype("leaky_relu", call->in[0].dtype);
	}
}

/* elu: a = alpha * scale, b = scale, d = input_scale; NaN stays NaN (it is
 * not > 0, and expm1 keeps it) */
UNARY_TASK(elu, float, float, x > 0.0f ? x * (float)c->b : expm1f(x * (float)c->d) * (float)c->a)
UNARY_TASK(elu, double, double, x > 0.0 ? x * c->b : expm1(x * c->d) * c->a)
air_status kref_elu(const k_call *call)
{
	unary_ctx c = {0};
	c.a = call->attrs[0].f * call->attrs[1].f;
	c.b = call->attrs[1].f;
	c.d = call->attrs[2].f;
	switch (call->in[0].dtype) {
	case AIR_F32: return run_unary(call, elu_task_float, &c);
	case AIR_F64: return run_unary(call, elu_task_double, &c);
	default: return bad_dtype("elu", call->in[0].dtype);
	}
}

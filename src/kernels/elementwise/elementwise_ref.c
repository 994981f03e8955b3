/* elementwise.c - reference kernels of the elementwise ops: unary and
 * binary (broadcasting) ops over f32, f64 and the integer types, where,
 * and cast between all dtypes. Loops are generated per (op, dtype) by
 * macros so each inner loop is a plain typed loop the compiler vectorizes.
 * These are the oracle: written for clarity and exact PyTorch semantics
 * first, speed second. */
#include "kernels/elementwise/elementwise_ref.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "core/error.h"
#include "kernels/common/half.h"
#include "kernels/elementwise/bcast.h"

/* the same generated loop serves signed and unsigned types, where "x < 0"
 * is always false for the unsigned ones; that is intended */
#pragma GCC diagnostic ignored "-Wtype-limits"

typedef uint8_t kbool;

/* ---- unary ---------------------------------------------------------- */

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

static air_status bad_dtype(const char *op, air_dtype dt)
{
	return air_error(AIR_UNSUPPORTED, "%s: no reference kernel for %s", op, air_dtype_name(dt));
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

/* ---- binary (broadcasting) ----------------------------------------- */

typedef struct {
	kb_plan plan;
	const void *a, *b, *cond;
	void *y;
} binary_ctx;

/* One task handles a block of rows; the inner loop is specialized for the
 * common stride patterns so it vectorizes. */
#define BINARY_TASK(name, TI, TO, EXPR)                                                 \
	static void name##_btask_##TI(void *p, int64_t t, int th)                       \
	{                                                                               \
		const binary_ctx *c = p;                                                \
		const kb_plan *pl = &c->plan;                                           \
		int64_t per = kb_rows_per_task(pl), r0 = t * per;                       \
		int64_t r1 = r0 + per < pl->rows ? r0 + per : pl->rows, n = pl->inner;  \
		int64_t sa = pl->strides[0][pl->rank - 1], sb = pl->strides[1][pl->rank - 1]; \
		for (int64_t r = r0; r < r1; r++) {                                     \
			int64_t off[3];                                                 \
			kb_row(pl, r, off);                                             \
			const TI *as = (const TI *)c->a + off[0];                       \
			const TI *bs = (const TI *)c->b + off[1];                       \
			TO *ys = (TO *)c->y + r * n;                                    \
			if (sa == 1 && sb == 1) {                                       \
				for (int64_t i = 0; i < n; i++) {                       \
					TI a = as[i], b = bs[i];                        \
					ys[i] = (TO)(EXPR);                             \
				}                                                       \
			} else if (sa == 1 && sb == 0) {                                \
				TI b = bs[0];                                           \
				for (int64_t i = 0; i < n; i++) {                       \
					TI a = as[i];                                   \
					ys[i] = (TO)(EXPR);                             \
				}                                                       \
			} else if (sa == 0 && sb == 1) {                                \
				TI a = as[0];                                           \
				for (int64_t i = 0; i < n; i++) {                       \
					TI b = bs[i];                                   \
					ys[i] = (TO)(EXPR);                             \
				}                                                       \
			} else {                                                        \
				for (int64_t i = 0; i < n; i++) {                       \
					TI a = as[i * sa], b = bs[i * sb];              \
					ys[i] = (TO)(EXPR);                             \
				}                                                       \
			}                                                               \
		}                                                                       \
	}

static air_status run_binary(const k_call *call, rt_task_fn fn)
{
	binary_ctx c;
	const k_tensor *ins[2] = {&call->in[0], &call->in[1]};
	AIR_TRY(kb_make(&c.plan, &call->out[0], ins, 2));
	c.a = call->in[0].data;
	c.b = call->in[1].data;
	c.y = call->out[0].data;
	int64_t per = kb_rows_per_task(&c.plan);
	rt_pool_run(call->pool, (c.plan.rows + per - 1) / per, fn, &c);
	return AIR_OK;
}

#define BIN_TASKS_FLOAT(name, TO, EXPR)         \
	BINARY_TASK(name, float, TO, EXPR)      \
	BINARY_TASK(name, double, TO, EXPR)
#define BIN_TASKS_INT(name, TO, EXPR)           \
	BINARY_TASK(name, int64_t, TO, EXPR)    \
	BINARY_TASK(name, int32_t, TO, EXPR)    \
	BINARY_TASK(name, int16_t, TO, EXPR)    \
	BINARY_TASK(name, int8_t, TO, EXPR)     \
	BINARY_TASK(name, uint8_t, TO, EXPR)
#define BIN_FLOAT_CASES(name)                                          \
	case AIR_F32: return run_binary(call, name##_btask_float);     \
	case AIR_F64: return run_binary(call, name##_btask_double);
#define BIN_INT_CASES(name)                                            \
	case AIR_I64: return run_binary(call, name##_btask_int64_t);   \
	case AIR_I32: return run_binary(call, name##_btask_int32_t);   \
	case AIR_I16: return run_binary(call, name##_btask_int16_t);   \
	case AIR_I8: return run_binary(call, name##_btask_int8_t);     \
	case AIR_U8: return run_binary(call, name##_btask_uint8_t);

/* integer + - * wrap like torch, computed in unsigned to avoid UB */
#define WRAP(op, a, b) ((uint64_t)(a) op (uint64_t)(b))

#define BIN_SAME_FLOAT(name, EXPR)               \
	BINARY_TASK(name, float, float, EXPR)    \
	BINARY_TASK(name, double, double, EXPR)
#define BIN_SAME_INT(name, EXPR)                 \
	BINARY_TASK(name, int64_t, int64_t, EXPR) \
	BINARY_TASK(name, int32_t, int32_t, EXPR) \
	BINARY_TASK(name, int16_t, int16_t, EXPR) \
	BINARY_TASK(name, int8_t, int8_t, EXPR)   \
	BINARY_TASK(name, uint8_t, uint8_t, EXPR)

#define NUM_BINARY(name, EXPRF, EXPRI)                                  \
	BIN_SAME_FLOAT(name, EXPRF)                                     \
	BIN_SAME_INT(name, EXPRI)                                       \
	air_status kref_##name(const k_call *call)                      \
	{                                                               \
		switch (call->in[0].dtype) {                            \
			BIN_FLOAT_CASES(name)                           \
			BIN_INT_CASES(name)                             \
		default: return bad_dtype(#name, call->in[0].dtype);    \
		}                                                       \
	}

/* NaN propagates through maximum/minimum, as in torch */
#define FMAX(a, b) ((a) != (a) ? (a) : (b) != (b) ? (b) : (a) > (b) ? (a) : (b))
#define FMIN(a, b) ((a) != (a) ? (a) : (b) != (b) ? (b) : (a) < (b) ? (a) : (b))
NUM_BINARY(add, a + b, WRAP(+, a, b))
NUM_BINARY(sub, a - b, WRAP(-, a, b))
NUM_BINARY(mul, a * b, WRAP(*, a, b))
NUM_BINARY(maximum, FMAX(a, b), (a > b ? a : b))
NUM_BINARY(minimum, FMIN(a, b), (a < b ? a : b))

/* true division: floats only (the lowering casts integers to the result
 * dtype first, as torch promotes int / int to float) */
BIN_SAME_FLOAT(div, a / b)
air_status kref_div(const k_call *call)
{
	switch (call->in[0].dtype) {
		BIN_FLOAT_CASES(div)
	default: return bad_dtype("div", call->in[0].dtype);
	}
}

/* Integer division by zero is an error in torch; the tasks flag it and the
 * kernel reports it after the loop. */
static _Thread_local int int_div_by_zero;
static int64_t ifloordiv(int64_t a, int64_t b)
{
	if (b == 0) {
		int_div_by_zero = 1;
		return 0;
	}
	if (a == INT64_MIN && b == -1)
		return INT64_MIN; /* wraps, as torch */
	int64_t q = a / b;
	if ((a % b != 0) && ((a < 0) != (b < 0)))
		q--;
	return q;
}
static int64_t iremainder(int64_t a, int64_t b)
{
	if (b == 0) {
		int_div_by_zero = 1;
		return 0;
	}
	if (b == -1)
		return 0;
	int64_t r = a % b;
	if (r != 0 && ((r < 0) != (b < 0)))
		r += b;
	return r;
}
/* torch's floor division of floats: from fmod rather than floor(a / b), so
 * that the quotient is exact where a / b rounds up to an integer (Python's
 * 1 // 0.1 is 9, floor(1 / 0.1) is 10) and -5 // inf is -1 */
#define FLOORDIV_FLOAT(T, FMOD, FLOOR)                               \
	static T floordiv_##T(T a, T b)                            \
	{                                                          \
		if (b == 0)                                        \
			return a / b;                              \
		T mod = FMOD(a, b), div = (a - mod) / b;           \
		if (mod != 0 && (b < 0) != (mod < 0))              \
			div -= 1;                                  \
		if (div == 0)                                      \
			return copysign(0, a / b);                 \
		T fl = FLOOR(div);                                 \
		if (div - fl > (T)0.5)                             \
			fl += 1;                                   \
		return fl;                                         \
	}
FLOORDIV_FLOAT(float, fmodf, floorf)
FLOORDIV_FLOAT(double, fmod, floor)

static double fremainder(double a, double b)
{
	double r = fmod(a, b);
	if (r != 0 && ((r < 0) != (b < 0)))
		r += b;
	return r;
}
static float fremainderf(float a, float b)
{
	float r = fmodf(a, b);
	if (r != 0 && ((r < 0) != (b < 0)))
		r += b;
	return r;
}
/* C's % truncates toward zero: the sign of the dividend, as torch.fmod */
static int64_t ifmod(int64_t a, int64_t b)
{
	if (b == 0) {
		int_div_by_zero = 1;
		return 0;
	}
	return b == -1 ? 0 : a % b;
}
static _Thread_local int ipow_negative;
static int64_t ipow(int64_t a, int64_t b)
{
	if (b < 0) {
		if (a == 1)
			return 1;
		if (a == -1)
			return (b & 1) ? -1 : 1;
		ipow_negative = 1;
		return 0;
	}
	uint64_t r = 1, x = (uint64_t)a;
	while (b) {
		if (b & 1)
			r *= x;
		x *= x;
		b >>= 1;
	}
	return (int64_t)r;
}

static air_status run_checked(const k_call *call, rt_task_fn fn, const char *op)
{
	/* serial so the thread-local flag sees every element */
	k_call serial = *call;
	serial.pool = NULL;
	int_div_by_zero = 0;
	ipow_negative = 0;
	AIR_TRY(run_binary(&serial, fn));
	if (int_div_by_zero)
		return air_error(AIR_INVALID_ARGUMENT, "%s: integer division by zero", op);
	if (ipow_negative)
		return air_error(AIR_INVALID_ARGUMENT, "%s: integers to negative integer powers are not allowed", op);
	return AIR_OK;
}

#define INT_CHECKED_CASES(name)                                                       \
	case AIR_I64: return run_checked(call, name##_btask_int64_t, #name);         \
	case AIR_I32: return run_checked(call, name##_btask_int32_t, #name);         \
	case AIR_I16: return run_checked(call, name##_btask_int16_t, #name);         \
	case AIR_I8: return run_checked(call, name##_btask_int8_t, #name);           \
	case AIR_U8: return run_checked(call, name##_btask_uint8_t, #name);

#define CHECKED_BINARY(name, EXPRF, EXPRD, EXPRI)                     \
	BINARY_TASK(name, float, float, EXPRF)                        \
	BINARY_TASK(name, double, double, EXPRD)                      \
	BIN_SAME_INT(name, EXPRI)                                     \
	air_status kref_##name(const k_call *call)                    \
	{                                                             \
		switch (call->in[0].dtype) {                          \
			BIN_FLOAT_CASES(name)                         \
			INT_CHECKED_CASES(name)                       \
		default: return bad_dtype(#name, call->in[0].dtype);  \
		}                                                     \
	}

CHECKED_BINARY(floor_divide, floordiv_float(a, b), floordiv_double(a, b), ifloordiv(a, b))
CHECKED_BINARY(remainder, fremainderf(a, b), fremainder(a, b), iremainder(a, b))
CHECKED_BINARY(fmod, fmodf(a, b), fmod(a, b), ifmod(a, b))
CHECKED_BINARY(pow, powf(a, b), pow(a, b), ipow(a, b))

/* comparisons and logical ops: any dtype in, bool out */
#define BOOL_BINARY(name, EXPR)                                         \
	BINARY_TASK(name, float, kbool, EXPR)                           \
	BINARY_TASK(name, double, kbool, EXPR)                          \
	BIN_TASKS_INT(name, kbool, EXPR)                                \
	air_status kref_##name(const k_call *call)                      \
	{                                                               \
		switch (call->in[0].dtype) {                            \
			BIN_FLOAT_CASES(name)                           \
		case AIR_BOOL: return run_binary(call, name##_btask_uint8_t); \
			BIN_INT_CASES(name)                             \
		default: return bad_dtype(#name, call->in[0].dtype);    \
		}                                                       \
	}

BOOL_BINARY(eq, a == b)
BOOL_BINARY(ne, a != b)
BOOL_BINARY(lt, a < b)
BOOL_BINARY(le, a <= b)
BOOL_BINARY(gt, a > b)
BOOL_BINARY(ge, a >= b)
BOOL_BINARY(logical_and, (a != 0) && (b != 0))
BOOL_BINARY(logical_or, (a != 0) || (b != 0))
BOOL_BINARY(logical_xor, (a != 0) != (b != 0))

/* bitwise ops: integers and bool */
#define BITWISE_BINARY(name, EXPR)                                      \
	BIN_SAME_INT(name, EXPR)                                        \
	air_status kref_##name(const k_call *call)                      \
	{                                                               \
		switch (call->in[0].dtype) {                            \
		case AIR_BOOL: return run_binary(call, name##_btask_uint8_t); \
			BIN_INT_CASES(name)                             \
		default: return bad_dtype(#name, call->in[0].dtype);    \
		}                                                       \
	}
BITWISE_BINARY(bitwise_and, a & b)
BITWISE_BINARY(bitwise_or, a | b)
BITWISE_BINARY(bitwise_xor, a ^ b)

/* ---- where ---------------------------------------------------------- */

#define WHERE_TASK(T)                                                                   \
	static void where_task_##T(void *p, int64_t t, int th)                          \
	{                                                                               \
		const binary_ctx *c = p;                                                \
		const kb_plan *pl = &c->plan;                                           \
		int64_t per = kb_rows_per_task(pl), r0 = t * per;                       \
		int64_t r1 = r0 + per < pl->rows ? r0 + per : pl->rows, n = pl->inner;  \
		int64_t sc = pl->strides[0][pl->rank - 1], sa = pl->strides[1][pl->rank - 1]; \
		int64_t sb = pl->strides[2][pl->rank - 1];                              \
		for (int64_t r = r0; r < r1; r++) {                                     \
			int64_t off[3];                                                 \
			kb_row(pl, r, off);                                             \
			const kbool *cs = (const kbool *)c->cond + off[0];              \
			const T *as = (const T *)c->a + off[1];                         \
			const T *bs = (const T *)c->b + off[2];                         \
			T *ys = (T *)c->y + r * n;                                      \
			for (int64_t i = 0; i < n; i++)                                 \
				ys[i] = cs[i * sc] ? as[i * sa] : bs[i * sb];           \
		}                                                                       \
	}
WHERE_TASK(uint8_t)
WHERE_TASK(uint16_t)
WHERE_TASK(uint32_t)
WHERE_TASK(uint64_t)

air_status kref_where(const k_call *call)
{
	binary_ctx c;
	const k_tensor *ins[3] = {&call->in[0], &call->in[1], &call->in[2]};
	AIR_TRY(kb_make(&c.plan, &call->out[0], ins, 3));
	c.cond = call->in[0].data;
	c.a = call->in[1].data;
	c.b = call->in[2].data;
	c.y = call->out[0].data;
	rt_task_fn fn;
	switch (air_dtype_size(call->out[0].dtype)) {
	case 1: fn = where_task_uint8_t; break;
	case 2: fn = where_task_uint16_t; break;
	case 4: fn = where_task_uint32_t; break;
	case 8: fn = where_task_uint64_t; break;
	default: return bad_dtype("where", call->out[0].dtype);
	}
	int64_t per = kb_rows_per_task(&c.plan);
	rt_pool_run(call->pool, (c.plan.rows + per - 1) / per, fn, &c);
	return AIR_OK;
}

/* ---- cast ----------------------------------------------------------- */

typedef struct {
	const void *x;
	void *y;
	int64_t n;
	air_dtype from, to;
} cast_ctx;

static bool is_float(air_dtype d)
{
	return d == AIR_F32 || d == AIR_F64 || d == AIR_F16 || d == AIR_BF16;
}

static double load_f(const void *p, air_dtype d, int64_t i)
{
	switch (d) {
	case AIR_F32: return ((const float *)p)[i];
	case AIR_F64: return ((const double *)p)[i];
	case AIR_F16: return k_f16_to_f32(((const uint16_t *)p)[i]);
	case AIR_BF16: return k_bf16_to_f32(((const uint16_t *)p)[i]);
	case AIR_I64: return (double)((const int64_t *)p)[i];
	case AIR_I32: return ((const int32_t *)p)[i];
	case AIR_I16: return ((const int16_t *)p)[i];
	case AIR_I8: return ((const int8_t *)p)[i];
	case AIR_U8: case AIR_BOOL: return ((const uint8_t *)p)[i];
	default: return 0;
	}
}

static int64_t load_i(const void *p, air_dtype d, int64_t i)
{
	switch (d) {
	case AIR_I64: return ((const int64_t *)p)[i];
	case AIR_I32: return ((const int32_t *)p)[i];
	case AIR_I16: return ((const int16_t *)p)[i];
	case AIR_I8: return ((const int8_t *)p)[i];
	case AIR_U8: case AIR_BOOL: return ((const uint8_t *)p)[i];
	default: return 0;
	}
}

/* float -> integer without undefined behaviour: NaN and out-of-range values
 * give what x86's cvtt* give for torch. torch converts to i64 with a 64-bit
 * conversion (INT64_MIN when out of range) and to the narrower types with a
 * 32-bit one (INT32_MIN, then truncated: 3e9 -> i16 is 0, not 0xa300). */
static int64_t f2i(double v)
{
	if (!(v >= -9223372036854775808.0 && v < 9223372036854775808.0))
		return INT64_MIN;
	return (int64_t)v;
}

static int64_t f2i32(double v)
{
	if (!(v > -2147483649.0 && v < 2147483648.0))
		return INT32_MIN;
	return (int32_t)v;
}

static void store(void *p, air_dtype d, int64_t i, double f, int64_t v, bool from_float)
{
	switch (d) {
	case AIR_F32: ((float *)p)[i] = from_float ? (float)f : (float)v; break;
	case AIR_F64: ((double *)p)[i] = from_float ? f : (double)v; break;
	case AIR_F16: ((uint16_t *)p)[i] = k_f32_to_f16(from_float ? (float)f : (float)v); break;
	case AIR_BF16: ((uint16_t *)p)[i] = k_f32_to_bf16(from_float ? (float)f : (float)v); break;
	case AIR_BOOL: ((uint8_t *)p)[i] = from_float ? f != 0 : v != 0; break;
	default: {
		uint64_t u = (uint64_t)(!from_float ? v : d == AIR_I64 ? f2i(f) : f2i32(f)); /* wraps, as torch */
		switch (d) {
		case AIR_I64: ((int64_t *)p)[i] = (int64_t)u; break;
		case AIR_I32: ((uint32_t *)p)[i] = (uint32_t)u; break;
		case AIR_I16: ((uint16_t *)p)[i] = (uint16_t)u; break;
		case AIR_I8: case AIR_U8: ((uint8_t *)p)[i] = (uint8_t)u; break;
		default: break;
		}
	}
	}
}

static void cast_task(void *p, int64_t t, int th)
{
	const cast_ctx *c = p;
	int64_t lo = t * K_GRAIN, hi = lo + K_GRAIN < c->n ? lo + K_GRAIN : c->n;
	if (c->from == AIR_F32 && c->to == AIR_F32) {
		memcpy((float *)c->y + lo, (const float *)c->x + lo, (size_t)(hi - lo) * 4);
		return;
	}
	bool ff = is_float(c->from);
	for (int64_t i = lo; i < hi; i++) {
		if (ff)
			store(c->y, c->to, i, load_f(c->x, c->from, i), 0, true);
		else
			store(c->y, c->to, i, 0, load_i(c->x, c->from, i), false);
	}
}

air_status kref_cast(const k_call *call)
{
	cast_ctx c = {call->in[0].data, call->out[0].data, call->out[0].numel, call->in[0].dtype,
		      call->out[0].dtype};
	if (c.from == c.to) {
		if (c.n > 0) /* empty tensors may have NULL data */
			memcpy(c.y, c.x, (size_t)c.n * air_dtype_size(c.to));
		return AIR_OK;
	}
	rt_pool_run(call->pool, (c.n + K_GRAIN - 1) / K_GRAIN, cast_task, &c);
	return AIR_OK;
}

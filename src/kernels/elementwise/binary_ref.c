/* binary_ref.c - reference kernels of the binary elementwise ops, with
 * broadcasting (arithmetic, division and powers, comparisons, logical and
 * bitwise ops), and of where. */
#include "kernels/elementwise/elementwise_ref.h"

#include <math.h>
#include <stdint.h>

#include "core/error.h"
#include "kernels/elementwise/bcast.h"
#include "kernels/elementwise/elementwise_ref_internal.h"

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

/* cast_ref.c - reference kernel of cast between all dtypes, with torch's
 * results for NaN and out-of-range floats converted to integers. */
#include "kernels/elementwise/elementwise_ref.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "kernels/common/half.h"

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

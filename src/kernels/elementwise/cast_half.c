/* cast_half.c - f32 <-> bf16 and f32 <-> f16 over whole tensors, split over
 * the pool. bf16 is the top half of an f32, so both directions are integer
 * loops the vectorizer takes (built with the elementwise loops' flags, see
 * CMakeLists.txt); f16 goes through F16C where the CPU has it. Results equal
 * cast_ref's bit for bit: round to nearest even, NaN kept quiet. The scalar
 * per-element conversion cost a bf16 LLaMA's decode ~5 ms a token on its
 * KV caches (2 x 24 casts of [1, 4, ~140, 64] a token, 160M config). */
#include "kernels/elementwise/cast_half.h"

#include "kernels/common/cpu.h"
#include "kernels/common/half.h"
#include "kernels/elementwise/elementwise_ref.h"

typedef struct half_job {
	const void *x;
	void *y;
	air_dtype from, to;
	int64_t n;
	bool f16c;
} half_job;

static void bf16_to_f32(const uint16_t *restrict x, uint32_t *restrict y, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		y[i] = (uint32_t)x[i] << 16;
}

static void f32_to_bf16(const uint32_t *restrict x, uint16_t *restrict y, int64_t n)
{
	for (int64_t i = 0; i < n; i++) {
		uint32_t u = x[i];
		uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1)) >> 16;
		uint32_t quiet = (u >> 16) | 0x40;
		y[i] = (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? quiet : rounded);
	}
}

static bool has_f16c(void)
{
#ifdef AIR_HAVE_X86
	return (kcpu_features() & KCPU_F16C) && (kcpu_features() & KCPU_AVX2);
#else
	return false;
#endif
}

static void narrow(air_dtype to, const float *x, uint16_t *y, int64_t n, bool f16c)
{
	if (to == AIR_BF16) {
		f32_to_bf16((const uint32_t *)x, y, n);
	} else if (f16c) {
		kcast_f32_to_f16_f16c(x, y, n);
	} else {
		for (int64_t i = 0; i < n; i++)
			y[i] = k_f32_to_f16(x[i]);
	}
}

static void widen(air_dtype from, const uint16_t *x, float *y, int64_t n, bool f16c)
{
	if (from == AIR_BF16) {
		bf16_to_f32(x, (uint32_t *)y, n);
	} else if (f16c) {
		kcast_f16_to_f32_f16c(x, y, n);
	} else {
		for (int64_t i = 0; i < n; i++)
			y[i] = k_f16_to_f32(x[i]);
	}
}

static void half_task(void *ctx, int64_t t, int thread)
{
	(void)thread;
	const half_job *j = ctx;
	const int64_t i0 = t * K_GRAIN, n = j->n - i0 < K_GRAIN ? j->n - i0 : K_GRAIN;
	if (j->to == AIR_F32)
		widen(j->from, (const uint16_t *)j->x + i0, (float *)j->y + i0, n, j->f16c);
	else
		narrow(j->to, (const float *)j->x + i0, (uint16_t *)j->y + i0, n, j->f16c);
}

void kcast_half(rt_pool *pool, air_dtype from, air_dtype to, const void *x, void *y, int64_t n)
{
	half_job j = {x, y, from, to, n, has_f16c()};
	if (n > 0)
		rt_pool_run(pool, (n + K_GRAIN - 1) / K_GRAIN, half_task, &j);
}

static bool half_supports(const k_call *call)
{
	air_dtype from = call->in[0].dtype, to = call->out[0].dtype;
	bool half_from = from == AIR_BF16 || from == AIR_F16, half_to = to == AIR_BF16 || to == AIR_F16;
	return (half_from && to == AIR_F32) || (from == AIR_F32 && half_to);
}

static air_status half_run(const k_call *call)
{
	if (call->in[0].numel != call->out[0].numel)
		return kref_cast(call);
	kcast_half(call->pool, call->in[0].dtype, call->out[0].dtype, call->in[0].data, call->out[0].data,
		   call->out[0].numel);
	return AIR_OK;
}

const k_kernel kfast_cast_half = {"cast_half", 0, half_supports, NULL, NULL, NULL, half_run, K_INPLACE_ANY};

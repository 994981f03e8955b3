/* vmath.avx2.c - the AVX2+FMA array kernels of vmath.h: 16 floats per step
 * (two independent vectors for the out-of-order core), then one vector, then
 * a masked tail computed by the same code, so every element's result is the
 * same wherever it sits in the array. */
#include <stdint.h>

#include "kernels/vmath/vmath_avx2.h"
#include "kernels/vmath/vmath_impl.h"

static inline __m256i kv_tail_mask8(int64_t left)
{
	const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
	return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)left), lane);
}

#define KV_AVX2_LOOP_(name, doc)                                                        \
	void kv_##name##_f32_avx2(const float *x, float *y, int64_t n)                  \
	{                                                                               \
		int64_t i = 0;                                                          \
		for (; i + 16 <= n; i += 16) {                                          \
			__m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8); \
			_mm256_storeu_ps(y + i, kv_##name##8(a));                       \
			_mm256_storeu_ps(y + i + 8, kv_##name##8(b));                   \
		}                                                                       \
		for (; i + 8 <= n; i += 8)                                              \
			_mm256_storeu_ps(y + i, kv_##name##8(_mm256_loadu_ps(x + i)));      \
		if (i < n) {                                                            \
			__m256i m = kv_tail_mask8(n - i);                               \
			_mm256_maskstore_ps(y + i, m, kv_##name##8(_mm256_maskload_ps(x + i, m))); \
		}                                                                       \
	}
KV_FUNCS(KV_AVX2_LOOP_)
#undef KV_AVX2_LOOP_

/* vmath.avx512.c - the AVX-512 array kernels of vmath.h, for the functions
 * that have a 16-lane twin in vmath_avx512.h (KV_AVX512_FUNCS); vmath.c's
 * table takes the AVX2 kernels for the rest. Each gives bitwise what its
 * AVX2 kernel gives (test_vmath compares them), at twice the width: erf
 * GELU over ViT-Tiny's [8, 197, 768] activations took 0.64 ms a call on 8
 * lanes against eager's 0.23. 32 floats per step (two independent
 * vectors), then one vector, then a masked tail through the same code. */
#include <stdint.h>

#include "kernels/vmath/vmath_avx512.h"
#include "kernels/vmath/vmath_impl.h"

#define KV_AVX512_LOOP_(name)                                                                   \
	void kv_##name##_f32_avx512(const float *x, float *y, int64_t n)                        \
	{                                                                                       \
		int64_t i = 0;                                                                  \
		for (; i + 32 <= n; i += 32) {                                                  \
			__m512 a = _mm512_loadu_ps(x + i), b = _mm512_loadu_ps(x + i + 16);     \
			_mm512_storeu_ps(y + i, kv_##name##16(a));                              \
			_mm512_storeu_ps(y + i + 16, kv_##name##16(b));                         \
		}                                                                               \
		for (; i + 16 <= n; i += 16)                                                    \
			_mm512_storeu_ps(y + i, kv_##name##16(_mm512_loadu_ps(x + i)));         \
		if (i < n) {                                                                    \
			__mmask16 m = (__mmask16)((1u << (n - i)) - 1);                         \
			_mm512_mask_storeu_ps(y + i, m, kv_##name##16(_mm512_maskz_loadu_ps(m, x + i))); \
		}                                                                               \
	}
KV_AVX512_FUNCS(KV_AVX512_LOOP_)
#undef KV_AVX512_LOOP_

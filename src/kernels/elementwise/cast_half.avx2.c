/* cast_half.avx2.c - f16 <-> f32 with F16C, 8 values an instruction; the
 * tails through half.h. Compiled with the AVX2 flags (-mf16c among them). */
#include <immintrin.h>

#include "kernels/common/half.h"
#include "kernels/elementwise/cast_half.h"

void kcast_f16_to_f32_f16c(const uint16_t *x, float *y, int64_t n)
{
	int64_t i = 0;
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
	for (; i < n; i++)
		y[i] = k_f16_to_f32(x[i]);
}

void kcast_f32_to_f16_f16c(const float *x, uint16_t *y, int64_t n)
{
	int64_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 v = _mm256_loadu_ps(x + i);
		if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q))) {
			/* F16C keeps a NaN's payload; torch (and cast_ref) give 0x7e00 */
			for (int k = 0; k < 8; k++)
				y[i + k] = k_f32_to_f16(x[i + k]);
			continue;
		}
		_mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
	}
	for (; i < n; i++)
		y[i] = k_f32_to_f16(x[i]);
}

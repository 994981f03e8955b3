/* rope.avx2.c - a row of the rotary embedding (kernels/rope/rope_ref.h) 8 lanes
 * at a time: the first half takes -x[i + h] * s, the second x[i - h] * s. */
#include <immintrin.h>

#include "kernels/rope/rope_ref.h"

/* y = x * c + sign * other * s over h floats (sign -1 or 1) */
static void half(const float *x, const float *other, const float *c, const float *s, float *y, int64_t h,
		 float sign)
{
	const __m256 flip = _mm256_set1_ps(sign < 0 ? -0.0f : 0.0f);
	int64_t i = 0;
	for (; i + 8 <= h; i += 8) {
		__m256 a = _mm256_mul_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(c + i));
		__m256 b = _mm256_mul_ps(_mm256_xor_ps(_mm256_loadu_ps(other + i), flip), _mm256_loadu_ps(s + i));
		_mm256_storeu_ps(y + i, _mm256_add_ps(a, b));
	}
	for (; i < h; i++)
		y[i] = x[i] * c[i] + sign * other[i] * s[i];
}

void krope_row__avx2(const float *x, const float *c, const float *s, float *y, int64_t n)
{
	const int64_t h = n / 2;
	half(x, x + h, c, s, y, h, -1.0f);
	half(x + h, x, c + h, s + h, y + h, h, 1.0f);
}

/* quantize.avx2.c - the quantize op's loop on AVX2 (quantize.h): 8 values a step as the
 * reference computes them, narrowed to bytes through a shuffle; the tail by the reference. */
#include <immintrin.h>

#include "kernels/gemm_q/quantize.h"

void kqz_run_avx2(const kqz_params *p, const float *x, void *q, int64_t n)
{
	char *out = q;
	const __m256 inv = _mm256_set1_ps(p->inv), zp = _mm256_set1_ps(p->zp);
	const __m256 lo = _mm256_set1_ps(p->qmin), hi = _mm256_set1_ps(p->qmax);
	/* the low byte of each 32-bit lane, in order, into the low 4 bytes of each 128-bit half */
	const __m256i pick = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8,
					      12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
	int64_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 t = _mm256_mul_ps(_mm256_loadu_ps(x + i), inv);
		t = _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
		t = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(t, zp), lo), hi);
		const __m256i b = _mm256_shuffle_epi8(_mm256_cvtps_epi32(t), pick);
		const int32_t w0 = _mm256_extract_epi32(b, 0), w1 = _mm256_extract_epi32(b, 4);
		__builtin_memcpy(out + i, &w0, 4);
		__builtin_memcpy(out + i + 4, &w1, 4);
	}
	kqz_run_scalar(p, x + i, out + i, n - i);
}

/* quantize.avx512.c - the quantize op's loop on AVX-512 (quantize.h): 16 values a step, the
 * product, vrndscaleps to nearest even, the zero point and the clamp in f32 (the reference's
 * operations in its order), then narrowed to bytes; the tail under a mask. */
#include <immintrin.h>

#include "kernels/gemm_q/quantize.h"

static inline __m128i one16(const kqz_params *p, __m512 x)
{
	__m512 t = _mm512_mul_ps(x, _mm512_set1_ps(p->inv));
	t = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	t = _mm512_add_ps(t, _mm512_set1_ps(p->zp));
	t = _mm512_min_ps(_mm512_max_ps(t, _mm512_set1_ps(p->qmin)), _mm512_set1_ps(p->qmax));
	return _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(t)); /* in range: truncation is exact */
}

void kqz_run_avx512(const kqz_params *p, const float *x, void *q, int64_t n)
{
	char *out = q;
	int64_t i = 0;
	for (; i + 16 <= n; i += 16)
		_mm_storeu_si128((__m128i *)(out + i), one16(p, _mm512_loadu_ps(x + i)));
	if (i < n) {
		const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
		_mm_mask_storeu_epi8(out + i, m, one16(p, _mm512_maskz_loadu_ps(m, x + i)));
	}
}

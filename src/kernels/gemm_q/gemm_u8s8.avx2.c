/* gemm_u8s8.avx2.c - the int8 product's tile on AVX2 (gemm_u8s8.h): up to 2 rows of A against
 * one packed block of 16 channels. AVX2 has no vpdpbusd, and vpmaddubsw (u8 x s8 -> s16 pairs)
 * saturates (255 * 127 * 2 > 32767), so both sides are widened to s16 and vpmaddwd sums pairs
 * into s32 exactly: each 16 weight bytes (4 channels x 4 k) widen once and serve both rows; the
 * two partial sums a channel gets are added at the end (vphaddd). Slower than VNNI, exact. */
#include <immintrin.h>
#include <string.h>

#include "kernels/gemm_q/gemm_u8s8.h"

#define AIR_INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 8")

/* 4 activation bytes widened to s16 and repeated over the 16 lanes */
AIR_INLINE __m256i act4(const uint8_t *a, int64_t n)
{
	uint8_t t[4] = {0, 0, 0, 0};
	int32_t v;
	if (n >= 4) {
		memcpy(&v, a, 4);
	} else { /* zeros past K (the weight is zero there; this keeps the read inside the row) */
		for (int64_t i = 0; i < n; i++)
			t[i] = a[i];
		memcpy(&v, t, 4);
	}
	return _mm256_broadcastq_epi64(_mm_cvtepu8_epi16(_mm_cvtsi32_si128(v)));
}

/* 16 channels' s32 sums, in order, from the 4 accumulators of 4 channels x 2 partial sums */
AIR_INLINE void finish(const __m256i acc[4], __m256i out[2])
{
	out[0] = _mm256_permute4x64_epi64(_mm256_hadd_epi32(acc[0], acc[1]), _MM_SHUFFLE(3, 1, 2, 0));
	out[1] = _mm256_permute4x64_epi64(_mm256_hadd_epi32(acc[2], acc[3]), _MM_SHUFFLE(3, 1, 2, 0));
}

AIR_INLINE void store8(const ku8_epi *ep, __m256i sum, int64_t n0, int valid, char *C, int64_t off)
{
	const __m256 zero = _mm256_setzero_ps();
	float bias[8] = {0};
	if (ep->bias)
		memcpy(bias, ep->bias + n0, (size_t)valid * sizeof(float));
	const __m256i zcs = _mm256_mullo_epi32(_mm256_set1_epi32(ep->a_zp), _mm256_load_si256((const void *)(ep->colsum + n0)));
	__m256 y = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(sum, zcs)), _mm256_load_ps(ep->scale + n0),
				   _mm256_loadu_ps(bias));
	if (ep->relu)
		y = _mm256_max_ps(y, zero);
	if (ep->out_u8) {
		__m256 t = _mm256_mul_ps(y, _mm256_set1_ps(ep->out_inv));
		t = _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
		t = _mm256_add_ps(t, _mm256_set1_ps(ep->out_zp));
		t = _mm256_min_ps(_mm256_max_ps(t, zero), _mm256_set1_ps(255.0f));
		int32_t q[8];
		_mm256_storeu_si256((__m256i *)q, _mm256_cvtps_epi32(t));
		for (int i = 0; i < valid; i++)
			((uint8_t *)C)[off + i] = (uint8_t)q[i];
	} else if (valid == 8) {
		_mm256_storeu_ps((float *)C + off, y);
	} else {
		float o[8];
		_mm256_storeu_ps(o, y);
		memcpy((float *)C + off, o, (size_t)valid * sizeof(float));
	}
}

AIR_INLINE void tile(const ku8_packed *p, int64_t b, const int MR, const uint8_t *A, int64_t lda, const ku8_epi *ep,
		     char *C, int64_t ldc)
{
	__m256i acc[2][4];
	UNROLL for (int r = 0; r < MR; r++) UNROLL for (int c = 0; c < 4; c++) acc[r][c] = _mm256_setzero_si256();
	const int8_t *wb = p->w + b * p->k4 * KU8_NB * 4;
	for (int64_t g = 0; g < p->k4; g++) {
		__m256i a[2];
		UNROLL for (int r = 0; r < MR; r++) a[r] = act4(A + r * lda + 4 * g, p->K - 4 * g);
		UNROLL for (int c = 0; c < 4; c++)
		{
			const __m256i w = _mm256_cvtepi8_epi16(_mm_load_si128((const __m128i *)(wb + g * 64 + c * 16)));
			UNROLL for (int r = 0; r < MR; r++) acc[r][c] =
				_mm256_add_epi32(acc[r][c], _mm256_madd_epi16(w, a[r]));
		}
	}
	const int64_t n0 = b * KU8_NB, left = p->N - n0;
	UNROLL for (int r = 0; r < MR; r++)
	{
		__m256i sum[2];
		finish(acc[r], sum);
		for (int h = 0; h < 2 && left > 8 * h; h++)
			store8(ep, sum[h], n0 + 8 * h, left - 8 * h >= 8 ? 8 : (int)(left - 8 * h), C,
			       r * ldc + n0 + 8 * h);
	}
}

void ku8_tile_avx2(const ku8_packed *p, int64_t b0, int nb, int m, const uint8_t *A, int64_t lda,
		   const ku8_epi *ep, void *C, int64_t ldc)
{
	for (int64_t b = b0; b < b0 + nb; b++) {
		if (m == 2)
			tile(p, b, 2, A, lda, ep, (char *)C, ldc);
		else if (m == 1)
			tile(p, b, 1, A, lda, ep, (char *)C, ldc);
		else
			ku8_tile_scalar(p, b, 1, m, A, lda, ep, C, ldc);
	}
}

/* gemm_q.avx512.c - the quantized-weight decode kernel on AVX-512 (gemm_q.h): each block of 32
 * weights is widened from its 32 (int8) or 16 (int4) bytes to two vectors of 16 floats,
 * multiplied by the group's scale (s * q is exact in f32: an 11-bit scale times a q of at most
 * 8 bits), and FMA'd into each row of A; two W rows at a time, so up to 16 independent
 * accumulator chains hide the FMA latency even for one row of A. */
#include <immintrin.h>

#include "kernels/gemm_q/gemm_q.h"

#define AIR_INLINE static inline __attribute__((always_inline))

/* The 32 weights of a block starting at byte p of a row, times s: values 0-15 and 16-31. */
AIR_INLINE void block(const int bits, const uint8_t *p, __m512 s, __m512 *lo, __m512 *hi)
{
	if (bits == 8) {
		*lo = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p))), s);
		*hi = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(p + 16)))), s);
		return;
	}
	const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p));
	const __m512i eight = _mm512_set1_epi32(8);
	const __m512i l = _mm512_sub_epi32(_mm512_and_si512(v, _mm512_set1_epi32(15)), eight);
	const __m512i h = _mm512_sub_epi32(_mm512_srli_epi32(v, 4), eight);
	*lo = _mm512_mul_ps(_mm512_cvtepi32_ps(l), s);
	*hi = _mm512_mul_ps(_mm512_cvtepi32_ps(h), s);
}

AIR_INLINE float scale_at(const kq_weight *w, int64_t n, int64_t g)
{
	return _cvtsh_ss(w->scales[n * w->ngroups + g]);
}

/* C rows [0, M) x W rows [n, n + NR). */
AIR_INLINE void tile(const int bits, const int M, const int NR, const kq_weight *w, const float *A, int64_t lda,
		     int64_t n, const float *bias, float *C, int64_t ldc)
{
	__m512 acc[2][4][2];
	for (int j = 0; j < NR; j++)
		for (int r = 0; r < M; r++)
			acc[j][r][0] = acc[j][r][1] = _mm512_setzero_ps();
	const int64_t G = w->group, rb = kq_row_bytes(w), bpb = bits == 8 ? KQ_BLOCK : KQ_BLOCK / 2;
	const uint8_t *q = (const uint8_t *)w->q + n * rb;
	for (int64_t g = 0; g < w->ngroups; g++) {
		__m512 s[2];
		for (int j = 0; j < NR; j++)
			s[j] = _mm512_set1_ps(scale_at(w, n + j, g));
		for (int64_t k = g * G; k < (g + 1) * G; k += KQ_BLOCK) {
			const int64_t off = k / KQ_BLOCK * bpb;
			for (int j = 0; j < NR; j++) {
				__m512 lo, hi;
				block(bits, q + j * rb + off, s[j], &lo, &hi);
				for (int r = 0; r < M; r++) {
					acc[j][r][0] = _mm512_fmadd_ps(lo, _mm512_loadu_ps(A + r * lda + k), acc[j][r][0]);
					acc[j][r][1] = _mm512_fmadd_ps(hi, _mm512_loadu_ps(A + r * lda + k + 16), acc[j][r][1]);
				}
			}
		}
	}
	for (int j = 0; j < NR; j++)
		for (int r = 0; r < M; r++)
			C[r * ldc + n + j] = _mm512_reduce_add_ps(_mm512_add_ps(acc[j][r][0], acc[j][r][1])) +
					     (bias ? bias[n + j] : 0.0f);
}

AIR_INLINE void rows(const int bits, const int M, const kq_weight *w, const float *A, int64_t lda, int64_t n0,
		     int64_t n1, const float *bias, float *C, int64_t ldc)
{
	int64_t n = n0;
	for (; n + 2 <= n1; n += 2)
		tile(bits, M, 2, w, A, lda, n, bias, C, ldc);
	if (n < n1)
		tile(bits, M, 1, w, A, lda, n, bias, C, ldc);
}

#define CASE(bits, m)                                                    \
	case m: rows(bits, m, w, A, lda, n0, n1, bias, C, ldc); return;

void kq_rows_avx512(const kq_weight *w, int m, const float *A, int64_t lda, int64_t n0, int64_t n1,
		    const float *bias, float *C, int64_t ldc)
{
	if (w->bits == 8) {
		switch (m) { CASE(8, 1) CASE(8, 2) CASE(8, 3) default: rows(8, 4, w, A, lda, n0, n1, bias, C, ldc); }
	} else {
		switch (m) { CASE(4, 1) CASE(4, 2) CASE(4, 3) default: rows(4, 4, w, A, lda, n0, n1, bias, C, ldc); }
	}
}

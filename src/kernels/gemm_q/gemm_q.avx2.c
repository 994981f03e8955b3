/* gemm_q.avx2.c - the quantized-weight decode kernel on AVX2+FMA (gemm_q.h): each block of 32
 * weights is widened to four vectors of 8 floats, multiplied by the group's scale (exact in
 * f32) and FMA'd into each row of A; one W row at a time, two accumulator chains per row of A
 * (16 ymm registers: up to 8 accumulators, the widened weights and a scale). */
#include <immintrin.h>

#include "kernels/gemm_q/gemm_q.h"

#define AIR_INLINE static inline __attribute__((always_inline))
/* The loops over the tile's rows are unrolled by pragma so that the accumulator arrays live in
 * registers (-O2 alone kept them on the stack: 3x slower). */

AIR_INLINE __m256 widen8_i8(const uint8_t *p, __m256 s)
{
	return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p))), s);
}

/* The 32 weights of a block at byte p, times s, as v[0..3] = values 0-7, 8-15, 16-23, 24-31. */
AIR_INLINE void block(const int bits, const uint8_t *p, __m256 s, __m256 v[4])
{
	if (bits == 8) {
		_Pragma("GCC unroll 8")
		for (int i = 0; i < 4; i++)
			v[i] = widen8_i8(p + 8 * i, s);
		return;
	}
	const __m256i fifteen = _mm256_set1_epi32(15), eight = _mm256_set1_epi32(8);
	_Pragma("GCC unroll 8")
	for (int i = 0; i < 2; i++) {
		const __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p + 8 * i)));
		const __m256i l = _mm256_sub_epi32(_mm256_and_si256(b, fifteen), eight);
		const __m256i h = _mm256_sub_epi32(_mm256_srli_epi32(b, 4), eight);
		v[i] = _mm256_mul_ps(_mm256_cvtepi32_ps(l), s);
		v[i + 2] = _mm256_mul_ps(_mm256_cvtepi32_ps(h), s);
	}
}

AIR_INLINE float hsum(__m256 v)
{
	__m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	x = _mm_add_ps(x, _mm_movehl_ps(x, x));
	x = _mm_add_ss(x, _mm_movehdup_ps(x));
	return _mm_cvtss_f32(x);
}

AIR_INLINE void one_row(const int bits, const int M, const kq_weight *w, const float *A, int64_t lda, int64_t n,
			const float *bias, float *C, int64_t ldc)
{
	__m256 acc[4][2];
	_Pragma("GCC unroll 8")
	for (int r = 0; r < M; r++)
		acc[r][0] = acc[r][1] = _mm256_setzero_ps();
	const int64_t G = w->group, bpb = bits == 8 ? KQ_BLOCK : KQ_BLOCK / 2;
	const uint8_t *q = (const uint8_t *)w->q + n * kq_row_bytes(w);
	for (int64_t g = 0; g < w->ngroups; g++) {
		const __m256 s = _mm256_set1_ps(_cvtsh_ss(w->scales[n * w->ngroups + g]));
		for (int64_t k = g * G; k < (g + 1) * G; k += KQ_BLOCK) {
			__m256 v[4];
			block(bits, q + k / KQ_BLOCK * bpb, s, v);
			_Pragma("GCC unroll 8")
			for (int r = 0; r < M; r++) {
				const float *a = A + r * lda + k;
				acc[r][0] = _mm256_fmadd_ps(v[0], _mm256_loadu_ps(a), acc[r][0]);
				acc[r][1] = _mm256_fmadd_ps(v[1], _mm256_loadu_ps(a + 8), acc[r][1]);
				acc[r][0] = _mm256_fmadd_ps(v[2], _mm256_loadu_ps(a + 16), acc[r][0]);
				acc[r][1] = _mm256_fmadd_ps(v[3], _mm256_loadu_ps(a + 24), acc[r][1]);
			}
		}
	}
	_Pragma("GCC unroll 8")
	for (int r = 0; r < M; r++)
		C[r * ldc + n] = hsum(_mm256_add_ps(acc[r][0], acc[r][1])) + (bias ? bias[n] : 0.0f);
}

AIR_INLINE void rows(const int bits, const int M, const kq_weight *w, const float *A, int64_t lda, int64_t n0,
		     int64_t n1, const float *bias, float *C, int64_t ldc)
{
	for (int64_t n = n0; n < n1; n++)
		one_row(bits, M, w, A, lda, n, bias, C, ldc);
}

#define CASE(bits, m)                                                    \
	case m: rows(bits, m, w, A, lda, n0, n1, bias, C, ldc); return;

void kq_rows_avx2(const kq_weight *w, int m, const float *A, int64_t lda, int64_t n0, int64_t n1,
		  const float *bias, float *C, int64_t ldc)
{
	if (w->bits == 8) {
		switch (m) { CASE(8, 1) CASE(8, 2) CASE(8, 3) default: rows(8, 4, w, A, lda, n0, n1, bias, C, ldc); }
	} else {
		switch (m) { CASE(4, 1) CASE(4, 2) CASE(4, 3) default: rows(4, 4, w, A, lda, n0, n1, bias, C, ldc); }
	}
}

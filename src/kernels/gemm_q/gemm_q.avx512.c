/* gemm_q.avx512.c - the quantized-weight decode kernel on AVX-512 (gemm_q.h), two W rows at a
 * time against up to 4 rows of A, every block of 32 weights widened in registers:
 *   int4: the 16 bytes of a block zero-extended to 16 lanes; the low and the high nibbles index
 *     (vpermps reads the low 4 bits of each lane) a table of the group's 16 values s * (q - 8),
 *     made once per group: no conversion, no subtraction and no scaling per weight.
 *   int8: sign-extended and converted to f32, FMA'd into per-group partial sums that the group's
 *     scale multiplies once at its end (once per row for the default per-row group).
 * s * q is exact in f32 (an 11-bit scale times a q of at most 8 bits), so the only rounding is
 * the f32 summation's. As the 16-bit-weight kernel does (kernels/gemm/lowp_w.bf16.c), the next
 * tile's W rows are prefetched to L2 while these are read (prefetching past the last row is a
 * harmless hint): one thread's cold decode went from 9 to 20 GB/s (int8) and 7 to 11 (int4). */
#include <immintrin.h>

#include "kernels/gemm_q/gemm_q.h"

#define AIR_INLINE static inline __attribute__((always_inline))
/* The loops over the tile's rows are unrolled by pragma so that the accumulator arrays live in
 * registers (-O2 alone kept them on the stack: 2x slower). */
#define UNROLL _Pragma("GCC unroll 8")

/* The scales of groups [g0, g0 + 16) of row n (fewer at the row's end) as f32, into out: one
 * conversion for 16 groups instead of a scalar one per group (at group 32 that per-group work
 * cost a fifth of the decode kernel's time). */
AIR_INLINE void scales16(const kq_weight *w, int64_t n, int64_t g0, float *out)
{
	const int64_t left = w->ngroups - g0;
	const __mmask16 m = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
	const __m256i h = _mm256_maskz_loadu_epi16(m, w->scales + n * w->ngroups + g0);
	_mm512_storeu_ps(out, _mm512_cvtph_ps(h));
}

/* C rows [0, M) x W rows [n, n + NR), int4. */
AIR_INLINE void tile4(const int M, const int NR, const kq_weight *w, const float *A, int64_t lda, int64_t n,
		      const float *bias, float *C, int64_t ldc)
{
	__m512 acc[2][4][2];
	UNROLL for (int j = 0; j < NR; j++) UNROLL for (int r = 0; r < M; r++) acc[j][r][0] = acc[j][r][1] =
		_mm512_setzero_ps();
	const int64_t G = w->group, rb = kq_row_bytes(w);
	const uint8_t *q = (const uint8_t *)w->q + n * rb;
	const __m512 levels = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
	float sc[2][16];
	for (int64_t g = 0; g < w->ngroups; g++) {
		if (g % 16 == 0)
			UNROLL for (int j = 0; j < NR; j++) scales16(w, n + j, g, sc[j]);
		__m512 tab[2];
		UNROLL for (int j = 0; j < NR; j++) tab[j] = _mm512_mul_ps(levels, _mm512_set1_ps(sc[j][g % 16]));
		for (int64_t k = g * G; k < (g + 1) * G; k += KQ_BLOCK) {
			if (k % 128 == 0) /* a line of 64 bytes: 128 values */
				UNROLL for (int j = 0; j < NR; j++) _mm_prefetch((const char *)(q + (NR + j) * rb + k / 2), _MM_HINT_T1);
			UNROLL for (int j = 0; j < NR; j++)
			{
				const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(q + j * rb + k / 2)));
				const __m512 lo = _mm512_permutexvar_ps(v, tab[j]);
				const __m512 hi = _mm512_permutexvar_ps(_mm512_srli_epi32(v, 4), tab[j]);
				UNROLL for (int r = 0; r < M; r++)
				{
					acc[j][r][0] = _mm512_fmadd_ps(lo, _mm512_loadu_ps(A + r * lda + k), acc[j][r][0]);
					acc[j][r][1] = _mm512_fmadd_ps(hi, _mm512_loadu_ps(A + r * lda + k + 16), acc[j][r][1]);
				}
			}
		}
	}
	UNROLL for (int j = 0; j < NR; j++) UNROLL for (int r = 0; r < M; r++) C[r * ldc + n + j] =
		_mm512_reduce_add_ps(_mm512_add_ps(acc[j][r][0], acc[j][r][1])) + (bias ? bias[n + j] : 0.0f);
}

/* C rows [0, M) x W rows [n, n + NR), int8. */
AIR_INLINE void tile8(const int M, const int NR, const kq_weight *w, const float *A, int64_t lda, int64_t n,
		      const float *bias, float *C, int64_t ldc)
{
	__m512 acc[2][4], part[2][4][2];
	UNROLL for (int j = 0; j < NR; j++) UNROLL for (int r = 0; r < M; r++) acc[j][r] = _mm512_setzero_ps();
	const int64_t G = w->group, rb = kq_row_bytes(w);
	const int8_t *q = (const int8_t *)w->q + n * rb;
	float sc[2][16];
	for (int64_t g = 0; g < w->ngroups; g++) {
		if (g % 16 == 0)
			UNROLL for (int j = 0; j < NR; j++) scales16(w, n + j, g, sc[j]);
		UNROLL for (int j = 0; j < NR; j++) UNROLL for (int r = 0; r < M; r++) part[j][r][0] = part[j][r][1] =
			_mm512_setzero_ps();
		for (int64_t k = g * G; k < (g + 1) * G; k += KQ_BLOCK) {
			if (k % 64 == 0)
				UNROLL for (int j = 0; j < NR; j++) _mm_prefetch((const char *)(q + (NR + j) * rb + k), _MM_HINT_T1);
			UNROLL for (int j = 0; j < NR; j++)
			{
				const int8_t *p = q + j * rb + k;
				const __m512 lo = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)));
				const __m512 hi =
					_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(p + 16))));
				UNROLL for (int r = 0; r < M; r++)
				{
					part[j][r][0] = _mm512_fmadd_ps(lo, _mm512_loadu_ps(A + r * lda + k), part[j][r][0]);
					part[j][r][1] = _mm512_fmadd_ps(hi, _mm512_loadu_ps(A + r * lda + k + 16), part[j][r][1]);
				}
			}
		}
		UNROLL for (int j = 0; j < NR; j++)
		{
			const __m512 s = _mm512_set1_ps(sc[j][g % 16]);
			UNROLL for (int r = 0; r < M; r++) acc[j][r] =
				_mm512_fmadd_ps(_mm512_add_ps(part[j][r][0], part[j][r][1]), s, acc[j][r]);
		}
	}
	UNROLL for (int j = 0; j < NR; j++) UNROLL for (int r = 0; r < M; r++) C[r * ldc + n + j] =
		_mm512_reduce_add_ps(acc[j][r]) + (bias ? bias[n + j] : 0.0f);
}

AIR_INLINE void rows(const int bits, const int M, const kq_weight *w, const float *A, int64_t lda, int64_t n0,
		     int64_t n1, const float *bias, float *C, int64_t ldc)
{
	int64_t n = n0;
	if (bits == 8) {
		for (; n + 2 <= n1; n += 2)
			tile8(M, 2, w, A, lda, n, bias, C, ldc);
		if (n < n1)
			tile8(M, 1, w, A, lda, n, bias, C, ldc);
		return;
	}
	for (; n + 2 <= n1; n += 2)
		tile4(M, 2, w, A, lda, n, bias, C, ldc);
	if (n < n1)
		tile4(M, 1, w, A, lda, n, bias, C, ldc);
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

/* lowp_w.avx2.c - the 16-bit-weight GEMM's AVX2+FMA kernel (lowp_w.h), for
 * bf16 and f16 W [N x K] read in place: each 8 k-values of a W row are
 * widened to f32 (bf16: zero-extend and shift; f16: vcvtph2ps, F16C) and
 * multiplied into MR x NR accumulators against A's rows, which were rounded
 * to W's type and kept as f32 so that A feeds the FMAs with no conversion.
 * 16 ymm registers hold MR * NR accumulators, MR rows of A and one W
 * vector: 2 x 4, or 1 x 8 for decode. */
#include <immintrin.h>
#include <string.h>

#include "kernels/common/kernel.h"
#include "kernels/gemm/lowp_w_internal.h"

#define AIR_INLINE static inline __attribute__((always_inline))

enum { MAIN_MR = 2, MAIN_NR = 4, THIN_NR = 8 };
/* Array sizes of the largest tile: arrays sized by the tile's const int
 * parameters would be VLAs, kept in memory. */
enum { MAX_MR = 2, MAX_NR = 8 };

/* 8 floats rounded to bf16 as k_f32_to_bf16 rounds (nearest even, NaN
 * kept quiet), as f32. */
AIR_INLINE __m256 round_bf16(__m256 x)
{
	const __m256i u = _mm256_castps_si256(x);
	const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
	__m256i r = _mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb));
	const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
	r = _mm256_castps_si256(
		_mm256_blendv_ps(_mm256_castsi256_ps(r), _mm256_castsi256_ps(_mm256_or_si256(u, _mm256_set1_epi32(0x400000))), nan));
	return _mm256_castsi256_ps(_mm256_and_si256(r, _mm256_set1_epi32((int)0xffff0000u)));
}

static void avx2_convert_a(klowp_type wt, int64_t K, const float *a, void *dst, int64_t kpad)
{
	float *d = dst;
	int64_t k = 0;
	for (; k + 8 <= K; k += 8) {
		const __m256 x = _mm256_loadu_ps(a + k);
		/* F16C rounds to nearest even, to infinity past 65504, quietly for NaN */
		const __m256 r = wt == KLOWP_BF16 ? round_bf16(x)
						  : _mm256_cvtph_ps(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
		_mm256_storeu_ps(d + k, r);
	}
	for (; k < K; k++)
		d[k] = klowp_round_a(wt, a[k]);
	for (; k < kpad; k++)
		d[k] = 0.0f;
}

/* 8 weights widened to f32. */
AIR_INLINE __m256 widen8(const int F16, const uint16_t *w)
{
	const __m128i h = _mm_loadu_si128((const __m128i *)w);
	if (F16)
		return _mm256_cvtph_ps(h);
	return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* The lane sums of four accumulators, in order. */
AIR_INLINE __m128 sum4(__m256 a, __m256 b, __m256 c, __m256 d)
{
	const __m256 s = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
	return _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
}

/* One k step of 8: MR rows of A (padded with zeros: always whole) against
 * NR W rows at w[q] + p. */
AIR_INLINE void step(const int F16, const int MR, const int NR, const float *a, int64_t lda,
		     const uint16_t *const *w, int64_t p, __m256 *acc)
{
	__m256 av[MAX_MR];
#pragma GCC unroll 4
	for (int r = 0; r < MR; r++)
		av[r] = _mm256_loadu_ps(a + r * lda + p);
#pragma GCC unroll 8
	for (int q = 0; q < NR; q++) {
		const __m256 wv = widen8(F16, w[q] + p);
#pragma GCC unroll 4
		for (int r = 0; r < MR; r++)
			acc[r * NR + q] = _mm256_fmadd_ps(av[r], wv, acc[r * NR + q]);
	}
}

/* C[m0 .. m0 + MR) x [n0 .. n0 + n), n <= NR, over the whole of K. Rows of
 * W past n repeat row n0 (read, never stored); W's last partial step is
 * copied to the stack, zero-filled, so nothing past a row is read. With pf
 * the next NR rows of W are prefetched to L2 a line at a time, as in
 * lowp_w.bf16.c (where it took cold decode from 18-22 to 25-27 GB/s). */
AIR_INLINE void tile(const int F16, const int MR, const int NR, const klowp_job *j, int64_t m0, int64_t n0,
		     int n, int pf)
{
	const int64_t K = j->K, lda = j->a_ld;
	const float *a = (const float *)j->a + m0 * lda;
	const uint16_t *w[MAX_NR];
	__m256 acc[MAX_MR * MAX_NR];
#pragma GCC unroll 8
	for (int q = 0; q < NR; q++)
		w[q] = j->W + (n0 + (q < n ? q : 0)) * j->ldw;
#pragma GCC unroll 16
	for (int t = 0; t < MR * NR; t++)
		acc[t] = _mm256_setzero_ps();
	const uint16_t *next[MAX_NR];
#pragma GCC unroll 8
	for (int q = 0; q < NR; q++)
		next[q] = n0 + NR + q < j->N ? w[0] + (NR + q) * j->ldw : w[q];
	int64_t p = 0;
	for (; p + 8 <= K; p += 8) {
		if (pf && (p & 31) == 0)
#pragma GCC unroll 8
			for (int q = 0; q < NR; q++)
				_mm_prefetch((const char *)(next[q] + p), _MM_HINT_T1);
		step(F16, MR, NR, a, lda, w, p, acc);
	}
	if (p < K) {
		uint16_t tail[MAX_NR][8];
		const uint16_t *tw[MAX_NR];
		memset(tail, 0, sizeof tail);
#pragma GCC unroll 8
		for (int q = 0; q < NR; q++) {
			memcpy(tail[q], w[q] + p, (size_t)(K - p) * 2);
			tw[q] = tail[q];
		}
		step(F16, MR, NR, a + p, lda, tw, 0, acc);
	}
	float out[MAX_MR * MAX_NR];
#pragma GCC unroll 4
	for (int t = 0; t < MR * NR; t += 4)
		_mm_storeu_ps(out + t, sum4(acc[t], acc[t + 1], acc[t + 2], acc[t + 3]));
	klowp_finish(j, m0, MR, n0, n, out, NR);
}

AIR_INLINE void block_of(const int F16, const klowp_job *j, int64_t m0, int64_t m1, int64_t n0, int64_t n1)
{
	if (m1 - m0 < MAIN_MR) {
		/* decode: W streamed once, THIN_NR rows at a time */
		for (int64_t n = n0; n < n1; n += THIN_NR)
			tile(F16, 1, THIN_NR, j, m0, n, (int)k_min64(THIN_NR, n1 - n), 1);
		return;
	}
	for (int64_t n = n0; n < n1; n += MAIN_NR) {
		const int nn = (int)k_min64(MAIN_NR, n1 - n);
		int64_t i = m0;
		for (; i + MAIN_MR <= m1; i += MAIN_MR)
			tile(F16, MAIN_MR, MAIN_NR, j, i, n, nn, i == m0);
		if (i < m1)
			tile(F16, 1, MAIN_NR, j, i, n, nn, i == m0);
	}
}

static void avx2_block(const klowp_job *j, int64_t m0, int64_t m1, int64_t n0, int64_t n1)
{
	if (j->wt == KLOWP_F16)
		block_of(1, j, m0, m1, n0, n1);
	else
		block_of(0, j, m0, m1, n0, n1);
}

const klowp_kernel klowp_avx2_kernel = {"avx2_cvt_fma", 0, avx2_convert_a, avx2_block};

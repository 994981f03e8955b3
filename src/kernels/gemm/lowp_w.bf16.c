/* lowp_w.bf16.c - the 16-bit-weight GEMM's AVX512-BF16 kernel (lowp_w.h):
 * bf16 W [N x K] read in place by vdpbf16ps against A rounded to bf16.
 * Both operands are k-contiguous rows, so one vdpbf16ps multiplies 32
 * k-values of an A row with the same 32 of a W row, summing pairs into 16
 * f32 lanes; a tile keeps MR x NR such accumulators and sums each
 * across its lanes once, at the end of K: 4 x 4 for larger M (about 200
 * GFLOP/s a Zen 4 core, 1.85x the f32 GEMM; 4 x 6 was 5% slower), all of a
 * decode block's rows (M <= 8) x as many W rows as 24 accumulators allow.
 * vdpbf16ps treats bf16 subnormals as zero (the header says so). */
#include <immintrin.h>

#include "kernels/common/kernel.h"
#include "kernels/common/lanes_avx512.h"
#include "kernels/gemm/lowp_w_avx512.h"
#include "kernels/gemm/lowp_w_internal.h"

#define AIR_INLINE static inline __attribute__((always_inline))

/* Array sizes of the largest tile: arrays sized by the tile's const int
 * parameters would be VLAs, kept in memory. */
enum { MAX_MR = 8, MAX_NR = 8, MAX_ACC = 24 };

/* A row rounded to bf16 bits as k_f32_to_bf16 rounds (nearest even, NaN
 * kept quiet), zeros up to kpad. vcvtneps2bf16 would flush f32 subnormals,
 * which the products flush anyway, but this keeps A equal on every path. */
static void bf16_convert_a(klowp_type wt, int64_t K, const float *a, void *dst, int64_t kpad)
{
	(void)wt;
	uint16_t *d = dst;
	const __m512i half = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1);
	const __m512i quiet = _mm512_set1_epi32(0x400000);
	for (int64_t k = 0; k < kpad; k += 16) {
		const __m512 x = _mm512_maskz_loadu_ps(k16_lanes(K - k), a + k);
		const __m512i u = _mm512_castps_si512(x);
		__m512i r = _mm512_add_epi32(u, _mm512_add_epi32(half, _mm512_and_si512(_mm512_srli_epi32(u, 16), one)));
		r = _mm512_mask_mov_epi32(r, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), _mm512_or_si512(u, quiet));
		_mm256_storeu_si256((__m256i *)(d + k), _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16)));
	}
}

/* The lane sums of four accumulators, in order. */
AIR_INLINE __m128 sum4(__m512 a, __m512 b, __m512 c, __m512 d)
{
	/* per 128-bit lane: (a0+a2, b0+b2, a1+a3, b1+b3), the same for c, d */
	const __m512 ab = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
	const __m512 cd = _mm512_add_ps(_mm512_unpacklo_ps(c, d), _mm512_unpackhi_ps(c, d));
	const __m512d abd = _mm512_castps_pd(ab), cdd = _mm512_castps_pd(cd);
	/* per 128-bit lane: partial sums of a, b, c, d */
	const __m512 t = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(abd, cdd)),
				       _mm512_castpd_ps(_mm512_unpackhi_pd(abd, cdd)));
	const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(t),
				       _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(t), 1)));
	return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

AIR_INLINE __m512 dot(__m512 acc, __m512i a, __m512i w)
{
	return _mm512_dpbf16_ps(acc, (__m512bh)a, (__m512bh)w);
}

/* One k step: MR rows of A (whole vectors: padded with zeros) against the
 * NR vectors of W in wv. */
AIR_INLINE void madd(const int MR, const int NR, const uint16_t *a, int64_t lda, const __m512i *wv, __m512 *acc)
{
#pragma GCC unroll 8
	for (int r = 0; r < MR; r++) {
		const __m512i av = _mm512_loadu_si512(a + r * lda);
#pragma GCC unroll 8
		for (int q = 0; q < NR; q++)
			acc[r * NR + q] = dot(acc[r * NR + q], av, wv[q]);
	}
}

/* C[m0 .. m0 + MR) x [n0 .. n0 + n), n <= NR, over the whole of K. Rows of
 * W past n repeat row n0 (read, never stored). A's rows are padded with
 * zeros, so only W's last step is masked: a row may end at a page. With pf,
 * the next NR rows of W are prefetched to L2 line by line as these are
 * read: cold decode (M = 1, 1 thread) read W at 18-22 GB/s without, 25-27
 * with (L1 instead of L2: 17-20; 512 bytes ahead in the same rows: 14-18;
 * 2 or 4 tiles ahead: the same as 1). */
AIR_INLINE void tile(const int MR, const int NR, const klowp_job *j, int64_t m0, int64_t n0, int n, int pf)
{
	const int64_t K = j->K, lda = j->a_ld;
	const uint16_t *a = (const uint16_t *)j->a + m0 * lda;
	const uint16_t *w[MAX_NR];
	__m512 acc[MAX_ACC];
#pragma GCC unroll 8
	for (int q = 0; q < NR; q++)
		w[q] = j->W + (n0 + (q < n ? q : 0)) * j->ldw;
	const uint16_t *next[MAX_NR];
#pragma GCC unroll 8
	for (int q = 0; q < NR; q++)
		next[q] = n0 + NR + q < j->N ? w[0] + (NR + q) * j->ldw : w[q];
	/* zero up to a multiple of 4 for sum4 */
#pragma GCC unroll 24
	for (int t = 0; t < (MR * NR + 3) / 4 * 4; t++)
		acc[t] = _mm512_setzero_ps();
	int64_t p = 0;
	for (; p + 32 <= K; p += 32) {
		__m512i wv[MAX_NR];
#pragma GCC unroll 8
		for (int q = 0; q < NR; q++)
			wv[q] = _mm512_loadu_si512(w[q] + p);
		if (pf)
#pragma GCC unroll 8
			for (int q = 0; q < NR; q++)
				_mm_prefetch((const char *)(next[q] + p), _MM_HINT_T1);
		madd(MR, NR, a + p, lda, wv, acc);
	}
	if (p < K) {
		const __mmask32 m = (__mmask32)((1u << (K - p)) - 1);
		__m512i wv[MAX_NR];
#pragma GCC unroll 8
		for (int q = 0; q < NR; q++)
			wv[q] = _mm512_maskz_loadu_epi16(m, w[q] + p);
		madd(MR, NR, a + p, lda, wv, acc);
	}
	float out[MAX_ACC];
#pragma GCC unroll 6
	for (int t = 0; t < MR * NR; t += 4)
		_mm_storeu_ps(out + t, sum4(acc[t], acc[t + 1], acc[t + 2], acc[t + 3]));
#pragma GCC unroll 8
	for (int r = 0; r < MR; r++)
		klowp_finish_row16(j, m0 + r, n0, n, out + r * NR);
}

/* A block of at most 8 rows of A (decode) in one row of tiles: W is
 * streamed once, NR rows at a time with NR as large as 24 accumulators
 * allow, the next NR rows prefetched to L2 meanwhile. */
AIR_INLINE void thin_rows(const int MR, const klowp_job *j, int64_t m0, int64_t n0, int64_t n1)
{
	const int NR = MR <= 3 ? 8 : 24 / MR;
	for (int64_t n = n0; n < n1; n += NR)
		tile(MR, NR, j, m0, n, (int)k_min64(NR, n1 - n), 1);
}

static void bf16_block(const klowp_job *j, int64_t m0, int64_t m1, int64_t n0, int64_t n1)
{
	switch (m1 - m0) {
	case 1: thin_rows(1, j, m0, n0, n1); return;
	case 2: thin_rows(2, j, m0, n0, n1); return;
	case 3: thin_rows(3, j, m0, n0, n1); return;
	case 4: thin_rows(4, j, m0, n0, n1); return;
	case 5: thin_rows(5, j, m0, n0, n1); return;
	case 6: thin_rows(6, j, m0, n0, n1); return;
	case 7: thin_rows(7, j, m0, n0, n1); return;
	case 8: thin_rows(8, j, m0, n0, n1); return;
	default: break;
	}
	/* 4 W rows (L1) against every 4 rows of the block's A (L2); the first
	 * row of tiles prefetches the next 4 W rows */
	for (int64_t n = n0; n < n1; n += 4) {
		const int nn = (int)k_min64(4, n1 - n);
		for (int64_t i = m0; i < m1; i += 4) {
			switch (k_min64(4, m1 - i)) {
			case 4: tile(4, 4, j, i, n, nn, i == m0); break;
			case 3: tile(3, 4, j, i, n, nn, i == m0); break;
			case 2: tile(2, 4, j, i, n, nn, i == m0); break;
			default: tile(1, 4, j, i, n, nn, i == m0); break;
			}
		}
	}
}

const klowp_kernel klowp_bf16_dot_kernel = {"avx512bf16_dot", 1, bf16_convert_a, bf16_block};

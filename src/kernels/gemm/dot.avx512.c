/* dot.avx512.c - thin products against a transposed B, read in place:
 * C[m x n] = epilogue(A[m x K] @ Bt[n x K]^T) for m, n <= 4, both operands
 * row-major along K (torch's Linear weight is [N x K]). Each output is a dot
 * product of two contiguous rows, so nothing is packed: for a handful of rows
 * (M = 1: a classifier at batch 1) packing B would cost as much as the
 * product. Whole K in one call, so the tile gets the full epilogue. */
#include <immintrin.h>

#include "kernels/gemm/ukernel.h"

#define AIR_INLINE static inline __attribute__((always_inline))

enum { DOT_MR = 4, DOT_NR = 4 };

/* ROWS x 4 dot products; S accumulator sets cover the FMA latency when the
 * tile alone has too few independent sums. Columns past n repeat column 0
 * (read, never stored). */
AIR_INLINE void dot_tile(const int ROWS, const int S, int64_t K, const float *a, int64_t lda, const float *bt,
			 int64_t ldbt, float *c, int64_t ldc, int n, const kgemm_tile_ep *ep)
{
	__m512 acc[2][DOT_MR][DOT_NR];
	const float *bp[DOT_NR];
#pragma GCC unroll 4
	for (int j = 0; j < DOT_NR; j++)
		bp[j] = bt + (j < n ? j : 0) * ldbt;
#pragma GCC unroll 2
	for (int s = 0; s < S; s++)
#pragma GCC unroll 4
		for (int r = 0; r < ROWS; r++)
#pragma GCC unroll 4
			for (int j = 0; j < DOT_NR; j++)
				acc[s][r][j] = _mm512_setzero_ps();
	int64_t p = 0;
	for (; p + 16 * S <= K; p += 16 * S) {
#pragma GCC unroll 2
		for (int s = 0; s < S; s++) {
			__m512 bv[DOT_NR];
#pragma GCC unroll 4
			for (int j = 0; j < DOT_NR; j++)
				bv[j] = _mm512_loadu_ps(bp[j] + p + 16 * s);
#pragma GCC unroll 4
			for (int r = 0; r < ROWS; r++) {
				__m512 av = _mm512_loadu_ps(a + r * lda + p + 16 * s);
#pragma GCC unroll 4
				for (int j = 0; j < DOT_NR; j++)
					acc[s][r][j] = _mm512_fmadd_ps(av, bv[j], acc[s][r][j]);
			}
		}
	}
	for (; p < K; p += 16) {
		/* masked lanes are not read: a row may end at a page */
		__mmask16 m = K - p >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (K - p)) - 1);
		__m512 bv[DOT_NR];
#pragma GCC unroll 4
		for (int j = 0; j < DOT_NR; j++)
			bv[j] = _mm512_maskz_loadu_ps(m, bp[j] + p);
#pragma GCC unroll 4
		for (int r = 0; r < ROWS; r++) {
			__m512 av = _mm512_maskz_loadu_ps(m, a + r * lda + p);
#pragma GCC unroll 4
			for (int j = 0; j < DOT_NR; j++)
				acc[0][r][j] = _mm512_fmadd_ps(av, bv[j], acc[0][r][j]);
		}
	}
	const int first = ep->flags & KGEMM_TILE_FIRST, last = ep->flags & KGEMM_TILE_LAST;
	const k_act act = last ? ep->act : K_ACT_NONE;
#pragma GCC unroll 4
	for (int r = 0; r < ROWS; r++) {
		float *cr = c + r * ldc;
		for (int j = 0; j < n; j++) {
			__m512 t = S > 1 ? _mm512_add_ps(acc[0][r][j], acc[S - 1][r][j]) : acc[0][r][j];
			float v = ep->alpha * _mm512_reduce_add_ps(t);
			if (first) {
				if (ep->bias_n)
					v += ep->bias_n[j];
				if (ep->bias_m)
					v += ep->bias_m[r];
				if (ep->res)
					v += ep->res[r * ep->ld_res + j];
			} else {
				v += cr[j];
			}
			cr[j] = kgemm_act_simple_f32(v, act);
		}
	}
	if (kgemm_act_is_transcendental(act))
		kgemm_act_tile(c, ldc, ROWS, n, act);
}

void kgemm_dot_4x4__avx512(int64_t K, const float *a, int64_t lda, const float *bt, int64_t ldbt, float *c,
			   int64_t ldc, int m, int n, const kgemm_tile_ep *ep)
{
	switch (m) {
	case 4: dot_tile(4, 1, K, a, lda, bt, ldbt, c, ldc, n, ep); break;
	case 3: dot_tile(3, 1, K, a, lda, bt, ldbt, c, ldc, n, ep); break;
	case 2: dot_tile(2, 2, K, a, lda, bt, ldbt, c, ldc, n, ep); break;
	case 1: dot_tile(1, 2, K, a, lda, bt, ldbt, c, ldc, n, ep); break;
	default: break;
	}
}

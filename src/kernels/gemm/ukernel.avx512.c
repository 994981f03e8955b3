/* ukernel.avx512.c - the AVX-512 GEMM micro-kernels. One tile body, written
 * once over a compile-time shape (rows x 16-lane vectors), is instantiated
 * for every row count and column-vector count a tile can have, so partial
 * tiles do only the FMAs they need: an edge of n <= 16 columns runs one
 * vector per row, not two. Column tails are masked loads and stores.
 *
 * With few rows there are too few independent accumulators to cover the FMA
 * latency (4 cycles x 2 ports = 8 in flight), so thin tiles keep two or four
 * accumulator sets over interleaved k and add them at the end.
 *
 * The epilogue (alpha, bias, residual, simple activations) is applied to
 * the accumulators before they are stored; exp/erf/tanh-based activations
 * run in a second pass over the stored tile with vmath's AVX2 building
 * blocks, so a fused activation gives the same values as the standalone op. */
#include <immintrin.h>

#include "kernels/common/lanes_avx512.h"
#include "kernels/common/transpose_avx512.h"
#include "kernels/gemm/ukernel.h"
#include "kernels/vmath/vmath_avx2.h"
#include "kernels/vmath/vmath_avx512.h"

#define AIR_INLINE static inline __attribute__((always_inline))


AIR_INLINE __m512 act_simple(__m512 v, k_act act)
{
	const __m512 zero = _mm512_setzero_ps(), six = _mm512_set1_ps(6.0f);
	switch (act) {
	case K_ACT_RELU: return _mm512_max_ps(zero, v);
	case K_ACT_RELU6: return _mm512_min_ps(six, _mm512_max_ps(zero, v));
	case K_ACT_HARDSWISH: {
		__m512 t = _mm512_min_ps(six, _mm512_max_ps(zero, _mm512_add_ps(v, _mm512_set1_ps(3.0f))));
		return _mm512_mul_ps(v, _mm512_mul_ps(t, _mm512_set1_ps(1.0f / 6.0f)));
	}
	default: return v;
	}
}

static inline __m256 act_transcendental8(__m256 v, k_act act)
{
	switch (act) {
	case K_ACT_GELU: return kv_gelu8(v);
	case K_ACT_GELU_TANH: return kv_gelu_tanh8(v);
	case K_ACT_SILU: return kv_silu8(v);
	case K_ACT_SIGMOID: return kv_sigmoid8(v);
	case K_ACT_TANH: return kv_tanh8(v);
	default: return v;
	}
}

/* The second pass for transcendental activations over a stored m x n tile
 * (in L1), 8 lanes at a time. Out of line: the polynomials would only bloat
 * every tile variant. */
static __attribute__((noinline)) void act_tile(float *c, int64_t ldc, int m, int n, k_act act)
{
	if (act == K_ACT_GELU) {
		/* 16 lanes, bitwise what kv_gelu8 gives: BERT's FFN GEMM with
		 * GELU took 0.18 ms per layer more than without, 8 lanes wide */
		for (int r = 0; r < m; r++) {
			float *cr = c + r * ldc;
			for (int j = 0; j < n; j += 16) {
				__mmask16 k = k16_lanes(n - j);
				__m512 v = _mm512_maskz_loadu_ps(k, cr + j);
				_mm512_mask_storeu_ps(cr + j, k, kv_gelu16(v));
			}
		}
		return;
	}
	for (int r = 0; r < m; r++) {
		float *cr = c + r * ldc;
		for (int j = 0; j < n; j += 8) {
			__mmask8 k = (__mmask8)(n - j >= 8 ? 0xff : (1u << (n - j)) - 1);
			__m256 v = _mm256_maskz_loadu_ps(k, cr + j);
			_mm256_mask_storeu_ps(cr + j, k, act_transcendental8(v, act));
		}
	}
}

/* A row of B: packed panels are zero-padded and read whole; B read in place
 * (BMASK) must not be read past column n. */
AIR_INLINE __m512 loadb(const int BMASK, __mmask16 m, const float *p)
{
	return BMASK ? _mm512_maskz_loadu_ps(m, p) : _mm512_loadu_ps(p);
}

/* B read in place walks rows that are each in another page, where the
 * hardware prefetchers lose track: fetch the row PF_ROWS ahead (all lines
 * of its n columns; past the end of B the prefetch is harmless). */
enum { PF_ROWS = 24 };
/* A packed B panel streamed from L2 (KGEMM_TILE_STREAM_B), 32 k steps (4
 * KiB) ahead: linear_rows' BERT-base products at 128 tokens, cold weights,
 * 2 threads, ran 3-8% faster than with the hardware prefetchers alone (16
 * steps: 2-6%). Past the panel's end the prefetch is harmless. */
enum { BPF_ROWS = 32 };
AIR_INLINE void prefetch_row(const float *p, int n)
{
	_mm_prefetch((const char *)p, _MM_HINT_T0);
	_mm_prefetch((const char *)(p + n - 1), _MM_HINT_T0);
	if (n > 16)
		_mm_prefetch((const char *)(p + 16), _MM_HINT_T0);
}

enum { MR = 12, NR = 32 };
/* Bounds of the tile template's accumulator array: rows, vectors, sets. */
enum { MAXR = 16, MAXV = 4, MAXS = 4 };

/* Row r of the tile's A, k steps on. Rows read in place (PACKED 0: cs_a is
 * 1, row r at a + r * rs_a) are reached from one base pointer per 3 rows
 * with the row stride as the index register (scale 4 or 8): 12 rows take 4
 * bases and one index, where one pointer per row spilled to the stack and
 * cost a load per row per k. A packed panel (PACKED 1: rs_a 1, cs_a MR) is
 * one pointer with constant offsets. */
typedef struct arows {
	const float *base[4];
	int64_t rs;
} arows;

AIR_INLINE float aload(const int PACKED, const arows *A, int r, int k)
{
	return PACKED ? A->base[0][k * MR + r] : A->base[r / 3][(r % 3) * A->rs + k];
}

AIR_INLINE void aadvance(const int PACKED, const int ROWS, arows *A, int k)
{
	if (PACKED) {
		A->base[0] += k * MR;
		return;
	}
#pragma GCC unroll 4
	for (int q = 0; q < (ROWS + 2) / 3; q++)
		A->base[q] += k;
}

/* Row p of a packed B panel from the row just loaded in place: masked
 * loads zeroed the columns past n, and a one-vector tile (n <= 16) pads the
 * rest, so the panel is what kgemm_pack_b writes. */
AIR_INLINE void copy_b_row(const int NV, float *dst, const __m512 *bv)
{
#pragma GCC unroll 4
	for (int v = 0; v < NR / 16; v++)
		_mm512_storeu_ps(dst + 16 * v, v < NV ? bv[v] : _mm512_setzero_ps());
}

/* A transcendental activation on 16 lanes in registers, bitwise what
 * act_tile gives on the stored values. */
AIR_INLINE __m512 act_transcendental16(__m512 v, k_act act)
{
	if (act == K_ACT_GELU)
		return kv_gelu16(v);
	__m256 lo = act_transcendental8(_mm512_castps512_ps256(v), act);
	__m256 hi = act_transcendental8(_mm512_extractf32x8_ps(v, 1), act);
	return _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
}

/* The epilogue of a ROWS x n tile stored transposed (KGEMM_TILE_STORE_T):
 * column j of the accumulators, after a 16x16 transpose, is C's row j, its
 * ROWS floats contiguous; the same sums, in the same order, as the
 * row-major epilogue in tile(). When nothing is read from memory (first
 * block, no residual) the whole epilogue, activation included, runs on the
 * accumulators before the transpose, 16 lanes full: BERT's GELU on the
 * transposed rows, 12 lanes of 16, took a third longer. Out of line:
 * inlined into the tile, it made GCC spill in the k loop (a 128x3072x768
 * product at 142 GFLOP/s instead of 330). */
static __attribute__((noinline)) void store_tile_t(const int ROWS, const int NV, const __m512 (*acc)[MAXV], float *c,
						    int64_t ldc, int n, const kgemm_tile_ep *ep)
{
	const int first = ep->flags & KGEMM_TILE_FIRST, last = ep->flags & KGEMM_TILE_LAST;
	const k_act act = last ? ep->act : K_ACT_NONE;
	const int before = first && !ep->res; /* the epilogue runs before the transpose */
	const __mmask16 rows = k16_lanes(ROWS);
	const __m512 alpha = _mm512_set1_ps(ep->alpha);
	const __m512 bm = first && ep->bias_m ? _mm512_maskz_loadu_ps(rows, ep->bias_m) : _mm512_setzero_ps();
#pragma GCC unroll 4
	for (int v = 0; v < NV; v++) {
		__m512 t[16];
		const int cols = n - 16 * v < 16 ? n - 16 * v : 16;
		if (before) {
			const __m512 bn = ep->bias_n ? _mm512_maskz_loadu_ps(k16_lanes(cols), ep->bias_n + 16 * v)
						     : _mm512_setzero_ps();
#pragma GCC unroll 16
			for (int r = 0; r < 16; r++) {
				if (r >= ROWS) {
					t[r] = _mm512_setzero_ps();
					continue;
				}
				__m512 bmr = ep->bias_m ? _mm512_set1_ps(ep->bias_m[r]) : _mm512_setzero_ps();
				__m512 x = _mm512_add_ps(_mm512_add_ps(_mm512_mul_ps(acc[r][v], alpha), bn), bmr);
				x = act_simple(x, act);
				t[r] = kgemm_act_is_transcendental(act) ? act_transcendental16(x, act) : x;
			}
			k16_transpose(t);
			for (int j = 0; j < cols; j++)
				_mm512_mask_storeu_ps(c + (16 * v + j) * ldc, rows, t[j]);
			continue;
		}
#pragma GCC unroll 16
		for (int r = 0; r < 16; r++)
			t[r] = r < ROWS ? _mm512_mul_ps(acc[r][v], alpha) : _mm512_setzero_ps();
		k16_transpose(t);
		for (int j = 0; j < cols; j++) {
			const int64_t col = 16 * v + j;
			float *cj = c + col * ldc;
			__m512 x = t[j];
			if (first) {
				__m512 bn = ep->bias_n ? _mm512_set1_ps(ep->bias_n[col]) : _mm512_setzero_ps();
				x = _mm512_add_ps(_mm512_add_ps(x, bn), bm);
				x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(rows, ep->res + col * ep->ld_res));
			} else {
				x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(rows, cj));
			}
			_mm512_mask_storeu_ps(cj, rows, act_simple(x, act));
		}
	}
	if (!before && kgemm_act_is_transcendental(act))
		act_tile(c, ldc, n, ROWS, act);
}

/* The epilogue of a ROWS x n tile stored row-major: alpha, then on the
 * first K block the biases and the residual, on later ones the old C, then
 * on the last the activation. */
AIR_INLINE void store_tile(const int ROWS, const int NV, __m512 (*acc)[MAXV], const __mmask16 *mask, float *c,
			   int64_t ldc, int n, const kgemm_tile_ep *ep)
{
	const int first = ep->flags & KGEMM_TILE_FIRST, last = ep->flags & KGEMM_TILE_LAST;
	const __m512 alpha = _mm512_set1_ps(ep->alpha);
	const k_act act = last ? ep->act : K_ACT_NONE;
	__m512 bn[MAXV];
#pragma GCC unroll 4
	for (int v = 0; v < NV; v++)
		bn[v] = first && ep->bias_n ? _mm512_maskz_loadu_ps(mask[v], ep->bias_n + 16 * v)
					    : _mm512_setzero_ps();
#pragma GCC unroll 16
	for (int r = 0; r < ROWS; r++) {
		float *cr = c + r * ldc;
		__m512 bm = first && ep->bias_m ? _mm512_set1_ps(ep->bias_m[r]) : _mm512_setzero_ps();
		const float *res = first && ep->res ? ep->res + r * ep->ld_res : NULL;
#pragma GCC unroll 4
		for (int v = 0; v < NV; v++) {
			/* alpha * acc is exact for alpha == 1, so no branch for it */
			__m512 x = _mm512_mul_ps(acc[r][v], alpha);
			if (first) {
				x = _mm512_add_ps(_mm512_add_ps(x, bn[v]), bm);
				if (res)
					x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(mask[v], res + 16 * v));
			} else {
				x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(mask[v], cr + 16 * v));
			}
			_mm512_mask_storeu_ps(cr + 16 * v, mask[v], act_simple(x, act));
		}
	}
	if (kgemm_act_is_transcendental(act))
		act_tile(c, ldc, ROWS, n, act);
}

/* What a tile's epilogue reads from memory: on the first K block the
 * residual (or NULL), after it the old C; *ld gets its row stride. */
AIR_INLINE const float *epilogue_src(const kgemm_tile_ep *ep, const float *c, int64_t ldc, int64_t *ld)
{
	const int first = ep->flags & KGEMM_TILE_FIRST;
	*ld = first ? ep->ld_res : ldc;
	return first ? ep->res : c;
}

/* That memory is read once the sums are done; start it coming: ROWS rows
 * of NV vectors, row-major. */
AIR_INLINE void prefetch_epilogue_rows(const int ROWS, const int NV, const float *c, int64_t ldc,
				       const kgemm_tile_ep *ep)
{
	int64_t ld;
	const float *pc = epilogue_src(ep, c, ldc, &ld);
	if (!pc)
		return;
#pragma GCC unroll 16
	for (int r = 0; r < ROWS; r++)
#pragma GCC unroll 4
		for (int v = 0; v < NV; v++)
			_mm_prefetch((const char *)(pc + r * ld + v * 16), _MM_HINT_T0);
}

/* One tile: ROWS rows (<= MR) x NV vectors of 16 columns, S accumulator
 * sets; B row p at b + p * ldb (BMASK: B read in place, masked to n); PF:
 * issues ep->pf's lines (ukernel.h), one every 4 k steps, and PF 2
 * also B's rows BPF_ROWS k steps ahead (KGEMM_TILE_STREAM_B). */
AIR_INLINE void tile(const int ROWS, const int NV, const int S, const int BMASK, const int PACKED, const int PF,
		     int64_t kc, int64_t nseg, int64_t seg_stride, const float *a, int64_t rs_a, const float *b,
		     const int64_t ldb, float *c, int64_t ldc, int n, const kgemm_tile_ep *ep)
{
	__mmask16 mask[MAXV];
#pragma GCC unroll 4
	for (int v = 0; v < NV; v++)
		mask[v] = k16_lanes(n - 16 * v);
	__m512 acc[MAXS][MAXR][MAXV];
#pragma GCC unroll 4
	for (int s = 0; s < S; s++)
#pragma GCC unroll 16
		for (int r = 0; r < ROWS; r++)
#pragma GCC unroll 4
			for (int v = 0; v < NV; v++)
				acc[s][r][v] = _mm512_setzero_ps();
	prefetch_epilogue_rows(ROWS, NV, c, ldc, ep);
	/* U k steps per iteration; with S sets, step u adds into set u. One
	 * set over a packed A still takes 4 steps an iteration: a 2048^3
	 * product with 2 threads ran 5-8% faster than with one step, 512^3
	 * 3-6%. Over A read in place, 4 steps lost 3-6% on the NCHW 1x1
	 * convolutions' products (512x1024 @ 1024x196, 128x256 @ 256x3136).
	 * The streaming variant (PF 2) takes 4 steps over A in place all the
	 * same: its per-step prefetch checks cost more than the extra
	 * pointer steps (BERT-base's products at 128 tokens, 40 cold weights,
	 * ran 4-10% faster; 2 steps lost to 4 by 0-4%). linear_rows'
	 * transposed tiles now run inplace_sums instead (below). */
	const int U = S > 1 ? S : PACKED || PF == 2 ? 4 : 1;
	/* (a count and a cursor spilled the in-place A rows' pointers to the
	 * stack; a base and an end step leave them in registers) */
	/* B read in place may also be stored, as it is read, into a packed
	 * panel (kgemm_tile_ep.bcopy) */
	float *bc = BMASK ? ep->bcopy : NULL;
	const char *pf = ep->pf;
	/* a line every 4 k steps, or every 2 when there are more than kc / 4 */
	const int pf_shift = PF && 4 * (int64_t)ep->pf_lines > kc ? 1 : 2;
	const int64_t pf_end = PF ? (int64_t)ep->pf_lines << pf_shift : 0, pf_mask = (1 << pf_shift) - 1;
	/* nseg blocks of kc along K, block g of A at a + g * seg_stride (see
	 * kgemm_ukernel_seg_fn; 1 for a plain tile); B runs on through them */
	for (int64_t g = 0; g < nseg; g++) {
		arows A;
		A.rs = rs_a;
#pragma GCC unroll 4
		for (int q = 0; q < 4; q++)
			A.base[q] = a + g * seg_stride + (PACKED ? 0 : 3 * q * rs_a);
		int64_t p = 0;
		for (; p + U <= kc; p += U) {
#pragma GCC unroll 4
			for (int u = 0; u < U; u++) {
				if (PF && ((p + u) & pf_mask) == 0 && p + u < pf_end)
					_mm_prefetch(pf + 64 * ((p + u) >> pf_shift), _MM_HINT_T1);
				const int s = S > 1 ? u : 0;
				__m512 bv[MAXV];
				if (BMASK)
					prefetch_row(b + (u + PF_ROWS) * ldb, n);
				if (PF == 2)
#pragma GCC unroll 4
					for (int v = 0; v < NV; v++)
						_mm_prefetch((const char *)(b + (u + BPF_ROWS) * ldb + v * 16), _MM_HINT_T0);
#pragma GCC unroll 4
				for (int v = 0; v < NV; v++)
					bv[v] = loadb(BMASK, mask[v], b + u * ldb + v * 16);
				if (BMASK && bc)
					copy_b_row(NV, bc + u * NR, bv);
#pragma GCC unroll 16
				for (int r = 0; r < ROWS; r++) {
					__m512 ar = _mm512_set1_ps(aload(PACKED, &A, r, u));
#pragma GCC unroll 4
					for (int v = 0; v < NV; v++)
						acc[s][r][v] = _mm512_fmadd_ps(ar, bv[v], acc[s][r][v]);
				}
			}
			aadvance(PACKED, ROWS, &A, U);
			b += U * ldb;
			if (BMASK && bc)
				bc += U * NR;
		}
		for (; p < kc; p++) {
			__m512 bv[MAXV];
#pragma GCC unroll 4
			for (int v = 0; v < NV; v++)
				bv[v] = loadb(BMASK, mask[v], b + v * 16);
			if (BMASK && bc) {
				copy_b_row(NV, bc, bv);
				bc += NR;
			}
#pragma GCC unroll 16
			for (int r = 0; r < ROWS; r++) {
				__m512 ar = _mm512_set1_ps(aload(PACKED, &A, r, 0));
#pragma GCC unroll 4
				for (int v = 0; v < NV; v++)
					acc[0][r][v] = _mm512_fmadd_ps(ar, bv[v], acc[0][r][v]);
			}
			aadvance(PACKED, ROWS, &A, 1);
			b += ldb;
		}
	}
#pragma GCC unroll 4
	for (int s = 1; s < S; s++)
#pragma GCC unroll 16
		for (int r = 0; r < ROWS; r++)
#pragma GCC unroll 4
			for (int v = 0; v < NV; v++)
				acc[0][r][v] = _mm512_add_ps(acc[0][r][v], acc[s][r][v]);

	store_tile(ROWS, NV, acc[0], mask, c, ldc, n, ep);
}

/* Accumulator sets for a ROWS x NV tile: enough to keep 8 FMAs in flight. */
#define KSETS(rows, nv) ((rows) * (nv) >= 8 ? 1 : (rows) * (nv) >= 4 ? 2 : 4)

/* The sums of a full 12 x 32 tile over A read in place (rows rs_a apart)
 * and a packed B panel, for the two variants below: tile()'s loop for
 * them, with every pointer it steps kept in a register. tile()'s general
 * form (the prefetch's mask, shift and end, the segment loop) left GCC
 * short of registers there: it reloaded A's row bases from the stack or
 * from vector registers for every group of three rows, about 60 extra
 * instructions per 4 k steps. ep->pf's lines go out at a pointer stepped
 * to their end, one or two per 4 k steps, as tile() issues them; BPF also
 * fetches B's rows BPF_ROWS ahead (KGEMM_TILE_STREAM_B). */
AIR_INLINE void inplace_sums(const int BPF, int64_t kc, const float *a, int64_t rs_a, const float *b,
			     const kgemm_tile_ep *ep, __m512 (*out)[MAXV])
{
	/* a local array of exactly the tile's size, which GCC keeps in
	 * registers (summed into out[][], it spilled: 187 -> 140 GFLOP/s) */
	__m512 acc[MR][2];
#pragma GCC unroll 16
	for (int r = 0; r < MR; r++)
		acc[r][0] = acc[r][1] = _mm512_setzero_ps();
	const float *a0 = a, *a1 = a + 3 * rs_a, *a2 = a + 6 * rs_a, *a3 = a + 9 * rs_a;
	const float *const a_end = a + kc;
	const int64_t lines = ep->pf_lines > 0 ? ep->pf_lines : 0;
	const char *pf = ep->pf, *const pf_end = ep->pf + 64 * lines;
	const int two = 4 * lines > kc; /* a line every 2 k steps */
#define INPLACE_ROW(r, A, off, u)                                                             \
	do {                                                                                  \
		const __m512 ar = _mm512_set1_ps((A)[(off) + (u)]);                           \
		acc[r][0] = _mm512_fmadd_ps(ar, b0, acc[r][0]);                               \
		acc[r][1] = _mm512_fmadd_ps(ar, b1, acc[r][1]);                               \
	} while (0)
#define INPLACE_STEP(u)                                                                       \
	do {                                                                                  \
		if (BPF) {                                                                    \
			_mm_prefetch((const char *)(b + ((u) + BPF_ROWS) * NR), _MM_HINT_T0); \
			_mm_prefetch((const char *)(b + ((u) + BPF_ROWS) * NR + 16), _MM_HINT_T0); \
		}                                                                             \
		const __m512 b0 = _mm512_loadu_ps(b + (u) * NR), b1 = _mm512_loadu_ps(b + (u) * NR + 16); \
		INPLACE_ROW(0, a0, 0, u);                                                     \
		INPLACE_ROW(1, a0, rs_a, u);                                                  \
		INPLACE_ROW(2, a0, 2 * rs_a, u);                                              \
		INPLACE_ROW(3, a1, 0, u);                                                     \
		INPLACE_ROW(4, a1, rs_a, u);                                                  \
		INPLACE_ROW(5, a1, 2 * rs_a, u);                                              \
		INPLACE_ROW(6, a2, 0, u);                                                     \
		INPLACE_ROW(7, a2, rs_a, u);                                                  \
		INPLACE_ROW(8, a2, 2 * rs_a, u);                                              \
		INPLACE_ROW(9, a3, 0, u);                                                     \
		INPLACE_ROW(10, a3, rs_a, u);                                                 \
		INPLACE_ROW(11, a3, 2 * rs_a, u);                                             \
	} while (0)
	while (a0 + 4 <= a_end) {
		if (pf < pf_end) {
			_mm_prefetch(pf, _MM_HINT_T1);
			pf += 64;
		}
		INPLACE_STEP(0);
		INPLACE_STEP(1);
		if (two && pf < pf_end) {
			_mm_prefetch(pf, _MM_HINT_T1);
			pf += 64;
		}
		INPLACE_STEP(2);
		INPLACE_STEP(3);
		a0 += 4, a1 += 4, a2 += 4, a3 += 4;
		b += 4 * NR;
	}
	while (a0 < a_end) {
		INPLACE_STEP(0);
		a0++, a1++, a2++, a3++;
		b += NR;
	}
#undef INPLACE_STEP
#undef INPLACE_ROW
#pragma GCC unroll 16
	for (int r = 0; r < MR; r++)
		out[r][0] = acc[r][0], out[r][1] = acc[r][1];
}

/* linear_rows' full tiles: the B panel streamed from L2, stored transposed. */
static __attribute__((noinline)) void stream_tile_t(int64_t kc, const float *a, int64_t rs_a, const float *b,
						     float *c, int64_t ldc, int n, const kgemm_tile_ep *ep)
{
	__m512 acc[MAXR][MAXV];
	int64_t ld;
	const float *pc = epilogue_src(ep, c, ldc, &ld);
	if (pc) /* stored transposed: n rows of MR floats */
		for (int j = 0; j < n; j++)
			_mm_prefetch((const char *)(pc + j * ld), _MM_HINT_T0);
	inplace_sums(1, kc, a, rs_a, b, ep, acc);
	store_tile_t(MR, 2, (const __m512(*)[MAXV])acc, c, ldc, n, ep);
}

/* store_tile out of line for inplace_tile_pf: inlined, GCC readied the
 * epilogue's values before the k loop and spilled an accumulator in it. */
static __attribute__((noinline)) void store_tile_12x32(__m512 (*acc)[MAXV], float *c, int64_t ldc, int n,
							const kgemm_tile_ep *ep)
{
	const __mmask16 mask[2] = {0xffff, k16_lanes(n - 16)};
	store_tile(MR, 2, acc, mask, c, ldc, n, ep);
}

/* The blocked GEMM's full tiles over A read in place that prefetch the next
 * B panel (ep->pf), stored row-major: ResNet-50's NHWC convolutions read
 * their pixels this way. 12x32 tiles with K 256 in L1, one thread, /tmp
 * microbenchmark: 140-145 GFLOP/s in tile(), 158-159 here, 174-176 for
 * the same tile without ep->pf. */
static __attribute__((noinline)) void inplace_tile_pf(int64_t kc, const float *a, int64_t rs_a, const float *b,
						       float *c, int64_t ldc, int n, const kgemm_tile_ep *ep)
{
	__m512 acc[MAXR][MAXV];
	prefetch_epilogue_rows(MR, 2, c, ldc, ep);
	inplace_sums(0, kc, a, rs_a, b, ep, acc);
	store_tile_12x32(acc, c, ldc, n, ep);
}

/* The variants for one row count R, by vectors of columns used (n <= 16:
 * one), with B read whole from a panel (BM 0) or masked in place (BM 1). */
#define TILE_ROWS(R, BM, PK, LDB)                                                                      \
	case R:                                                                                        \
		if (n > 16)                                                                            \
			tile(R, 2, KSETS(R, 2), BM, PK, 0, kc, nseg, seg_stride, a, rs_a, b, LDB, c, ldc, n, ep); \
		else                                                                                   \
			tile(R, 1, KSETS(R, 1), BM, PK, 0, kc, nseg, seg_stride, a, rs_a, b, LDB, c, ldc, n, ep); \
		return;

#define TILE_ALL_ROWS(BM, PK, LDB)                                                                     \
	switch (m) {                                                                                   \
		TILE_ROWS(MR, BM, PK, LDB) TILE_ROWS(MR - 1, BM, PK, LDB) TILE_ROWS(MR - 2, BM, PK, LDB) \
		TILE_ROWS(MR - 3, BM, PK, LDB) TILE_ROWS(MR - 4, BM, PK, LDB) TILE_ROWS(MR - 5, BM, PK, LDB) \
		TILE_ROWS(MR - 6, BM, PK, LDB) TILE_ROWS(MR - 7, BM, PK, LDB) TILE_ROWS(MR - 8, BM, PK, LDB) \
		TILE_ROWS(MR - 9, BM, PK, LDB) TILE_ROWS(MR - 10, BM, PK, LDB) TILE_ROWS(MR - 11, BM, PK, LDB) \
	default: return;                                                                               \
	}

/* 24 accumulators, 2 B vectors and a broadcast. A 14x32 tile (28
 * accumulators, 31 registers) made GCC spill two accumulators to the stack
 * and ran about 10% slower than this one; 8x48 and 6x64 tiles were slower
 * still (bench_gemm). A is read in place (cs_a == 1) or packed (rs_a == 1,
 * cs_a == MR): the only layouts the driver passes (ukernel.h). */
static void tile_t_via_buffer(int64_t kc, const float *a, int64_t rs_a, int64_t cs_a, const float *b, float *c,
			      int64_t ldc, int m, int n, const kgemm_tile_ep *ep);

void kgemm_ukernel_12x32__avx512(int64_t kc, const float *a, int64_t rs_a, int64_t cs_a, const float *b,
				 float *c, int64_t ldc, int m, int n, const kgemm_tile_ep *ep)
{
	const int64_t nseg = 1, seg_stride = 0;
	if (m == MR && n > 16 && cs_a == 1 && (ep->flags & KGEMM_TILE_STREAM_B)) {
		if (ep->flags & KGEMM_TILE_STORE_T)
			stream_tile_t(kc, a, rs_a, b, c, ldc, n, ep);
		else
			tile(MR, 2, 1, 0, 0, 2, kc, 1, 0, a, rs_a, b, NR, c, ldc, n, ep);
		return;
	}
	if (ep->flags & KGEMM_TILE_STORE_T) {
		tile_t_via_buffer(kc, a, rs_a, cs_a, b, c, ldc, m, n, ep);
		return;
	}
	if (ep->pf_lines > 0 && m == MR && n > 16) { /* full tiles, one accumulator set */
		if (cs_a == 1)
			inplace_tile_pf(kc, a, rs_a, b, c, ldc, n, ep);
		else
			tile(MR, 2, 1, 0, 1, 1, kc, 1, 0, a, rs_a, b, NR, c, ldc, n, ep);
		return;
	}
	if (cs_a == 1) {
		TILE_ALL_ROWS(0, 0, NR)
	}
	TILE_ALL_ROWS(0, 1, NR)
}

/* KGEMM_TILE_STORE_T on a tile only the streaming variant stores
 * transposed from its registers (partial tiles, a tile without
 * KGEMM_TILE_STREAM_B): the product and bias into a buffer, then stored
 * transposed with the rest of the epilogue, in the row-major order of
 * sums. Out of line: rare, and it would bloat the wrapper. */
static __attribute__((noinline)) void tile_t_via_buffer(int64_t kc, const float *a, int64_t rs_a, int64_t cs_a,
							 const float *b, float *c, int64_t ldc, int m, int n,
							 const kgemm_tile_ep *ep)
{
	float buf[MR * NR];
	const int first = ep->flags & KGEMM_TILE_FIRST, last = ep->flags & KGEMM_TILE_LAST;
	kgemm_tile_ep e = *ep;
	e.flags = (ep->flags | KGEMM_TILE_FIRST | KGEMM_TILE_LAST) & ~KGEMM_TILE_STORE_T;
	e.res = NULL;
	e.act = K_ACT_NONE;
	if (!first)
		e.bias_m = e.bias_n = NULL;
	kgemm_ukernel_12x32__avx512(kc, a, rs_a, cs_a, b, buf, NR, m, n, &e);
	const k_act act = last ? ep->act : K_ACT_NONE;
	for (int j = 0; j < n; j++) {
		float *cj = c + j * ldc;
		const float *res = first && ep->res ? ep->res + j * ep->ld_res : NULL;
		for (int r = 0; r < m; r++) {
			float x = buf[r * NR + j];
			if (!first)
				x += cj[r];
			else if (res)
				x += res[r];
			cj[r] = kgemm_act_simple_f32(x, act);
		}
	}
	if (kgemm_act_is_transcendental(act))
		act_tile(c, ldc, n, m, act);
}

void kgemm_ukernel_12x32_strided__avx512(int64_t kc, const float *a, int64_t rs_a, int64_t cs_a,
					 const float *b, int64_t ldb, float *c, int64_t ldc, int m, int n,
					 const kgemm_tile_ep *ep)
{
	const int64_t nseg = 1, seg_stride = 0;
	if (cs_a == 1) {
		TILE_ALL_ROWS(1, 0, ldb)
	}
	TILE_ALL_ROWS(1, 1, ldb)
}

/* All of a tile's K blocks read from different places of A in one call
 * (kgemm_ukernel_seg_fn), for the implicit convolution: ResNet-50's stem
 * has blocks of 21 (7 taps x 3 channels), and one kernel call per block
 * stored and reloaded the 12x32 tile seven times. */
void kgemm_ukernel_12x32_seg__avx512(int64_t kc, int64_t nseg, int64_t seg_stride, const float *a, int64_t rs_a,
				     const float *b, float *c, int64_t ldc, int m, int n, const kgemm_tile_ep *ep)
{
	const int64_t cs_a = 1;
	(void)cs_a;
	TILE_ALL_ROWS(0, 0, NR)
}

/* Row-major A into 12-row panels (element (r, p) at [p * 12 + r]): four k
 * steps at a time, as three 4x4 transposes. The generic scalar packing
 * (one row at a time, one float per store) took 5% of a 2048^3 product:
 * one short stream per row left the rows' memory latency exposed; twelve
 * rows read side by side keep twelve streams in flight. */
void kgemm_pack_a_12__avx512(int64_t m, int64_t k, const float *A, int64_t lda, float *dst)
{
	for (int64_t i0 = 0; i0 < m; i0 += MR) {
		const int rows = m - i0 < MR ? (int)(m - i0) : MR;
		const float *s = A + i0 * lda;
		float *d = dst + i0 * k;
		int64_t p = 0;
		if (rows == MR) {
			for (; p + 4 <= k; p += 4) {
#pragma GCC unroll 3
				for (int g = 0; g < MR / 4; g++) {
					const float *q = s + 4 * g * lda + p;
					__m128 r0 = _mm_loadu_ps(q), r1 = _mm_loadu_ps(q + lda);
					__m128 r2 = _mm_loadu_ps(q + 2 * lda), r3 = _mm_loadu_ps(q + 3 * lda);
					_MM_TRANSPOSE4_PS(r0, r1, r2, r3);
					float *o = d + p * MR + 4 * g;
					_mm_storeu_ps(o, r0);
					_mm_storeu_ps(o + MR, r1);
					_mm_storeu_ps(o + 2 * MR, r2);
					_mm_storeu_ps(o + 3 * MR, r3);
				}
			}
		}
		/* the last k steps and a short last panel (zero rows below A) */
		for (; p < k; p++)
			for (int r = 0; r < MR; r++)
				d[p * MR + r] = r < rows ? s[r * lda + p] : 0.0f;
	}
}

/* Column-major A (element (i, p) at A[i + p * lda]): a panel's k step is
 * the 12 floats of column p from row i0 on, consecutive in A, so one
 * masked load and one masked store. Column by column, every panel's step p
 * before the next column: A is read in order, one stream the prefetchers
 * follow. Panel by panel (each panel's k steps before the next panel's)
 * read 48 bytes from every column in turn, a stride of 768 B to 3 KiB in
 * ViT-Tiny's weight gradients (g^T @ x, 768 x 1576 @ 1576 x 192): packing
 * all of A at once (pack.c, kgemm_share_a) that way took 16% of those
 * products, with A cold from memory. Rows past m are stored as zeros. */
void kgemm_pack_a_t_12__avx512(int64_t m, int64_t k, const float *A, int64_t lda, float *dst)
{
	const int64_t full = m / MR;
	const int tail = (int)(m % MR);
	const __mmask16 out = (__mmask16)((1u << MR) - 1), in_tail = (__mmask16)((1u << tail) - 1);
	for (int64_t p = 0; p < k; p++) {
		const float *s = A + p * lda;
		float *d = dst + p * MR;
		for (int64_t t = 0; t < full; t++)
			_mm512_mask_storeu_ps(d + t * MR * k, out, _mm512_maskz_loadu_ps(out, s + t * MR));
		if (tail)
			_mm512_mask_storeu_ps(d + full * MR * k, out, _mm512_maskz_loadu_ps(in_tail, s + full * MR));
	}
}

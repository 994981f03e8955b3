/* lowp_w_pack.bf16.c - the bf16-weight GEMM's path for large M (prefill) on
 * AVX512-BF16 (lowp_w.h): the broadcast formulation, as the f32 GEMM's.
 * A is rounded to bf16 once per call into panels of MR rows; each task
 * packs its own block of W (KC x its columns) into its thread's workspace
 * slice, each pair of k of 32 consecutive columns adjacent (the layout
 * vdpbf16ps multiplies lane by lane), and an MR x NR register tile
 * broadcasts one pair of an A row against two vectors of W per k pair.
 * No horizontal sums: the lanes are C's columns. Packing W costs N * K a
 * call (and A, M * K), against M * N * K of products.
 *
 * Loops: K blocks of at most KC k, a task's W block (kc x its columns,
 * W_BLOCK bytes at most: in L2) packed per block, then MR rows of A
 * against each NR-column panel of the block. Partial sums of K blocks are
 * kept in C itself: the first block adds bias and residual (read before C
 * is written, so it may alias C), the last applies the activation. Long
 * K blocks won over A panels that fit L1: on a Zen 4 core, 2048 k x 64
 * columns ran at 215 GFLOP/s where 256 k x 512 columns ran at 198 (C
 * passes and tile ends cost more than A from L2).
 * While a block's tiles run, the raw W rows the thread packs next are
 * prefetched into L2 (pf_cursor): a model's weights come from memory each
 * call, and pack_w waited for them with the tiles idle. */
#include <immintrin.h>

#include "kernels/common/kernel.h"
#include "kernels/common/lanes_avx512.h"
#include "kernels/common/transpose_avx512.h"
#include "kernels/gemm/lowp_w_avx512.h"
#include "kernels/gemm/lowp_w_internal.h"
#include "kernels/gemm/ukernel.h"

#define AIR_INLINE static inline __attribute__((always_inline))

/* The tile: MR rows of A, NR = 16 * NV columns of W; MR * NV accumulators,
 * NV W vectors and the broadcast in 32 registers (8 x 48 and 6 x 64 ran
 * as fast). K blocks of at most KC k (a multiple of 32), a thread's packed
 * W block at most W_BLOCK bytes (128 and 512 KiB: the same). */
enum { MR = 12, NV = 2, NR = 16 * NV, KC = 2048, W_BLOCK = 256 * 1024 };
_Static_assert(MR <= 16 && (int)MR <= (int)KLOWP_ROWS_AT_ONCE, "A panels are transposed 16 rows at a time");
_Static_assert(KC % 32 == 0 && KC / 2 * NR * 4 <= W_BLOCK, "a W block holds a panel");
/* From MIN_M rows of A on, this path (below, lowp_w.bf16.c's dots):
 * at M = 64 the dots were 4-7% faster on 2048 x 2048, from 72 on slower
 * on every LLM shape measured. With short K, from MIN_M_SHORT_K rows:
 * ResNet-50's M = 49 (cold W, 1 thread, Zen 4) ran 12-17% faster here on
 * 2048 x 512 and 2048 x 1024 (a last panel of 1 row costs 4: tile_rows),
 * 7-11% slower on 512 x 2048. */
enum { MIN_M = 72, MIN_M_SHORT_K = 40, SHORT_K = 1024 };
/* A task's columns, at least, when columns are split to give threads
 * tasks. */
enum { MIN_NB = 64 };

enum { STAGE_FIRST = 1, STAGE_LAST = 2 };

typedef struct pack_job {
	const klowp_job *j;
	const klowp_src *A;
	uint32_t *a; /* A in panels: panel p's pair kk of row r at a[(p * kp + kk) * MR + r] */
	int64_t kp;  /* pairs of k: K / 2 rounded up */
	int64_t kc;  /* k values a K block */
	uint32_t *w; /* per-thread W blocks, w_slice elements apart */
	size_t w_slice;
	int64_t panels, panels_per_task;
	int64_t mb, nb, nm, nn;
	int nthreads; /* the pool's */
} pack_job;

static int64_t round_up(int64_t x, int64_t m)
{
	return (x + m - 1) / m * m;
}

/* Lanes [0, n) of 32 16-bit lanes, n clamped to [0, 32]. */
AIR_INLINE __mmask32 lanes32(int64_t n)
{
	return n >= 32 ? (__mmask32)0xffffffffu : n <= 0 ? (__mmask32)0 : (__mmask32)((1u << n) - 1);
}

/* Pairs [kk, kk + 16) of an A row rounded to bf16, zero past K, by
 * vcvtne2ps2bf16: round to nearest even as k_f32_to_bf16 (NaN kept
 * quiet), one instruction for 32 values where the integer rounding of
 * lowp_w.bf16.c's bf16_convert_a took 8 for 16 (pack_a_panel was 9% of
 * ResNet-50 bf16's time on a Zen 4 core, on its arithmetic, not its
 * loads). Unlike k_f32_to_bf16 it turns f32 subnormals into zero; the
 * products would count them as zero anyway (vdpbf16ps's rule, lowp_w.h),
 * so only an f32 subnormal that rounds up to the least normal bf16
 * (within 2^-134 of 2^-126) differs: it contributes 0, not 2^-126 w. */
AIR_INLINE __m512 a_pairs(const float *row, int64_t K, int64_t kk)
{
	const int64_t k = 2 * kk;
	const __m512 lo = _mm512_maskz_loadu_ps(k16_lanes(K - k), row + k);
	const __m512 hi = _mm512_maskz_loadu_ps(k16_lanes(K - k - 16), row + k + 16);
	return _mm512_castsi512_ps((__m512i)_mm512_cvtne2ps_pbh(hi, lo));
}

/* Panel p of A: its MR rows (zeros past M), 16 pairs at a time
 * transposed so that each pair's MR rows are adjacent. */
static void pack_a_panel(const pack_job *pj, int64_t p, int thread)
{
	const klowp_job *j = pj->j;
	const int64_t i0 = p * MR, kp = pj->kp;
	uint32_t *dst = pj->a + p * kp * MR;
	const float *row[MR];
	for (int q = 0; q < MR; q++)
		row[q] = i0 + q < j->M ? klowp_src_row(pj->A, i0 + q, thread, q) : NULL;
	for (int64_t kk = 0; kk < kp; kk += 16) {
		__m512 r[16];
#pragma GCC unroll 16
		for (int q = 0; q < 16; q++)
			r[q] = q < MR && row[q] ? a_pairs(row[q], j->K, kk) : _mm512_setzero_ps();
		k16_transpose(r);
		const int nk = (int)k_min64(16, kp - kk);
		for (int t = 0; t < nk; t++)
			_mm512_mask_storeu_ps(dst + (kk + t) * MR, (__mmask16)((1u << MR) - 1), r[t]);
	}
}

static void pack_a_task(void *ctx, int64_t t, int thread)
{
	const pack_job *pj = ctx;
	const int64_t p1 = k_min64(pj->panels, (t + 1) * pj->panels_per_task);
	for (int64_t p = t * pj->panels_per_task; p < p1; p++)
		pack_a_panel(pj, p, thread);
}

/* 16 rows of W (from w, ldw apart) x 32 k transposed to 16 pairs of k of
 * 16 columns, NR apart at dst; FULL: all 16 rows, all 32 k. Else rows
 * from `rows` on and k from kn on are zero (the masked load reads nothing
 * past them: an odd K's last pair gets a zero), and the pairs past kn are
 * not stored. */
AIR_INLINE void pack_w16(const int FULL, const uint16_t *w, int64_t ldw, int rows, int64_t kn, uint32_t *dst)
{
	const __mmask32 km = lanes32(kn);
	__m512 r[16];
#pragma GCC unroll 16
	for (int q = 0; q < 16; q++) {
		if (FULL)
			r[q] = _mm512_castsi512_ps(_mm512_loadu_si512(w + q * ldw));
		else
			r[q] = q < rows ? _mm512_castsi512_ps(_mm512_maskz_loadu_epi16(km, w + q * ldw)) : _mm512_setzero_ps();
	}
	k16_transpose(r);
#pragma GCC unroll 16
	for (int t = 0; t < 16; t++)
		if (FULL || 2 * t < kn)
			_mm512_storeu_ps(dst + t * NR, r[t]);
}

/* W rows [n0, n1) x k [k0, k0 + kc) into panels of NR columns, panel q at
 * dst + q * kpb * NR holding pair kk of column c at [kk * NR + c]. Columns
 * past n1 up to the panel's end are zero. */
static void pack_w(const klowp_job *j, int64_t n0, int64_t n1, int64_t k0, int64_t kc, uint32_t *dst)
{
	const int64_t kpb = (kc + 1) / 2;
	const int64_t n_end = n0 + round_up(n1 - n0, NR);
	for (int64_t n = n0; n < n_end; n += 16) {
		uint32_t *panel = dst + (n - n0) / NR * kpb * NR + (n - n0) % NR;
		const uint16_t *w = j->W + k_min64(n, n1 - 1) * j->ldw + k0;
		const int rows = (int)k_min64(16, n1 - n);
		int64_t kk = 0;
		if (rows == 16)
			for (; 2 * kk + 32 <= kc; kk += 16)
				pack_w16(1, w + 2 * kk, j->ldw, 16, 32, panel + kk * NR);
		for (; kk < kpb; kk += 16)
			pack_w16(0, w + 2 * kk, j->ldw, rows, kc - 2 * kk, panel + kk * NR);
	}
}

/* An m x n tile of one K block's sums into C: the first block adds the
 * epilogue's linear terms (the residual read before C is written), later
 * ones add to C; the last applies the activation, with the formulas the
 * f32 GEMM uses (kgemm_epilogue_row: vmath). Full tiles store whole vectors (FULL),
 * edge tiles masked ones. */
AIR_INLINE void finish(const int FULL, const klowp_job *j, int stage, int64_t i0, int m, int64_t n0, int n,
		       const __m512 *acc)
{
	const k_epilogue *ep = j->ep;
	const __m512 alpha = _mm512_set1_ps(ep->alpha);
#pragma GCC unroll 16
	for (int r = 0; r < MR; r++) {
		if (!FULL && r >= m)
			break;
		const int64_t i = i0 + r;
		float *c = j->C + i * j->ldc + n0;
		const float *res = ep->residual ? ep->residual + i * ep->ld_residual + n0 : NULL;
#pragma GCC unroll 4
		for (int v = 0; v < NV; v++) {
			const __mmask16 k = FULL ? (__mmask16)0xffff : k16_lanes(n - 16 * v);
			__m512 x = _mm512_mul_ps(alpha, acc[r * NV + v]);
			if (stage & STAGE_FIRST) {
				if (ep->bias_n)
					x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(k, ep->bias_n + n0 + 16 * v));
				if (ep->bias_m)
					x = _mm512_add_ps(x, _mm512_set1_ps(ep->bias_m[i]));
				if (res)
					x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(k, res + 16 * v));
			} else {
				x = _mm512_add_ps(_mm512_maskz_loadu_ps(k, c + 16 * v), x);
			}
			if ((stage & STAGE_LAST) && klowp_act_in_registers(ep->act))
				x = klowp_simple_act(x, ep->act);
			if (FULL)
				_mm512_storeu_ps(c + 16 * v, x);
			else
				_mm512_mask_storeu_ps(c + 16 * v, k, x);
		}
		if ((stage & STAGE_LAST) && ep->act != K_ACT_NONE && !klowp_act_in_registers(ep->act))
			kgemm_epilogue_row(c, NULL, n, ep->act); /* vmath: as the f32 GEMM */
	}
}

/* Lines of the W rows the next block will pack, fetched into L2 while
 * this block's tiles compute: pack_w read W from memory with the tiles
 * idle (BERT-base s128 in bf16, 1 thread, Zen 4: pack_w was 12% of the
 * time, its samples on the loads; ResNet-50 b1: 4%). The rows are
 * W[n0 + r][k0 .. k0 + kc) for r < rows; `per` lines every PF_EVERY
 * k-pair steps of a tile, so the lines are spread over the block's tiles.
 * Prefetches never fault, so a guess that is never packed costs only the
 * bandwidth. Addresses go through uintptr_t: a line may lie past the row. */
enum { PF_EVERY = 4 };
typedef struct pf_cursor {
	uintptr_t row;	   /* the current row's first byte to fetch */
	uintptr_t ld;	   /* bytes between rows */
	int64_t rows;	   /* rows left, the current one included */
	int64_t line;	   /* next line of the current row */
	int64_t lines;	   /* lines a row */
	int64_t per;	   /* lines a PF_EVERY steps */
} pf_cursor;

AIR_INLINE void pf_step(pf_cursor *pf)
{
	for (int64_t q = 0; q < pf->per && pf->rows > 0; q++) {
		_mm_prefetch((const char *)(pf->row + (uintptr_t)pf->line * 64u), _MM_HINT_T1);
		if (++pf->line == pf->lines) {
			pf->line = 0;
			pf->row += pf->ld;
			pf->rows--;
		}
	}
}

/* kp k-pair steps of the first R rows (R <= MR) of the MR x NR tile into
 * acc; with PF, pf's lines fetched on the way, PF_EVERY steps apart
 * (without, the loop as it was before prefetching: chunked, it ran 16%
 * slower on 3136 x 64 x 576). */
AIR_INLINE void tile_steps(const int PF, const int R, int64_t kp, const uint32_t *a, const uint32_t *w, pf_cursor *pf,
			   __m512 *acc)
{
	for (int64_t p0 = 0; p0 < kp; p0 += PF ? PF_EVERY : kp) {
		if (PF)
			pf_step(pf);
		const int64_t p1 = PF ? k_min64(kp, p0 + PF_EVERY) : kp;
		for (int64_t p = p0; p < p1; p++, a += MR, w += NR) {
			__m512bh wv[NV];
#pragma GCC unroll 4
			for (int v = 0; v < NV; v++)
				wv[v] = (__m512bh)_mm512_loadu_si512(w + 16 * v);
#pragma GCC unroll 16
			for (int r = 0; r < R; r++) {
				const __m512bh av = (__m512bh)_mm512_set1_epi32((int)a[r]);
#pragma GCC unroll 4
				for (int v = 0; v < NV; v++)
					acc[r * NV + v] = _mm512_dpbf16_ps(acc[r * NV + v], av, wv[v]);
			}
		}
	}
}

/* The rows a tile of m rows computes: m rounded up to 4, so a last panel
 * of few rows (M = 49: 4 panels and 1 row) costs about its rows, not a
 * whole panel's (49 rows at 12 a panel were 60 rows of work). */
AIR_INLINE void tile_rows(const int PF, int m, int64_t kp, const uint32_t *a, const uint32_t *w, pf_cursor *pf,
			  __m512 *acc)
{
	if (m > 8)
		tile_steps(PF, MR, kp, a, w, pf, acc);
	else if (m > 4)
		tile_steps(PF, 8, kp, a, w, pf, acc);
	else
		tile_steps(PF, 4, kp, a, w, pf, acc);
}

/* C[i0 .. i0 + m) x [n0 .. n0 + n) += one K block: acc[MR][NR] over kp
 * pairs, a at an A panel's first pair of the block, w at a W panel's;
 * pf's lines fetched on the way while it has any. */
static void tile(const klowp_job *j, int stage, int64_t kp, const uint32_t *a, const uint32_t *w, int64_t i0, int m,
		 int64_t n0, int n, pf_cursor *pf)
{
	_Static_assert(MR > 8 && MR <= 12, "tile_rows' cases");
	__m512 acc[MR * NV];
#pragma GCC unroll 32
	for (int t = 0; t < MR * NV; t++)
		acc[t] = _mm512_setzero_ps();
	if (pf->rows > 0)
		tile_rows(1, m, kp, a, w, pf, acc);
	else
		tile_rows(0, m, kp, a, w, pf, acc);
	if (m == MR && n == NR)
		finish(1, j, stage, i0, m, n0, n, acc);
	else
		finish(0, j, stage, i0, m, n0, n, acc);
}

/* The C tile finish will read and write (and the residual, for the first
 * K block), fetched while the tile is computed: it comes from L3 or
 * further (the whole of a task's C goes by between two K blocks), and
 * waiting for it took 4-10% of the time. Always inlined: GCC 12 drops the
 * calls to a static function of prefetches alone as free of effects. */
AIR_INLINE void prefetch_c(const klowp_job *j, int stage, int64_t i0, int m, int64_t n0)
{
	const k_epilogue *ep = j->ep;
	const float *c = j->C + i0 * j->ldc + n0;
	const float *res = (stage & STAGE_FIRST) && ep->residual ? ep->residual + i0 * ep->ld_residual + n0 : NULL;
	for (int r = 0; r < m; r++) {
		_mm_prefetch((const char *)(c + r * j->ldc), _MM_HINT_T0);
		_mm_prefetch((const char *)(c + r * j->ldc + NR - 1), _MM_HINT_T0);
		if (res) {
			_mm_prefetch((const char *)(res + r * ep->ld_residual), _MM_HINT_T0);
			_mm_prefetch((const char *)(res + r * ep->ld_residual + NR - 1), _MM_HINT_T0);
		}
	}
}

/* The cursor over the raw W block packed after the one of (task t, K
 * block at k0): the same columns' next K block, else the first K block
 * of task t + nthreads, the one this thread likely takes next (tasks are
 * handed out in order, one at a time); no rows when there is none. The
 * lines are spread over ntiles tiles of kpb k-pair steps. */
static pf_cursor next_block(const pack_job *pj, int64_t t, int64_t k0, int nthreads, int64_t ntiles, int64_t kpb)
{
	const klowp_job *j = pj->j;
	pf_cursor pf = {0, (uintptr_t)j->ldw * 2u, 0, 0, 1, 1};
	int64_t nk0 = k0 + pj->kc, jn = t / pj->nm;
	if (nk0 >= j->K) {
		const int64_t t2 = t + nthreads;
		if (t2 >= pj->nm * pj->nn)
			return pf;
		nk0 = 0;
		jn = t2 / pj->nm;
	}
	const int64_t n0 = jn * pj->nb, n1 = k_min64(j->N, n0 + pj->nb);
	const int64_t kc = k_min64(pj->kc, j->K - nk0);
	pf.row = (uintptr_t)(j->W + n0 * j->ldw + nk0);
	pf.rows = n1 - n0;
	pf.lines = (kc * 2 + 63) / 64 + 1; /* + 1: the row need not start a line */
	const int64_t chunks = ntiles * k_cdiv(kpb, PF_EVERY);
	pf.per = k_cdiv(pf.rows * pf.lines, chunks < 1 ? 1 : chunks);
	return pf;
}

/* Rows [m0, m1) x columns [n0, n1) of C, K block by K block, with the
 * thread's W slice. */
static void gemm_task(void *ctx, int64_t t, int thread)
{
	const pack_job *pj = ctx;
	const klowp_job *j = pj->j;
	const int64_t im = t % pj->nm, jn = t / pj->nm;
	const int64_t m0 = im * pj->mb, m1 = k_min64(j->M, m0 + pj->mb);
	const int64_t n0 = jn * pj->nb, n1 = k_min64(j->N, n0 + pj->nb);
	uint32_t *w = pj->w + (size_t)thread * pj->w_slice;
	const int64_t ntiles = k_cdiv(m1 - m0, MR) * k_cdiv(n1 - n0, NR);
	for (int64_t k0 = 0; k0 < j->K; k0 += pj->kc) {
		const int64_t kc = k_min64(pj->kc, j->K - k0), kpb = (kc + 1) / 2;
		const int stage = (k0 == 0 ? STAGE_FIRST : 0) | (k0 + kc >= j->K ? STAGE_LAST : 0);
		pack_w(j, n0, n1, k0, kc, w);
		pf_cursor pf = next_block(pj, t, k0, pj->nthreads, ntiles, kpb);
		for (int64_t i = m0; i < m1; i += MR) {
			const uint32_t *a = pj->a + ((i / MR) * pj->kp + k0 / 2) * MR;
			for (int64_t n = n0; n < n1; n += NR) {
				prefetch_c(j, stage, i, (int)k_min64(MR, m1 - i), n);
				tile(j, stage, kpb, a, w + (n - n0) / NR * kpb * NR, i, (int)k_min64(MR, m1 - i), n,
				     (int)k_min64(NR, n1 - n), &pf);
			}
		}
	}
}

static size_t a_bytes(int64_t M, int64_t K)
{
	return (size_t)round_up(M, MR) * (size_t)((K + 1) / 2) * sizeof(uint32_t);
}

static size_t pack_workspace(int64_t M, int64_t K, int nthreads)
{
	return k_align64(a_bytes(M, K)) + (size_t)nthreads * W_BLOCK;
}

/* A rounded into panels, then tasks of W blocks (and, with few columns,
 * of A's rows). */
static void pack_run(const klowp_job *j, const klowp_src *A, rt_pool *pool, void *room)
{
	const int nthreads = rt_pool_size(pool);
	const int64_t M = j->M, N = j->N, K = j->K;
	pack_job pj = {j, A, room, (K + 1) / 2, 0, NULL, W_BLOCK / sizeof(uint32_t), 0, 0, 0, 0, 0, 0, nthreads};
	pj.w = (uint32_t *)((char *)room + k_align64(a_bytes(M, K)));

	pj.panels = k_cdiv(M, MR);
	const int64_t atasks = nthreads > 1 ? k_min64(pj.panels, 4 * (int64_t)nthreads) : 1;
	pj.panels_per_task = k_cdiv(pj.panels, atasks);
	rt_pool_run(pool, k_cdiv(pj.panels, pj.panels_per_task), pack_a_task, &pj);

	/* K blocks of even size, W blocks as wide as W_BLOCK lets them be */
	pj.kc = round_up(k_cdiv(K, k_cdiv(K, KC)), 32);
	const int64_t nc = (int64_t)(pj.w_slice / (size_t)(pj.kc / 2)) / NR * NR;
	/* tasks in a multiple of the threads (5 blocks of 2048 x 768 x 768 on
	 * 2 threads ran at 73% of 6), at least 2 each */
	const int64_t nn0 = k_cdiv(N, nc), want = nthreads > 1 ? 2 * (int64_t)nthreads : 1;
	int64_t nn = nn0 < want ? want : round_up(nn0, nthreads), nm = 1;
	nn = k_min64(nn, N / MIN_NB);
	nn = nn < nn0 ? nn0 : nn;
	if (nn < want)
		nm = k_min64(k_cdiv(want, nn), k_cdiv(M, 4 * MR));
	pj.nb = round_up(k_cdiv(N, nn), NR);
	pj.nn = k_cdiv(N, pj.nb);
	pj.mb = round_up(k_cdiv(M, nm), MR);
	pj.nm = k_cdiv(M, pj.mb);
	rt_pool_run(pool, pj.nm * pj.nn, gemm_task, &pj);
}

static int pack_takes(int64_t M, int64_t K)
{
	return M >= MIN_M || (M >= MIN_M_SHORT_K && K <= SHORT_K);
}

const klowp_wide klowp_bf16_pack_wide = {MIN_M_SHORT_K, pack_takes, pack_workspace, pack_run};

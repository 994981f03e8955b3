/* gemm.c - the portable f32 GEMM driver: cache blocking (the plan),
 * workspace sizes, the parallel tasks, the fused epilogue's plumbing, and the
 * entry points. The micro-kernels and the choice of one are in ukernel.c,
 * packing in pack.c, products that read B in place in thin.c, the oracle in
 * gemm_ref.c.
 *
 * Blocking follows the BLIS/GotoBLAS scheme. B is packed once into panels of
 * nr columns covering all of K (kgemm_pack_b for weights). A B given at call
 * time is packed as it is used, where the kernel can (row-major B and a
 * strided kernel that stores what it reads: kgemm_run_b_source), else in a
 * parallel phase of the call first. The output is cut into tasks of mc rows x nc columns.
 * A task walks K in blocks of kc; for each nr-wide B micro-panel (kc x nr,
 * in L1) it runs the micro-kernel down the block's rows, whose mc x kc block
 * of A stays in L2. Row-major A is read in place (the kernel broadcasts from
 * mr row pointers, as XNNPACK does) when a task is narrow: packing it cost as
 * much as the arithmetic it fed when N is small (ResNet's 64-channel layers
 * ran at 70% of peak instead of 90%). Wide tasks pack it, where the kernel
 * has a fast packing (kgemm_reads_a_in_place). Other layouts of A are always
 * packed into the thread's workspace slot. Partial sums over K blocks stay
 * in C (hot in L2); the last K block applies the activation tile by tile.
 * While the micro-tiles of one B micro-panel run, the next panel is
 * prefetched a slice per tile (it comes from L3 when B outgrows L2: +10% at
 * 1024^3 on AVX-512).
 *
 * Thin products (M <= KGEMM_THIN_M) in kgemm_f32 skip packing B: see
 * kgemm_thin (thin.c).
 *
 * Threads take tasks dynamically from the pool. Tasks are numbered N-block
 * major, so threads running at the same time read the same packed B block
 * (shared, read-only, in L3). */
#include "kernels/gemm/gemm.h"

#include "kernels/common/kernel.h"
#include "kernels/gemm/amx.h"
#include "kernels/gemm/gemm_internal.h"
#include "kernels/gemm/ukernel.h"

/* How many B micro-panels ahead of the one in use the task prefetches: a
 * late ResNet-50 layer (M = 49, 9 MiB of weights) uses each panel for only
 * five micro-tiles, too short to hide memory latency one panel ahead.
 * ResNet-50 batch 1 convolutions: 1 ahead 31.2-31.7 ms, 2 ahead 29.9-30.9
 * (torchair.report.profile, 20 runs); BERT-base the same within noise. */
enum { KGEMM_PF_PANELS = 2 };
/* The batched call packs B for at most this many bytes of items at a time. */
#define KGEMM_BATCH_PACK_BYTES ((size_t)32 << 20)

/* ---- the kernel in use -------------------------------------------------- */

const char *kgemm_kernel_name(void)
{
	return kgemm_active_ukernel()->name;
}

int kgemm_tile_rows(void)
{
	return kgemm_active_ukernel()->mr;
}

int kgemm_tile_cols(void)
{
	return kgemm_active_ukernel()->nr;
}

/* ---- plan and workspace ------------------------------------------------- */

/* Splits one matrix (of batch) into tasks. One thread: blocks of the cache
 * sizes. More: keep splitting (the longer side of a task, so tasks stay
 * square-ish and the A packing and B streaming per task stay small next to
 * its arithmetic) until there are a few tasks per thread to balance. */
kgemm_plan kgemm_make_plan(const kgemm_ukernel_desc *uk, int64_t batch, int64_t M, int64_t N,
			   int64_t K, int nthreads)
{
	kgemm_plan p;
	/* K is blocked so that a B micro-panel stays in L1 while it is used by
	 * every micro-tile row of the block; with one row (GEMV-like) nothing
	 * reuses it, and one long stream per panel is better for the prefetcher */
	int64_t kb = M <= uk->mr ? 1 : k_cdiv(K, uk->kc);
	p.kc = kb ? k_cdiv(K, kb) : 0;
	int64_t nm = k_cdiv(M, uk->mc), nn = k_cdiv(N, uk->nc);
	int64_t mtiles = k_cdiv(M, uk->mr), ntiles = k_cdiv(N, uk->nr);
	/* tasks per thread: 4 balance uneven ones; but when one row block
	 * holds all of M, every task reads all of A, and 2 per thread ran
	 * BERT-base's M = 128 linears in 77.5-78.5 ms per run instead of
	 * 83.5-85.2 (1024^3, several row blocks, lost 7% with 2) */
	int64_t want = 1;
	if (nthreads > 1 && (double)batch * M * N * K >= KGEMM_PARALLEL_MIN_MACS)
		want = (batch == 1 && nm == 1 ? 2 : 4) * (int64_t)nthreads;
	while (batch * nm * nn < want) {
		int can_m = nm < mtiles, can_n = nn < ntiles;
		if (!can_m && !can_n)
			break;
		if (can_n && (!can_m || k_cdiv(N, nn) >= k_cdiv(M, nm)))
			nn++;
		else
			nm++;
	}
	/* As many tasks as threads or a multiple, of as many row tiles each
	 * as can be (kgemm_rows): 1500 x 256 @ 256 x 256 on 2 threads came out
	 * at 9 row blocks, 8 of 14 tiles and one of 13, and one thread did 70
	 * tiles while the other did 55 (0.92x MKL with 2 threads, 1.07x with
	 * one). */
	if (want > 1)
		while ((batch * nm * nn) % nthreads != 0 && nm < mtiles)
			nm++;
	p.nm = nm;
	p.nc = k_cdiv(k_cdiv(N, nn), uk->nr) * uk->nr;
	p.nn = k_cdiv(N, p.nc);
	return p;
}

/* Rows [*m0, *m1) of row block im of the plan: the M / mr row tiles split
 * as evenly as whole tiles allow. */
void kgemm_rows(const kgemm_plan *p, int64_t M, int mr, int64_t im, int64_t *m0, int64_t *m1)
{
	const int64_t tiles = k_cdiv(M, mr);
	*m0 = im * tiles / p->nm * mr;
	*m1 = k_min64(M, (im + 1) * tiles / p->nm * mr);
}

/* Bytes of one thread's A block: an upper bound of mc * kc over all plans. */
static size_t kgemm_slot_bytes(const kgemm_ukernel_desc *uk, int64_t M, int64_t K)
{
	int64_t mc = k_min64(k_cdiv(M, uk->mr), k_cdiv(uk->mc, uk->mr)) * uk->mr;
	int64_t kc = M <= uk->mr ? K : k_min64(K, uk->kc);
	return kgemm_align((size_t)mc * (size_t)kc * sizeof(float));
}

/* Bytes of one micro-panel of B a thread packs as it goes. */
static size_t kgemm_panel_bytes(const kgemm_ukernel_desc *uk, int64_t M, int64_t K)
{
	int64_t kc = M <= uk->mr ? K : k_min64(K, uk->kc);
	return kgemm_align((size_t)kc * (size_t)uk->nr * sizeof(float));
}

static int kgemm_empty(int64_t M, int64_t N, int64_t K)
{
	return M <= 0 || N <= 0 || K <= 0;
}

/* The per-thread A blocks of the f32 kernels. */
static size_t kgemm_slots_workspace_bytes(int64_t M, int64_t N, int64_t K, int nthreads)
{
	if (kgemm_empty(M, N, K))
		return 0;
	if (nthreads < 1)
		nthreads = 1;
	return (size_t)nthreads * kgemm_slot_bytes(kgemm_active_ukernel(), M, K);
}

size_t kgemm_packed_workspace_bytes(int64_t M, int64_t N, int64_t K, int nthreads)
{
	size_t f32 = kgemm_slots_workspace_bytes(M, N, K, nthreads);
	size_t amx = kgemm_empty(M, N, K) ? 0 : kamx_workspace_bytes(M, N, K, nthreads);
	return amx > f32 ? amx : f32;
}

/* kgemm_f32's workspace for row-major A: room for either way of running B. */
static size_t kgemm_base_workspace_bytes(const kgemm_ukernel_desc *uk, int64_t M, int64_t N, int64_t K,
					 int nthreads)
{
	return kgemm_align(kgemm_packed_floats(K, N, uk->nr) * sizeof(float)) +
	       kgemm_slots_workspace_bytes(M, N, K, nthreads) + (size_t)nthreads * kgemm_panel_bytes(uk, M, K);
}

/* Bytes of all of A packed once (kgemm_share_a). */
static size_t kgemm_whole_a_bytes(const kgemm_ukernel_desc *uk, int64_t M, int64_t K)
{
	return kgemm_align((size_t)k_cdiv(M, uk->mr) * (size_t)uk->mr * (size_t)K * sizeof(float));
}

size_t kgemm_workspace_bytes(int64_t M, int64_t N, int64_t K, int64_t cs_a, int nthreads)
{
	if (kgemm_empty(M, N, K))
		return 0;
	const kgemm_ukernel_desc *uk = kgemm_active_ukernel();
	if (nthreads < 1)
		nthreads = 1;
	size_t bytes = kgemm_base_workspace_bytes(uk, M, N, K, nthreads);
	if (cs_a != 1)
		bytes += kgemm_whole_a_bytes(uk, M, K);
	/* enough for kgemm_f32_packed too (gemm.h) */
	size_t amx = kamx_workspace_bytes(M, N, K, nthreads);
	return amx > bytes ? amx : bytes;
}

/* Batch items whose packed B fit in one round of the batched call. */
static int64_t kgemm_batch_chunk(int64_t batch, int64_t N, int64_t K)
{
	size_t item = kgemm_align(kgemm_packed_floats(K, N, kgemm_active_ukernel()->nr) * sizeof(float));
	int64_t chunk = (int64_t)(KGEMM_BATCH_PACK_BYTES / item);
	return chunk < 1 ? 1 : (chunk > batch ? batch : chunk);
}

size_t kgemm_batched_workspace_bytes(int64_t batch, int64_t M, int64_t N, int64_t K, int nthreads)
{
	if (batch <= 0 || kgemm_empty(M, N, K))
		return 0;
	size_t item = kgemm_align(kgemm_packed_floats(K, N, kgemm_active_ukernel()->nr) * sizeof(float));
	return (size_t)kgemm_batch_chunk(batch, N, K) * item + kgemm_slots_workspace_bytes(M, N, K, nthreads);
}

/* ---- the parallel loops ------------------------------------------------- */

typedef struct kgemm_job {
	const kgemm_ukernel_desc *uk;
	int64_t M, N, K;
	const float *A;
	int64_t bs_a, rs_a, cs_a;
	const float *Bp; /* packed B of item b at Bp + b * bs_bp */
	int64_t bs_bp;
	float *C;
	int64_t bs_c, ldc;
	const k_epilogue *ep;
	kgemm_plan plan;
	char *slots; /* per-thread A blocks */
	size_t slot_bytes;
	int direct_a; /* A is read in place (row-major), not packed */
	/* B not packed beforehand (Bp unused): row-major, rows ldb apart. A
	 * task's first row tile reads each micro-panel in place and stores it
	 * packed, at panel_at in the thread's slot, for the tiles below it */
	const float *Bsrc;
	int64_t ldb;
	size_t panel_at;
	int64_t ntasks; /* the last one prefetches ep->next_b */
	/* all of A packed once (kgemm_share_a), K block pc at a_whole + pc *
	 * (M rounded up to mr), or NULL: each task packs its own block */
	const float *a_whole;
} kgemm_job;

static void kgemm_task(void *ctx, int64_t t, int thread)
{
	const kgemm_job *j = ctx;
	const kgemm_ukernel_desc *uk = j->uk;
	const int mr = uk->mr, nr = uk->nr;
	const int64_t per = j->plan.nm * j->plan.nn;
	const int64_t b = t / per, r = t % per, jn = r / j->plan.nm;
	int64_t m0, m1;
	kgemm_rows(&j->plan, j->M, mr, r % j->plan.nm, &m0, &m1);
	const int64_t n0 = jn * j->plan.nc, n1 = k_min64(j->N, n0 + j->plan.nc);
	const int64_t K = j->K, ldc = j->ldc;
	const float *A = j->A + b * j->bs_a;
	const float *Bp = j->Bp + b * j->bs_bp;
	float *C = j->C + b * j->bs_c;
	const k_epilogue *ep = j->ep;
	const float *res = ep->residual ? ep->residual + b * j->bs_c : NULL;
	float *abuf = j->slots ? (float *)(j->slots + (size_t)thread * j->slot_bytes) : NULL;
	float stack_panel[KGEMM_STACK_PANEL_FLOATS] __attribute__((aligned(64)));
	float *bpanel = j->slots ? (float *)(j->slots + (size_t)thread * j->slot_bytes + j->panel_at) : stack_panel;

	kgemm_tile_ep te = {0};
	te.alpha = ep->alpha;
	te.act = ep->act;
	te.ld_res = ep->ld_residual;
	const int64_t npanels = k_cdiv(n1 - n0, nr);
	for (int64_t pc = 0; pc < K; pc += j->plan.kc) {
		const int64_t kc = k_min64(j->plan.kc, K - pc);
		/* row-major A is read in place; anything else is packed */
		const float *ablk = A + m0 * j->rs_a + pc;
		int64_t rs = j->rs_a, cs = 1;
		if (j->a_whole) {
			ablk = j->a_whole + pc * k_cdiv(j->M, mr) * mr + m0 * kc;
			rs = 1;
			cs = mr;
		} else if (!j->direct_a) {
			kgemm_pack_a(uk, m1 - m0, kc, A + m0 * j->rs_a + pc * j->cs_a, j->rs_a, j->cs_a, abuf);
			ablk = abuf;
			rs = 1;
			cs = mr;
		}
		te.flags = (pc == 0 ? KGEMM_TILE_FIRST : 0) | (pc + kc == K ? KGEMM_TILE_LAST : 0);
		/* lines of a B micro-panel to prefetch per micro-tile: a later
		 * panel comes from L3 or memory while this one is in use */
		const int64_t plines = kc * nr / 16, tiles = k_cdiv(m1 - m0, mr);
		const int64_t pf_step = k_cdiv(plines, tiles);
		for (int64_t jj = n0; jj < n1; jj += nr) {
			const float *bp = j->Bsrc ? bpanel : Bp + (jj / nr) * K * nr + pc * nr;
			/* prefetched: the panel KGEMM_PF_PANELS ahead in this task's
			 * order (panels of a K block, then the next K block) */
			const int64_t q = (pc / j->plan.kc) * npanels + (jj - n0) / nr + KGEMM_PF_PANELS;
			const int64_t pc_next = (q / npanels) * j->plan.kc, jj_next = n0 + (q % npanels) * nr;
			/* (not when one tile covers the task's rows and the kernel
			 * prefetches: the whole panel would go in a burst, and the
			 * hardware prefetchers alone ran M = 1 and M = 4 against a
			 * 2048x1000 weight 1.15-1.4x as fast, hot or cold) */
			const int burst_only = uk->tile_prefetch && m1 - m0 <= mr;
			const char *next = NULL;
			if (pc_next < K && !burst_only && !j->Bsrc) {
				next = (const char *)(Bp + (jj_next / nr) * K * nr + pc_next * nr);
			} else if (ep->next_b && !burst_only && t == j->ntasks - 1) {
				/* past the last panel: the caller's next B, panel by panel */
				const int64_t at = (q - k_cdiv(K, j->plan.kc) * npanels) * plines * 64;
				next = at < ep->next_b_bytes ? (const char *)ep->next_b + at : NULL;
			}
			const int n = (int)k_min64(nr, n1 - jj);
			te.bias_n = ep->bias_n ? ep->bias_n + jj : NULL;
			int64_t pf = 0;
			for (int64_t ii = m0; ii < m1; ii += mr) {
				const int m = (int)k_min64(mr, m1 - ii);
				te.pf_lines = 0;
				if (next) {
					const int64_t e = k_min64(plines, pf + pf_step);
					/* spread over a full tile's k steps where the
					 * kernel can (ukernel.h); else now */
					if (uk->tile_prefetch && m == mr && n > nr / 2 && 2 * (e - pf) <= kc) {
						te.pf = next + pf * 64;
						te.pf_lines = (int)(e - pf);
						pf = e;
					}
					for (; pf < e; pf++)
						__builtin_prefetch(next + pf * 64, 0, 2);
				}
				te.bias_m = ep->bias_m ? ep->bias_m + ii : NULL;
				te.res = res ? res + ii * te.ld_res + jj : NULL;
				/* a packed panel holds mr rows: (ii - m0) * kc = panel * mr * kc */
				const float *a = j->direct_a ? ablk + (ii - m0) * rs : ablk + (ii - m0) * kc;
				if (j->Bsrc && ii == m0) {
					te.bcopy = bpanel;
					uk->strided(kc, a, rs, cs, j->Bsrc + pc * j->ldb + jj, j->ldb, C + ii * ldc + jj,
						    ldc, m, n, &te);
					te.bcopy = NULL;
					continue;
				}
				uk->fn(kc, a, rs, cs, bp, C + ii * ldc + jj, ldc, m, n, &te);
			}
		}
	}
}

/* C = epilogue(0): what a product over K == 0 leaves. */
static void kgemm_epilogue_only(int64_t M, int64_t N, float *C, int64_t ldc, const k_epilogue *ep,
				const float *res)
{
	for (int64_t i = 0; i < M; i++) {
		for (int64_t jj = 0; jj < N; jj++) {
			float v = 0.0f;
			if (ep->bias_n)
				v += ep->bias_n[jj];
			if (ep->bias_m)
				v += ep->bias_m[i];
			if (res)
				v += res[i * ep->ld_residual + jj];
			C[i * ldc + jj] = kgemm_act_simple_f32(v, ep->act);
		}
	}
	if (kgemm_act_is_transcendental(ep->act))
		kgemm_act_tile(C, ldc, M, N, ep->act);
}

/* Row-major A is read in place, unless the kernel packs it fast (pack_a)
 * and each task's block of A feeds enough B micro-panels to repay packing
 * it. Read in place, the mr rows a tile broadcasts from are mr streams,
 * which share L1 sets when lda is a multiple of 1-4 KiB; packed, they are
 * one. Measured with 2 threads against the in-place reads, interleaved
 * (tasks' width in brackets): 1024^3 +5% (512), 1536^3 +8% (768), 2048^3
 * +10-12% (1024), 128x768 @ 768x2304 +7% (576), 512^3 +2-4% (256), a
 * 3136x64 @ 64x256 1x1 convolution +3% (256); tasks 192 columns wide or
 * less (BERT's 768-wide linears, ViT-Tiny's, 128-channel convolutions)
 * lost 3-13%, so those keep reading A in place. Since the AVX-512 tile
 * over A in place that prefetches got a loop without spills
 * (ukernel.avx512.c, inplace_sums), 256-wide tasks read in place too: 512^3
 * went from 0.968-0.977x to 1.013-1.029x MKL (model.run against torch.mm,
 * builds alternated); 256^3, 1024^3 and 128x768 @ 768x3072 did not move,
 * nor did ResNet-50 b1 or GPT-2. With 1024, 128x768 @ 768x3072 (768-wide
 * tasks) lost 2%. */
enum { KGEMM_PACK_A_MIN_COLS = 512 };

static int kgemm_reads_a_in_place(const kgemm_ukernel_desc *uk, const kgemm_plan *plan, int64_t cs_a,
				  const char *slots)
{
	/* no slots: kgemm_f32_b_in_place, which has no workspace to pack into */
	return cs_a == 1 && (!slots || !(uk->pack_a && plan->nc >= KGEMM_PACK_A_MIN_COLS));
}

static void kgemm_run(const kgemm_ukernel_desc *uk, int64_t batch, int64_t M, int64_t N, int64_t K,
		      const float *A, int64_t bs_a, int64_t rs_a, int64_t cs_a, const float *Bp,
		      int64_t bs_bp, float *C, int64_t bs_c, int64_t ldc, const k_epilogue *ep, rt_pool *pool,
		      char *slots, float *a_room)
{
	kgemm_plan plan = kgemm_make_plan(uk, batch, M, N, K, rt_pool_size(pool));
	kgemm_job j = {uk, M, N, K, A, bs_a, rs_a, cs_a, Bp, bs_bp, C, bs_c, ldc, ep,
		       plan, slots, kgemm_slot_bytes(uk, M, K),
		       kgemm_reads_a_in_place(uk, &plan, cs_a, slots), NULL, 0, 0, batch * plan.nm * plan.nn,
		       batch == 1 ? kgemm_share_a(uk, &plan, M, K, A, rs_a, cs_a, a_room, pool) : NULL};
	rt_pool_run(pool, batch * j.plan.nm * j.plan.nn, kgemm_task, &j);
}

/* kgemm_run with a row-major B not packed beforehand (kgemm_job.Bsrc): a
 * separate packing pass read all of B from memory and wrote it back before
 * any product started; here each panel is packed by the tile that first
 * reads it, while it computes. */
void kgemm_run_b_source(const kgemm_ukernel_desc *uk, int64_t M, int64_t N, int64_t K, const float *A,
			int64_t rs_a, int64_t cs_a, const float *B, int64_t ldb, float *C, int64_t ldc,
			const k_epilogue *ep, rt_pool *pool, char *slots, float *a_room)
{
	kgemm_plan plan = kgemm_make_plan(uk, 1, M, N, K, rt_pool_size(pool));
	size_t a_bytes = kgemm_slot_bytes(uk, M, K);
	kgemm_job j = {uk, M, N, K, A, 0, rs_a, cs_a, NULL, 0, C, 0, ldc, ep,
		       plan, slots, a_bytes + kgemm_panel_bytes(uk, M, K),
		       kgemm_reads_a_in_place(uk, &plan, cs_a, slots), B, ldb, a_bytes, plan.nm * plan.nn,
		       kgemm_share_a(uk, &plan, M, K, A, rs_a, cs_a, a_room, pool)};
	rt_pool_run(pool, j.plan.nm * j.plan.nn, kgemm_task, &j);
}

/* Handles the degenerate sizes; returns 1 if nothing is left to do. */
int kgemm_trivial(int64_t batch, int64_t M, int64_t N, int64_t K, float *C, int64_t bs_c,
		  int64_t ldc, const k_epilogue *ep)
{
	if (batch <= 0 || M <= 0 || N <= 0)
		return 1;
	if (K > 0)
		return 0;
	for (int64_t b = 0; b < batch; b++)
		kgemm_epilogue_only(M, N, C + b * bs_c, ldc, ep, ep->residual ? ep->residual + b * bs_c : NULL);
	return 1;
}

const k_epilogue *kgemm_ep_or_none(const k_epilogue *ep, k_epilogue *none)
{
	if (ep)
		return ep;
	*none = k_epilogue_none();
	return none;
}

/* ---- entry points -------------------------------------------------------- */

void kgemm_f32_packed(int64_t M, int64_t N, int64_t K, const float *A, int64_t rs_a, int64_t cs_a,
		      const kgemm_packed_b *B, float *C, int64_t ldc, const k_epilogue *ep, rt_pool *pool,
		      void *workspace)
{
	kgemm_f32_packed_cols(M, N, K, A, rs_a, cs_a, B, 0, C, ldc, ep, pool, workspace);
}

void kgemm_f32_packed_cols(int64_t M, int64_t N, int64_t K, const float *A, int64_t rs_a, int64_t cs_a,
			   const kgemm_packed_b *B, int64_t j0, float *C, int64_t ldc, const k_epilogue *ep,
			   rt_pool *pool, void *workspace)
{
	k_epilogue none;
	ep = kgemm_ep_or_none(ep, &none);
	if (kgemm_trivial(1, M, N, K, C, 0, ldc, ep))
		return;
	/* packed->nr is the selected kernel's: both come from kgemm_active_ukernel(),
	 * chosen once per process */
	const kgemm_ukernel_desc *uk = kgemm_active_ukernel();
	if (B->nr != uk->nr) /* unreachable; never read panels of another width */
		return;
	if (j0 % uk->nr != 0 || j0 + N > k_cdiv(B->N, uk->nr) * uk->nr || K != B->K)
		return; /* unreachable for callers that keep the contract */
	const float *panels = B->data + (j0 / uk->nr) * K * uk->nr;
	/* rows the AMX path leaves (A out of its range: done < M) go to the
	 * f32 kernels, with the epilogue's per-row operands moved on */
	int64_t done = 0;
	if (B->amx_ok && cs_a == 1 && kamx_wanted(M, N, K))
		done = B->amx_split ? kamx_gemm_presplit(M, N, K, A, rs_a,
							 B->amx_split + (j0 / uk->nr) * kamx_presplit_panel_u16(K), C,
							 ldc, ep, pool, workspace)
				    : kamx_gemm(M, N, K, A, rs_a, panels, C, ldc, ep, pool, workspace);
	if (done == M)
		return;
	k_epilogue rest = *ep;
	if (rest.residual)
		rest.residual += done * rest.ld_residual;
	if (rest.bias_m)
		rest.bias_m += done;
	kgemm_run(uk, 1, M - done, N, K, A + done * rs_a, 0, rs_a, cs_a, panels, 0, C + done * ldc, 0, ldc, &rest,
		  pool, workspace, NULL);
}

void kgemm_f32(int64_t M, int64_t N, int64_t K, const float *A, int64_t rs_a, int64_t cs_a, const float *B,
	       int64_t rs_b, int64_t cs_b, float *C, int64_t ldc, const k_epilogue *ep, rt_pool *pool,
	       void *workspace)
{
	k_epilogue none;
	ep = kgemm_ep_or_none(ep, &none);
	if (kgemm_trivial(1, M, N, K, C, 0, ldc, ep))
		return;
	const kgemm_ukernel_desc *uk = kgemm_active_ukernel();
	if (kgemm_thin(uk, M, N, K, A, rs_a, cs_a, B, rs_b, cs_b, C, ldc, ep, pool, workspace))
		return;
	/* past the base workspace, room for all of A packed when it is not
	 * row-major (kgemm_workspace_bytes) */
	float *a_room = cs_a == 1 ? NULL
			: (float *)((char *)workspace + kgemm_base_workspace_bytes(uk, M, N, K, rt_pool_size(pool)));
	if (cs_b == 1 && uk->strided_packs_b) {
		kgemm_run_b_source(uk, M, N, K, A, rs_a, cs_a, B, rs_b, C, ldc, ep, pool, workspace, a_room);
		return;
	}
	float *Bp = workspace;
	char *slots = (char *)workspace + kgemm_align(kgemm_packed_floats(K, N, uk->nr) * sizeof(float));
	kgemm_pack_b_parallel(1, K, N, B, 0, rs_b, cs_b, uk->nr, Bp, 0, pool);
	kgemm_run(uk, 1, M, N, K, A, 0, rs_a, cs_a, Bp, 0, C, 0, ldc, ep, pool, slots, a_room);
}

void kgemm_f32_batched(int64_t batch, int64_t M, int64_t N, int64_t K, const float *A, int64_t bs_a,
		       int64_t rs_a, int64_t cs_a, const float *B, int64_t bs_b, int64_t rs_b, int64_t cs_b,
		       float *C, int64_t bs_c, int64_t ldc, const k_epilogue *ep, rt_pool *pool,
		       void *workspace)
{
	k_epilogue none;
	ep = kgemm_ep_or_none(ep, &none);
	if (kgemm_trivial(batch, M, N, K, C, bs_c, ldc, ep))
		return;
	const kgemm_ukernel_desc *uk = kgemm_active_ukernel();
	const int64_t item = (int64_t)(kgemm_align(kgemm_packed_floats(K, N, uk->nr) * sizeof(float)) /
				       sizeof(float));
	const int64_t chunk = kgemm_batch_chunk(batch, N, K);
	float *Bp = workspace;
	char *slots = (char *)workspace + (size_t)chunk * (size_t)item * sizeof(float);
	for (int64_t b0 = 0; b0 < batch; b0 += chunk) {
		int64_t nb = k_min64(chunk, batch - b0);
		kgemm_pack_b_parallel(nb, K, N, B + b0 * bs_b, bs_b, rs_b, cs_b, uk->nr, Bp, item, pool);
		k_epilogue e = *ep;
		if (e.residual)
			e.residual += b0 * bs_c;
		kgemm_run(uk, nb, M, N, K, A + b0 * bs_a, bs_a, rs_a, cs_a, Bp, item, C + b0 * bs_c, bs_c, ldc,
			  &e, pool, slots, NULL);
	}
}

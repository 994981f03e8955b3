/* thin.c - products that read B where it is, without packing it first:
 * thin ones (M <= KGEMM_THIN_M) of kgemm_f32, and kgemm_f32_b_in_place. */
#include "kernels/gemm/gemm.h"

#include "kernels/common/kernel.h"
#include "kernels/gemm/gemm_internal.h"
#include "kernels/gemm/ukernel.h"

/* ---- thin products: B read in place ------------------------------------ */

/* Up to this many rows, kgemm_f32 does not pack B: each B element is used
 * M times only, so copying it costs as much as using it (M = 1 ran at half
 * the speed of the packed product). */
enum { KGEMM_THIN_M = 16 };

typedef struct kgemm_thin_job {
	const kgemm_ukernel_desc *uk;
	int64_t M, N, K;
	const float *A;
	int64_t rs_a, cs_a;
	const float *B;
	int64_t rs_b, cs_b;
	float *C;
	int64_t ldc;
	const k_epilogue *ep;
	int use_dot;
	int64_t cols;     /* columns per task */
	const float *Ap; /* A packed in mr-row panels, or NULL */
} kgemm_thin_job;

static void kgemm_thin_task(void *ctx, int64_t t, int thread)
{
	const kgemm_thin_job *j = ctx;
	const kgemm_ukernel_desc *uk = j->uk;
	const k_epilogue *ep = j->ep;
	const int64_t j0 = t * j->cols, j1 = k_min64(j->N, j0 + j->cols);
	const int mr = j->use_dot ? uk->dot_mr : uk->mr, nr = j->use_dot ? uk->dot_nr : uk->nr;
	kgemm_tile_ep te = {0};
	te.alpha = ep->alpha;
	te.act = ep->act;
	te.ld_res = ep->ld_residual;
	te.flags = KGEMM_TILE_FIRST | KGEMM_TILE_LAST;
	for (int64_t jj = j0; jj < j1; jj += nr) {
		const int n = (int)k_min64(nr, j1 - jj);
		te.bias_n = ep->bias_n ? ep->bias_n + jj : NULL;
		for (int64_t ii = 0; ii < j->M; ii += mr) {
			const int m = (int)k_min64(mr, j->M - ii);
			te.bias_m = ep->bias_m ? ep->bias_m + ii : NULL;
			te.res = ep->residual ? ep->residual + ii * te.ld_res + jj : NULL;
			const float *a = j->A + ii * j->rs_a;
			float *c = j->C + ii * j->ldc + jj;
			if (j->use_dot)
				uk->dot(j->K, a, j->rs_a, j->B + jj * j->cs_b, j->cs_b, c, j->ldc, m, n, &te);
			else if (j->Ap)
				uk->strided(j->K, j->Ap + ii * j->K, 1, mr, j->B + jj, j->rs_b, c, j->ldc, m, n, &te);
			else
				uk->strided(j->K, a, j->rs_a, j->cs_a, j->B + jj, j->rs_b, c, j->ldc, m, n, &te);
		}
	}
}

/* C = epilogue(A @ B) for M <= KGEMM_THIN_M with B read where it is: rows of
 * B along N (cs_b == 1) go to the strided micro-kernel, rows along K
 * (rs_b == 1, a [N x K] weight) to the dot kernel. Returns 0 (nothing done)
 * when neither fits. */
int kgemm_thin(const kgemm_ukernel_desc *uk, int64_t M, int64_t N, int64_t K, const float *A,
	       int64_t rs_a, int64_t cs_a, const float *B, int64_t rs_b, int64_t cs_b, float *C,
	       int64_t ldc, const k_epilogue *ep, rt_pool *pool, float *workspace)
{
	if (M > KGEMM_THIN_M)
		return 0;
	kgemm_thin_job j = {uk, M, N, K, A, rs_a, cs_a, B, rs_b, cs_b, C, ldc, ep, 0, 0, NULL};
	if (cs_b == 1 && uk->strided) {
		j.use_dot = 0;
		/* rows of A read in place are up to mr streams that may share an L1
		 * set (lda a multiple of 4 KiB); packed, they are one. The panels
		 * (at most 2 * mr <= nr rows of K) fit where kgemm_f32 packs B. */
		if (M > 1 || cs_a != 1) {
			kgemm_pack_a(uk, M, K, A, rs_a, cs_a, workspace);
			j.Ap = workspace;
		}
	} else if (rs_b == 1 && cs_a == 1 && uk->dot) {
		j.use_dot = 1;
	} else {
		return 0;
	}
	const int nr = j.use_dot ? uk->dot_nr : uk->nr;
	int64_t ntasks = 1, nthreads = rt_pool_size(pool);
	if (nthreads > 1 && (double)M * N * K >= KGEMM_PARALLEL_MIN_MACS)
		ntasks = k_min64(4 * nthreads, k_cdiv(N, nr));
	j.cols = k_cdiv(k_cdiv(N, ntasks), nr) * nr;
	rt_pool_run(pool, k_cdiv(N, j.cols), kgemm_thin_task, &j);
	return 1;
}

/* ---- B read in place, one thread ---------------------------------------- */

int kgemm_b_in_place_available(void)
{
	return kgemm_active_ukernel()->strided != NULL;
}

/* One block of rows and columns, on the calling thread: K in blocks of
 * the kernel's kc, each B micro-panel (kc x nr, from rows ldb apart) used
 * by every row tile of the block while it is in L1/L2. */
static void kgemm_b_in_place_block(const kgemm_ukernel_desc *uk, int64_t M, int64_t N, int64_t K, const float *A,
				   int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc, const k_epilogue *ep)
{
	const int mr = uk->mr, nr = uk->nr;
	kgemm_tile_ep te = {0};
	te.alpha = ep->alpha;
	te.act = ep->act;
	te.ld_res = ep->ld_residual;
	const int64_t kb = k_cdiv(K, uk->kc), kc_max = k_cdiv(K, kb);
	for (int64_t pc = 0; pc < K; pc += kc_max) {
		const int64_t kc = k_min64(kc_max, K - pc);
		te.flags = (pc == 0 ? KGEMM_TILE_FIRST : 0) | (pc + kc == K ? KGEMM_TILE_LAST : 0);
		for (int64_t jj = 0; jj < N; jj += nr) {
			const int n = (int)k_min64(nr, N - jj);
			te.bias_n = ep->bias_n ? ep->bias_n + jj : NULL;
			for (int64_t ii = 0; ii < M; ii += mr) {
				te.bias_m = ep->bias_m ? ep->bias_m + ii : NULL;
				te.res = ep->residual ? ep->residual + ii * te.ld_res + jj : NULL;
				uk->strided(kc, A + ii * lda + pc, lda, 1, B + pc * ldb + jj, ldb, C + ii * ldc + jj, ldc,
					    (int)k_min64(mr, M - ii), n, &te);
			}
		}
	}
}

typedef struct kgemm_bip_job {
	const kgemm_ukernel_desc *uk;
	int64_t M, N, K;
	const float *A;
	int64_t lda;
	const float *B;
	int64_t ldb;
	float *C;
	int64_t ldc;
	const k_epilogue *ep;
	kgemm_plan plan;
} kgemm_bip_job;

static void kgemm_bip_task(void *ctx, int64_t t, int thread)
{
	(void)thread;
	const kgemm_bip_job *j = ctx;
	const int64_t jn = t / j->plan.nm;
	int64_t m0, m1;
	kgemm_rows(&j->plan, j->M, j->uk->mr, t % j->plan.nm, &m0, &m1);
	const int64_t n0 = jn * j->plan.nc, n1 = k_min64(j->N, n0 + j->plan.nc);
	if (m0 >= m1 || n0 >= n1)
		return;
	k_epilogue ep = *j->ep;
	ep.bias_m = ep.bias_m ? ep.bias_m + m0 : NULL;
	ep.bias_n = ep.bias_n ? ep.bias_n + n0 : NULL;
	ep.residual = ep.residual ? ep.residual + m0 * ep.ld_residual + n0 : NULL;
	kgemm_b_in_place_block(j->uk, m1 - m0, n1 - n0, j->K, j->A + m0 * j->lda, j->lda, j->B + n0, j->ldb,
			       j->C + m0 * j->ldc + n0, j->ldc, &ep);
}

int kgemm_f32_b_in_place(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb,
			 float *C, int64_t ldc, const k_epilogue *ep, rt_pool *pool)
{
	const kgemm_ukernel_desc *uk = kgemm_active_ukernel();
	if (!uk->strided)
		return 0;
	k_epilogue none;
	ep = kgemm_ep_or_none(ep, &none);
	if (kgemm_trivial(1, M, N, K, C, 0, ldc, ep))
		return 1;
	/* A kernel that packs the panels it reads is faster still, with the
	 * panels on the stack (A is read in place: no other workspace). ResNet
	 * 1x1 convs as NCHW GEMMs (ab harness, 2 threads, interleaved): 64x3136x64
	 * 284 -> 322 GFLOP/s, 128x3136x256 329 -> 392, 256x196x1024 296 -> 349;
	 * 1 thread +20-22% */
	if (uk->strided_packs_b && M > uk->mr && (int64_t)uk->kc * uk->nr <= KGEMM_STACK_PANEL_FLOATS) {
		kgemm_run_b_source(uk, M, N, K, A, lda, 1, B, ldb, C, ldc, ep, pool, NULL, NULL);
		return 1;
	}
	kgemm_bip_job j = {uk, M, N, K, A, lda, B, ldb, C, ldc, ep, kgemm_make_plan(uk, 1, M, N, K, rt_pool_size(pool))};
	rt_pool_run(pool, j.plan.nm * j.plan.nn, kgemm_bip_task, &j);
	return 1;
}

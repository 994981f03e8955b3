/* gemm_q.c - the quantized-weight product's driver (gemm_q.h): picks the decode kernel from
 * CPUID, copies A into zero-padded rows when K is not a whole number of groups (the kernels
 * read whole groups), and cuts the product into tasks for the pool: runs of W rows for decode,
 * panels of KQ_PANEL W rows dequantized to f32 and handed to the f32 GEMM for prefill. */
#include <string.h>

#include "kernels/common/cpu.h"
#include "kernels/common/epilogue.h"
#include "kernels/common/kernel.h"
#include "kernels/gemm/gemm.h"
#include "kernels/gemm_q/gemm_q.h"

typedef struct {
	const char *name;
	void (*rows)(const kq_weight *w, int m, const float *A, int64_t lda, int64_t n0, int64_t n1,
		     const float *bias, float *C, int64_t ldc);
} kq_kernel;

static const kq_kernel *pick(void)
{
	static const kq_kernel scalar = {"scalar", kq_rows_scalar};
#if defined(AIR_HAVE_X86)
	static const kq_kernel avx512 = {"avx512", kq_rows_avx512};
	static const kq_kernel avx2 = {"avx2", kq_rows_avx2};
	const unsigned f = kcpu_features();
	if ((f & KCPU_AVX512) == KCPU_AVX512)
		return &avx512;
	if (f & KCPU_AVX2)
		return &avx2;
#endif
	return &scalar;
}

const char *kgemm_q_kernel_name(void)
{
	return pick()->name;
}

static size_t align64(size_t n)
{
	return (n + 63) & ~(size_t)63;
}

/* A prefill task's slice: KQ_PANEL dequantized rows and the f32 GEMM's workspace. */
static size_t panel_bytes(const kq_weight *w, int64_t M)
{
	return align64((size_t)KQ_PANEL * (size_t)kq_kpad(w) * sizeof(float)) +
	       align64(kgemm_workspace_bytes(M, KQ_PANEL, w->K, 1, 1));
}

size_t kgemm_q_workspace_bytes(const kq_weight *w, int64_t M, int nthreads)
{
	if (M <= 0 || w->N <= 0)
		return 0;
	if (M <= KQ_THIN_M)
		return (size_t)M * (size_t)kq_kpad(w) * sizeof(float) + 64;
	return (size_t)(nthreads < 1 ? 1 : nthreads) * panel_bytes(w, M) + 64;
}

typedef struct {
	const kq_weight *w;
	const kq_kernel *kern;
	int64_t M, lda, ldc, nb;
	const float *A, *bias;
	float *C;
	char *ws;
} job;

static void decode_task(void *ctx, int64_t t, int thread)
{
	const job *j = ctx;
	(void)thread;
	const int64_t n0 = t * j->nb, n1 = k_min64(j->w->N, n0 + j->nb);
	for (int64_t m0 = 0; m0 < j->M; m0 += 4)
		j->kern->rows(j->w, (int)k_min64(4, j->M - m0), j->A + m0 * j->lda, j->lda, n0, n1, j->bias,
			      j->C + m0 * j->ldc, j->ldc);
}

static void prefill_task(void *ctx, int64_t t, int thread)
{
	const job *j = ctx;
	const kq_weight *w = j->w;
	const int64_t n0 = t * KQ_PANEL, nb = k_min64(w->N - n0, KQ_PANEL), kpad = kq_kpad(w);
	char *slice = j->ws + (size_t)thread * panel_bytes(w, j->M);
	float *deq = (float *)slice;
	for (int64_t r = 0; r < nb; r++)
		kq_dequant_row(w, n0 + r, deq + r * kpad);
	k_epilogue ep = k_epilogue_none();
	ep.bias_n = j->bias ? j->bias + n0 : NULL;
	/* B = deq^T: element (k, n) at deq[n * kpad + k] */
	kgemm_f32(j->M, nb, w->K, j->A, j->lda, 1, deq, 1, kpad, j->C + n0, j->ldc, &ep, NULL,
		  slice + align64((size_t)KQ_PANEL * (size_t)kpad * sizeof(float)));
}

void kgemm_q(const kq_weight *w, int64_t M, const float *A, int64_t lda, const float *bias, float *C, int64_t ldc,
	     rt_pool *pool, void *workspace)
{
	if (M <= 0 || w->N <= 0)
		return;
	char *ws = (char *)(((uintptr_t)workspace + 63) & ~(uintptr_t)63);
	job j = {w, pick(), M, lda, ldc, 0, A, bias, C, ws};
	const int nthreads = rt_pool_size(pool);
	if (M > KQ_THIN_M) {
		rt_pool_run(pool, k_cdiv(w->N, KQ_PANEL), prefill_task, &j);
		return;
	}
	const int64_t kpad = kq_kpad(w);
	if (kpad != w->K) {
		/* the kernels read whole groups of A: pad its rows with zeros */
		float *a = (float *)ws;
		for (int64_t m = 0; m < M; m++) {
			memcpy(a + m * kpad, A + m * lda, (size_t)w->K * sizeof(float));
			memset(a + m * kpad + w->K, 0, (size_t)(kpad - w->K) * sizeof(float));
		}
		j.A = a;
		j.lda = kpad;
	}
	/* about 4 runs of W rows per thread, to balance; at least 4 rows a run */
	int64_t nb = k_cdiv(w->N, 4 * (int64_t)nthreads);
	j.nb = nb < 4 ? 4 : nb;
	rt_pool_run(pool, k_cdiv(w->N, j.nb), decode_task, &j);
}

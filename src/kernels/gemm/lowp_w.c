/* lowp_w.c - the 16-bit-weight GEMM's driver (lowp_w.h): picks the ISA
 * kernel, rounds A to W's type once into the workspace, cuts the product
 * into (row block, column block) tasks for the pool, and applies the
 * epilogue; also the portable kernel and the tests' oracle.
 *
 * The plan. Decode (M <= KLOWP_THIN_M) is bound by reading W once: each
 * task takes every row of A (a few KiB, in L1) and a disjoint run of W's
 * rows, so the threads stream disjoint parts of W. Larger M cuts A into
 * blocks that stay in L2 (KLOWP_A_BLOCK_BYTES) while a task's W rows go by
 * a few at a time, each few reused against the whole block from L1.
 * A kernel may take large M (prefill) its own way (klowp_wide):
 * the bf16 one packs W per call for a broadcast kernel. */
#include "kernels/gemm/lowp_w.h"

#include "kernels/common/cpu.h"
#include "kernels/common/half.h"
#include "kernels/common/kernel.h"
#include "kernels/gemm/lowp_w_internal.h"
#include "kernels/gemm/ukernel.h"

/* Up to this many rows every task takes all of A (decode). */
enum { KLOWP_THIN_M = 8 };
/* A block's bytes of rounded A, meant to stay in L2 */
#define KLOWP_A_BLOCK_BYTES (256 * 1024)
/* A task's W rows, at most this many bytes (reused by every row block) */
#define KLOWP_W_BLOCK_BYTES (512 * 1024)
/* Below this many multiply-adds one thread does it all. */
#define KLOWP_PARALLEL_MIN_MACS (64.0 * 64.0 * 64.0)

static int64_t round_up(int64_t x, int64_t m)
{
	return (x + m - 1) / m * m;
}

float klowp_round_a(klowp_type wt, float x)
{
	return wt == KLOWP_BF16 ? k_bf16_to_f32(k_f32_to_bf16(x)) : k_f16_to_f32(k_f32_to_f16(x));
}

static float widen(klowp_type wt, uint16_t h)
{
	return wt == KLOWP_BF16 ? k_bf16_to_f32(h) : k_f16_to_f32(h);
}

void klowp_finish(const klowp_job *j, int64_t m0, int m, int64_t n0, int n, const float *acc, int ld)
{
	const k_epilogue *ep = j->ep;
	for (int r = 0; r < m; r++) {
		const int64_t i = m0 + r;
		float *c = j->C + i * j->ldc + n0;
		/* read before c is written: the residual may alias C */
		const float *res = ep->residual ? ep->residual + i * ep->ld_residual + n0 : NULL;
		for (int q = 0; q < n; q++) {
			float v = ep->alpha * acc[r * ld + q];
			if (ep->bias_n)
				v += ep->bias_n[n0 + q];
			if (ep->bias_m)
				v += ep->bias_m[i];
			if (res)
				v += res[q];
			c[q] = kgemm_act_simple_f32(v, ep->act); /* x for none and the transcendental ones */
		}
		if (kgemm_act_is_transcendental(ep->act))
			kgemm_epilogue_row(c, NULL, n, ep->act); /* vmath: as the f32 GEMM */
	}
}

/* ---- the portable kernel ------------------------------------------------- */

static void scalar_convert_a(klowp_type wt, int64_t K, const float *a, void *dst, int64_t kpad)
{
	float *d = dst;
	for (int64_t k = 0; k < K; k++)
		d[k] = klowp_round_a(wt, a[k]);
	for (int64_t k = K; k < kpad; k++)
		d[k] = 0.0f;
}

/* Up to 4 rows of A against one W row at a time: each weight is widened
 * once for the 4 rows. */
static void scalar_block(const klowp_job *j, int64_t m0, int64_t m1, int64_t n0, int64_t n1)
{
	const float *a = j->a;
	for (int64_t i = m0; i < m1; i += 4) {
		const int m = (int)k_min64(4, m1 - i);
		for (int64_t n = n0; n < n1; n++) {
			const uint16_t *w = j->W + n * j->ldw;
			float s[4] = {0, 0, 0, 0};
			for (int64_t k = 0; k < j->K; k++) {
				const float wk = widen(j->wt, w[k]);
				for (int r = 0; r < m; r++)
					s[r] += a[(i + r) * j->a_ld + k] * wk;
			}
			klowp_finish(j, i, m, n, 1, s, 1);
		}
	}
}

static const klowp_kernel scalar_kernel = {"scalar", 0, scalar_convert_a, scalar_block};

static const klowp_kernel *pick(klowp_type wt)
{
	const unsigned f = kcpu_features();
	(void)f;
#if defined(AIR_HAVE_AVX512BF16)
	const unsigned bf16 = KCPU_AVX512 | KCPU_AVX512BF16;
	if (wt == KLOWP_BF16 && (f & bf16) == bf16)
		return &klowp_bf16_dot_kernel;
#endif
#if defined(AIR_HAVE_X86)
	if ((f & KCPU_AVX2) && (wt == KLOWP_BF16 || (f & KCPU_F16C)))
		return &klowp_avx2_kernel;
#endif
	return &scalar_kernel;
}

/* The wide path of kernel k, if it has one. */
static const klowp_wide *wide_of(const klowp_kernel *k)
{
	(void)k;
#if defined(AIR_HAVE_AVX512BF16)
	if (k == &klowp_bf16_dot_kernel)
		return &klowp_bf16_pack_wide;
#endif
	return NULL;
}

const char *kgemm_lowp_w_kernel_name(klowp_type wt)
{
	return pick(wt)->name;
}

/* ---- the driver ---------------------------------------------------------- */

/* The most any path takes: W's type is not passed, so a wide path's
 * workspace counts whenever M reaches it. */
size_t kgemm_lowp_w_workspace_bytes(int64_t M, int64_t K, int nthreads)
{
	if (M <= 0 || K <= 0)
		return 0;
	size_t bytes = (size_t)M * (size_t)round_up(K, KLOWP_K_ALIGN) * sizeof(float) + 64;
	for (int t = 0; t < 2; t++) {
		const klowp_wide *w = wide_of(pick((klowp_type)t));
		if (w && M >= w->min_m) {
			const size_t b = w->workspace(M, K, nthreads < 1 ? 1 : nthreads) + 64;
			bytes = b > bytes ? b : bytes;
		}
	}
	return bytes;
}

typedef struct convert_job {
	const klowp_kernel *kern;
	klowp_type wt;
	int64_t M, K, rows; /* rows per task */
	const klowp_src *A;
	char *dst;
	size_t dst_row; /* bytes */
	int64_t kpad;
} convert_job;

static void convert_task(void *ctx, int64_t t, int thread)
{
	const convert_job *c = ctx;
	const int64_t i1 = k_min64(c->M, (t + 1) * c->rows);
	for (int64_t i = t * c->rows; i < i1; i++)
		c->kern->convert_a(c->wt, c->K, klowp_src_row(c->A, i, thread, 0), c->dst + (size_t)i * c->dst_row,
				   c->kpad);
}

static void block_task(void *ctx, int64_t t, int thread)
{
	const klowp_job *j = ctx;
	(void)thread;
	/* the row blocks of one column block are consecutive tasks, so threads
	 * working at once share that block's W rows through L3 */
	const int64_t im = t % j->nm, jn = t / j->nm;
	const int64_t m0 = im * j->mb, n0 = jn * j->nb;
	j->kern->block(j, m0, k_min64(j->M, m0 + j->mb), n0, k_min64(j->N, n0 + j->nb));
}

/* Row blocks of A that stay in L2 (all of A for decode), then column blocks
 * that give each thread a few tasks to balance with, no larger than
 * KLOWP_W_BLOCK_BYTES of W. */
static void make_plan(klowp_job *j, size_t a_row_bytes, int nthreads)
{
	const int64_t M = j->M, N = j->N;
	int64_t mb = M;
	if (M > KLOWP_THIN_M) {
		mb = (int64_t)(KLOWP_A_BLOCK_BYTES / a_row_bytes) / 4 * 4;
		mb = mb < 4 ? 4 : mb > M ? M : mb;
		/* even blocks: no thin last block */
		mb = round_up(k_cdiv(M, k_cdiv(M, mb)), 4);
	}
	const int64_t nm = k_cdiv(M, mb);
	const int64_t want_nn = nthreads > 1 ? k_cdiv(4 * (int64_t)nthreads, nm) : 1;
	int64_t nb = round_up(k_cdiv(N, want_nn), 8);
	const int64_t w_rows = (int64_t)(KLOWP_W_BLOCK_BYTES / ((size_t)j->K * 2 + 1)) / 8 * 8;
	if (M > KLOWP_THIN_M && nb > w_rows)
		nb = w_rows < 8 ? 8 : w_rows;
	j->mb = mb;
	j->nm = nm;
	j->nb = nb;
	j->nn = k_cdiv(N, nb);
}

static void run(klowp_type wt, int64_t M, int64_t N, int64_t K, klowp_src *A, const uint16_t *W, int64_t ldw,
		float *C, int64_t ldc, const k_epilogue *ep, rt_pool *pool, void *workspace)
{
	if (M <= 0 || N <= 0)
		return;
	k_epilogue none = k_epilogue_none();
	klowp_job j = {wt, M, N, K, NULL, 0, W, ldw, C, ldc, ep ? ep : &none, 0, 0, 0, 0, pick(wt)};
	if (K <= 0) {
		/* C = epilogue(0): the portable kernel never reads A then */
		j.kern = &scalar_kernel;
		make_plan(&j, 4, 1);
		scalar_block(&j, 0, M, 0, N);
		return;
	}
	if ((double)M * (double)N * (double)K < KLOWP_PARALLEL_MIN_MACS)
		pool = NULL;
	const int nthreads = rt_pool_size(pool);
	const size_t elem = j.kern->a16 ? 2 : 4;
	j.a_ld = round_up(K, KLOWP_K_ALIGN);
	char *room = (char *)(((uintptr_t)workspace + 63) & ~(uintptr_t)63);
	const klowp_wide *wide = wide_of(j.kern);
	if (wide && M >= wide->min_m && wide->takes(M, K)) {
		wide->run(&j, A, pool, room);
		return;
	}
	j.a = room;

	/* A rounded once, in parallel over rows where there are enough */
	convert_job cj = {j.kern, wt, M, K, 0, A, room, (size_t)j.a_ld * elem, j.a_ld};
	const int64_t ctasks = (double)M * K >= 65536.0 && nthreads > 1 ? k_min64(M, 4 * (int64_t)nthreads) : 1;
	cj.rows = k_cdiv(M, ctasks);
	rt_pool_run(ctasks > 1 ? pool : NULL, k_cdiv(M, cj.rows), convert_task, &cj);

	make_plan(&j, (size_t)j.a_ld * elem, nthreads);
	rt_pool_run(pool, j.nm * j.nn, block_task, &j);
}

typedef struct matrix {
	const float *A;
	int64_t lda;
} matrix;

static const float *matrix_row(const void *ctx, int64_t i, float *tmp)
{
	(void)tmp;
	const matrix *m = ctx;
	return m->A + i * m->lda;
}

void kgemm_lowp_w(klowp_type wt, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
		  const uint16_t *W, int64_t ldw, float *C, int64_t ldc, const k_epilogue *ep,
		  rt_pool *pool, void *workspace)
{
	/* a matrix is a source whose rows are in place: no scratch */
	matrix m = {A, lda};
	klowp_rows rows = {matrix_row, &m};
	klowp_src src = {&rows, NULL, 0};
	run(wt, M, N, K, &src, W, ldw, C, ldc, ep, pool, workspace);
}

static int64_t scratch_ld(int64_t K)
{
	return round_up(K > 0 ? K : 1, 16);
}

size_t kgemm_lowp_w_rows_workspace_bytes(int64_t M, int64_t K, int nthreads)
{
	if (M <= 0 || K <= 0)
		return 0;
	nthreads = nthreads < 1 ? 1 : nthreads;
	return k_align64(kgemm_lowp_w_workspace_bytes(M, K, nthreads)) +
	       (size_t)nthreads * KLOWP_ROWS_AT_ONCE * (size_t)scratch_ld(K) * sizeof(float) + 64;
}

void kgemm_lowp_w_rows(klowp_type wt, int64_t M, int64_t N, int64_t K, const klowp_rows *A, const uint16_t *W,
		       int64_t ldw, float *C, int64_t ldc, const k_epilogue *ep, rt_pool *pool, void *workspace)
{
	if (M <= 0 || N <= 0)
		return;
	const int nthreads = rt_pool_size(pool);
	char *ws = (char *)(((uintptr_t)workspace + 63) & ~(uintptr_t)63);
	float *scratch = K > 0 ? (float *)(ws + k_align64(kgemm_lowp_w_workspace_bytes(M, K, nthreads))) : NULL;
	klowp_src src = {A, scratch, scratch_ld(K)};
	run(wt, M, N, K, &src, W, ldw, C, ldc, ep, pool, ws);
}

/* ---- the oracle ---------------------------------------------------------- */

void kgemm_lowp_w_reference(klowp_type wt, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
			    const uint16_t *W, int64_t ldw, float *C, int64_t ldc, const k_epilogue *ep)
{
	k_epilogue none = k_epilogue_none();
	if (!ep)
		ep = &none;
	for (int64_t i = 0; i < M; i++) {
		for (int64_t n = 0; n < N; n++) {
			double s = 0.0;
			for (int64_t k = 0; k < K; k++)
				s += (double)klowp_round_a(wt, A[i * lda + k]) * (double)widen(wt, W[n * ldw + k]);
			s *= ep->alpha;
			if (ep->bias_n)
				s += ep->bias_n[n];
			if (ep->bias_m)
				s += ep->bias_m[i];
			/* read before C[i, n] is written: the residual may alias C */
			if (ep->residual)
				s += ep->residual[i * ep->ld_residual + n];
			kref_act_f64(&s, 1, ep->act);
			C[i * ldc + n] = (float)s;
		}
	}
}

/* amx.c - the driver of the AMX GEMM (amx.h): blocking, threads
 * and the epilogue. The tile work is in amx_tiles.amx.c.
 *
 * A call runs over row blocks of A of at most a few MiB split (so the
 * workspace stays bounded for batch-16 convolutions' 50K rows). For each:
 * the threads split A's rows into bf16 parts once, in parallel; then each
 * task, a group of B's 32-column panels, splits its panels K block by K
 * block into its own slot (in L2: KAMX_KC_CHUNKS x 32 deep) and multiplies
 * every 32-row panel of A by them, 32 x 32 blocks of C at a time. A
 * weight split once when packed (kamx_gemm_presplit) skips that split and
 * is read where it lies. Partial sums over K blocks stay in C; the last K
 * block goes through a 32 x 32 buffer into the epilogue. */
#include "kernels/gemm/amx.h"

#include <stdatomic.h>
#include <string.h>

#include "kernels/common/cpu.h"
#include "kernels/common/kernel.h"
#include "kernels/gemm/ukernel.h"

/* K block: 16 chunks of 32 (512 deep). Task: up to 8 panels (256
 * columns): a 512 x 256 block of B split is 768 KiB, which stays in the
 * 2 MiB L2 while every row panel of A passes it. 1024^3 and 2048^3 (2
 * threads) measured within noise of each other for K blocks of 256-1024
 * and tasks of 128-256 columns; 512 columns lost 10-25%. */
enum { KAMX_KC_CHUNKS = 16, KAMX_TASK_PANELS = 8 };
/* Bytes of A split at a time (rows in whole panels, at least 256). */
#define KAMX_A_BYTES ((size_t)8 << 20)
/* bf16 values per split row of 32 values of K: three parts */
enum { KAMX_ROW_U16 = 3 * 32 };

static int64_t cdiv(int64_t a, int64_t b)
{
	return (a + b - 1) / b;
}

static size_t align128(size_t n)
{
	return (n + 127) & ~(size_t)127;
}

static atomic_ullong kamx_pass_count;

uint64_t kamx_passes(void)
{
	return atomic_load_explicit(&kamx_pass_count, memory_order_relaxed);
}

int kamx_available(void)
{
#ifdef AIR_HAVE_AMX
	return (kcpu_features() & KCPU_AMX) == KCPU_AMX;
#else
	return 0;
#endif
}

/* Where it beat the f32 kernels: B is split on every call, and A too, so
 * each needs enough rows or columns of the other to repay it, and in a
 * model the weight comes cold from memory, where the f32 kernels stream it
 * while they compute and this path splits a block of it before computing.
 * With the weights hot (tests/c/bench_gemm.c, 2 threads, AIR_ISA=avx512
 * beside it): squares from 512 1.3-1.5x (256^3 1.05x), ResNet-50's 784 x
 * 128 and 784 x 512 products 1.10-1.32x, BERT's M = 128 linears
 * 1.16-1.27x; lost: N = 64 (0.81-0.86x with K >= 256), 196 x 256
 * (0.89-0.91x), N = 49 (0.76-0.92x). In models (python -m bench, the
 * two ISAs one after the other) M = 128-197 lost: ViT-Tiny 1.33x -> 1.22x
 * eager, GPT-2 1.41x -> 1.38x; from 512 rows it won (linear_rows.c). */
int kamx_wanted(int64_t M, int64_t N, int64_t K)
{
	return M >= 512 && N >= 128 && K >= 64;
}

/* Rows of A split at a time: whole panels, KAMX_A_BYTES' worth, at least 256. */
static int64_t kamx_rows_per_pass(int64_t M, int64_t K)
{
	int64_t rows = (int64_t)(KAMX_A_BYTES / ((size_t)cdiv(K, 32) * KAMX_ROW_U16 * 2)) / 32 * 32;
	if (rows < 256)
		rows = 256;
	return rows < M ? rows : cdiv(M, 32) * 32;
}

static size_t kamx_slot_bytes(int64_t N, int64_t K)
{
	const int64_t panels = cdiv(N, 32) < KAMX_TASK_PANELS ? cdiv(N, 32) : KAMX_TASK_PANELS;
	const int64_t chunks = cdiv(K, 32) < KAMX_KC_CHUNKS ? cdiv(K, 32) : KAMX_KC_CHUNKS;
	/* the split panels, then the 32 x 32 block buffer */
	return align128((size_t)panels * (size_t)chunks * KAMX_CHUNK_U16 * 2) + align128(32 * 32 * sizeof(float));
}

size_t kamx_workspace_bytes(int64_t M, int64_t N, int64_t K, int nthreads)
{
	if (!kamx_available() || !kamx_wanted(M, N, K))
		return 0;
	if (nthreads < 1)
		nthreads = 1;
	/* an upper bound of kamx_rows_per_pass's that grows with M and K, so a
	 * caller may size for its largest call */
	const size_t row_bytes = (size_t)cdiv(K, 32) * KAMX_ROW_U16 * 2;
	size_t rows = (size_t)cdiv(M, 32) * 32, cap = KAMX_A_BYTES / row_bytes + 256;
	if (rows > cap)
		rows = cap;
	return align128(rows * row_bytes) + (size_t)nthreads * kamx_slot_bytes(N, K);
}

size_t kamx_presplit_panel_u16(int64_t K)
{
	return (size_t)cdiv(K, 32) * KAMX_CHUNK_U16;
}

#ifdef AIR_HAVE_AMX

typedef struct kamx_job {
	int64_t M, N, K, nch;
	const float *A;
	int64_t rs_a;
	const float *Bpanels;  /* B as f32 panels, or */
	const float *Bt;       /* B transposed, rows ldbt apart, or */
	const uint16_t *Bsplit; /* B split already, panel after panel */
	int64_t ldbt;
	float *C;
	int64_t ldc;
	const k_epilogue *ep;
	int preadd_res; /* the residual starts the sums (alpha 1, several K blocks) */
	int64_t m0, m1; /* rows of this pass */
	uint16_t *asplit;
	char *slots;
	size_t slot_bytes;
	int64_t kchunks, nkb; /* chunks per K block, K blocks */
	/* tasks: nm row blocks x nn column groups, one of them 1 */
	int64_t nm, nn;
	int64_t panels_per_task; /* B panels per column group */
	int64_t apanels_per_task; /* A panels per row block, or per split task */
	int fused; /* each task splits its own rows of A (nm > 1) */
	atomic_int a_bad, b_bad;
} kamx_job;

/* Splits the pass's A panels [p0, p1); 0 (and a_bad set) if a value is
 * out of range. */
static int kamx_split_a_panels(kamx_job *j, int64_t p0, int64_t p1)
{
	for (int64_t p = p0; p < p1; p++) {
		const int64_t r0 = j->m0 + p * 32;
		const int m = (int)(j->m1 - r0 < 32 ? j->m1 - r0 : 32);
		if (!kamx_split_a(m, j->K, j->A + r0 * j->rs_a, j->rs_a, j->nch, j->asplit + p * j->nch * KAMX_CHUNK_U16)) {
			atomic_store_explicit(&j->a_bad, 1, memory_order_relaxed);
			return 0;
		}
	}
	return 1;
}

static void kamx_split_a_task(void *ctx, int64_t t, int thread)
{
	(void)thread;
	kamx_job *j = ctx;
	const int64_t npan = cdiv(j->m1 - j->m0, 32);
	const int64_t p0 = t * j->apanels_per_task, p1 = p0 + j->apanels_per_task < npan ? p0 + j->apanels_per_task : npan;
	kamx_split_a_panels(j, p0, p1);
}

/* C block (m x n valid) = epilogue(the sums in buf, 32 apart) */
static void kamx_epilogue(const kamx_job *j, const float *buf, int64_t i0, int64_t j0, int m, int n)
{
	const k_epilogue *ep = j->ep;
	const float *res = ep->residual && !j->preadd_res ? ep->residual + i0 * ep->ld_residual + j0 : NULL;
	float *c = j->C + i0 * j->ldc + j0;
	kamx_epilogue_block(buf, m, n, c, j->ldc, ep, ep->bias_n ? ep->bias_n + j0 : NULL,
			    ep->bias_m ? ep->bias_m + i0 : NULL, res);
	if (kgemm_act_is_transcendental(ep->act))
		kgemm_act_tile(c, j->ldc, m, n, ep->act);
}

static int kamx_plain(const k_epilogue *ep, int preadd_res)
{
	return ep->alpha == 1.0f && !ep->bias_n && !ep->bias_m && (!ep->residual || preadd_res) &&
	       ep->act == K_ACT_NONE;
}

/* copies the m x n block at src (rows ld apart) into buf (32 apart), zero
 * elsewhere */
static void kamx_gather(float *buf, const float *src, int64_t ld, int m, int n)
{
	memset(buf, 0, 32 * 32 * sizeof(float));
	for (int r = 0; r < m; r++)
		memcpy(buf + r * 32, src + r * ld, (size_t)n * sizeof(float));
}

static void kamx_columns(kamx_job *j, int64_t ra, int64_t rb, int64_t q0, int64_t q1, char *slot);

static void kamx_task(void *ctx, int64_t t, int thread)
{
	kamx_job *j = ctx;
	/* this task's rows [ra, rb) of the pass, in whole panels */
	const int64_t apan = cdiv(j->m1 - j->m0, 32), im = j->fused ? t : 0;
	const int64_t pa = im * j->apanels_per_task;
	const int64_t pb = pa + j->apanels_per_task < apan ? pa + j->apanels_per_task : apan;
	const int64_t ra = j->m0 + pa * 32, rb = j->m0 + pb * 32 < j->m1 ? j->m0 + pb * 32 : j->m1;
	if (ra >= rb)
		return;
	if (j->fused && !kamx_split_a_panels(j, pa, pb))
		return;
	/* column groups: the task's one, or all of them when it owns rows */
	const int64_t npan = cdiv(j->N, 32), ngroups = cdiv(npan, j->panels_per_task);
	const int64_t g0 = j->fused ? 0 : t % j->nn, g1 = j->fused ? ngroups : g0 + 1;
	char *slot = j->slots + (size_t)thread * j->slot_bytes;
	kamx_tiles_begin();
	for (int64_t g = g0; g < g1; g++) {
		const int64_t q0 = g * j->panels_per_task;
		kamx_columns(j, ra, rb, q0, q0 + j->panels_per_task < npan ? q0 + j->panels_per_task : npan, slot);
	}
	kamx_tiles_end();
}

/* Rows [ra, rb) by B's panels [q0, q1) (at most KAMX_TASK_PANELS), K
 * block by K block, with the thread's slot. */
static void kamx_columns(kamx_job *j, int64_t ra, int64_t rb, int64_t q0, int64_t q1, char *slot)
{
	const k_epilogue *ep = j->ep;
	uint16_t *bsplit = (uint16_t *)slot;
	float *buf = (float *)(slot + j->slot_bytes - align128(32 * 32 * sizeof(float)));
	const int plain = kamx_plain(ep, j->preadd_res);
	for (int64_t kb = 0; kb < j->nkb; kb++) {
		const int64_t c0 = kb * j->kchunks, nc = c0 + j->kchunks < j->nch ? j->kchunks : j->nch - c0;
		const int first = kb == 0, last = kb == j->nkb - 1;
		for (int64_t q = q0; q < q1 && !j->Bsplit; q++) {
			uint16_t *dst = bsplit + (q - q0) * nc * KAMX_CHUNK_U16;
			if (!j->Bt) {
				kamx_split_b(j->Bpanels + q * j->K * 32, j->K, c0 * 32, nc, dst);
				continue;
			}
			const int n = (int)(j->N - q * 32 < 32 ? j->N - q * 32 : 32);
			if (!kamx_split_bt(j->Bt + q * 32 * j->ldbt, j->ldbt, n, j->K, c0 * 32, nc, dst)) {
				atomic_store_explicit(&j->b_bad, 1, memory_order_relaxed);
				return;
			}
		}
		for (int64_t i0 = ra; i0 < rb; i0 += 32) {
			const int m = (int)(rb - i0 < 32 ? rb - i0 : 32);
			const uint16_t *ap = j->asplit + (((i0 - j->m0) / 32) * j->nch + c0) * KAMX_CHUNK_U16;
			for (int64_t q = q0; q < q1; q++) {
				const int64_t c_col = q * 32;
				const int n = (int)(j->N - c_col < 32 ? j->N - c_col : 32);
				const uint16_t *bp = j->Bsplit ? j->Bsplit + (q * j->nch + c0) * KAMX_CHUNK_U16
							       : bsplit + (q - q0) * nc * KAMX_CHUNK_U16;
				float *c = j->C + i0 * j->ldc + c_col;
				/* where the sums start: 0, the residual, or C's partial sums */
				const float *from = NULL;
				int64_t ld_from = 32;
				if (!first) {
					from = c;
					ld_from = j->ldc;
				} else if (j->preadd_res) {
					from = ep->residual + i0 * ep->ld_residual + c_col;
					ld_from = ep->ld_residual;
				}
				if (m == 32 && n == 32) {
					if (!last || plain) {
						kamx_block(ap, bp, nc, from, ld_from, c, j->ldc);
						continue;
					}
					kamx_block(ap, bp, nc, from, ld_from, buf, 32);
				} else {
					if (from)
						kamx_gather(buf, from, ld_from, m, n);
					kamx_block(ap, bp, nc, from ? buf : NULL, 32, buf, 32);
				}
				if (last) {
					kamx_epilogue(j, buf, i0, c_col, m, n);
				} else {
					for (int r = 0; r < m; r++)
						memcpy(c + r * j->ldc, buf + r * 32, (size_t)n * sizeof(float));
				}
			}
		}
	}
}

static int64_t kamx_run(int64_t M, int64_t N, int64_t K, const float *A, int64_t rs_a, const float *Bpanels,
			const float *Bt, int64_t ldbt, const uint16_t *Bsplit, float *C, int64_t ldc, const k_epilogue *ep,
			rt_pool *pool, void *workspace)
{
	if (!kamx_available())
		return 0;
	const int nthreads = rt_pool_size(pool);
	kamx_job j;
	memset(&j, 0, sizeof j);
	j.M = M;
	j.N = N;
	j.K = K;
	j.nch = cdiv(K, 32);
	j.nkb = cdiv(j.nch, KAMX_KC_CHUNKS);
	j.kchunks = cdiv(j.nch, j.nkb);
	if (ep->residual && ep->alpha != 1.0f && j.nkb > 1)
		return 0;
	j.A = A;
	j.rs_a = rs_a;
	j.Bpanels = Bpanels;
	j.Bt = Bt;
	j.ldbt = ldbt;
	j.Bsplit = Bsplit;
	j.C = C;
	j.ldc = ldc;
	j.ep = ep;
	j.preadd_res = ep->residual && j.nkb > 1;
	const int64_t rows = kamx_rows_per_pass(M, K);
	j.asplit = workspace;
	j.slots = (char *)workspace + align128((size_t)cdiv(rows, 32) * (size_t)j.nch * KAMX_CHUNK_U16 * 2);
	j.slot_bytes = kamx_slot_bytes(N, K);
	/* Tasks: groups of up to KAMX_TASK_PANELS of B's panels, as many as a
	 * multiple of the threads, all sharing A split once beforehand; or
	 * row blocks of A, one per thread, each splitting its own rows and all
	 * of B, where B is no larger than A or too narrow to give each thread
	 * a few panels. With the column split each thread reads the half of A
	 * the other split from the other core's cache: a 3136 x 64 @ 64 x 64
	 * product ran at 0.57x the f32 kernels on 2 threads, and squares
	 * (tests/c/bench_gemm.c, % of the f32 probe, columns -> rows) 512^3
	 * 98-101% -> 116%, 1024^3 111% -> 121%, 1536^3 102-104% -> 110%, 2048^3
	 * 101-103% -> 100%. Where B is the larger, splitting all of it on
	 * each thread costs more: eight cold 768 <-> 3072 linears at 512 tokens
	 * 1.23x/1.26x eager with columns, 1.16x/1.21x with rows (2048 x 768 @
	 * 768 x 768: 1.28x -> 1.47x). A B split ahead is only read, so rows
	 * win whatever its width (mean ms, 2 threads, columns -> rows: 512 x
	 * 768 @ 768 x 3072 5.30 -> 4.77, 512 x 3072 @ 3072 x 768 5.90 ->
	 * 4.84, 640 x 768 @ 768 x 2304 5.16 -> 4.48; 512^3 in rows 614
	 * against 496-513 GFLOP/s in columns). A residual that is C itself keeps the
	 * column split: a row block that finds its A out of range leaves the
	 * pass to the f32 kernels after other blocks wrote theirs. */
	const int64_t npan = cdiv(N, 32);
	const int narrow = nthreads > 1 && (Bsplit || npan < 4 * (int64_t)nthreads || M >= N) && ep->residual != C;
	j.nn = cdiv(npan, KAMX_TASK_PANELS);
	if (nthreads > 1 && npan >= nthreads && !narrow)
		j.nn = cdiv(j.nn, nthreads) * nthreads;
	j.panels_per_task = cdiv(npan, j.nn);
	j.nn = cdiv(npan, j.panels_per_task);
	for (int64_t m0 = 0; m0 < M; m0 += rows) {
		j.m0 = m0;
		j.m1 = m0 + rows < M ? m0 + rows : M;
		const int64_t apan = cdiv(j.m1 - j.m0, 32);
		atomic_store(&j.a_bad, 0);
		j.nm = narrow && apan >= nthreads ? nthreads : 1;
		j.fused = j.nm > 1; /* then each task does every column group */
		if (j.fused) {
			j.apanels_per_task = cdiv(apan, j.nm);
		} else {
			j.apanels_per_task = cdiv(apan, 4 * (int64_t)nthreads);
			rt_pool_run(pool, cdiv(apan, j.apanels_per_task), kamx_split_a_task, &j);
			if (atomic_load(&j.a_bad))
				return m0; /* nothing of this pass is written yet */
			j.apanels_per_task = apan;
		}
		atomic_store(&j.b_bad, 0);
		rt_pool_run(pool, j.fused ? j.nm : j.nn, kamx_task, &j);
		if (atomic_load(&j.b_bad))
			return 0; /* (only from kamx_gemm_bt: B packed was checked) */
		if (atomic_load(&j.a_bad))
			return m0; /* the f32 kernels redo the pass: C is not the residual */
		atomic_fetch_add_explicit(&kamx_pass_count, 1, memory_order_relaxed);
	}
	return M;
}

int64_t kamx_gemm(int64_t M, int64_t N, int64_t K, const float *A, int64_t rs_a, const float *Bpanels,
		  float *C, int64_t ldc, const k_epilogue *ep, rt_pool *pool, void *workspace)
{
	return kamx_run(M, N, K, A, rs_a, Bpanels, NULL, 0, NULL, C, ldc, ep, pool, workspace);
}

int64_t kamx_gemm_presplit(int64_t M, int64_t N, int64_t K, const float *A, int64_t rs_a, const uint16_t *Bsplit,
			   float *C, int64_t ldc, const k_epilogue *ep, rt_pool *pool, void *workspace)
{
	return kamx_run(M, N, K, A, rs_a, NULL, NULL, 0, Bsplit, C, ldc, ep, pool, workspace);
}

void kamx_presplit_b(const float *Bpanels, int64_t K, int64_t npanels, uint16_t *dst)
{
	const int64_t nch = cdiv(K, 32);
	for (int64_t q = 0; q < npanels; q++)
		kamx_split_b(Bpanels + q * K * KAMX_PANEL, K, 0, nch, dst + q * nch * KAMX_CHUNK_U16);
}

int64_t kamx_gemm_bt(int64_t M, int64_t N, int64_t K, const float *A, int64_t rs_a, const float *Bt, int64_t ldbt,
		     float *C, int64_t ldc, const k_epilogue *ep, rt_pool *pool, void *workspace)
{
	return kamx_run(M, N, K, A, rs_a, NULL, Bt, ldbt, NULL, C, ldc, ep, pool, workspace);
}

#else

int64_t kamx_gemm_bt(int64_t M, int64_t N, int64_t K, const float *A, int64_t rs_a, const float *Bt, int64_t ldbt,
		     float *C, int64_t ldc, const k_epilogue *ep, rt_pool *pool, void *workspace)
{
	(void)M, (void)N, (void)K, (void)A, (void)rs_a, (void)Bt, (void)ldbt, (void)C, (void)ldc, (void)ep, (void)pool;
	(void)workspace;
	return 0;
}

int64_t kamx_gemm(int64_t M, int64_t N, int64_t K, const float *A, int64_t rs_a, const float *Bpanels,
		  float *C, int64_t ldc, const k_epilogue *ep, rt_pool *pool, void *workspace)
{
	(void)M, (void)N, (void)K, (void)A, (void)rs_a, (void)Bpanels, (void)C, (void)ldc, (void)ep, (void)pool;
	(void)workspace;
	return 0;
}

int64_t kamx_gemm_presplit(int64_t M, int64_t N, int64_t K, const float *A, int64_t rs_a, const uint16_t *Bsplit,
			   float *C, int64_t ldc, const k_epilogue *ep, rt_pool *pool, void *workspace)
{
	(void)M, (void)N, (void)K, (void)A, (void)rs_a, (void)Bsplit, (void)C, (void)ldc, (void)ep, (void)pool;
	(void)workspace;
	return 0;
}

void kamx_presplit_b(const float *Bpanels, int64_t K, int64_t npanels, uint16_t *dst)
{
	(void)Bpanels, (void)K, (void)npanels, (void)dst;
}

int kamx_in_range(const float *x, size_t n)
{
	(void)x, (void)n;
	return 0;
}

#endif

/* gemm_u8s8.c - the int8 product's driver (gemm_u8s8.h): picks the tile kernel from CPUID and
 * cuts the product into tasks for the pool: a panel of KU8_PANEL_BLOCKS packed blocks (64
 * channels, K * 64 bytes of W: it stays in L2 while the task's rows stream past it) times a run
 * of rows. */
#include "kernels/common/cpu.h"
#include "kernels/common/kernel.h"
#include "kernels/gemm_q/gemm_u8s8.h"

typedef struct {
	const char *name;
	int mr, nbmax; /* rows and blocks one tile call takes at most */
	ku8_tile_fn tile;
} ku8_kernel;

static const ku8_kernel *pick(void)
{
	static const ku8_kernel scalar = {"scalar", 4, KU8_PANEL_BLOCKS, ku8_tile_scalar};
#if defined(AIR_HAVE_X86)
	static const ku8_kernel vnni = {"avx512_vnni", 4, KU8_PANEL_BLOCKS, ku8_tile_avx512vnni};
	static const ku8_kernel avx2 = {"avx2", 2, 1, ku8_tile_avx2};
	const unsigned f = kcpu_features();
	if ((f & (KCPU_AVX512 | KCPU_AVX512VNNI)) == (KCPU_AVX512 | KCPU_AVX512VNNI))
		return &vnni;
	if (f & KCPU_AVX2)
		return &avx2;
#endif
	return &scalar;
}

const char *ku8_kernel_name(void)
{
	return pick()->name;
}

typedef struct {
	const ku8_packed *p;
	const ku8_kernel *kern;
	const uint8_t *A;
	int64_t M, lda, ldc, rows, npanels;
	const ku8_epi *ep;
	void *C;
} job;

static void task(void *ctx, int64_t t, int thread)
{
	const job *j = ctx;
	(void)thread;
	const int64_t panel = t % j->npanels, r0 = (t / j->npanels) * j->rows;
	const int64_t r1 = k_min64(j->M, r0 + j->rows);
	const int64_t b0 = panel * KU8_PANEL_BLOCKS, b1 = k_min64(j->p->nblk, b0 + KU8_PANEL_BLOCKS);
	const int mr = j->kern->mr;
	const size_t esize = j->ep->out_u8 ? 1 : sizeof(float);
	for (int64_t r = r0; r < r1; r += mr) {
		const int m = (int)k_min64(mr, r1 - r);
		for (int64_t b = b0; b < b1; b += j->kern->nbmax)
			j->kern->tile(j->p, b, (int)k_min64(j->kern->nbmax, b1 - b), m, j->A + r * j->lda, j->lda,
				      j->ep, (char *)j->C + (size_t)(r * j->ldc) * esize, j->ldc);
	}
}

void ku8_gemm(const ku8_packed *p, int64_t M, const uint8_t *A, int64_t lda, const ku8_epi *ep, void *C,
	      int64_t ldc, rt_pool *pool)
{
	if (M <= 0 || p->N <= 0)
		return;
	const ku8_kernel *kern = pick();
	const int64_t npanels = k_cdiv(p->nblk, KU8_PANEL_BLOCKS);
	/* about 4 tasks a thread to balance, runs of rows a multiple of the tile's and at least 16 */
	const int64_t want = 4 * (int64_t)rt_pool_size(pool);
	int64_t rows = M;
	if (npanels < want) {
		const int64_t chunks = k_cdiv(want, npanels);
		rows = k_cdiv(M, chunks);
		rows = k_cdiv(rows < 16 ? 16 : rows, kern->mr) * kern->mr;
	}
	job j = {p, kern, A, M, lda, ldc, rows, npanels, ep, C};
	rt_pool_run(pool, npanels * k_cdiv(M, rows), task, &j);
}

/* pack.c - packing A and B into the micro-kernel's panel layouts (one
 * block, or all of an operand in parallel), and the packed B API of gemm.h. */
#include "kernels/gemm/gemm.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kernels/common/kernel.h"
#include "kernels/gemm/amx.h"
#include "kernels/gemm/gemm_internal.h"
#include "kernels/gemm/ukernel.h"
#include "kernels/shape/transpose.h"
#include "platform/bigmem.h"

/* ---- packing ------------------------------------------------------------ */

size_t kgemm_align(size_t n)
{
	return (n + KGEMM_ALIGN - 1) / KGEMM_ALIGN * KGEMM_ALIGN;
}

/* A[m x k] (strides rs, cs) into panels of uk->mr rows, zero-padded:
 * panel i0/mr at dst + i0 * k, element (r, p) at [p * mr + r]. */
void kgemm_pack_a(const kgemm_ukernel_desc *uk, int64_t m, int64_t k, const float *A, int64_t rs,
		  int64_t cs, float *dst)
{
	const int mr = uk->mr;
	if (cs == 1 && uk->pack_a) {
		uk->pack_a(m, k, A, rs, dst);
		return;
	}
	if (rs == 1 && uk->pack_a_t) {
		uk->pack_a_t(m, k, A, cs, dst);
		return;
	}
	for (int64_t i0 = 0; i0 < m; i0 += mr) {
		int rows = (int)k_min64(mr, m - i0);
		float *d = dst + i0 * k;
		const float *s = A + i0 * rs;
		if (cs == 1) {
			/* row-major A: read each row contiguously */
			for (int r = 0; r < rows; r++)
				for (int64_t p = 0; p < k; p++)
					d[p * mr + r] = s[r * rs + p];
			for (int r = rows; r < mr; r++)
				for (int64_t p = 0; p < k; p++)
					d[p * mr + r] = 0.0f;
		} else if (rs == 1) {
			/* transposed A (a gradient's x^T): a panel row is mr
			 * consecutive floats of A's storage */
			for (int64_t p = 0; p < k; p++) {
				memcpy(d + p * mr, s + p * cs, sizeof(float) * (size_t)rows);
				for (int r = rows; r < mr; r++)
					d[p * mr + r] = 0.0f;
			}
		} else {
			for (int64_t p = 0; p < k; p++) {
				for (int r = 0; r < rows; r++)
					d[p * mr + r] = s[r * rs + p * cs];
				for (int r = rows; r < mr; r++)
					d[p * mr + r] = 0.0f;
			}
		}
	}
}

/* B's value at (row p, column j) of a source block, times scale[j] when
 * there is a scale: in double, rounded once, so a weight scaled while it
 * is packed equals the one fold_batchnorm folds at compile time. */
static inline float kgemm_b_at(const float *s, int64_t at, const double *scale, int c)
{
	return scale ? (float)((double)s[at] * scale[c]) : s[at];
}

/* Rows [p0, p1) of columns [j0, j1) (j0 a multiple of nr) of B[K x N] into
 * whole panels of nr columns, zero-padded past N: panel j/nr at dst +
 * (j/nr) * K * nr. B points at element (p0, j0): (p, j) is at
 * B[(p - p0) * rs + (j - j0) * cs]; scale (or NULL) at column j0's. */
void kgemm_pack_b_panels(int64_t K, int64_t N, int64_t p0, int64_t p1, const float *B, int64_t rs,
			 int64_t cs, const double *scale, int nr, int64_t j0, int64_t j1, float *dst)
{
	for (int64_t j = j0; j < j1; j += nr) {
		int cols = (int)k_min64(nr, N - j);
		float *d = dst + (j / nr) * K * nr + p0 * nr;
		const float *s = B + (j - j0) * cs;
		const double *sc = scale ? scale + (j - j0) : NULL;
		int64_t rows = p1 - p0;
		if (cs == 1 && !sc) {
			for (int64_t p = 0; p < rows; p++) {
				memcpy(d + p * nr, s + p * rs, (size_t)cols * sizeof(float));
				for (int c = cols; c < nr; c++)
					d[p * nr + c] = 0.0f;
			}
		} else if (rs == 1 && !sc) {
			/* transposed B (a [N x K] weight, a linear's): the panel is
			 * the transpose of its cols x rows block, in 8 x 8 register
			 * blocks. Element by element it ran at about a float a cycle:
			 * a training step's linear (weight an input, packed on every
			 * call) at 768 x 3072 spent 0.7 ms of 3.1 packing */
			ktranspose(s, cs, d, nr, cols, rows);
			if (cols < nr)
				for (int64_t p = 0; p < rows; p++)
					memset(d + p * nr + cols, 0, sizeof(float) * (size_t)(nr - cols));
		} else if (rs < cs) {
			/* transposed B with a scale: a column at a time would
			 * touch K destination lines per column; 16 x nr tiles keep
			 * both sides within a few lines */
			for (int64_t q0 = 0; q0 < rows; q0 += 16) {
				int64_t q1 = k_min64(rows, q0 + 16);
				for (int c = 0; c < cols; c++)
					for (int64_t p = q0; p < q1; p++)
						d[p * nr + c] = kgemm_b_at(s, c * cs + p * rs, sc, c);
				for (int c = cols; c < nr; c++)
					for (int64_t p = q0; p < q1; p++)
						d[p * nr + c] = 0.0f;
			}
		} else {
			for (int64_t p = 0; p < rows; p++)
				for (int c = 0; c < nr; c++)
					d[p * nr + c] = c < cols ? kgemm_b_at(s, p * rs + c * cs, sc, c) : 0.0f;
		}
	}
}

size_t kgemm_packed_floats(int64_t K, int64_t N, int nr)
{
	return (size_t)k_cdiv(N, nr) * (size_t)nr * (size_t)K;
}

air_status kgemm_pack_b(int64_t K, int64_t N, const float *B, int64_t rs_b, int64_t cs_b,
			kgemm_packed_b **out)
{
	if (!out)
		return air_error(AIR_INVALID_ARGUMENT, "kgemm_pack_b: out is NULL");
	*out = NULL;
	if (K < 0 || N < 0)
		return air_error(AIR_INVALID_ARGUMENT, "kgemm_pack_b: negative size K=%lld N=%lld",
				 (long long)K, (long long)N);
	if (!B && K > 0 && N > 0)
		return air_error(AIR_INVALID_ARGUMENT, "kgemm_pack_b: B is NULL");
	const kgemm_ukernel_desc *uk = kgemm_active_ukernel();
	size_t nfloats = 0;
	if (K > 0 && N > 0) {
		if ((uint64_t)K > (SIZE_MAX / sizeof(float)) / ((uint64_t)N + uk->nr))
			return air_error(AIR_INVALID_ARGUMENT, "kgemm_pack_b: %lld x %lld is too large",
					 (long long)K, (long long)N);
		nfloats = kgemm_packed_floats(K, N, uk->nr);
	}
	kgemm_packed_b *p = calloc(1, sizeof *p);
	if (!p)
		return air_error(AIR_OUT_OF_MEMORY, "kgemm_pack_b: no memory");
	p->K = K;
	p->N = N;
	p->nr = uk->nr;
	p->bytes = kgemm_align(nfloats * sizeof(float));
	if (nfloats) {
		p->data = rt_big_alloc(p->bytes, KGEMM_ALIGN);
		if (!p->data) {
			size_t bytes = p->bytes;
			free(p);
			return air_error(AIR_OUT_OF_MEMORY, "kgemm_pack_b: no memory for %zu bytes", bytes);
		}
		kgemm_pack_b_panels(K, N, 0, K, B, rs_b, cs_b, NULL, uk->nr, 0, N, p->data);
		kgemm_packed_b_check_range(p);
	}
	*out = p;
	return AIR_OK;
}

air_status kgemm_packed_b_presplit(kgemm_packed_b *p)
{
	if (!p || !p->amx_ok || p->amx_split || p->K <= 0 || p->N <= 0)
		return AIR_OK;
	const int64_t npanels = k_cdiv(p->N, p->nr);
	const size_t bytes = kgemm_align((size_t)npanels * kamx_presplit_panel_u16(p->K) * sizeof(uint16_t));
	uint16_t *split = rt_big_alloc(bytes, KGEMM_ALIGN);
	if (!split)
		return air_error(AIR_OUT_OF_MEMORY, "kgemm_packed_b_presplit: no memory for %zu bytes", bytes);
	kamx_presplit_b(p->data, p->K, npanels, split);
	p->amx_split = split;
	p->split_bytes = bytes;
	return AIR_OK;
}

void kgemm_packed_b_free(kgemm_packed_b *packed)
{
	if (!packed)
		return;
	free(packed->data);
	free(packed->amx_split);
	free(packed);
}

size_t kgemm_packed_b_size(int64_t K, int64_t N)
{
	size_t floats = K > 0 && N > 0 ? kgemm_packed_floats(K, N, kgemm_active_ukernel()->nr) : 0;
	return kgemm_align(sizeof(kgemm_packed_b)) + kgemm_align(floats * sizeof(float));
}

kgemm_packed_b *kgemm_packed_b_init(void *mem, int64_t K, int64_t N)
{
	kgemm_packed_b *p = mem;
	p->K = K;
	p->N = N;
	p->nr = kgemm_active_ukernel()->nr;
	p->bytes = kgemm_packed_b_size(K, N) - kgemm_align(sizeof *p);
	p->data = (float *)((char *)mem + kgemm_align(sizeof *p));
	p->amx_ok = 0; /* filled by the caller: never checked */
	p->amx_split = NULL;
	p->split_bytes = 0;
	return p;
}

void kgemm_packed_b_check_range(kgemm_packed_b *p)
{
	const kgemm_ukernel_desc *uk = kgemm_active_ukernel();
	p->amx_ok = p->K > 0 && p->N > 0 && kamx_available() && uk->nr == KAMX_PANEL &&
		    kamx_in_range(p->data, kgemm_packed_floats(p->K, p->N, p->nr));
}

void kgemm_pack_b_block(kgemm_packed_b *p, int64_t p0, int64_t rows, int64_t j0, int64_t j1, const float *B,
			int64_t rs_b, int64_t cs_b, const double *scale)
{
	if (rows <= 0 || j1 <= j0)
		return;
	kgemm_pack_b_panels(p->K, p->N, p0, p0 + rows, B, rs_b, cs_b, scale, p->nr, j0, j1, p->data);
}

float *kgemm_packed_b_panel(kgemm_packed_b *p, int64_t j)
{
	return p->data + (j / p->nr) * p->K * p->nr;
}

size_t kgemm_packed_b_bytes(const kgemm_packed_b *packed)
{
	return packed ? sizeof *packed + packed->bytes + packed->split_bytes : 0;
}

/* ---- packing in parallel ------------------------------------------------ */

typedef struct kgemm_pack_job {
	int64_t K, N;
	const float *B;
	int64_t bs_b, rs_b, cs_b;
	float *dst;
	int64_t bs_dst;
	int nr;
	int64_t per_item, cols; /* tasks per item, columns per task */
} kgemm_pack_job;

static void kgemm_pack_task(void *ctx, int64_t t, int thread)
{
	const kgemm_pack_job *p = ctx;
	int64_t b = t / p->per_item, j0 = (t % p->per_item) * p->cols;
	kgemm_pack_b_panels(p->K, p->N, 0, p->K, p->B + b * p->bs_b + j0 * p->cs_b, p->rs_b, p->cs_b, NULL, p->nr, j0,
			    k_min64(p->N, j0 + p->cols), p->dst + b * p->bs_dst);
}

/* Packs B of `batch` items into dst (item stride bs_dst floats) in parallel. */
void kgemm_pack_b_parallel(int64_t batch, int64_t K, int64_t N, const float *B, int64_t bs_b,
			   int64_t rs_b, int64_t cs_b, int nr, float *dst, int64_t bs_dst,
			   rt_pool *pool)
{
	kgemm_pack_job p = {K, N, B, bs_b, rs_b, cs_b, dst, bs_dst, nr, 0, 0};
	/* ~64 KiB of packed panels per task */
	int64_t panels = k_cdiv(N, nr), per_task = (16384 + K * nr - 1) / (K * nr);
	if (per_task > panels)
		per_task = panels;
	p.cols = per_task * nr;
	p.per_item = k_cdiv(panels, per_task);
	rt_pool_run(pool, batch * p.per_item, kgemm_pack_task, &p);
}

typedef struct kgemm_pack_a_job {
	const kgemm_ukernel_desc *uk;
	int64_t M, K, kc;
	const float *A;
	int64_t rs_a, cs_a;
	float *dst;
	int64_t rows; /* per task: a multiple of mr */
	int64_t chunks; /* tasks per K block */
} kgemm_pack_a_job;

static void kgemm_pack_a_task(void *ctx, int64_t t, int thread)
{
	(void)thread;
	const kgemm_pack_a_job *p = ctx;
	const int64_t pc = (t / p->chunks) * p->kc, kc = k_min64(p->kc, p->K - pc);
	const int64_t i0 = (t % p->chunks) * p->rows, i1 = k_min64(p->M, i0 + p->rows);
	const int64_t mpad = k_cdiv(p->M, p->uk->mr) * p->uk->mr;
	kgemm_pack_a(p->uk, i1 - i0, kc, p->A + i0 * p->rs_a + pc * p->cs_a, p->rs_a, p->cs_a,
		     p->dst + pc * mpad + i0 * kc);
}

/* A that is not row-major is packed by the task that reads it; when
 * several tasks share its rows (the plan splits N), that is once per
 * column block, from strided reads that cost as much as the products
 * (ViT-Tiny's weight gradients, g^T @ x, 192 x 1576 @ 1576 x 768: A
 * packed by each of four column blocks took 24% of the time). Then all of
 * A is packed once into room (gemm.c, kgemm_whole_a_bytes), in parallel,
 * K block by K block in the tasks' layout, and the tasks read it there.
 * Returns the packed A, or NULL to leave the packing to the tasks. */
const float *kgemm_share_a(const kgemm_ukernel_desc *uk, const kgemm_plan *plan, int64_t M, int64_t K,
			   const float *A, int64_t rs_a, int64_t cs_a, float *room, rt_pool *pool)
{
	if (!room || cs_a == 1 || plan->nn < 2)
		return NULL;
	const int64_t kblocks = k_cdiv(K, plan->kc), tiles = k_cdiv(M, uk->mr);
	/* a few tasks per thread, of whole row tiles */
	const int64_t chunks = k_min64(tiles, k_cdiv(4 * (int64_t)rt_pool_size(pool), kblocks));
	kgemm_pack_a_job p = {uk, M, K, plan->kc, A, rs_a, cs_a, room, k_cdiv(tiles, chunks) * uk->mr, 0};
	p.chunks = k_cdiv(M, p.rows);
	rt_pool_run(pool, kblocks * p.chunks, kgemm_pack_a_task, &p);
	return room;
}

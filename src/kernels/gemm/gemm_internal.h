/* gemm_internal.h - what the f32 GEMM driver's own files (gemm.c, pack.c,
 * thin.c, gemm_ref.c) share and gemm.h does not show: the packed B's layout,
 * the packing routines, the plan, and the steps every entry point takes. */
#ifndef AIR_KERNELS_GEMM_GEMM_INTERNAL_H
#define AIR_KERNELS_GEMM_GEMM_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/gemm/gemm.h"
#include "kernels/gemm/ukernel.h"

/* Below this many multiply-adds a parallel loop costs more than it saves. */
#define KGEMM_PARALLEL_MIN_MACS (64.0 * 64.0 * 64.0)
/* kgemm_f32_b_in_place has no workspace: a task packs B's micro-panels
 * into this much stack instead (a 256 x 32 panel: 32 KiB) */
enum { KGEMM_STACK_PANEL_FLOATS = 256 * 32 };
/* Workspace slices start on their own cache lines (two, for the adjacent-line
 * prefetcher), so threads never share one. */
enum { KGEMM_ALIGN = 128 };

struct kgemm_packed_b {
	int64_t K, N;
	int nr;
	size_t bytes;
	float *data; /* KGEMM_ALIGN-aligned panels */
	int amx_ok;  /* every value in kamx_in_range's range (0: not known) */
	/* the panels split for the AMX path (kgemm_packed_b_presplit), or NULL */
	uint16_t *amx_split;
	size_t split_bytes;
};

typedef struct kgemm_plan {
	int64_t nc, kc; /* block sizes: nc a multiple of nr (rows: kgemm_rows) */
	int64_t nm, nn; /* blocks per matrix */
} kgemm_plan;

/* ---- pack.c ------------------------------------------------------------- */

/* n rounded up to KGEMM_ALIGN. */
size_t kgemm_align(size_t n);
/* Floats of K x N packed in panels of nr columns. */
size_t kgemm_packed_floats(int64_t K, int64_t N, int nr);
/* A[m x k] into panels of uk->mr rows. */
void kgemm_pack_a(const kgemm_ukernel_desc *uk, int64_t m, int64_t k, const float *A, int64_t rs,
		  int64_t cs, float *dst);
/* Rows [p0, p1) of columns [j0, j1) of B[K x N] into whole panels of nr
 * columns. */
void kgemm_pack_b_panels(int64_t K, int64_t N, int64_t p0, int64_t p1, const float *B, int64_t rs,
			 int64_t cs, const double *scale, int nr, int64_t j0, int64_t j1, float *dst);
/* B of batch items packed in parallel. */
void kgemm_pack_b_parallel(int64_t batch, int64_t K, int64_t N, const float *B, int64_t bs_b,
			   int64_t rs_b, int64_t cs_b, int nr, float *dst, int64_t bs_dst,
			   rt_pool *pool);
/* All of a non-row-major A packed once, in parallel, when the plan's tasks
 * share its rows; NULL to leave the packing to the tasks. */
const float *kgemm_share_a(const kgemm_ukernel_desc *uk, const kgemm_plan *plan, int64_t M, int64_t K,
			   const float *A, int64_t rs_a, int64_t cs_a, float *room, rt_pool *pool);

/* ---- gemm.c ------------------------------------------------------------- */

/* One matrix (of batch) split into tasks. */
kgemm_plan kgemm_make_plan(const kgemm_ukernel_desc *uk, int64_t batch, int64_t M, int64_t N,
			   int64_t K, int nthreads);
/* Rows [*m0, *m1) of row block im of the plan. */
void kgemm_rows(const kgemm_plan *p, int64_t M, int mr, int64_t im, int64_t *m0, int64_t *m1);
/* The parallel tasks with a row-major B not packed beforehand. */
void kgemm_run_b_source(const kgemm_ukernel_desc *uk, int64_t M, int64_t N, int64_t K, const float *A,
			int64_t rs_a, int64_t cs_a, const float *B, int64_t ldb, float *C, int64_t ldc,
			const k_epilogue *ep, rt_pool *pool, char *slots, float *a_room);
/* Handles the degenerate sizes; returns 1 if nothing is left to do. */
int kgemm_trivial(int64_t batch, int64_t M, int64_t N, int64_t K, float *C, int64_t bs_c,
		  int64_t ldc, const k_epilogue *ep);
/* ep, or the identity epilogue (in *none) for NULL. */
const k_epilogue *kgemm_ep_or_none(const k_epilogue *ep, k_epilogue *none);

/* ---- thin.c ------------------------------------------------------------- */

/* kgemm_f32 for M <= KGEMM_THIN_M with B read in place; 0 when it does not
 * fit (nothing done). */
int kgemm_thin(const kgemm_ukernel_desc *uk, int64_t M, int64_t N, int64_t K, const float *A,
	       int64_t rs_a, int64_t cs_a, const float *B, int64_t rs_b, int64_t cs_b, float *C,
	       int64_t ldc, const k_epilogue *ep, rt_pool *pool, float *workspace);

#endif

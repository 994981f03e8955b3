/* linear_rows.h - linear with its constant weight read where its owner
 * keeps it (linear_rows.c), listed in ops/kernels.c before linear_packed. */
#ifndef AIR_KERNELS_MATMUL_LINEAR_ROWS_H
#define AIR_KERNELS_MATMUL_LINEAR_ROWS_H

#include "kernels/common/epilogue.h"
#include "kernels/common/kernel.h"
#include "kernels/gemm/gemm.h"

extern const k_kernel kfast_linear_rows;

/* The product behind it, shared with the convolution that reads its weight
 * in place (conv/conv_rows.c): y[M, N] = act(scale * (x w^T) + bias + res)
 * for a row-major w [N, K] read where it is, scale (per row of w, NULL for
 * none), bias [N] and res [M, N] (row stride N; not y) optional. x^T is
 * given as packed B panels (K x M, gemm.h): kwrows_panels sets them up at
 * the front of the workspace (kwrows_workspace_bytes for the pool's thread
 * count), the caller fills them (kgemm_packed_b_panel), then
 * kwrows_product multiplies. pack_w: the tile loop packs each tile of w's
 * rows (mr x K) once before its panels (conv_rows.c: with K a power of two
 * the mr rows read in place fell into the same few L1 sets). */
typedef struct kwrows_args {
	int64_t M, N, K;
	const float *w, *scale, *bias, *res;
	float *y;
	k_act act;
	bool pack_w;
} kwrows_args;
size_t kwrows_workspace_bytes(int64_t M, int64_t N, int64_t K, int nthreads, bool pack_w);
struct kgemm_packed_b *kwrows_panels(void *workspace, int64_t K, int64_t M);
void kwrows_product(const kwrows_args *a, void *workspace, rt_pool *pool);

#endif

/* lowp_w.h - C[M x N] = epilogue(A @ W^T) where A is f32 [M x K] (row stride lda, k contiguous)
 * and W is a 16-bit float weight [N x K] (bf16 or f16, row stride ldw, k contiguous: PyTorch's
 * nn.Linear layout), read where it is: no packed or f32 copy of W is ever made.
 * On every ISA path A is first rounded (round to nearest even) to W's 16-bit type, so each
 * product is exact in f32 and paths differ only in summation order; accumulation is f32.
 *
 * The epilogue is the f32 GEMM's (epilogue.h): C = act(alpha * (A @ W^T) + bias_n[n] +
 * bias_m[m] + residual[m * ld_residual + n]); the residual may alias C (same pointer and ld);
 * ep may be NULL (the identity); next_b is ignored.
 *
 * Paths, picked once from kcpu_features() (so AIR_ISA=scalar|avx2|avx512 forces them):
 *   "avx512bf16_dot"  bf16 W on AVX512-BF16: vdpbf16ps on A converted to bf16. Up to 71
 *                     rows (decode), dot products of A rows and W rows read in place; from 72
 *                     (prefill) each task packs a W block into its workspace slice in the
 *                     instruction's pair-interleaved layout, A is packed into 12-row panels,
 *                     and a 12x32 tile broadcasts A pairs against W (lowp_w_pack.bf16.c).
 *                     The instruction treats bf16 subnormals (|x| < 2^-126) as zero, in A and
 *                     in W: such a weight contributes nothing on this path. The wide path rounds
 *                     A with vcvtne2ps2bf16, which makes f32 subnormals zero: an A value within
 *                     2^-134 below 2^-126 (rounded up to 2^-126 elsewhere) counts as zero there.
 *   "avx2_cvt_fma"    AVX2+FMA(+F16C for f16): W widened to f32, FMA against the rounded A.
 *   "scalar"          portable C. */
#ifndef AIR_KERNELS_GEMM_LOWP_W_H
#define AIR_KERNELS_GEMM_LOWP_W_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/common/epilogue.h"
#include "platform/pool.h"

typedef enum { KLOWP_BF16 = 0, KLOWP_F16 = 1 } klowp_type;

/* Workspace bytes for kgemm_lowp_w with up to nthreads threads (at least
 * rt_pool_size() of the pool passed): room for A rounded to W's type
 * (kept as f32 by the widening paths, so 4 bytes an element whatever the
 * path), or for the large-M path's packed A and a packed W block per
 * thread, whichever is larger, plus slack to align it; any alignment of
 * the pointer is accepted. 0 when M or K is 0. */
size_t kgemm_lowp_w_workspace_bytes(int64_t M, int64_t K, int nthreads);

/* C = epilogue(A @ W^T). lda >= K, ldw >= K, ldc >= N. pool may be NULL
 * (one thread). workspace: kgemm_lowp_w_workspace_bytes(M, K, n) bytes. */
void kgemm_lowp_w(klowp_type wt, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
		  const uint16_t *W, int64_t ldw, float *C, int64_t ldc, const k_epilogue *ep,
		  rt_pool *pool, void *workspace);

/* A given row by row instead of as a matrix: row(ctx, i, tmp) gives row i's
 * K f32 values, either a pointer into the caller's own memory or tmp (room
 * for K floats) filled with them. A convolution's implicit im2col
 * (kernels/conv/conv_nhwc_lowp.c): its rows are built as the GEMM reads
 * them, 16 at a time, never stored whole. row is called from the pool's
 * threads at once, each with its own tmp. */
typedef struct klowp_rows {
	const float *(*row)(const void *ctx, int64_t i, float *tmp);
	const void *ctx;
} klowp_rows;

/* Workspace for kgemm_lowp_w_rows: kgemm_lowp_w's and the rows' scratch. */
size_t kgemm_lowp_w_rows_workspace_bytes(int64_t M, int64_t K, int nthreads);

/* kgemm_lowp_w with A from a row source. */
void kgemm_lowp_w_rows(klowp_type wt, int64_t M, int64_t N, int64_t K, const klowp_rows *A, const uint16_t *W,
		       int64_t ldw, float *C, int64_t ldc, const k_epilogue *ep, rt_pool *pool, void *workspace);

/* The naive loop, same rounding of A, double accumulation (and epilogue in
 * double, as kgemm_f32_reference): the tests' oracle. */
void kgemm_lowp_w_reference(klowp_type wt, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
			    const uint16_t *W, int64_t ldw, float *C, int64_t ldc, const k_epilogue *ep);

/* The path kgemm_lowp_w takes for wt: "avx512bf16_dot", "avx2_cvt_fma" or
 * "scalar". */
const char *kgemm_lowp_w_kernel_name(klowp_type wt);

#endif

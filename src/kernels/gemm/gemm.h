/* gemm.h - f32 matrix multiply with a fused epilogue:
 *   C[M x N] = act(alpha * A[M x K] @ B[K x N] + bias + residual)
 * A and B are read through (row, column) strides, so transposed operands cost
 * nothing; C is row-major with row stride ldc. Kernels are chosen once from
 * kcpu_features(): AVX-512, AVX2+FMA, then portable C. */
#ifndef AIR_KERNELS_GEMM_GEMM_H
#define AIR_KERNELS_GEMM_GEMM_H

#include <stddef.h>
#include <stdint.h>

#include "air/air.h"
#include "kernels/common/epilogue.h"
#include "platform/pool.h"

/* B packed once (at compile time, for weights) into the micro-kernel's
 * panel layout. Immutable after packing; shareable across threads. */
typedef struct kgemm_packed_b kgemm_packed_b;

air_status kgemm_pack_b(int64_t K, int64_t N, const float *B, int64_t rs_b, int64_t cs_b,
			kgemm_packed_b **out);
void kgemm_packed_b_free(kgemm_packed_b *packed);
/* Also keeps B split into the AMX path's bf16 parts (amx.h), 6
 * bytes a value beside the packed 4, so that a product that takes that
 * path on every call no longer splits B on every call: for a weight whose
 * products all have M known and large (kamx_wanted). A no-op where the
 * path is unavailable or B's values are outside its range. */
air_status kgemm_packed_b_presplit(kgemm_packed_b *packed);
/* Bytes held by a packed B (for the compile report). */
size_t kgemm_packed_b_bytes(const kgemm_packed_b *packed);

/* A packed B in caller memory, for kernels that re-pack a weight on every
 * call rather than hold a packed copy (see kernels/conv/conv_nhwc.c):
 * kgemm_packed_b_size bytes, 64-byte aligned, set up by kgemm_packed_b_init
 * and filled by kgemm_pack_b_block calls that together cover every row and
 * every panel. Never passed to kgemm_packed_b_free. */
size_t kgemm_packed_b_size(int64_t K, int64_t N);
kgemm_packed_b *kgemm_packed_b_init(void *mem, int64_t K, int64_t N);
/* Packs rows [p0, p0 + rows) of columns [j0, j1) of B into p: j0 a multiple
 * of kgemm_tile_cols(), j1 <= N or the end of a panel. B points at element
 * (p0, j0): (p0 + r, j0 + c) is B[r * rs_b + c * cs_b]. With a scale, that
 * column is multiplied by scale[c] in double and rounded once (what
 * fold_batchnorm does to a weight at compile time, so the product is the
 * same). Calls on disjoint blocks may run on different threads at once. */
void kgemm_pack_b_block(kgemm_packed_b *p, int64_t p0, int64_t rows, int64_t j0, int64_t j1, const float *B,
			int64_t rs_b, int64_t cs_b, const double *scale);
/* Once every block is packed: whether the AMX path may take this B
 * (kgemm_pack_b finds that itself; a B from kgemm_packed_b_init is left
 * to the f32 kernels until this is called). */
void kgemm_packed_b_check_range(kgemm_packed_b *p);
/* The panel holding columns [j, j + kgemm_tile_cols()) (j a multiple of
 * it) of a packed B from kgemm_packed_b_init, for a caller that computes
 * B's values straight into place: row p's tile_cols values at p *
 * tile_cols, zero past N. */
float *kgemm_packed_b_panel(kgemm_packed_b *p, int64_t j);

/* Workspace bytes that kgemm_f32 / kgemm_f32_packed need for these sizes
 * with up to nthreads threads. Callers allocate it once (the session arena).
 * nthreads must be at least rt_pool_size() of the pool passed to the call
 * (each pool thread uses its own slice). kgemm_f32 packs all of B into the
 * workspace (K x N rounded up to the panel width); kgemm_f32_packed needs
 * only the per-thread A blocks, which kgemm_packed_workspace_bytes gives
 * (kgemm_workspace_bytes is always enough for both). cs_a is A's column
 * stride as kgemm_f32 will get it: A that is not row-major (cs_a != 1) may
 * be packed whole, once, and the workspace has room for it. */
size_t kgemm_workspace_bytes(int64_t M, int64_t N, int64_t K, int64_t cs_a, int nthreads);
size_t kgemm_packed_workspace_bytes(int64_t M, int64_t N, int64_t K, int nthreads);

/* C = epilogue(A @ B) with B packed. workspace: kgemm_workspace_bytes(...)
 * bytes, best 64-byte aligned. pool may be NULL (one thread). ep may be NULL
 * (the identity). A residual may alias C exactly (same pointer and ld). */
void kgemm_f32_packed(int64_t M, int64_t N, int64_t K, const float *A, int64_t rs_a, int64_t cs_a,
		      const kgemm_packed_b *B, float *C, int64_t ldc, const k_epilogue *ep, rt_pool *pool,
		      void *workspace);

/* The same with only columns [j0, j0 + N) of the packed B (j0 a multiple
 * of kgemm_tile_cols(); bias_n and C are those columns' own). */
void kgemm_f32_packed_cols(int64_t M, int64_t N, int64_t K, const float *A, int64_t rs_a, int64_t cs_a,
			   const kgemm_packed_b *B, int64_t j0, float *C, int64_t ldc, const k_epilogue *ep,
			   rt_pool *pool, void *workspace);

/* C = epilogue(A @ B) with B read where it is (rows ldb apart, contiguous
 * along N) and row-major A: no packing and no workspace. For a 1x1
 * convolution's pixels, which packing would copy once per call. pool may be
 * NULL (one thread). Returns 0, doing nothing, when the kernel has no such
 * path (kgemm_b_in_place_available() says which, once per process). */
int kgemm_b_in_place_available(void);
int kgemm_f32_b_in_place(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb,
			 float *C, int64_t ldc, const k_epilogue *ep, rt_pool *pool);

/* C = epilogue(A @ B) with B packed on the fly (activations x activations).
 * workspace: kgemm_workspace_bytes(M, N, K, cs_a, nthreads) bytes. */
void kgemm_f32(int64_t M, int64_t N, int64_t K, const float *A, int64_t rs_a, int64_t cs_a, const float *B,
	       int64_t rs_b, int64_t cs_b, float *C, int64_t ldc, const k_epilogue *ep, rt_pool *pool,
	       void *workspace);

/* batch independent products; operand i starts at base + i * batch_stride.
 * Threads split across batch and tiles. Epilogue residual/bias apply per
 * matrix (residual advances by batch_stride_c). */
size_t kgemm_batched_workspace_bytes(int64_t batch, int64_t M, int64_t N, int64_t K, int nthreads);
void kgemm_f32_batched(int64_t batch, int64_t M, int64_t N, int64_t K, const float *A, int64_t bs_a,
		       int64_t rs_a, int64_t cs_a, const float *B, int64_t bs_b, int64_t rs_b, int64_t cs_b,
		       float *C, int64_t bs_c, int64_t ldc, const k_epilogue *ep, rt_pool *pool,
		       void *workspace);

/* The naive triple loop with the same epilogue: the oracle for tests. */
void kgemm_f32_reference(int64_t M, int64_t N, int64_t K, const float *A, int64_t rs_a, int64_t cs_a,
			 const float *B, int64_t rs_b, int64_t cs_b, float *C, int64_t ldc,
			 const k_epilogue *ep);

/* Name of the micro-kernel in use ("avx2_6x16", ...), for reports. */
const char *kgemm_kernel_name(void);

/* Rows of the micro-kernel's tile (12 for avx512_12x32): callers that cut
 * M into chunks use multiples of it so that no chunk ends in a thin tile. */
int kgemm_tile_rows(void);

/* Columns of the micro-kernel's tile, the width of a packed B panel (32
 * for avx512_12x32): a chunk of N that is not a multiple of it ends in a
 * panel computed in full for a few columns. */
int kgemm_tile_cols(void);

#endif

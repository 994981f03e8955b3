/* ukernel.h - the GEMM micro-kernel interface, what the drivers (gemm.c and
 * its files, amx.c, and the conv and linear kernels that drive tiles
 * themselves) share with the micro-kernels (ukernel.c, ukernel.avx2.c,
 * ukernel.avx512.c, dot.avx512.c): the micro-kernel signature, the per-tile
 * epilogue and its activations, the packed panel layouts, and the kernel
 * chosen for this CPU (ukernel.c).
 *
 * The B panel is always packed: kc x nr columns, stored k-major
 * (b[p * nr + j]), zero-padded past N; 64-byte aligned when the workspace
 * is, but kernels must not rely on it (a caller's slice may not be). A is read through
 * strides: element (r, p) of the tile's rows is a[r * rs_a + p * cs_a]. The
 * driver passes either A itself (row-major A: rs_a = lda, cs_a = 1; no
 * packing at all) or a packed panel (rs_a = 1, cs_a = mr, zero-padded), and
 * never anything else: kernels may specialize for exactly these two. */
#ifndef AIR_KERNELS_GEMM_UKERNEL_H
#define AIR_KERNELS_GEMM_UKERNEL_H

#include <stdint.h>

#include "kernels/common/epilogue.h"

enum {
	KGEMM_TILE_FIRST = 1, /* first K block: add bias and residual, ignore old C */
	KGEMM_TILE_LAST = 2,  /* last K block: apply the activation */
	/* For kernels whose descriptor sets tile_prefetch, on full tiles: the
	 * packed B panel is read once per call from L2 (a whole K too long
	 * for L1, as in linear_rows), so the kernel prefetches it ahead */
	KGEMM_TILE_STREAM_B = 4,
	/* For kernels whose descriptor sets store_t: C (and the residual) is
	 * the tile's transpose, element (r, j) at c[j * ldc + r]. linear_rows
	 * computes y^T = w x^T and stores it into y as it leaves the registers,
	 * with no y^T buffer and no transpose pass after the GEMM */
	KGEMM_TILE_STORE_T = 8,
};

/* The epilogue of one micro-tile. Pointers are already offset to the tile's
 * origin. A partial product over K blocks is kept in C itself: the first
 * block stores alpha*acc + bias + residual, later blocks add alpha*acc, and
 * the last one applies the activation. Folding the residual in first (not
 * last) is what lets the residual alias C. */
typedef struct kgemm_tile_ep {
	float alpha;
	int flags;
	k_act act;
	const float *bias_n; /* [n] or NULL */
	const float *bias_m; /* [m] or NULL */
	const float *res;    /* [m x n], row stride ld_res, or NULL */
	int64_t ld_res;
	/* For kernels whose descriptor sets tile_prefetch, on full tiles
	 * (m == mr, n > nr / 2) only: pf_lines cache lines from pf on, one
	 * prefetched to L2 every 4 k steps, or every 2 for more than kc / 4
	 * (pf_lines <= kc / 2). Spread out
	 * like this rather than issued in a burst before the tile, prefetches
	 * of a cold weight panel do not queue behind each other for the core's
	 * few line-fill buffers. */
	const char *pf;
	int pf_lines;
	/* For strided kernels whose descriptor sets strided_packs_b: where
	 * to store the kc x nr B panel the tile reads in place, as
	 * kgemm_pack_b lays it out (NULL: nowhere) */
	float *bcopy;
} kgemm_tile_ep;

/* C[m x n] (m <= mr, n <= nr) op= A (m x kc) @ B panel (kc x nr), then
 * the tile epilogue. Rows of A past m are never read. */
typedef void (*kgemm_ukernel_fn)(int64_t kc, const float *a, int64_t rs_a, int64_t cs_a, const float *b,
				 float *c, int64_t ldc, int m, int n, const kgemm_tile_ep *ep);

/* The same tile with B read in place: row p of the tile's columns at
 * b + p * ldb, columns [0, n) only (masked, never past n). For thin
 * products, where packing B would cost as much as using it. */
typedef void (*kgemm_ukernel_strided_fn)(int64_t kc, const float *a, int64_t rs_a, int64_t cs_a,
					 const float *b, int64_t ldb, float *c, int64_t ldc, int m, int n,
					 const kgemm_tile_ep *ep);

/* Thin products against a transposed B read in place: C[m x n] (m <= dot_mr,
 * n <= dot_nr) = A[m x K] (rows at a + r * lda) times Bt[n x K]^T (rows at
 * bt + j * ldbt), both contiguous along K; whole K, so the full epilogue. */
typedef void (*kgemm_dot_fn)(int64_t K, const float *a, int64_t lda, const float *bt, int64_t ldbt, float *c,
			     int64_t ldc, int m, int n, const kgemm_tile_ep *ep);

/* A tile whose K is nseg blocks of kc read from different places of a
 * row-major A: block s of row r at a + s * seg_stride + r * rs_a (B's panel
 * runs on through all of them); the whole K, so the full epilogue. For
 * kernels that read a convolution's taps in place (conv/conv_implicit.c).
 * Optional: without it, callers make one kgemm_ukernel_fn call per block. */
typedef void (*kgemm_ukernel_seg_fn)(int64_t kc, int64_t nseg, int64_t seg_stride, const float *a, int64_t rs_a,
				     const float *b, float *c, int64_t ldc, int m, int n, const kgemm_tile_ep *ep);

/* A (m x k) into panels of the kernel's mr rows, as the driver's generic
 * packing lays them out (pack.c, kgemm_pack_a): row-major A (rows lda
 * apart) for pack_a, column-major A (columns lda apart: a transposed
 * operand, as a weight gradient's x^T) for pack_a_t. */
typedef void (*kgemm_pack_a_fn)(int64_t m, int64_t k, const float *A, int64_t lda, float *dst);

typedef struct kgemm_ukernel_desc {
	const char *name;
	unsigned isa; /* kcpu_features() bits it needs */
	int mr, nr;
	kgemm_ukernel_fn fn;
	int kc, mc, nc; /* cache blocks (elements) tuned for this kernel */
	/* optional thin-product kernels (NULL: pack B as usual) */
	kgemm_ukernel_strided_fn strided;
	kgemm_dot_fn dot;
	int dot_mr, dot_nr;
	kgemm_ukernel_seg_fn seg;
	/* fn issues kgemm_tile_ep.pf itself; otherwise the driver issues
	 * them before the call */
	int tile_prefetch;
	/* strided stores its B panel to kgemm_tile_ep.bcopy */
	int strided_packs_b;
	/* fn honours KGEMM_TILE_STORE_T (on any tile; strided and seg do not) */
	int store_t;
	/* optional fast packing of row-major A; with it, the driver packs A
	 * for tasks wide enough to repay it (gemm.c, kgemm_reads_a_in_place) */
	kgemm_pack_a_fn pack_a;
	/* optional fast packing of column-major A (else one memcpy of mr
	 * floats per k step) */
	kgemm_pack_a_fn pack_a_t;
} kgemm_ukernel_desc;

/* The micro-kernel chosen for this CPU, once per process (ukernel.c): what
 * kgemm_f32 uses, and kernels that drive it themselves (conv/conv_implicit.c). */
const kgemm_ukernel_desc *kgemm_active_ukernel(void);

/* True for the activations computed by vmath (exp, erf, tanh inside): the
 * kernels apply them in a second pass over the tile they just stored, while
 * it is in L1. The others are a min/max or two, applied before the store. */
static inline int kgemm_act_is_transcendental(k_act act)
{
	return act == K_ACT_GELU || act == K_ACT_GELU_TANH || act == K_ACT_SILU ||
	       act == K_ACT_SIGMOID || act == K_ACT_TANH;
}

/* One of the simple activations (relu, relu6, hardswish); x otherwise.
 * Inline: kernels call it per element. */
static inline float kgemm_act_simple_f32(float x, k_act act)
{
	switch (act) {
	case K_ACT_RELU: return x < 0.0f ? 0.0f : x; /* NaN stays NaN, as in torch */
	case K_ACT_RELU6: return x < 0.0f ? 0.0f : (x > 6.0f ? 6.0f : x);
	case K_ACT_HARDSWISH: {
		float t = x + 3.0f;
		t = t > 0.0f ? (t < 6.0f ? t : 6.0f) : 0.0f;
		return x * t * (1.0f / 6.0f);
	}
	default: return x;
	}
}

/* Applies a transcendental act in place to an m x n block (row stride ldc)
 * with vmath's kernels, so a fused activation gives the same values as the
 * standalone elementwise op. */
void kgemm_act_tile(float *c, int64_t ldc, int64_t m, int64_t n, k_act act);

/* y = act(y + res) over n floats (res may be NULL), for kernels that
 * apply the epilogue after the GEMM rather than in it: the same values as
 * the tile epilogue gives. */
void kgemm_epilogue_row(float *y, const float *res, int64_t n, k_act act);

void kgemm_ukernel_4x16__scalar(int64_t kc, const float *a, int64_t rs_a, int64_t cs_a, const float *b,
				float *c, int64_t ldc, int m, int n, const kgemm_tile_ep *ep);
#ifdef AIR_HAVE_X86
void kgemm_ukernel_6x16__avx2(int64_t kc, const float *a, int64_t rs_a, int64_t cs_a, const float *b,
			      float *c, int64_t ldc, int m, int n, const kgemm_tile_ep *ep);
void kgemm_ukernel_6x16_seg__avx2(int64_t kc, int64_t nseg, int64_t seg_stride, const float *a, int64_t rs_a,
				  const float *b, float *c, int64_t ldc, int m, int n, const kgemm_tile_ep *ep);
void kgemm_ukernel_6x16_strided__avx2(int64_t kc, const float *a, int64_t rs_a, int64_t cs_a, const float *b,
				      int64_t ldb, float *c, int64_t ldc, int m, int n, const kgemm_tile_ep *ep);
void kgemm_ukernel_12x32__avx512(int64_t kc, const float *a, int64_t rs_a, int64_t cs_a, const float *b,
				 float *c, int64_t ldc, int m, int n, const kgemm_tile_ep *ep);
void kgemm_ukernel_12x32_seg__avx512(int64_t kc, int64_t nseg, int64_t seg_stride, const float *a, int64_t rs_a,
				     const float *b, float *c, int64_t ldc, int m, int n, const kgemm_tile_ep *ep);
void kgemm_ukernel_12x32_strided__avx512(int64_t kc, const float *a, int64_t rs_a, int64_t cs_a,
					 const float *b, int64_t ldb, float *c, int64_t ldc, int m, int n,
					 const kgemm_tile_ep *ep);
void kgemm_pack_a_12__avx512(int64_t m, int64_t k, const float *A, int64_t lda, float *dst);
void kgemm_pack_a_t_12__avx512(int64_t m, int64_t k, const float *A, int64_t lda, float *dst);
void kgemm_dot_4x4__avx512(int64_t K, const float *a, int64_t lda, const float *bt, int64_t ldbt, float *c,
			   int64_t ldc, int m, int n, const kgemm_tile_ep *ep);
#endif

#endif

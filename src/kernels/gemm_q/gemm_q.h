/* gemm_q.h - products with weight-only quantized weights (int8 or int4, group-wise symmetric
 * scales, llama.cpp's Q8_0/Q4_0 idea): C[M x N] = A[M x K] @ dequant(W)^T + bias, A and C f32.
 *
 * The format of W [N x K] (PyTorch's nn.Linear layout), made once when a model is frozen:
 *   - K is cut into ngroups = ceil(K / group) groups of `group` values (group a multiple of
 *     KQ_BLOCK); the last group is padded with zeros, so each row holds kpad = ngroups * group.
 *   - scales [N x ngroups] f16, w ~= s * q with q = round(w / s), symmetric (no zero point):
 *     int8: s = max|w| / 127, q in [-127, 127]; int4 (ggml's Q4_0): s = p / -8 where p is the
 *     group's value of largest magnitude (s may be negative), q in [-8, 7].
 *   - int8: q [N x kpad] int8, row-major.
 *   - int4: q [N x kpad / 2] bytes; every KQ_BLOCK values of a row are 16 bytes, byte b holding
 *     value b in its low nibble and value b + 16 in its high one, each as q + 8 (0..15). Two
 *     halves of a block then widen with one AND and one shift (ggml's Q4_0 order).
 *
 * Paths, picked once from kcpu_features() (AIR_ISA=scalar|avx2|avx512 forces them):
 *   decode (M <= KQ_THIN_M): each task takes every row of A and a run of W's rows; W is
 *     dequantized in registers, 16 (AVX-512) or 8 (AVX2) values at a time, into f32 FMAs, one
 *     scale multiply per group. Bound by reading W: 1 or 0.5 bytes a weight plus the scales.
 *   prefill (larger M): each task dequantizes a block of KQ_PANEL W rows to f32 in its workspace
 *     slice and runs the f32 GEMM (kernels/gemm/gemm.h) on it, single-threaded; W never exists
 *     dequantized whole.
 * The f32 sums differ from the reference only in order (no activation is quantized). */
#ifndef AIR_KERNELS_GEMM_Q_GEMM_Q_H
#define AIR_KERNELS_GEMM_Q_GEMM_Q_H

#include <stddef.h>
#include <stdint.h>

#include "platform/pool.h"

enum {
	KQ_BLOCK = 32,  /* group sizes are multiples of this */
	KQ_THIN_M = 8,  /* up to this many rows of A: the decode path */
	KQ_PANEL = 64,  /* W rows a prefill task dequantizes at once */
};

typedef struct kq_weight {
	int bits;      /* 8 or 4 */
	int64_t N, K;  /* the weight's logical shape */
	int64_t group; /* values per scale, a multiple of KQ_BLOCK */
	int64_t ngroups;
	const void *q;          /* int8 [N x kpad] or packed int4 [N x kpad / 2] */
	const uint16_t *scales; /* f16 [N x ngroups] */
} kq_weight;

static inline int64_t kq_kpad(const kq_weight *w)
{
	return w->ngroups * w->group;
}

/* Bytes of one row of q. */
static inline int64_t kq_row_bytes(const kq_weight *w)
{
	return w->bits == 8 ? kq_kpad(w) : kq_kpad(w) / 2;
}

/* Quantizes an f32 W [N x K] (row stride ldw) into q and scales (sized as above): what
 * torchair's lowering does in torch (lowering/quant.py), for the C tests. */
void kq_quantize(int bits, int64_t N, int64_t K, int64_t group, const float *W, int64_t ldw, void *q,
		 uint16_t *scales);

/* Row n of dequant(W), kpad values (zeros past K), into dst. */
void kq_dequant_row(const kq_weight *w, int64_t n, float *dst);

/* Workspace bytes kgemm_q needs for M rows with up to nthreads threads. */
size_t kgemm_q_workspace_bytes(const kq_weight *w, int64_t M, int nthreads);

/* C = A @ dequant(W)^T + bias (bias [N] or NULL). lda >= K, ldc >= N. pool may be NULL.
 * workspace: kgemm_q_workspace_bytes bytes, any alignment. */
void kgemm_q(const kq_weight *w, int64_t M, const float *A, int64_t lda, const float *bias, float *C, int64_t ldc,
	     rt_pool *pool, void *workspace);

/* The oracle: dequantized weights, double accumulation. */
void kgemm_q_reference(const kq_weight *w, int64_t M, const float *A, int64_t lda, const float *bias, float *C,
		       int64_t ldc);

/* The decode path's kernel: "avx512", "avx2" or "scalar". */
const char *kgemm_q_kernel_name(void);

/* ---- shared by gemm_q.c and its ISA files ---- */

/* C rows [0, m) (m <= 4) x W rows [n0, n1): C[r][n] = sum over groups of s * (A row r . q),
 * A rows kpad long (zero past K), bias added when not NULL. */
typedef void (*kq_rows_fn)(const kq_weight *w, int m, const float *A, int64_t lda, int64_t n0, int64_t n1,
			   const float *bias, float *C, int64_t ldc);

void kq_rows_scalar(const kq_weight *w, int m, const float *A, int64_t lda, int64_t n0, int64_t n1,
		    const float *bias, float *C, int64_t ldc);
void kq_rows_avx2(const kq_weight *w, int m, const float *A, int64_t lda, int64_t n0, int64_t n1,
		  const float *bias, float *C, int64_t ldc);
void kq_rows_avx512(const kq_weight *w, int m, const float *A, int64_t lda, int64_t n0, int64_t n1,
		    const float *bias, float *C, int64_t ldc);

#endif

/* lowp_w_internal.h - what the 16-bit-weight GEMM's driver (lowp_w.c) and
 * its ISA files (lowp_w.avx2.c, lowp_w.bf16.c, lowp_w_pack.bf16.c) share:
 * the job a block function computes a piece of, the kernel table entry,
 * and the epilogue. */
#ifndef AIR_KERNELS_GEMM_LOWP_W_INTERNAL_H
#define AIR_KERNELS_GEMM_LOWP_W_INTERNAL_H

#include <stdint.h>

#include <stddef.h>

#include "kernels/gemm/lowp_w.h"

/* Rows of the rounded A are padded with zeros to a multiple of this many
 * elements (64 bytes of bf16), so kernels read A whole vectors at a time
 * and only W's last vector of a row needs a mask. */
enum { KLOWP_K_ALIGN = 32 };

typedef struct klowp_job {
	klowp_type wt;
	int64_t M, N, K;
	/* A rounded to wt: row i at a + i * a_ld elements, a_ld a multiple of
	 * KLOWP_K_ALIGN, zero in [K, a_ld). uint16_t bits of wt where the kernel
	 * says a16, else f32 values. */
	const void *a;
	int64_t a_ld;
	const uint16_t *W;
	int64_t ldw;
	float *C;
	int64_t ldc;
	const k_epilogue *ep; /* never NULL */
	/* the plan: tasks are (row block, column block) pairs */
	int64_t mb, nb, nm, nn;
	const struct klowp_kernel *kern;
} klowp_job;

typedef struct klowp_kernel {
	const char *name;
	int a16; /* wants A as 16-bit bits (else f32 values) */
	/* Row of K values of A rounded to wt, written to dst with zeros up to
	 * kpad (a multiple of KLOWP_K_ALIGN). */
	void (*convert_a)(klowp_type wt, int64_t K, const float *a, void *dst, int64_t kpad);
	/* C rows [m0, m1) x columns [n0, n1), epilogue included. */
	void (*block)(const klowp_job *j, int64_t m0, int64_t m1, int64_t n0, int64_t n1);
} klowp_kernel;

/* Where the f32 rows of A come from (lowp_w.h's klowp_rows) and the
 * scratch for rows the source builds: KLOWP_ROWS_AT_ONCE rows of tmp_ld
 * floats per thread, thread t's at tmp + t * KLOWP_ROWS_AT_ONCE * tmp_ld
 * (NULL when the source builds none: a matrix). */
enum { KLOWP_ROWS_AT_ONCE = 16 };
typedef struct klowp_src {
	const klowp_rows *rows;
	float *tmp;
	int64_t tmp_ld;
} klowp_src;

/* Row i of A for thread `thread`'s slot q (< KLOWP_ROWS_AT_ONCE) of scratch. */
static inline const float *klowp_src_row(const klowp_src *s, int64_t i, int thread, int q)
{
	float *tmp = s->tmp ? s->tmp + ((int64_t)thread * KLOWP_ROWS_AT_ONCE + q) * s->tmp_ld : NULL;
	return s->rows->row(s->rows->ctx, i, tmp);
}

/* A kernel's own path for the M x K it takes (prefill; never M < min_m,
 * so workspace is counted from min_m on): it converts A itself (from
 * the source's f32 rows), plans and runs the whole product of j (whose a
 * and plan it ignores). room: 64-byte aligned, workspace(M, K, nthreads)
 * bytes. */
typedef struct klowp_wide {
	int64_t min_m;
	int (*takes)(int64_t M, int64_t K);
	size_t (*workspace)(int64_t M, int64_t K, int nthreads);
	void (*run)(const klowp_job *j, const klowp_src *A, rt_pool *pool, void *room);
} klowp_wide;

/* Stores an m x n tile of finished sums (acc[r * ld + c] for C[m0 + r, n0 + c])
 * through the epilogue. */
void klowp_finish(const klowp_job *j, int64_t m0, int m, int64_t n0, int n, const float *acc, int ld);

/* The scalar rounding the vector conversions must agree with, for their
 * tails: element k of a row, rounded to wt and widened back to f32. */
float klowp_round_a(klowp_type wt, float x);

#if defined(AIR_HAVE_X86)
extern const klowp_kernel klowp_avx2_kernel; /* lowp_w.avx2.c: both types */
#endif
#if defined(AIR_HAVE_AVX512BF16)
extern const klowp_kernel klowp_bf16_dot_kernel; /* lowp_w.bf16.c: bf16 only */
/* lowp_w_pack.bf16.c: the bf16 dot kernel's wide path (W packed per call) */
extern const klowp_wide klowp_bf16_pack_wide;
#endif

#endif

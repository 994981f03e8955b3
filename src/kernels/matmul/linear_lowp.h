/* linear_lowp.h - linear whose weight is bf16 or f16 (a bf16 model's, or an
 * f32 one converted once under mixed_precision), read in place by
 * kernels/gemm/lowp_w.h: listed first for linear in ops/kernels.c. */
#ifndef AIR_KERNELS_MATMUL_LINEAR_LOWP_H
#define AIR_KERNELS_MATMUL_LINEAR_LOWP_H

#include <stdbool.h>

#include "kernels/common/epilogue.h"
#include "kernels/common/kernel.h"
#include "kernels/gemm/lowp_w.h"

extern const k_kernel kfast_linear_lowp_w;

/* A linear call as the low-precision GEMM takes it: C[M x N] = ep(x[M x K]
 * @ w[N x K]^T). Shared by the fast kernel and the reference kernel. */
typedef struct klinear_lowp {
	klowp_type wt;
	int64_t M, N, K;
	k_epilogue ep;
} klinear_lowp;

/* Whether the call is a linear with an f32 x and a bf16/f16 weight. */
bool klinear_is_lowp(const k_call *call);

/* Reads sizes and epilogue from the call; fails on a bias or residual of
 * the wrong size. */
air_status klinear_lowp_get(const k_call *call, klinear_lowp *out);

#endif

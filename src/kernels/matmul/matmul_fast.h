/* matmul_fast.h - the fast kernels of the matrix products (built on the
 * f32 GEMM of gemm.h) and of convolution, as listed in ops/kernels.c. */
#ifndef AIR_KERNELS_MATMUL_MATMUL_FAST_H
#define AIR_KERNELS_MATMUL_MATMUL_FAST_H

#include "kernels/common/kernel.h"

/* matmul_fast.c: a constant weight is packed at compile time (_packed);
 * otherwise B is packed on every call. */
extern const k_kernel kfast_mm_packed, kfast_mm;
extern const k_kernel kfast_addmm_packed, kfast_addmm;
extern const k_kernel kfast_linear_packed, kfast_linear;
extern const k_kernel kfast_bmm;

/* conv_fast.c */
extern const k_kernel kfast_conv2d_depthwise, kfast_conv2d_1x1, kfast_conv2d_im2col;
/* 1x1 on a small map as Y^T = X^T W^T with a packed weight (conv_pointwise_t.c) */
extern const k_kernel kfast_conv2d_1x1_t;

#endif

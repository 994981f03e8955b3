/* rowops_fast.h - the vectorized row kernels (rowops.h: softmax,
 * log-softmax, layer norm, RMS norm over the last dims) and the vectorized
 * f32 math (vmath.h: exp, tanh, gelu, ...) as the fast kernels of their
 * ops, listed in ops/kernels.c. */
#ifndef AIR_KERNELS_NORM_ROWOPS_FAST_H
#define AIR_KERNELS_NORM_ROWOPS_FAST_H

#include "kernels/common/kernel.h"

extern const k_kernel kfast_softmax_rows, kfast_log_softmax_rows;
extern const k_kernel kfast_layer_norm_rows, kfast_rms_norm_rows, kfast_elu_vmath;

/* sin and cos stay with the reference kernels: vmath's range reduction is
 * not checked for huge arguments */
#define KFAST_VMATH_OPS(X) X(exp) X(log) X(tanh) X(erf) X(sigmoid) X(gelu) X(gelu_tanh) X(silu) X(rsqrt)
#define KFAST_VMATH_DECL_(name) extern const k_kernel kfast_##name##_vmath;
KFAST_VMATH_OPS(KFAST_VMATH_DECL_)
#undef KFAST_VMATH_DECL_

#endif

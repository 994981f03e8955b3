/* softmax_backward.h - the gradients of softmax and log_softmax along one
 * axis, from the forward's output y and the gradient g:
 *   softmax:     y * (g - sum(g * y))
 *   log_softmax: g - exp(y) * sum(g)
 * Reference (f32, f64, any axis, sums in double): softmax_backward_ref.c;
 * fast (f32, last axis, AVX2+FMA): softmax_backward.avx2.c. */
#ifndef AIR_KERNELS_NORM_SOFTMAX_BACKWARD_H
#define AIR_KERNELS_NORM_SOFTMAX_BACKWARD_H

#include "kernels/common/kernel.h"

air_status kref_softmax_backward(const k_call *call);
#ifdef AIR_HAVE_X86
extern const k_kernel kfast_softmax_backward_avx2;
#endif

#endif

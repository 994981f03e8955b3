/* layer_norm_backward.h - the gradients of layer_norm over the last dims:
 * the reference kernel (f32, f64; layer_norm_backward_ref.c) and the fast
 * f32 one (layer_norm_backward.c). Inputs grad_out, x, mean, rstd
 * [, weight]; outputs grad_x, grad_weight, grad_bias. */
#ifndef AIR_KERNELS_NORM_LAYER_NORM_BACKWARD_H
#define AIR_KERNELS_NORM_LAYER_NORM_BACKWARD_H

#include "kernels/common/kernel.h"

air_status kref_layer_norm_backward(const k_call *call);
extern const k_kernel kfast_layer_norm_backward_rows;

/* Rows and row length of a layer_norm_backward call, with the concrete
 * sizes checked that shape inference could not (symbolic dims): mean and
 * rstd hold one value a row, the weight the normalized dims' sizes. */
air_status kn_lnb_shape(const k_call *call, int64_t *rows, int64_t *n);

#endif

/* pool_backward.h - max pooling that also gives each output's argmax
 * (max_pool2d_indices) and the gradient that scatters back through it
 * (max_pool2d_backward), NCHW or CHW (pool_backward_ref.c). */
#ifndef AIR_KERNELS_POOL_POOL_BACKWARD_H
#define AIR_KERNELS_POOL_POOL_BACKWARD_H

#include "kernels/common/kernel.h"

air_status kref_max_pool2d_indices(const k_call *call);
air_status kref_max_pool2d_backward(const k_call *call);

#endif

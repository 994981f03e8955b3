/* elementwise_fast.h - standalone relu, clamp, add, sub, mul, div of f32
 * tensors and casts of bytes to f32, split over the pool
 * (elementwise_fast.c); listed in ops/kernels.c. Chains of elementwise ops
 * are fused instead (fused_fast.h). */
#ifndef AIR_KERNELS_ELEMENTWISE_ELEMENTWISE_FAST_H
#define AIR_KERNELS_ELEMENTWISE_ELEMENTWISE_FAST_H

#include "kernels/common/kernel.h"

extern const k_kernel kfast_relu_lanes, kfast_clamp_lanes, kfast_add_lanes, kfast_sub_lanes, kfast_mul_lanes, kfast_div_lanes;
/* bool, u8 and i8 to f32 */
extern const k_kernel kfast_cast_bytes_f32;

#endif

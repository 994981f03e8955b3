/* cast_half.h - casts between f32 and the 16-bit floats (bf16, f16): where
 * a 16-bit model's values enter and leave a compiled graph (inputs, KV
 * caches, outputs), so they run once per call on whole tensors. */
#ifndef AIR_KERNELS_ELEMENTWISE_CAST_HALF_H
#define AIR_KERNELS_ELEMENTWISE_CAST_HALF_H

#include <stdint.h>

#include "kernels/common/kernel.h"

extern const k_kernel kfast_cast_half;

/* n values from f32 to bf16/f16 or back (one side f32), split over the
 * pool: the kernel's own loop, for other kernels that narrow their results
 * (kernels/matmul/linear_lowp.c). */
void kcast_half(rt_pool *pool, air_dtype from, air_dtype to, const void *x, void *y, int64_t n);

/* The F16C loops (cast_half.avx2.c): n values, round to nearest even. */
void kcast_f16_to_f32_f16c(const uint16_t *x, float *y, int64_t n);
void kcast_f32_to_f16_f16c(const float *x, uint16_t *y, int64_t n);

#endif

/* dropout.h - dropout's mask and output from a counter-based generator
 * (Philox-4x32-10, written from its published description): element i of
 * a call keeps with probability 1 - p, decided by one word of the
 * generator's output for counter (8 (i / 32) + i % 8, stream) under key
 * seed, so any split of the elements over threads (at multiples of 32)
 * gives the same mask. Reference: dropout_ref.c (one thread); fast:
 * dropout.c (the pool; AVX2 ranges from dropout.avx2.c). */
#ifndef AIR_KERNELS_ELEMENTWISE_DROPOUT_H
#define AIR_KERNELS_ELEMENTWISE_DROPOUT_H

#include "kernels/common/kernel.h"

air_status kref_dropout(const k_call *call);
extern const k_kernel kfast_dropout;

/* The four 32-bit outputs of Philox-4x32-10 for counter ctr and key. */
void kd_philox(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

/* Writes y and mask for elements [i0, i1) of a dropout call (x and y f32 or
 * f64 by dtype, mask bool as uint8). */
void kd_dropout_range(const k_call *call, int64_t i0, int64_t i1);

/* The key, the keep limit on the 24-bit draw, and 1/(1-p) (0 for p = 1). */
void kd_params(const k_call *call, uint32_t key[2], uint32_t *limit, double *scale);

#ifdef AIR_HAVE_X86
/* kd_dropout_range for f32 with AVX2; i0 a multiple of 32. */
void kd_dropout_range_avx2(const k_call *call, int64_t i0, int64_t i1);
/* dropout_backward's y = g * (mask * scale) over n elements, AVX2 */
void kd_masked_scale_avx2(const float *g, const uint8_t *mask, float *y, int64_t n, float scale);
#endif

/* Whether the call is well formed (dtypes; seed holds one element). */
air_status kd_check(const k_call *call);

#endif

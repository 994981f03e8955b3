/* rope_ref.h - the rotary position embedding that LLaMA-style models apply to
 * q and k, as one op (passes/fuse_rope.c makes it from its written-out
 * form): y = x * cos + rotate_half(x) * sin over the last dim, where
 * rotate_half(x) = cat(-x[h:], x[:h]) for h = half the last dim, and cos,
 * sin broadcast to x's shape with x's last dim. */
#ifndef AIR_KERNELS_ROPE_ROPE_REF_H
#define AIR_KERNELS_ROPE_ROPE_REF_H

#include "kernels/common/kernel.h"

air_status kref_rope(const k_call *call);

/* One row of n (even) floats: y = x * c + rotate_half(x) * s. */
typedef void (*krope_row_fn)(const float *x, const float *c, const float *s, float *y, int64_t n);

/* The op's driver (checks, broadcast, rows across threads) with a row
 * function: kref_rope is it with the portable row, kfast_rope with the
 * ISA's (kernels/rope/rope_fast.c). */
air_status krope_run(const k_call *call, krope_row_fn row);

#ifdef AIR_HAVE_X86
void krope_row__avx2(const float *x, const float *c, const float *s, float *y, int64_t n);
#endif

#endif

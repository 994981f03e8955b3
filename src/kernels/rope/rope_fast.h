/* rope_fast.h - the rope op's fast kernel (rope_fast.c). */
#ifndef AIR_KERNELS_ROPE_ROPE_FAST_H
#define AIR_KERNELS_ROPE_ROPE_FAST_H

#include "kernels/common/kernel.h"

extern const k_kernel kfast_rope;

#endif

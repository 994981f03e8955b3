/* fused_fast.h - the vectorized kernel of fused_elementwise (the program
 * of kernels/ref/fused.h), listed in registry.c. */
#ifndef AIR_KERNELS_FUSED_FAST_H
#define AIR_KERNELS_FUSED_FAST_H

#include "kernels/kernel.h"

extern const k_kernel kfast_fused_elementwise;

#endif

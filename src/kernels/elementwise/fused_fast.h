/* fused_fast.h - the vectorized kernel of fused_elementwise (the program
 * of kernels/elementwise/fused_ref.h), listed in ops/kernels.c. */
#ifndef AIR_KERNELS_ELEMENTWISE_FUSED_FAST_H
#define AIR_KERNELS_ELEMENTWISE_FUSED_FAST_H

#include "kernels/common/kernel.h"

extern const k_kernel kfast_fused_elementwise;

#endif

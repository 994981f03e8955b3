/* reduce_fast.h - f32 sums over leading dims, split over the pool
 * (reduce_fast.c); listed in ops/kernels.c. */
#ifndef AIR_KERNELS_REDUCE_REDUCE_FAST_H
#define AIR_KERNELS_REDUCE_REDUCE_FAST_H

#include "kernels/common/kernel.h"

extern const k_kernel kfast_sum_columns;

#endif

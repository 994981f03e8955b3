/* sqrt_where_fast.h - threaded f32 sqrt and where (sqrt_where_fast.c),
 * listed in ops/kernels.c. */
#ifndef AIR_KERNELS_ELEMENTWISE_SQRT_WHERE_FAST_H
#define AIR_KERNELS_ELEMENTWISE_SQRT_WHERE_FAST_H

#include "kernels/common/kernel.h"

extern const k_kernel kfast_sqrt_lanes, kfast_where_lanes;

#endif

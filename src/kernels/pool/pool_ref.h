/* pool_ref.h - reference kernels of 2-D pooling over NCHW (pool_ref.c); the
 * NHWC ones are kernels/conv/conv_nhwc_ref.h's. */
#ifndef AIR_KERNELS_POOL_POOL_REF_H
#define AIR_KERNELS_POOL_POOL_REF_H

#include "kernels/common/kernel.h"

air_status kref_max_pool2d(const k_call *call);
air_status kref_avg_pool2d(const k_call *call);
air_status kref_adaptive_avg_pool2d(const k_call *call);

#endif

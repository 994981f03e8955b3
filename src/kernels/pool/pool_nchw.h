/* pool_nchw.h - fast pooling over NCHW f32 maps (pool_nchw.c); the NHWC
 * pools the layout pass makes are in conv_nhwc.c. */
#ifndef AIR_KERNELS_POOL_POOL_NCHW_H
#define AIR_KERNELS_POOL_POOL_NCHW_H

#include "kernels/common/kernel.h"

/* max_pool2d: the same values, bit for bit, as kref_max_pool2d. */
extern const k_kernel kfast_max_pool2d_rows;

#endif

/* conv_patches.h - conv2d with stride == kernel (a patch embedding) as a
 * gather of patches and one GEMM (conv_patches.c). */
#ifndef AIR_KERNELS_CONV_CONV_PATCHES_H
#define AIR_KERNELS_CONV_CONV_PATCHES_H

#include "kernels/common/kernel.h"

extern const k_kernel kfast_conv2d_patches;

#endif

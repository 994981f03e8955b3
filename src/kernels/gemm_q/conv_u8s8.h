/* conv_u8s8.h - the kernels of libair's conv2d_u8s8 op (ops/conv_u8s8.c): PT2E's static int8
 * 2-D convolution (one group), NCHW: the reference (direct loops, the oracle) and the fast one
 * (u8 im2col rows, gemm_u8s8.h's product, its output [pixels x O] transposed into NCHW). */
#ifndef AIR_KERNELS_GEMM_Q_CONV_U8S8_H
#define AIR_KERNELS_GEMM_Q_CONV_U8S8_H

#include "kernels/common/kernel.h"

/* conv2d_u8s8's attributes, in schema order */
enum {
	KCU8_ATTR_STRIDE = 0,
	KCU8_ATTR_PADDING,
	KCU8_ATTR_DILATION,
	KCU8_ATTR_X_SCALE,
	KCU8_ATTR_X_ZP,
	KCU8_ATTR_RELU,
	KCU8_ATTR_OUT_U8,
	KCU8_ATTR_OUT_INV_SCALE,
	KCU8_ATTR_OUT_ZP,
	KCU8_ATTR_HAS_BIAS,
	KCU8_NATTRS
};

air_status kref_conv2d_u8s8(const k_call *call);

extern const k_kernel kfast_conv2d_u8s8;

#endif

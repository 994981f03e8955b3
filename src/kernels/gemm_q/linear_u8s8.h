/* linear_u8s8.h - the kernels of libair's linear_u8s8 op (ops/linear_u8s8.c): PT2E's static int8
 * linear on gemm_u8s8.h: the reference (the oracle) and the packed fast one. */
#ifndef AIR_KERNELS_GEMM_Q_LINEAR_U8S8_H
#define AIR_KERNELS_GEMM_Q_LINEAR_U8S8_H

#include "kernels/common/kernel.h"

/* linear_u8s8's attributes, in schema order */
enum {
	KLU8_ATTR_X_SCALE = 0,
	KLU8_ATTR_X_ZP,
	KLU8_ATTR_RELU,
	KLU8_ATTR_OUT_U8,
	KLU8_ATTR_OUT_INV_SCALE,
	KLU8_ATTR_OUT_ZP,
	KLU8_ATTR_HAS_BIAS,
	KLU8_NATTRS
};

air_status kref_linear_u8s8(const k_call *call);

extern const k_kernel kfast_linear_u8s8;

#endif

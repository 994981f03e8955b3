/* fused_ref.h - the tile interpreter behind fused elementwise groups: a short
 * program of unary and tensor-scalar instructions run over cache-sized tiles,
 * so a chain of N elementwise ops crosses memory once instead of N times. */
#ifndef AIR_KERNELS_ELEMENTWISE_FUSED_REF_H
#define AIR_KERNELS_ELEMENTWISE_FUSED_REF_H

#include "kernels/common/kernel.h"

/* Instruction opcodes; a program is pairs (opcode, operand) where operand is
 * the bit pattern of an f32 scalar (unused by unary instructions). */
typedef enum kf_opcode {
	KF_NEG, KF_ABS, KF_EXP, KF_LOG, KF_SQRT, KF_RSQRT, KF_SIN, KF_COS, KF_TANH, KF_SIGMOID,
	KF_ERF, KF_RELU, KF_GELU, KF_GELU_TANH, KF_SILU, KF_HARDSWISH, KF_HARDSIGMOID, KF_RECIPROCAL,
	KF_ADD_S,  /* x + c */
	KF_SUB_S,  /* x - c */
	KF_RSUB_S, /* c - x */
	KF_MUL_S,  /* x * c */
	KF_DIV_S,  /* x / c */
	KF_RDIV_S, /* c / x */
	KF_MAX_S,  /* maximum(x, c) */
	KF_MIN_S,  /* minimum(x, c) */
	KF_POW_S,  /* x ** c */
	KF_RPOW_S, /* c ** x */
	KF_OPCODE_COUNT
} kf_opcode;

air_status kref_fused_elementwise(const k_call *call);

#endif

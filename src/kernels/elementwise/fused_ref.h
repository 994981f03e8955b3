/* fused_ref.h - the tile interpreter behind fused elementwise groups: a short
 * program of unary and tensor-scalar instructions run over cache-sized tiles,
 * so a chain of N elementwise ops crosses memory once instead of N times. */
#ifndef AIR_KERNELS_ELEMENTWISE_FUSED_REF_H
#define AIR_KERNELS_ELEMENTWISE_FUSED_REF_H

#include <stdint.h>
#include <string.h>

#include "kernels/common/kernel.h"
#include "kernels/vmath/vmath.h"

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

/* Helpers every fused-program interpreter shares (fused_elementwise's tile
 * kernels and fused_dag's). */

/* The f32 whose bit pattern is the low 32 bits of an operand. */
static inline float kf_f32_operand(int64_t bits)
{
	uint32_t u = (uint32_t)bits;
	float f;
	memcpy(&f, &u, 4);
	return f;
}

static inline float kf_relu6(float x)
{
	return x < 0.0f ? 0.0f : (x > 6.0f ? 6.0f : x);
}

/* The vmath kernel of a transcendental opcode (what the unfused op runs),
 * or -1. */
static inline int kf_vmath_kernel(int op)
{
	switch (op) {
	case KF_EXP: return KV_exp;
	case KF_LOG: return KV_log;
	case KF_RSQRT: return KV_rsqrt;
	case KF_TANH: return KV_tanh;
	case KF_SIGMOID: return KV_sigmoid;
	case KF_ERF: return KV_erf;
	case KF_GELU: return KV_gelu;
	case KF_GELU_TANH: return KV_gelu_tanh;
	case KF_SILU: return KV_silu;
	default: return -1;
	}
}

#endif

/* fused_scalar.h - small helpers every fused-program interpreter shares
 * (fused_elementwise's tile kernels and fused_dag's): the f32 held in an
 * instruction's int64 operand, relu6, and which vmath kernel a
 * transcendental opcode runs so fused and unfused ops round alike. */
#ifndef AIR_KERNELS_ELEMENTWISE_FUSED_SCALAR_H
#define AIR_KERNELS_ELEMENTWISE_FUSED_SCALAR_H

#include <stdint.h>
#include <string.h>

#include "kernels/elementwise/fused_ref.h"
#include "kernels/vmath/vmath.h"

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

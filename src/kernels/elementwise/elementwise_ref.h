/* elementwise_ref.h - reference kernels of the elementwise ops (one per op):
 * unary ops (unary_ref.c), binary ops with broadcasting and where
 * (binary_ref.c), cast between all dtypes (cast_ref.c). Loops are generated
 * per (op, dtype) by macros so each inner loop is a plain typed loop the
 * compiler vectorizes (CMakeLists.txt gives these files the flags for it).
 * These are the oracle: written for clarity and exact PyTorch semantics
 * first, speed second. */
#ifndef AIR_KERNELS_ELEMENTWISE_ELEMENTWISE_REF_H
#define AIR_KERNELS_ELEMENTWISE_ELEMENTWISE_REF_H

#include "kernels/common/kernel.h"

#define KREF_ELEMENTWISE(X)                                                                  \
	X(neg) X(abs) X(exp) X(log) X(log1p) X(expm1) X(sqrt) X(rsqrt) X(sin) X(cos) X(tanh)   \
	X(sigmoid) X(erf) X(relu) X(gelu) X(gelu_tanh) X(silu) X(hardswish) X(hardsigmoid)     \
	X(reciprocal) X(floor) X(ceil) X(round) X(trunc) X(sign) X(logical_not) X(bitwise_not) \
	X(isnan) X(clamp) X(leaky_relu) X(elu) X(add) X(sub) X(mul) X(div) X(floor_divide)            \
	X(remainder) X(fmod) X(pow) X(maximum) X(minimum) X(eq) X(ne) X(lt) X(le) X(gt) X(ge)          \
	X(logical_and) X(logical_or) X(logical_xor) X(bitwise_and) X(bitwise_or) X(bitwise_xor) \
	X(where) X(cast)

#define X(name) air_status kref_##name(const k_call *call);
KREF_ELEMENTWISE(X)
#undef X

#endif

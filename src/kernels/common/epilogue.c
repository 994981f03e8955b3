/* epilogue.c - the fused activations and the residual check in their
 * reference form: the oracle's epilogue, shared by every family's reference
 * kernels (products, convolutions) and by the GEMM's own reference. */
#include "kernels/common/epilogue.h"

#include <math.h>

#include "core/error.h"

/* As kernels/elementwise/unary_ref.c computes them: NaN stays NaN through relu
 * and clamp (comparisons with NaN are false). */
#define ACT_LOOP(T, EXP, ERF, TANH)                                                                       \
	switch (act) {                                                                                    \
	case K_ACT_NONE: break;                                                                           \
	case K_ACT_RELU:                                                                                  \
		for (int64_t i = 0; i < n; i++)                                                           \
			y[i] = y[i] < (T)0 ? (T)0 : y[i];                                                 \
		break;                                                                                    \
	case K_ACT_RELU6:                                                                                 \
		for (int64_t i = 0; i < n; i++)                                                           \
			y[i] = y[i] != y[i] ? y[i] : y[i] < (T)0 ? (T)0 : y[i] > (T)6 ? (T)6 : y[i];      \
		break;                                                                                    \
	case K_ACT_GELU:                                                                                  \
		for (int64_t i = 0; i < n; i++)                                                           \
			y[i] = (T)0.5 * y[i] * ((T)1 + ERF(y[i] * (T)0.70710678118654752));              \
		break;                                                                                    \
	case K_ACT_GELU_TANH:                                                                             \
		for (int64_t i = 0; i < n; i++) {                                                         \
			T x = y[i];                                                                       \
			y[i] = (T)0.5 * x * ((T)1 + TANH((T)0.7978845608028654 * (x + (T)0.044715 * x * x * x))); \
		}                                                                                         \
		break;                                                                                    \
	case K_ACT_SILU:                                                                                  \
		for (int64_t i = 0; i < n; i++)                                                           \
			y[i] = y[i] * ((T)1 / ((T)1 + EXP(-y[i])));                                       \
		break;                                                                                    \
	case K_ACT_SIGMOID:                                                                               \
		for (int64_t i = 0; i < n; i++)                                                           \
			y[i] = (T)1 / ((T)1 + EXP(-y[i]));                                                \
		break;                                                                                    \
	case K_ACT_TANH:                                                                                  \
		for (int64_t i = 0; i < n; i++)                                                           \
			y[i] = TANH(y[i]);                                                                \
		break;                                                                                    \
	case K_ACT_HARDSWISH:                                                                             \
		for (int64_t i = 0; i < n; i++) {                                                         \
			T x = y[i], t = x + (T)3;                                                         \
			t = t < (T)0 ? (T)0 : (t > (T)6 ? (T)6 : t);                                      \
			y[i] = x * t / (T)6;                                                              \
		}                                                                                         \
		break;                                                                                    \
	}

void kref_act_f32(float *y, int64_t n, k_act act)
{
	ACT_LOOP(float, expf, erff, tanhf)
}

void kref_act_f64(double *y, int64_t n, k_act act)
{
	ACT_LOOP(double, exp, erf, tanh)
}

air_status kref_check_residual(const char *op, const k_tensor *res, const k_tensor *out)
{
	int same = res->rank == out->rank;
	for (int d = 0; d < out->rank && same; d++)
		same = res->dims[d] == out->dims[d];
	if (!same)
		return air_error(AIR_SHAPE_MISMATCH, "%s: the residual's shape is not the output's", op);
	return AIR_OK;
}

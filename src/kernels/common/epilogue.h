/* epilogue.h - what a GEMM or convolution does to its tile while it is still
 * in registers: C = act(alpha * (A @ B) + bias + residual). */
#ifndef AIR_KERNELS_COMMON_EPILOGUE_H
#define AIR_KERNELS_COMMON_EPILOGUE_H

#include <stdint.h>

#include "kernels/common/kernel.h"

typedef enum k_act {
	K_ACT_NONE = 0,
	K_ACT_RELU,
	K_ACT_RELU6,     /* clamp(x, 0, 6) */
	K_ACT_GELU,      /* x * 0.5 * (1 + erf(x / sqrt 2)) */
	K_ACT_GELU_TANH, /* the tanh approximation */
	K_ACT_SILU,      /* x * sigmoid(x) */
	K_ACT_SIGMOID,
	K_ACT_TANH,
	K_ACT_HARDSWISH, /* x * relu6(x + 3) / 6 */
} k_act;

typedef struct k_epilogue {
	float alpha;             /* scales A @ B; 1 for a plain product */
	const float *bias_n;     /* [N], added to every row, or NULL */
	const float *bias_m;     /* [M], added to every column, or NULL */
	const float *residual;   /* [M x N] with row stride ld_residual, or NULL;
				  * may alias C (then read before written) */
	int64_t ld_residual;
	k_act act;               /* applied last */
	/* Not the epilogue proper: the packed B panels the caller multiplies
	 * by next (or NULL), whose first next_b_bytes the product's last task
	 * prefetches as it ends, as it prefetches its own later panels. For
	 * chains of small products on cold weights (Winograd's 16 GEMMs). */
	const float *next_b;
	int64_t next_b_bytes;
} k_epilogue;

/* The identity epilogue (alpha 1, nothing else). */
static inline k_epilogue k_epilogue_none(void)
{
	k_epilogue e = {1.0f, 0, 0, 0, 0, K_ACT_NONE, 0, 0};
	return e;
}

/* Applies a fused activation (conv2d's and linear's act) to y[0..n) in
 * place with the same formulas as the standalone elementwise reference
 * kernels (relu6 as clamp(0, 6)), so fused and unfused references agree. */
void kref_act_f32(float *y, int64_t n, k_act act);
void kref_act_f64(double *y, int64_t n, k_act act);

/* A fused residual must have exactly the output's (concrete) dims; shape
 * inference could only check the symbolic ones loosely. */
air_status kref_check_residual(const char *op, const k_tensor *res, const k_tensor *out);

#endif

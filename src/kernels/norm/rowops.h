/* rowops.h - f32 kernels that reduce and rewrite each row of a [rows x n]
 * row-major array: softmax, log-softmax, layer norm and RMS norm over the
 * last dimension. Sums are carried in double (float partial sums over short
 * blocks), so results stay within a few ulp of a double-precision reference
 * for any n. Rows are split across pool's threads when rows * n exceeds
 * KR_PARALLEL_MIN; pool NULL runs on the calling thread. The kernel set
 * (AVX2+FMA or portable C) is chosen once from kcpu_features().
 * y may be x itself (in place); no other overlap is allowed. rows or n <= 0
 * does nothing (but layer norm with n == 0 writes mean 0 and rstd NaN, like
 * aten::native_layer_norm). */
#ifndef AIR_KERNELS_NORM_ROWOPS_H
#define AIR_KERNELS_NORM_ROWOPS_H

#include <stdint.h>

#include "platform/pool.h"

/* Elements (rows * n) above which a call fans out over the pool. */
#define KR_PARALLEL_MIN 32768

/* y = exp(x - max) / sum(exp(x - max)) per row. Like PyTorch: a row of all
 * -inf (fully masked), or holding NaN or +inf, comes out all NaN. */
void kr_softmax_f32(const float *x, float *y, int64_t rows, int64_t n, rt_pool *pool);

/* y = x - max - log(sum(exp(x - max))) per row; the same NaN rows as softmax,
 * and -inf where x is -inf in an otherwise finite row. */
void kr_log_softmax_f32(const float *x, float *y, int64_t rows, int64_t n, rt_pool *pool);

/* y = (x - mean) * rstd * gamma + beta per row, rstd = 1/sqrt(var + eps),
 * var the biased variance (as torch.nn.functional.layer_norm). gamma and
 * beta ([n]) may be NULL (1 and 0). mean_out and rstd_out ([rows]) may be
 * NULL; they receive what aten::native_layer_norm returns for the backward. */
void kr_layernorm_f32(const float *x, const float *gamma, const float *beta, float *y, int64_t rows,
		      int64_t n, double eps, float *mean_out, float *rstd_out, rt_pool *pool);

/* y = x / sqrt(mean(x^2) + eps) * gamma per row; gamma ([n]) may be NULL. */
void kr_rmsnorm_f32(const float *x, const float *gamma, float *y, int64_t rows, int64_t n, double eps,
		    rt_pool *pool);

/* "avx2" or "scalar": the kernel set in use. */
const char *kr_isa_name(void);

#endif

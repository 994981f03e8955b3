/* quantize.h - libair's quantize op (ops/quantize.c): PT2E's quantize_per_tensor, f32 -> u8 or
 * s8 as torch computes it: q = clamp(nearbyint(x * inv_scale) + zp, qmin, qmax), inv_scale the
 * f32 rounding of 1 / scale, round half to even. One pass, AVX-512 / AVX2 / portable, every path
 * bit-identical (the same f32 product, rounding and clamp). */
#ifndef AIR_KERNELS_GEMM_Q_QUANTIZE_H
#define AIR_KERNELS_GEMM_Q_QUANTIZE_H

#include <stdint.h>

#include "kernels/common/kernel.h"

/* quantize's attributes, in schema order */
enum { KQZ_ATTR_INV_SCALE = 0, KQZ_ATTR_ZP, KQZ_ATTR_QMIN, KQZ_ATTR_QMAX, KQZ_ATTR_DTYPE, KQZ_NATTRS };

typedef struct kqz_params {
	float inv, zp, qmin, qmax;
	int is_signed; /* s8 out, else u8 */
} kqz_params;

/* n values of x into q (u8 or s8 by p->is_signed); the scalar one is the reference */
void kqz_run_scalar(const kqz_params *p, const float *x, void *q, int64_t n);
void kqz_run_avx2(const kqz_params *p, const float *x, void *q, int64_t n);
void kqz_run_avx512(const kqz_params *p, const float *x, void *q, int64_t n);

/* the kernel kfast_quantize runs: "avx512", "avx2" or "scalar" */
const char *kqz_kernel_name(void);

air_status kref_quantize(const k_call *call);
extern const k_kernel kfast_quantize;

#endif

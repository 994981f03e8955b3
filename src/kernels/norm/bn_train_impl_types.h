/* bn_train_impl_types.h - the table of vector loops each ISA's build of
 * bn_train_impl.h fills (see there for what each loop does). */
#ifndef AIR_KERNELS_NORM_BN_TRAIN_IMPL_TYPES_H
#define AIR_KERNELS_NORM_BN_TRAIN_IMPL_TYPES_H

#include <stdint.h>

typedef struct kbn_impl {
	void (*stats)(const float *x, int64_t n, float k, double *s1, double *s2);
	void (*apply)(const float *x, float *y, int64_t n, float a, float b, int relu);
	void (*bwd_sums)(const float *dy, const float *x, int64_t n, float m, double *sdy, double *dot);
	void (*bwd_dx)(const float *dy, const float *x, float *dx, int64_t n, float m, float gm, float k, float s);
	void (*bwd_sums_masked)(const float *g, const float *r, float t, const float *x, int64_t n, float m,
				double *sdy, double *dot);
	void (*bwd_dx_masked)(const float *g, const float *r, float t, const float *x, float *dx, int64_t n, float m,
			      float gm, float k, float s);
	void (*threshold_bwd)(const float *g, const float *x, float *out, int64_t n, float t);
} kbn_impl;

extern const kbn_impl kbn_impl_scalar, kbn_impl_avx2, kbn_impl_avx512;

#endif

/* rowops_impl.h - the per-ISA row kernels behind rowops.h, each over a range
 * of whole rows on the calling thread; rowops.c splits rows across threads
 * and picks the ISA. Declared here for tests and benchmarks. */
#ifndef AIR_KERNELS_NORM_ROWOPS_IMPL_H
#define AIR_KERNELS_NORM_ROWOPS_IMPL_H

#include <stdint.h>

typedef struct kr_rows_impl {
	void (*softmax)(const float *x, float *y, int64_t rows, int64_t n);
	void (*log_softmax)(const float *x, float *y, int64_t rows, int64_t n);
	void (*layernorm)(const float *x, const float *gamma, const float *beta, float *y, int64_t rows,
			  int64_t n, double eps, float *mean_out, float *rstd_out);
	void (*rmsnorm)(const float *x, const float *gamma, float *y, int64_t rows, int64_t n, double eps);
} kr_rows_impl;

extern const kr_rows_impl kr_rows_scalar;
#ifdef AIR_HAVE_X86
extern const kr_rows_impl kr_rows_avx2;
#endif

/* The kernels of one ISA ("scalar", "avx2"), or NULL if not built. Only
 * call "avx2" when kcpu_features() has KCPU_AVX2. */
const kr_rows_impl *kr_rows_isa(const char *isa);

#endif

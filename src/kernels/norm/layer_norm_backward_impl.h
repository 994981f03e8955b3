/* layer_norm_backward_impl.h - the per-ISA pieces of the fast f32
 * layer_norm_backward (layer_norm_backward.c splits the work and picks the
 * ISA): one row's grad_x, and one block of columns' grad_weight and
 * grad_bias over all rows. Declared here for the tests. */
#ifndef AIR_KERNELS_NORM_LAYER_NORM_BACKWARD_IMPL_H
#define AIR_KERNELS_NORM_LAYER_NORM_BACKWARD_IMPL_H

#include <stdint.h>

/* Columns per column task: a block's accumulators stay in registers. */
enum { KN_LNB_COLS = 32 };

typedef struct kn_lnb_impl {
	/* gx[i] = rs * (g[i]w[i] - mean(gw) - xhat[i] * mean(gw * xhat)), w NULL: 1 */
	void (*row)(const float *g, const float *x, const float *w, float mu, float rs, float *gx, int64_t n);
	/* gw[j] = sum_r g[r][j] * xhat[r][j], gb[j] = sum_r g[r][j] for j in
	 * [j0, j1), j1 - j0 <= KN_LNB_COLS; g and x are [rows x n] */
	void (*cols)(const float *g, const float *x, const float *mean, const float *rstd, int64_t rows, int64_t n,
		     int64_t j0, int64_t j1, float *gw, float *gb);
} kn_lnb_impl;

extern const kn_lnb_impl kn_lnb_scalar;
#ifdef AIR_HAVE_X86
extern const kn_lnb_impl kn_lnb_avx2;
#endif

/* Rows a float partial sum runs over before it is added into a double. */
enum { KN_LNB_FLUSH = 64 };

#endif

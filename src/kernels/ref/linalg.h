/* linalg.h - reference kernels of the matrix products and attention (mm,
 * bmm, addmm, linear, sdpa), and the helpers that the fast kernels share
 * with them for reading optional inputs. */
#ifndef AIR_KERNELS_REF_LINALG_H
#define AIR_KERNELS_REF_LINALG_H

#include "kernels/epilogue.h"
#include "kernels/kernel.h"

air_status kref_mm(const k_call *call);
air_status kref_bmm(const k_call *call);
air_status kref_addmm(const k_call *call);
air_status kref_linear(const k_call *call);
air_status kref_sdpa(const k_call *call);
size_t kref_sdpa_workspace(const k_call *call, int nthreads);

/* sdpa's operands with concrete sizes: q [..., L, E] has `batch` rows of
 * L queries over its nlead leading dims; k and v reach their rows for q's
 * leading index i through strides and GQA divisors (index i[d] / div[d]
 * times st[d]); the mask through strides over [..., L, S] (0 where it
 * broadcasts). */
typedef struct ksdpa_geom {
	int nlead;
	int64_t lead[AIR_MAX_RANK], batch;
	int64_t k_st[AIR_MAX_RANK], k_div[AIR_MAX_RANK];
	int64_t v_st[AIR_MAX_RANK], v_div[AIR_MAX_RANK];
	int64_t m_st[AIR_MAX_RANK];
	int64_t L, S, E, Ev;
	double scale;
	int causal, has_mask, mask_bool;
} ksdpa_geom;

/* Reads and checks the geometry of an sdpa call. */
air_status ksdpa_geom_make(const k_call *call, ksdpa_geom *g);

/* Element offsets of k, v and the mask (at query 0, key 0) for q's
 * flattened leading index b. */
static inline void ksdpa_offsets(const ksdpa_geom *g, int64_t b, int64_t *koff, int64_t *voff, int64_t *moff)
{
	int64_t k = 0, v = 0, m = 0;
	for (int d = g->nlead - 1; d >= 0; d--) {
		int64_t idx = b % g->lead[d];
		b /= g->lead[d];
		k += idx / g->k_div[d] * g->k_st[d];
		v += idx / g->v_div[d] * g->v_st[d];
		m += idx * g->m_st[d];
	}
	*koff = k;
	*voff = v;
	*moff = m;
}

/* Applies a fused activation (conv2d's and linear's act) to y[0..n) in
 * place with the same formulas as the standalone elementwise reference
 * kernels (relu6 as clamp(0, 6)), so fused and unfused references agree. */
void kref_act_f32(float *y, int64_t n, k_act act);
void kref_act_f64(double *y, int64_t n, k_act act);

/* A fused residual must have exactly the output's (concrete) dims; shape
 * inference could only check the symbolic ones loosely. */
air_status kref_check_residual(const char *op, const k_tensor *res, const k_tensor *out);

/* Whether an optional input is there. Its has_<x> attribute is -1 by
 * default, meaning "decided by the number of inputs" (more than n_without
 * inputs: present); 0 or 1 say so explicitly and shape inference checks
 * that they agree with the count. */
static inline int kref_present(int64_t attr, int n_in, int n_without)
{
	return attr < 0 ? n_in > n_without : attr != 0;
}

#endif

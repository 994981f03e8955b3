/* attention_ref.h - the reference kernel of scaled-dot-product attention,
 * and sdpa's geometry (views, strides, GQA heads) that the fused kernel
 * shares with it. */
#ifndef AIR_KERNELS_ATTENTION_ATTENTION_REF_H
#define AIR_KERNELS_ATTENTION_ATTENTION_REF_H

#include "kernels/common/kernel.h"

air_status kref_sdpa(const k_call *call);
size_t kref_sdpa_workspace(const k_call *call, int nthreads);

/* An sdpa operand read in place from a larger tensor (the q_view, k_view
 * and v_view attributes, set by passes/attention_views.c): the rank-4
 * operand [B, H, L, E] whose element [b, h, l, e] is the input's element
 * offset + b st[0] + h st[1] + l st[2] + e. So q, k and v can be the heads
 * of a projection's output as it stands, with no permute or slice copying
 * them out first. */
enum { KSDPA_VIEW_INTS = 8 }; /* offset, B, H, L, E, st[0], st[1], st[2] */
/* sdpa's attributes, in its schema's order (ops/linalg.c) */
enum {
	KSDPA_ATTR_SCALE,
	KSDPA_ATTR_CAUSAL,
	KSDPA_ATTR_HAS_MASK,
	KSDPA_ATTR_EMPTY_NAN,
	KSDPA_ATTR_Q_VIEW, /* then k_view, v_view */
	KSDPA_ATTR_OUT_BSHD = KSDPA_ATTR_Q_VIEW + 3,
	KSDPA_NATTRS,
};
typedef struct ksdpa_view {
	int64_t offset, dims[4], st[3];
} ksdpa_view;

/* Reads a view attribute of n ints; fails unless n is KSDPA_VIEW_INTS,
 * every entry is >= 0 and the view lies inside the input's numel
 * elements. */
air_status ksdpa_view_read(const int64_t *ints, int n, int64_t numel, ksdpa_view *v);

/* sdpa's operands with concrete sizes: q [..., L, E] has `batch` rows of
 * L queries over its nlead leading dims. For q's leading index i, q, k, v
 * and the output start at element sum over d of (i[d] / div[d]) * st[d]
 * (+ their view's offset), div 1 but for k and v's GQA heads, and their
 * rows are rs elements apart (E, or Ev, when dense); the mask is reached
 * through strides over [..., L, S] (0 where it broadcasts). */
typedef struct ksdpa_geom {
	int nlead;
	int64_t lead[AIR_MAX_RANK], batch;
	int64_t q_st[AIR_MAX_RANK], o_st[AIR_MAX_RANK];
	int64_t k_st[AIR_MAX_RANK], k_div[AIR_MAX_RANK];
	int64_t v_st[AIR_MAX_RANK], v_div[AIR_MAX_RANK];
	int64_t m_st[AIR_MAX_RANK];
	int64_t q0, k0, v0;         /* the views' offsets (0 when dense) */
	int64_t q_rs, k_rs, v_rs, o_rs; /* row strides */
	int64_t L, S, E, Ev;
	double scale;
	int causal, has_mask, mask_bool;
} ksdpa_geom;

/* Reads and checks the geometry of an sdpa call. */
air_status ksdpa_geom_make(const k_call *call, ksdpa_geom *g);

/* Element offsets of q, k, v, the output and the mask (at query 0, key 0)
 * for q's flattened leading index b. */
typedef struct ksdpa_at {
	int64_t q, k, v, o, m;
} ksdpa_at;

static inline ksdpa_at ksdpa_offsets(const ksdpa_geom *g, int64_t b)
{
	ksdpa_at at = {g->q0, g->k0, g->v0, 0, 0};
	for (int d = g->nlead - 1; d >= 0; d--) {
		int64_t idx = b % g->lead[d];
		b /= g->lead[d];
		at.q += idx * g->q_st[d];
		at.o += idx * g->o_st[d];
		at.k += idx / g->k_div[d] * g->k_st[d];
		at.v += idx / g->v_div[d] * g->v_st[d];
		at.m += idx * g->m_st[d];
	}
	return at;
}

#endif

/* attention_bwd_ref.h - the reference kernel of sdpa_backward (the
 * gradient of scaled-dot-product attention from the forward's output and
 * log-sum-exp), and the geometry its fast kernel shares with it. */
#ifndef AIR_KERNELS_ATTENTION_ATTENTION_BWD_REF_H
#define AIR_KERNELS_ATTENTION_ATTENTION_BWD_REF_H

#include "kernels/attention/attention_ref.h"
#include "kernels/common/kernel.h"

/* sdpa_backward's inputs and attributes, in its schema's order
 * (ops/attention_backward.c); outputs grad_q, grad_k, grad_v */
enum { KSDPB_GRAD_OUT, KSDPB_Q, KSDPB_K, KSDPB_V, KSDPB_OUT, KSDPB_LSE, KSDPB_MASK };
enum { KSDPB_ATTR_SCALE, KSDPB_ATTR_CAUSAL, KSDPB_ATTR_HAS_MASK, KSDPB_ATTR_DROPOUT, KSDPB_NATTRS };

air_status kref_sdpa_backward(const k_call *call);
size_t kref_sdpa_backward_workspace(const k_call *call, int nthreads);

/* The forward's geometry (ksdpa_geom) of a backward call: q, k, v, the
 * mask, and the output's offsets (ksdpa_at.o), which grad_out shares. The
 * gradients are dense in q's, k's and v's shapes, so at.q, at.k and at.v
 * place them too; lse row b starts at b * L. k and v have q's leading dims
 * but for the heads (dim -3), of which they may have fewer, dividing q's:
 * *group q heads, adjacent q leading indices, read each k/v head (1
 * without grouped-query attention). Fails on other broadcasts, dropout,
 * and sizes that do not fit. */
air_status ksdpb_geom_make(const k_call *call, ksdpa_geom *g, int64_t *group);

#endif

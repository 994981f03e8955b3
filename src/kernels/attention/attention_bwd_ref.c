/* attention_bwd_ref.c - the reference kernel of sdpa_backward, the oracle
 * of the blocked kernel (attention_bwd_fast.c): per leading index (one
 * batch and head), each query row's softmax weights recomputed from the
 * forward's log-sum-exp, P = exp(scale q k^T + mask - lse), then
 * D = rowsum(dO * O), dS = P * (dO v^T - D), dq = scale dS k,
 * dk += scale dS^T q, dv += P^T dO, all in double; k/v leading indices
 * split across threads, each with the q heads that read it (grouped-query
 * attention sums their k and v gradients). */
#include "kernels/attention/attention_bwd_ref.h"

#include <math.h>
#include <string.h>

#include "core/error.h"

air_status ksdpb_geom_make(const k_call *call, ksdpa_geom *g, int64_t *group)
{
	if (call->n_in < 6 || call->n_out != 3)
		return air_error(AIR_INVALID_ARGUMENT, "sdpa_backward: %d inputs and %d outputs", call->n_in,
				 call->n_out);
	if (call->attrs[KSDPB_ATTR_DROPOUT].f != 0.0)
		return air_error(AIR_UNSUPPORTED, "sdpa_backward: dropout is not supported");
	/* the forward's call: q, k, v, the mask; its output is out */
	k_attr attrs[KSDPA_NATTRS];
	memset(attrs, 0, sizeof attrs);
	attrs[KSDPA_ATTR_SCALE].f = call->attrs[KSDPB_ATTR_SCALE].f;
	attrs[KSDPA_ATTR_CAUSAL].i = call->attrs[KSDPB_ATTR_CAUSAL].i;
	int has_mask = kref_present(call->attrs[KSDPB_ATTR_HAS_MASK].i, call->n_in, 6);
	attrs[KSDPA_ATTR_HAS_MASK].i = has_mask;
	k_tensor in[4] = {call->in[KSDPB_Q], call->in[KSDPB_K], call->in[KSDPB_V]};
	if (has_mask)
		in[3] = call->in[KSDPB_MASK];
	k_call fwd = {.attrs = attrs, .in = in, .n_in = 3 + has_mask, .out = &call->in[KSDPB_OUT], .n_out = 1};
	AIR_TRY(ksdpa_geom_make(&fwd, g));
	const k_tensor *q = &call->in[KSDPB_Q], *lse = &call->in[KSDPB_LSE], *go = &call->in[KSDPB_GRAD_OUT];
	int r = q->rank;
	bool ok = lse->rank == r - 1 && go->rank == r;
	*group = 1;
	for (int d = 0; d < r - 2 && ok; d++) {
		int64_t kd = call->in[KSDPB_K].dims[d], qd = q->dims[d];
		ok = call->in[KSDPB_V].dims[d] == kd && (kd == qd || (d == r - 3 && kd > 0 && qd % kd == 0));
		if (ok && kd != qd)
			*group = qd / kd;
	}
	for (int d = 0; d < r - 1 && ok; d++)
		ok = lse->dims[d] == q->dims[d];
	for (int d = 0; d < r && ok; d++)
		ok = go->dims[d] == call->in[KSDPB_OUT].dims[d];
	for (int i = 0; i < 3 && ok; i++) {
		const k_tensor *o = &call->out[i], *x = &call->in[KSDPB_Q + i];
		ok = o->rank == x->rank;
		for (int d = 0; d < x->rank && ok; d++)
			ok = o->dims[d] == x->dims[d];
	}
	if (!ok)
		return air_error(AIR_SHAPE_MISMATCH, "sdpa_backward: grad_out, lse, k, v or a gradient does not have "
						     "the shape q and v give");
	return AIR_OK;
}

typedef struct bwd_ctx {
	ksdpa_geom g;
	int64_t group; /* q heads a k/v head serves (grouped-query attention), else 1 */
	const void *go, *q, *k, *v, *o, *lse, *mask;
	void *dq, *dk, *dv;
	air_dtype dtype;
	double *ws; /* per thread: p, dp [S], dq row [E], dk [S][E], dv [S][Ev] */
} bwd_ctx;

static double load(const void *p, air_dtype dt, int64_t i)
{
	return dt == AIR_F32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}

static void store(void *p, air_dtype dt, int64_t i, double x)
{
	if (dt == AIR_F32)
		((float *)p)[i] = (float)x;
	else
		((double *)p)[i] = x;
}

static size_t per_thread(const ksdpa_geom *g)
{
	return (size_t)(2 * g->S + g->E + g->S * g->E + g->S * g->Ev);
}

/* Query row l of q leading index b: its dq row, and its terms of dk, dv. */
static void bwd_row(const bwd_ctx *c, int64_t b, int64_t l, double *pr, double *dp, double *dqr, double *dk, double *dv,
		    int64_t ms)
{
	const ksdpa_geom *g = &c->g;
	const air_dtype dt = c->dtype;
	int64_t S = g->S, E = g->E, Ev = g->Ev;
	ksdpa_at at = ksdpa_offsets(g, b);
	int64_t qoff = at.q + l * g->q_rs, ooff = at.o + l * g->o_rs, moff = at.m + l * g->m_st[g->nlead];
	double lse = load(c->lse, dt, b * g->L + l), D = 0;
	for (int64_t e = 0; e < Ev; e++)
		D += load(c->go, dt, ooff + e) * load(c->o, dt, ooff + e);
	for (int64_t s = 0; s < S; s++) {
		pr[s] = 0;
		dp[s] = 0;
		if (g->causal && s > l)
			continue;
		if (c->mask && g->mask_bool && !((const uint8_t *)c->mask)[moff + s * ms])
			continue;
		double dot = 0;
		for (int64_t e = 0; e < E; e++)
			dot += load(c->q, dt, qoff + e) * load(c->k, dt, at.k + s * g->k_rs + e);
		double x = dot * g->scale;
		if (c->mask && !g->mask_bool)
			x += load(c->mask, dt, moff + s * ms);
		/* a row with no key has lse -inf and weights 0 */
		pr[s] = x == -INFINITY || lse == -INFINITY ? 0.0 : exp(x - lse);
		double d = 0;
		for (int64_t e = 0; e < Ev; e++)
			d += load(c->go, dt, ooff + e) * load(c->v, dt, at.v + s * g->v_rs + e);
		dp[s] = pr[s] * (d - D); /* dS */
	}
	for (int64_t e = 0; e < E; e++)
		dqr[e] = 0;
	for (int64_t s = 0; s < S; s++) {
		if (pr[s] == 0 && dp[s] == 0)
			continue;
		for (int64_t e = 0; e < E; e++) {
			dqr[e] += dp[s] * load(c->k, dt, at.k + s * g->k_rs + e);
			dk[s * E + e] += dp[s] * load(c->q, dt, qoff + e);
		}
		for (int64_t e = 0; e < Ev; e++)
			dv[s * Ev + e] += pr[s] * load(c->go, dt, ooff + e);
	}
	for (int64_t e = 0; e < E; e++)
		store(c->dq, dt, qoff + e, dqr[e] * g->scale);
}

/* One k/v leading index: the rows of each q leading index that reads it
 * (group of them, adjacent), their dq, and the k/v gradients summed over
 * them. */
static void bwd_task(void *p, int64_t kvb, int thread)
{
	const bwd_ctx *c = p;
	const ksdpa_geom *g = &c->g;
	const air_dtype dt = c->dtype;
	int64_t S = g->S, E = g->E, Ev = g->Ev;
	double *pr = c->ws + (size_t)thread * per_thread(g), *dp = pr + S, *dqr = dp + S, *dk = dqr + E;
	double *dv = dk + S * E;
	memset(dk, 0, sizeof(double) * (size_t)(S * (E + Ev)));
	int64_t ms = g->has_mask ? g->m_st[g->nlead + 1] : 0;
	ksdpa_at at = ksdpa_offsets(g, kvb * c->group);
	for (int64_t b = kvb * c->group; b < (kvb + 1) * c->group; b++)
		for (int64_t l = 0; l < g->L; l++)
			bwd_row(c, b, l, pr, dp, dqr, dk, dv, ms);
	for (int64_t s = 0; s < S; s++) {
		for (int64_t e = 0; e < E; e++)
			store(c->dk, dt, at.k + s * g->k_rs + e, dk[s * E + e] * g->scale);
		for (int64_t e = 0; e < Ev; e++)
			store(c->dv, dt, at.v + s * g->v_rs + e, dv[s * Ev + e]);
	}
}

size_t kref_sdpa_backward_workspace(const k_call *call, int nthreads)
{
	ksdpa_geom g;
	int64_t group;
	if (ksdpb_geom_make(call, &g, &group) != AIR_OK)
		return 0; /* the run fails the same way */
	return (size_t)(nthreads < 1 ? 1 : nthreads) * per_thread(&g) * sizeof(double);
}

air_status kref_sdpa_backward(const k_call *call)
{
	bwd_ctx c;
	memset(&c, 0, sizeof c);
	AIR_TRY(ksdpb_geom_make(call, &c.g, &c.group));
	c.go = call->in[KSDPB_GRAD_OUT].data;
	c.q = call->in[KSDPB_Q].data;
	c.k = call->in[KSDPB_K].data;
	c.v = call->in[KSDPB_V].data;
	c.o = call->in[KSDPB_OUT].data;
	c.lse = call->in[KSDPB_LSE].data;
	c.mask = c.g.has_mask ? call->in[KSDPB_MASK].data : NULL;
	c.dq = call->out[0].data;
	c.dk = call->out[1].data;
	c.dv = call->out[2].data;
	c.dtype = call->in[KSDPB_Q].dtype;
	c.ws = call->workspace;
	rt_pool_run(call->pool, c.g.batch / c.group, bwd_task, &c);
	return AIR_OK;
}

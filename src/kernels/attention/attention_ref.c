/* attention_ref.c - the reference kernel of scaled-dot-product attention:
 * each query row's scores, softmax and weighted sum of values accumulated in
 * double, rows split across threads. The oracle of the fused kernel
 * (attention_fast.c); it reads q, k and v through the same views. */
#include "kernels/attention/attention_ref.h"

#include <math.h>
#include <string.h>

#include "core/error.h"

/* ---- scaled dot-product attention ------------------------------------- */

typedef struct sdpa_ctx {
	ksdpa_geom g;
	const void *q, *k, *v, *mask;
	void *out;
	void *lse; /* sdpa_lse's second output [..., L], or NULL */
	air_dtype dtype;
	double *ws; /* per thread: S scores, then Ev accumulators */
	int empty_nan;
} sdpa_ctx;

static double load(const void *p, air_dtype dt, int64_t i)
{
	return dt == AIR_F32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}

/* One query row: out = softmax(scale * q k^T + mask) v, with excluded
 * positions (causal, false in a bool mask, -inf in a float mask) left out.
 * A row with every position excluded is all zeros, as torch's CPU flash
 * kernel gives, or NaN (as the math path and decomposed softmax give) when
 * the empty_nan attribute is set. */
static void sdpa_row(const sdpa_ctx *c, int64_t row, int thread)
{
	const ksdpa_geom *g = &c->g;
	int64_t b = row / g->L, l = row % g->L;
	ksdpa_at at = ksdpa_offsets(g, b);
	int64_t koff = at.k, voff = at.v, moff = at.m + l * g->m_st[g->nlead];
	int64_t ms = g->m_st[g->nlead + 1];
	double *sc = c->ws + (size_t)thread * (size_t)(g->S + g->Ev), *acc = sc + g->S;
	int64_t qoff = at.q + l * g->q_rs;
	double max = -INFINITY;
	int any = 0;
	for (int64_t s = 0; s < g->S; s++) {
		sc[s] = -INFINITY;
		if (g->causal && s > l)
			continue;
		if (c->mask && g->mask_bool && !((const uint8_t *)c->mask)[moff + s * ms])
			continue;
		double dot = 0;
		for (int64_t e = 0; e < g->E; e++)
			dot += load(c->q, c->dtype, qoff + e) * load(c->k, c->dtype, koff + s * g->k_rs + e);
		double x = dot * g->scale;
		if (c->mask && !g->mask_bool)
			x += load(c->mask, c->dtype, moff + s * ms);
		sc[s] = x;
		if (x != -INFINITY)
			any = 1;
		if (x > max)
			max = x;
	}
	for (int64_t e = 0; e < g->Ev; e++)
		acc[e] = 0;
	double sum = 0;
	if (any) {
		for (int64_t s = 0; s < g->S; s++) {
			if (sc[s] == -INFINITY)
				continue;
			double p = exp(sc[s] - max);
			sum += p;
			for (int64_t e = 0; e < g->Ev; e++)
				acc[e] += p * load(c->v, c->dtype, voff + s * g->v_rs + e);
		}
		for (int64_t e = 0; e < g->Ev; e++)
			acc[e] /= sum;
	} else if (c->empty_nan) {
		for (int64_t e = 0; e < g->Ev; e++)
			acc[e] = NAN;
	}
	if (c->lse) {
		/* log of the softmax's denominator: -inf for a row with no key */
		double lse = any ? max + log(sum) : -INFINITY;
		if (c->dtype == AIR_F32)
			((float *)c->lse)[row] = (float)lse;
		else
			((double *)c->lse)[row] = lse;
	}
	int64_t ooff = at.o + l * g->o_rs;
	for (int64_t e = 0; e < g->Ev; e++) {
		if (c->dtype == AIR_F32)
			((float *)c->out)[ooff + e] = (float)acc[e];
		else
			((double *)c->out)[ooff + e] = acc[e];
	}
}

static void sdpa_task(void *p, int64_t t, int thread)
{
	sdpa_row(p, t, thread);
}

size_t kref_sdpa_workspace(const k_call *call, int nthreads)
{
	ksdpa_geom g;
	if (ksdpa_geom_make(call, &g) != AIR_OK)
		return 0; /* the run fails the same way */
	return (size_t)(nthreads < 1 ? 1 : nthreads) * (size_t)(g.S + g.Ev) * sizeof(double);
}

air_status ksdpa_view_read(const int64_t *ints, int n, int64_t numel, ksdpa_view *v)
{
	if (n != KSDPA_VIEW_INTS)
		return air_error(AIR_INVALID_ARGUMENT, "sdpa: a view has %d entries, not %d", n, (int)KSDPA_VIEW_INTS);
	for (int i = 0; i < n; i++)
		if (ints[i] < 0)
			return air_error(AIR_INVALID_ARGUMENT, "sdpa: view entry %d is negative (%lld)", i,
					 (long long)ints[i]);
	v->offset = ints[0];
	int64_t last = ints[0], count = 1;
	for (int d = 0; d < 4; d++) {
		v->dims[d] = ints[1 + d];
		count *= v->dims[d];
		last += (v->dims[d] - 1) * (d < 3 ? ints[5 + d] : 1);
	}
	for (int d = 0; d < 3; d++)
		v->st[d] = ints[5 + d];
	if (count > 0 && numel >= 0 && last >= numel)
		return air_error(AIR_SHAPE_MISMATCH, "sdpa: a view reaches element %lld of an input of %lld",
				 (long long)last, (long long)numel);
	return AIR_OK;
}

/* Operand i's logical dims and the element strides of its dims (the last
 * 1) from offset: its view if the attribute has entries (rank 4), else
 * the tensor itself, dense. */
static air_status operand(const k_call *call, int i, const char *name, int *rank, int64_t *dims, int64_t *st,
			  int64_t *offset)
{
	const k_tensor *t = &call->in[i];
	const k_attr *view = &call->attrs[KSDPA_ATTR_Q_VIEW + i];
	if (view->n == 0) {
		*rank = t->rank;
		int64_t s = 1;
		for (int d = t->rank - 1; d >= 0; d--) {
			dims[d] = t->dims[d];
			st[d] = s;
			s *= t->dims[d];
		}
		*offset = 0;
		return AIR_OK;
	}
	ksdpa_view v;
	air_status status = ksdpa_view_read(view->ints, view->n, t->numel, &v);
	if (status != AIR_OK)
		return air_error_context(status, "sdpa: the view of %s", name);
	*rank = 4;
	for (int d = 0; d < 4; d++) {
		dims[d] = v.dims[d];
		st[d] = d < 3 ? v.st[d] : 1;
	}
	*offset = v.offset;
	return AIR_OK;
}

/* Strides and GQA divisors of a k/v operand's leading dims against q's. */
static air_status kv_map(int r, const int64_t *qd, const int64_t *td, const int64_t *tst, const char *name,
			 int64_t *st, int64_t *div)
{
	for (int d = r - 3; d >= 0; d--) {
		st[d] = td[d] == 1 ? 0 : tst[d];
		div[d] = 1;
		if (td[d] != qd[d] && td[d] != 1) {
			if (d != r - 3 || td[d] == 0 || qd[d] % td[d] != 0)
				return air_error(AIR_SHAPE_MISMATCH, "sdpa: %s has size %lld at dim %d where q has %lld",
						 name, (long long)td[d], d, (long long)qd[d]);
			div[d] = qd[d] / td[d];
		}
	}
	return AIR_OK;
}

/* The output's strides: dense [lead..., L, Ev], or with out_bshd the
 * logical [B, H, L, Ev] in a [B, L, H, Ev] buffer. */
static air_status output_strides(const k_call *call, int r, const int64_t *qd, ksdpa_geom *g)
{
	const k_tensor *o = &call->out[0];
	int bshd = call->attrs[KSDPA_ATTR_OUT_BSHD].i != 0;
	if (bshd && r != 4)
		return air_error(AIR_SHAPE_MISMATCH, "sdpa: out_bshd needs rank 4, not %d", r);
	int64_t want[AIR_MAX_RANK], st[AIR_MAX_RANK];
	for (int d = 0; d < r; d++)
		want[d] = d < r - 1 ? qd[d] : g->Ev;
	if (bshd) {
		want[1] = g->L;
		want[2] = qd[1];
	}
	bool fits = o->rank == r;
	for (int d = 0; d < r && fits; d++)
		fits = o->dims[d] == want[d];
	if (!fits)
		return air_error(AIR_SHAPE_MISMATCH, "sdpa: the output's shape is not the one q and v give%s",
				 bshd ? " (out_bshd)" : "");
	int64_t s = 1;
	for (int d = r - 1; d >= 0; d--) {
		st[d] = s;
		s *= o->dims[d];
	}
	for (int d = 0; d < g->nlead; d++)
		g->o_st[d] = st[d];
	g->o_rs = st[r - 2];
	if (bshd) {
		g->o_st[1] = st[2];
		g->o_rs = st[1];
	}
	return AIR_OK;
}

air_status ksdpa_geom_make(const k_call *call, ksdpa_geom *g)
{
	memset(g, 0, sizeof *g);
	int r, rk, rv;
	int64_t qd[AIR_MAX_RANK], kd[AIR_MAX_RANK], vd[AIR_MAX_RANK];
	int64_t qst[AIR_MAX_RANK], kst[AIR_MAX_RANK], vst[AIR_MAX_RANK];
	AIR_TRY(operand(call, 0, "q", &r, qd, qst, &g->q0));
	AIR_TRY(operand(call, 1, "k", &rk, kd, kst, &g->k0));
	AIR_TRY(operand(call, 2, "v", &rv, vd, vst, &g->v0));
	if (r < 2 || rk != r || rv != r)
		return air_error(AIR_SHAPE_MISMATCH, "sdpa: q, k and v have ranks %d, %d, %d", r, rk, rv);
	g->nlead = r - 2;
	g->L = qd[r - 2];
	g->E = qd[r - 1];
	g->S = kd[r - 2];
	g->Ev = vd[r - 1];
	if (kd[r - 1] != g->E || vd[r - 2] != g->S)
		return air_error(AIR_SHAPE_MISMATCH, "sdpa: q [.., %lld, %lld], k [.., %lld, %lld], v [.., %lld, %lld] "
						     "do not fit",
				 (long long)g->L, (long long)g->E, (long long)g->S, (long long)kd[r - 1],
				 (long long)vd[r - 2], (long long)g->Ev);
	g->batch = 1;
	for (int d = 0; d < g->nlead; d++) {
		g->lead[d] = qd[d];
		g->batch *= qd[d];
		g->q_st[d] = qst[d];
	}
	g->q_rs = qst[r - 2];
	g->k_rs = kst[r - 2];
	g->v_rs = vst[r - 2];
	AIR_TRY(kv_map(r, qd, kd, kst, "k", g->k_st, g->k_div));
	AIR_TRY(kv_map(r, qd, vd, vst, "v", g->v_st, g->v_div));
	AIR_TRY(output_strides(call, r, qd, g));
	g->has_mask = kref_present(call->attrs[2].i, call->n_in, 3);
	if (g->has_mask) {
		const k_tensor *m = &call->in[3];
		g->mask_bool = m->dtype == AIR_BOOL;
		int64_t s = 1;
		for (int d = r - 1; d >= 0; d--) {
			int md = d - (r - m->rank);
			int64_t n = md >= 0 ? m->dims[md] : 1;
			int64_t want = d == r - 1 ? g->S : qd[d];
			if (n != 1 && n != want)
				return air_error(AIR_SHAPE_MISMATCH, "sdpa: the mask has size %lld where [..., L, S] has "
								     "%lld (dim %d)",
						 (long long)n, (long long)want, d);
			g->m_st[d] = n == 1 ? 0 : s;
			s *= n;
		}
	}
	g->scale = call->attrs[0].f != 0.0 ? call->attrs[0].f : (g->E > 0 ? 1.0 / sqrt((double)g->E) : 1.0);
	g->causal = call->attrs[1].i != 0;
	return AIR_OK;
}

air_status kref_sdpa(const k_call *call)
{
	sdpa_ctx c;
	memset(&c, 0, sizeof c);
	AIR_TRY(ksdpa_geom_make(call, &c.g));
	c.q = call->in[0].data;
	c.k = call->in[1].data;
	c.v = call->in[2].data;
	c.mask = c.g.has_mask ? call->in[3].data : NULL;
	c.out = call->out[0].data;
	c.lse = call->n_out > 1 ? call->out[1].data : NULL;
	c.dtype = call->in[0].dtype;
	c.ws = call->workspace;
	c.empty_nan = call->attrs[3].i != 0;
	if (c.g.Ev == 0)
		return AIR_OK;
	rt_pool_run(call->pool, c.g.batch * c.g.L, sdpa_task, &c);
	return AIR_OK;
}

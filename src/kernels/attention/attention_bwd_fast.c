/* attention_bwd_fast.c - the blocked sdpa_backward kernel (flash-attention
 * style). Per leading index (batch and head) and tile of KATT_BK keys,
 * over tiles of BQ queries: S = q k^T (the forward's qk loop), P from the
 * forward's softmax loop started at each row's log-sum-exp as its running
 * max (so P = exp(scale S + mask - lse), the weights the forward used),
 * dP = dO v^T (qk again), dS = P (dP - D) with D = rowsum(dO * O), then
 * dv += P^T dO, dk += dS^T q and dq += dS k (the forward's pv loop, on
 * transposed tiles where needed). The key tile's dk and dv stay in
 * per-thread accumulators until its query tiles are done.
 *
 * Threads: one task per (k/v leading index, chunk of key tiles); with few
 * leading indices the keys are cut into more chunks. A task also takes
 * every q head that reads its k/v head (grouped-query attention), so the
 * group's dk and dv are summed in its accumulators. dk and dv rows belong
 * to one task; dq is summed over chunks, so each task adds into its own
 * partial [L, E] and a last pass adds the partials up: no two threads ever
 * write one float. Causal attention skips query tiles that end before the
 * key tile starts; the softmax loop cuts each row at its diagonal. */
#include "kernels/attention/attention_bwd_fast.h"

#include <math.h>
#include <string.h>

#include "core/error.h"
#include "kernels/attention/attention_bwd_ref.h"
#include "kernels/attention/attention_fast.h"
#include "kernels/shape/transpose.h"

#define BQ KATT_BQ /* queries per tile */

static int64_t pad_to(int64_t n, int64_t m)
{
	return (n + m - 1) / m * m;
}

/* Float offsets of a thread's scratch: packed K^T [E][BK], V^T [Ev][BK],
 * K rows [BK][ep]; tiles s, dp [BQ][BK], their transposes [BK][BQ]; the
 * key tile's accumulators dk [BK][ep], dv [BK][evp]; per-row m, l, alpha,
 * ones; a gathered mask row. */
typedef struct bwd_layout {
	size_t kt, vt, kp, s, dp, pt, dst, dk, dv, m, l, alpha, ones, mrow, slot;
	size_t qp, dop, d, parts, prep; /* shared: packed q, dO [batch][L][ep|evp], D, the dq partials */
	/* q and dO rows are read in place when they are KATT_PAD-wide already,
	 * and with one chunk of keys dq accumulates in the output itself */
	bool pack_q, pack_o, dq_direct;
} bwd_layout;

typedef struct bwd_job {
	ksdpa_geom g;
	const katt_ops *ops;
	const float *go, *q, *k, *v, *o, *lse;
	const void *mask;
	float *dq, *dk, *dv;
	float *ws, *slots;
	int64_t ep, evp, nqb, nkb, nchunk, kpc;
	int64_t group; /* q leading indices (heads) per k/v one: grouped-query attention */
	bwd_layout lay;
	float scale;
} bwd_job;

static void chunks(const ksdpa_geom *g, int64_t group, int nthreads, int64_t *nkb, int64_t *nchunk, int64_t *kpc)
{
	*nkb = (g->S + KATT_BK - 1) / KATT_BK;
	int64_t n = 1;
	while (g->batch / group * n < 2 * (int64_t)nthreads && n < *nkb)
		n++;
	*kpc = *nkb > 0 ? (*nkb + n - 1) / n : 1;
	*nchunk = *nkb > 0 ? (*nkb + *kpc - 1) / *kpc : 1;
}

static void layout(const ksdpa_geom *g, int64_t ep, int64_t evp, int64_t nchunk, bwd_layout *a)
{
	size_t off = 0;
	a->pack_q = ep != g->E;
	a->pack_o = evp != g->Ev;
	a->dq_direct = !a->pack_q && nchunk == 1;
#define TAKE(field, floats)             \
	a->field = off;                 \
	off += pad_to((int64_t)(floats), 16)
	TAKE(kt, (g->E > 0 ? g->E : 1) * KATT_BK);
	TAKE(vt, (g->Ev > 0 ? g->Ev : 1) * KATT_BK);
	TAKE(kp, KATT_BK * ep);
	TAKE(s, BQ * KATT_BK);
	TAKE(dp, BQ * KATT_BK);
	TAKE(pt, KATT_BK * BQ);
	TAKE(dst, KATT_BK * BQ);
	TAKE(dk, KATT_BK * ep);
	TAKE(dv, KATT_BK * evp);
	TAKE(m, BQ);
	TAKE(l, BQ);
	TAKE(alpha, BQ);
	TAKE(ones, KATT_BK > BQ ? KATT_BK : BQ);
	TAKE(mrow, KATT_BK);
	a->slot = off + 16; /* a spare line between threads' slots */
	off = 0;
	int64_t rows = g->batch * g->L;
	TAKE(qp, a->pack_q ? rows * ep : 0);
	TAKE(dop, a->pack_o ? rows * evp : 0);
	TAKE(d, rows);
	TAKE(parts, a->dq_direct ? 0 : rows * nchunk * ep);
	a->prep = off;
#undef TAKE
}

/* q and dO rows of one query tile packed KATT_PAD-wide, and D = rowsum(dO * O) */
static void prep_task(void *ctx, int64_t t, int thread)
{
	(void)thread;
	const bwd_job *j = ctx;
	const ksdpa_geom *g = &j->g;
	int64_t b = t / j->nqb, l0 = (t % j->nqb) * BQ, nq = g->L - l0 < BQ ? g->L - l0 : BQ;
	ksdpa_at at = ksdpa_offsets(g, b);
	for (int64_t i = 0; i < nq; i++) {
		int64_t row = b * g->L + l0 + i;
		const float *q = j->q + at.q + (l0 + i) * g->q_rs;
		const float *go = j->go + at.o + (l0 + i) * g->o_rs, *o = j->o + at.o + (l0 + i) * g->o_rs;
		if (j->lay.pack_q) {
			float *qp = j->ws + j->lay.qp + row * j->ep;
			memcpy(qp, q, (size_t)g->E * sizeof(float));
			memset(qp + g->E, 0, (size_t)(j->ep - g->E) * sizeof(float));
		}
		if (j->lay.pack_o) {
			float *dop = j->ws + j->lay.dop + row * j->evp;
			memcpy(dop, go, (size_t)g->Ev * sizeof(float));
			memset(dop + g->Ev, 0, (size_t)(j->evp - g->Ev) * sizeof(float));
		}
		double d = 0;
		for (int64_t c = 0; c < g->Ev; c++)
			d += (double)go[c] * o[c];
		j->ws[j->lay.d + row] = (float)d;
	}
}

/* s [nq][np] from raw scores to the weights P of rows l0.. (log-sum-exp
 * lse[i]) over keys
 * kb0 + [0, bk) (0 past bk and where excluded): the forward's softmax loop
 * with each row's running max set to its log-sum-exp, so it subtracts lse
 * (a max found above lse, by rounding, is within an ulp of it). */
static void weights(const bwd_job *j, const ksdpa_at *at, const float *lse, float *s, int np, int nq, int64_t l0,
		    int64_t kb0, int bk, float *slot)
{
	const ksdpa_geom *g = &j->g;
	const bwd_layout *a = &j->lay;
	float *m = slot + a->m, *l = slot + a->l, *alpha = slot + a->alpha;
	void *mrow = slot + a->mrow;
	for (int i = 0; i < nq; i++) {
		m[i] = lse[i];
		l[i] = 0.0f;
	}
	int64_t ml = g->has_mask ? g->m_st[g->nlead] : 0, ms = g->has_mask ? g->m_st[g->nlead + 1] : 0;
	if (j->ops->softmax_rows && !g->causal && ms <= 1) {
		const char *mask = j->mask && ms == 1 ? (const char *)j->mask : NULL;
		const int64_t off = at->m + l0 * ml + kb0;
		const float *madd = mask && !g->mask_bool ? (const float *)mask + off : NULL;
		const uint8_t *mbool = mask && g->mask_bool ? (const uint8_t *)mask + off : NULL;
		if (!j->mask || mask) {
			j->ops->softmax_rows(s, np, nq, bk, j->scale, madd, mbool, ml, m, l, alpha);
			return;
		}
	}
	for (int i = 0; i < nq; i++) {
		int64_t n = bk;
		if (g->causal) {
			int64_t lim = l0 + i - kb0 + 1;
			n = lim < 0 ? 0 : lim < n ? lim : n;
		}
		const float *madd = NULL;
		const uint8_t *mbool = NULL;
		if (j->mask) {
			int64_t off = at->m + (l0 + i) * ml + kb0 * ms;
			if (g->mask_bool) {
				const uint8_t *src = (const uint8_t *)j->mask + off;
				if (ms != 1) {
					uint8_t *d = mrow;
					for (int64_t c = 0; c < n; c++)
						d[c] = src[c * ms];
					src = d;
				}
				mbool = src;
			} else {
				const float *src = (const float *)j->mask + off;
				if (ms != 1) {
					float *d = mrow;
					for (int64_t c = 0; c < n; c++)
						d[c] = src[c * ms];
					src = d;
				}
				madd = src;
			}
		}
		j->ops->softmax(s + (size_t)i * np, np, (int)n, j->scale, madd, mbool, &m[i], &l[i], &alpha[i]);
	}
}

/* K^T or V^T of bk keys [x][np], columns past bk zero */
static void pack_t(const float *x, int64_t ldx, int64_t n, int bk, int np, float *xt)
{
	for (int64_t e = 0; e < n; e++)
		for (int c = bk; c < np; c++)
			xt[e * np + c] = 0.0f;
	ktranspose(x, ldx, xt, np, bk, n);
}

/* One query tile's terms for one key tile (packed in the slot): P and dS
 * recomputed, dv and dk accumulated in the slot, dq into part. */
static void tile(const bwd_job *j, int64_t b, const ksdpa_at *at, int64_t l0, int64_t kb0, int bk, int np, float *part,
		 float *slot)
{
	const ksdpa_geom *g = &j->g;
	const bwd_layout *a = &j->lay;
	const katt_ops *ops = j->ops;
	int64_t E = g->E, Ev = g->Ev, ep = j->ep, evp = j->evp, L = g->L;
	float *kt = slot + a->kt, *vt = slot + a->vt, *kp = slot + a->kp, *s = slot + a->s, *dp = slot + a->dp;
	float *pt = slot + a->pt, *dst = slot + a->dst, *dk = slot + a->dk, *dv = slot + a->dv, *ones = slot + a->ones;
	int nq = (int)(L - l0 < BQ ? L - l0 : BQ);
	const float *q = a->pack_q ? j->ws + a->qp + (size_t)((b * L + l0) * ep) : j->q + at->q + l0 * g->q_rs;
	const float *go = a->pack_o ? j->ws + a->dop + (size_t)((b * L + l0) * evp) : j->go + at->o + l0 * g->o_rs;
	const int64_t ldq = a->pack_q ? ep : g->q_rs, ldo = a->pack_o ? evp : g->o_rs;
	const float *drow = j->ws + a->d + b * L + l0;
	ops->qk(q, ldq, nq, E, kt, np, s);
	weights(j, at, j->lse + b * L + l0, s, np, nq, l0, kb0, bk, slot);
	ops->qk(go, ldo, nq, Ev, vt, np, dp);
	for (int i = 0; i < nq; i++) {
		float di = drow[i];
		float *dpi = dp + (size_t)i * np;
		const float *pi = s + (size_t)i * np;
		for (int c = 0; c < np; c++)
			dpi[c] = pi[c] * (dpi[c] - di); /* dS; 0 where P is */
	}
	ktranspose(s, np, pt, BQ, nq, np);
	ops->pv(pt, BQ, bk, nq, go, ldo, (int)evp, dv, ones);
	ktranspose(dp, np, dst, BQ, nq, np);
	ops->pv(dst, BQ, bk, nq, q, ldq, (int)ep, dk, ones);
	ops->pv(dp, np, nq, bk, kp, ep, (int)ep, part + l0 * ep, ones);
}

/* Where q leading index b's dq terms from one chunk of keys add up: a
 * partial [L][ep], or (dq_direct) the output's rows, dense and ep wide. */
static float *dq_part(const bwd_job *j, int64_t b, int64_t chunk)
{
	if (j->lay.dq_direct)
		return j->dq + ksdpa_offsets(&j->g, b).q;
	return j->ws + j->lay.parts + (size_t)(b * j->nchunk + chunk) * (size_t)(j->g.L * j->ep);
}

/* One k/v leading index and chunk of key tiles: dk and dv of those keys,
 * summed over the q heads that read them, and this chunk's part of each of
 * those heads' dq. */
static void key_task(void *ctx, int64_t t, int thread)
{
	const bwd_job *j = ctx;
	const ksdpa_geom *g = &j->g;
	const bwd_layout *a = &j->lay;
	int64_t kvb = t / j->nchunk, chunk = t % j->nchunk, b0 = kvb * j->group;
	int64_t E = g->E, Ev = g->Ev, ep = j->ep, evp = j->evp, L = g->L;
	ksdpa_at at0 = ksdpa_offsets(g, b0);
	float *slot = j->slots + (size_t)thread * a->slot;
	float *kt = slot + a->kt, *vt = slot + a->vt, *kp = slot + a->kp, *dk = slot + a->dk, *dv = slot + a->dv;
	float *ones = slot + a->ones;
	for (int64_t b = b0; b < b0 + j->group; b++)
		memset(dq_part(j, b, chunk), 0, sizeof(float) * (size_t)(L * ep));
	for (int i = 0; i < (KATT_BK > BQ ? KATT_BK : BQ); i++)
		ones[i] = 1.0f;
	int64_t kb_end = (chunk + 1) * j->kpc < j->nkb ? (chunk + 1) * j->kpc : j->nkb;
	for (int64_t kbi = chunk * j->kpc; kbi < kb_end; kbi++) {
		int64_t kb0 = kbi * KATT_BK;
		int bk = (int)(g->S - kb0 < KATT_BK ? g->S - kb0 : KATT_BK);
		int np = (int)pad_to(bk, KATT_PAD);
		const float *k = j->k + at0.k + kb0 * g->k_rs, *v = j->v + at0.v + kb0 * g->v_rs;
		pack_t(k, g->k_rs, E, bk, np, kt);
		pack_t(v, g->v_rs, Ev, bk, np, vt);
		for (int c = 0; c < bk; c++) {
			memcpy(kp + c * ep, k + c * g->k_rs, (size_t)E * sizeof(float));
			memset(kp + c * ep + E, 0, (size_t)(ep - E) * sizeof(float));
		}
		memset(dk, 0, sizeof(float) * (size_t)(bk * ep));
		memset(dv, 0, sizeof(float) * (size_t)(bk * evp));
		/* causal: query l sees keys up to l, so tiles ending before kb0 see none */
		int64_t first = g->causal ? kb0 / BQ * BQ : 0;
		for (int64_t b = b0; b < b0 + j->group; b++) {
			ksdpa_at at = ksdpa_offsets(g, b);
			float *part = dq_part(j, b, chunk);
			for (int64_t l0 = first; l0 < L; l0 += BQ)
				tile(j, b, &at, l0, kb0, bk, np, part, slot);
		}
		float *dko = j->dk + at0.k + kb0 * g->k_rs, *dvo = j->dv + at0.v + kb0 * g->v_rs;
		for (int c = 0; c < bk; c++) {
			for (int64_t e = 0; e < E; e++)
				dko[c * g->k_rs + e] = dk[c * ep + e] * j->scale;
			memcpy(dvo + c * g->v_rs, dv + c * evp, (size_t)Ev * sizeof(float));
		}
	}
}

/* dq of one query tile: the chunks' partials added up, scaled */
static void dq_task(void *ctx, int64_t t, int thread)
{
	(void)thread;
	const bwd_job *j = ctx;
	const ksdpa_geom *g = &j->g;
	int64_t b = t / j->nqb, l0 = (t % j->nqb) * BQ, nq = g->L - l0 < BQ ? g->L - l0 : BQ;
	ksdpa_at at = ksdpa_offsets(g, b);
	if (j->lay.dq_direct) {
		float *dq = j->dq + at.q + l0 * g->q_rs;
		for (int64_t i = 0; i < nq * g->E; i++)
			dq[i] *= j->scale;
		return;
	}
	const float *part = dq_part(j, b, 0);
	for (int64_t i = 0; i < nq; i++) {
		float *dq = j->dq + at.q + (l0 + i) * g->q_rs;
		const float *p0 = part + (l0 + i) * j->ep;
		for (int64_t e = 0; e < g->E; e++)
			dq[e] = p0[e];
		for (int64_t c = 1; c < j->nchunk; c++) {
			const float *pc = p0 + (size_t)c * (size_t)(g->L * j->ep);
			for (int64_t e = 0; e < g->E; e++)
				dq[e] += pc[e];
		}
		for (int64_t e = 0; e < g->E; e++)
			dq[e] *= j->scale;
	}
}

static bool bwd_supports(const k_call *call)
{
	for (int i = 0; i < 6 && i < call->n_in; i++)
		if (call->in[i].dtype != AIR_F32)
			return false;
	for (int i = 0; i < call->n_out; i++)
		if (call->out[i].dtype != AIR_F32)
			return false;
	return call->n_in < 7 || call->in[KSDPB_MASK].dtype == AIR_F32 || call->in[KSDPB_MASK].dtype == AIR_BOOL;
}

static air_status job_make(const k_call *call, int nthreads, bwd_job *j)
{
	memset(j, 0, sizeof *j);
	AIR_TRY(ksdpb_geom_make(call, &j->g, &j->group));
	j->ep = pad_to(j->g.E > 0 ? j->g.E : 1, KATT_PAD);
	j->evp = pad_to(j->g.Ev > 0 ? j->g.Ev : 1, KATT_PAD);
	j->nqb = (j->g.L + BQ - 1) / BQ;
	chunks(&j->g, j->group, nthreads, &j->nkb, &j->nchunk, &j->kpc);
	layout(&j->g, j->ep, j->evp, j->nchunk, &j->lay);
	return AIR_OK;
}

static size_t bwd_ws(const k_call *call, int nthreads)
{
	bwd_job j;
	if (job_make(call, nthreads, &j) != AIR_OK)
		return 0;
	return (j.lay.prep + (size_t)(nthreads < 1 ? 1 : nthreads) * j.lay.slot) * sizeof(float) + 64;
}

static air_status bwd_run(const k_call *call)
{
	bwd_job j;
	AIR_TRY(job_make(call, rt_pool_size(call->pool), &j));
	j.ops = katt_ops_best();
	j.go = call->in[KSDPB_GRAD_OUT].data;
	j.q = call->in[KSDPB_Q].data;
	j.k = call->in[KSDPB_K].data;
	j.v = call->in[KSDPB_V].data;
	j.o = call->in[KSDPB_OUT].data;
	j.lse = call->in[KSDPB_LSE].data;
	j.mask = j.g.has_mask ? call->in[KSDPB_MASK].data : NULL;
	j.dq = call->out[0].data;
	j.dk = call->out[1].data;
	j.dv = call->out[2].data;
	j.scale = (float)j.g.scale;
	j.ws = call->workspace;
	j.slots = j.ws + j.lay.prep;
	if (j.g.batch == 0)
		return AIR_OK;
	rt_pool_run(call->pool, j.g.batch * j.nqb, prep_task, &j);
	rt_pool_run(call->pool, j.g.batch / j.group * j.nchunk, key_task, &j);
	rt_pool_run(call->pool, j.g.batch * j.nqb, dq_task, &j);
	return AIR_OK;
}

const k_kernel kfast_sdpa_backward_flash = {"sdpa_backward_flash", 0, bwd_supports, NULL, NULL, bwd_ws, bwd_run};

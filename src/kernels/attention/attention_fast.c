/* attention_fast.c - the fused sdpa kernel: one task per (leading index,
 * block of up to KATT_BQ queries); each task walks the keys in blocks of
 * KATT_BK (K^T and V of every block packed once beforehand, zero padded
 * to KATT_PAD, shared by all query blocks), computes the scores, updates
 * each row's running max and sum (online softmax), and accumulates P V into
 * a rescaled f32 accumulator. Scratch per thread is O(KATT_BQ * (KATT_BK +
 * Ev)), whatever L and S are; the packed copy is the size of K and V. Causal masking skips key
 * blocks past the last query of the task and cuts each row at its limit;
 * no mask is materialised. A row with no key left is 0 (torch's CPU flash
 * kernel) or NaN (decomposed softmax) as the empty_nan attribute says. */
#include "kernels/attention/attention_fast.h"

#include <math.h>
#include <string.h>

#include "core/error.h"
#include "kernels/attention/attention_ref.h"
#include "kernels/common/cpu.h"
#include "kernels/shape/transpose.h"

/* ---- portable inner loops ------------------------------------------------ */

static void qk_portable(const float *q, int64_t ldq, int rows, int64_t E, const float *kt, int np, float *s)
{
	for (int i = 0; i < rows; i++) {
		float *si = s + (size_t)i * np;
		for (int j = 0; j < np; j++)
			si[j] = 0.0f;
		for (int64_t e = 0; e < E; e++) {
			float a = q[i * ldq + e];
			const float *k = kt + e * np;
			for (int j = 0; j < np; j++)
				si[j] += a * k[j];
		}
	}
}

static void softmax_portable(float *s, int np, int n, float scale, const float *madd, const uint8_t *mbool,
			     float *m, float *l, float *alpha)
{
	float mx = -INFINITY;
	int any = 0;
	for (int j = 0; j < n; j++) {
		float x = s[j] * scale;
		if (madd)
			x += madd[j];
		if (mbool && !mbool[j])
			x = -INFINITY;
		s[j] = x;
		any |= x != -INFINITY;
		mx = x > mx ? x : mx;
	}
	for (int j = n; j < np; j++)
		s[j] = 0.0f;
	if (!any) {
		for (int j = 0; j < n; j++)
			s[j] = 0.0f;
		*alpha = 1.0f;
		return;
	}
	float mn = *m > mx ? *m : mx;
	float sum = 0.0f;
	for (int j = 0; j < n; j++) {
		float p = katt_weight(s[j] - mn); /* -inf - mn gives 0; NaN stays */
		s[j] = p;
		sum += p;
	}
	*alpha = katt_weight(*m - mn);
	*l = *l * *alpha + sum;
	*m = mn;
}

static void pv_portable(const float *p, int np, int rows, int bk, const float *vp, int64_t ldv, int evp, float *o,
			const float *alpha)
{
	for (int i = 0; i < rows; i++) {
		float *oi = o + (size_t)i * evp;
		const float *pi = p + (size_t)i * np;
		for (int c = 0; c < evp; c++)
			oi[c] *= alpha[i];
		for (int j = 0; j < bk; j++) {
			float a = pi[j];
			const float *v = vp + (size_t)j * ldv;
			for (int c = 0; c < evp; c++)
				oi[c] += a * v[c];
		}
	}
}

const katt_ops katt_ops_portable = {"portable", qk_portable, softmax_portable, NULL, pv_portable};

const katt_ops *katt_ops_best(void)
{
#ifdef AIR_HAVE_X86
	unsigned f = kcpu_features();
	if ((f & KCPU_AVX512F) && (f & KCPU_AVX512BW) && (f & KCPU_AVX512VL))
		return &katt_ops_avx512;
	if (f & KCPU_AVX2)
		return &katt_ops_avx2;
#endif
	return &katt_ops_portable;
}

/* ---- the driver ------------------------------------------------------------ */

static int64_t pad_to(int64_t n, int64_t m)
{
	return (n + m - 1) / m * m;
}

/* The workspace: first K^T and V of every key block of every leading index,
 * packed once (kt [E][np], then vp [BK][evp] per block; V only when its
 * rows are not KATT_PAD-wide already: packs_v) and shared
 * by all query blocks; then per-thread scratch: scores [BQ][BK],
 * accumulator [BQ][evp], m, l, alpha [BQ], a mask row [BK]. */
typedef struct att_layout {
	size_t block; /* bytes of one packed key block */
	size_t packed; /* bytes of all packed blocks */
	size_t s, o, m, l, alpha, mrow, slot; /* byte offsets in a slot; slot = its size */
} att_layout;

/* V is packed unless its rows are KATT_PAD-wide already (they are then
 * read in place, v_rs apart) */
static bool packs_v(const ksdpa_geom *g, int64_t evp)
{
	return evp != g->Ev;
}

static void att_layout_make(const ksdpa_geom *g, int64_t evp, att_layout *a)
{
	int64_t E = g->E;
	a->block = k_align64((size_t)((E > 0 ? E : 1) * KATT_BK + (packs_v(g, evp) ? KATT_BK * evp : 0)) *
			     sizeof(float));
	int64_t batch = g->batch, S = g->S;
	a->packed = a->block * (size_t)batch * (size_t)((S + KATT_BK - 1) / KATT_BK);
	size_t off = 0;
#define ATT_TAKE(field, floats)                                  \
	a->field = off;                                          \
	off += k_align64((size_t)(floats) * sizeof(float))
	ATT_TAKE(s, KATT_BQ * KATT_BK);
	ATT_TAKE(o, KATT_BQ * (evp > 0 ? evp : 1));
	ATT_TAKE(m, KATT_BQ);
	ATT_TAKE(l, KATT_BQ);
	ATT_TAKE(alpha, KATT_BQ);
	ATT_TAKE(mrow, KATT_BK);
#undef ATT_TAKE
	a->slot = k_align64(off + 64); /* a spare line between threads' slots */
}

typedef struct att_job {
	ksdpa_geom g;
	const katt_ops *ops;
	const float *q, *k, *v;
	const void *mask;
	float *out;
	float *lse; /* sdpa_lse's second output [batch, L], or NULL */
	int64_t bq, nqb, nkb, evp;
	att_layout lay;
	char *packed, *ws;
	float scale, empty;
} att_job;

/* K^T of keys [kb0, kb0 + bk) (rows ldk apart): kt[e][j], j padded to np
 * with zeros, in 8x8 register blocks (BERT-base's 12 heads at 128 tokens:
 * the packing phase took 31 us a call this way, 36 with a scalar loop, of
 * 300). */
static void pack_kt(const float *k, int64_t ldk, int64_t E, int bk, int np, float *kt)
{
	for (int64_t e = 0; e < E; e++)
		for (int j = bk; j < np; j++)
			kt[e * np + j] = 0.0f;
	ktranspose(k, ldk, kt, np, bk, E);
}

static void pack_v(const float *v, int64_t ldv, int64_t Ev, int bk, int64_t evp, float *vp)
{
	for (int j = 0; j < bk; j++) {
		memcpy(vp + j * evp, v + j * ldv, (size_t)Ev * sizeof(float));
		for (int64_t c = Ev; c < evp; c++)
			vp[j * evp + c] = 0.0f;
	}
}

static void pack_task(void *ctx, int64_t t, int thread)
{
	(void)thread;
	const att_job *j = ctx;
	const ksdpa_geom *g = &j->g;
	int64_t b = t / j->nkb, kb0 = (t % j->nkb) * KATT_BK;
	ksdpa_at at = ksdpa_offsets(g, b);
	int bk = (int)(g->S - kb0 < KATT_BK ? g->S - kb0 : KATT_BK);
	int np = (int)pad_to(bk, KATT_PAD);
	float *kt = (float *)(j->packed + (size_t)t * j->lay.block);
	pack_kt(j->k + at.k + kb0 * g->k_rs, g->k_rs, g->E, bk, np, kt);
	if (packs_v(g, j->evp))
		pack_v(j->v + at.v + kb0 * g->v_rs, g->v_rs, g->Ev, bk, j->evp, kt + g->E * np);
}

static void att_task(void *ctx, int64_t t, int thread)
{
	const att_job *j = ctx;
	const ksdpa_geom *g = &j->g;
	const att_layout *a = &j->lay;
	int64_t b = t / j->nqb, l0 = (t % j->nqb) * j->bq;
	int nq = (int)(j->bq < g->L - l0 ? j->bq : g->L - l0);
	int64_t E = g->E, Ev = g->Ev, evp = j->evp;
	ksdpa_at at = ksdpa_offsets(g, b);
	char *slot = j->ws + (size_t)thread * a->slot;
	float *s = (float *)(slot + a->s);
	float *o = (float *)(slot + a->o), *m = (float *)(slot + a->m), *l = (float *)(slot + a->l);
	float *alpha = (float *)(slot + a->alpha);
	void *mrow = slot + a->mrow;
	for (int64_t i = 0; i < (int64_t)nq * evp; i++)
		o[i] = 0.0f;
	for (int i = 0; i < nq; i++) {
		m[i] = -INFINITY;
		l[i] = 0.0f;
	}
	const float *q = j->q + at.q + l0 * g->q_rs;
	int64_t kend = g->S;
	if (g->causal && l0 + nq < kend)
		kend = l0 + nq; /* the task's last query sees keys up to l0 + nq - 1 */
	int64_t ml = g->has_mask ? g->m_st[g->nlead] : 0, ms = g->has_mask ? g->m_st[g->nlead + 1] : 0;
	for (int64_t kb0 = 0; kb0 < kend; kb0 += KATT_BK) {
		/* the block was packed with all its keys; causal use may take fewer */
		int bk_packed = (int)(g->S - kb0 < KATT_BK ? g->S - kb0 : KATT_BK);
		int bk = (int)(kend - kb0 < bk_packed ? kend - kb0 : bk_packed);
		int np = (int)pad_to(bk_packed, KATT_PAD);
		const float *kt = (const float *)(j->packed + (size_t)(b * j->nkb + kb0 / KATT_BK) * a->block);
		/* V rows already KATT_PAD wide are read in place */
		const float *vp = packs_v(g, evp) ? kt + E * np : j->v + at.v + kb0 * g->v_rs;
		const int64_t ldv = packs_v(g, evp) ? evp : g->v_rs;
		j->ops->qk(q, g->q_rs, nq, E, kt, np, s);
		if (j->ops->softmax_rows && !g->causal && ms <= 1) {
			/* every row has bk keys, its mask row in place (ms 1) or
			 * none (ms 0: a mask broadcast along the keys is gathered
			 * row by row below) */
			const char *mask = j->mask && ms == 1 ? (const char *)j->mask : NULL;
			const int64_t off = at.m + l0 * ml + kb0;
			const float *madd = mask && !g->mask_bool ? (const float *)mask + off : NULL;
			const uint8_t *mbool = mask && g->mask_bool ? (const uint8_t *)mask + off : NULL;
			if (!j->mask || mask) {
				j->ops->softmax_rows(s, np, nq, bk, j->scale, madd, mbool, ml, m, l, alpha);
				j->ops->pv(s, np, nq, bk, vp, ldv, (int)evp, o, alpha);
				continue;
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
				int64_t off = at.m + (l0 + i) * ml + kb0 * ms;
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
		j->ops->pv(s, np, nq, bk, vp, ldv, (int)evp, o, alpha);
	}
	float *out = j->out + at.o + l0 * g->o_rs;
	if (j->lse)
		for (int i = 0; i < nq; i++) /* -inf for a row with no key */
			j->lse[b * g->L + l0 + i] = l[i] == 0.0f ? -INFINITY : m[i] + logf(l[i]);
	for (int i = 0; i < nq; i++) {
		float *d = out + (int64_t)i * g->o_rs;
		const float *src = o + (int64_t)i * evp;
		if (l[i] == 0.0f) {
			for (int64_t c = 0; c < Ev; c++)
				d[c] = j->empty;
			continue;
		}
		float inv = 1.0f / l[i];
		for (int64_t c = 0; c < Ev; c++)
			d[c] = src[c] * inv;
	}
}

static bool flash_supports(const k_call *call)
{
	for (int i = 0; i < 3; i++)
		if (call->in[i].dtype != AIR_F32)
			return false;
	for (int i = 0; i < call->n_out; i++)
		if (call->out[i].dtype != AIR_F32)
			return false;
	return call->n_in < 4 || call->in[3].dtype == AIR_F32 || call->in[3].dtype == AIR_BOOL;
}

static size_t flash_ws(const k_call *call, int nthreads)
{
	ksdpa_geom g;
	if (ksdpa_geom_make(call, &g) != AIR_OK)
		return 0;
	att_layout a;
	att_layout_make(&g, pad_to(g.Ev, KATT_PAD), &a);
	return a.packed + (size_t)(nthreads < 1 ? 1 : nthreads) * a.slot;
}

static air_status flash_run(const k_call *call)
{
	att_job j;
	AIR_TRY(ksdpa_geom_make(call, &j.g));
	if (call->out[0].numel == 0)
		return AIR_OK;
	j.ops = katt_ops_best();
	j.q = call->in[0].data;
	j.k = call->in[1].data;
	j.v = call->in[2].data;
	j.mask = j.g.has_mask ? call->in[3].data : NULL;
	j.out = call->out[0].data;
	j.lse = call->n_out > 1 ? call->out[1].data : NULL;
	j.evp = pad_to(j.g.Ev, KATT_PAD);
	j.scale = (float)j.g.scale;
	j.empty = call->attrs[3].i ? NAN : 0.0f;
	att_layout_make(&j.g, j.evp, &j.lay);
	j.packed = call->workspace;
	j.ws = j.packed + j.lay.packed;
	j.nkb = (j.g.S + KATT_BK - 1) / KATT_BK;
	rt_pool_run(call->pool, j.g.batch * j.nkb, pack_task, &j);
	/* smaller query blocks when there would be too few tasks to share */
	int nthreads = rt_pool_size(call->pool);
	j.bq = KATT_BQ;
	while (j.bq > 16 && j.g.batch * ((j.g.L + j.bq - 1) / j.bq) < 4 * (int64_t)nthreads)
		j.bq /= 2;
	/* and blocks of even size: ViT-Tiny's 197 queries as 64, 64, 64 and
	 * 5 left one thread a 64-query task more than the other (its sdpa,
	 * 3 heads, 2 threads, hot: 164 -> 155 us as 50, 50, 50, 47) */
	j.nqb = (j.g.L + j.bq - 1) / j.bq;
	j.bq = (j.g.L + j.nqb - 1) / j.nqb;
	rt_pool_run(call->pool, j.g.batch * j.nqb, att_task, &j);
	return AIR_OK;
}

const k_kernel kfast_sdpa_flash = {"sdpa_flash", 0, flash_supports, NULL, NULL, flash_ws, flash_run};

/* test_attention_backward.c - training attention: sdpa_lse's log-sum-exp
 * (reference and fused kernel), the sdpa_backward reference against finite
 * differences of the f64 forward (the oracle checked by calculus), and the
 * blocked sdpa_backward kernel (on the ISA AIR_ISA leaves) against the
 * reference: odd L and S, head dims 32, 64, 80, 7 and 40 (and Ev != E), causal
 * and not, float masks broadcast several ways, bool masks, explicit scales,
 * grouped-query k/v heads (the oracle too), rank 3 and 4, on 1 and 2
 * threads (2 threads with one head cut the keys into chunks whose dq
 * partials are summed). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels/attention/attention_bwd_fast.h"
#include "kernels/attention/attention_bwd_ref.h"
#include "kernels/attention/attention_fast.h"
#include "kernels/common/cpu.h"
#include "ops/op.h"
#include "platform/pool.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static double urand(void) /* [-1, 1) */
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (double)(rng >> 40) / (double)(1u << 23) - 1.0;
}

static k_tensor tensor(void *data, air_dtype dt, int rank, const int64_t *dims)
{
	k_tensor t;
	memset(&t, 0, sizeof t);
	t.data = data;
	t.dtype = dt;
	t.rank = rank;
	t.numel = 1;
	for (int i = 0; i < rank; i++) {
		t.dims[i] = dims[i];
		t.numel *= dims[i];
	}
	return t;
}

static air_status run_kernel(const k_kernel *k, const k_call *proto, rt_pool *pool)
{
	k_call c = *proto;
	c.pool = pool;
	size_t ws = k->workspace ? k->workspace(&c, rt_pool_size(pool)) : 0;
	void *p = NULL;
	if (posix_memalign(&p, 64, ws ? ws : 64))
		return AIR_OUT_OF_MEMORY;
	c.workspace = p;
	air_status st = k->run(&c);
	free(p);
	return st;
}

typedef struct bcase {
	int rank; /* 3 or 4 */
	int64_t B, H, L, S, E, Ev;
	int mask;   /* 0 none, 1 float, 2 bool */
	int mrank;
	int64_t mdims[4];
	int causal;
	double scale;
	int64_t Hkv; /* k/v heads (rank 4; 0: H): grouped-query attention */
} bcase;

/* a case's tensors, in f32 or f64 */
typedef struct bdata {
	air_dtype dt;
	int r;
	int64_t qd[4], kd[4], vd[4], od[4], md[4];
	int64_t nq, nk, nv, no, nm;
	void *q, *k, *v, *mask, *o, *lse, *go;
} bdata;

static size_t esize(air_dtype dt)
{
	return dt == AIR_F64 ? 8 : dt == AIR_BOOL ? 1 : 4;
}

static void setd(void *p, air_dtype dt, int64_t i, double x)
{
	if (dt == AIR_F64)
		((double *)p)[i] = x;
	else
		((float *)p)[i] = (float)x;
}


static void data_make(const bcase *tc, air_dtype dt, bdata *d)
{
	memset(d, 0, sizeof *d);
	d->dt = dt;
	int r = d->r = tc->rank;
	int64_t lead[2] = {tc->B, tc->H};
	int nl = r - 2;
	for (int i = 0; i < nl; i++)
		d->qd[i] = d->kd[i] = d->vd[i] = d->od[i] = r == 4 ? lead[i] : tc->B * tc->H;
	if (r == 4 && tc->Hkv)
		d->kd[1] = d->vd[1] = tc->Hkv;
	d->qd[nl] = d->od[nl] = tc->L;
	d->kd[nl] = d->vd[nl] = tc->S;
	d->qd[nl + 1] = d->kd[nl + 1] = tc->E;
	d->vd[nl + 1] = d->od[nl + 1] = tc->Ev;
	d->nq = d->nk = d->nv = d->no = d->nm = 1;
	for (int i = 0; i < r; i++) {
		d->nq *= d->qd[i];
		d->nk *= d->kd[i];
		d->nv *= d->vd[i];
		d->no *= d->od[i];
	}
	for (int i = 0; i < tc->mrank; i++)
		d->nm *= tc->mdims[i];
	size_t es = esize(dt);
	d->q = malloc(es * (size_t)d->nq + 8);
	d->k = malloc(es * (size_t)d->nk + 8);
	d->v = malloc(es * (size_t)d->nv + 8);
	d->o = malloc(es * (size_t)d->no + 8);
	d->go = malloc(es * (size_t)d->no + 8);
	d->lse = malloc(es * (size_t)(d->nq / tc->E + 1) + 8);
	for (int64_t i = 0; i < d->nq; i++)
		setd(d->q, dt, i, urand() * 2.0);
	for (int64_t i = 0; i < d->nk; i++)
		setd(d->k, dt, i, urand());
	for (int64_t i = 0; i < d->nv; i++)
		setd(d->v, dt, i, urand());
	for (int64_t i = 0; i < d->no; i++)
		setd(d->go, dt, i, urand());
	if (tc->mask == 1) {
		d->mask = malloc(es * (size_t)d->nm + 8);
		for (int64_t i = 0; i < d->nm; i++) {
			double u = urand();
			setd(d->mask, dt, i, u < -0.7 ? -INFINITY : u * 2.0);
		}
	} else if (tc->mask == 2) {
		d->mask = malloc((size_t)d->nm + 8);
		for (int64_t i = 0; i < d->nm; i++)
			((uint8_t *)d->mask)[i] = urand() > -0.6;
	}
}

static void data_free(bdata *d)
{
	free(d->q);
	free(d->k);
	free(d->v);
	free(d->o);
	free(d->go);
	free(d->lse);
	free(d->mask);
}

/* the forward call (sdpa_lse: out, lse) on d's tensors */
typedef struct fwd_call {
	k_attr attrs[KSDPA_NATTRS];
	k_tensor in[4], out[2];
	k_call call;
} fwd_call;

static void fwd_make(const bcase *tc, bdata *d, fwd_call *f)
{
	memset(f, 0, sizeof *f);
	f->attrs[KSDPA_ATTR_SCALE].f = tc->scale;
	f->attrs[KSDPA_ATTR_CAUSAL].i = tc->causal;
	f->attrs[KSDPA_ATTR_HAS_MASK].i = tc->mask != 0;
	f->in[0] = tensor(d->q, d->dt, d->r, d->qd);
	f->in[1] = tensor(d->k, d->dt, d->r, d->kd);
	f->in[2] = tensor(d->v, d->dt, d->r, d->vd);
	if (tc->mask)
		f->in[3] = tensor(d->mask, tc->mask == 2 ? AIR_BOOL : d->dt, tc->mrank, tc->mdims);
	f->out[0] = tensor(d->o, d->dt, d->r, d->od);
	f->out[1] = tensor(d->lse, d->dt, d->r - 1, d->qd);
	f->call.attrs = f->attrs;
	f->call.in = f->in;
	f->call.n_in = tc->mask ? 4 : 3;
	f->call.out = f->out;
	f->call.n_out = 2;
}

/* the backward call on d's tensors, writing dq, dk, dv */
typedef struct bwd_call {
	k_attr attrs[KSDPB_NATTRS];
	k_tensor in[7], out[3];
	k_call call;
} bwd_call;

static void bwd_make(const bcase *tc, bdata *d, void *dq, void *dk, void *dv, bwd_call *b)
{
	memset(b, 0, sizeof *b);
	b->attrs[KSDPB_ATTR_SCALE].f = tc->scale;
	b->attrs[KSDPB_ATTR_CAUSAL].i = tc->causal;
	b->attrs[KSDPB_ATTR_HAS_MASK].i = tc->mask != 0;
	b->in[KSDPB_GRAD_OUT] = tensor(d->go, d->dt, d->r, d->od);
	b->in[KSDPB_Q] = tensor(d->q, d->dt, d->r, d->qd);
	b->in[KSDPB_K] = tensor(d->k, d->dt, d->r, d->kd);
	b->in[KSDPB_V] = tensor(d->v, d->dt, d->r, d->vd);
	b->in[KSDPB_OUT] = tensor(d->o, d->dt, d->r, d->od);
	b->in[KSDPB_LSE] = tensor(d->lse, d->dt, d->r - 1, d->qd);
	if (tc->mask)
		b->in[KSDPB_MASK] = tensor(d->mask, tc->mask == 2 ? AIR_BOOL : d->dt, tc->mrank, tc->mdims);
	b->out[0] = tensor(dq, d->dt, d->r, d->qd);
	b->out[1] = tensor(dk, d->dt, d->r, d->kd);
	b->out[2] = tensor(dv, d->dt, d->r, d->vd);
	b->call.attrs = b->attrs;
	b->call.in = b->in;
	b->call.n_in = tc->mask ? 7 : 6;
	b->call.out = b->out;
	b->call.n_out = 3;
}

/* worst |a - b| over n floats, relative to 1 + the largest |b| */
static double worst_err(const float *a, const float *b, int64_t n, int *nan_mismatch)
{
	double worst = 0, big = 0;
	for (int64_t i = 0; i < n; i++)
		big = fabs(b[i]) > big && !isinf(b[i]) ? fabs(b[i]) : big;
	for (int64_t i = 0; i < n; i++) {
		if (isnan(a[i]) || isnan(b[i]) || isinf(a[i]) || isinf(b[i])) {
			*nan_mismatch += !(isnan(a[i]) && isnan(b[i])) && a[i] != b[i];
			continue;
		}
		double e = fabs((double)a[i] - b[i]) / (1.0 + big);
		worst = e > worst ? e : worst;
	}
	return worst;
}

static int ncases;

static void print_case(const bcase *tc, const char *what, double err)
{
	fprintf(stderr, "  rank %d B %lld H %lld/%lld L %lld S %lld E %lld Ev %lld mask %d/%d causal %d scale %g: %s %g\n",
		tc->rank, (long long)tc->B, (long long)tc->H, (long long)tc->Hkv, (long long)tc->L, (long long)tc->S,
		(long long)tc->E, (long long)tc->Ev, tc->mask, tc->mrank, tc->causal, tc->scale, what, err);
}

/* f32: the fused forward's out and lse against the reference's; then the
 * blocked backward against the reference backward, on 1 and 2 threads */
static void run_case(const bcase *tc, rt_pool *p1, rt_pool *p2)
{
	bdata d;
	data_make(tc, AIR_F32, &d);
	fwd_call f;
	fwd_make(tc, &d, &f);
	CHECK(kfast_sdpa_flash.supports(&f.call));
	CHECK_OK(run_kernel(&kfast_sdpa_flash, &f.call, p2));
	int64_t nrows = d.nq / tc->E;
	float *o_fast = malloc(sizeof(float) * (size_t)d.no + 8), *lse_fast = malloc(sizeof(float) * (size_t)nrows + 8);
	memcpy(o_fast, d.o, sizeof(float) * (size_t)d.no);
	memcpy(lse_fast, d.lse, sizeof(float) * (size_t)nrows);
	CHECK_OK(run_kernel(&op_get(OP_sdpa_lse)->ref, &f.call, p1));
	int nanbad = 0;
	double eo = worst_err(o_fast, d.o, d.no, &nanbad), el = worst_err(lse_fast, d.lse, nrows, &nanbad);
	CHECK(eo <= 2e-5 && el <= 2e-5 && nanbad == 0);
	if (!(eo <= 2e-5 && el <= 2e-5 && nanbad == 0))
		print_case(tc, "forward out/lse error", eo > el ? eo : el);
	/* the backward from the reference's out and lse */
	size_t bq = sizeof(float) * (size_t)d.nq + 8, bk = sizeof(float) * (size_t)d.nk + 8;
	size_t bv = sizeof(float) * (size_t)d.nv + 8;
	float *rq = malloc(bq), *rk = malloc(bk), *rv = malloc(bv), *fq = malloc(bq), *fk = malloc(bk), *fv = malloc(bv);
	bwd_call b;
	bwd_make(tc, &d, rq, rk, rv, &b);
	CHECK(kfast_sdpa_backward_flash.supports(&b.call));
	CHECK_OK(run_kernel(&op_get(OP_sdpa_backward)->ref, &b.call, p1));
	for (int t = 0; t < 2; t++) {
		for (int64_t i = 0; i < d.nq; i++)
			fq[i] = 1234.0f;
		for (int64_t i = 0; i < d.nk; i++)
			fk[i] = 1234.0f;
		for (int64_t i = 0; i < d.nv; i++)
			fv[i] = 1234.0f;
		bwd_make(tc, &d, fq, fk, fv, &b);
		CHECK_OK(run_kernel(&kfast_sdpa_backward_flash, &b.call, t ? p2 : p1));
		nanbad = 0;
		double e = worst_err(fq, rq, d.nq, &nanbad), e2 = worst_err(fk, rk, d.nk, &nanbad);
		double e3 = worst_err(fv, rv, d.nv, &nanbad);
		double w = e > e2 ? e : e2;
		w = w > e3 ? w : e3;
		CHECK(w <= 5e-5 && nanbad == 0);
		if (!(w <= 5e-5 && nanbad == 0)) {
			print_case(tc, t ? "2 threads: backward error" : "1 thread: backward error", w);
			fprintf(stderr, "    dq %g dk %g dv %g, %d NaN/inf mismatches\n", e, e2, e3, nanbad);
		}
	}
	ncases++;
	free(o_fast);
	free(lse_fast);
	free(rq);
	free(rk);
	free(rv);
	free(fq);
	free(fk);
	free(fv);
	data_free(&d);
}

/* loss = sum(out * go) by the f64 reference forward */
static double loss_f64(const bcase *tc, bdata *d, rt_pool *p)
{
	fwd_call f;
	fwd_make(tc, d, &f);
	CHECK_OK(run_kernel(&op_get(OP_sdpa_lse)->ref, &f.call, p));
	double s = 0;
	for (int64_t i = 0; i < d->no; i++)
		s += ((double *)d->o)[i] * ((double *)d->go)[i];
	return s;
}

/* The reference backward in f64 against central differences of the f64
 * reference forward, every element of q, k and v. */
static void check_oracle(const bcase *tc, rt_pool *p)
{
	bdata d;
	data_make(tc, AIR_F64, &d);
	double *g[3], *x[3] = {d.q, d.k, d.v};
	int64_t n[3] = {d.nq, d.nk, d.nv};
	for (int i = 0; i < 3; i++)
		g[i] = malloc(sizeof(double) * (size_t)n[i] + 8);
	loss_f64(tc, &d, p); /* out and lse for the backward */
	bwd_call b;
	bwd_make(tc, &d, g[0], g[1], g[2], &b);
	CHECK_OK(run_kernel(&op_get(OP_sdpa_backward)->ref, &b.call, p));
	double worst = 0;
	const double h = 1e-6;
	for (int t = 0; t < 3; t++)
		for (int64_t i = 0; i < n[t]; i++) {
			double keep = x[t][i];
			x[t][i] = keep + h;
			double up = loss_f64(tc, &d, p);
			x[t][i] = keep - h;
			double down = loss_f64(tc, &d, p);
			x[t][i] = keep;
			double fd = (up - down) / (2 * h), e = fabs(fd - g[t][i]) / (1.0 + fabs(fd));
			worst = e > worst ? e : worst;
		}
	CHECK(worst <= 1e-6);
	if (!(worst <= 1e-6))
		print_case(tc, "f64 reference against finite differences", worst);
	for (int i = 0; i < 3; i++)
		free(g[i]);
	data_free(&d);
}

static void set_mask(bcase *c, int kind, int mrank, int64_t m0, int64_t m1, int64_t m2, int64_t m3)
{
	int64_t md[4] = {m0, m1, m2, m3};
	c->mask = kind;
	c->mrank = mrank;
	memcpy(c->mdims, md, sizeof md);
}

/* variant v of a [B, H, L, S] case: 0 plain, 1 causal, 2 float mask [L, S],
 * 3 float mask [B, 1, 1, S] with a scale, 4 bool mask [B, H, L, S],
 * 5 causal with a float mask [B, H, L, S] */
static void variant(bcase *c, int v)
{
	c->causal = v == 1 || v == 5;
	c->scale = v == 3 ? 0.2 : v == 5 ? 0.45 : 0.0;
	switch (v) {
	case 2: set_mask(c, 1, 2, c->L, c->S, 0, 0); break;
	case 3: set_mask(c, 1, 4, c->B, 1, 1, c->S); break;
	case 4: set_mask(c, 2, 4, c->B, c->H, c->L, c->S); break;
	case 5: set_mask(c, 1, 4, c->B, c->H, c->L, c->S); break;
	default: break;
	}
}

int main(void)
{
	rt_pool *p1 = NULL, *p2 = NULL;
	CHECK_OK(rt_pool_create(1, &p1));
	CHECK_OK(rt_pool_create(2, &p2));
	printf("attention ops: %s (cpu %s)\n", katt_ops_best()->name, kcpu_isa_name());
	for (int v = 0; v < 6; v++) {
		bcase c = {4, 2, 2, 5, 7, 3, 4, 0, 0, {0}, 0, 0.0, 0};
		variant(&c, v);
		check_oracle(&c, p1);
		c.H = 4; /* grouped-query: 2 q heads a k/v head */
		c.Hkv = 2;
		if (c.mrank == 4 && c.mdims[1] != 1)
			c.mdims[1] = 4;
		check_oracle(&c, p1);
	}
	/* head dims not a multiple of 16 take the packed q / dO rows; the others are read in place */
	static const int64_t dims[][2] = {{32, 32}, {64, 64}, {80, 80}, {64, 48}, {7, 7}, {40, 24}};
	static const int64_t lens[][2] = {{1, 1}, {7, 7}, {67, 67}, {129, 129}, {33, 150}, {150, 33}, {197, 197}};
	for (size_t ie = 0; ie < sizeof dims / sizeof dims[0]; ie++)
		for (size_t il = 0; il < sizeof lens / sizeof lens[0]; il++)
			for (int v = 0; v < 6; v++) {
				/* one head (chunks of keys on 2 threads) or 2 x 3 */
				int one = (int)((ie + il + (size_t)v) % 2);
				bcase c = {4, one ? 1 : 2, one ? 1 : 3, lens[il][0], lens[il][1], dims[ie][0], dims[ie][1],
					   0, 0, {0}, 0, 0.0, 0};
				variant(&c, v);
				run_case(&c, p1, p2);
			}
	/* grouped-query: 6 q heads on 2 or 1 k/v heads, one batch (chunks of keys) or 2 */
	for (int v = 0; v < 6; v++) {
		bcase c = {4, 1 + v % 2, 6, 67, 150, 64, 64, 0, 0, {0}, 0, 0.0, v < 3 ? 2 : 1};
		variant(&c, v);
		run_case(&c, p1, p2);
	}
	bcase r3 = {3, 3, 1, 45, 70, 16, 16, 0, 0, {0}, 1, 0.0, 0}; /* rank 3, causal */
	run_case(&r3, p1, p2);
	set_mask(&r3, 1, 2, 45, 1, 0, 0); /* a mask broadcast along the keys */
	r3.causal = 0;
	run_case(&r3, p1, p2);
	printf("%d cases\n", ncases);
	rt_pool_destroy(p1);
	rt_pool_destroy(p2);
	return check_report("test_attention_backward");
}

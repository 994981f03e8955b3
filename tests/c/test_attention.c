/* test_attention.c - the fused sdpa kernel (kernels/attention_fast.c, on the
 * ISA that AIR_ISA leaves) against the reference kernel: head dims 1 to
 * 128, L != S, sequence lengths 1, 3, 129, float masks broadcast every way
 * ([L,S], [B,1,1,S], [B,H,L,S], [L,1]), bool masks, causal (L < S, L > S,
 * with a mask), grouped-query k/v, explicit scales, rows with every key
 * excluded (0 or NaN by empty_nan), NaN in the inputs, on 1 and 2 threads. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels/attention_fast.h"
#include "kernels/cpu.h"
#include "kernels/ref/linalg.h"
#include "ops/op.h"
#include "runtime/pool.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float urand(void) /* [-1, 1) */
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (float)((double)(rng >> 40) / (double)(1u << 23) - 1.0);
}

typedef struct att_case {
	int rank;                /* 3 or 4 */
	int64_t B, H, Hkv, L, S, E, Ev;
	int mask;                /* 0 none, 1 float, 2 bool */
	int mrank;               /* mask rank */
	int64_t mdims[4];        /* mask dims */
	int causal;
	double scale;            /* 0: 1/sqrt(E) */
	int empty_nan;
	int empty_rows;          /* mask some rows out entirely */
	float qmul;              /* spread of the scores */
	int nan_at;              /* put a NaN in q at this flat index + 1 (0: none) */
} att_case;

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

static void *aligned(size_t n)
{
	void *p = NULL;
	if (posix_memalign(&p, 64, n ? n : 64))
		return NULL;
	return p;
}

static air_status run_kernel(const k_kernel *k, const k_call *proto, rt_pool *pool)
{
	k_call c = *proto;
	c.pool = pool;
	size_t ws = k->workspace ? k->workspace(&c, rt_pool_size(pool)) : 0;
	c.workspace = aligned(ws);
	air_status st = k->run(&c);
	free(c.workspace);
	return st;
}

static int checked_cases;

static void run_case(const att_case *tc, rt_pool *pool1, rt_pool *pool2)
{
	int r = tc->rank;
	int64_t qd[4], kd[4], vd[4], od[4];
	if (r == 4) {
		int64_t q4[4] = {tc->B, tc->H, tc->L, tc->E}, k4[4] = {tc->B, tc->Hkv, tc->S, tc->E};
		int64_t v4[4] = {tc->B, tc->Hkv, tc->S, tc->Ev}, o4[4] = {tc->B, tc->H, tc->L, tc->Ev};
		memcpy(qd, q4, sizeof q4);
		memcpy(kd, k4, sizeof k4);
		memcpy(vd, v4, sizeof v4);
		memcpy(od, o4, sizeof o4);
	} else {
		int64_t q3[3] = {tc->B, tc->L, tc->E}, k3[3] = {tc->B, tc->S, tc->E}, v3[3] = {tc->B, tc->S, tc->Ev};
		int64_t o3[3] = {tc->B, tc->L, tc->Ev};
		memcpy(qd, q3, sizeof q3);
		memcpy(kd, k3, sizeof k3);
		memcpy(vd, v3, sizeof v3);
		memcpy(od, o3, sizeof o3);
	}
	k_tensor in[4];
	int64_t nq = 1, nk = 1, nv = 1, no = 1, nm = 1;
	for (int d = 0; d < r; d++) {
		nq *= qd[d];
		nk *= kd[d];
		nv *= vd[d];
		no *= od[d];
	}
	for (int d = 0; d < tc->mrank; d++)
		nm *= tc->mdims[d];
	float *q = malloc(sizeof(float) * (size_t)(nq + 1)), *k = malloc(sizeof(float) * (size_t)(nk + 1));
	float *v = malloc(sizeof(float) * (size_t)(nv + 1));
	for (int64_t i = 0; i < nq; i++)
		q[i] = urand() * tc->qmul;
	for (int64_t i = 0; i < nk; i++)
		k[i] = urand();
	for (int64_t i = 0; i < nv; i++)
		v[i] = urand();
	if (tc->nan_at && tc->nan_at - 1 < nq)
		q[tc->nan_at - 1] = NAN;
	void *mask = NULL;
	if (tc->mask) {
		int64_t last = tc->mdims[tc->mrank - 1], rowlen = last;
		int64_t nrows = nm / (rowlen > 0 ? rowlen : 1);
		if (tc->mask == 1) {
			float *m = malloc(sizeof(float) * (size_t)(nm + 1));
			for (int64_t i = 0; i < nm; i++) {
				float u = urand();
				m[i] = u < -0.6f ? -INFINITY : u < -0.4f ? -3.0e38f : u * 2.0f;
			}
			if (tc->empty_rows)
				for (int64_t row = 0; row < nrows; row += 3)
					for (int64_t c = 0; c < rowlen; c++)
						m[row * rowlen + c] = -INFINITY;
			mask = m;
		} else {
			uint8_t *m = malloc((size_t)(nm + 1));
			for (int64_t i = 0; i < nm; i++)
				m[i] = urand() > -0.5f;
			if (tc->empty_rows)
				for (int64_t row = 0; row < nrows; row += 3)
					for (int64_t c = 0; c < rowlen; c++)
						m[row * rowlen + c] = 0;
			mask = m;
		}
	}
	float *out_ref = malloc(sizeof(float) * (size_t)(no + 1)), *out = malloc(sizeof(float) * (size_t)(no + 1));
	in[0] = tensor(q, AIR_F32, r, qd);
	in[1] = tensor(k, AIR_F32, r, kd);
	in[2] = tensor(v, AIR_F32, r, vd);
	if (mask)
		in[3] = tensor(mask, tc->mask == 2 ? AIR_BOOL : AIR_F32, tc->mrank, tc->mdims);
	k_attr attrs[4];
	memset(attrs, 0, sizeof attrs);
	attrs[0].f = tc->scale;
	attrs[1].i = tc->causal;
	attrs[2].i = mask != NULL;
	attrs[3].i = tc->empty_nan;
	k_tensor ot = tensor(out_ref, AIR_F32, r, od);
	bool in_const[4] = {false, false, false, false};
	k_call call;
	memset(&call, 0, sizeof call);
	call.attrs = attrs;
	call.in = in;
	call.n_in = mask ? 4 : 3;
	call.out = &ot;
	call.n_out = 1;
	call.in_const = in_const;
	CHECK(kfast_sdpa_flash.supports(&call));
	CHECK_OK(run_kernel(&op_get(OP_sdpa)->ref, &call, pool1));
	double worst = 0;
	int bad = 0;
	for (int t = 0; t < 2; t++) {
		ot.data = out;
		for (int64_t i = 0; i < no; i++)
			out[i] = 12345.0f;
		CHECK_OK(run_kernel(&kfast_sdpa_flash, &call, t ? pool2 : pool1));
		ot.data = out_ref;
		for (int64_t i = 0; i < no; i++) {
			float a = out[i], b = out_ref[i];
			if (isnan(a) || isnan(b)) {
				bad += isnan(a) != isnan(b);
				continue;
			}
			double err = fabs((double)a - (double)b) / (1.0 + fabs((double)b));
			worst = err > worst ? err : worst;
		}
	}
	checked_cases++;
	CHECK(bad == 0);
	CHECK(worst <= 2e-5);
	if (bad || worst > 2e-5)
		fprintf(stderr,
			"  case rank %d B %lld H %lld/%lld L %lld S %lld E %lld Ev %lld mask %d/%d causal %d scale %g "
			"empty %d/%d nan %d: %d NaN mismatches, worst %g\n",
			r, (long long)tc->B, (long long)tc->H, (long long)tc->Hkv, (long long)tc->L, (long long)tc->S,
			(long long)tc->E, (long long)tc->Ev, tc->mask, tc->mrank, tc->causal, tc->scale, tc->empty_rows,
			tc->empty_nan, tc->nan_at, bad, worst);
	free(q);
	free(k);
	free(v);
	free(mask);
	free(out);
	free(out_ref);
}

/* The head dims and lengths every mask kind is tried with. */
static const int64_t dims_e[] = {1, 7, 32, 64, 65, 80, 128};
static const int64_t lens[][2] = {{1, 1}, {3, 3}, {129, 129}, {1, 129}, {129, 3}, {17, 64}, {64, 65}, {5, 130}};

static void test_shapes(rt_pool *p1, rt_pool *p2)
{
	for (size_t ie = 0; ie < sizeof dims_e / sizeof dims_e[0]; ie++)
		for (size_t il = 0; il < sizeof lens / sizeof lens[0]; il++)
			for (int variant = 0; variant < 6; variant++) {
				att_case c;
				memset(&c, 0, sizeof c);
				c.rank = 4;
				c.B = 2;
				c.H = c.Hkv = 3;
				c.L = lens[il][0];
				c.S = lens[il][1];
				c.E = dims_e[ie];
				c.Ev = (variant & 1) ? dims_e[(ie + 3) % 7] : c.E;
				c.qmul = variant >= 4 ? 4.0f : 1.0f;
				switch (variant) {
				case 0: break;
				case 1:
					c.mask = 1;
					c.mrank = 2;
					c.mdims[0] = c.L;
					c.mdims[1] = c.S;
					break;
				case 2:
					c.mask = 1;
					c.mrank = 4;
					c.mdims[0] = c.B;
					c.mdims[1] = 1;
					c.mdims[2] = 1;
					c.mdims[3] = c.S;
					break;
				case 3:
					c.mask = 2;
					c.mrank = 4;
					c.mdims[0] = c.B;
					c.mdims[1] = c.H;
					c.mdims[2] = c.L;
					c.mdims[3] = c.S;
					break;
				case 4: c.causal = 1; break;
				case 5:
					c.causal = 1;
					c.mask = 1;
					c.mrank = 4;
					c.mdims[0] = c.B;
					c.mdims[1] = c.H;
					c.mdims[2] = c.L;
					c.mdims[3] = c.S;
					c.scale = 0.3;
					break;
				}
				run_case(&c, p1, p2);
			}
}

static void test_special(rt_pool *p1, rt_pool *p2)
{
	att_case c;
	/* rank 3, a scale, bool [L, S] */
	memset(&c, 0, sizeof c);
	c.rank = 3;
	c.B = 5;
	c.H = c.Hkv = 1;
	c.L = 70;
	c.S = 131;
	c.E = 24;
	c.Ev = 9;
	c.qmul = 1;
	c.scale = 1.7;
	c.mask = 2;
	c.mrank = 2;
	c.mdims[0] = c.L;
	c.mdims[1] = c.S;
	run_case(&c, p1, p2);
	/* a mask broadcast along the keys: [L, 1] (stride 0 over S) */
	c.mask = 1;
	c.mdims[1] = 1;
	run_case(&c, p1, p2);
	/* grouped-query k/v, causal, float [B, 1, L, S] */
	memset(&c, 0, sizeof c);
	c.rank = 4;
	c.B = 2;
	c.H = 8;
	c.Hkv = 2;
	c.L = 100;
	c.S = 100;
	c.E = c.Ev = 64;
	c.qmul = 2;
	c.causal = 1;
	c.mask = 1;
	c.mrank = 4;
	c.mdims[0] = c.B;
	c.mdims[1] = 1;
	c.mdims[2] = c.L;
	c.mdims[3] = c.S;
	run_case(&c, p1, p2);
	/* rows with every key excluded: float and bool masks, zeros and NaN */
	for (int kind = 1; kind <= 2; kind++)
		for (int en = 0; en < 2; en++) {
			memset(&c, 0, sizeof c);
			c.rank = 4;
			c.B = 1;
			c.H = 2;
			c.Hkv = 2;
			c.L = 67;
			c.S = 129;
			c.E = c.Ev = 32;
			c.qmul = 1;
			c.mask = kind;
			c.mrank = 2;
			c.mdims[0] = c.L;
			c.mdims[1] = c.S;
			c.empty_rows = 1;
			c.empty_nan = en;
			run_case(&c, p1, p2);
		}
	/* NaN in q: that row is NaN, the others are not */
	memset(&c, 0, sizeof c);
	c.rank = 4;
	c.B = 1;
	c.H = c.Hkv = 2;
	c.L = 9;
	c.S = 70;
	c.E = c.Ev = 16;
	c.qmul = 1;
	c.nan_at = 40;
	run_case(&c, p1, p2);
	/* BERT and a long sequence */
	memset(&c, 0, sizeof c);
	c.rank = 4;
	c.B = 1;
	c.H = c.Hkv = 12;
	c.L = c.S = 128;
	c.E = c.Ev = 64;
	c.qmul = 1;
	c.mask = 1;
	c.mrank = 4;
	c.mdims[0] = 1;
	c.mdims[1] = 1;
	c.mdims[2] = 1;
	c.mdims[3] = c.S;
	run_case(&c, p1, p2);
	c.L = c.S = 1024;
	c.H = c.Hkv = 2;
	c.mask = 0;
	c.mrank = 0;
	c.causal = 1;
	run_case(&c, p1, p2);
}

int main(void)
{
	rt_pool *p1 = NULL, *p2 = NULL;
	CHECK_OK(rt_pool_create(1, &p1));
	CHECK_OK(rt_pool_create(2, &p2));
	printf("attention ops: %s (cpu %s)\n", katt_ops_best()->name, kcpu_isa_name());
	test_shapes(p1, p2);
	test_special(p1, p2);
	printf("%d cases\n", checked_cases);
	rt_pool_destroy(p1);
	rt_pool_destroy(p2);
	return check_report("test_attention");
}

/* test_attention.c - the fused sdpa kernel (kernels/attention/attention_fast.c, on the
 * ISA that AIR_ISA leaves) against the reference kernel: head dims 1 to
 * 128, L != S, sequence lengths 1, 3, 129, float masks broadcast every way
 * ([L,S], [B,1,1,S], [B,H,L,S], [L,1]), bool masks, causal (L < S, L > S,
 * with a mask), grouped-query k/v, explicit scales, rows with every key
 * excluded (0 or NaN by empty_nan), NaN in the inputs, on 1 and 2 threads;
 * and q, k, v read through strided views (q_view, k_view, v_view) and the
 * output written [B, L, H, Ev] (out_bshd), against the dense call. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels/attention/attention_fast.h"
#include "kernels/attention/attention_ref.h"
#include "kernels/common/cpu.h"
#include "kernels/matmul/matmul_ref.h"
#include "ops/op.h"
#include "platform/pool.h"

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
	k_attr attrs[KSDPA_NATTRS];
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

/* ---- views ----------------------------------------------------------------- */

/* A rank-4 operand [B, H, T, D] stored the way a projection leaves it: the
 * rows of every head side by side, W floats a row (W >= H * D, the rest
 * other data), starting at element `at`; so element [b, h, t, d] is at
 * at + (b * T + t) * W + h * D + d. Returns the buffer (numel in *n); dense
 * is the same operand, contiguous. */
static float *strided_copy(const float *dense, int64_t B, int64_t H, int64_t T, int64_t D, int64_t W, int64_t at,
			   int64_t *n, int64_t view[KSDPA_VIEW_INTS])
{
	*n = at + B * T * W + 5; /* a few floats past the last row */
	float *buf = malloc(sizeof(float) * (size_t)*n);
	for (int64_t i = 0; i < *n; i++)
		buf[i] = 777.0f; /* what the view must not read */
	for (int64_t b = 0; b < B; b++)
		for (int64_t h = 0; h < H; h++)
			for (int64_t t = 0; t < T; t++)
				memcpy(buf + at + (b * T + t) * W + h * D, dense + ((b * H + h) * T + t) * D,
				       sizeof(float) * (size_t)D);
	int64_t v[KSDPA_VIEW_INTS] = {at, B, H, T, D, T * W, D, W};
	memcpy(view, v, sizeof v);
	return buf;
}

/* An sdpa call over q, k, v (three inputs, no mask) into out. */
static k_call sdpa_call(const k_attr *attrs, const k_tensor *in, const k_tensor *out, const bool *in_const)
{
	k_call call;
	memset(&call, 0, sizeof call);
	call.attrs = attrs;
	call.in = in;
	call.n_in = 3;
	call.out = out;
	call.n_out = 1;
	call.in_const = in_const;
	return call;
}

static int view_cases;

/* One sdpa through views against the same sdpa dense: the reference
 * kernel must give the same bits, the fast one the same values within
 * 2e-5 (as run_case). pad: extra floats per row past the heads. */
static void run_view_case(int64_t B, int64_t H, int64_t Hkv, int64_t L, int64_t S, int64_t E, int64_t Ev,
			  int which, int bshd, int64_t pad, int causal, rt_pool *pool)
{
	int64_t qd[4] = {B, H, L, E}, kd[4] = {B, Hkv, S, E}, vd[4] = {B, Hkv, S, Ev}, od[4] = {B, H, L, Ev};
	int64_t nq = B * H * L * E, nk = B * Hkv * S * E, nv = B * Hkv * S * Ev, no = B * H * L * Ev;
	float *dense[3] = {malloc(sizeof(float) * (size_t)nq), malloc(sizeof(float) * (size_t)nk),
			   malloc(sizeof(float) * (size_t)nv)};
	int64_t counts[3] = {nq, nk, nv};
	for (int i = 0; i < 3; i++)
		for (int64_t x = 0; x < counts[i]; x++)
			dense[i][x] = urand();
	float *want = malloc(sizeof(float) * (size_t)no), *got = malloc(sizeof(float) * (size_t)no);
	float *bshd_out = malloc(sizeof(float) * (size_t)no);
	k_attr attrs[KSDPA_NATTRS];
	memset(attrs, 0, sizeof attrs);
	attrs[KSDPA_ATTR_CAUSAL].i = causal;
	k_tensor in[3] = {tensor(dense[0], AIR_F32, 4, qd), tensor(dense[1], AIR_F32, 4, kd),
			  tensor(dense[2], AIR_F32, 4, vd)};
	k_tensor out = tensor(want, AIR_F32, 4, od);
	bool in_const[3] = {false, false, false};
	k_call call = sdpa_call(attrs, in, &out, in_const);
	CHECK_OK(run_kernel(&op_get(OP_sdpa)->ref, &call, pool));
	/* the operands in `which` (bits 0 q, 1 k, 2 v) through views */
	float *bufs[3] = {NULL, NULL, NULL};
	int64_t views[3][KSDPA_VIEW_INTS];
	const int64_t heads[3] = {H, Hkv, Hkv}, rows[3] = {L, S, S}, widths[3] = {E, E, Ev};
	for (int i = 0; i < 3; i++) {
		if (!(which & (1 << i)))
			continue;
		int64_t n, W = heads[i] * widths[i] + pad, at = 3 * i + 1;
		bufs[i] = strided_copy(dense[i], B, heads[i], rows[i], widths[i], W, at, &n, views[i]);
		int64_t flat[1] = {n};
		in[i] = tensor(bufs[i], AIR_F32, 1, flat);
		attrs[KSDPA_ATTR_Q_VIEW + i].ints = views[i];
		attrs[KSDPA_ATTR_Q_VIEW + i].n = KSDPA_VIEW_INTS;
	}
	int64_t bd[4] = {B, L, H, Ev};
	attrs[KSDPA_ATTR_OUT_BSHD].i = bshd;
	for (int fast = 0; fast < 2; fast++) {
		float *dst = bshd ? bshd_out : got;
		for (int64_t x = 0; x < no; x++)
			dst[x] = 12345.0f;
		out = tensor(dst, AIR_F32, 4, bshd ? bd : od);
		CHECK_OK(run_kernel(fast ? &kfast_sdpa_flash : &op_get(OP_sdpa)->ref, &call, pool));
		if (bshd) /* back to [B, H, L, Ev] */
			for (int64_t b = 0; b < B; b++)
				for (int64_t h = 0; h < H; h++)
					for (int64_t l = 0; l < L; l++)
						memcpy(got + ((b * H + h) * L + l) * Ev, bshd_out + ((b * L + l) * H + h) * Ev,
						       sizeof(float) * (size_t)Ev);
		double worst = 0;
		for (int64_t x = 0; x < no; x++) {
			double err = fabs((double)got[x] - (double)want[x]);
			worst = err > worst ? err : worst;
		}
		if (fast ? worst > 2e-5 : worst != 0)
			fprintf(stderr, "  view case B %lld H %lld/%lld L %lld S %lld E %lld Ev %lld views %d bshd %d: "
					"%s worst %g\n",
				(long long)B, (long long)H, (long long)Hkv, (long long)L, (long long)S, (long long)E,
				(long long)Ev, which, bshd, fast ? "fast" : "ref", worst);
		CHECK(fast ? worst <= 2e-5 : worst == 0);
	}
	view_cases++;
	for (int i = 0; i < 3; i++) {
		free(dense[i]);
		free(bufs[i]);
	}
	free(want);
	free(got);
	free(bshd_out);
}

/* A view that reaches past its input, or has the wrong length, fails the
 * call (both kernels) instead of reading outside the buffer. */
static void test_bad_views(rt_pool *pool)
{
	int64_t d[4] = {1, 2, 8, 16}, flat[1] = {2 * 8 * 16};
	float *x = calloc(256, sizeof(float)), *y = calloc(256, sizeof(float));
	k_tensor in[3] = {tensor(x, AIR_F32, 1, flat), tensor(x, AIR_F32, 4, d), tensor(x, AIR_F32, 4, d)};
	k_tensor out = tensor(y, AIR_F32, 4, d);
	int64_t past[KSDPA_VIEW_INTS] = {1, 1, 2, 8, 16, 256, 16, 32}; /* offset 1: the last row ends at 256 */
	int64_t ok[KSDPA_VIEW_INTS] = {0, 1, 2, 8, 16, 256, 16, 32};
	k_attr attrs[KSDPA_NATTRS];
	bool in_const[3] = {false, false, false};
	k_call call = sdpa_call(attrs, in, &out, in_const);
	for (int variant = 0; variant < 3; variant++) {
		memset(attrs, 0, sizeof attrs);
		attrs[KSDPA_ATTR_Q_VIEW].ints = variant == 0 ? past : ok;
		attrs[KSDPA_ATTR_Q_VIEW].n = variant == 1 ? KSDPA_VIEW_INTS - 1 : KSDPA_VIEW_INTS;
		if (variant == 2) /* out_bshd, but the output is [B, H, L, Ev] (H != L) */
			attrs[KSDPA_ATTR_OUT_BSHD].i = 1;
		for (int fast = 0; fast < 2; fast++) {
			const k_kernel *k = fast ? &kfast_sdpa_flash : &op_get(OP_sdpa)->ref;
			CHECK(run_kernel(k, &call, pool) != AIR_OK);
		}
	}
	/* and the good one runs */
	memset(attrs, 0, sizeof attrs);
	attrs[KSDPA_ATTR_Q_VIEW].ints = ok;
	attrs[KSDPA_ATTR_Q_VIEW].n = KSDPA_VIEW_INTS;
	CHECK_OK(run_kernel(&kfast_sdpa_flash, &call, pool));
	free(x);
	free(y);
}

static void test_views(rt_pool *p1, rt_pool *p2)
{
	/* BERT's heads (one projection per operand, rows of H * E), GPT-2's
	 * and ViT's (q, k and v in one row of 3 H E: pad), GQA, Ev != E and
	 * E not a multiple of 16, causal, L != S, every subset of operands */
	for (int which = 0; which < 8; which++)
		for (int bshd = 0; bshd < 2; bshd++) {
			run_view_case(1, 12, 12, 128, 128, 64, 64, which, bshd, 0, 0, which & 1 ? p2 : p1);
			run_view_case(2, 3, 3, 197, 197, 64, 64, which, bshd, 2 * 3 * 64, 0, p2);
			run_view_case(2, 4, 2, 33, 70, 20, 36, which, bshd, 7, 1, p2);
			run_view_case(1, 2, 1, 5, 130, 80, 16, which, bshd, 16, 0, p1);
		}
	test_bad_views(p1);
}

int main(void)
{
	rt_pool *p1 = NULL, *p2 = NULL;
	CHECK_OK(rt_pool_create(1, &p1));
	CHECK_OK(rt_pool_create(2, &p2));
	printf("attention ops: %s (cpu %s)\n", katt_ops_best()->name, kcpu_isa_name());
	test_shapes(p1, p2);
	test_special(p1, p2);
	test_views(p1, p2);
	printf("%d cases, %d through views\n", checked_cases, view_cases);
	rt_pool_destroy(p1);
	rt_pool_destroy(p2);
	return check_report("test_attention");
}

/* linalg.c - reference kernels of the matrix products and attention. They
 * are the oracle the fast kernels are tested against, so they are plain
 * loops: every product is C(i, j) = sum_k A(i, k) B(k, j) over one shared
 * row routine (with B read through strides, so linear's transposed weight
 * needs no copy), split across threads by output rows. f32 accumulates in
 * f32 (as a BLAS does); attention accumulates each row in double. */
#include "kernels/ref/linalg.h"

#include <math.h>
#include <string.h>

#include "core/error.h"

/* ---- fused activations ------------------------------------------------ */

/* As kernels/ref/elementwise.c computes them: NaN stays NaN through relu
 * and clamp (comparisons with NaN are false). */
#define ACT_LOOP(T, EXP, ERF, TANH)                                                                       \
	switch (act) {                                                                                    \
	case K_ACT_NONE: break;                                                                           \
	case K_ACT_RELU:                                                                                  \
		for (int64_t i = 0; i < n; i++)                                                           \
			y[i] = y[i] < (T)0 ? (T)0 : y[i];                                                 \
		break;                                                                                    \
	case K_ACT_RELU6:                                                                                 \
		for (int64_t i = 0; i < n; i++)                                                           \
			y[i] = y[i] != y[i] ? y[i] : y[i] < (T)0 ? (T)0 : y[i] > (T)6 ? (T)6 : y[i];      \
		break;                                                                                    \
	case K_ACT_GELU:                                                                                  \
		for (int64_t i = 0; i < n; i++)                                                           \
			y[i] = (T)0.5 * y[i] * ((T)1 + ERF(y[i] * (T)0.70710678118654752));              \
		break;                                                                                    \
	case K_ACT_GELU_TANH:                                                                             \
		for (int64_t i = 0; i < n; i++) {                                                         \
			T x = y[i];                                                                       \
			y[i] = (T)0.5 * x * ((T)1 + TANH((T)0.7978845608028654 * (x + (T)0.044715 * x * x * x))); \
		}                                                                                         \
		break;                                                                                    \
	case K_ACT_SILU:                                                                                  \
		for (int64_t i = 0; i < n; i++)                                                           \
			y[i] = y[i] * ((T)1 / ((T)1 + EXP(-y[i])));                                       \
		break;                                                                                    \
	case K_ACT_SIGMOID:                                                                               \
		for (int64_t i = 0; i < n; i++)                                                           \
			y[i] = (T)1 / ((T)1 + EXP(-y[i]));                                                \
		break;                                                                                    \
	case K_ACT_TANH:                                                                                  \
		for (int64_t i = 0; i < n; i++)                                                           \
			y[i] = TANH(y[i]);                                                                \
		break;                                                                                    \
	case K_ACT_HARDSWISH:                                                                             \
		for (int64_t i = 0; i < n; i++) {                                                         \
			T x = y[i], t = x + (T)3;                                                         \
			t = t < (T)0 ? (T)0 : (t > (T)6 ? (T)6 : t);                                      \
			y[i] = x * t / (T)6;                                                              \
		}                                                                                         \
		break;                                                                                    \
	}

void kref_act_f32(float *y, int64_t n, k_act act)
{
	ACT_LOOP(float, expf, erff, tanhf)
}

void kref_act_f64(double *y, int64_t n, k_act act)
{
	ACT_LOOP(double, exp, erf, tanh)
}

air_status kref_check_residual(const char *op, const k_tensor *res, const k_tensor *out)
{
	int same = res->rank == out->rank;
	for (int d = 0; d < out->rank && same; d++)
		same = res->dims[d] == out->dims[d];
	if (!same)
		return air_error(AIR_SHAPE_MISMATCH, "%s: the residual's shape is not the output's", op);
	return AIR_OK;
}

/* ---- matrix products -------------------------------------------------- */

typedef struct mm_ctx {
	const void *a, *b, *bias;
	const void *res; /* [batch * M, N] added last, or NULL (linear's residual) */
	k_act act;       /* applied after bias and residual */
	void *c;
	int64_t batch, M, N, K;
	int64_t a_bs, b_bs;       /* batch strides, in elements (0: shared) */
	int64_t a_rs, a_cs;       /* A(i, k) is a[i * a_rs + k * a_cs]; a_cs 0: row-major (K, 1) */
	int64_t b_rs, b_cs;       /* B(k, j) is b[k * b_rs + j * b_cs] */
	int64_t bias_rs, bias_cs; /* bias(i, j) is bias[i * bias_rs + j * bias_cs] */
	double alpha, beta;
	int64_t rows_per_task;
} mm_ctx;

/* One task computes rows [r0, r1) of the batch * M output rows. When B is
 * row-major the loop runs i-k-j so the inner loop is contiguous; otherwise
 * (B transposed, as linear's weight) each C(i, j) is a contiguous dot. */
#define MM_TASK(T)                                                                            \
	static void mm_task_##T(void *p, int64_t t, int thread)                               \
	{                                                                                     \
		const mm_ctx *c = p;                                                          \
		int64_t rows = c->batch * c->M, r0 = t * c->rows_per_task;                    \
		int64_t r1 = r0 + c->rows_per_task < rows ? r0 + c->rows_per_task : rows;     \
		for (int64_t r = r0; r < r1; r++) {                                           \
			int64_t bi = r / c->M, i = r % c->M;                                  \
			const int64_t a_cs = c->a_cs ? c->a_cs : 1;                           \
			const T *arow = (const T *)c->a + bi * c->a_bs + i * (c->a_cs ? c->a_rs : c->K); \
			const T *b = (const T *)c->b + bi * c->b_bs;                          \
			T *crow = (T *)c->c + r * c->N;                                       \
			if (c->b_cs == 1) {                                                   \
				for (int64_t j = 0; j < c->N; j++)                            \
					crow[j] = 0;                                          \
				for (int64_t k = 0; k < c->K; k++) {                          \
					T aik = arow[k * a_cs];                               \
					const T *brow = b + k * c->b_rs;                      \
					for (int64_t j = 0; j < c->N; j++)                    \
						crow[j] += aik * brow[j];                     \
				}                                                             \
			} else {                                                              \
				for (int64_t j = 0; j < c->N; j++) {                          \
					const T *bcol = b + j * c->b_cs;                      \
					T s = 0;                                              \
					for (int64_t k = 0; k < c->K; k++)                    \
						s += arow[k * a_cs] * bcol[k * c->b_rs];      \
					crow[j] = s;                                          \
				}                                                             \
			}                                                                     \
			if (c->alpha != 1.0)                                                  \
				for (int64_t j = 0; j < c->N; j++)                            \
					crow[j] = (T)(c->alpha * crow[j]);                    \
			/* beta == 0 ignores the bias, NaN included, as torch */              \
			if (c->bias && c->beta != 0.0) {                                      \
				const T *bias = (const T *)c->bias + i * c->bias_rs;          \
				for (int64_t j = 0; j < c->N; j++)                            \
					crow[j] += (T)(c->beta * bias[j * c->bias_cs]);       \
			}                                                                     \
			if (c->res) {                                                         \
				const T *res = (const T *)c->res + r * c->N;                  \
				for (int64_t j = 0; j < c->N; j++)                            \
					crow[j] += res[j];                                    \
			}                                                                     \
			ACT_##T(crow, c->N, c->act);                                          \
		}                                                                             \
	}
#define ACT_float kref_act_f32
#define ACT_double kref_act_f64
MM_TASK(float)
MM_TASK(double)

static air_status run_mm(const k_call *call, mm_ctx *c)
{
	int64_t rows = c->batch * c->M, work = c->N * (c->K ? c->K : 1);
	c->rows_per_task = (4 * K_GRAIN) / (work ? work : 1);
	if (c->rows_per_task < 1)
		c->rows_per_task = 1;
	c->c = call->out[0].data;
	if (rows == 0 || c->N == 0)
		return AIR_OK;
	rt_task_fn fn;
	switch (call->out[0].dtype) {
	case AIR_F32: fn = mm_task_float; break;
	case AIR_F64: fn = mm_task_double; break;
	default:
		return air_error(AIR_UNSUPPORTED, "matrix product: no reference kernel for %s",
				 air_dtype_name(call->out[0].dtype));
	}
	rt_pool_run(call->pool, (rows + c->rows_per_task - 1) / c->rows_per_task, fn, c);
	return AIR_OK;
}

/* Symbolic sizes that shape inference could not prove equal are checked
 * here, with the concrete sizes. */
static air_status inner_check(const char *op, int64_t ka, int64_t kb)
{
	if (ka != kb)
		return air_error(AIR_SHAPE_MISMATCH, "%s: contraction sizes differ: %lld and %lld", op, (long long)ka,
				 (long long)kb);
	return AIR_OK;
}

air_status kref_mm(const k_call *call)
{
	const k_tensor *a = &call->in[0], *b = &call->in[1];
	const int ta = call->attrs[0].i != 0;
	AIR_TRY(inner_check("mm", a->dims[ta ? 0 : 1], b->dims[0]));
	mm_ctx c = {0};
	c.a = a->data;
	c.b = b->data;
	c.batch = 1;
	c.M = a->dims[ta ? 1 : 0];
	c.K = a->dims[ta ? 0 : 1];
	c.N = b->dims[1];
	if (ta) {
		c.a_rs = 1;
		c.a_cs = c.M;
	}
	c.b_rs = c.N;
	c.b_cs = 1;
	c.alpha = 1.0;
	return run_mm(call, &c);
}

air_status kref_bmm(const k_call *call)
{
	const k_tensor *a = &call->in[0], *b = &call->in[1];
	AIR_TRY(inner_check("bmm", a->dims[2], b->dims[1]));
	if (a->dims[0] != b->dims[0])
		return air_error(AIR_SHAPE_MISMATCH, "bmm: batch sizes differ: %lld and %lld", (long long)a->dims[0],
				 (long long)b->dims[0]);
	mm_ctx c = {0};
	c.a = a->data;
	c.b = b->data;
	c.batch = a->dims[0];
	c.M = a->dims[1];
	c.K = a->dims[2];
	c.N = b->dims[2];
	c.a_bs = c.M * c.K;
	c.b_bs = c.K * c.N;
	c.b_rs = c.N;
	c.b_cs = 1;
	c.alpha = 1.0;
	return run_mm(call, &c);
}

/* Strides that read a bias of rank <= 2 broadcast to [M, N]. */
static air_status bias_strides(const char *op, const k_tensor *bias, int64_t M, int64_t N, int64_t *rs,
			       int64_t *cs)
{
	int64_t bm = bias->rank >= 2 ? bias->dims[bias->rank - 2] : 1;
	int64_t bn = bias->rank >= 1 ? bias->dims[bias->rank - 1] : 1;
	if ((bm != 1 && bm != M) || (bn != 1 && bn != N))
		return air_error(AIR_SHAPE_MISMATCH, "%s: bias [%lld, %lld] does not broadcast to [%lld, %lld]", op,
				 (long long)bm, (long long)bn, (long long)M, (long long)N);
	*cs = bn == 1 ? 0 : 1;
	*rs = bm == 1 ? 0 : bn;
	return AIR_OK;
}

air_status kref_addmm(const k_call *call)
{
	const k_tensor *bias = &call->in[0], *a = &call->in[1], *b = &call->in[2];
	AIR_TRY(inner_check("addmm", a->dims[1], b->dims[0]));
	mm_ctx c = {0};
	c.a = a->data;
	c.b = b->data;
	c.bias = bias->data;
	c.batch = 1;
	c.M = a->dims[0];
	c.K = a->dims[1];
	c.N = b->dims[1];
	c.b_rs = c.N;
	c.b_cs = 1;
	c.alpha = call->attrs[0].f;
	c.beta = call->attrs[1].f;
	AIR_TRY(bias_strides("addmm", bias, c.M, c.N, &c.bias_rs, &c.bias_cs));
	return run_mm(call, &c);
}

air_status kref_linear(const k_call *call)
{
	const k_tensor *x = &call->in[0], *w = &call->in[1];
	int has_res = call->attrs[2].i != 0;
	int has_bias = kref_present(call->attrs[0].i, call->n_in - has_res, 2);
	AIR_TRY(inner_check("linear", x->dims[x->rank - 1], w->dims[1]));
	mm_ctx c = {0};
	c.a = x->data;
	c.b = w->data;
	c.batch = 1;
	c.K = w->dims[1];
	c.N = w->dims[0];
	c.M = c.K ? x->numel / c.K : k_numel(x->rank - 1, x->dims);
	/* B = w^T: B(k, j) = w[j, k] */
	c.b_rs = 1;
	c.b_cs = c.K;
	c.alpha = 1.0;
	if (has_bias) {
		const k_tensor *bias = &call->in[2];
		if (bias->dims[0] != c.N)
			return air_error(AIR_SHAPE_MISMATCH, "linear: bias has %lld entries for %lld outputs",
					 (long long)bias->dims[0], (long long)c.N);
		c.bias = bias->data;
		c.beta = 1.0;
		c.bias_cs = 1;
	}
	if (has_res) {
		AIR_TRY(kref_check_residual("linear", &call->in[call->n_in - 1], &call->out[0]));
		c.res = call->in[call->n_in - 1].data;
	}
	c.act = (k_act)call->attrs[1].i;
	return run_mm(call, &c);
}

/* ---- scaled dot-product attention ------------------------------------- */

typedef struct sdpa_ctx {
	ksdpa_geom g;
	const void *q, *k, *v, *mask;
	void *out;
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
	c.dtype = call->in[0].dtype;
	c.ws = call->workspace;
	c.empty_nan = call->attrs[3].i != 0;
	if (c.g.Ev == 0)
		return AIR_OK;
	rt_pool_run(call->pool, c.g.batch * c.g.L, sdpa_task, &c);
	return AIR_OK;
}

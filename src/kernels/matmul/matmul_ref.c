/* matmul_ref.c - reference kernels of the matrix products (mm, bmm, addmm,
 * linear) and of the fused activations. They are the oracle the fast
 * kernels are tested against, so they are plain loops: every product is
 * C(i, j) = sum_k A(i, k) B(k, j) over one shared row routine (with B read
 * through strides, so linear's transposed weight needs no copy), split
 * across threads by output rows. f32 accumulates in f32 (as a BLAS does).
 * The fused activations are common/epilogue.c's. */
#include "kernels/matmul/matmul_ref.h"
#include "kernels/matmul/linear_lowp.h"
#include "kernels/common/half.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

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
	if (klinear_is_lowp(call)) {
		klinear_lowp a;
		AIR_TRY(klinear_lowp_get(call, &a));
		air_dtype to = call->out[0].dtype;
		float *y = call->out[0].data;
		if (to != AIR_F32 && !(y = malloc(sizeof(float) * (size_t)(a.M * a.N > 0 ? a.M * a.N : 1))))
			return air_error(AIR_OUT_OF_MEMORY, "linear: no memory for the f32 result");
		kgemm_lowp_w_reference(a.wt, a.M, a.N, a.K, x->data, a.K, w->data, a.K, y, a.N, &a.ep);
		if (to != AIR_F32) {
			uint16_t *h = call->out[0].data;
			for (int64_t i = 0; i < a.M * a.N; i++)
				h[i] = to == AIR_BF16 ? k_f32_to_bf16(y[i]) : k_f32_to_f16(y[i]);
			free(y);
		}
		return AIR_OK;
	}
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

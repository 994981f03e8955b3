/* norm_ref.c - reference kernels of softmax and log_softmax along any axis
 * and of layer_norm and rms_norm over the last dims, f32 and f64 (the fast
 * f32 row kernels: rowops.c). */
#include "kernels/norm/norm_ref.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "kernels/reduce/reduce_util.h"

/* ---- softmax, log_softmax ---------------------------------------------- */

/* Numerically stable: the max is subtracted first. A NaN anywhere in a
 * slice makes the slice NaN; a slice of -inf only gives NaN (inf - inf),
 * both as in torch. exp runs in T, the sum in double. */
/* A contiguous slice (the common case: softmax over the last dim). */
#define SOFTMAX_ROW(SUF, T, EXP)                                                   \
	static void softmax_row_##SUF(const T *x, T *y, int64_t n, bool lg)       \
	{                                                                          \
		T m = x[0];                                                        \
		int nan = 0;                                                       \
		for (int64_t i = 0; i < n; i++) {                                  \
			T v = x[i];                                                \
			m = v > m ? v : m;                                         \
			nan |= v != v;                                             \
		}                                                                  \
		if (nan)                                                           \
			m = (T)NAN;                                                \
		double s = 0.0;                                                    \
		if (lg) {                                                          \
			for (int64_t i = 0; i < n; i++)                            \
				s += EXP(x[i] - m);                                \
			double ls = log(s);                                        \
			for (int64_t i = 0; i < n; i++)                            \
				y[i] = (T)((double)(x[i] - m) - ls);               \
		} else {                                                           \
			for (int64_t i = 0; i < n; i++) {                          \
				T e = EXP(x[i] - m);                               \
				y[i] = e;                                          \
				s += e;                                            \
			}                                                          \
			double inv = 1.0 / s;                                      \
			for (int64_t i = 0; i < n; i++)                            \
				y[i] = (T)(y[i] * inv);                            \
		}                                                                  \
	}

#define SOFTMAX_TASK(SUF, T, EXP)                                                                 \
	SOFTMAX_ROW(SUF, T, EXP)                                                                  \
	static void softmax_##SUF(void *arg, int64_t t, int th)                                   \
	{                                                                                         \
		const axis_ctx *c = arg;                                                          \
		if (c->inner == 1) {                                                              \
			int64_t r1 = kr_min(t * c->per_task + c->per_task, c->outer);             \
			for (int64_t r = t * c->per_task; r < r1; r++)                            \
				softmax_row_##SUF((const T *)c->x + r * c->len, (T *)c->y + r * c->len, \
						  c->len, c->log);                                \
			return;                                                           \
		}                                                                                 \
		int64_t u1 = kr_min(t * c->per_task + c->per_task, c->outer * c->nblocks);        \
		T mx[KR_CB];                                                                      \
		double sum[KR_CB];                                                                \
		for (int64_t u = t * c->per_task; u < u1; u++) {                                  \
			int64_t o = u / c->nblocks, c0 = (u % c->nblocks) * KR_CB;                \
			int64_t n = kr_min(KR_CB, c->inner - c0), in = c->inner;                  \
			int64_t off = o * c->len * in + c0;                                       \
			const T *x = (const T *)c->x + off;                                       \
			T *y = (T *)c->y + off;                                                   \
			for (int64_t i = 0; i < n; i++) {                                         \
				mx[i] = x[i];                                                     \
				sum[i] = 0.0;                                                     \
			}                                                                         \
			for (int64_t r = 1; r < c->len; r++)                                      \
				for (int64_t i = 0; i < n; i++)                                   \
					FMAX(mx[i], x[r * in + i]);                               \
			for (int64_t r = 0; r < c->len; r++)                                      \
				for (int64_t i = 0; i < n; i++) {                                 \
					T e = EXP(x[r * in + i] - mx[i]);                         \
					sum[i] += e;                                              \
					if (!c->log)                                              \
						y[r * in + i] = e;                                \
				}                                                                 \
			if (c->log) {                                                             \
				for (int64_t i = 0; i < n; i++)                                   \
					sum[i] = log(sum[i]);                                     \
				for (int64_t r = 0; r < c->len; r++)                              \
					for (int64_t i = 0; i < n; i++)                           \
						y[r * in + i] =                                   \
							(T)((double)(x[r * in + i] - mx[i]) - sum[i]); \
			} else {                                                                  \
				for (int64_t i = 0; i < n; i++)                                   \
					sum[i] = 1.0 / sum[i];                                    \
				for (int64_t r = 0; r < c->len; r++)                              \
					for (int64_t i = 0; i < n; i++)                           \
						y[r * in + i] = (T)(y[r * in + i] * sum[i]);      \
			}                                                                         \
		}                                                                                 \
	}

SOFTMAX_TASK(f32, float, expf)
SOFTMAX_TASK(f64, double, exp)

static air_status run_softmax(const k_call *call, bool log)
{
	const k_tensor *x = &call->in[0];
	rt_task_fn fn;
	switch (x->dtype) {
	case AIR_F32: fn = softmax_f32; break;
	case AIR_F64: fn = softmax_f64; break;
	default: return kr_bad_dtype(log ? "log_softmax" : "softmax", x->dtype);
	}
	if (x->numel == 0)
		return AIR_OK;
	axis_ctx c = {0};
	axis_plan(&c, x, x->rank ? kr_axis(call->attrs[0].i, x->rank) : 0);
	c.x = x->data;
	c.y = call->out[0].data;
	c.log = log;
	rt_pool_run(call->pool, axis_tasks(&c), fn, &c);
	return AIR_OK;
}

air_status kref_softmax(const k_call *call)
{
	return run_softmax(call, false);
}

air_status kref_log_softmax(const k_call *call)
{
	return run_softmax(call, true);
}

/* ---- layer_norm, rms_norm ---------------------------------------------- */

typedef struct {
	const void *x, *w, *b;
	void *y, *mean, *rstd;
	int64_t rows, n, per_task;
	double eps;
} norm_ctx;

/* sum of (x - mean)^2 over a run, in lanes like SUM_RUN (reduce_util.h) */
#define SQDEV_RUN(NAME, T)                                                                \
	static inline double NAME(const T *r, int64_t n, double mean)                      \
	{                                                                                  \
		double l[8] = {0, 0, 0, 0, 0, 0, 0, 0};                                    \
		int64_t i = 0;                                                             \
		for (; i + 8 <= n; i += 8)                                                 \
			for (int k = 0; k < 8; k++) {                                      \
				double d = r[i + k] - mean;                                \
				l[k] += d * d;                                             \
			}                                                                  \
		for (int k = 0; i < n; i++, k++) {                                         \
			double d = r[i] - mean;                                            \
			l[k] += d * d;                                                     \
		}                                                                          \
		return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7])); \
	}

SQDEV_RUN(sqdev_run_f32, float)
SQDEV_RUN(sqdev_run_f64, double)

/* Per row of n elements: mean and biased variance in double, two passes
 * (no cancellation), rstd = 1/sqrt(var + eps), y = (x - mean)*rstd*w + b. */
#define LAYER_NORM_TASK(SUF, T)                                                                   \
	static void layer_norm_##SUF(void *arg, int64_t t, int th)                                \
	{                                                                                         \
		const norm_ctx *c = arg;                                                          \
		const T *w = c->w, *b = c->b;                                                     \
		int64_t r1 = kr_min(t * c->per_task + c->per_task, c->rows);                      \
		for (int64_t r = t * c->per_task; r < r1; r++) {                                  \
			const T *x = (const T *)c->x + r * c->n;                                  \
			T *y = (T *)c->y + r * c->n;                                              \
			double s = sum_run_##SUF(x, c->n, 0.0);                                   \
			/* torch gives mean 0 and rstd NaN for an empty row */                    \
			double mean = c->n ? s / (double)c->n : 0.0;                              \
			double q = sqdev_run_##SUF(x, c->n, mean);                                \
			double rstd = c->n ? 1.0 / sqrt(q / (double)c->n + c->eps) : NAN;         \
			for (int64_t i = 0; i < c->n; i++) {                                      \
				double v = (x[i] - mean) * rstd;                                  \
				if (w)                                                            \
					v *= w[i];                                                \
				if (b)                                                            \
					v += b[i];                                                \
				y[i] = (T)v;                                                      \
			}                                                                         \
			((T *)c->mean)[r] = (T)mean;                                              \
			((T *)c->rstd)[r] = (T)rstd;                                              \
		}                                                                                 \
	}

LAYER_NORM_TASK(f32, float)
LAYER_NORM_TASK(f64, double)

/* y = x * rsqrt(mean(x^2) + eps) * w, mean of squares in double */
#define RMS_NORM_TASK(SUF, T)                                                                     \
	static void rms_norm_##SUF(void *arg, int64_t t, int th)                                  \
	{                                                                                         \
		const norm_ctx *c = arg;                                                          \
		const T *w = c->w;                                                                \
		int64_t r1 = kr_min(t * c->per_task + c->per_task, c->rows);                      \
		for (int64_t r = t * c->per_task; r < r1; r++) {                                  \
			const T *x = (const T *)c->x + r * c->n;                                  \
			T *y = (T *)c->y + r * c->n;                                              \
			double q = sqdev_run_##SUF(x, c->n, 0.0);                                 \
			double rs = 1.0 / sqrt(q / (double)c->n + c->eps);                        \
			for (int64_t i = 0; i < c->n; i++)                                        \
				y[i] = (T)(w ? x[i] * rs * w[i] : x[i] * rs);                     \
		}                                                                                 \
	}

RMS_NORM_TASK(f32, float)
RMS_NORM_TASK(f64, double)

/* Sets up a norm over x's last nd dims; checks the concrete shapes of the
 * affine inputs, which shape inference could not when they were symbolic. */
static air_status norm_setup(const char *op, const k_call *call, int nd, int has_w, int has_b, norm_ctx *c)
{
	const k_tensor *x = &call->in[0];
	memset(c, 0, sizeof *c);
	c->n = 1;
	for (int d = x->rank - nd; d < x->rank; d++)
		c->n *= x->dims[d];
	c->rows = c->n ? x->numel / c->n : k_numel(x->rank - nd, x->dims);
	for (int k = 1; k < call->n_in; k++) {
		const k_tensor *w = &call->in[k];
		for (int d = 0; d < nd; d++)
			if (w->dims[d] != x->dims[x->rank - nd + d])
				return air_error(AIR_SHAPE_MISMATCH, "%s: input %d has size %lld at dim %d where x has %lld",
						 op, k, (long long)w->dims[d], d,
						 (long long)x->dims[x->rank - nd + d]);
	}
	c->x = x->data;
	c->w = has_w ? call->in[1].data : NULL;
	c->b = has_b ? call->in[1 + has_w].data : NULL;
	c->y = call->out[0].data;
	c->per_task = kr_per_task(c->n);
	return AIR_OK;
}

air_status kref_layer_norm(const k_call *call)
{
	const k_tensor *x = &call->in[0];
	rt_task_fn fn;
	switch (x->dtype) {
	case AIR_F32: fn = layer_norm_f32; break;
	case AIR_F64: fn = layer_norm_f64; break;
	default: return kr_bad_dtype("layer_norm", x->dtype);
	}
	norm_ctx c;
	AIR_TRY(norm_setup("layer_norm", call, (int)call->attrs[0].i, (int)call->attrs[2].i, (int)call->attrs[3].i,
			   &c));
	c.eps = call->attrs[1].f;
	c.mean = call->out[1].data;
	c.rstd = call->out[2].data;
	rt_pool_run(call->pool, kr_ceil_div(c.rows, c.per_task), fn, &c);
	return AIR_OK;
}

air_status kref_rms_norm(const k_call *call)
{
	const k_tensor *x = &call->in[0];
	rt_task_fn fn;
	double eps = call->attrs[1].f;
	switch (x->dtype) {
	case AIR_F32:
		fn = rms_norm_f32;
		if (eps < 0)
			eps = FLT_EPSILON;
		break;
	case AIR_F64:
		fn = rms_norm_f64;
		if (eps < 0)
			eps = DBL_EPSILON;
		break;
	default: return kr_bad_dtype("rms_norm", x->dtype);
	}
	norm_ctx c;
	AIR_TRY(norm_setup("rms_norm", call, (int)call->attrs[0].i, (int)call->attrs[2].i, 0, &c));
	c.eps = eps;
	if (c.n == 0)
		return AIR_OK;
	rt_pool_run(call->pool, kr_ceil_div(c.rows, c.per_task), fn, &c);
	return AIR_OK;
}

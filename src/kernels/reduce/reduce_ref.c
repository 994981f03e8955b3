/* reduce.c - reference kernels of the reductions (sum, mean, amax, amin,
 * prod, argmax, cumsum), softmax, log_softmax and the norms. */
#include "kernels/reduce/reduce_ref.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "core/error.h"

/* f32 accumulates in double (torch's CPU cumsum does too; elsewhere it keeps
 * us within rounding of torch's pairwise float sums); integer sums and
 * products wrap, as in torch. */

/* one generated loop serves signed and unsigned element types */
#pragma GCC diagnostic ignored "-Wtype-limits"

/* Columns handled at once when a reduction runs across rows of a contiguous
 * inner run: accumulators for that many columns live on the stack. */
enum { KR_CB = 256 };

static inline int64_t kr_min(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

/* Tasks of about K_GRAIN elements when each unit costs `cost` elements. */
static inline int64_t kr_per_task(int64_t cost)
{
	int64_t n = K_GRAIN / (cost > 0 ? cost : 1);
	return n < 1 ? 1 : n;
}

static inline int64_t kr_ceil_div(int64_t a, int64_t b)
{
	return (a + b - 1) / b;
}

/* Offset of the q-th point (row-major) of a grid of dims with strides. */
static inline int64_t kr_offset(int n, const int64_t *dims, const int64_t *strides, int64_t q)
{
	int64_t off = 0;
	for (int d = n - 1; d >= 0; d--) {
		off += (q % dims[d]) * strides[d];
		q /= dims[d];
	}
	return off;
}

static int kr_axis(int64_t axis, int rank)
{
	return (int)(axis < 0 ? axis + rank : axis);
}

/* x viewed as [outer, len, inner] around axis. */
static void kr_split(const k_tensor *x, int axis, int64_t *outer, int64_t *len, int64_t *inner)
{
	*outer = 1;
	*inner = 1;
	*len = x->rank ? x->dims[axis] : 1;
	for (int d = 0; d < axis; d++)
		*outer *= x->dims[d];
	for (int d = axis + 1; d < x->rank; d++)
		*inner *= x->dims[d];
}

static air_status kr_bad_dtype(const char *op, air_dtype dt)
{
	return air_error(AIR_UNSUPPORTED, "%s: no reference kernel for %s", op, air_dtype_name(dt));
}

/* ---- sum, mean, prod, amax, amin ------------------------------------- */

/* The input seen as runs of kept and reduced dims: size-1 dims dropped,
 * neighbours of the same kind merged. The last run is contiguous (inner);
 * the others are strided grids over kept (output rows) and reduced dims. */
typedef struct {
	int nk, nr;
	int64_t kdims[AIR_MAX_RANK], kstr[AIR_MAX_RANK];
	int64_t rdims[AIR_MAX_RANK], rstr[AIR_MAX_RANK];
	int64_t inner;  /* length of the last run */
	bool inner_red; /* the last run is reduced: one output per row */
	int64_t nrows;  /* product of kdims */
	int64_t nred;   /* product of rdims */
} red_plan;

/* The dims a reduction's `axes` attribute names (empty: all). */
static unsigned kr_mask(const k_attr *axes, int rank)
{
	if (axes->n == 0)
		return (1u << rank) - 1;
	unsigned m = 0;
	for (int k = 0; k < axes->n && rank > 0; k++)
		m |= 1u << kr_axis(axes->ints[k], rank);
	return m;
}

static void red_make_plan(red_plan *p, const k_tensor *x, unsigned mask)
{
	int64_t dims[AIR_MAX_RANK], str[AIR_MAX_RANK];
	bool red[AIR_MAX_RANK];
	int n = 0;
	int64_t s = 1;
	/* runs from the innermost dim outwards, merged while the kind repeats */
	for (int d = x->rank - 1; d >= 0; d--) {
		int64_t size = x->dims[d];
		bool r = (mask >> d) & 1u;
		if (size != 1) {
			if (n > 0 && red[n - 1] == r) {
				dims[n - 1] *= size;
			} else {
				dims[n] = size;
				str[n] = s;
				red[n] = r;
				n++;
			}
		}
		s *= size;
	}
	memset(p, 0, sizeof *p);
	p->inner = 1;
	p->inner_red = true;
	p->nrows = p->nred = 1;
	if (n == 0)
		return;
	/* runs were collected innermost first */
	p->inner = dims[0];
	p->inner_red = red[0];
	for (int k = n - 1; k >= 1; k--) {
		if (red[k]) {
			p->rdims[p->nr] = dims[k];
			p->rstr[p->nr++] = str[k];
			p->nred *= dims[k];
		} else {
			p->kdims[p->nk] = dims[k];
			p->kstr[p->nk++] = str[k];
			p->nrows *= dims[k];
		}
	}
}

typedef struct {
	red_plan p;
	const void *x;
	void *y;
	int64_t count;    /* elements reduced into each output */
	int64_t per_task; /* outputs (inner reduced) or units (row, column block) per task */
	int64_t nblocks;  /* column blocks per row when the inner run is kept */
} red_ctx;

/* One reduction loop per (op, dtype): ACC accumulates, INIT starts it,
 * COMBINE(acc, v) folds one element in, RUN(r, n, acc) folds a contiguous
 * run, FINAL(acc) gives the output. */
#define RED_TASK(NAME, T, ACC, INIT, COMBINE, RUN, FINAL)                                         \
	static void NAME(void *arg, int64_t t, int th)                                            \
	{                                                                                         \
		const red_ctx *c = arg;                                                           \
		const red_plan *p = &c->p;                                                        \
		const T *x = c->x;                                                                \
		T *y = c->y;                                                                      \
		if (p->inner_red) {                                                               \
			int64_t o1 = kr_min(t * c->per_task + c->per_task, p->nrows);             \
			for (int64_t o = t * c->per_task; o < o1; o++) {                          \
				int64_t base = kr_offset(p->nk, p->kdims, p->kstr, o);            \
				ACC acc = INIT;                                                   \
				for (int64_t j = 0; j < p->nred; j++) {                           \
					const T *r = x + base + kr_offset(p->nr, p->rdims, p->rstr, j); \
					acc = RUN(r, p->inner, acc);                              \
				}                                                                 \
				y[o] = FINAL(acc);                                                \
			}                                                                         \
			return;                                                                   \
		}                                                                                 \
		ACC acc[KR_CB];                                                                   \
		int64_t u1 = kr_min(t * c->per_task + c->per_task, p->nrows * c->nblocks);        \
		for (int64_t u = t * c->per_task; u < u1; u++) {                                  \
			int64_t row = u / c->nblocks, c0 = (u % c->nblocks) * KR_CB;              \
			int64_t n = kr_min(KR_CB, p->inner - c0);                                 \
			int64_t base = kr_offset(p->nk, p->kdims, p->kstr, row) + c0;             \
			for (int64_t i = 0; i < n; i++)                                           \
				acc[i] = INIT;                                                    \
			for (int64_t j = 0; j < p->nred; j++) {                                   \
				const T *r = x + base + kr_offset(p->nr, p->rdims, p->rstr, j);   \
				/* a constant trip count lets -O2 vectorize the full blocks */   \
				if (n == KR_CB) {                                                 \
					for (int64_t i = 0; i < KR_CB; i++) {                     \
						T v = r[i];                                       \
						COMBINE(acc[i], v);                               \
					}                                                         \
				} else {                                                          \
					for (int64_t i = 0; i < n; i++) {                         \
						T v = r[i];                                       \
						COMBINE(acc[i], v);                               \
					}                                                         \
				}                                                                 \
			}                                                                         \
			T *out = y + row * p->inner + c0;                                         \
			for (int64_t i = 0; i < n; i++)                                           \
				out[i] = FINAL(acc[i]);                                           \
		}                                                                                 \
	}

#define ADD(acc, v) ((acc) += (v))
#define MUL(acc, v) ((acc) *= (v))
/* integer sums and products wrap like torch's: done in uint64 */
#define UADD(acc, v) ((acc) += (uint64_t)(v))
#define UMUL(acc, v) ((acc) *= (uint64_t)(v))
/* NaN wins: once acc is NaN no comparison replaces it */
#define FMAX(acc, v) ((acc) = ((v) > (acc) || (v) != (v)) ? (v) : (acc))
#define FMIN(acc, v) ((acc) = ((v) < (acc) || (v) != (v)) ? (v) : (acc))
#define IMAX(acc, v) ((acc) = (v) > (acc) ? (v) : (acc))
#define IMIN(acc, v) ((acc) = (v) < (acc) ? (v) : (acc))
#define CAST_F(acc) ((float)(acc))
#define CAST_D(acc) ((double)(acc))
#define MEAN_F(acc) ((float)((acc) / (double)c->count))
#define MEAN_D(acc) ((acc) / (double)c->count)
#define SAME(acc) (acc)

/* A contiguous run folded one element at a time. */
#define PLAIN_RUN(NAME, T, ACC, COMBINE)                                  \
	static inline ACC NAME(const T *r, int64_t n, ACC acc)            \
	{                                                                 \
		for (int64_t i = 0; i < n; i++) {                         \
			T v = r[i];                                       \
			COMBINE(acc, v);                                  \
		}                                                         \
		return acc;                                               \
	}

/* A float sum over a contiguous run in eight independent lanes, so that
 * the adds pipeline and vectorize. The order is fixed by n alone, so the
 * result does not depend on the thread count. */
#define SUM_RUN(NAME, T)                                                                  \
	static inline double NAME(const T *r, int64_t n, double acc)                       \
	{                                                                                  \
		double l[8] = {0, 0, 0, 0, 0, 0, 0, 0};                                    \
		int64_t i = 0;                                                             \
		for (; i + 8 <= n; i += 8)                                                 \
			for (int k = 0; k < 8; k++)                                        \
				l[k] += r[i + k];                                          \
		for (int k = 0; i < n; i++, k++)                                           \
			l[k] += r[i];                                                      \
		return acc + (((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]))); \
	}

SUM_RUN(sum_run_f32, float)
SUM_RUN(sum_run_f64, double)

/* sum of (x - mean)^2 over a run, in lanes like SUM_RUN (the norms) */
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
PLAIN_RUN(prod_run_f32, float, double, MUL)
PLAIN_RUN(prod_run_f64, double, double, MUL)
PLAIN_RUN(amax_run_f32, float, float, FMAX)
PLAIN_RUN(amax_run_f64, double, double, FMAX)
PLAIN_RUN(amin_run_f32, float, float, FMIN)
PLAIN_RUN(amin_run_f64, double, double, FMIN)

RED_TASK(sum_f32, float, double, 0.0, ADD, sum_run_f32, CAST_F)
RED_TASK(sum_f64, double, double, 0.0, ADD, sum_run_f64, CAST_D)
RED_TASK(mean_f32, float, double, 0.0, ADD, sum_run_f32, MEAN_F)
RED_TASK(mean_f64, double, double, 0.0, ADD, sum_run_f64, MEAN_D)
RED_TASK(prod_f32, float, double, 1.0, MUL, prod_run_f32, CAST_F)
RED_TASK(prod_f64, double, double, 1.0, MUL, prod_run_f64, CAST_D)
RED_TASK(amax_f32, float, float, -INFINITY, FMAX, amax_run_f32, SAME)
RED_TASK(amax_f64, double, double, -INFINITY, FMAX, amax_run_f64, SAME)
RED_TASK(amin_f32, float, float, INFINITY, FMIN, amin_run_f32, SAME)
RED_TASK(amin_f64, double, double, INFINITY, FMIN, amin_run_f64, SAME)

#define RED_INT(SUF, T, LO, HI)                                                \
	PLAIN_RUN(sum_run_##SUF, T, uint64_t, UADD)                            \
	PLAIN_RUN(prod_run_##SUF, T, uint64_t, UMUL)                           \
	PLAIN_RUN(amax_run_##SUF, T, T, IMAX)                                  \
	PLAIN_RUN(amin_run_##SUF, T, T, IMIN)                                  \
	RED_TASK(sum_##SUF, T, uint64_t, 0, UADD, sum_run_##SUF, (T))          \
	RED_TASK(prod_##SUF, T, uint64_t, 1, UMUL, prod_run_##SUF, (T))        \
	RED_TASK(amax_##SUF, T, T, LO, IMAX, amax_run_##SUF, SAME)             \
	RED_TASK(amin_##SUF, T, T, HI, IMIN, amin_run_##SUF, SAME)
RED_INT(i64, int64_t, INT64_MIN, INT64_MAX)
RED_INT(i32, int32_t, INT32_MIN, INT32_MAX)
RED_INT(i16, int16_t, INT16_MIN, INT16_MAX)
RED_INT(i8, int8_t, INT8_MIN, INT8_MAX)
RED_INT(u8, uint8_t, 0, UINT8_MAX)

typedef enum { KR_SUM, KR_MEAN, KR_PROD, KR_MAX, KR_MIN } kr_op;

static const char *const kr_names[] = {"sum", "mean", "prod", "amax", "amin"};

/* The loop for (op, dtype), or NULL. bool is max/min only (any/all). */
static rt_task_fn red_task(kr_op op, air_dtype dt)
{
#define ROW(SUF) {sum_##SUF, NULL, prod_##SUF, amax_##SUF, amin_##SUF}
	static const rt_task_fn ints[5][5] = {ROW(i64), ROW(i32), ROW(i16), ROW(i8), ROW(u8)};
#undef ROW
	switch (dt) {
	case AIR_F32: {
		static const rt_task_fn f[5] = {sum_f32, mean_f32, prod_f32, amax_f32, amin_f32};
		return f[op];
	}
	case AIR_F64: {
		static const rt_task_fn f[5] = {sum_f64, mean_f64, prod_f64, amax_f64, amin_f64};
		return f[op];
	}
	case AIR_I64: return ints[0][op];
	case AIR_I32: return ints[1][op];
	case AIR_I16: return ints[2][op];
	case AIR_I8: return ints[3][op];
	case AIR_U8: return ints[4][op];
	case AIR_BOOL: return op == KR_MAX ? amax_u8 : op == KR_MIN ? amin_u8 : NULL;
	default: return NULL;
	}
}

/* The value of a reduction over no elements. */
static void red_fill_empty(kr_op op, const k_tensor *y)
{
	for (int64_t i = 0; i < y->numel; i++) {
		double v = op == KR_PROD ? 1.0 : op == KR_MEAN ? NAN : 0.0;
		switch (y->dtype) {
		case AIR_F32: ((float *)y->data)[i] = (float)v; break;
		case AIR_F64: ((double *)y->data)[i] = v; break;
		case AIR_I64: ((int64_t *)y->data)[i] = (int64_t)v; break;
		case AIR_I32: ((int32_t *)y->data)[i] = (int32_t)v; break;
		case AIR_I16: ((int16_t *)y->data)[i] = (int16_t)v; break;
		case AIR_I8: ((int8_t *)y->data)[i] = (int8_t)v; break;
		case AIR_U8: ((uint8_t *)y->data)[i] = (uint8_t)v; break;
		default: break;
		}
	}
}

static air_status run_reduce(const k_call *call, kr_op op)
{
	const k_tensor *x = &call->in[0], *y = &call->out[0];
	rt_task_fn fn = red_task(op, x->dtype);
	if (!fn)
		return kr_bad_dtype(kr_names[op], x->dtype);
	unsigned mask = kr_mask(&call->attrs[0], x->rank);
	int64_t count = 1;
	for (int d = 0; d < x->rank; d++) {
		if (!((mask >> d) & 1u))
			continue;
		/* torch has no identity for max/min: reducing an empty dim fails */
		if (x->dims[d] == 0 && (op == KR_MAX || op == KR_MIN))
			return air_error(AIR_INVALID_ARGUMENT, "%s: reduction dim %d has size 0", kr_names[op], d);
		count *= x->dims[d];
	}
	if (y->numel == 0)
		return AIR_OK;
	if (count == 0) {
		red_fill_empty(op, y);
		return AIR_OK;
	}
	red_ctx c;
	red_make_plan(&c.p, x, mask);
	c.x = x->data;
	c.y = y->data;
	c.count = count;
	int64_t ntasks;
	if (c.p.inner_red) {
		c.nblocks = 1;
		c.per_task = kr_per_task(count);
		ntasks = kr_ceil_div(c.p.nrows, c.per_task);
	} else {
		c.nblocks = kr_ceil_div(c.p.inner, KR_CB);
		c.per_task = kr_per_task(c.p.nred * kr_min(KR_CB, c.p.inner));
		ntasks = kr_ceil_div(c.p.nrows * c.nblocks, c.per_task);
	}
	rt_pool_run(call->pool, ntasks, fn, &c);
	return AIR_OK;
}

air_status kref_sum(const k_call *call)
{
	return run_reduce(call, KR_SUM);
}

air_status kref_mean(const k_call *call)
{
	return run_reduce(call, KR_MEAN);
}

air_status kref_prod(const k_call *call)
{
	return run_reduce(call, KR_PROD);
}

air_status kref_amax(const k_call *call)
{
	return run_reduce(call, KR_MAX);
}

air_status kref_amin(const k_call *call)
{
	return run_reduce(call, KR_MIN);
}

/* ---- argmax ------------------------------------------------------------ */

/* Loops over x viewed as [outer, len, inner] along one axis. A unit is one
 * row (inner == 1) or one block of up to KR_CB columns of one outer index. */
typedef struct {
	const void *x;
	void *y;
	int64_t outer, len, inner;
	int64_t nblocks, per_task;
	double eps;   /* norms */
	bool log;     /* log_softmax */
} axis_ctx;

static void axis_plan(axis_ctx *c, const k_tensor *x, int axis)
{
	kr_split(x, axis, &c->outer, &c->len, &c->inner);
	c->nblocks = kr_ceil_div(c->inner, KR_CB);
	c->per_task = kr_per_task(c->len * kr_min(KR_CB, c->inner));
}

static int64_t axis_tasks(const axis_ctx *c)
{
	return kr_ceil_div(c->outer * c->nblocks, c->per_task);
}

/* First index of the maximum; the first NaN counts as the maximum. */
#define ARGMAX_TASK(SUF, T, BETTER)                                                               \
	static void argmax_##SUF(void *arg, int64_t t, int th)                                    \
	{                                                                                         \
		const axis_ctx *c = arg;                                                          \
		if (c->inner == 1) {                                                              \
			int64_t r1 = kr_min(t * c->per_task + c->per_task, c->outer);             \
			for (int64_t r = t * c->per_task; r < r1; r++) {                          \
				const T *x = (const T *)c->x + r * c->len;                        \
				T b = x[0];                                                       \
				int64_t bi = 0;                                                   \
				for (int64_t k = 1; k < c->len; k++) {                            \
					T v = x[k];                                               \
					if (BETTER(v, b)) {                                       \
						b = v;                                            \
						bi = k;                                           \
					}                                                         \
				}                                                                 \
				((int64_t *)c->y)[r] = bi;                                        \
			}                                                                         \
			return;                                                                   \
		}                                                                                 \
		int64_t u1 = kr_min(t * c->per_task + c->per_task, c->outer * c->nblocks);        \
		T best[KR_CB];                                                                    \
		for (int64_t u = t * c->per_task; u < u1; u++) {                                  \
			int64_t o = u / c->nblocks, c0 = (u % c->nblocks) * KR_CB;                \
			int64_t n = kr_min(KR_CB, c->inner - c0);                                 \
			const T *x = (const T *)c->x + o * c->len * c->inner + c0;                \
			int64_t *y = (int64_t *)c->y + o * c->inner + c0;                         \
			for (int64_t i = 0; i < n; i++) {                                         \
				best[i] = x[i];                                                   \
				y[i] = 0;                                                         \
			}                                                                         \
			for (int64_t r = 1; r < c->len; r++) {                                    \
				const T *row = x + r * c->inner;                                  \
				for (int64_t i = 0; i < n; i++) {                                 \
					T v = row[i], b = best[i];                                \
					if (BETTER(v, b)) {                                       \
						best[i] = v;                                      \
						y[i] = r;                                         \
					}                                                         \
				}                                                                 \
			}                                                                         \
		}                                                                                 \
	}

#define F_BETTER(v, b) ((v) > (b) || ((v) != (v) && (b) == (b)))
#define I_BETTER(v, b) ((v) > (b))
ARGMAX_TASK(f32, float, F_BETTER)
ARGMAX_TASK(f64, double, F_BETTER)
ARGMAX_TASK(i64, int64_t, I_BETTER)
ARGMAX_TASK(i32, int32_t, I_BETTER)
ARGMAX_TASK(i16, int16_t, I_BETTER)
ARGMAX_TASK(i8, int8_t, I_BETTER)
ARGMAX_TASK(u8, uint8_t, I_BETTER)

air_status kref_argmax(const k_call *call)
{
	const k_tensor *x = &call->in[0];
	rt_task_fn fn;
	switch (x->dtype) {
	case AIR_F32: fn = argmax_f32; break;
	case AIR_F64: fn = argmax_f64; break;
	case AIR_I64: fn = argmax_i64; break;
	case AIR_I32: fn = argmax_i32; break;
	case AIR_I16: fn = argmax_i16; break;
	case AIR_I8: fn = argmax_i8; break;
	case AIR_U8: fn = argmax_u8; break;
	default: return kr_bad_dtype("argmax", x->dtype);
	}
	int axis = x->rank ? kr_axis(call->attrs[0].i, x->rank) : 0;
	axis_ctx c = {0};
	axis_plan(&c, x, axis);
	if (c.len == 0)
		return air_error(AIR_INVALID_ARGUMENT, "argmax: reduction dim %d has size 0", axis);
	c.x = x->data;
	c.y = call->out[0].data;
	rt_pool_run(call->pool, axis_tasks(&c), fn, &c);
	return AIR_OK;
}

/* ---- cumsum ------------------------------------------------------------ */

#define CUMSUM_TASK(SUF, T, ACC)                                                                  \
	static void cumsum_##SUF(void *arg, int64_t t, int th)                                    \
	{                                                                                         \
		const axis_ctx *c = arg;                                                          \
		if (c->inner == 1) {                                                              \
			int64_t r1 = kr_min(t * c->per_task + c->per_task, c->outer);             \
			for (int64_t r = t * c->per_task; r < r1; r++) {                          \
				const T *x = (const T *)c->x + r * c->len;                        \
				T *y = (T *)c->y + r * c->len;                                    \
				ACC acc = 0;                                                      \
				for (int64_t k = 0; k < c->len; k++) {                            \
					acc += (ACC)x[k];                                         \
					y[k] = (T)acc;                                            \
				}                                                                 \
			}                                                                         \
			return;                                                                   \
		}                                                                                 \
		int64_t u1 = kr_min(t * c->per_task + c->per_task, c->outer * c->nblocks);        \
		ACC acc[KR_CB];                                                                   \
		for (int64_t u = t * c->per_task; u < u1; u++) {                                  \
			int64_t o = u / c->nblocks, c0 = (u % c->nblocks) * KR_CB;                \
			int64_t n = kr_min(KR_CB, c->inner - c0);                                 \
			int64_t off = o * c->len * c->inner + c0;                                 \
			const T *x = (const T *)c->x + off;                                       \
			T *y = (T *)c->y + off;                                                   \
			for (int64_t i = 0; i < n; i++)                                           \
				acc[i] = 0;                                                       \
			for (int64_t r = 0; r < c->len; r++)                                      \
				for (int64_t i = 0; i < n; i++) {                                 \
					acc[i] += (ACC)x[r * c->inner + i];                       \
					y[r * c->inner + i] = (T)acc[i];                          \
				}                                                                 \
		}                                                                                 \
	}

CUMSUM_TASK(f32, float, double)
CUMSUM_TASK(f64, double, double)
CUMSUM_TASK(i64, int64_t, uint64_t)
CUMSUM_TASK(i32, int32_t, uint64_t)
CUMSUM_TASK(i16, int16_t, uint64_t)
CUMSUM_TASK(i8, int8_t, uint64_t)
CUMSUM_TASK(u8, uint8_t, uint64_t)

air_status kref_cumsum(const k_call *call)
{
	const k_tensor *x = &call->in[0];
	rt_task_fn fn;
	switch (x->dtype) {
	case AIR_F32: fn = cumsum_f32; break;
	case AIR_F64: fn = cumsum_f64; break;
	case AIR_I64: fn = cumsum_i64; break;
	case AIR_I32: fn = cumsum_i32; break;
	case AIR_I16: fn = cumsum_i16; break;
	case AIR_I8: fn = cumsum_i8; break;
	case AIR_U8: fn = cumsum_u8; break;
	default: return kr_bad_dtype("cumsum", x->dtype);
	}
	if (x->numel == 0)
		return AIR_OK;
	axis_ctx c = {0};
	axis_plan(&c, x, x->rank ? kr_axis(call->attrs[0].i, x->rank) : 0);
	c.x = x->data;
	c.y = call->out[0].data;
	rt_pool_run(call->pool, axis_tasks(&c), fn, &c);
	return AIR_OK;
}

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

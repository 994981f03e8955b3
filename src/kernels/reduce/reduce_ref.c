/* reduce_ref.c - reference kernels of the reductions over a set of axes:
 * sum, mean, prod, amax, amin (argmax and cumsum: reduce_axis_ref.c). */
#include "kernels/reduce/reduce_ref.h"

#include <math.h>
#include <string.h>

#include "core/error.h"
#include "kernels/reduce/reduce_util.h"

/* one generated loop serves signed and unsigned element types */
#pragma GCC diagnostic ignored "-Wtype-limits"

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

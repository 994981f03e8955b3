/* reduce_util.h - what the reference reductions (reduce_ref.c,
 * reduce_axis_ref.c) and the norm family's softmax and row norms
 * (kernels/norm/norm_ref.c) share: task sizes, x viewed as [outer, len,
 * inner] along one axis, the NaN-winning max and min, and the laned sum. */
#ifndef AIR_KERNELS_REDUCE_REDUCE_UTIL_H
#define AIR_KERNELS_REDUCE_REDUCE_UTIL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"
#include "kernels/common/kernel.h"

/* f32 accumulates in double (torch's CPU cumsum does too; elsewhere it keeps
 * us within rounding of torch's pairwise float sums); integer sums and
 * products wrap, as in torch. */

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

static inline int kr_axis(int64_t axis, int rank)
{
	return (int)(axis < 0 ? axis + rank : axis);
}

/* x viewed as [outer, len, inner] around axis. */
static inline void kr_split(const k_tensor *x, int axis, int64_t *outer, int64_t *len, int64_t *inner)
{
	*outer = 1;
	*inner = 1;
	*len = x->rank ? x->dims[axis] : 1;
	for (int d = 0; d < axis; d++)
		*outer *= x->dims[d];
	for (int d = axis + 1; d < x->rank; d++)
		*inner *= x->dims[d];
}

static inline air_status kr_bad_dtype(const char *op, air_dtype dt)
{
	return air_error(AIR_UNSUPPORTED, "%s: no reference kernel for %s", op, air_dtype_name(dt));
}

/* NaN wins: once acc is NaN no comparison replaces it */
#define FMAX(acc, v) ((acc) = ((v) > (acc) || (v) != (v)) ? (v) : (acc))
#define FMIN(acc, v) ((acc) = ((v) < (acc) || (v) != (v)) ? (v) : (acc))

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

static inline void axis_plan(axis_ctx *c, const k_tensor *x, int axis)
{
	kr_split(x, axis, &c->outer, &c->len, &c->inner);
	c->nblocks = kr_ceil_div(c->inner, KR_CB);
	c->per_task = kr_per_task(c->len * kr_min(KR_CB, c->inner));
}

static inline int64_t axis_tasks(const axis_ctx *c)
{
	return kr_ceil_div(c->outer * c->nblocks, c->per_task);
}

#endif

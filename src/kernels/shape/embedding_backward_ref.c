/* embedding_backward_ref.c - out[num_weights, D] = sum of grad's rows into
 * the row each index names (padding_idx's row stays zero), for f32 and f64.
 * Threaded by splitting the weight rows: each task zeroes its own range of
 * rows and scans every index for those in it, adding in index order. So no
 * two tasks write one row, and the sums' order (hence the bits) does not
 * depend on the thread count. The scan is cheap beside the zeroing of the
 * whole table, which eager pays too. This is both the reference and the
 * kernel that runs: the row split is already the fast way. */
#include <stdatomic.h>
#include <string.h>

#include "core/error.h"
#include "kernels/shape/embedding_backward.h"

/* Most tasks: each scans every index once. */
enum { EB_MAX_TASKS = 64 };

typedef struct eb_ctx {
	const void *g, *idx;
	void *out;
	air_dtype gt, it;
	int64_t nw, d, n, pad, rows_per_task;
	atomic_llong bad; /* smallest position of an out-of-range index */
} eb_ctx;

static int64_t index_at(const eb_ctx *c, int64_t p)
{
	return c->it == AIR_I64 ? ((const int64_t *)c->idx)[p] : ((const int32_t *)c->idx)[p];
}

static void eb_task(void *arg, int64_t t, int thread)
{
	(void)thread;
	eb_ctx *c = arg;
	int64_t r0 = t * c->rows_per_task, r1 = r0 + c->rows_per_task < c->nw ? r0 + c->rows_per_task : c->nw;
	size_t es = air_dtype_size(c->gt);
	memset((char *)c->out + (size_t)(r0 * c->d) * es, 0, (size_t)((r1 - r0) * c->d) * es);
	for (int64_t p = 0; p < c->n; p++) {
		int64_t r = index_at(c, p);
		if (r < 0 || r >= c->nw) {
			/* every task sees it; the smallest position is kept */
			long long cur = atomic_load(&c->bad);
			while (p < cur && !atomic_compare_exchange_weak(&c->bad, &cur, p))
				;
			continue;
		}
		if (r < r0 || r >= r1 || r == c->pad)
			continue;
		if (c->gt == AIR_F32) {
			const float *src = (const float *)c->g + p * c->d;
			float *dst = (float *)c->out + r * c->d;
			for (int64_t j = 0; j < c->d; j++)
				dst[j] += src[j];
		} else {
			const double *src = (const double *)c->g + p * c->d;
			double *dst = (double *)c->out + r * c->d;
			for (int64_t j = 0; j < c->d; j++)
				dst[j] += src[j];
		}
	}
}

air_status kref_embedding_backward(const k_call *call)
{
	const k_tensor *g = &call->in[0], *idx = &call->in[1];
	if (g->dtype != AIR_F32 && g->dtype != AIR_F64)
		return air_error(AIR_UNSUPPORTED, "embedding_backward: no kernel for %s", air_dtype_name(g->dtype));
	for (int d = 0; d < idx->rank; d++)
		if (g->dims[d] != idx->dims[d])
			return air_error(AIR_SHAPE_MISMATCH, "embedding_backward: grad has size %lld at dim %d where indices have %lld",
					 (long long)g->dims[d], d, (long long)idx->dims[d]);
	eb_ctx c;
	c.g = g->data;
	c.idx = idx->data;
	c.out = call->out[0].data;
	c.gt = g->dtype;
	c.it = idx->dtype;
	c.nw = call->out[0].dims[0];
	c.d = call->out[0].dims[1];
	c.n = idx->numel;
	c.pad = call->attrs[1].i;
	if (c.nw == 0)
		return AIR_OK;
	int64_t tasks = k_cdiv(call->out[0].numel, K_GRAIN);
	if (tasks > EB_MAX_TASKS)
		tasks = EB_MAX_TASKS;
	if (tasks < 1)
		tasks = 1;
	c.rows_per_task = k_cdiv(c.nw, tasks);
	atomic_init(&c.bad, INT64_MAX);
	rt_pool_run(call->pool, k_cdiv(c.nw, c.rows_per_task), eb_task, &c);
	long long bad = atomic_load(&c.bad);
	if (bad != INT64_MAX)
		return air_error(AIR_INVALID_ARGUMENT, "embedding_backward: index %lld is out of range for %lld rows",
				 (long long)index_at(&c, bad), (long long)c.nw);
	return AIR_OK;
}

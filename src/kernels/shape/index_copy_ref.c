/* index_copy_ref.c - the reference kernels of index_copy and size_scalar
 * (below).
 *
 * index_copy: out = x, then
 * out[.., idx[j], ..] = src[.., j, ..] along one axis (aten.index_copy, the
 * functional form of Tensor.index_copy_, which transformers' StaticCache
 * writes its new keys and values with).
 *
 * With the memory plan's in-place reuse (out over a dying x) or the caller
 * binding out to x's own memory (an input updated in place), out == x and
 * only the indexed rows are written: a decode step then moves one token's
 * keys, not the whole cache. */
#include <string.h>

#include "core/error.h"
#include "kernels/shape/index_ref.h"
#include "kernels/shape/index_util.h"

/* x and out as [outer, size, inner], src as [outer, n, inner]. A task owns
 * whole outer slices and walks j in order, so with repeated indices the
 * last write wins in every slice (eager's serial order), whatever the
 * thread count. */
typedef struct {
	const char *src;
	const void *idx;
	air_dtype idt;
	char *y;
	int64_t outer, size, inner, n, per_task;
	size_t elem;
} icopy_ctx;

static void icopy_task(void *arg, int64_t t, int th)
{
	(void)th;
	icopy_ctx *c = arg;
	int64_t o1 = ki_min(t * c->per_task + c->per_task, c->outer);
	for (int64_t o = t * c->per_task; o < o1; o++)
		for (int64_t j = 0; j < c->n; j++) {
			int64_t v = ki_get(c->idx, c->idt, j); /* checked by the caller */
			ki_copy(c->y + (size_t)((o * c->size + v) * c->inner) * c->elem,
				c->src + (size_t)((o * c->n + j) * c->inner) * c->elem, c->inner, c->elem);
		}
}

air_status kref_index_copy(const k_call *call)
{
	const k_tensor *x = &call->in[0], *idx = &call->in[1], *src = &call->in[2];
	const k_tensor *y = &call->out[0];
	int axis = (int)(call->attrs[0].i < 0 ? call->attrs[0].i + x->rank : call->attrs[0].i);
	icopy_ctx c;
	c.src = src->data;
	c.idx = idx->data;
	c.idt = idx->dtype;
	c.y = y->data;
	c.outer = k_numel(axis, x->dims);
	c.size = x->dims[axis];
	c.inner = k_numel(x->rank - axis - 1, x->dims + axis + 1);
	c.n = idx->numel;
	c.elem = air_dtype_size(x->dtype);
	c.per_task = ki_per_task(c.n * c.inner);
	/* every index is checked before anything is written, as eager raises
	 * without touching the tensor */
	for (int64_t j = 0; j < c.n; j++) {
		int64_t v = ki_get(c.idx, c.idt, j);
		if (v < 0 || v >= c.size)
			return air_error(AIR_INVALID_ARGUMENT,
					 "index_copy: index %lld is out of bounds for dimension %d with size %lld",
					 (long long)v, axis, (long long)c.size);
	}
	if (y->data != x->data && x->numel > 0)
		memcpy(y->data, x->data, (size_t)x->numel * c.elem);
	if (c.outer > 0 && c.n > 0)
		rt_pool_run(call->pool, ki_ceil_div(c.outer, c.per_task), icopy_task, &c);
	return AIR_OK;
}

/* size_scalar: the dim its attribute names, resolved by the session */
air_status kref_size_scalar(const k_call *call)
{
	int64_t v = call->attrs[0].i;
	memcpy(call->out[0].data, &v, sizeof v);
	return AIR_OK;
}

/* shape_ref.c - reference kernels for data movement. Every view-like op is one
 * strided copy: permute, slice and expand only differ in the strides they
 * read src with. */
#include "kernels/shape/shape_ref.h"

#include <string.h>

#include "core/error.h"

typedef struct {
	char *dst;
	const char *src;
	int rank;
	int64_t dims[AIR_MAX_RANK];
	int64_t strides[AIR_MAX_RANK];
	size_t elem;
	int64_t inner, rows, rows_per_task;
} strided_ctx;

/* One row of inner elements, src stride is (in elements). */
static inline void copy_row(char *out, const char *in, int64_t inner, int64_t is, size_t elem)
{
	if (is == 1) {
		memcpy(out, in, (size_t)inner * elem);
		return;
	}
	switch (elem) {
	case 4:
		for (int64_t i = 0; i < inner; i++)
			((uint32_t *)out)[i] = ((const uint32_t *)in)[i * is];
		break;
	case 8:
		for (int64_t i = 0; i < inner; i++)
			((uint64_t *)out)[i] = ((const uint64_t *)in)[i * is];
		break;
	case 2:
		for (int64_t i = 0; i < inner; i++)
			((uint16_t *)out)[i] = ((const uint16_t *)in)[i * is];
		break;
	default:
		for (int64_t i = 0; i < inner; i++)
			out[i] = in[i * is];
	}
}

/* Rows [r0, r1): the row dims are walked like an odometer, a run along the
 * last row dim at a time, so no row divides its index (a pixel shuffle's
 * rows of 2 floats took 2.3 ns an element that way). */
static void strided_task(void *p, int64_t t, int th)
{
	const strided_ctx *c = p;
	int64_t r0 = t * c->rows_per_task, r1 = r0 + c->rows_per_task;
	if (r1 > c->rows)
		r1 = c->rows;
	if (r0 >= r1)
		return;
	const int last = c->rank - 2; /* the last row dim, or -1 for one row */
	const int64_t is = c->strides[c->rank - 1];
	int64_t pos[AIR_MAX_RANK], off = 0, q = r0;
	for (int d = last; d >= 0; d--) {
		pos[d] = q % c->dims[d];
		q /= c->dims[d];
		off += pos[d] * c->strides[d];
	}
	for (int64_t r = r0; r < r1;) {
		int64_t run = 1, rs = 0;
		if (last >= 0) {
			run = c->dims[last] - pos[last];
			run = run < r1 - r ? run : r1 - r;
			rs = c->strides[last];
		}
		for (int64_t k = 0; k < run; k++)
			copy_row(c->dst + (size_t)((r + k) * c->inner) * c->elem, c->src + (size_t)(off + k * rs) * c->elem,
				 c->inner, is, c->elem);
		r += run;
		if (last < 0)
			break;
		/* step the odometer by run along the last row dim, then carry */
		off += run * rs;
		pos[last] += run;
		for (int d = last; d > 0 && pos[d] == c->dims[d]; d--) {
			off -= c->dims[d] * c->strides[d];
			pos[d] = 0;
			pos[d - 1]++;
			off += c->strides[d - 1];
		}
	}
}

void kref_strided_copy(void *dst, const void *src, int rank, const int64_t *dims, const int64_t *strides,
		       size_t elem, rt_pool *pool)
{
	strided_ctx c;
	c.dst = dst;
	c.src = src;
	c.elem = elem;
	/* drop size-1 dims and merge dims that are contiguous in src */
	int m = 0;
	for (int d = 0; d < rank; d++) {
		if (dims[d] == 0)
			return;
		if (dims[d] == 1)
			continue;
		if (m > 0 && c.strides[m - 1] == strides[d] * dims[d]) {
			c.dims[m - 1] *= dims[d];
			c.strides[m - 1] = strides[d];
			continue;
		}
		c.dims[m] = dims[d];
		c.strides[m] = strides[d];
		m++;
	}
	if (m == 0) {
		c.dims[0] = 1;
		c.strides[0] = 1;
		m = 1;
	}
	c.rank = m;
	c.inner = c.dims[m - 1];
	c.rows = 1;
	for (int d = 0; d < m - 1; d++)
		c.rows *= c.dims[d];
	c.rows_per_task = K_GRAIN / c.inner;
	if (c.rows_per_task < 1)
		c.rows_per_task = 1;
	rt_pool_run(pool, (c.rows + c.rows_per_task - 1) / c.rows_per_task, strided_task, &c);
}

static void dense_strides(int rank, const int64_t *dims, int64_t *strides)
{
	int64_t s = 1;
	for (int d = rank - 1; d >= 0; d--) {
		strides[d] = s;
		s *= dims[d];
	}
}

air_status kref_reshape(const k_call *call)
{
	/* an alias: the executor gives the output the input's memory; this
	 * runs only when it could not (e.g. the output is a graph output) */
	size_t bytes = (size_t)call->out[0].numel * air_dtype_size(call->out[0].dtype);
	if (bytes && call->out[0].data != call->in[0].data) /* empty tensors may have NULL data */
		memcpy(call->out[0].data, call->in[0].data, bytes);
	return AIR_OK;
}

air_status kref_copy(const k_call *call)
{
	size_t bytes = (size_t)call->out[0].numel * air_dtype_size(call->out[0].dtype);
	if (bytes)
		memcpy(call->out[0].data, call->in[0].data, bytes);
	return AIR_OK;
}

air_status kref_permute(const k_call *call)
{
	const k_tensor *x = &call->in[0];
	int64_t xs[AIR_MAX_RANK], st[AIR_MAX_RANK];
	dense_strides(x->rank, x->dims, xs);
	const k_attr *perm = &call->attrs[0];
	for (int i = 0; i < x->rank; i++) {
		int64_t p = perm->ints[i] < 0 ? perm->ints[i] + x->rank : perm->ints[i];
		st[i] = xs[p];
	}
	kref_strided_copy(call->out[0].data, x->data, x->rank, call->out[0].dims, st, air_dtype_size(x->dtype),
			  call->pool);
	return AIR_OK;
}

air_status kref_expand(const k_call *call)
{
	const k_tensor *x = &call->in[0], *y = &call->out[0];
	int64_t xs[AIR_MAX_RANK], st[AIR_MAX_RANK];
	dense_strides(x->rank, x->dims, xs);
	for (int i = 0; i < y->rank; i++) {
		int j = i - (y->rank - x->rank);
		int64_t have = j >= 0 ? x->dims[j] : 1;
		if (have != 1 && have != y->dims[i])
			return air_error(AIR_SHAPE_MISMATCH, "expand: size %lld cannot expand to %lld",
					 (long long)have, (long long)y->dims[i]);
		st[i] = (j < 0 || have == 1) ? 0 : xs[j];
	}
	kref_strided_copy(y->data, x->data, y->rank, y->dims, st, air_dtype_size(x->dtype), call->pool);
	return AIR_OK;
}

air_status kref_slice(const k_call *call)
{
	const k_tensor *x = &call->in[0], *y = &call->out[0];
	int axis = (int)(call->attrs[0].i < 0 ? call->attrs[0].i + x->rank : call->attrs[0].i);
	int64_t start = call->attrs[1].i, step = call->attrs[3].i;
	/* the last element read must be inside the input */
	if (y->dims[axis] > 0 && (start < 0 || start + (y->dims[axis] - 1) * step >= x->dims[axis]))
		return air_error(AIR_SHAPE_MISMATCH, "slice: start %lld with %lld steps of %lld is outside size %lld",
				 (long long)start, (long long)y->dims[axis], (long long)step,
				 (long long)x->dims[axis]);
	int64_t st[AIR_MAX_RANK];
	dense_strides(x->rank, x->dims, st);
	size_t elem = air_dtype_size(x->dtype);
	const char *src = (const char *)x->data + (size_t)(start * st[axis]) * elem;
	st[axis] *= step;
	kref_strided_copy(y->data, src, y->rank, y->dims, st, elem, call->pool);
	return AIR_OK;
}

/* Rows [o0, o1) of the output viewed as [outer, sum of len*inner]: each
 * input's row lands at its column offset. Tasks of rows: channels-last
 * joins (a U-Net's skip, cat on the last axis) are many short rows. */
typedef struct cat_job {
	const k_call *call;
	int axis;
	size_t elem;
	int64_t inner, ystride, rows_per_task, outer;
} cat_job;

static void cat_task(void *p, int64_t t, int thread)
{
	(void)thread;
	const cat_job *j = p;
	const k_tensor *y = &j->call->out[0];
	const int64_t o0 = t * j->rows_per_task, o1 = o0 + j->rows_per_task < j->outer ? o0 + j->rows_per_task : j->outer;
	int64_t offset = 0;
	for (int k = 0; k < j->call->n_in; k++) {
		const k_tensor *x = &j->call->in[k];
		const int64_t row = x->dims[j->axis] * j->inner;
		for (int64_t o = o0; o < o1 && row > 0; o++)
			memcpy((char *)y->data + (size_t)(o * j->ystride + offset) * j->elem,
			       (const char *)x->data + (size_t)(o * row) * j->elem, (size_t)row * j->elem);
		offset += row;
	}
}

air_status kref_cat(const k_call *call)
{
	const k_tensor *y = &call->out[0];
	cat_job j;
	j.call = call;
	j.axis = (int)(call->attrs[0].i < 0 ? call->attrs[0].i + y->rank : call->attrs[0].i);
	j.elem = air_dtype_size(y->dtype);
	j.outer = 1;
	j.inner = 1;
	for (int d = 0; d < j.axis; d++)
		j.outer *= y->dims[d];
	for (int d = j.axis + 1; d < y->rank; d++)
		j.inner *= y->dims[d];
	j.ystride = y->dims[j.axis] * j.inner;
	/* symbolic dims off the axis are only known to agree now */
	for (int k = 0; k < call->n_in; k++)
		for (int d = 0; d < y->rank; d++)
			if (d != j.axis && call->in[k].dims[d] != y->dims[d])
				return air_error(AIR_SHAPE_MISMATCH, "cat: input %d has size %lld at dim %d, input 0 %lld",
						 k, (long long)call->in[k].dims[d], d, (long long)y->dims[d]);
	if (y->numel <= 0 || j.outer <= 0)
		return AIR_OK;
	/* about 64 KiB of output per task */
	int64_t row_bytes = j.ystride * (int64_t)j.elem;
	j.rows_per_task = row_bytes > 0 ? (65536 + row_bytes - 1) / row_bytes : j.outer;
	rt_pool_run(call->pool, (j.outer + j.rows_per_task - 1) / j.rows_per_task, cat_task, &j);
	return AIR_OK;
}

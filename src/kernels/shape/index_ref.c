/* index_ref.c - reference kernels of indexing and creation: arange, full,
 * embedding, gather, index (advanced indexing) and index_select. */
#include "kernels/shape/index_ref.h"

#include <stdatomic.h>
#include <string.h>

#include "core/error.h"
#include "kernels/common/half.h"
#include "kernels/shape/index_util.h"

static void ki_dense_strides(int rank, const int64_t *dims, int64_t *strides)
{
	int64_t s = 1;
	for (int d = rank - 1; d >= 0; d--) {
		strides[d] = s;
		s *= dims[d];
	}
}

/* ---- arange ------------------------------------------------------------ */

typedef struct {
	void *y;
	air_dtype dt;
	double start, step;
	int64_t istart, istep, n;
} arange_ctx;

/* out[i] = start + i*step: in double for f32/f64, in float for f16/bf16 and
 * in int64 (wrapping) for integers, the accumulate types torch's CPU kernel
 * uses */
static void arange_task(void *arg, int64_t t, int th)
{
	const arange_ctx *c = arg;
	int64_t lo = t * K_GRAIN, hi = ki_min(lo + K_GRAIN, c->n);
	uint64_t s = (uint64_t)c->istart, st = (uint64_t)c->istep;
	for (int64_t i = lo; i < hi; i++) {
		int64_t iv = (int64_t)(s + st * (uint64_t)i);
		switch (c->dt) {
		case AIR_F32: ((float *)c->y)[i] = (float)(c->start + c->step * (double)i); break;
		case AIR_F64: ((double *)c->y)[i] = c->start + c->step * (double)i; break;
		case AIR_F16:
			((uint16_t *)c->y)[i] = k_f32_to_f16((float)c->start + (float)c->step * (float)i);
			break;
		case AIR_BF16:
			((uint16_t *)c->y)[i] = k_f32_to_bf16((float)c->start + (float)c->step * (float)i);
			break;
		case AIR_I64: ((int64_t *)c->y)[i] = iv; break;
		case AIR_I32: ((int32_t *)c->y)[i] = (int32_t)iv; break;
		case AIR_I16: ((int16_t *)c->y)[i] = (int16_t)iv; break;
		case AIR_I8: ((int8_t *)c->y)[i] = (int8_t)iv; break;
		case AIR_U8: ((uint8_t *)c->y)[i] = (uint8_t)iv; break;
		default: break;
		}
	}
}

air_status kref_arange(const k_call *call)
{
	const k_tensor *y = &call->out[0];
	if (y->dtype == AIR_BOOL || y->dtype >= AIR_DTYPE_COUNT)
		return air_error(AIR_UNSUPPORTED, "arange: no reference kernel for %s", air_dtype_name(y->dtype));
	arange_ctx c = {y->data, y->dtype, call->attrs[0].f, call->attrs[1].f, 0, 0, y->numel};
	/* shape inference checked that start and step fit in int64 */
	if (y->dtype != AIR_F32 && y->dtype != AIR_F64 && y->dtype != AIR_F16 && y->dtype != AIR_BF16) {
		c.istart = (int64_t)c.start;
		c.istep = (int64_t)c.step;
	}
	rt_pool_run(call->pool, ki_ceil_div(y->numel, K_GRAIN), arange_task, &c);
	return AIR_OK;
}

/* ---- full -------------------------------------------------------------- */

typedef struct {
	char *y;
	unsigned char bytes[8]; /* the value, one element */
	size_t elem;
	int64_t n;
} full_ctx;

static void full_task(void *arg, int64_t t, int th)
{
	const full_ctx *c = arg;
	int64_t lo = t * K_GRAIN, hi = ki_min(lo + K_GRAIN, c->n);
	for (int64_t i = lo; i < hi; i++)
		memcpy(c->y + (size_t)i * c->elem, c->bytes, c->elem);
}

air_status kref_full(const k_call *call)
{
	const k_tensor *y = &call->out[0];
	double v = call->attrs[1].f;
	full_ctx c = {y->data, {0}, air_dtype_size(y->dtype), y->numel};
	/* shape inference checked that v fits the integer dtypes */
	switch (y->dtype) {
	case AIR_F32: { float f = (float)v; memcpy(c.bytes, &f, 4); break; }
	case AIR_F64: memcpy(c.bytes, &v, 8); break;
	case AIR_F16: { uint16_t h = k_f32_to_f16((float)v); memcpy(c.bytes, &h, 2); break; }
	case AIR_BF16: { uint16_t h = k_f32_to_bf16((float)v); memcpy(c.bytes, &h, 2); break; }
	case AIR_I64: { int64_t i = (int64_t)v; memcpy(c.bytes, &i, 8); break; }
	case AIR_I32: { int32_t i = (int32_t)v; memcpy(c.bytes, &i, 4); break; }
	case AIR_I16: { int16_t i = (int16_t)v; memcpy(c.bytes, &i, 2); break; }
	case AIR_I8: { int8_t i = (int8_t)v; memcpy(c.bytes, &i, 1); break; }
	case AIR_U8: { uint8_t i = (uint8_t)v; memcpy(c.bytes, &i, 1); break; }
	case AIR_BOOL: c.bytes[0] = v != 0.0; break; /* NaN is true, as in torch */
	default: return air_error(AIR_UNSUPPORTED, "full: no reference kernel for %s", air_dtype_name(y->dtype));
	}
	rt_pool_run(call->pool, ki_ceil_div(y->numel, K_GRAIN), full_task, &c);
	return AIR_OK;
}

/* ---- embedding --------------------------------------------------------- */

typedef struct {
	const char *w;
	const void *idx;
	air_dtype idt;
	char *y;
	int64_t rows, width, n, per_task;
	size_t elem;
	atomic_llong bad;
} embedding_ctx;

static void embedding_task(void *arg, int64_t t, int th)
{
	embedding_ctx *c = arg;
	size_t row_bytes = (size_t)c->width * c->elem;
	int64_t p1 = ki_min(t * c->per_task + c->per_task, c->n);
	for (int64_t p = t * c->per_task; p < p1; p++) {
		int64_t r = ki_get(c->idx, c->idt, p);
		if (r < 0 || r >= c->rows) {
			ki_note_bad(&c->bad, p);
			continue;
		}
		ki_copy(c->y + (size_t)p * row_bytes, c->w + (size_t)r * row_bytes, c->width, c->elem);
	}
}

air_status kref_embedding(const k_call *call)
{
	const k_tensor *w = &call->in[0], *idx = &call->in[1];
	embedding_ctx c;
	c.w = w->data;
	c.idx = idx->data;
	c.idt = idx->dtype;
	c.y = call->out[0].data;
	c.rows = w->dims[0];
	c.width = w->dims[1];
	c.n = idx->numel;
	c.per_task = ki_per_task(c.width);
	c.elem = air_dtype_size(w->dtype);
	atomic_init(&c.bad, INT64_MAX);
	rt_pool_run(call->pool, ki_ceil_div(c.n, c.per_task), embedding_task, &c);
	int64_t bad = atomic_load(&c.bad);
	if (bad != INT64_MAX)
		return air_error(AIR_INVALID_ARGUMENT, "embedding: index %lld is out of range for %lld rows",
				 (long long)ki_get(idx->data, idx->dtype, bad), (long long)c.rows);
	return AIR_OK;
}

/* ---- gather ------------------------------------------------------------ */

/* out[p] = x[p with p[axis] replaced by index[p]]: out and index are
 * [rows, inner] over index's dims; x is read through its own strides. */
typedef struct {
	const char *x;
	const void *idx;
	air_dtype idt;
	char *y;
	int rank, axis;
	int64_t idims[AIR_MAX_RANK], xstr[AIR_MAX_RANK];
	int64_t axis_size, rows, inner, per_task;
	size_t elem;
	atomic_llong bad;
} gather_ctx;

static void gather_task(void *arg, int64_t t, int th)
{
	gather_ctx *c = arg;
	int last = c->rank - 1;
	int64_t r1 = ki_min(t * c->per_task + c->per_task, c->rows);
	for (int64_t r = t * c->per_task; r < r1; r++) {
		int64_t base = 0, q = r;
		for (int d = last - 1; d >= 0; d--) {
			if (d != c->axis)
				base += (q % c->idims[d]) * c->xstr[d];
			q /= c->idims[d];
		}
		for (int64_t i = 0; i < c->inner; i++) {
			int64_t p = r * c->inner + i;
			int64_t v = ki_get(c->idx, c->idt, p);
			if (v < 0 || v >= c->axis_size) {
				ki_note_bad(&c->bad, p);
				continue;
			}
			int64_t off = base + v * c->xstr[c->axis] + (c->axis == last ? 0 : i);
			ki_copy(c->y + (size_t)p * c->elem, c->x + (size_t)off * c->elem, 1, c->elem);
		}
	}
}

air_status kref_gather(const k_call *call)
{
	const k_tensor *x = &call->in[0], *idx = &call->in[1];
	gather_ctx c;
	memset(&c, 0, sizeof c);
	/* a scalar is a vector of one here */
	c.rank = x->rank ? x->rank : 1;
	c.axis = x->rank ? (int)(call->attrs[0].i < 0 ? call->attrs[0].i + x->rank : call->attrs[0].i) : 0;
	int64_t xdims[AIR_MAX_RANK];
	for (int d = 0; d < c.rank; d++) {
		xdims[d] = x->rank ? x->dims[d] : 1;
		c.idims[d] = x->rank ? idx->dims[d] : 1;
		if (d != c.axis && c.idims[d] > xdims[d])
			return air_error(AIR_SHAPE_MISMATCH, "gather: index has size %lld at dim %d, above x's %lld",
					 (long long)c.idims[d], d, (long long)xdims[d]);
	}
	ki_dense_strides(c.rank, xdims, c.xstr);
	c.x = x->data;
	c.idx = idx->data;
	c.idt = idx->dtype;
	c.y = call->out[0].data;
	c.axis_size = xdims[c.axis];
	c.inner = c.idims[c.rank - 1];
	c.rows = c.inner ? idx->numel / c.inner : 0;
	c.per_task = ki_per_task(c.inner);
	c.elem = air_dtype_size(x->dtype);
	atomic_init(&c.bad, INT64_MAX);
	rt_pool_run(call->pool, ki_ceil_div(c.rows, c.per_task), gather_task, &c);
	int64_t bad = atomic_load(&c.bad);
	if (bad != INT64_MAX)
		return air_error(AIR_INVALID_ARGUMENT, "gather: index %lld is out of bounds for dimension %d with size %lld",
				 (long long)ki_get(idx->data, idx->dtype, bad), c.axis, (long long)c.axis_size);
	return AIR_OK;
}

/* ---- index_select ------------------------------------------------------ */

/* x as [outer, size, inner], out as [outer, n, inner]: a unit (o, j) copies
 * one run of inner elements. */
typedef struct {
	const char *x;
	const void *idx;
	air_dtype idt;
	char *y;
	int64_t outer, size, inner, n, per_task;
	size_t elem;
	atomic_llong bad;
} select_ctx;

static void select_task(void *arg, int64_t t, int th)
{
	select_ctx *c = arg;
	int64_t u1 = ki_min(t * c->per_task + c->per_task, c->outer * c->n);
	for (int64_t u = t * c->per_task; u < u1; u++) {
		int64_t o = u / c->n, j = u % c->n;
		int64_t v = ki_get(c->idx, c->idt, j);
		if (v < 0 || v >= c->size) {
			ki_note_bad(&c->bad, j);
			continue;
		}
		ki_copy(c->y + (size_t)(u * c->inner) * c->elem, c->x + (size_t)((o * c->size + v) * c->inner) * c->elem,
			c->inner, c->elem);
	}
}

air_status kref_index_select(const k_call *call)
{
	const k_tensor *x = &call->in[0], *idx = &call->in[1];
	int axis = (int)(call->attrs[0].i < 0 ? call->attrs[0].i + x->rank : call->attrs[0].i);
	select_ctx c;
	c.x = x->data;
	c.idx = idx->data;
	c.idt = idx->dtype;
	c.y = call->out[0].data;
	c.outer = k_numel(axis, x->dims);
	c.size = x->dims[axis];
	c.inner = k_numel(x->rank - axis - 1, x->dims + axis + 1);
	c.n = idx->numel;
	c.per_task = ki_per_task(c.inner);
	c.elem = air_dtype_size(x->dtype);
	atomic_init(&c.bad, INT64_MAX);
	/* with no rows at all the indices are still checked, as torch does */
	int64_t units = c.outer ? c.outer * c.n : 0;
	if (units == 0)
		for (int64_t j = 0; j < c.n; j++) {
			int64_t v = ki_get(c.idx, c.idt, j);
			if (v < 0 || v >= c.size) {
				ki_note_bad(&c.bad, j);
				break;
			}
		}
	rt_pool_run(call->pool, ki_ceil_div(units, c.per_task), select_task, &c);
	int64_t bad = atomic_load(&c.bad);
	if (bad != INT64_MAX)
		return air_error(AIR_INVALID_ARGUMENT,
				 "index_select: index %lld is out of range for dimension %d with size %lld",
				 (long long)ki_get(idx->data, idx->dtype, bad), axis, (long long)c.size);
	return AIR_OK;
}

/* ---- index (advanced indexing) ----------------------------------------- */

/* The output is [rows..., tail...] where tail is x's dims after the last
 * indexed axis (always last, contiguous in x and out). Each row dim either
 * walks a non-indexed dim of x or a dim of the broadcast index shape; per
 * row dim we keep the stride it adds to x's offset and to each index
 * tensor's offset (0 where an index tensor is broadcast). */
typedef struct {
	const char *x;
	char *y;
	int k; /* index tensors */
	const void *idx[AIR_MAX_RANK];
	air_dtype idt[AIR_MAX_RANK];
	int64_t size[AIR_MAX_RANK];   /* x's size along indexed axis j */
	int64_t axstr[AIR_MAX_RANK];  /* x's stride along indexed axis j */
	int nrd;                      /* row dims */
	int64_t rdims[AIR_MAX_RANK];
	int64_t rxstr[AIR_MAX_RANK];
	int64_t ristr[AIR_MAX_RANK][AIR_MAX_RANK]; /* [row dim][index tensor] */
	int64_t rows, tail, per_task;
	size_t elem;
	int run_index; /* the index tensor that alone moves along the last row dim (gather_run), or -1 */
	atomic_llong bad;
} index_ctx;

/* x's offset for the row whose non-indexed part is at xoff and whose index
 * tensors are read at ioff[j], or -1 if an index is out of range. Negative
 * indices count from the end once, as in torch. */
static int64_t index_offset(const index_ctx *c, int64_t xoff, const int64_t *ioff)
{
	for (int j = 0; j < c->k; j++) {
		int64_t v = ki_get(c->idx[j], c->idt[j], ioff[j]), w = v < 0 ? v + c->size[j] : v;
		if (w < 0 || w >= c->size[j])
			return -1;
		xoff += w * c->axstr[j];
	}
	return xoff;
}

/* Rows [r, r + n) that differ only along the last row dim, where x's
 * offset stays and only index tensor jr moves (by one element a row) and
 * each row is one element of 4 bytes: y[r + q] = x[base + w(q) * stride]. A
 * nearest-neighbour upsample is this gather, a row of the output a run. */
static void gather_run(index_ctx *c, int64_t xoff, const int64_t *ioff, int jr, int64_t n, int64_t r)
{
	int64_t base = xoff;
	for (int j = 0; j < c->k; j++) {
		if (j == jr)
			continue;
		int64_t v = ki_get(c->idx[j], c->idt[j], ioff[j]), w = v < 0 ? v + c->size[j] : v;
		if (w < 0 || w >= c->size[j]) {
			ki_note_bad(&c->bad, r);
			return;
		}
		base += w * c->axstr[j];
	}
	const uint32_t *x = (const uint32_t *)c->x + base;
	uint32_t *y = (uint32_t *)c->y + r;
	const int64_t size = c->size[jr], stride = c->axstr[jr];
#define GATHER_RUN(T)                                                       \
	do {                                                                \
		const T *ix = (const T *)c->idx[jr] + ioff[jr];             \
		for (int64_t q = 0; q < n; q++) {                           \
			int64_t v = ix[q], w = v < 0 ? v + size : v;        \
			if (w < 0 || w >= size) {                           \
				ki_note_bad(&c->bad, r + q);                \
				return;                                     \
			}                                                   \
			y[q] = x[w * stride];                               \
		}                                                           \
	} while (0)
	if (c->idt[jr] == AIR_I64)
		GATHER_RUN(int64_t);
	else
		GATHER_RUN(int32_t);
#undef GATHER_RUN
}

/* Row r's offset from scratch (for the error message), with *bad_j and
 * *bad_v set if an index is out of range. */
static int64_t index_row(const index_ctx *c, int64_t r, int *bad_j, int64_t *bad_v)
{
	int64_t xoff = 0, ioff[AIR_MAX_RANK] = {0};
	for (int e = c->nrd - 1; e >= 0; e--) {
		int64_t p = r % c->rdims[e];
		r /= c->rdims[e];
		xoff += p * c->rxstr[e];
		for (int j = 0; j < c->k; j++)
			ioff[j] += p * c->ristr[e][j];
	}
	for (int j = 0; j < c->k; j++) {
		int64_t v = ki_get(c->idx[j], c->idt[j], ioff[j]), w = v < 0 ? v + c->size[j] : v;
		if (w < 0 || w >= c->size[j]) {
			*bad_j = j;
			*bad_v = v;
			return -1;
		}
		xoff += w * c->axstr[j];
	}
	return xoff;
}

/* Rows run in order, their offsets kept like an odometer: a division per
 * row dim for every row made an upsample's gather (one float per row) take
 * 10 ns an element. */
static void index_task(void *arg, int64_t t, int th)
{
	index_ctx *c = arg;
	int64_t r0 = t * c->per_task, r1 = ki_min(r0 + c->per_task, c->rows);
	if (r0 >= r1)
		return;
	int64_t pos[AIR_MAX_RANK], xoff = 0, ioff[AIR_MAX_RANK] = {0};
	int64_t rest = r0;
	for (int e = c->nrd - 1; e >= 0; e--) {
		pos[e] = rest % c->rdims[e];
		rest /= c->rdims[e];
		xoff += pos[e] * c->rxstr[e];
		for (int j = 0; j < c->k; j++)
			ioff[j] += pos[e] * c->ristr[e][j];
	}
	const int last = c->nrd - 1, jr = c->run_index;
	for (int64_t r = r0; r < r1;) {
		int64_t step = 1;
		if (jr >= 0) {
			/* a run along the last row dim, which moves only index
			 * tensor jr: a 1-D gather from one row of x */
			step = ki_min(c->rdims[last] - pos[last], r1 - r);
			gather_run(c, xoff, ioff, jr, step, r);
		} else {
			int64_t off = index_offset(c, xoff, ioff);
			if (off < 0)
				ki_note_bad(&c->bad, r);
			else
				ki_copy(c->y + (size_t)(r * c->tail) * c->elem, c->x + (size_t)off * c->elem, c->tail,
					c->elem);
		}
		r += step;
		/* the next row: the last dim steps, and carries */
		xoff += (step - 1) * c->rxstr[last];
		for (int j = 0; j < c->k; j++)
			ioff[j] += (step - 1) * c->ristr[last][j];
		pos[last] += step - 1;
		for (int e = last; e >= 0; e--) {
			xoff += c->rxstr[e];
			for (int j = 0; j < c->k; j++)
				ioff[j] += c->ristr[e][j];
			if (++pos[e] < c->rdims[e])
				break;
			xoff -= c->rdims[e] * c->rxstr[e];
			for (int j = 0; j < c->k; j++)
				ioff[j] -= c->rdims[e] * c->ristr[e][j];
			pos[e] = 0;
		}
	}
}

air_status kref_index(const k_call *call)
{
	const k_tensor *x = &call->in[0], *y = &call->out[0];
	index_ctx c;
	memset(&c, 0, sizeof c);
	c.k = call->n_in - 1;
	int ax[AIR_MAX_RANK];
	for (int j = 0; j < c.k; j++) {
		int64_t a = call->attrs[0].ints[j];
		ax[j] = (int)(a < 0 ? a + x->rank : a);
	}
	/* the broadcast shape of the index tensors, from their concrete dims */
	int brank = 0;
	int64_t bdims[AIR_MAX_RANK];
	for (int j = 0; j < c.k; j++)
		if (call->in[1 + j].rank > brank)
			brank = call->in[1 + j].rank;
	for (int d = 0; d < brank; d++) {
		bdims[d] = 1;
		for (int j = 0; j < c.k; j++) {
			const k_tensor *t = &call->in[1 + j];
			int dj = d - (brank - t->rank);
			int64_t s = dj >= 0 ? t->dims[dj] : 1;
			if (s == bdims[d] || s == 1)
				continue;
			if (bdims[d] != 1)
				return air_error(AIR_SHAPE_MISMATCH,
						 "index: index tensors of sizes %lld and %lld at dim %d do not broadcast",
						 (long long)bdims[d], (long long)s, d);
			bdims[d] = s;
		}
	}
	int64_t xstr[AIR_MAX_RANK];
	ki_dense_strides(x->rank, x->dims, xstr);
	bool adjacent = ax[c.k - 1] - ax[0] == c.k - 1;
	int ntail = x->rank - 1 - ax[c.k - 1];
	/* row dims: (x dims before the first indexed axis, then B) if adjacent,
	 * else (B, then every non-indexed x dim before the tail) */
	int lead = adjacent ? ax[0] : 0;
	for (int d = 0; d < lead; d++) {
		c.rdims[c.nrd] = x->dims[d];
		c.rxstr[c.nrd++] = xstr[d];
	}
	for (int d = 0; d < brank; d++) {
		c.rdims[c.nrd] = bdims[d];
		for (int j = 0; j < c.k; j++) {
			const k_tensor *t = &call->in[1 + j];
			int dj = d - (brank - t->rank);
			if (dj >= 0 && t->dims[dj] != 1)
				c.ristr[c.nrd][j] = k_numel(t->rank - dj - 1, t->dims + dj + 1);
		}
		c.nrd++;
	}
	if (!adjacent)
		for (int d = 0, j = 0; d <= ax[c.k - 1]; d++) {
			if (j < c.k && ax[j] == d) {
				j++;
				continue;
			}
			c.rdims[c.nrd] = x->dims[d];
			c.rxstr[c.nrd++] = xstr[d];
		}
	/* shape inference used max() for symbolic broadcasts: the concrete
	 * shape must be what it promised */
	bool same = y->rank == c.nrd + ntail;
	for (int e = 0; same && e < c.nrd; e++)
		same = y->dims[e] == c.rdims[e];
	for (int d = 0; same && d < ntail; d++)
		same = y->dims[c.nrd + d] == x->dims[ax[c.k - 1] + 1 + d];
	if (!same)
		return air_error(AIR_SHAPE_MISMATCH, "index: the index tensors' sizes do not match the planned output");
	for (int j = 0; j < c.k; j++) {
		c.idx[j] = call->in[1 + j].data;
		c.idt[j] = call->in[1 + j].dtype;
		c.size[j] = x->dims[ax[j]];
		c.axstr[j] = xstr[ax[j]];
	}
	c.x = x->data;
	c.y = y->data;
	c.rows = k_numel(c.nrd, c.rdims);
	c.tail = k_numel(ntail, x->dims + ax[c.k - 1] + 1);
	c.per_task = ki_per_task(c.tail);
	c.elem = air_dtype_size(x->dtype);
	c.run_index = -1;
	if (c.tail == 1 && c.elem == 4 && c.nrd > 0 && c.rxstr[c.nrd - 1] == 0) {
		int moving = 0;
		for (int j = 0; j < c.k; j++)
			if (c.ristr[c.nrd - 1][j] != 0) {
				moving++;
				c.run_index = c.ristr[c.nrd - 1][j] == 1 ? j : -1;
			}
		if (moving != 1)
			c.run_index = -1;
	}
	atomic_init(&c.bad, INT64_MAX);
	rt_pool_run(call->pool, ki_ceil_div(c.rows, c.per_task), index_task, &c);
	int64_t bad = atomic_load(&c.bad);
	if (bad != INT64_MAX) {
		int bj = 0;
		int64_t bv = 0;
		index_row(&c, bad, &bj, &bv);
		return air_error(AIR_INVALID_ARGUMENT, "index: index %lld is out of bounds for dimension %d with size %lld",
				 (long long)bv, ax[bj], (long long)c.size[bj]);
	}
	return AIR_OK;
}

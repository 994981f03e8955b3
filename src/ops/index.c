/* index.c - op table entries of indexing and creation: arange, full,
 * embedding, gather, index (advanced indexing), index_select, index_copy,
 * and size_scalar (a symbolic size as a 0-d i64 tensor). */
#include <float.h>
#include <math.h>

#include "core/error.h"
#include "kernels/shape/index_ref.h"
#include "ops/op.h"

/* Index values are checked by the kernels at run time; here only dtypes,
 * ranks and the sizes that are known. */
static bool is_index_dtype(air_dtype d)
{
	return d == AIR_I64 || d == AIR_I32;
}

static air_status check_index_dtype(op_infer_ctx *c, int k)
{
	if (!is_index_dtype(c->in[k]->dtype))
		return op_fail(c, AIR_UNSUPPORTED, "indices (input %d) must be i64 or i32, not %s", k,
			       air_dtype_name(c->in[k]->dtype));
	return AIR_OK;
}

static air_status check_dtype_attr(op_infer_ctx *c, int attr, air_dtype *out)
{
	int64_t d = op_attr(c, attr)->i;
	if (d < 0 || d >= AIR_DTYPE_COUNT)
		return op_fail(c, AIR_INVALID_ARGUMENT, "unknown dtype %lld", (long long)d);
	*out = (air_dtype)d;
	return AIR_OK;
}

/* Is v an acceptable double to truncate to int64 (finite, in range)? */
static bool fits_i64(double v)
{
	return v >= -9223372036854775808.0 && v < 9223372036854775808.0;
}

static air_status infer_arange(op_infer_ctx *c)
{
	air_dtype dt = AIR_F32;
	AIR_TRY(check_dtype_attr(c, 3, &dt));
	if (dt == AIR_BOOL)
		return op_fail(c, AIR_UNSUPPORTED, "no kernel for bool (torch has none either)");
	double start = op_attr(c, 0)->f, step = op_attr(c, 1)->f;
	if (!isfinite(start) || !isfinite(step))
		return op_fail(c, AIR_INVALID_ARGUMENT, "start and step must be finite, got %g and %g", start, step);
	/* integer dtypes truncate start and step to int64, like torch */
	if (dt != AIR_F32 && dt != AIR_F64 && dt != AIR_F16 && dt != AIR_BF16 && (!fits_i64(start) || !fits_i64(step)))
		return op_fail(c, AIR_INVALID_ARGUMENT, "start %g or step %g does not fit in int64", start, step);
	c->out[0].dtype = dt;
	c->out[0].rank = 1;
	c->out[0].dims[0] = op_attr(c, 2)->i;
	return AIR_OK;
}

static air_status infer_full(op_infer_ctx *c)
{
	air_dtype dt = AIR_F32;
	AIR_TRY(check_dtype_attr(c, 2, &dt));
	const ir_attr *shape = op_attr(c, 0);
	if (shape->n > AIR_MAX_RANK)
		return op_fail(c, AIR_UNSUPPORTED, "rank %d is above %d", shape->n, AIR_MAX_RANK);
	double v = op_attr(c, 1)->f;
	/* torch refuses values the dtype cannot hold (checked before
	 * truncation: 255.5 does not fit u8); 16-bit floats overflow to inf */
	bool ok;
	switch (dt) {
	case AIR_I64: ok = v >= -9223372036854775808.0 && v < 9223372036854775808.0; break;
	case AIR_I32: ok = v >= INT32_MIN && v <= INT32_MAX; break;
	case AIR_I16: ok = v >= INT16_MIN && v <= INT16_MAX; break;
	case AIR_I8: ok = v >= INT8_MIN && v <= INT8_MAX; break;
	case AIR_U8: ok = v >= 0 && v <= UINT8_MAX; break;
	case AIR_F32: ok = !isfinite(v) || fabs(v) <= FLT_MAX; break;
	default: ok = true; break;
	}
	if (!ok)
		return op_fail(c, AIR_INVALID_ARGUMENT, "value %g cannot be converted to %s without overflow", v,
			       air_dtype_name(dt));
	c->out[0].dtype = dt;
	c->out[0].rank = shape->n;
	for (int i = 0; i < shape->n; i++)
		c->out[0].dims[i] = shape->ints[i];
	return AIR_OK;
}

/* size_scalar(size): a 0-d i64 tensor holding a dim, known when the session
 * binds its inputs (a SymInt that an FX graph adds to a tensor: StaticCache's
 * position counter + the prompt's length). */
static air_status infer_size_scalar(op_infer_ctx *c)
{
	c->out[0].dtype = AIR_I64;
	c->out[0].rank = 0;
	return AIR_OK;
}

static air_status infer_embedding(op_infer_ctx *c)
{
	const ir_value *w = c->in[0], *idx = c->in[1];
	if (w->rank != 2)
		return op_fail(c, AIR_SHAPE_MISMATCH, "weight must have rank 2, got %d", w->rank);
	AIR_TRY(check_index_dtype(c, 1));
	if (idx->rank + 1 > AIR_MAX_RANK)
		return op_fail(c, AIR_UNSUPPORTED, "indices of rank %d give a rank above %d", idx->rank, AIR_MAX_RANK);
	c->out[0].dtype = w->dtype;
	c->out[0].rank = idx->rank + 1;
	for (int d = 0; d < idx->rank; d++)
		c->out[0].dims[d] = idx->dims[d];
	c->out[0].dims[idx->rank] = w->dims[1];
	return AIR_OK;
}

static air_status infer_gather(op_infer_ctx *c)
{
	const ir_value *x = c->in[0], *idx = c->in[1];
	AIR_TRY(check_index_dtype(c, 1));
	if (idx->rank != x->rank)
		return op_fail(c, AIR_SHAPE_MISMATCH, "index has rank %d but x has rank %d", idx->rank, x->rank);
	int axis;
	AIR_TRY(op_axis(c, op_attr(c, 0)->i, x->rank, &axis));
	for (int d = 0; d < x->rank; d++)
		if (d != axis && idx->dims[d] >= 0 && x->dims[d] >= 0 && idx->dims[d] > x->dims[d])
			return op_fail(c, AIR_SHAPE_MISMATCH, "index has size %lld at dim %d, above x's %lld",
				       (long long)idx->dims[d], d, (long long)x->dims[d]);
	c->out[0] = *idx;
	c->out[0].dtype = x->dtype;
	return AIR_OK;
}

static air_status infer_index_select(op_infer_ctx *c)
{
	const ir_value *x = c->in[0], *idx = c->in[1];
	AIR_TRY(check_index_dtype(c, 1));
	if (x->rank == 0)
		return op_fail(c, AIR_UNSUPPORTED, "x must have rank >= 1 (reshape a scalar first)");
	if (idx->rank > 1)
		return op_fail(c, AIR_SHAPE_MISMATCH, "index must be a vector, got rank %d", idx->rank);
	int axis;
	AIR_TRY(op_axis(c, op_attr(c, 0)->i, x->rank, &axis));
	c->out[0] = *x;
	c->out[0].dims[axis] = idx->rank ? idx->dims[0] : 1;
	return AIR_OK;
}

/* index_copy(x, index, src; axis): x with the slices index[j] along axis
 * replaced by src's slices j. src is x's shape with index's length on the
 * axis (eager broadcasts nothing here either). */
static air_status infer_index_copy(op_infer_ctx *c)
{
	const ir_value *x = c->in[0], *idx = c->in[1], *src = c->in[2];
	AIR_TRY(check_index_dtype(c, 1));
	if (x->rank == 0)
		return op_fail(c, AIR_UNSUPPORTED, "x must have rank >= 1 (reshape a scalar first)");
	if (idx->rank > 1)
		return op_fail(c, AIR_SHAPE_MISMATCH, "index must be a vector, got rank %d", idx->rank);
	if (src->dtype != x->dtype)
		return op_fail(c, AIR_DTYPE_MISMATCH, "source is %s, x is %s", air_dtype_name(src->dtype),
			       air_dtype_name(x->dtype));
	int axis;
	AIR_TRY(op_axis(c, op_attr(c, 0)->i, x->rank, &axis));
	if (src->rank != x->rank)
		return op_fail(c, AIR_SHAPE_MISMATCH, "source has rank %d, x rank %d", src->rank, x->rank);
	air_dim n = idx->rank ? idx->dims[0] : 1;
	for (int d = 0; d < x->rank; d++) {
		air_dim want = d == axis ? n : x->dims[d];
		if (!ir_dim_equal(c->g, src->dims[d], want))
			return op_fail(c, AIR_SHAPE_MISMATCH, "source dim %d must match %s", d,
				       d == axis ? "the index's length" : "x's");
	}
	c->out[0] = *x;
	return AIR_OK;
}

/* aten.index.Tensor with integer index tensors on the axes named by `axes`
 * (strictly increasing). The index tensors broadcast to one shape B, which
 * replaces the indexed axes where they stood if those axes are adjacent,
 * and goes in front of the remaining axes otherwise (PyTorch's rule). */
static air_status infer_index(op_infer_ctx *c)
{
	const ir_value *x = c->in[0];
	const ir_attr *axes = op_attr(c, 0);
	int k = c->n_in - 1;
	if (axes->n != k)
		return op_fail(c, AIR_INVALID_ARGUMENT, "axes has %d entries for %d index tensors", axes->n, k);
	if (k > x->rank)
		return op_fail(c, AIR_INVALID_ARGUMENT, "%d index tensors for rank %d", k, x->rank);
	int ax[AIR_MAX_RANK];
	for (int j = 0; j < k; j++) {
		AIR_TRY(op_axis(c, axes->ints[j], x->rank, &ax[j]));
		if (j > 0 && ax[j] <= ax[j - 1])
			return op_fail(c, AIR_INVALID_ARGUMENT, "axes must be strictly increasing");
		AIR_TRY(check_index_dtype(c, 1 + j));
	}
	ir_value b = *c->in[1];
	for (int j = 2; j <= k; j++)
		AIR_TRY(op_broadcast(c, &b, c->in[j], &b.rank, b.dims));
	int out_rank = x->rank - k + b.rank;
	if (out_rank > AIR_MAX_RANK)
		return op_fail(c, AIR_UNSUPPORTED, "the result has rank %d, above %d", out_rank, AIR_MAX_RANK);
	bool adjacent = ax[k - 1] - ax[0] == k - 1;
	ir_value *y = &c->out[0];
	y->dtype = x->dtype;
	y->rank = 0;
	if (adjacent) {
		for (int d = 0; d < ax[0]; d++)
			y->dims[y->rank++] = x->dims[d];
		for (int d = 0; d < b.rank; d++)
			y->dims[y->rank++] = b.dims[d];
		for (int d = ax[k - 1] + 1; d < x->rank; d++)
			y->dims[y->rank++] = x->dims[d];
	} else {
		for (int d = 0; d < b.rank; d++)
			y->dims[y->rank++] = b.dims[d];
		for (int d = 0, j = 0; d < x->rank; d++) {
			if (j < k && ax[j] == d)
				j++;
			else
				y->dims[y->rank++] = x->dims[d];
		}
	}
	return AIR_OK;
}

static const op_attr_spec arange_attrs[] = {
	{"start", OPA_FLOAT, false, 0, 0.0},
	{"step", OPA_FLOAT, false, 0, 1.0},
	{"length", OPA_DIM, true, 0, 0},
	{"dtype", OPA_INT, true, 0, 0},
};
static const op_attr_spec full_attrs[] = {
	{"shape", OPA_DIMS, true, 0, 0},
	{"value", OPA_FLOAT, true, 0, 0},
	{"dtype", OPA_INT, true, 0, 0},
};
static const op_attr_spec axis_attrs[] = {{"axis", OPA_INT, true, 0, 0}};
static const op_attr_spec size_scalar_attrs[] = {{"size", OPA_DIM, true, 0, 0}};
static const op_attr_spec index_attrs[] = {{"axes", OPA_INTS, true, 0, 0}};

#define KREF(name) {#name "_ref", 0, NULL, NULL, NULL, NULL, kref_##name}

const op_def op_def_arange = {"arange", 0, 0, 1, arange_attrs, 4, infer_arange, KREF(arange), 0};
const op_def op_def_full = {"full", 0, 0, 1, full_attrs, 3, infer_full, KREF(full), 0};
const op_def op_def_embedding = {"embedding", 2, 2, 1, NULL, 0, infer_embedding, KREF(embedding), 0};
const op_def op_def_gather = {"gather", 2, 2, 1, axis_attrs, 1, infer_gather, KREF(gather), 0};
const op_def op_def_index = {"index", 2, 1 + AIR_MAX_RANK, 1, index_attrs, 1, infer_index, KREF(index), OPF_VARIADIC};
const op_def op_def_index_select = {"index_select", 2, 2, 1, axis_attrs, 1, infer_index_select, KREF(index_select), 0};
const op_def op_def_size_scalar = {"size_scalar", 0, 0, 1, size_scalar_attrs, 1, infer_size_scalar, KREF(size_scalar), 0};
const op_def op_def_index_copy = {"index_copy", 3, 3, 1, axis_attrs, 1, infer_index_copy, KREF(index_copy), 0};

/* shape.c - op table entries for shape and data movement: reshape (an
 * alias: no data moves), copy, permute, expand, slice and cat. Views in
 * the ATen graph become these; passes fold them into consumers later. */
#include "core/error.h"
#include "kernels/shape/shape_ref.h"
#include "ops/op.h"

static air_status infer_reshape(op_infer_ctx *c)
{
	const ir_attr *shape = op_attr(c, 0);
	if (shape->n > AIR_MAX_RANK)
		return op_fail(c, AIR_UNSUPPORTED, "rank %d is above %d", shape->n, AIR_MAX_RANK);
	air_dim in_numel, out_numel = 1;
	AIR_TRY(ir_value_numel(c->g, c->in[0], &in_numel));
	for (int i = 0; i < shape->n; i++)
		AIR_TRY(air_graph_dim_expr(c->g, AIR_DIM_MUL, out_numel, shape->ints[i], &out_numel));
	if (in_numel >= 0 && out_numel >= 0 && in_numel != out_numel)
		return op_fail(c, AIR_SHAPE_MISMATCH, "cannot reshape %lld elements into %lld", (long long)in_numel,
			       (long long)out_numel);
	c->out[0].dtype = c->in[0]->dtype;
	c->out[0].rank = shape->n;
	for (int i = 0; i < shape->n; i++)
		c->out[0].dims[i] = shape->ints[i];
	return AIR_OK;
}

static air_status infer_copy(op_infer_ctx *c)
{
	c->out[0] = *c->in[0];
	return AIR_OK;
}

static air_status infer_permute(op_infer_ctx *c)
{
	const ir_attr *perm = op_attr(c, 0);
	int r = c->in[0]->rank;
	if (perm->n != r)
		return op_fail(c, AIR_INVALID_ARGUMENT, "perm has %d entries for rank %d", perm->n, r);
	bool seen[AIR_MAX_RANK] = {0};
	c->out[0].dtype = c->in[0]->dtype;
	c->out[0].rank = r;
	for (int i = 0; i < r; i++) {
		int p;
		AIR_TRY(op_axis(c, perm->ints[i], r, &p));
		if (seen[p])
			return op_fail(c, AIR_INVALID_ARGUMENT, "perm repeats axis %d", p);
		seen[p] = true;
		c->out[0].dims[i] = c->in[0]->dims[p];
	}
	return AIR_OK;
}

static air_status infer_expand(op_infer_ctx *c)
{
	const ir_attr *shape = op_attr(c, 0);
	const ir_value *x = c->in[0];
	if (shape->n < x->rank || shape->n > AIR_MAX_RANK)
		return op_fail(c, AIR_INVALID_ARGUMENT, "cannot expand rank %d to rank %d", x->rank, shape->n);
	c->out[0].dtype = x->dtype;
	c->out[0].rank = shape->n;
	for (int i = 0; i < shape->n; i++) {
		int j = i - (shape->n - x->rank);
		/* no -1 for "keep": a negative dim names an expression (-1 is the
		 * first one), and the lowering passes the output's sizes */
		air_dim want = shape->ints[i], have = j >= 0 ? x->dims[j] : 1;
		if (have != 1 && want != have && have >= 0 && want >= 0)
			return op_fail(c, AIR_SHAPE_MISMATCH, "cannot expand size %lld to %lld at dim %d",
				       (long long)have, (long long)want, i);
		c->out[0].dims[i] = want;
	}
	return AIR_OK;
}

static air_status infer_slice(op_infer_ctx *c)
{
	const ir_value *x = c->in[0];
	int axis;
	/* op_axis lets a 0-d tensor have axis 0; slicing needs a real one */
	if (x->rank == 0)
		return op_fail(c, AIR_INVALID_ARGUMENT, "cannot slice a 0-d tensor");
	AIR_TRY(op_axis(c, op_attr(c, 0)->i, x->rank, &axis));
	air_dim start = op_attr(c, 1)->i, end = op_attr(c, 2)->i;
	int64_t step = op_attr(c, 3)->i;
	if (step < 1)
		return op_fail(c, AIR_INVALID_ARGUMENT, "step must be positive, got %lld", (long long)step);
	air_dim size = x->dims[axis];
	if (start >= 0 && end >= 0 && size >= 0 && !(start <= end && end <= size))
		return op_fail(c, AIR_INVALID_ARGUMENT, "bounds [%lld, %lld) are outside [0, %lld]", (long long)start,
			       (long long)end, (long long)size);
	air_dim len;
	AIR_TRY(air_graph_dim_expr(c->g, AIR_DIM_SUB, end, start, &len));
	AIR_TRY(air_graph_dim_expr(c->g, AIR_DIM_CEILDIV, len, step, &len));
	c->out[0] = *x;
	c->out[0].dims[axis] = len;
	return AIR_OK;
}

static air_status infer_cat(op_infer_ctx *c)
{
	const ir_value *x = c->in[0];
	int axis;
	if (x->rank == 0)
		return op_fail(c, AIR_INVALID_ARGUMENT, "cannot concatenate 0-d tensors");
	AIR_TRY(op_axis(c, op_attr(c, 0)->i, x->rank, &axis));
	AIR_TRY(op_same_dtype(c, 0, c->n_in - 1));
	air_dim total = 0;
	for (int k = 0; k < c->n_in; k++) {
		const ir_value *y = c->in[k];
		if (y->rank != x->rank)
			return op_fail(c, AIR_SHAPE_MISMATCH, "input %d has rank %d, input 0 has %d", k, y->rank,
				       x->rank);
		for (int d = 0; d < x->rank; d++)
			if (d != axis && y->dims[d] != x->dims[d] && y->dims[d] >= 0 && x->dims[d] >= 0)
				return op_fail(c, AIR_SHAPE_MISMATCH, "input %d differs from input 0 at dim %d", k, d);
		AIR_TRY(air_graph_dim_expr(c->g, AIR_DIM_ADD, total, y->dims[axis], &total));
	}
	c->out[0] = *x;
	c->out[0].dims[axis] = total;
	return AIR_OK;
}

static const op_attr_spec reshape_attrs[] = {{"shape", OPA_DIMS, true, 0, 0}};
static const op_attr_spec permute_attrs[] = {{"perm", OPA_INTS, true, 0, 0}};
static const op_attr_spec expand_attrs[] = {{"shape", OPA_DIMS, true, 0, 0}};
static const op_attr_spec slice_attrs[] = {
	{"axis", OPA_INT, true, 0, 0},
	{"start", OPA_DIM, true, 0, 0},
	{"end", OPA_DIM, true, 0, 0},
	{"step", OPA_INT, false, 1, 0},
};
static const op_attr_spec cat_attrs[] = {{"axis", OPA_INT, true, 0, 0}};

#define KREF(name) {#name "_ref", 0, NULL, NULL, NULL, NULL, kref_##name}

const op_def op_def_reshape = {"reshape", 1, 1, 1, reshape_attrs, 1, infer_reshape, KREF(reshape), OPF_ALIAS};
const op_def op_def_copy = {"copy", 1, 1, 1, NULL, 0, infer_copy, KREF(copy), 0};
const op_def op_def_permute = {"permute", 1, 1, 1, permute_attrs, 1, infer_permute, KREF(permute), 0};
const op_def op_def_expand = {"expand", 1, 1, 1, expand_attrs, 1, infer_expand, KREF(expand), 0};
const op_def op_def_slice = {"slice", 1, 1, 1, slice_attrs, 4, infer_slice, KREF(slice), 0};
const op_def op_def_cat = {"cat", 1, OP_MAX_IN, 1, cat_attrs, 1, infer_cat, KREF(cat), OPF_VARIADIC};

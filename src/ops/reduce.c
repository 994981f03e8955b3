/* reduce.c - op table entries of the reductions (sum, mean, amax, amin, prod,
 * argmax, cumsum), softmax, log_softmax, layer_norm and rms_norm. */
#include "core/error.h"
#include "kernels/norm/norm_ref.h"
#include "kernels/reduce/reduce_ref.h"
#include "ops/op.h"

/* Output dtypes follow the input: the lowering casts first where torch
 * promotes (an int sum to i64, cumsum of bool to i64). */
static bool is_float(air_dtype d)
{
	return d == AIR_F32 || d == AIR_F64;
}

static bool is_int(air_dtype d)
{
	return d == AIR_I64 || d == AIR_I32 || d == AIR_I16 || d == AIR_I8 || d == AIR_U8;
}

/* Normalizes an axis; a scalar takes 0 and -1 like a vector, as in torch. */
static air_status axis_of(op_infer_ctx *c, int64_t axis, int rank, int *out)
{
	return op_axis(c, axis, rank ? rank : 1, out);
}

/* Which dims an `axes` list reduces, as a bit mask; an empty list means
 * all of them (torch's dim=[]). Repeats are an error, as in torch. */
static air_status reduced_mask(op_infer_ctx *c, const ir_attr *axes, int rank, unsigned *mask)
{
	*mask = 0;
	if (axes->n == 0) {
		*mask = (1u << rank) - 1;
		return AIR_OK;
	}
	for (int k = 0; k < axes->n; k++) {
		int a;
		AIR_TRY(axis_of(c, axes->ints[k], rank, &a));
		if (rank == 0)
			continue; /* dim 0 of a scalar: nothing to reduce */
		if (*mask & (1u << a))
			return op_fail(c, AIR_INVALID_ARGUMENT, "dim %d appears more than once in axes", a);
		*mask |= 1u << a;
	}
	return AIR_OK;
}

/* The output of reducing x over mask: reduced dims become 1 (keepdim) or go. */
static void reduced_shape(const ir_value *x, unsigned mask, bool keepdim, ir_value *out)
{
	out->dtype = x->dtype;
	out->rank = 0;
	for (int d = 0; d < x->rank; d++) {
		if (!(mask & (1u << d)))
			out->dims[out->rank++] = x->dims[d];
		else if (keepdim)
			out->dims[out->rank++] = 1;
	}
}

static air_status check_keepdim(op_infer_ctx *c, int attr)
{
	int64_t k = op_attr(c, attr)->i;
	if (k != 0 && k != 1)
		return op_fail(c, AIR_INVALID_ARGUMENT, "keepdim must be 0 or 1, got %lld", (long long)k);
	return AIR_OK;
}

static air_status infer_reduce(op_infer_ctx *c, bool floats_only, bool allow_bool)
{
	const ir_value *x = c->in[0];
	air_dtype d = x->dtype;
	if (!is_float(d) && (floats_only || (!is_int(d) && !(allow_bool && d == AIR_BOOL))))
		return op_fail(c, AIR_UNSUPPORTED, "no kernel for %s%s", air_dtype_name(d),
			       d == AIR_BOOL ? " (cast to i64 first)" : "");
	AIR_TRY(check_keepdim(c, 1));
	unsigned mask;
	AIR_TRY(reduced_mask(c, op_attr(c, 0), x->rank, &mask));
	reduced_shape(x, mask, op_attr(c, 1)->i != 0, &c->out[0]);
	return AIR_OK;
}

static air_status infer_sum_prod(op_infer_ctx *c)
{
	return infer_reduce(c, false, false);
}

static air_status infer_mean(op_infer_ctx *c)
{
	return infer_reduce(c, true, false);
}

/* amax/amin of bool are any/all, which torch allows */
static air_status infer_minmax(op_infer_ctx *c)
{
	return infer_reduce(c, false, true);
}

static air_status infer_argmax(op_infer_ctx *c)
{
	const ir_value *x = c->in[0];
	if (!is_float(x->dtype) && !is_int(x->dtype))
		return op_fail(c, AIR_UNSUPPORTED, "no kernel for %s", air_dtype_name(x->dtype));
	AIR_TRY(check_keepdim(c, 1));
	int a;
	AIR_TRY(axis_of(c, op_attr(c, 0)->i, x->rank, &a));
	reduced_shape(x, x->rank ? 1u << a : 0, op_attr(c, 1)->i != 0, &c->out[0]);
	c->out[0].dtype = AIR_I64;
	return AIR_OK;
}

static air_status infer_cumsum(op_infer_ctx *c)
{
	const ir_value *x = c->in[0];
	if (!is_float(x->dtype) && !is_int(x->dtype))
		return op_fail(c, AIR_UNSUPPORTED, "no kernel for %s%s", air_dtype_name(x->dtype),
			       x->dtype == AIR_BOOL ? " (cast to i64 first)" : "");
	int a;
	AIR_TRY(axis_of(c, op_attr(c, 0)->i, x->rank, &a));
	c->out[0] = *x;
	return AIR_OK;
}

static air_status infer_softmax(op_infer_ctx *c)
{
	const ir_value *x = c->in[0];
	if (!is_float(x->dtype))
		return op_fail(c, AIR_UNSUPPORTED, "takes f32 or f64, not %s", air_dtype_name(x->dtype));
	int a;
	AIR_TRY(axis_of(c, op_attr(c, 0)->i, x->rank, &a));
	c->out[0] = *x;
	return AIR_OK;
}

/* Checks the optional affine inputs of a norm: each has x's dtype and the
 * shape of x's last nd dims. Symbolic dims that are not provably equal are
 * left to the kernel, which checks concrete sizes. */
static air_status check_affine(op_infer_ctx *c, int nd, int first, int count)
{
	const ir_value *x = c->in[0];
	for (int k = first; k < first + count; k++) {
		const ir_value *w = c->in[k];
		if (w->dtype != x->dtype)
			return op_fail(c, AIR_DTYPE_MISMATCH, "input %d is %s but x is %s", k, air_dtype_name(w->dtype),
				       air_dtype_name(x->dtype));
		if (w->rank != nd)
			return op_fail(c, AIR_SHAPE_MISMATCH, "input %d has rank %d, normalized_ndim is %d", k,
				       w->rank, nd);
		for (int d = 0; d < nd; d++) {
			air_dim wd = w->dims[d], xd = x->dims[x->rank - nd + d];
			if (wd >= 0 && xd >= 0 && wd != xd)
				return op_fail(c, AIR_SHAPE_MISMATCH,
					       "input %d has size %lld at dim %d where x has %lld", k, (long long)wd, d,
					       (long long)xd);
		}
	}
	return AIR_OK;
}

/* Common checks of layer_norm and rms_norm. Attributes 2..2+n_flags are
 * the has_* flags; the inputs they ask for must be the inputs given. */
static air_status infer_norm_common(op_infer_ctx *c, int n_flags, int *nd_out)
{
	const ir_value *x = c->in[0];
	if (!is_float(x->dtype))
		return op_fail(c, AIR_UNSUPPORTED, "takes f32 or f64, not %s", air_dtype_name(x->dtype));
	int64_t nd = op_attr(c, 0)->i;
	if (nd < 1 || nd > x->rank)
		return op_fail(c, AIR_INVALID_ARGUMENT, "normalized_ndim %lld is outside [1, %d]", (long long)nd,
			       x->rank);
	if (op_attr(c, 1)->f != op_attr(c, 1)->f)
		return op_fail(c, AIR_INVALID_ARGUMENT, "eps is NaN");
	int expect = 1;
	for (int f = 0; f < n_flags; f++) {
		int64_t v = op_attr(c, 2 + f)->i;
		if (v != 0 && v != 1)
			return op_fail(c, AIR_INVALID_ARGUMENT, "has_* flags must be 0 or 1, got %lld", (long long)v);
		expect += (int)v;
	}
	if (c->n_in != expect)
		return op_fail(c, AIR_INVALID_ARGUMENT, "the has_* flags ask for %d inputs, got %d", expect, c->n_in);
	AIR_TRY(check_affine(c, (int)nd, 1, c->n_in - 1));
	*nd_out = (int)nd;
	return AIR_OK;
}

static air_status infer_layer_norm(op_infer_ctx *c)
{
	int nd;
	AIR_TRY(infer_norm_common(c, 2, &nd));
	const ir_value *x = c->in[0];
	c->out[0] = *x;
	/* mean and rstd keep x's rank, with 1s over the normalized dims, like
	 * aten.native_layer_norm */
	c->out[1] = *x;
	for (int d = x->rank - nd; d < x->rank; d++)
		c->out[1].dims[d] = 1;
	c->out[2] = c->out[1];
	return AIR_OK;
}

static air_status infer_rms_norm(op_infer_ctx *c)
{
	int nd;
	AIR_TRY(infer_norm_common(c, 1, &nd));
	c->out[0] = *c->in[0];
	return AIR_OK;
}

static const op_attr_spec reduce_attrs[] = {
	{"axes", OPA_INTS, false, 0, 0},
	{"keepdim", OPA_INT, false, 0, 0},
};
static const op_attr_spec argmax_attrs[] = {
	{"axis", OPA_INT, true, 0, 0},
	{"keepdim", OPA_INT, false, 0, 0},
};
static const op_attr_spec axis_attrs[] = {{"axis", OPA_INT, true, 0, 0}};
static const op_attr_spec layer_norm_attrs[] = {
	{"normalized_ndim", OPA_INT, true, 0, 0},
	{"eps", OPA_FLOAT, false, 0, 1e-5},
	{"has_weight", OPA_INT, false, 0, 0},
	{"has_bias", OPA_INT, false, 0, 0},
};
/* eps < 0 (the default) stands for torch's eps=None: the dtype's machine
 * epsilon */
static const op_attr_spec rms_norm_attrs[] = {
	{"normalized_ndim", OPA_INT, true, 0, 0},
	{"eps", OPA_FLOAT, false, 0, -1.0},
	{"has_weight", OPA_INT, false, 0, 0},
};

#define KREF(name) {#name "_ref", 0, NULL, NULL, NULL, NULL, kref_##name}

const op_def op_def_sum = {"sum", 1, 1, 1, reduce_attrs, 2, infer_sum_prod, KREF(sum), 0};
const op_def op_def_mean = {"mean", 1, 1, 1, reduce_attrs, 2, infer_mean, KREF(mean), 0};
const op_def op_def_amax = {"amax", 1, 1, 1, reduce_attrs, 2, infer_minmax, KREF(amax), 0};
const op_def op_def_amin = {"amin", 1, 1, 1, reduce_attrs, 2, infer_minmax, KREF(amin), 0};
const op_def op_def_prod = {"prod", 1, 1, 1, reduce_attrs, 2, infer_sum_prod, KREF(prod), 0};
const op_def op_def_argmax = {"argmax", 1, 1, 1, argmax_attrs, 2, infer_argmax, KREF(argmax), 0};
const op_def op_def_cumsum = {"cumsum", 1, 1, 1, axis_attrs, 1, infer_cumsum, KREF(cumsum), 0};
const op_def op_def_softmax = {"softmax", 1, 1, 1, axis_attrs, 1, infer_softmax, KREF(softmax), 0};
const op_def op_def_log_softmax = {"log_softmax", 1, 1, 1, axis_attrs, 1, infer_softmax, KREF(log_softmax), 0};
const op_def op_def_layer_norm = {"layer_norm", 1, 3, 3, layer_norm_attrs, 4, infer_layer_norm, KREF(layer_norm), OPF_VARIADIC};
const op_def op_def_rms_norm = {"rms_norm", 1, 2, 1, rms_norm_attrs, 3, infer_rms_norm, KREF(rms_norm), OPF_VARIADIC};

/* norm_train.c - op table entries of training: batch norm with the batch's
 * statistics (batch_norm_train, which also updates the running ones), its
 * backward, and ReLU's backward (threshold_backward). Kernels in
 * kernels/norm/bn_train*.c; the formulas in kernels/norm/bn_train.h. */
#include "core/error.h"
#include "kernels/norm/bn_train.h"
#include "ops/op.h"

static bool is_float(air_dtype d)
{
	return d == AIR_F32 || d == AIR_F64;
}

static bool conflict(air_dim a, air_dim b)
{
	return a >= 0 && b >= 0 && a != b;
}

/* x [N, C, ...] float, and inputs first..n_in-1 each [C] of x's dtype */
static air_status per_channel_inputs(op_infer_ctx *c, int xi, int first)
{
	const ir_value *x = c->in[xi];
	if (!is_float(x->dtype))
		return op_fail(c, AIR_UNSUPPORTED, "takes f32 or f64, not %s", air_dtype_name(x->dtype));
	AIR_TRY(op_same_dtype(c, 0, c->n_in - 1));
	if (x->rank < 2)
		return op_fail(c, AIR_SHAPE_MISMATCH, "x must have rank 2 or more (N, C, ...), got %d", x->rank);
	for (int i = first; i < c->n_in; i++)
		if (c->in[i]->rank != 1 || conflict(c->in[i]->dims[0], x->dims[1]))
			return op_fail(c, AIR_SHAPE_MISMATCH, "input %d must be [%lld], one entry per channel", i,
				       (long long)x->dims[1]);
	return AIR_OK;
}

/* has_<x> attributes at attrs[a0], attrs[a0 + 1] (-1: decided by the count)
 * for want = n_without + the optional inputs present */
static air_status optional_inputs(op_infer_ctx *c, int a0, int n_opt, int n_without)
{
	int want = n_without;
	for (int k = 0; k < n_opt; k++) {
		int64_t h = op_attr(c, a0 + k)->i;
		if (h < 0 && n_opt > 1 && c->n_in > n_without && c->n_in < n_without + n_opt)
			return op_fail(c, AIR_INVALID_ARGUMENT, "with %d inputs, the has_ attributes must say which are there",
				       c->n_in);
		want += kref_present(h, c->n_in, n_without);
	}
	if (c->n_in != want)
		return op_fail(c, AIR_INVALID_ARGUMENT, "the has_ attributes call for %d inputs, got %d", want, c->n_in);
	return AIR_OK;
}

/* batch_norm_train(x [N, C, ...], weight?, bias?, running_mean, running_var)
 *   -> y, mean [C], invstd [C], running [2, C] */
static air_status infer_batch_norm_train(op_infer_ctx *c)
{
	AIR_TRY(optional_inputs(c, 2, 2, 3));
	AIR_TRY(per_channel_inputs(c, 0, 1));
	if (op_attr(c, 1)->f < 0)
		return op_fail(c, AIR_INVALID_ARGUMENT, "eps is negative");
	if (op_attr(c, 4)->i != 0 && op_attr(c, 4)->i != 1)
		return op_fail(c, AIR_INVALID_ARGUMENT, "act must be 0 (none) or 1 (relu)");
	const ir_value *x = c->in[0];
	c->out[0] = *x;
	c->out[1] = *x;
	c->out[1].rank = 1;
	c->out[1].dims[0] = x->dims[1];
	c->out[2] = c->out[1];
	c->out[3] = *x;
	c->out[3].rank = 2;
	c->out[3].dims[0] = 2;
	c->out[3].dims[1] = x->dims[1];
	return AIR_OK;
}

/* a and b of one shape */
static air_status same_shape(op_infer_ctx *c, const ir_value *a, const ir_value *b, const char *what)
{
	if (a->rank != b->rank)
		return op_fail(c, AIR_SHAPE_MISMATCH, "%s differ in rank", what);
	for (int d = 0; d < a->rank; d++)
		if (conflict(a->dims[d], b->dims[d]))
			return op_fail(c, AIR_SHAPE_MISMATCH, "%s differ in dim %d", what, d);
	return AIR_OK;
}

/* batch_norm_backward(dy, x [N, C, ...], mean [C], invstd [C], weight? [C],
 * relu_out?) -> dx, dweight [C], dbias [C]. With has_mask, dy is first
 * threshold_backward(dy, relu_out, threshold): ReLU's backward folded in. */
static air_status infer_batch_norm_backward(op_infer_ctx *c)
{
	int64_t hw = op_attr(c, 0)->i, hm = op_attr(c, 2)->i;
	if (hw < 0 && c->n_in == 5 && hm)
		return op_fail(c, AIR_INVALID_ARGUMENT, "with has_mask and 5 inputs, has_weight must say if it is there");
	int want = 4 + (hw < 0 ? c->n_in - 4 - (hm != 0) > 0 : hw != 0) + (hm != 0);
	if (c->n_in != want)
		return op_fail(c, AIR_INVALID_ARGUMENT, "has_weight and has_mask call for %d inputs, got %d", want, c->n_in);
	const ir_value *dy = c->in[0], *x = c->in[1];
	if (hm) {
		AIR_TRY(same_shape(c, c->in[c->n_in - 1], x, "relu_out and x"));
		c->n_in--; /* the per-channel checks below skip the mask */
		air_status st = per_channel_inputs(c, 1, 2);
		c->n_in++;
		AIR_TRY(st);
		AIR_TRY(op_same_dtype(c, 0, c->n_in - 1));
	} else {
		AIR_TRY(per_channel_inputs(c, 1, 2));
	}
	AIR_TRY(same_shape(c, dy, x, "dy and x"));
	c->out[0] = *x;
	c->out[1] = *x;
	c->out[1].rank = 1;
	c->out[1].dims[0] = x->dims[1];
	c->out[2] = c->out[1];
	return AIR_OK;
}

/* threshold_backward(grad, x) -> grad where x > threshold, else 0; grad and
 * x of one shape (no broadcasting) */
static air_status infer_threshold_backward(op_infer_ctx *c)
{
	const ir_value *g = c->in[0], *x = c->in[1];
	if (!is_float(x->dtype))
		return op_fail(c, AIR_UNSUPPORTED, "takes f32 or f64, not %s", air_dtype_name(x->dtype));
	AIR_TRY(op_same_dtype(c, 0, 1));
	AIR_TRY(same_shape(c, g, x, "grad and x"));
	c->out[0] = *x;
	return AIR_OK;
}

static const op_attr_spec batch_norm_train_attrs[] = {
	{"momentum", OPA_FLOAT, false, 0, 0.1},
	{"eps", OPA_FLOAT, false, 0, 1e-5},
	{"has_weight", OPA_INT, false, -1, 0},
	{"has_bias", OPA_INT, false, -1, 0},
	{"act", OPA_INT, false, 0, 0}, /* 1: relu applied to y */
};
static const op_attr_spec batch_norm_backward_attrs[] = {
	{"has_weight", OPA_INT, false, -1, 0},
	{"train", OPA_INT, false, 1, 0}, /* 0: mean and invstd are the running statistics */
	{"has_mask", OPA_INT, false, 0, 0}, /* the last input is a ReLU's output: dy masked by it */
	{"threshold", OPA_FLOAT, false, 0, 0}, /* the mask's threshold */
};
static const op_attr_spec threshold_backward_attrs[] = {{"threshold", OPA_FLOAT, false, 0, 0}};

#define KREF(name) {#name "_ref", 0, NULL, NULL, NULL, NULL, kref_##name}

const op_def op_def_batch_norm_train = {"batch_norm_train", 3, 5, 4, batch_norm_train_attrs, 5,
					infer_batch_norm_train, KREF(batch_norm_train), 0};
const op_def op_def_batch_norm_backward = {"batch_norm_backward", 4, 6, 3, batch_norm_backward_attrs, 4,
					   infer_batch_norm_backward, KREF(batch_norm_backward), 0};
const op_def op_def_threshold_backward = {"threshold_backward", 2, 2, 1, threshold_backward_attrs, 1,
					  infer_threshold_backward, KREF(threshold_backward), 0};

/* backward.c - op table entries of the training ops that have no forward
 * counterpart in the table: layer_norm_backward, embedding_backward (the
 * dense weight gradient of an embedding lookup), dropout (random, seeded
 * per call through an input), and the one-pass gradients of softmax and
 * log_softmax (softmax_backward), activations and dropout
 * (activation_backward, dropout_backward). */
#include "core/error.h"
#include "kernels/elementwise/act_backward.h"
#include "kernels/elementwise/dropout.h"
#include "kernels/norm/layer_norm_backward.h"
#include "kernels/norm/softmax_backward.h"
#include "kernels/shape/embedding_backward.h"
#include "ops/op.h"

static bool is_float(air_dtype d)
{
	return d == AIR_F32 || d == AIR_F64;
}

/* layer_norm_backward(grad_out, x, mean, rstd [, weight]) -> (grad_x,
 * grad_weight, grad_bias). mean and rstd hold one value a row (any shape of
 * that many elements, as layer_norm gives them: x's rank with 1s over the
 * normalized dims; the kernel checks the count). grad_weight and grad_bias
 * have the normalized dims' shape whether there is a weight or not. */
static air_status infer_layer_norm_backward(op_infer_ctx *c)
{
	const ir_value *g = c->in[0], *x = c->in[1];
	if (!is_float(x->dtype))
		return op_fail(c, AIR_UNSUPPORTED, "takes f32 or f64, not %s", air_dtype_name(x->dtype));
	AIR_TRY(op_same_dtype(c, 0, c->n_in - 1));
	int64_t nd = op_attr(c, 0)->i, has_w = op_attr(c, 1)->i;
	if (nd < 1 || nd > x->rank)
		return op_fail(c, AIR_INVALID_ARGUMENT, "normalized_ndim %lld is outside [1, %d]", (long long)nd,
			       x->rank);
	if (has_w != 0 && has_w != 1)
		return op_fail(c, AIR_INVALID_ARGUMENT, "has_weight must be 0 or 1, got %lld", (long long)has_w);
	if (c->n_in != 4 + has_w)
		return op_fail(c, AIR_INVALID_ARGUMENT, "has_weight %lld asks for %lld inputs, got %d", (long long)has_w,
			       (long long)(4 + has_w), c->n_in);
	if (g->rank != x->rank)
		return op_fail(c, AIR_SHAPE_MISMATCH, "grad_out has rank %d but x has rank %d", g->rank, x->rank);
	for (int d = 0; d < x->rank; d++)
		if (g->dims[d] >= 0 && x->dims[d] >= 0 && g->dims[d] != x->dims[d])
			return op_fail(c, AIR_SHAPE_MISMATCH, "grad_out has size %lld at dim %d where x has %lld",
				       (long long)g->dims[d], d, (long long)x->dims[d]);
	if (has_w && c->in[4]->rank != nd)
		return op_fail(c, AIR_SHAPE_MISMATCH, "weight has rank %d, normalized_ndim is %lld", c->in[4]->rank,
			       (long long)nd);
	c->out[0] = *x;
	c->out[1].dtype = x->dtype;
	c->out[1].rank = (int)nd;
	for (int d = 0; d < nd; d++)
		c->out[1].dims[d] = x->dims[x->rank - nd + d];
	c->out[2] = c->out[1];
	return AIR_OK;
}

/* embedding_backward(grad [..., D], indices [...]) -> [num_weights, D]: the
 * rows of grad added into the row each index names; padding_idx's row (if
 * >= 0) stays zero. Indices out of range are a run-time error. */
static air_status infer_embedding_backward(op_infer_ctx *c)
{
	const ir_value *g = c->in[0], *idx = c->in[1];
	if (!is_float(g->dtype))
		return op_fail(c, AIR_UNSUPPORTED, "grad must be f32 or f64, not %s", air_dtype_name(g->dtype));
	if (idx->dtype != AIR_I64 && idx->dtype != AIR_I32)
		return op_fail(c, AIR_UNSUPPORTED, "indices must be i64 or i32, not %s", air_dtype_name(idx->dtype));
	if (g->rank != idx->rank + 1)
		return op_fail(c, AIR_SHAPE_MISMATCH, "grad has rank %d, indices rank %d (want one more)", g->rank,
			       idx->rank);
	for (int d = 0; d < idx->rank; d++)
		if (g->dims[d] >= 0 && idx->dims[d] >= 0 && g->dims[d] != idx->dims[d])
			return op_fail(c, AIR_SHAPE_MISMATCH, "grad has size %lld at dim %d where indices have %lld",
				       (long long)g->dims[d], d, (long long)idx->dims[d]);
	int64_t nw = op_attr(c, 0)->i;
	if (nw < 0)
		return op_fail(c, AIR_INVALID_ARGUMENT, "num_weights %lld is negative", (long long)nw);
	c->out[0].dtype = g->dtype;
	c->out[0].rank = 2;
	c->out[0].dims[0] = nw;
	c->out[0].dims[1] = g->dims[g->rank - 1];
	return AIR_OK;
}

/* dropout(x, seed) -> (y, mask): mask (bool) keeps each element with
 * probability 1 - p, y = x * mask * 1/(1-p) (0 for p = 1). seed is an i64
 * tensor of one element, new every call; `stream` separates the dropouts of
 * one graph, which share the seed. */
static air_status infer_dropout(op_infer_ctx *c)
{
	const ir_value *x = c->in[0], *seed = c->in[1];
	if (x->dtype != AIR_F32 && x->dtype != AIR_F64)
		return op_fail(c, AIR_UNSUPPORTED, "takes f32 or f64, not %s", air_dtype_name(x->dtype));
	if (seed->dtype != AIR_I64)
		return op_fail(c, AIR_UNSUPPORTED, "seed must be i64, not %s", air_dtype_name(seed->dtype));
	for (int d = 0; d < seed->rank; d++)
		if (seed->dims[d] != 1)
			return op_fail(c, AIR_SHAPE_MISMATCH, "seed must hold one element");
	double p = op_attr(c, 0)->f;
	if (!(p >= 0.0 && p <= 1.0))
		return op_fail(c, AIR_INVALID_ARGUMENT, "p must be in [0, 1], got %g", p);
	if (op_attr(c, 1)->i < 0)
		return op_fail(c, AIR_INVALID_ARGUMENT, "stream must be >= 0");
	c->out[0] = *x;
	c->out[1] = *x;
	c->out[1].dtype = AIR_BOOL;
	return AIR_OK;
}

/* Both operands of one shape (the lowering composes elementwise ops where
 * torch would broadcast). */
static air_status same_shape(op_infer_ctx *c)
{
	const ir_value *a = c->in[0], *b = c->in[1];
	if (a->rank != b->rank)
		return op_fail(c, AIR_SHAPE_MISMATCH, "operands have ranks %d and %d", a->rank, b->rank);
	for (int d = 0; d < a->rank; d++)
		if (a->dims[d] != b->dims[d])
			return op_fail(c, AIR_SHAPE_MISMATCH, "operands differ at dim %d", d);
	return AIR_OK;
}

/* activation_backward(g, t) -> g * f'(...), t and kind as act_backward.h says */
static air_status infer_activation_backward(op_infer_ctx *c)
{
	if (!is_float(c->in[0]->dtype))
		return op_fail(c, AIR_UNSUPPORTED, "takes f32 or f64, not %s", air_dtype_name(c->in[0]->dtype));
	AIR_TRY(op_same_dtype(c, 0, 1));
	AIR_TRY(same_shape(c));
	int64_t kind = op_attr(c, 0)->i;
	if (kind < 0 || kind >= KA_KIND_COUNT)
		return op_fail(c, AIR_INVALID_ARGUMENT, "unknown kind %lld", (long long)kind);
	c->out[0] = *c->in[0];
	return AIR_OK;
}

/* dropout_backward(g, mask) -> g * (mask * scale), mask bool */
static air_status infer_dropout_backward(op_infer_ctx *c)
{
	if (!is_float(c->in[0]->dtype))
		return op_fail(c, AIR_UNSUPPORTED, "takes f32 or f64, not %s", air_dtype_name(c->in[0]->dtype));
	if (c->in[1]->dtype != AIR_BOOL)
		return op_fail(c, AIR_UNSUPPORTED, "mask must be bool, not %s", air_dtype_name(c->in[1]->dtype));
	AIR_TRY(same_shape(c));
	c->out[0] = *c->in[0];
	return AIR_OK;
}

/* softmax_backward(g, y) along axis; log: y is log_softmax's output */
static air_status infer_softmax_backward(op_infer_ctx *c)
{
	if (!is_float(c->in[0]->dtype))
		return op_fail(c, AIR_UNSUPPORTED, "takes f32 or f64, not %s", air_dtype_name(c->in[0]->dtype));
	AIR_TRY(op_same_dtype(c, 0, 1));
	AIR_TRY(same_shape(c));
	int a;
	AIR_TRY(op_axis(c, op_attr(c, 0)->i, c->in[0]->rank ? c->in[0]->rank : 1, &a));
	int64_t log = op_attr(c, 1)->i;
	if (log != 0 && log != 1)
		return op_fail(c, AIR_INVALID_ARGUMENT, "log must be 0 or 1, got %lld", (long long)log);
	c->out[0] = *c->in[0];
	return AIR_OK;
}

static const op_attr_spec softmax_backward_attrs[] = {
	{"axis", OPA_INT, true, 0, 0},
	{"log", OPA_INT, false, 0, 0},
};
static const op_attr_spec activation_backward_attrs[] = {{"kind", OPA_INT, true, 0, 0}};
static const op_attr_spec dropout_backward_attrs[] = {{"scale", OPA_FLOAT, true, 0, 0}};
static const op_attr_spec layer_norm_backward_attrs[] = {
	{"normalized_ndim", OPA_INT, true, 0, 0},
	{"has_weight", OPA_INT, false, 0, 0},
};
static const op_attr_spec embedding_backward_attrs[] = {
	{"num_weights", OPA_INT, true, 0, 0},
	{"padding_idx", OPA_INT, false, -1, 0},
};
static const op_attr_spec dropout_attrs[] = {
	{"p", OPA_FLOAT, true, 0, 0},
	{"stream", OPA_INT, false, 0, 0},
};

#define KREF(name) {#name "_ref", 0, NULL, NULL, NULL, NULL, kref_##name}

const op_def op_def_layer_norm_backward = {"layer_norm_backward", 4, 5, 3, layer_norm_backward_attrs, 2,
					   infer_layer_norm_backward, KREF(layer_norm_backward), OPF_VARIADIC};
const op_def op_def_embedding_backward = {"embedding_backward", 2, 2, 1, embedding_backward_attrs, 2,
					  infer_embedding_backward, KREF(embedding_backward), 0};
const op_def op_def_dropout = {"dropout", 2, 2, 2, dropout_attrs, 2, infer_dropout, KREF(dropout), 0};
const op_def op_def_activation_backward = {"activation_backward", 2, 2, 1, activation_backward_attrs, 1,
					   infer_activation_backward, KREF(activation_backward), 0};
const op_def op_def_dropout_backward = {"dropout_backward", 2, 2, 1, dropout_backward_attrs, 1,
					infer_dropout_backward, KREF(dropout_backward), 0};
const op_def op_def_softmax_backward = {"softmax_backward", 2, 2, 1, softmax_backward_attrs, 2,
					infer_softmax_backward, KREF(softmax_backward), 0};

/* pool_backward.c - op table entries of max pooling with its argmax and
 * max pooling's gradient (what aten.max_pool2d_with_indices and its
 * backward lower to when the indices are used: a training step):
 *   max_pool2d_indices(x [N, C, H, W] or [C, H, W]) -> (y, indices int64),
 *     max_pool2d's attributes and output size; indices h * W + w in the plane;
 *   max_pool2d_backward(dy, indices) -> dx [.., H, W] with input_size [H, W]. */
#include "core/error.h"
#include "kernels/pool/pool_backward.h"
#include "ops/op.h"

static bool conflict(air_dim a, air_dim b)
{
	return a >= 0 && b >= 0 && a != b;
}

/* max_pool2d's own shape function (same attributes, same order), then the
 * indices beside y */
static air_status infer_indices(op_infer_ctx *c)
{
	AIR_TRY(op_get(OP_max_pool2d)->infer(c));
	c->out[1] = c->out[0];
	c->out[1].dtype = AIR_I64;
	return AIR_OK;
}

static air_status infer_backward(op_infer_ctx *c)
{
	const ir_value *dy = c->in[0], *idx = c->in[1];
	if (dy->dtype != AIR_F32 && dy->dtype != AIR_F64)
		return op_fail(c, AIR_UNSUPPORTED, "takes f32 or f64, not %s", air_dtype_name(dy->dtype));
	if (idx->dtype != AIR_I64)
		return op_fail(c, AIR_UNSUPPORTED, "indices must be int64, not %s", air_dtype_name(idx->dtype));
	if (dy->rank != 3 && dy->rank != 4)
		return op_fail(c, AIR_SHAPE_MISMATCH, "dy must have rank 3 or 4, got %d", dy->rank);
	bool bad = idx->rank != dy->rank;
	for (int d = 0; d < dy->rank && !bad; d++)
		bad = conflict(idx->dims[d], dy->dims[d]);
	if (bad)
		return op_fail(c, AIR_SHAPE_MISMATCH, "indices must have dy's shape");
	const ir_attr *size = op_attr(c, 0);
	if (size->n != 2)
		return op_fail(c, AIR_INVALID_ARGUMENT, "input_size has %d entries; it takes 2", size->n);
	c->out[0] = *dy;
	c->out[0].dims[dy->rank - 2] = size->ints[0];
	c->out[0].dims[dy->rank - 1] = size->ints[1];
	return AIR_OK;
}

static const op_attr_spec indices_attrs[] = {
	{"kernel", OPA_INTS, true, 0, 0},
	{"stride", OPA_INTS, false, 0, 0}, /* default: the kernel */
	{"padding", OPA_INTS, false, 0, 0},
	{"dilation", OPA_INTS, false, 0, 0},
	{"ceil_mode", OPA_INT, false, 0, 0},
};
static const op_attr_spec backward_attrs[] = {
	{"input_size", OPA_DIMS, true, 0, 0}, /* the input's [H, W] */
};

const op_def op_def_max_pool2d_indices = {"max_pool2d_indices", 1, 1, 2, indices_attrs, 5, infer_indices,
					  {"max_pool2d_indices_ref", 0, NULL, NULL, NULL, NULL,
					   kref_max_pool2d_indices},
					  0};
const op_def op_def_max_pool2d_backward = {"max_pool2d_backward", 2, 2, 1, backward_attrs, 1, infer_backward,
					   {"max_pool2d_backward_ref", 0, NULL, NULL, NULL, NULL,
					    kref_max_pool2d_backward},
					   0};

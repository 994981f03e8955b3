/* fused.c - op table entries for ops that only passes create: a fused chain
 * of f32 elementwise ops (see kernels/elementwise/fused_ref.h for its program), and
 * the rotary position embedding (kernels/rope/rope_ref.h). */
#include "core/error.h"
#include "kernels/elementwise/fused_ref.h"
#include "kernels/rope/rope_ref.h"
#include "ops/op.h"

static air_status infer_fused(op_infer_ctx *c)
{
	if (c->in[0]->dtype != AIR_F32)
		return op_fail(c, AIR_UNSUPPORTED, "runs f32 only, not %s", air_dtype_name(c->in[0]->dtype));
	const ir_attr *prog = op_attr(c, 0);
	if (prog->n == 0 || prog->n % 2 != 0)
		return op_fail(c, AIR_INVALID_ARGUMENT, "program must be (opcode, operand) pairs");
	for (int k = 0; k < prog->n; k += 2)
		if (prog->ints[k] < 0 || prog->ints[k] >= KF_OPCODE_COUNT)
			return op_fail(c, AIR_INVALID_ARGUMENT, "unknown opcode %lld", (long long)prog->ints[k]);
	c->out[0] = *c->in[0];
	return AIR_OK;
}

static const op_attr_spec fused_attrs[] = {{"program", OPA_INTS, true, 0, 0}};

const op_def op_def_fused_elementwise = {
	"fused_elementwise", 1, 1, 1, fused_attrs, 1, infer_fused,
	{"fused_elementwise_tiles", 0, NULL, NULL, NULL, NULL, kref_fused_elementwise}, OPF_ELEMENTWISE};

/* rope(x, cos, sin): f32; cos and sin have x's rank and last dim (even),
 * and each other dim is x's or 1. With bshd, x is [B, L, H, E] and cos,
 * sin are [B or 1, 1, L, E] (the tables of x's heads-first form). */
static air_status infer_rope(op_infer_ctx *c)
{
	const ir_value *x = c->in[0];
	int64_t bshd = op_attr(c, 0)->i;
	if (bshd != 0 && bshd != 1)
		return op_fail(c, AIR_INVALID_ARGUMENT, "bshd is %lld; it must be 0 or 1", (long long)bshd);
	if (bshd) {
		if (x->rank != 4)
			return op_fail(c, AIR_SHAPE_MISMATCH, "bshd needs x of rank 4, not %d", x->rank);
		for (int i = 1; i < 3; i++) {
			const ir_value *t = c->in[i];
			if (t->dtype != AIR_F32 || t->rank != 4 || t->dims[1] != 1 || !ir_dim_equal(c->g, t->dims[2], x->dims[1]) ||
			    !ir_dim_equal(c->g, t->dims[3], x->dims[3]) ||
			    (t->dims[0] != 1 && !ir_dim_equal(c->g, t->dims[0], x->dims[0])))
				return op_fail(c, AIR_SHAPE_MISMATCH, "with bshd, cos and sin must be [B or 1, 1, L, E]");
		}
		if (c->in[0]->dtype != AIR_F32)
			return op_fail(c, AIR_UNSUPPORTED, "runs f32 only, not %s", air_dtype_name(x->dtype));
		if (ir_dim_is_const(x->dims[3]) && x->dims[3] % 2 != 0)
			return op_fail(c, AIR_SHAPE_MISMATCH, "the last dim (%lld) must be even", (long long)x->dims[3]);
		c->out[0] = *x;
		return AIR_OK;
	}
	if (x->rank < 1)
		return op_fail(c, AIR_SHAPE_MISMATCH, "x must have rank 1 or more");
	air_dim n = x->dims[x->rank - 1];
	if (ir_dim_is_const(n) && n % 2 != 0)
		return op_fail(c, AIR_SHAPE_MISMATCH, "the last dim (%lld) must be even", (long long)n);
	for (int i = 0; i < 3; i++) {
		const ir_value *t = c->in[i];
		if (t->dtype != AIR_F32)
			return op_fail(c, AIR_UNSUPPORTED, "runs f32 only, not %s", air_dtype_name(t->dtype));
		if (t->rank != x->rank || !ir_dim_equal(c->g, t->dims[x->rank - 1], n))
			return op_fail(c, AIR_SHAPE_MISMATCH, "cos and sin must have x's rank and last dim");
		for (int d = 0; d < x->rank - 1; d++)
			if (t->dims[d] != 1 && !ir_dim_equal(c->g, t->dims[d], x->dims[d]))
				return op_fail(c, AIR_SHAPE_MISMATCH, "input %d has size %lld at dim %d where x has %lld", i,
					       (long long)t->dims[d], d, (long long)x->dims[d]);
	}
	c->out[0] = *x;
	return AIR_OK;
}

/* bshd: 1 when x is [B, L, H, E] with cos, sin [B or 1, 1, L, E] (fuse_rope
 * moves the head split's permute after the rope, where sdpa reads it) */
static const op_attr_spec rope_attrs[] = {{"bshd", OPA_INT, false, 0, 0}};

const op_def op_def_rope = {"rope", 3, 3, 1, rope_attrs, 1, infer_rope,
			    {"rope_ref", 0, NULL, NULL, NULL, NULL, kref_rope}, 0};

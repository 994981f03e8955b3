/* fused.c - op table entries for ops that only passes create: a fused chain
 * of f32 elementwise ops (see kernels/ref/fused.h for its program). */
#include "core/error.h"
#include "kernels/ref/fused.h"
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

/* fused_dag.c - the op table entry of fused_dag, which only the
 * fuse_elementwise pass creates (passes/fuse_dag.c): a group of f32
 * elementwise ops over same-shape tensors with several inputs, shared
 * intermediates and up to OP_MAX_OUT results, run as one register program
 * (kernels/elementwise/fused_dag_ref.h). */
#include "core/error.h"
#include "kernels/elementwise/fused_dag_ref.h"
#include "ops/op.h"

/* Input 0 is f32 and has the group's shape; every other input is f32 or
 * bool, of that shape or repeating over its leading dims (after leading
 * 1s, its dims are input 0's trailing ones: a scalar, a [C] bias). */
static air_status infer_fused_dag(op_infer_ctx *c)
{
	const ir_value *x = c->in[0];
	if (x->dtype != AIR_F32)
		return op_fail(c, AIR_UNSUPPORTED, "input 0 must be f32, not %s", air_dtype_name(x->dtype));
	for (int i = 1; i < c->n_in; i++) {
		const ir_value *t = c->in[i];
		if (t->dtype != AIR_F32 && t->dtype != AIR_BOOL)
			return op_fail(c, AIR_UNSUPPORTED, "input %d must be f32 or bool, not %s", i,
				       air_dtype_name(t->dtype));
		/* periodic: after its leading 1s, input 0's trailing dims */
		bool same = t->rank == x->rank, periodic = t->rank <= x->rank;
		int k = 0;
		while (k < t->rank && t->dims[k] == 1)
			k++;
		for (int d = 0; d < t->rank; d++) {
			same = same && ir_dim_equal(c->g, t->dims[d], x->dims[d]);
			if (d >= k && periodic)
				periodic = ir_dim_equal(c->g, t->dims[d], x->dims[d + x->rank - t->rank]);
		}
		if (!same && !periodic)
			return op_fail(c, AIR_SHAPE_MISMATCH,
				       "input %d neither has input 0's shape nor repeats over its leading dims", i);
	}
	const ir_attr *prog = op_attr(c, 0), *outs = op_attr(c, 1);
	if (outs->n != c->n_out || !kd_program_ok(prog->ints, prog->n, outs->ints, outs->n, c->n_in))
		return op_fail(c, AIR_INVALID_ARGUMENT, "a malformed program for %d input(s), %d output(s)", c->n_in,
			       c->n_out);
	for (int o = 0; o < c->n_out; o++)
		c->out[o] = *x;
	return AIR_OK;
}

static const op_attr_spec fused_dag_attrs[] = {
	{"program", OPA_INTS, true, 0, 0},
	{"outputs", OPA_INTS, true, 0, 0},
};

/* The reference kernel reads element i of every input before it writes
 * element i of any output, so an output may take over an input's buffer. */
const op_def op_def_fused_dag = {"fused_dag", 1, KD_MAX_IN, OP_MAX_OUT, fused_dag_attrs, 2, infer_fused_dag,
				 {"fused_dag_ref", 0, NULL, NULL, NULL, NULL, kref_fused_dag, K_INPLACE_ANY},
				 OPF_VARIADIC | OPF_VARIADIC_OUT};

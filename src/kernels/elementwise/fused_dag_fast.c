/* fused_dag_fast.c - the portable build of fused_dag's tile interpreter
 * (fused_dag_body.h) and the support test all its ISA builds share. */
#include "kernels/elementwise/fused_dag_fast.h"

#define KD_RUN kd_run_portable
#include "kernels/elementwise/fused_dag_body.h"

bool kd_fast_supports(const k_call *call)
{
	const k_attr *prog = &call->attrs[0], *outs = &call->attrs[1];
	if (!kd_program_ok(prog->ints, prog->n, outs->ints, outs->n, call->n_in) || outs->n != call->n_out)
		return false;
	int64_t n = call->out[0].numel;
	for (int o = 0; o < call->n_out; o++)
		if (call->out[o].dtype != AIR_F32 || call->out[o].numel != n)
			return false;
	for (int i = 0; i < call->n_in; i++) {
		const k_tensor *x = &call->in[i];
		if (x->dtype != AIR_F32 && x->dtype != AIR_BOOL)
			return false;
		/* of the output's size or repeating over it (a size not known
		 * yet: shape inference vouched for it) */
		if (x->numel >= 0 && n >= 0 && x->numel != n && !(x->numel > 0 && n % x->numel == 0))
			return false;
	}
	return true;
}

/* K_INPLACE_ANY: see fused_dag_body.h (outputs are written after the
 * tile's inputs were read, and each tile is read once). */
const k_kernel kfast_fused_dag = {"fused_dag_tiles", 0, kd_fast_supports, NULL, NULL, NULL, kd_run_portable,
				  K_INPLACE_ANY};

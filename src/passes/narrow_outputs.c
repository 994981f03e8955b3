/* narrow_outputs.c - a 16-bit model's linear whose only use is the cast
 * back to its 16-bit dtype (an LM head returning its logits, which every
 * value of a libair graph computes in f32 until it leaves: see
 * python/torchair/lowering/core.py) stores its result narrowed instead:
 *   y = linear(x, W16); z = cast(y, bf16)   ->   z = linear(x, W16, out_dtype = bf16)
 * The f32 result is then never held whole (kernels/matmul/linear_lowp.c
 * narrows it chunk by chunk): a 512-token prompt's logits over a 32000-token
 * vocabulary are 65 MB in f32, most of the gap between a bf16 LLaMA's peak
 * memory under torchair and under eager. A linear with a fused residual is
 * left alone (the residual's buffer may become the output's, which must
 * then keep its size). Requires: node order is an execution order. */
#include <stdlib.h>

#include "core/error.h"
#include "ops/op.h"
#include "passes/pass.h"

static bool is_16(air_dtype d)
{
	return d == AIR_BF16 || d == AIR_F16;
}

air_status pass_narrow_outputs(air_graph *g, const pass_options *po, pass_log *log)
{
	(void)po;
	int *uses = ir_count_uses(g);
	char *dead = calloc((size_t)g->n_nodes + 1, 1);
	if (!uses || !dead) {
		free(uses);
		free(dead);
		return air_error(AIR_OUT_OF_MEMORY, "narrow_outputs: no memory");
	}
	const int a_res = pass_attr_index(OP_linear, "has_residual"), a_out = pass_attr_index(OP_linear, "out_dtype");
	int narrowed = 0;
	for (int k = 0; k < g->n_nodes; k++) {
		ir_node *c = &g->nodes[k];
		if (c->op != OP_cast || !is_16(g->values[c->out[0]].dtype))
			continue;
		air_value y = c->in[0];
		const ir_value *yv = &g->values[y];
		if (yv->kind != IR_NODE_OUTPUT || uses[y] != 1 || yv->dtype != AIR_F32)
			continue;
		int li = yv->index;
		ir_node *lin = &g->nodes[li];
		if (lin->op != OP_linear || dead[li] || !is_16(g->values[lin->in[1]].dtype) ||
		    g->values[lin->in[0]].dtype != AIR_F32 || (lin->attrs[a_res].set && lin->attrs[a_res].i) ||
		    (lin->attrs[a_out].set && lin->attrs[a_out].i != -1))
			continue;
		air_value z = c->out[0];
		lin->attrs[a_out].set = true;
		lin->attrs[a_out].i = g->values[z].dtype;
		lin->out[0] = z;
		g->values[z].index = li;
		g->values[y].kind = IR_DEAD;
		dead[k] = 1;
		narrowed++;
	}
	if (narrowed)
		pass_compact(g, dead);
	pass_logf(log, "narrow_outputs: %d linear(s) store their result in 16 bits\n", narrowed);
	free(uses);
	free(dead);
	return AIR_OK;
}

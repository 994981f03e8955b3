/* verify.c - the verifier: checks a graph's invariants against the op table.
 * Run by air_compile and, in debug builds, after every pass.
 *   - every node input is a graph input, a constant, or the output of an
 *     earlier node (so node order is a valid execution order);
 *   - each node's inputs fit its op (shape inference re-run and compared);
 *   - outputs are set; every symbol appears as a bare dim of an input. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/graph.h"
#include "ops/op.h"

static air_status check_node(air_graph *g, int k)
{
	const ir_node *n = &g->nodes[k];
	if (n->op < 0 || n->op >= OP_COUNT)
		return air_error(AIR_INVALID_GRAPH, "node %d: unknown op %d", k, n->op);
	const op_def *def = op_get(n->op);
	bool n_out_ok = (def->flags & OPF_VARIADIC_OUT) ? n->n_out >= 1 && n->n_out <= def->n_out : n->n_out == def->n_out;
	if (n->n_in < def->min_in || n->n_in > def->max_in || !n_out_ok)
		return air_error(AIR_INVALID_GRAPH, "node %d (%s): wrong number of inputs or outputs", k, def->name);
	op_infer_ctx ctx;
	memset(&ctx, 0, sizeof ctx);
	ctx.g = g;
	ctx.node = n;
	ctx.n_in = n->n_in;
	ctx.n_out = n->n_out;
	for (int i = 0; i < n->n_in; i++) {
		air_value v = n->in[i];
		if (v >= (air_value)g->n_values)
			return air_error(AIR_INVALID_GRAPH, "node %d (%s): input %d is not a value", k, def->name, i);
		const ir_value *x = &g->values[v];
		if (x->kind == IR_NODE_OUTPUT && x->index >= k)
			return air_error(AIR_INVALID_GRAPH, "node %d (%s): input %d is used before it is defined", k,
					 def->name, i);
		ctx.in[i] = x;
	}
	if (def->infer(&ctx) != AIR_OK)
		return air_error_context(AIR_INVALID_GRAPH, "node %d (%s)", k, def->name);
	for (int o = 0; o < n->n_out; o++) {
		const ir_value *x = &g->values[n->out[o]];
		bool same = x->dtype == ctx.out[o].dtype && x->rank == ctx.out[o].rank && x->kind == IR_NODE_OUTPUT &&
			    x->index == k;
		for (int d = 0; same && d < x->rank; d++)
			same = x->dims[d] == ctx.out[o].dims[d];
		if (!same)
			return air_error(AIR_INVALID_GRAPH, "node %d (%s): output %d has the wrong type", k, def->name,
					 o);
	}
	return AIR_OK;
}

air_status air_graph_verify(const air_graph *cg)
{
	if (!cg)
		return air_error(AIR_INVALID_ARGUMENT, "air_graph_verify: graph is NULL");
	/* shape inference may intern expressions; they already exist, so the
	 * graph does not change in substance */
	air_graph *g = (air_graph *)cg;
	for (int k = 0; k < g->n_nodes; k++)
		AIR_TRY(check_node(g, k));
	if (g->n_outputs == 0)
		return air_error(AIR_INVALID_GRAPH, "the graph has no outputs");
	for (int i = 0; i < g->n_outputs; i++)
		if (g->outputs[i] >= (air_value)g->n_values)
			return air_error(AIR_INVALID_GRAPH, "output %d is not a value", i);
	char *bound = calloc((size_t)g->n_symbols + 1, 1);
	if (!bound)
		return air_error(AIR_OUT_OF_MEMORY, "verify: no memory");
	for (int i = 0; i < g->n_inputs; i++) {
		const ir_value *x = &g->values[g->inputs[i]];
		for (int d = 0; d < x->rank; d++)
			if (x->dims[d] < 0 && g->exprs[-x->dims[d] - 1].kind == IR_EXPR_SYMBOL)
				bound[g->exprs[-x->dims[d] - 1].symbol] = 1;
	}
	for (int s = 0; s < g->n_symbols; s++)
		if (!bound[s]) {
			free(bound);
			return air_error(AIR_INVALID_GRAPH, "symbol %s is not a dim of any input", g->symbol_names[s]);
		}
	free(bound);
	return AIR_OK;
}

/* node.c - air_graph_add_node: a node checked against its op's entry in the
 * op table (input count, attributes against the schema, with defaults) and
 * its outputs made by the op's shape function. Lives with the op table, not
 * in core/: the IR does not know the ops. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/graph.h"
#include "ops/op.h"

static const char *attr_type_name(op_attr_type t)
{
	switch (t) {
	case OPA_INT: return "int";
	case OPA_FLOAT: return "float";
	case OPA_INTS: return "ints";
	case OPA_DIM: return "dim";
	case OPA_DIMS: return "dims";
	}
	return "?";
}

/* Fills node->attrs from the caller's list, in schema order, with defaults. */
static air_status set_attrs(air_graph *g, const op_def *def, ir_node *node, const air_attr *attrs, int n_attrs)
{
	for (int k = 0; k < n_attrs; k++) {
		const air_attr *a = &attrs[k];
		if (!a->name)
			return air_error(AIR_INVALID_ARGUMENT, "%s: attribute %d has no name", def->name, k);
		int s = 0;
		while (s < def->n_attrs && strcmp(def->attrs[s].name, a->name) != 0)
			s++;
		if (s == def->n_attrs)
			return air_error(AIR_INVALID_ARGUMENT, "%s: unknown attribute '%s'", def->name, a->name);
		const op_attr_spec *spec = &def->attrs[s];
		ir_attr *dst = &node->attrs[s];
		if (dst->set)
			return air_error(AIR_INVALID_ARGUMENT, "%s: attribute '%s' given twice", def->name, a->name);
		bool list = spec->type == OPA_INTS || spec->type == OPA_DIMS;
		bool ok = (spec->type == OPA_FLOAT && (a->type == AIR_ATTR_FLOAT || a->type == AIR_ATTR_INT)) ||
			  ((spec->type == OPA_INT || spec->type == OPA_DIM) && a->type == AIR_ATTR_INT) ||
			  (list && a->type == AIR_ATTR_INTS);
		if (!ok)
			return air_error(AIR_INVALID_ARGUMENT, "%s: attribute '%s' must be %s", def->name, a->name,
					 attr_type_name(spec->type));
		dst->set = true;
		if (spec->type == OPA_FLOAT)
			dst->f = a->type == AIR_ATTR_FLOAT ? a->f : (double)a->i;
		else
			dst->i = a->i;
		if (spec->type == OPA_DIM && a->i < 0 && -(a->i + 1) >= g->n_exprs)
			return air_error(AIR_INVALID_ARGUMENT, "%s: attribute '%s' names no dim expression",
					 def->name, a->name);
		if (list) {
			if (a->n < 0 || a->n > 64 || (a->n > 0 && !a->ints))
				return air_error(AIR_INVALID_ARGUMENT, "%s: attribute '%s' has a bad list", def->name,
						 a->name);
			dst->n = a->n;
			dst->ints = malloc(sizeof(int64_t) * (size_t)(a->n ? a->n : 1));
			if (!dst->ints)
				return air_error(AIR_OUT_OF_MEMORY, "%s: no memory", def->name);
			for (int j = 0; j < a->n; j++) {
				if (spec->type == OPA_DIMS && a->ints[j] < 0 && -(a->ints[j] + 1) >= g->n_exprs)
					return air_error(AIR_INVALID_ARGUMENT,
							 "%s: attribute '%s'[%d] names no dim expression", def->name,
							 a->name, j);
				dst->ints[j] = a->ints[j];
			}
		}
	}
	for (int s = 0; s < def->n_attrs; s++) {
		ir_attr *dst = &node->attrs[s];
		if (dst->set)
			continue;
		if (def->attrs[s].required)
			return air_error(AIR_INVALID_ARGUMENT, "%s: attribute '%s' is required", def->name,
					 def->attrs[s].name);
		dst->i = def->attrs[s].def_i;
		dst->f = def->attrs[s].def_f;
	}
	return AIR_OK;
}

air_status air_graph_add_node(air_graph *g, const char *opname, const air_value *inputs, int n_inputs,
			      const air_attr *attrs, int n_attrs, air_value *outputs, int max_outputs,
			      int *n_outputs)
{
	if (n_outputs)
		*n_outputs = 0;
	if (!g || !opname || (n_inputs > 0 && !inputs) || (n_attrs > 0 && !attrs) || !outputs || !n_outputs)
		return air_error(AIR_INVALID_ARGUMENT, "air_graph_add_node: NULL argument");
	int op = op_find(opname);
	if (op < 0)
		return air_error(AIR_UNSUPPORTED, "unknown op '%s'", opname);
	const op_def *def = op_get(op);
	if (n_inputs < def->min_in || n_inputs > def->max_in)
		return air_error(AIR_INVALID_ARGUMENT, "%s: takes %d..%d inputs, got %d", def->name, def->min_in,
				 def->max_in, n_inputs);
	for (int i = 0; i < n_inputs; i++)
		if (inputs[i] >= (air_value)g->n_values)
			return air_error(AIR_INVALID_ARGUMENT, "%s: input %d is not a value of this graph",
					 def->name, i);
	if (max_outputs < def->n_out)
		return air_error(AIR_INVALID_ARGUMENT, "%s: has %d outputs, room for %d", def->name, def->n_out,
				 max_outputs);
	if (n_attrs < 0)
		return air_error(AIR_INVALID_ARGUMENT, "%s: negative attribute count", def->name);

	ir_node node;
	memset(&node, 0, sizeof node);
	node.op = op;
	node.n_in = n_inputs;
	node.n_out = def->n_out;
	air_status st = set_attrs(g, def, &node, attrs, n_attrs);
	if (st != AIR_OK)
		goto fail;

	op_infer_ctx ctx;
	memset(&ctx, 0, sizeof ctx);
	ctx.g = g;
	ctx.node = &node;
	ctx.n_in = n_inputs;
	ctx.n_out = def->n_out;
	for (int i = 0; i < n_inputs; i++)
		ctx.in[i] = &g->values[inputs[i]];
	st = def->infer(&ctx);
	if (st != AIR_OK)
		goto fail;

	node.in = malloc(sizeof(air_value) * (size_t)(n_inputs ? n_inputs : 1));
	node.out = malloc(sizeof(air_value) * (size_t)def->n_out);
	if (!node.in || !node.out) {
		st = air_error(AIR_OUT_OF_MEMORY, "%s: no memory", def->name);
		goto fail;
	}
	if (n_inputs)
		memcpy(node.in, inputs, sizeof(air_value) * (size_t)n_inputs);
	st = ir_grow((void **)&g->nodes, &g->cap_nodes, g->n_nodes, sizeof *g->nodes);
	if (st != AIR_OK)
		goto fail;
	int first_value = g->n_values;
	for (int o = 0; o < def->n_out; o++) {
		st = ir_add_value(g, ctx.out[o].dtype, ctx.out[o].rank, ctx.out[o].dims, IR_NODE_OUTPUT,
				  g->n_nodes, &node.out[o]);
		if (st != AIR_OK) {
			g->n_values = first_value;
			goto fail;
		}
	}
	g->nodes[g->n_nodes++] = node;
	for (int o = 0; o < def->n_out; o++)
		outputs[o] = node.out[o];
	*n_outputs = def->n_out;
	return AIR_OK;
fail:
	ir_free_node(&node);
	return st;
}


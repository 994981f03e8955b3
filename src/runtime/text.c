/* text.c - the model's graph as plain text, before or after the passes
 * (air_model_text; the `air dump` command prints it): one line per input,
 * constant and node, with types, attributes by name and, after the passes,
 * each step's kernel. The same content as the DOT form, for reading in a
 * terminal or diffing. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "ops/op.h"
#include "runtime/model.h"
#include "runtime/textbuf.h"


static void put_type(rt_textbuf *o, const air_graph *g, air_value v)
{
	char type[256];
	ir_value_string(g, v, type, sizeof type);
	rt_textbuf_put(o, "%s", type);
}

/* An attribute's value by its schema type; dims as text ("batch*2"). */
static void put_attr(rt_textbuf *o, const air_graph *g, const op_attr_spec *spec, const ir_attr *a)
{
	char d[128];
	switch (spec->type) {
	case OPA_FLOAT: rt_textbuf_put(o, "%.9g", a->f); break;
	case OPA_DIM:
		air_graph_dim_string(g, a->i, d, sizeof d);
		rt_textbuf_put(o, "%s", d);
		break;
	case OPA_INTS:
	case OPA_DIMS:
		rt_textbuf_put(o, "[");
		for (int k = 0; k < a->n; k++) {
			if (spec->type == OPA_DIMS)
				air_graph_dim_string(g, a->ints[k], d, sizeof d);
			else
				snprintf(d, sizeof d, "%lld", (long long)a->ints[k]);
			rt_textbuf_put(o, "%s%s", k ? ", " : "", d);
		}
		rt_textbuf_put(o, "]");
		break;
	default: rt_textbuf_put(o, "%lld", (long long)a->i); break;
	}
}

static void put_graph(rt_textbuf *o, const air_model *m, const air_graph *g, bool after)
{
	rt_textbuf_put(o, "graph %s the passes: %d inputs, %d constants, %d nodes, %d outputs\n", after ? "after" : "before",
	    g->n_inputs, g->n_consts, g->n_nodes, g->n_outputs);
	for (int i = 0; i < g->n_inputs; i++) {
		rt_textbuf_put(o, "  %%%u = input %d", g->inputs[i], i);
		if (g->input_names && g->input_names[i])
			rt_textbuf_put(o, " '%s'", g->input_names[i]);
		rt_textbuf_put(o, " : ");
		put_type(o, g, g->inputs[i]);
		rt_textbuf_put(o, "\n");
	}
	for (int c = 0; c < g->n_consts; c++) {
		rt_textbuf_put(o, "  %%%u = constant : ", g->consts[c].value);
		put_type(o, g, g->consts[c].value);
		rt_textbuf_put(o, "\n");
	}
	for (int k = 0; k < g->n_nodes; k++) {
		const ir_node *n = &g->nodes[k];
		const op_def *def = op_get(n->op);
		rt_textbuf_put(o, "  ");
		for (int j = 0; j < n->n_out; j++)
			rt_textbuf_put(o, "%s%%%u", j ? ", " : "", n->out[j]);
		rt_textbuf_put(o, " = %s(", def->name);
		for (int i = 0; i < n->n_in; i++)
			rt_textbuf_put(o, "%s%%%u", i ? ", " : "", n->in[i]);
		rt_textbuf_put(o, ")");
		for (int a = 0; a < def->n_attrs && a < IR_MAX_ATTRS; a++) {
			if (!n->attrs[a].set)
				continue;
			rt_textbuf_put(o, " %s=", def->attrs[a].name);
			put_attr(o, g, &def->attrs[a], &n->attrs[a]);
		}
		rt_textbuf_put(o, " : ");
		for (int j = 0; j < n->n_out; j++) {
			rt_textbuf_put(o, "%s", j ? ", " : "");
			put_type(o, g, n->out[j]);
		}
		if (after && k < m->n_steps) {
			const rt_step *st = &m->steps[k];
			rt_textbuf_put(o, "  [%s]", st->alias ? "alias" : st->kernel->name);
			char fused[512];
			if (rt_fused_text(n, fused, sizeof fused))
				rt_textbuf_put(o, " {%s}", fused);
		}
		rt_textbuf_put(o, "\n");
	}
	for (int i = 0; i < g->n_outputs; i++)
		rt_textbuf_put(o, "  output %d = %%%u\n", i, g->outputs[i]);
}

air_status air_model_text(const air_model *m, int which, char *buf, size_t size, size_t *length)
{
	if (length)
		*length = 0;
	if (buf && size)
		buf[0] = '\0';
	if (!m || !length || (size && !buf))
		return air_error(AIR_INVALID_ARGUMENT, "air_model_text: bad argument");
	if (which != AIR_DOT_BEFORE_PASSES && which != AIR_DOT_AFTER_PASSES)
		return air_error(AIR_INVALID_ARGUMENT, "air_model_text: which is %d, not AIR_DOT_BEFORE_PASSES or "
						       "AIR_DOT_AFTER_PASSES", which);
	bool after = which == AIR_DOT_AFTER_PASSES;
	const air_graph *g = after ? m->g : m->before;
	if (!g)
		return air_error(AIR_INVALID_STATE, "air_model_text: the model kept no graph before the passes");
	rt_textbuf o = {buf, size, 0};
	put_graph(&o, m, g, after);
	*length = o.len;
	return AIR_OK;
}

/* dot.c - the model's graph as Graphviz DOT text, before or after the
 * passes: a node per graph input, constant and op, an edge per use, and the
 * graph outputs. After the passes each op shows its kernel, and steps that
 * run in place (when the plan is known at compile time) are filled. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "ops/op.h"
#include "runtime/model.h"
#include "runtime/textbuf.h"

air_status rt_keep_graph_before(air_model *m)
{
	/* a shallow copy whose constants have no data, so the clone copies
	 * shapes only: the report and DOT need no weights */
	air_graph shallow = *m->g;
	ir_constant *consts = calloc((size_t)m->g->n_consts + 1, sizeof *consts);
	if (!consts)
		return air_error(AIR_OUT_OF_MEMORY, "compile: no memory");
	for (int c = 0; c < m->g->n_consts; c++) {
		consts[c] = m->g->consts[c];
		consts[c].data = NULL;
		consts[c].owned = NULL;
	}
	shallow.consts = consts;
	air_status st = ir_graph_clone(&shallow, &m->before);
	free(consts);
	return st;
}


/* A value's name as DOT node id: its producer for node outputs. */
static void put_source(rt_textbuf *o, const air_graph *g, air_value v)
{
	const ir_value *x = &g->values[v];
	switch (x->kind) {
	case IR_INPUT: rt_textbuf_put(o, "in%d", x->index); break;
	case IR_CONSTANT: rt_textbuf_put(o, "c%d", x->index); break;
	default: rt_textbuf_put(o, "n%d", x->index); break;
	}
}

/* A value's type as a label fragment; types never hold quotes. */
static void put_type(rt_textbuf *o, const air_graph *g, air_value v)
{
	char type[256];
	ir_value_string(g, v, type, sizeof type);
	rt_textbuf_put(o, "%s", type);
}

static void put_graph(rt_textbuf *o, const air_model *m, const air_graph *g, bool after, const int *inplace)
{
	rt_textbuf_put(o, "digraph \"air %s passes\" {\n", after ? "after" : "before");
	rt_textbuf_put(o, "  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10];\n"
	       "  edge [fontname=\"Helvetica\", fontsize=9];\n");
	for (int i = 0; i < g->n_inputs; i++) {
		rt_textbuf_put(o, "  in%d [shape=ellipse, label=\"input %d\\n", i, i);
		put_type(o, g, g->inputs[i]);
		rt_textbuf_put(o, "\"];\n");
	}
	int *uses = ir_count_uses(g); /* NULL when out of memory: draw all */
	for (int c = 0; c < g->n_consts; c++) {
		if (uses && uses[g->consts[c].value] == 0)
			continue; /* replaced by a pass (folded), read by nothing */
		rt_textbuf_put(o, "  c%d [shape=box, style=\"rounded,dashed\", color=gray50, fontcolor=gray30, label=\"", c);
		put_type(o, g, g->consts[c].value);
		rt_textbuf_put(o, "\"];\n");
	}
	free(uses);
	for (int k = 0; k < g->n_nodes; k++) {
		const ir_node *n = &g->nodes[k];
		rt_textbuf_put(o, "  n%d [shape=box, label=\"%s", k, op_get(n->op)->name);
		if (after && k < m->n_steps) {
			const rt_step *st = &m->steps[k];
			rt_textbuf_put(o, "\\n%s", st->alias ? "(alias)" : st->kernel->name);
		}
		char fused[512];
		if (after && rt_fused_text(n, fused, sizeof fused))
			rt_textbuf_put(o, "\\n%s", fused);
		rt_textbuf_put(o, "\\n");
		put_type(o, g, n->out[0]);
		if (inplace && inplace[k] >= 0)
			rt_textbuf_put(o, "\\nin place of input %d\", style=filled, fillcolor=\"#cfe3ff", inplace[k]);
		rt_textbuf_put(o, "\"];\n");
		for (int i = 0; i < n->n_in; i++) {
			rt_textbuf_put(o, "  ");
			put_source(o, g, n->in[i]);
			rt_textbuf_put(o, " -> n%d", k);
			if (inplace && inplace[k] == i)
				rt_textbuf_put(o, " [style=bold, color=\"#2060c0\"]");
			rt_textbuf_put(o, ";\n");
		}
	}
	for (int i = 0; i < g->n_outputs; i++) {
		rt_textbuf_put(o, "  out%d [shape=ellipse, peripheries=2, label=\"output %d\"];\n  ", i, i);
		put_source(o, g, g->outputs[i]);
		rt_textbuf_put(o, " -> out%d;\n", i);
	}
	rt_textbuf_put(o, "}\n");
}

air_status air_model_dot(const air_model *m, int which, char *buf, size_t size, size_t *length)
{
	if (length)
		*length = 0;
	if (buf && size)
		buf[0] = '\0';
	if (!m || !length || (size && !buf))
		return air_error(AIR_INVALID_ARGUMENT, "air_model_dot: bad argument");
	if (which != AIR_DOT_BEFORE_PASSES && which != AIR_DOT_AFTER_PASSES)
		return air_error(AIR_INVALID_ARGUMENT, "air_model_dot: which is %d, not AIR_DOT_BEFORE_PASSES or "
						       "AIR_DOT_AFTER_PASSES", which);
	bool after = which == AIR_DOT_AFTER_PASSES;
	const air_graph *g = after ? m->g : m->before;
	if (!g)
		return air_error(AIR_INVALID_STATE, "air_model_dot: the model kept no graph before the passes");
	int *inplace = NULL;
	if (after && m->mem_static) {
		inplace = malloc(sizeof *inplace * ((size_t)m->n_steps + 1));
		air_memory_info mem;
		if (!inplace)
			return air_error(AIR_OUT_OF_MEMORY, "air_model_dot: no memory");
		air_status st = rt_static_memory(m, &mem, inplace);
		if (st != AIR_OK) {
			free(inplace);
			return st;
		}
	}
	rt_textbuf o = {buf, size, 0};
	put_graph(&o, m, g, after, inplace);
	free(inplace);
	*length = o.len;
	return AIR_OK;
}

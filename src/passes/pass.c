/* pass.c - what passes share: the log, compaction after nodes die, and
 * rewriting a node's op and attributes. */
#include "passes/pass.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "ops/op.h"

int pass_attr_index(int op, const char *name)
{
	const op_def *def = op_get(op);
	for (int a = 0; a < def->n_attrs; a++)
		if (strcmp(def->attrs[a].name, name) == 0)
			return a;
	return -1;
}

void pass_set_op(ir_node *n, int op)
{
	const op_def *def = op_get(op);
	for (int a = 0; a < IR_MAX_ATTRS; a++) {
		free(n->attrs[a].ints);
		memset(&n->attrs[a], 0, sizeof n->attrs[a]);
	}
	for (int a = 0; a < def->n_attrs; a++) {
		n->attrs[a].i = def->attrs[a].def_i;
		n->attrs[a].f = def->attrs[a].def_f;
	}
	n->op = op;
}

void pass_logf(pass_log *log, const char *fmt, ...)
{
	if (log->oom)
		return;
	for (;;) {
		va_list ap;
		va_start(ap, fmt);
		size_t room = log->buf ? log->cap - log->len : 0;
		int n = vsnprintf(log->buf ? log->buf + log->len : NULL, room, fmt, ap);
		va_end(ap);
		if (n < 0) {
			log->oom = 1;
			return;
		}
		if (log->buf && (size_t)n < room) {
			log->len += (size_t)n;
			return;
		}
		size_t cap = (log->cap ? log->cap * 2 : 1024) + (size_t)n;
		char *p = realloc(log->buf, cap);
		if (!p) {
			log->oom = 1;
			return;
		}
		log->buf = p;
		log->cap = cap;
	}
}

void pass_compact(air_graph *g, const char *dead)
{
	int k = 0;
	for (int i = 0; i < g->n_nodes; i++) {
		if (dead[i]) {
			ir_node *n = &g->nodes[i];
			free(n->in);
			free(n->out);
			for (int a = 0; a < IR_MAX_ATTRS; a++)
				free(n->attrs[a].ints);
			continue;
		}
		g->nodes[k] = g->nodes[i];
		for (int o = 0; o < g->nodes[k].n_out; o++)
			g->values[g->nodes[k].out[o]].index = k;
		k++;
	}
	g->n_nodes = k;
}

bool pass_f32_scalar(const air_graph *g, air_value v, float *out)
{
	const ir_value *x = &g->values[v];
	if (x->kind != IR_CONSTANT || x->dtype != AIR_F32)
		return false;
	for (int d = 0; d < x->rank; d++)
		if (x->dims[d] != 1)
			return false;
	memcpy(out, ir_constant_data(g, v), sizeof *out);
	return true;
}

air_status pass_pattern_init(pass_pattern *p, air_graph *g, const char *pass)
{
	memset(p, 0, sizeof *p);
	p->g = g;
	p->uses = ir_count_uses(g);
	p->dead = calloc((size_t)g->n_nodes + 1, 1);
	if (!p->uses || !p->dead) {
		pass_pattern_free(p);
		return air_error(AIR_OUT_OF_MEMORY, "%s: no memory", pass);
	}
	return AIR_OK;
}

void pass_pattern_free(pass_pattern *p)
{
	free(p->uses);
	free(p->dead);
	p->uses = NULL;
	p->dead = NULL;
}

ir_node *pass_pattern_take(pass_pattern *p, air_value v, int op)
{
	const ir_value *x = &p->g->values[v];
	if (x->kind != IR_NODE_OUTPUT || x->dtype != AIR_F32 || p->uses[v] != 1 || p->dead[x->index])
		return NULL;
	ir_node *n = &p->g->nodes[x->index];
	if (n->op != op || n->n_out != 1 || p->n_members == PASS_PATTERN_MAX)
		return NULL;
	p->members[p->n_members++] = x->index;
	return n;
}

void pass_pattern_kill(pass_pattern *p)
{
	for (int m = 0; m < p->n_members; m++) {
		p->dead[p->members[m]] = 1;
		p->g->values[p->g->nodes[p->members[m]].out[0]].kind = IR_DEAD;
	}
}

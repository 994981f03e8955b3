/* report.c - the compile report: one line per step (op, kernel, output
 * type), then totals. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kernels/cpu.h"
#include "ops/op.h"
#include "runtime/model.h"

typedef struct {
	char *buf;
	size_t len, cap;
	int oom;
} sbuf;

static void add(sbuf *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(sbuf *s, const char *fmt, ...)
{
	if (s->oom)
		return;
	for (;;) {
		va_list ap;
		va_start(ap, fmt);
		int n = vsnprintf(s->buf ? s->buf + s->len : NULL, s->buf ? s->cap - s->len : 0, fmt, ap);
		va_end(ap);
		if (n < 0) {
			s->oom = 1;
			return;
		}
		if (s->buf && s->len + (size_t)n < s->cap) {
			s->len += (size_t)n;
			return;
		}
		size_t cap = (s->cap ? s->cap * 2 : 4096) + (size_t)n;
		char *p = realloc(s->buf, cap);
		if (!p) {
			s->oom = 1;
			return;
		}
		s->buf = p;
		s->cap = cap;
	}
}

air_status rt_model_report(air_model *m)
{
	sbuf s = {0};
	const air_graph *g = m->g;
	add(&s, "isa: %s, threads: %d\n", kcpu_isa_name(), rt_pool_size(m->pool));
	add(&s, "inputs: %d, constants: %d, outputs: %d, steps: %d\n", g->n_inputs, g->n_consts, g->n_outputs,
	    m->n_steps);
	for (int k = 0; k < m->n_steps; k++) {
		const rt_step *st = &m->steps[k];
		const ir_node *n = &g->nodes[st->node];
		char type[256];
		ir_value_string(g, n->out[0], type, sizeof type);
		add(&s, "  %4d %-14s %-20s %s\n", k, op_get(n->op)->name, st->alias ? "(alias)" : st->kernel->name,
		    type);
	}
	if (m->pass_log)
		add(&s, "%s", m->pass_log);
	if (s.oom) {
		free(s.buf);
		return air_error(AIR_OUT_OF_MEMORY, "report: no memory");
	}
	free(m->report);
	m->report = s.buf;
	return AIR_OK;
}

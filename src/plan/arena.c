/* arena.c - from a compiled program and concrete value sizes to the arena plan:
 * lifetimes over the step order, in-place reuse, then plan/memplan.c.
 *
 * An activation is a node output that owns its memory (its own alias root)
 * and is not a graph output (those are the caller's). Its buffer lives from
 * the step that writes it to the last step that reads it or any alias of
 * it. A step runs in place when its kernel allows it (plan/inplace.c) and
 * one input is an activation that dies at this step, has the output's dtype
 * and byte size (no broadcast), and shares no buffer with a differently
 * sized input of the same step: the output then takes over that buffer,
 * whose lifetime grows to the output's. Chains of such steps share one
 * buffer. Graph inputs, constants and graph outputs are never taken over. */
#include "plan/arena.h"

#include <stdlib.h>

#include "core/error.h"
#include "plan/memplan.h"

typedef struct planner {
	const mp_program *m;
	const size_t *bytes;
	int *last_use; /* per root value: last step reading it or an alias of it */
	int *buf_of;   /* per value: its buffer, or -1 */
	mp_buffer *bufs;
	int nb;
} planner;

/* The input of step k whose buffer the output can take over, or -1. */
static int choose_inplace(const planner *p, int k)
{
	const mp_program *m = p->m;
	const air_graph *g = m->g;
	const ir_node *n = &g->nodes[m->steps[k].node];
	air_value o = n->out[0];
	if (p->bytes[o] == 0)
		return -1;
	for (int i = 0; i < n->n_in; i++) {
		air_value x = n->in[i];
		int b = p->buf_of[m->root[x]];
		if (b < 0 || p->bufs[b].last != k)
			continue; /* not an activation, or read again later */
		if (g->values[x].dtype != g->values[o].dtype || p->bytes[x] != p->bytes[o])
			continue;
		bool ok = true;
		for (int j = 0; j < n->n_in && ok; j++)
			if (j != i && p->buf_of[m->root[n->in[j]]] == b && p->bytes[n->in[j]] != p->bytes[o])
				ok = false;
		if (ok && mp_inplace_allowed(m, k, i))
			return i;
	}
	return -1;
}

air_status mp_plan_program(const mp_program *m, const size_t *bytes, bool reuse, mp_arena *out)
{
	const air_graph *g = m->g;
	int nv = g->n_values;
	out->bytes = out->no_reuse_bytes = 0;
	out->n_buffers = out->n_inplace = 0;
	planner p = {m, bytes, NULL, NULL, NULL, 0};
	p.last_use = malloc(sizeof *p.last_use * (size_t)(nv + 1));
	p.buf_of = malloc(sizeof *p.buf_of * (size_t)(nv + 1));
	p.bufs = calloc((size_t)nv + 1, sizeof *p.bufs);
	air_status st = AIR_OK;
	if (!p.last_use || !p.buf_of || !p.bufs) {
		st = air_error(AIR_OUT_OF_MEMORY, "memory plan: no memory");
		goto done;
	}
	for (int v = 0; v < nv; v++) {
		p.last_use[v] = -1;
		p.buf_of[v] = -1;
	}
	for (int k = 0; k < m->n_steps; k++) {
		const ir_node *n = &g->nodes[m->steps[k].node];
		for (int i = 0; i < n->n_in; i++)
			p.last_use[m->root[n->in[i]]] = k;
	}
	for (int k = 0; k < m->n_steps; k++) {
		out->inplace[k] = -1;
		const mp_step *step = &m->steps[k];
		if (step->alias)
			continue; /* its output is its input's memory */
		const ir_node *n = &g->nodes[step->node];
		for (int j = 0; j < n->n_out; j++) {
			air_value o = n->out[j];
			if (g->values[o].kind != IR_NODE_OUTPUT || m->root[o] != (int32_t)o || m->is_output[o])
				continue;
			out->n_buffers++;
			out->no_reuse_bytes += mp_align(bytes[o]);
			int last = p.last_use[o] > k ? p.last_use[o] : k;
			int i = j == 0 && reuse ? choose_inplace(&p, k) : -1;
			if (i >= 0) {
				int b = p.buf_of[m->root[n->in[i]]];
				p.buf_of[o] = b;
				p.bufs[b].last = last;
				out->inplace[k] = i;
				out->n_inplace++;
				continue;
			}
			p.bufs[p.nb] = (mp_buffer){bytes[o], k, last, 0};
			p.buf_of[o] = p.nb++;
		}
	}
	st = mp_plan(p.bufs, p.nb, reuse, &out->bytes);
	if (st == AIR_OK)
		for (int v = 0; v < nv; v++)
			out->offset[v] = p.buf_of[v] >= 0 ? (int64_t)p.bufs[p.buf_of[v]].offset : -1;
done:
	free(p.last_use);
	free(p.buf_of);
	free(p.bufs);
	return st;
}

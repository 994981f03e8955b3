/* simplify_util.c - the simplify pass's bookkeeping: keeps the use counts
 * and dead marks right as rules rewrite the graph. */
#include "passes/simplify_internal.h"

#include <stdlib.h>

#include "core/error.h"

air_status simp_grow_uses(simp *s)
{
	if (s->n_uses >= s->g->n_values)
		return AIR_OK;
	int *p = realloc(s->uses, sizeof *p * ((size_t)s->g->n_values + 1));
	if (!p)
		return air_error(AIR_OUT_OF_MEMORY, "simplify: no memory");
	for (int v = s->n_uses; v <= s->g->n_values; v++)
		p[v] = 0;
	s->uses = p;
	s->n_uses = s->g->n_values;
	return AIR_OK;
}

/* Node k's output old is equal to new: every use moves, node k dies. */
void simp_replace_output(simp *s, int k, air_value old_value, air_value new_value, rewrite why)
{
	ir_replace_uses(s->g, old_value, new_value);
	s->uses[new_value] += s->uses[old_value];
	s->uses[old_value] = 0;
	s->g->values[old_value].kind = IR_DEAD;
	s->dead[k] = 1;
	for (int i = 0; i < s->g->nodes[k].n_in; i++)
		s->uses[s->g->nodes[k].in[i]]--;
	s->count[why]++;
	s->changed = true;
}

void simp_set_input(simp *s, ir_node *n, int i, air_value v)
{
	s->uses[n->in[i]]--;
	s->uses[v]++;
	n->in[i] = v;
}

/* The live node producing v, or NULL. */
ir_node *simp_producer(simp *s, air_value v)
{
	const ir_value *x = &s->g->values[v];
	if (x->kind != IR_NODE_OUTPUT || s->dead[x->index])
		return NULL;
	return &s->g->nodes[x->index];
}

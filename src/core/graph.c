/* graph.c - building a graph through the public API: inputs, constants,
 * outputs, and the IR's storage. Nodes are added by ops/node.c, which
 * checks them against the op table. Every call checks before it changes
 * anything, so a failed call leaves the graph as it was. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/graph.h"

air_status ir_grow(void **array, int *cap, int n, size_t elem)
{
	if (n < *cap)
		return AIR_OK;
	int next = *cap ? *cap * 2 : 16;
	while (next <= n)
		next *= 2;
	void *p = realloc(*array, (size_t)next * elem);
	if (!p)
		return air_error(AIR_OUT_OF_MEMORY, "graph: no memory");
	*array = p;
	*cap = next;
	return AIR_OK;
}

air_status air_graph_create(air_graph **out)
{
	if (!out)
		return air_error(AIR_INVALID_ARGUMENT, "air_graph_create: out is NULL");
	*out = calloc(1, sizeof **out);
	if (!*out)
		return air_error(AIR_OUT_OF_MEMORY, "air_graph_create: no memory");
	return AIR_OK;
}

void ir_free_node(ir_node *n)
{
	free(n->in);
	free(n->out);
	for (int i = 0; i < IR_MAX_ATTRS; i++)
		free(n->attrs[i].ints);
}

void air_graph_destroy(air_graph *g)
{
	if (!g)
		return;
	for (int i = 0; i < g->n_nodes; i++)
		ir_free_node(&g->nodes[i]);
	for (int i = 0; i < g->n_consts; i++) {
		free(g->consts[i].owned);
		free(g->consts[i].row_scale);
	}
	for (int i = 0; i < g->n_inputs; i++)
		free(g->input_names[i]);
	for (int i = 0; i < g->n_symbols; i++)
		free(g->symbol_names[i]);
	free(g->values);
	free(g->nodes);
	free(g->consts);
	free(g->inputs);
	free(g->input_names);
	free(g->outputs);
	free(g->exprs);
	free(g->symbol_names);
	free(g);
}

air_status ir_add_value(air_graph *g, air_dtype dtype, int rank, const air_dim *dims, ir_value_kind kind,
			int32_t index, air_value *out)
{
	/* constant dims whose product overflows are no tensor: every byte
	 * count computed from them (constants, folding, the arena) would wrap */
	int64_t numel = 1;
	for (int i = 0; i < rank; i++)
		if (dims[i] >= 0 && (__builtin_mul_overflow(numel, dims[i], &numel) || numel > AIR_IR_MAX_NUMEL))
			return air_error(AIR_UNSUPPORTED, "a %s tensor of more than 2^56 elements", air_dtype_name(dtype));
	AIR_TRY(ir_grow((void **)&g->values, &g->cap_values, g->n_values, sizeof *g->values));
	ir_value *v = &g->values[g->n_values];
	memset(v, 0, sizeof *v);
	v->dtype = dtype;
	v->rank = rank;
	for (int i = 0; i < rank; i++)
		v->dims[i] = dims[i];
	v->kind = kind;
	v->index = index;
	*out = (air_value)g->n_values++;
	return AIR_OK;
}

static air_status check_type(const air_graph *g, air_dtype dtype, int rank, const air_dim *dims,
			     const char *who)
{
	if ((unsigned)dtype >= AIR_DTYPE_COUNT)
		return air_error(AIR_INVALID_ARGUMENT, "%s: unknown dtype %d", who, (int)dtype);
	if (rank < 0 || rank > AIR_MAX_RANK)
		return air_error(AIR_UNSUPPORTED, "%s: rank %d is outside [0, %d]", who, rank, AIR_MAX_RANK);
	if (rank > 0 && !dims)
		return air_error(AIR_INVALID_ARGUMENT, "%s: dims is NULL", who);
	int64_t numel = 1;
	for (int i = 0; i < rank; i++) {
		if (dims[i] < 0 && -(dims[i] + 1) >= g->n_exprs)
			return air_error(AIR_INVALID_ARGUMENT, "%s: dim %d names no expression", who, i);
		/* checked before the constant's byte count is computed */
		if (dims[i] >= 0 && (__builtin_mul_overflow(numel, dims[i], &numel) || numel > AIR_IR_MAX_NUMEL))
			return air_error(AIR_UNSUPPORTED, "%s: %s tensor too large", who, air_dtype_name(dtype));
	}
	return AIR_OK;
}

air_status air_graph_add_input(air_graph *g, const char *name, air_dtype dtype, int rank, const air_dim *dims,
			       air_value *out)
{
	if (!g || !out)
		return air_error(AIR_INVALID_ARGUMENT, "air_graph_add_input: NULL argument");
	*out = 0;
	AIR_TRY(check_type(g, dtype, rank, dims, "air_graph_add_input"));
	AIR_TRY(ir_grow((void **)&g->inputs, &g->cap_inputs, g->n_inputs, sizeof *g->inputs));
	int cap = g->cap_inputs - 1; /* keep the names array as long as inputs */
	(void)cap;
	char **names = realloc(g->input_names, (size_t)g->cap_inputs * sizeof *names);
	if (!names)
		return air_error(AIR_OUT_OF_MEMORY, "air_graph_add_input: no memory");
	g->input_names = names;
	char *copy = name ? strdup(name) : NULL;
	if (name && !copy)
		return air_error(AIR_OUT_OF_MEMORY, "air_graph_add_input: no memory");
	air_value v;
	air_status st = ir_add_value(g, dtype, rank, dims, IR_INPUT, g->n_inputs, &v);
	if (st != AIR_OK) {
		free(copy);
		return st;
	}
	g->inputs[g->n_inputs] = v;
	g->input_names[g->n_inputs] = copy;
	g->n_inputs++;
	*out = v;
	return AIR_OK;
}

air_status air_graph_add_constant(air_graph *g, air_dtype dtype, int rank, const int64_t *dims,
				  const void *data, uint32_t flags, air_value *out)
{
	if (!g || !out)
		return air_error(AIR_INVALID_ARGUMENT, "air_graph_add_constant: NULL argument");
	*out = 0;
	AIR_TRY(check_type(g, dtype, rank, dims, "air_graph_add_constant"));
	size_t nbytes = air_dtype_size(dtype);
	for (int i = 0; i < rank; i++) {
		if (dims[i] < 0)
			return air_error(AIR_INVALID_ARGUMENT, "air_graph_add_constant: dim %d is not a constant", i);
		nbytes *= (size_t)dims[i];
	}
	if (nbytes > 0 && !data)
		return air_error(AIR_INVALID_ARGUMENT, "air_graph_add_constant: data is NULL");
	if (flags & ~(uint32_t)AIR_CONSTANT_BORROW)
		return air_error(AIR_INVALID_ARGUMENT, "air_graph_add_constant: unknown flags 0x%x", flags);
	AIR_TRY(ir_grow((void **)&g->consts, &g->cap_consts, g->n_consts, sizeof *g->consts));
	ir_constant c = {.data = data, .nbytes = nbytes};
	if (!(flags & AIR_CONSTANT_BORROW)) {
		c.owned = malloc(nbytes ? nbytes : 1);
		if (!c.owned)
			return air_error(AIR_OUT_OF_MEMORY, "air_graph_add_constant: no memory for %zu bytes", nbytes);
		if (nbytes)
			memcpy(c.owned, data, nbytes);
		c.data = c.owned;
	}
	air_status st = ir_add_value(g, dtype, rank, dims, IR_CONSTANT, g->n_consts, &c.value);
	if (st != AIR_OK) {
		free(c.owned);
		return st;
	}
	g->consts[g->n_consts++] = c;
	*out = c.value;
	return AIR_OK;
}

air_status ir_add_owned_constant(air_graph *g, air_dtype dtype, int rank, const int64_t *dims, void *data,
				 air_value *out)
{
	air_status st = air_graph_add_constant(g, dtype, rank, dims, data, AIR_CONSTANT_BORROW, out);
	if (st != AIR_OK) {
		free(data);
		return st;
	}
	g->consts[g->n_consts - 1].owned = data;
	return AIR_OK;
}

const void *ir_constant_data(const air_graph *g, air_value v)
{
	if (v >= (air_value)g->n_values || g->values[v].kind != IR_CONSTANT)
		return NULL;
	return g->consts[g->values[v].index].data;
}

void ir_replace_uses(air_graph *g, air_value old_value, air_value new_value)
{
	for (int i = 0; i < g->n_nodes; i++)
		for (int k = 0; k < g->nodes[i].n_in; k++)
			if (g->nodes[i].in[k] == old_value)
				g->nodes[i].in[k] = new_value;
	for (int i = 0; i < g->n_outputs; i++)
		if (g->outputs[i] == old_value)
			g->outputs[i] = new_value;
}

int *ir_count_uses(const air_graph *g)
{
	int *uses = calloc((size_t)g->n_values + 1, sizeof *uses);
	if (!uses)
		return NULL;
	for (int i = 0; i < g->n_nodes; i++)
		for (int k = 0; k < g->nodes[i].n_in; k++)
			uses[g->nodes[i].in[k]]++;
	for (int i = 0; i < g->n_outputs; i++)
		uses[g->outputs[i]]++;
	return uses;
}

air_status air_graph_set_outputs(air_graph *g, const air_value *values, int n)
{
	if (!g || n < 0 || (n > 0 && !values))
		return air_error(AIR_INVALID_ARGUMENT, "air_graph_set_outputs: bad argument");
	for (int i = 0; i < n; i++)
		if (values[i] >= (air_value)g->n_values)
			return air_error(AIR_INVALID_ARGUMENT, "air_graph_set_outputs: output %d is not a value", i);
	air_value *copy = malloc(sizeof *copy * (size_t)(n ? n : 1));
	if (!copy)
		return air_error(AIR_OUT_OF_MEMORY, "air_graph_set_outputs: no memory");
	if (n)
		memcpy(copy, values, sizeof *copy * (size_t)n);
	free(g->outputs);
	g->outputs = copy;
	g->n_outputs = n;
	return AIR_OK;
}

air_status air_graph_value_info(const air_graph *g, air_value v, air_dtype *dtype, int *rank, air_dim *dims)
{
	if (!g || v >= (air_value)g->n_values)
		return air_error(AIR_INVALID_ARGUMENT, "air_graph_value_info: unknown value");
	const ir_value *x = &g->values[v];
	if (dtype)
		*dtype = x->dtype;
	if (rank)
		*rank = x->rank;
	if (dims)
		for (int i = 0; i < x->rank; i++)
			dims[i] = x->dims[i];
	return AIR_OK;
}

static air_status dup_array(void **dst, const void *src, size_t bytes)
{
	*dst = NULL;
	if (!src || bytes == 0)
		return AIR_OK;
	*dst = malloc(bytes);
	if (!*dst)
		return air_error(AIR_OUT_OF_MEMORY, "graph clone: no memory");
	memcpy(*dst, src, bytes);
	return AIR_OK;
}

air_status ir_graph_clone(const air_graph *s, air_graph **out)
{
	*out = NULL;
	air_graph *g;
	AIR_TRY(air_graph_create(&g));
	air_status st;
#define DUP(field, count) \
	if ((st = dup_array((void **)&g->field, s->field, sizeof *s->field * (size_t)(count))) != AIR_OK) goto fail
	DUP(values, s->n_values);
	g->n_values = g->cap_values = s->n_values;
	DUP(exprs, s->n_exprs);
	g->n_exprs = g->cap_exprs = s->n_exprs;
	DUP(inputs, s->n_inputs);
	g->cap_inputs = s->n_inputs;
	DUP(outputs, s->n_outputs);
	g->n_outputs = s->n_outputs;
	g->input_names = calloc((size_t)s->n_inputs + 1, sizeof(char *));
	g->symbol_names = calloc((size_t)s->n_symbols + 1, sizeof(char *));
	g->nodes = calloc((size_t)s->n_nodes + 1, sizeof *g->nodes);
	g->consts = calloc((size_t)s->n_consts + 1, sizeof *g->consts);
	if (!g->input_names || !g->symbol_names || !g->nodes || !g->consts)
		goto oom;
	for (; g->n_inputs < s->n_inputs; g->n_inputs++)
		if (s->input_names[g->n_inputs] &&
		    !(g->input_names[g->n_inputs] = strdup(s->input_names[g->n_inputs])))
			goto oom;
	g->cap_symbols = s->n_symbols + 1;
	for (; g->n_symbols < s->n_symbols; g->n_symbols++)
		if (!(g->symbol_names[g->n_symbols] = strdup(s->symbol_names[g->n_symbols])))
			goto oom;
	g->cap_nodes = s->n_nodes + 1;
	for (; g->n_nodes < s->n_nodes; g->n_nodes++) {
		const ir_node *a = &s->nodes[g->n_nodes];
		ir_node *b = &g->nodes[g->n_nodes];
		*b = *a;
		b->in = NULL;
		b->out = NULL;
		for (int k = 0; k < IR_MAX_ATTRS; k++)
			b->attrs[k].ints = NULL;
		if ((st = dup_array((void **)&b->in, a->in, sizeof(air_value) * (size_t)a->n_in)) != AIR_OK ||
		    (st = dup_array((void **)&b->out, a->out, sizeof(air_value) * (size_t)a->n_out)) != AIR_OK)
			goto fail_node;
		for (int k = 0; k < IR_MAX_ATTRS; k++)
			if ((st = dup_array((void **)&b->attrs[k].ints, a->attrs[k].ints,
					    sizeof(int64_t) * (size_t)a->attrs[k].n)) != AIR_OK)
				goto fail_node;
		continue;
	fail_node:
		g->n_nodes++; /* so destroy frees the partial node */
		goto fail;
	}
	g->cap_consts = s->n_consts + 1;
	for (; g->n_consts < s->n_consts; g->n_consts++) {
		const ir_constant *a = &s->consts[g->n_consts];
		ir_constant *b = &g->consts[g->n_consts];
		*b = *a;
		b->owned = NULL;
		b->row_scale = NULL;
		if (a->row_scale) {
			size_t n = sizeof(double) * (size_t)s->values[a->value].dims[0];
			b->row_scale = malloc(n ? n : 1);
			if (!b->row_scale) {
				b->row_base = NULL;
				goto oom;
			}
			memcpy(b->row_scale, a->row_scale, n);
		}
		if (a->owned) {
			/* the copy owns its own bytes, so graph and model live apart */
			b->owned = malloc(a->nbytes ? a->nbytes : 1);
			if (!b->owned) {
				free(b->row_scale);
				goto oom;
			}
			memcpy(b->owned, a->owned, a->nbytes);
			b->data = b->owned;
		}
	}
#undef DUP
	*out = g;
	return AIR_OK;
oom:
	st = air_error(AIR_OUT_OF_MEMORY, "graph clone: no memory");
fail:
	air_graph_destroy(g);
	return st;
}

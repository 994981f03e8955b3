/* session.c - per-call state: bound inputs and outputs, shapes resolved for
 * the current input sizes (cached until they change), the arena laid out by
 * the memory plan, and the executor that runs every step in one call. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "ops/op.h"
#include "plan/arena.h"
#include "plan/memplan.h"
#include "platform/bigmem.h"
#include "runtime/model.h"

struct air_session {
	const air_model *m;
	int n_in, n_out;
	const void **in_data;
	int *in_rank;
	int64_t (*in_dims)[AIR_MAX_RANK];
	bool *in_set;
	void **out_data;
	size_t *out_bytes;
	bool *out_set;
	bool resolved;       /* vals/attrs/plan match the bound input sizes */
	int64_t *sym;        /* symbol values */
	k_tensor *vals;      /* per value: concrete dims; data set per run */
	k_attr *attrs;       /* per node, IR_MAX_ATTRS each, resolved */
	int64_t *attr_ints;  /* storage for resolved DIMS attributes */
	size_t n_attr_ints;
	int64_t *offsets;    /* per value: arena offset, or -1 */
	int *inplace;        /* per step: the input its output is written over, or -1 */
	size_t *value_bytes; /* per value, for the current shapes */
	air_memory_info mem; /* the plan of the current shapes */
	size_t ws_offset, ws_size;
	void *arena;
	size_t arena_bytes, arena_cap;
	k_tensor *tensors;   /* per step: its inputs then outputs, refreshed per run */
	int *tensor_base;    /* per step: index of its first tensor */
	bool *in_const;      /* parallel to tensors */
	uint64_t *step_ns;   /* per step: time spent in all runs */
	uint64_t *step_runs; /* per step: runs timed */
};

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void air_session_destroy(air_session *s)
{
	if (!s)
		return;
	free(s->step_ns);
	free(s->step_runs);
	free(s->in_data);
	free(s->in_rank);
	free(s->in_dims);
	free(s->in_set);
	free(s->out_data);
	free(s->out_bytes);
	free(s->out_set);
	free(s->sym);
	free(s->vals);
	free(s->attrs);
	free(s->attr_ints);
	free(s->offsets);
	free(s->inplace);
	free(s->value_bytes);
	free(s->arena);
	free(s->tensors);
	free(s->tensor_base);
	free(s->in_const);
	free(s);
}

air_status air_session_create(const air_model *m, air_session **out)
{
	if (!out)
		return air_error(AIR_INVALID_ARGUMENT, "air_session_create: out is NULL");
	*out = NULL;
	if (!m)
		return air_error(AIR_INVALID_ARGUMENT, "air_session_create: model is NULL");
	const air_graph *g = m->g;
	air_session *s = calloc(1, sizeof *s);
	if (!s)
		return air_error(AIR_OUT_OF_MEMORY, "air_session_create: no memory");
	s->m = m;
	s->n_in = g->n_inputs;
	s->n_out = g->n_outputs;
	size_t nv = (size_t)g->n_values + 1, nn = (size_t)g->n_nodes + 1;
	s->in_data = calloc((size_t)s->n_in + 1, sizeof *s->in_data);
	s->in_rank = calloc((size_t)s->n_in + 1, sizeof *s->in_rank);
	s->in_dims = calloc((size_t)s->n_in + 1, sizeof *s->in_dims);
	s->in_set = calloc((size_t)s->n_in + 1, sizeof *s->in_set);
	s->out_data = calloc((size_t)s->n_out + 1, sizeof *s->out_data);
	s->out_bytes = calloc((size_t)s->n_out + 1, sizeof *s->out_bytes);
	s->out_set = calloc((size_t)s->n_out + 1, sizeof *s->out_set);
	s->sym = calloc((size_t)g->n_symbols + 1, sizeof *s->sym);
	s->vals = calloc(nv, sizeof *s->vals);
	s->attrs = calloc(nn * IR_MAX_ATTRS, sizeof *s->attrs);
	s->offsets = calloc(nv, sizeof *s->offsets);
	s->inplace = calloc((size_t)m->n_steps + 1, sizeof *s->inplace);
	s->value_bytes = calloc(nv, sizeof *s->value_bytes);
	s->tensor_base = calloc((size_t)m->n_steps + 1, sizeof *s->tensor_base);
	s->step_ns = calloc((size_t)m->n_steps + 1, sizeof *s->step_ns);
	s->step_runs = calloc((size_t)m->n_steps + 1, sizeof *s->step_runs);
	size_t nt = 0;
	for (int k = 0; k < m->n_steps; k++) {
		const ir_node *n = &g->nodes[m->steps[k].node];
		nt += (size_t)(n->n_in + n->n_out);
		for (int a = 0; a < IR_MAX_ATTRS; a++)
			s->n_attr_ints += (size_t)n->attrs[a].n;
	}
	s->tensors = calloc(nt + 1, sizeof *s->tensors);
	s->in_const = calloc(nt + 1, sizeof *s->in_const);
	s->attr_ints = calloc(s->n_attr_ints + 1, sizeof *s->attr_ints);
	if (!s->in_data || !s->in_rank || !s->in_dims || !s->in_set || !s->out_data || !s->out_bytes ||
	    !s->out_set || !s->sym || !s->vals || !s->attrs || !s->offsets || !s->inplace || !s->value_bytes ||
	    !s->tensor_base || !s->tensors || !s->in_const || !s->attr_ints || !s->step_ns || !s->step_runs) {
		air_session_destroy(s);
		return air_error(AIR_OUT_OF_MEMORY, "air_session_create: no memory");
	}
	size_t t = 0;
	for (int k = 0; k < m->n_steps; k++) {
		const ir_node *n = &g->nodes[m->steps[k].node];
		s->tensor_base[k] = (int)t;
		for (int i = 0; i < n->n_in; i++)
			s->in_const[t + (size_t)i] = g->values[n->in[i]].kind == IR_CONSTANT;
		t += (size_t)(n->n_in + n->n_out);
	}
	/* constants never move: their data pointers are set once */
	for (int c = 0; c < g->n_consts; c++)
		s->vals[g->consts[c].value].data = (void *)g->consts[c].data;
	*out = s;
	return AIR_OK;
}

air_status air_session_set_input(air_session *s, int i, const void *data, int rank, const int64_t *dims)
{
	if (!s || i < 0 || i >= s->n_in)
		return air_error(AIR_INVALID_ARGUMENT, "air_session_set_input: no input %d", i);
	const ir_value *v = &s->m->g->values[s->m->g->inputs[i]];
	if (rank != v->rank)
		return air_error(AIR_SHAPE_MISMATCH, "input %d: expected rank %d, got %d", i, v->rank, rank);
	if (rank > 0 && !dims)
		return air_error(AIR_INVALID_ARGUMENT, "input %d: dims is NULL", i);
	int64_t numel = 1;
	for (int d = 0; d < rank; d++) {
		if (dims[d] < 0)
			return air_error(AIR_SHAPE_MISMATCH, "input %d: negative size at dim %d", i, d);
		if (__builtin_mul_overflow(numel, dims[d], &numel))
			return air_error(AIR_SHAPE_MISMATCH, "input %d: too many elements", i);
	}
	if (numel > 0 && !data)
		return air_error(AIR_INVALID_ARGUMENT, "input %d: data is NULL", i);
	s->in_data[i] = data;
	/* a 0-d input may come with dims == NULL, which memcmp/memcpy must
	 * not see even for 0 bytes */
	size_t dims_bytes = sizeof(int64_t) * (size_t)rank;
	if (!s->in_set[i] || s->in_rank[i] != rank || (rank > 0 && memcmp(s->in_dims[i], dims, dims_bytes)))
		s->resolved = false;
	s->in_rank[i] = rank;
	if (rank > 0)
		memcpy(s->in_dims[i], dims, dims_bytes);
	s->in_set[i] = true;
	return AIR_OK;
}

/* Binds symbols from the input sizes and checks every input dim. */
static air_status bind_symbols(air_session *s)
{
	const air_graph *g = s->m->g;
	char *bound = calloc((size_t)g->n_symbols + 1, 1);
	if (!bound)
		return air_error(AIR_OUT_OF_MEMORY, "session: no memory");
	for (int i = 0; i < s->n_in; i++) {
		const ir_value *v = &g->values[g->inputs[i]];
		for (int d = 0; d < v->rank; d++) {
			air_dim dim = v->dims[d];
			if (dim < 0 && g->exprs[-dim - 1].kind == IR_EXPR_SYMBOL) {
				int sym = g->exprs[-dim - 1].symbol;
				if (!bound[sym]) {
					bound[sym] = 1;
					s->sym[sym] = s->in_dims[i][d];
				}
			}
		}
	}
	free(bound);
	for (int i = 0; i < s->n_in; i++) {
		const ir_value *v = &g->values[g->inputs[i]];
		for (int d = 0; d < v->rank; d++) {
			int64_t want;
			AIR_TRY(ir_dim_eval(g, v->dims[d], s->sym, &want));
			if (want != s->in_dims[i][d]) {
				char buf[128];
				air_graph_dim_string(g, v->dims[d], buf, sizeof buf);
				return air_error(AIR_SHAPE_MISMATCH,
						 "input %d: size %lld at dim %d, but the model needs %s = %lld", i,
						 (long long)s->in_dims[i][d], d, buf, (long long)want);
			}
		}
	}
	return AIR_OK;
}

/* Resolves every shape and attribute for the bound input sizes and lays out
 * the arena (offsets, workspace) without allocating it. */
/* Step k's call as the session's values stand: its tensors (inputs, then
 * outputs) filled in from s->vals, and the given workspace. */
static k_call step_call(air_session *s, int k, void *workspace)
{
	const air_model *m = s->m;
	const rt_step *step = &m->steps[k];
	const ir_node *n = &m->g->nodes[step->node];
	k_tensor *t = &s->tensors[s->tensor_base[k]];
	for (int i = 0; i < n->n_in; i++)
		t[i] = s->vals[n->in[i]];
	for (int o = 0; o < n->n_out; o++)
		t[n->n_in + o] = s->vals[n->out[o]];
	return (k_call){.attrs = &s->attrs[(size_t)step->node * IR_MAX_ATTRS],
			.in = t,
			.n_in = n->n_in,
			.out = t + n->n_in,
			.n_out = n->n_out,
			.pool = m->pool,
			.workspace = workspace,
			.prepared = step->prepared,
			.in_const = &s->in_const[s->tensor_base[k]]};
}

static air_status plan(air_session *s)
{
	const air_model *m = s->m;
	const air_graph *g = m->g;
	for (int i = 0; i < s->n_in; i++)
		if (!s->in_set[i])
			return air_error(AIR_INVALID_STATE, "input %d is not set", i);
	AIR_TRY(bind_symbols(s));
	for (int v = 0; v < g->n_values; v++) {
		const ir_value *x = &g->values[v];
		k_tensor *t = &s->vals[v];
		t->dtype = x->dtype;
		t->rank = x->rank;
		t->numel = 1;
		for (int d = 0; d < x->rank; d++) {
			AIR_TRY(ir_dim_eval(g, x->dims[d], s->sym, &t->dims[d]));
			/* sizes may come from a damaged file or huge inputs: an
			 * overflow is an error, not a wrapped size */
			if (__builtin_mul_overflow(t->numel, t->dims[d], &t->numel) ||
			    t->numel > (int64_t)(PTRDIFF_MAX / 16))
				return air_error(AIR_SHAPE_MISMATCH, "value %d has too many elements", v);
		}
	}
	/* an alias (reshape) views its input's memory in the output's shape;
	 * with symbolic sizes, only now can their element counts be compared */
	for (int k = 0; k < g->n_nodes; k++) {
		const ir_node *n = &g->nodes[k];
		if ((op_get(n->op)->flags & OPF_ALIAS) && s->vals[n->out[0]].numel != s->vals[n->in[0]].numel)
			return air_error(AIR_SHAPE_MISMATCH, "node %d (%s): %lld elements cannot be viewed as %lld", k,
					 op_get(n->op)->name, (long long)s->vals[n->in[0]].numel,
					 (long long)s->vals[n->out[0]].numel);
	}
	size_t used = 0;
	for (int k = 0; k < g->n_nodes; k++) {
		const ir_node *n = &g->nodes[k];
		const op_def *def = op_get(n->op);
		k_attr *a = &s->attrs[(size_t)k * IR_MAX_ATTRS];
		for (int j = 0; j < IR_MAX_ATTRS; j++) {
			a[j].i = n->attrs[j].i;
			a[j].f = n->attrs[j].f;
			a[j].ints = n->attrs[j].ints;
			a[j].n = n->attrs[j].n;
			if (j >= def->n_attrs)
				continue;
			if (def->attrs[j].type == OPA_DIM)
				AIR_TRY(ir_dim_eval(g, n->attrs[j].i, s->sym, &a[j].i));
			if (def->attrs[j].type == OPA_DIMS) {
				int64_t *dst = s->attr_ints + used;
				for (int e = 0; e < n->attrs[j].n; e++)
					AIR_TRY(ir_dim_eval(g, n->attrs[j].ints[e], s->sym, &dst[e]));
				a[j].ints = dst;
				used += (size_t)n->attrs[j].n;
			}
		}
	}
	/* the arena: lifetimes, in-place steps and offsets (plan/arena.c) */
	for (int v = 0; v < g->n_values; v++)
		s->value_bytes[v] = (size_t)s->vals[v].numel * air_dtype_size(g->values[v].dtype);
	mp_arena ar = {s->offsets, s->inplace, 0, 0, 0, 0};
	const mp_program prog = rt_program(m);
	AIR_TRY(mp_plan_program(&prog, s->value_bytes, !(m->flags & AIR_COMPILE_NO_MEMORY_REUSE), &ar));
	size_t total = ar.bytes;
	/* one workspace region shared by all steps: they run one at a time */
	size_t ws = 0;
	int nthreads = rt_pool_size(m->pool);
	for (int k = 0; k < m->n_steps; k++) {
		const rt_step *step = &m->steps[k];
		if (!step->kernel->workspace || step->alias)
			continue;
		k_call call = step_call(s, k, NULL);
		size_t w = step->kernel->workspace(&call, nthreads);
		if (w > ws)
			ws = w;
	}
	s->ws_offset = mp_align(total);
	s->ws_size = ws;
	s->mem = (air_memory_info){sizeof s->mem, 1, ar.n_buffers, ar.n_inplace, total, ws,
				   ar.no_reuse_bytes, m->mem.weight_bytes, m->mem.borrowed_bytes};
	return AIR_OK;
}

/* Plans (shapes, arena layout, workspace) and allocates the arena. */
static air_status resolve(air_session *s)
{
	const air_model *m = s->m;
	AIR_TRY(plan(s));
	size_t need = s->ws_offset + s->ws_size;
	if (need > s->arena_cap) {
		free(s->arena);
		s->arena = NULL;
		s->arena_cap = 0;
		s->arena = rt_big_alloc(need ? need : MP_ALIGN, MP_ALIGN);
		if (!s->arena) {
			return air_error(AIR_OUT_OF_MEMORY, "session: no memory for an arena of %zu bytes", need);
		}
		s->arena_cap = need;
	}
	s->arena_bytes = need;
	s->resolved = true;
	/* with symbolic sizes the model's report has no plan: the first
	 * session to get here lends it its own (the model stays shareable:
	 * written once, read only after the release store) */
	if (!m->mem_static) {
		air_model *mm = (air_model *)m;
		int expected = 0;
		if (atomic_compare_exchange_strong(&mm->run_mem_state, &expected, 1)) {
			mm->run_mem = s->mem;
			atomic_store_explicit(&mm->run_mem_state, 2, memory_order_release);
		}
	}
	return AIR_OK;
}

air_status rt_static_memory(const air_model *m, air_memory_info *info, int *inplace)
{
	const air_graph *g = m->g;
	air_session *s;
	AIR_TRY(air_session_create(m, &s));
	for (int i = 0; i < s->n_in; i++) {
		const ir_value *v = &g->values[g->inputs[i]];
		for (int d = 0; d < v->rank; d++)
			s->in_dims[i][d] = v->dims[d];
		s->in_rank[i] = v->rank;
		s->in_set[i] = true;
	}
	air_status st = plan(s);
	if (st == AIR_OK) {
		*info = s->mem;
		if (inplace)
			memcpy(inplace, s->inplace, sizeof *inplace * (size_t)m->n_steps);
	}
	air_session_destroy(s);
	return st;
}

air_status air_session_memory_info(const air_session *s, air_memory_info *info)
{
	if (!s || !info || info->size < sizeof *info)
		return air_error(AIR_INVALID_ARGUMENT, "air_session_memory_info: bad argument (set info->size)");
	if (!s->resolved)
		return air_error(AIR_INVALID_STATE, "air_session_memory_info: no sizes planned yet (run first)");
	*info = s->mem;
	return AIR_OK;
}

air_status air_session_output_shape(air_session *s, int i, int *rank, int64_t *dims)
{
	if (!s || i < 0 || i >= s->n_out || !rank || !dims)
		return air_error(AIR_INVALID_ARGUMENT, "air_session_output_shape: bad argument");
	if (!s->resolved)
		AIR_TRY(resolve(s));
	const k_tensor *t = &s->vals[s->m->g->outputs[i]];
	*rank = t->rank;
	memcpy(dims, t->dims, sizeof(int64_t) * (size_t)t->rank);
	return AIR_OK;
}

air_status air_session_set_output(air_session *s, int i, void *data, size_t nbytes)
{
	if (!s || i < 0 || i >= s->n_out)
		return air_error(AIR_INVALID_ARGUMENT, "air_session_set_output: no output %d", i);
	s->out_data[i] = data;
	s->out_bytes[i] = nbytes;
	s->out_set[i] = true;
	return AIR_OK;
}

size_t air_session_arena_bytes(const air_session *s)
{
	return s ? s->arena_bytes : 0;
}

air_status air_session_run(air_session *s)
{
	if (!s)
		return air_error(AIR_INVALID_ARGUMENT, "air_session_run: session is NULL");
	const air_model *m = s->m;
	const air_graph *g = m->g;
	if (!s->resolved)
		AIR_TRY(resolve(s));
	/* data pointers: inputs, the arena, outputs (first binding of a value
	 * wins; later duplicates are copied at the end), then aliases */
	for (int i = 0; i < s->n_in; i++)
		s->vals[g->inputs[i]].data = (void *)s->in_data[i];
	for (int v = 0; v < g->n_values; v++)
		if (s->offsets[v] >= 0)
			s->vals[v].data = (char *)s->arena + s->offsets[v];
	for (int i = 0; i < s->n_out; i++) {
		air_value v = g->outputs[i];
		size_t need = (size_t)s->vals[v].numel * air_dtype_size(s->vals[v].dtype);
		if (!s->out_set[i])
			return air_error(AIR_INVALID_STATE, "output %d is not bound", i);
		if (s->out_bytes[i] < need)
			return air_error(AIR_INVALID_ARGUMENT, "output %d: %zu bytes bound, %zu needed", i,
					 s->out_bytes[i], need);
		if (need > 0 && !s->out_data[i])
			return air_error(AIR_INVALID_ARGUMENT, "output %d: data is NULL", i);
	}
	for (int i = s->n_out - 1; i >= 0; i--) {
		air_value v = g->outputs[i];
		if (g->values[v].kind == IR_NODE_OUTPUT)
			s->vals[v].data = s->out_data[i];
		if (m->out_root[i] >= 0) /* computed into the buffer of its view */
			s->vals[m->out_root[i]].data = s->out_data[i];
	}
	for (int k = 0; k < m->n_steps; k++) {
		const rt_step *step = &m->steps[k];
		const ir_node *n = &g->nodes[step->node];
		if (step->alias) {
			s->vals[n->out[0]].data = s->vals[n->in[0]].data;
			continue;
		}
		k_call call = step_call(s, k, (char *)s->arena + s->ws_offset);
		uint64_t t0 = now_ns();
		air_status st = step->kernel->run(&call);
		s->step_ns[k] += now_ns() - t0;
		s->step_runs[k]++;
		if (st != AIR_OK)
			return air_error_context(st, "step %d (%s)", k, op_get(n->op)->name);
	}
	/* outputs that are inputs, constants, or repeated: copy */
	for (int i = 0; i < s->n_out; i++) {
		air_value v = g->outputs[i];
		const k_tensor *t = &s->vals[v];
		size_t bytes = (size_t)t->numel * air_dtype_size(t->dtype);
		if (t->data != s->out_data[i] && bytes)
			memcpy(s->out_data[i], t->data, bytes);
	}
	return AIR_OK;
}

void air_session_profile_reset(air_session *s)
{
	if (!s)
		return;
	memset(s->step_ns, 0, sizeof *s->step_ns * (size_t)(s->m->n_steps + 1));
	memset(s->step_runs, 0, sizeof *s->step_runs * (size_t)(s->m->n_steps + 1));
}

int air_session_profile_steps(const air_session *s)
{
	return s ? s->m->n_steps : 0;
}

air_status air_session_profile(const air_session *s, int step, const char **kernel, const char **op,
			       uint64_t *runs, double *seconds)
{
	if (!s || step < 0 || step >= s->m->n_steps)
		return air_error(AIR_INVALID_ARGUMENT, "air_session_profile: no step %d", step);
	const rt_step *st = &s->m->steps[step];
	if (kernel)
		*kernel = st->alias ? "alias" : st->kernel->name;
	if (op)
		*op = op_get(s->m->g->nodes[st->node].op)->name;
	if (runs)
		*runs = s->step_runs[step];
	if (seconds)
		*seconds = (double)s->step_ns[step] * 1e-9;
	return AIR_OK;
}

/* model.c - air_compile: the pipeline that turns a graph into a runnable
 * model, visible in one function (rt_compile): clone, verify, passes, kernel
 * choice, aliasing, report. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "core/error.h"
#include "core/log.h"
#include "kernels/common/cpu.h"
#include "ops/kernels.h"
#include "ops/op.h"
#include "passes/pass.h"
#include "runtime/model.h"

void air_compile_options_init(air_compile_options *o)
{
	if (!o)
		return;
	memset(o, 0, sizeof *o);
	o->size = sizeof *o;
}

void air_model_destroy(air_model *m)
{
	if (!m)
		return;
	for (int i = 0; m->steps && i < m->n_steps; i++) /* steps NULL: compile failed allocating them */
		if (m->steps[i].prepared && m->steps[i].kernel->release)
			m->steps[i].kernel->release(m->steps[i].prepared);
	free(m->steps);
	free(m->root);
	free(m->is_output);
	free(m->out_root);
	free(m->report);
	free(m->pass_log);
	free(m->autotune_cache);
	free(m->tune);
	rt_pool_destroy(m->own_pool);
	air_graph_destroy(m->g);
	air_graph_destroy(m->before);
	air_file_close(m->file); /* after the graph: its constants may point into the file */
	free(m);
}

/* A call describing node k as far as it is known at compile time: constant
 * inputs have data and dims; other dims are -1 where symbolic. */
static void compile_time_call(const air_graph *g, const ir_node *n, k_call *call, k_tensor *in, k_tensor *out,
			      k_attr *attrs, bool *in_const)
{
	memset(call, 0, sizeof *call);
	for (int i = 0; i < n->n_in; i++) {
		const ir_value *v = &g->values[n->in[i]];
		k_tensor *t = &in[i];
		memset(t, 0, sizeof *t);
		t->dtype = v->dtype;
		t->rank = v->rank;
		t->numel = 1;
		for (int d = 0; d < v->rank; d++) {
			t->dims[d] = v->dims[d] >= 0 ? v->dims[d] : -1;
			t->numel = (t->numel < 0 || t->dims[d] < 0) ? -1 : t->numel * t->dims[d];
		}
		in_const[i] = v->kind == IR_CONSTANT;
		if (in_const[i])
			t->data = (void *)g->consts[v->index].data;
	}
	for (int o = 0; o < n->n_out; o++) {
		const ir_value *v = &g->values[n->out[o]];
		k_tensor *t = &out[o];
		memset(t, 0, sizeof *t);
		t->dtype = v->dtype;
		t->rank = v->rank;
		t->numel = 1;
		for (int d = 0; d < v->rank; d++) {
			t->dims[d] = v->dims[d] >= 0 ? v->dims[d] : -1;
			t->numel = (t->numel < 0 || t->dims[d] < 0) ? -1 : t->numel * t->dims[d];
		}
	}
	for (int a = 0; a < IR_MAX_ATTRS; a++) {
		attrs[a].i = n->attrs[a].i;
		attrs[a].f = n->attrs[a].f;
		attrs[a].ints = n->attrs[a].ints;
		attrs[a].n = n->attrs[a].n;
	}
	call->attrs = attrs;
	call->in = in;
	call->n_in = n->n_in;
	call->out = out;
	call->n_out = n->n_out;
	call->in_const = in_const;
}

/* Where each constant input of node n can be rebuilt from (k_const_source). */
static void const_sources(const air_graph *g, const ir_node *n, k_const_source *src)
{
	for (int i = 0; i < n->n_in; i++) {
		const ir_value *v = &g->values[n->in[i]];
		src[i] = (k_const_source){NULL, NULL};
		if (v->kind != IR_CONSTANT || v->dtype != AIR_F32)
			continue;
		const ir_constant *k = &g->consts[v->index];
		if (k->row_base)
			src[i] = (k_const_source){k->row_base, k->row_scale};
		else if (!k->owned)
			src[i].base = k->data;
	}
}

/* Owned constants (folded or computed by passes) that every reader reads
 * only through its kernel's packed copy are freed: holding both would keep
 * the weights twice (for ResNet-50: 90 MiB of batch-norm-folded conv
 * weights beside their packed form). Called right after step `last` was
 * prepared, for the constants that step reads, so a constant goes as soon as
 * its last reader has packed it and the compile's own peak stays low.
 * Borrowed constants are the caller's memory and stay. */
static void release_packed_constants(air_model *m, int last)
{
	air_graph *g = m->g;
	const ir_node *ln = &g->nodes[m->steps[last].node];
	for (int li = 0; li < ln->n_in; li++) {
		const ir_value *v = &g->values[ln->in[li]];
		if (v->kind != IR_CONSTANT)
			continue;
		ir_constant *k = &g->consts[v->index];
		if (!k->owned || k->released)
			continue;
		bool packed_only = true;
		for (int s = 0; s < m->n_steps && packed_only; s++) {
			const ir_node *n = &g->nodes[m->steps[s].node];
			for (int i = 0; i < n->n_in && packed_only; i++) {
				if (n->in[i] != k->value)
					continue;
				/* a later reader is not prepared yet: wait for it */
				if (s > last || !m->steps[s].prepared ||
				    !kreg_prepared_replaces_input(m->steps[s].kernel, i))
					packed_only = false;
			}
		}
		for (int o = 0; o < g->n_outputs; o++)
			if (g->outputs[o] == k->value)
				packed_only = false;
		if (!packed_only)
			continue;
		free(k->owned);
		k->owned = NULL;
		k->data = NULL;
		k->released = true;
	}
}

static air_status choose_kernels(air_model *m)
{
	air_graph *g = m->g;
	unsigned isa = kcpu_features();
	k_attr attrs[IR_MAX_ATTRS];
	bool in_const[OP_MAX_IN];
	for (int s = 0; s < m->n_steps; s++) {
		rt_step *st = &m->steps[s];
		const ir_node *n = &g->nodes[st->node];
		const op_def *def = op_get(n->op);
		st->kernel = &def->ref;
		if (m->flags & AIR_COMPILE_REFERENCE_KERNELS)
			continue;
		k_call call;
		k_tensor tin[OP_MAX_IN], tout[OP_MAX_OUT];
		k_const_source src[OP_MAX_IN];
		compile_time_call(g, n, &call, tin, tout, attrs, in_const);
		const_sources(g, n, src);
		call.in_source = src;
		call.low_memory = !(m->flags & AIR_COMPILE_NO_MEMORY_REUSE);
		call.weights_in_place = call.low_memory && (m->flags & AIR_COMPILE_WEIGHTS_IN_PLACE);
		const k_kernel *cand[RT_TUNE_MAX];
		int ncand = 0;
		for (const k_kernel *const *k = kreg_fast_kernels(n->op); *k && ncand < RT_TUNE_MAX; k++) {
			if (((*k)->isa & isa) != (*k)->isa)
				continue;
			if ((*k)->supports && !(*k)->supports(&call))
				continue;
			cand[ncand++] = *k;
			if (!m->tune)
				break; /* the default rule: the first that accepts */
		}
		if (ncand)
			st->kernel = cand[0];
		if (m->tune && ncand > 1) {
			AIR_TRY(rt_autotune_step(m, s, &call, cand, ncand, &m->tune[s]));
			st->kernel = cand[m->tune[s].chosen];
		}
		if (st->kernel->prepare) {
			call.pool = m->pool;
			air_status r = st->kernel->prepare(&call, &st->prepared);
			if (r != AIR_OK)
				return air_error_context(r, "preparing %s for node %d", st->kernel->name, st->node);
			release_packed_constants(m, s);
		}
	}
	return AIR_OK;
}

/* The first graph output that is exactly v. */
static int output_index(const air_graph *g, air_value v)
{
	for (int i = 0; i < g->n_outputs; i++)
		if (g->outputs[i] == v)
			return i;
	return -1;
}

/* Which values share memory: an alias op's output uses its input's root.
 * When the alias is a graph output, the caller's buffer holds it: if its
 * root is computed by this graph and no other output holds that, the root
 * is computed straight into the output's buffer (out_root; a training
 * graph returns many reshapes of what it computes, for the backward, and
 * each was a copy); otherwise the step copies. */
static air_status plan_aliases(air_model *m)
{
	air_graph *g = m->g;
	m->root = malloc(sizeof *m->root * (size_t)(g->n_values + 1));
	m->is_output = calloc((size_t)g->n_values + 1, sizeof *m->is_output);
	m->out_root = malloc(sizeof *m->out_root * (size_t)(g->n_outputs + 1));
	if (!m->root || !m->is_output || !m->out_root)
		return air_error(AIR_OUT_OF_MEMORY, "compile: no memory");
	for (int v = 0; v < g->n_values; v++)
		m->root[v] = v;
	for (int i = 0; i < g->n_outputs; i++) {
		m->is_output[g->outputs[i]] = true;
		m->out_root[i] = -1;
	}
	for (int s = 0; s < m->n_steps; s++) {
		rt_step *st = &m->steps[s];
		const ir_node *n = &g->nodes[st->node];
		if (!(op_get(n->op)->flags & OPF_ALIAS))
			continue;
		air_value v = n->out[0];
		int32_t r = m->root[n->in[0]];
		if (m->is_output[v]) {
			if (g->values[r].kind != IR_NODE_OUTPUT || m->is_output[r])
				continue; /* an input, a constant, or another output's: copy */
			m->out_root[output_index(g, v)] = r;
			m->is_output[r] = true;
		}
		st->alias = true;
		m->root[v] = r;
	}
	return AIR_OK;
}

/* Compiling frees many megabytes in the middle of the heap: every folded
 * weight goes once its packed copy exists (release_packed_constants), and
 * the packed copies were allocated between them. glibc keeps such holes
 * resident (after the first large free it also raises its mmap threshold,
 * so the later weights come from the heap too), which cost ResNet-50 at
 * batch 16 about 12 MB of resident memory for nothing. malloc_trim hands
 * the free pages back; it takes a few milliseconds, once per compile. */
static void give_back_freed_memory(void)
{
#if defined(__GLIBC__)
	malloc_trim(0);
#endif
}

static uint64_t model_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int air_model_compile_phases(const air_model *m)
{
	return m ? m->n_phases : 0;
}

air_status air_model_compile_phase(const air_model *m, int i, const char **name, uint64_t *start_ns, uint64_t *dur_ns)
{
	if (!m || i < 0 || i >= m->n_phases)
		return air_error(AIR_INVALID_ARGUMENT, "air_model_compile_phase: no phase %d", i);
	if (name)
		*name = m->phases[i].name;
	if (start_ns)
		*start_ns = m->phases[i].start_ns;
	if (dur_ns)
		*dur_ns = m->phases[i].dur_ns;
	return AIR_OK;
}

static air_status rt_compile(const air_graph *graph, const air_compile_options *o, air_model *m)
{
	uint64_t start = model_now_ns();
	AIR_TRY(ir_graph_clone(graph, &m->g));
	AIR_TRY(air_graph_verify(m->g));
	AIR_TRY(rt_keep_graph_before(m)); /* for the report and DOT (runtime/dot.c) */
	/* passes: each graph -> graph, verified after, each logging what it
	 * changed for the report (passes/pipeline.c) */
	pass_log log = {0};
	pass_options po = {o->flags, o->disabled_passes, o->fusion_threshold};
	air_status st = pass_run_pipeline(m->g, &po, &log);
	m->pass_log = log.buf;
	for (int i = 0; i < log.n_times; i++)
		m->phases[m->n_phases++] = log.times[i];
	AIR_TRY(st);
	m->n_steps = m->g->n_nodes;
	m->steps = calloc((size_t)m->n_steps + 1, sizeof *m->steps);
	if (!m->steps)
		return air_error(AIR_OUT_OF_MEMORY, "compile: no memory");
	for (int s = 0; s < m->n_steps; s++)
		m->steps[s].node = s;
	if (o->num_threads > 0) {
		AIR_TRY(rt_pool_create(o->num_threads, &m->own_pool));
		m->pool = m->own_pool;
	} else {
		m->pool = rt_pool_default();
	}
	if ((o->flags & AIR_COMPILE_AUTOTUNE) && !(o->flags & AIR_COMPILE_REFERENCE_KERNELS)) {
		m->tune = calloc((size_t)m->n_steps + 1, sizeof *m->tune);
		if (!m->tune)
			return air_error(AIR_OUT_OF_MEMORY, "compile: no memory");
		if (o->autotune_cache && !(m->autotune_cache = strdup(o->autotune_cache)))
			return air_error(AIR_OUT_OF_MEMORY, "compile: no memory");
	}
	uint64_t t0 = model_now_ns();
	AIR_TRY(choose_kernels(m));
	uint64_t t1 = model_now_ns();
	m->phases[m->n_phases++] = (pass_time){"kernel selection", t0, t1 - t0};
	AIR_TRY(plan_aliases(m));
	m->phases[m->n_phases++] = (pass_time){"memory plan", t1, model_now_ns() - t1};
	if (air_log_enabled(AIR_LOG_DEBUG))
		for (int s = 0; s < m->n_steps; s++)
			air_log(AIR_LOG_DEBUG, "step %d: %s -> kernel %s", s, op_get(m->g->nodes[m->steps[s].node].op)->name,
				m->steps[s].kernel->name);
	AIR_TRY(rt_model_report(m));
	air_log(AIR_LOG_INFO, "compiled %d nodes into %d steps (%d threads) in %.3f ms", graph->n_nodes, m->n_steps,
		rt_pool_size(m->pool), (model_now_ns() - start) * 1e-6);
	give_back_freed_memory();
	return AIR_OK;
}

air_status air_compile(const air_graph *graph, const air_compile_options *options, air_model **out)
{
	if (!out)
		return air_error(AIR_INVALID_ARGUMENT, "air_compile: out is NULL");
	*out = NULL;
	if (!graph)
		return air_error(AIR_INVALID_ARGUMENT, "air_compile: graph is NULL");
	air_compile_options o;
	air_compile_options_init(&o);
	if (options) {
		if (options->size < offsetof(air_compile_options, fusion_threshold) + sizeof(int) ||
		    options->size > 4096)
			return air_error(AIR_INVALID_ARGUMENT, "air_compile: options.size is %zu; call "
							       "air_compile_options_init",
					 options->size);
		memcpy(&o, options, sizeof o < options->size ? sizeof o : options->size);
	}
	if (o.num_threads < 0 || o.num_threads > 1024)
		return air_error(AIR_INVALID_ARGUMENT, "air_compile: num_threads %d is outside [0, 1024]",
				 o.num_threads);
	if (o.fusion_threshold < 0)
		return air_error(AIR_INVALID_ARGUMENT, "air_compile: fusion_threshold is negative");
	air_model *m = calloc(1, sizeof *m);
	if (!m)
		return air_error(AIR_OUT_OF_MEMORY, "air_compile: no memory");
	m->flags = o.flags;
	air_status st = rt_compile(graph, &o, m);
	if (st != AIR_OK) {
		air_model_destroy(m);
		return st;
	}
	*out = m;
	return AIR_OK;
}

int air_model_input_count(const air_model *m)
{
	return m ? m->g->n_inputs : 0;
}

int air_model_output_count(const air_model *m)
{
	return m ? m->g->n_outputs : 0;
}

air_status air_model_input_info(const air_model *m, int i, air_dtype *dtype, int *rank, air_dim *dims)
{
	if (!m || i < 0 || i >= m->g->n_inputs)
		return air_error(AIR_INVALID_ARGUMENT, "air_model_input_info: no input %d", i);
	return air_graph_value_info(m->g, m->g->inputs[i], dtype, rank, dims);
}

air_status air_model_output_info(const air_model *m, int i, air_dtype *dtype, int *rank, air_dim *dims)
{
	if (!m || i < 0 || i >= m->g->n_outputs)
		return air_error(AIR_INVALID_ARGUMENT, "air_model_output_info: no output %d", i);
	return air_graph_value_info(m->g, m->g->outputs[i], dtype, rank, dims);
}

const char *air_model_report(const air_model *m)
{
	return m && m->report ? m->report : "";
}

air_status air_set_num_threads(int n)
{
	return rt_pool_set_default_threads(n);
}

int air_get_num_threads(void)
{
	return rt_pool_size(rt_pool_default());
}

/* report.c - the compile report: ops before and after the passes, each
 * pass's log, fused groups with their members, the kernel of every step,
 * and the memory plan (activations planned vs without reuse, in-place steps,
 * weight bytes the model holds). */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kernels/common/cpu.h"
#include "kernels/common/epilogue.h"
#include "kernels/conv/conv_nhwc.h"
#include "kernels/conv/conv_rows.h"
#include "kernels/elementwise/fused_ref.h"
#include "kernels/elementwise/fused_dag_ref.h"
#include "kernels/gemm/gemm.h"
#include "kernels/matmul/matmul_fast.h"
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

/* The names of the fused program's opcodes (kernels/elementwise/fused_ref.h order). */
static const char *const KF_NAMES[] = {
	"neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "erf", "relu", "gelu",
	"gelu_tanh", "silu", "hardswish", "hardsigmoid", "reciprocal", "add", "sub", "rsub", "mul", "div",
	"rdiv", "maximum", "minimum", "pow", "rpow",
};
_Static_assert(sizeof KF_NAMES / sizeof KF_NAMES[0] == KF_OPCODE_COUNT, "a name per fused opcode");

/* k_act names (kernels/common/epilogue.h order) */
static const char *const ACT_NAMES[] = {"none", "relu", "relu6", "gelu", "gelu_tanh", "silu",
					"sigmoid", "tanh", "hardswish"};

static const char *act_name(int64_t act)
{
	return act >= 0 && act < (int64_t)(sizeof ACT_NAMES / sizeof ACT_NAMES[0]) ? ACT_NAMES[act] : "act?";
}

/* "12.3 MiB" */
static void add_bytes(sbuf *s, size_t n)
{
	if (n >= (size_t)1 << 30)
		add(s, "%.2f GiB", (double)n / (1 << 30));
	else if (n >= (size_t)1 << 20)
		add(s, "%.2f MiB", (double)n / (1 << 20));
	else if (n >= 1024)
		add(s, "%.1f KiB", (double)n / 1024);
	else
		add(s, "%zu B", n);
	add(s, " (%zu bytes)", n);
}

/* One line of per-op counts of g ("add x3, conv2d x2, relu"), ops in table
 * order. */
static void add_op_counts(sbuf *s, const air_graph *g, const char *label)
{
	int counts[OP_COUNT] = {0};
	for (int k = 0; k < g->n_nodes; k++)
		if (g->nodes[k].op >= 0 && g->nodes[k].op < OP_COUNT)
			counts[g->nodes[k].op]++;
	add(s, "%s: %d:", label, g->n_nodes);
	const char *sep = " ";
	for (int op = 0; op < OP_COUNT; op++) {
		if (!counts[op])
			continue;
		add(s, "%s%s", sep, op_get(op)->name);
		if (counts[op] > 1)
			add(s, " x%d", counts[op]);
		sep = ", ";
	}
	add(s, "\n");
}

static int attr_index(const op_def *def, const char *name)
{
	for (int a = 0; a < def->n_attrs; a++)
		if (!strcmp(def->attrs[a].name, name))
			return a;
	return -1;
}

/* What a fused node does, or 0 if the node is not a fusion: the program of
 * a fused_elementwise node, the epilogue of a conv/GEMM. */
static int add_fused(sbuf *s, const ir_node *n)
{
	const op_def *def = op_get(n->op);
	if (n->op == OP_fused_elementwise) {
		const ir_attr *p = &n->attrs[0];
		add(s, "fused_elementwise (%d ops):", p->n / 2);
		for (int k = 0; k + 1 < p->n; k += 2) {
			int64_t op = p->ints[k];
			add(s, " %s", op >= 0 && op < KF_OPCODE_COUNT ? KF_NAMES[op] : "?");
			if (op >= KF_ADD_S && op < KF_OPCODE_COUNT) {
				uint32_t u = (uint32_t)p->ints[k + 1];
				float f;
				memcpy(&f, &u, 4);
				add(s, "(%g)", f);
			}
		}
		return 1;
	}
	if (n->op == OP_fused_dag) {
		/* its register program: inputs are r0.., instruction k writes
		 * r(n_in + k); the outputs' registers last */
		static const char *const names[] = {"const", "add", "sub", "mul", "div", "maximum", "minimum",
						    "pow", "eq", "ne", "lt", "le", "gt", "ge", "where"};
		const ir_attr *p = &n->attrs[0], *o = &n->attrs[1];
		add(s, "fused_dag (%d instructions, %d input(s), %d output(s)):", p->n / 4, n->n_in, n->n_out);
		for (int k = 0; k + 3 < p->n; k += 4) {
			int64_t op = p->ints[k];
			uint32_t u = (uint32_t)p->ints[k + (op == KD_CONST ? 1 : 2)];
			float f;
			memcpy(&f, &u, 4);
			if (op >= 0 && op < KF_OPCODE_COUNT) {
				add(s, " %s(r%lld", KF_NAMES[op], (long long)p->ints[k + 1]);
				if (op >= KF_ADD_S)
					add(s, ", %g", f);
				add(s, ")");
			} else if (op == KD_CONST) {
				add(s, " %g", f);
			} else if (op > KD_CONST && op < KD_OPCODE_END) {
				add(s, " %s(r%lld, r%lld", names[op - KD_CONST], (long long)p->ints[k + 1],
				    (long long)p->ints[k + 2]);
				if (op == KD_WHERE)
					add(s, ", r%lld", (long long)p->ints[k + 3]);
				add(s, ")");
			} else {
				add(s, " ?");
			}
		}
		add(s, " ->");
		for (int j = 0; j < o->n; j++)
			add(s, " r%lld", (long long)o->ints[j]);
		return 1;
	}
	int act = attr_index(def, "act"), res = attr_index(def, "has_residual");
	bool has_act = act >= 0 && n->attrs[act].set && n->attrs[act].i != K_ACT_NONE;
	bool has_res = res >= 0 && n->attrs[res].set && n->attrs[res].i != 0;
	if (!has_act && !has_res)
		return 0;
	add(s, "%s epilogue:", def->name);
	int bias = attr_index(def, "has_bias");
	if (bias >= 0) {
		int64_t b = n->attrs[bias].set ? n->attrs[bias].i : def->attrs[bias].def_i;
		if (b < 0 ? n->n_in - (has_res ? 1 : 0) > 2 : b != 0)
			add(s, " + bias");
	}
	if (has_res)
		add(s, " + residual");
	if (has_act)
		add(s, " -> %s", act_name(n->attrs[act].i));
	return 1;
}

int rt_fused_text(const ir_node *n, char *buf, size_t size)
{
	sbuf s = {0};
	int r = add_fused(&s, n) && !s.oom;
	if (size)
		snprintf(buf, size, "%s", r && s.buf ? s.buf : "");
	free(s.buf);
	return r;
}

/* Bytes of a step's prepared data: exact for the kernels whose data is one
 * packed GEMM operand; for other kernels that prepared something, estimated
 * as the bytes of the constant inputs it was prepared from (*estimated
 * counts those). k_kernel has no size hook: adding a field would touch
 * every kernel's positional initializer. *source: caller memory the kernel
 * reads on every call that no node reads (a conv re-packing its weight from
 * the module's parameter, which fold_batchnorm replaced in the graph). */
static size_t prepared_bytes(const air_model *m, const rt_step *st, int *estimated, size_t *source)
{
	*source = 0;
	if (!st->prepared)
		return 0;
	if (st->kernel == &kfast_mm_packed || st->kernel == &kfast_addmm_packed || st->kernel == &kfast_linear_packed)
		return kgemm_packed_b_bytes(st->prepared);
	if (st->kernel == &kfast_conv2d_nhwc_1x1 || st->kernel == &kfast_conv2d_nhwc_im2col ||
	    st->kernel == &kfast_conv2d_nhwc_implicit || st->kernel == &kfast_conv2d_implicit_nchw ||
	    st->kernel == &kfast_conv2d_im2col_channels_last ||
	    st->kernel == &kfast_conv2d_1x1_t)
		return kconv_nhwc_prepared_bytes(st->prepared, source);
	if (st->kernel == &kfast_conv2d_nhwc_rows)
		return kconv_rows_prepared_bytes(st->prepared, source);
	if (st->kernel == &kfast_conv2d_nhwc_lowp_im2col)
		return kconv_lowp_prepared_bytes(st->prepared);
	if (st->kernel == &kfast_conv2d_nhwc_winograd)
		return kconv_winograd_prepared_bytes(st->prepared, source);
	const ir_node *n = &m->g->nodes[st->node];
	size_t bytes = 0;
	for (int i = 0; i < n->n_in; i++) {
		const ir_value *v = &m->g->values[n->in[i]];
		if (v->kind == IR_CONSTANT)
			bytes += m->g->consts[v->index].nbytes;
	}
	(*estimated)++;
	return bytes;
}

/* Constant bytes the model holds (owned copies, prepared data) and those
 * it borrows; *estimated: prepared steps whose size is estimated. */
static void weight_bytes(const air_model *m, size_t *owned, size_t *prepared, size_t *borrowed, int *estimated)
{
	*owned = *prepared = *borrowed = 0;
	*estimated = 0;
	/* owned bytes count used or not (the model holds them); borrowed
	 * ones only while a node or a kernel still reads them (a pass may
	 * have replaced them, e.g. by their batch-norm-folded form, which a
	 * kernel may re-pack from them on every call) */
	int *uses = ir_count_uses(m->g);
	for (int c = 0; c < m->g->n_consts; c++) {
		const ir_constant *k = &m->g->consts[c];
		if (k->released)
			continue; /* freed after packing: its prepared copy counts */
		if (k->owned)
			*owned += k->nbytes;
		else if (!uses || uses[k->value] > 0)
			*borrowed += k->nbytes;
	}
	free(uses);
	for (int k = 0; k < m->n_steps; k++) {
		size_t source;
		*prepared += prepared_bytes(m, &m->steps[k], estimated, &source);
		*borrowed += source;
	}
}

void rt_weight_bytes(const air_model *m, size_t *weights, size_t *borrowed)
{
	size_t owned, prepared;
	int estimated;
	weight_bytes(m, &owned, &prepared, borrowed, &estimated);
	*weights = owned + prepared;
}

static void add_memory(sbuf *s, const air_model *m, const air_memory_info *mem, bool at_compile)
{
	if (!mem->known) {
		add(s, "memory: sizes are symbolic; each session plans its own (air_session_memory_info)\n");
	} else {
		add(s, "memory (%s):\n", at_compile ? "sizes known at compile time" : "sizes of the first run");
		add(s, "  activations: %d values, %d step(s) in place\n", mem->buffers, mem->inplace);
		add(s, "  arena planned: ");
		add_bytes(s, mem->arena_bytes);
		add(s, " + workspace ");
		add_bytes(s, mem->workspace_bytes);
		add(s, "\n  without reuse: ");
		add_bytes(s, mem->no_reuse_bytes);
		if (mem->no_reuse_bytes > 0)
			add(s, ", planned is %.1f%% of it",
			    100.0 * (double)mem->arena_bytes / (double)mem->no_reuse_bytes);
		add(s, "\n");
	}
	size_t owned, prepared, borrowed;
	int estimated;
	weight_bytes(m, &owned, &prepared, &borrowed, &estimated);
	add(s, "  weights held by the model: ");
	add_bytes(s, mem->weight_bytes);
	add(s, " = owned constants ");
	add_bytes(s, owned);
	add(s, " + prepared kernel data ");
	add_bytes(s, prepared);
	if (estimated)
		add(s, " (%d step(s) estimated from their constant inputs)", estimated);
	add(s, "; borrowed: ");
	add_bytes(s, mem->borrowed_bytes);
	add(s, "\n");
}

/* What mode='max-autotune' measured: one summary line, then every step whose kernel differs
 * from the default rule's, with the times behind the choice. */
static void add_autotune(sbuf *s, const air_model *m)
{
	if (!m->tune)
		return;
	int tuned = 0, cached = 0, changed = 0;
	uint64_t ns = 0;
	for (int k = 0; k < m->n_steps; k++) {
		const rt_tune_result *t = &m->tune[k];
		tuned += t->tuned && !t->from_cache;
		cached += t->from_cache;
		changed += t->tuned && t->chosen != 0;
		ns += t->tuning_ns;
	}
	add(s, "autotune: %d steps timed, %d from the cache, %d changed from the default choice, %.1f ms spent\n",
	    tuned, cached, changed, (double)ns / 1e6);
	for (int k = 0; k < m->n_steps; k++) {
		const rt_tune_result *t = &m->tune[k];
		if (!t->tuned || t->chosen == 0)
			continue;
		add(s, "  step %d: %s instead of %s", k, t->names[t->chosen], t->names[0]);
		if (t->from_cache) {
			add(s, " (from the cache)\n");
			continue;
		}
		const char *sep = " (";
		for (int c = 0; c < t->n; c++) {
			if (t->ns[c] == 0)
				continue;
			if (t->ns[c] == UINT64_MAX)
				add(s, "%s%s failed", sep, t->names[c]);
			else
				add(s, "%s%s %.3f ms", sep, t->names[c], (double)t->ns[c] / 1e6);
			sep = ", ";
		}
		add(s, "%s\n", sep[0] == ',' ? ")" : "");
	}
}

air_status rt_model_report(air_model *m)
{
	sbuf s = {0};
	const air_graph *g = m->g;
	/* the memory plan first: the step lines mark in-place steps */
	memset(&m->mem, 0, sizeof m->mem);
	m->mem.size = sizeof m->mem;
	rt_weight_bytes(m, &m->mem.weight_bytes, &m->mem.borrowed_bytes);
	int *inplace = calloc((size_t)m->n_steps + 1, sizeof *inplace);
	if (!inplace)
		return air_error(AIR_OUT_OF_MEMORY, "report: no memory");
	for (int k = 0; k < m->n_steps; k++)
		inplace[k] = -1;
	if (g->n_symbols == 0) {
		air_memory_info mem;
		air_status st = rt_static_memory(m, &mem, inplace);
		if (st != AIR_OK) {
			free(inplace);
			return st;
		}
		m->mem = mem;
		m->mem_static = true;
	}
	add(&s, "isa: %s, threads: %d\n", kcpu_isa_name(), rt_pool_size(m->pool));
	add(&s, "inputs: %d, constants: %d, outputs: %d, steps: %d\n", g->n_inputs, g->n_consts, g->n_outputs,
	    m->n_steps);
	if (m->before)
		add_op_counts(&s, m->before, "ops before passes");
	add_op_counts(&s, g, "ops after passes");
	if (m->pass_log) {
		add(&s, "passes:\n");
		for (const char *p = m->pass_log; *p;) {
			const char *e = strchr(p, '\n');
			int len = e ? (int)(e - p) : (int)strlen(p);
			add(&s, "  %.*s\n", len, p);
			p += len + (e != NULL);
		}
	}
	int n_fused = 0;
	for (int k = 0; k < m->n_steps; k++) {
		const ir_node *n = &g->nodes[m->steps[k].node];
		sbuf line = {0};
		if (add_fused(&line, n)) {
			if (!n_fused++)
				add(&s, "fused groups:\n");
			add(&s, "  step %d: %s\n", k, line.buf ? line.buf : "");
		}
		s.oom |= line.oom;
		free(line.buf);
	}
	add(&s, "kernels per step:\n");
	for (int k = 0; k < m->n_steps; k++) {
		const rt_step *st = &m->steps[k];
		const ir_node *n = &g->nodes[st->node];
		char type[256];
		ir_value_string(g, n->out[0], type, sizeof type);
		add(&s, "  %4d %-18s %-24s %s", k, op_get(n->op)->name, st->alias ? "(alias)" : st->kernel->name,
		    type);
		if (inplace[k] >= 0)
			add(&s, "  in place of input %d", inplace[k]);
		add(&s, "\n");
	}
	free(inplace);
	add_autotune(&s, m);
	add_memory(&s, m, &m->mem, true);
	if (s.oom) {
		free(s.buf);
		return air_error(AIR_OUT_OF_MEMORY, "report: no memory");
	}
	free(m->report);
	m->report = s.buf;
	return AIR_OK;
}

air_status air_model_memory_info(const air_model *m, air_memory_info *info)
{
	if (!m || !info || info->size < sizeof *info)
		return air_error(AIR_INVALID_ARGUMENT, "air_model_memory_info: bad argument (set info->size)");
	if (m->mem_static) {
		*info = m->mem;
	} else if (atomic_load_explicit(&m->run_mem_state, memory_order_acquire) == 2) {
		*info = m->run_mem;
	} else {
		*info = m->mem;
		info->known = 0;
	}
	return AIR_OK;
}

/* test_dot.c - the compile report and the DOT export (runtime/report.c,
 * runtime/dot.c): per-op counts before and after the passes, the pass log,
 * fused groups with their members, kernels per step, in-place steps, and
 * the memory plan's numbers (compile time for constant sizes, the first
 * run's for symbolic ones); DOT text with a node per op before and after
 * the passes, the size query, truncation and bad arguments. */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "air/air.h"
#include "check.h"

static air_value node(air_graph *g, const char *op, const air_value *in, int n)
{
	air_value out = 0;
	int no = 0;
	CHECK_OK(air_graph_add_node(g, op, in, n, NULL, 0, &out, 1, &no));
	return out;
}

/* x -> linear(w) -> a -> mul(a, a) -> relu -> tanh -> exp -> add(x) -> neg
 * -> linear(w) -> out: eight ops; fusion makes mul..neg one fused_dag */
static air_model *compile_small(air_dim rows, uint32_t flags, int n_ops_expected)
{
	air_graph *g = NULL;
	air_model *m = NULL;
	CHECK_OK(air_graph_create(&g));
	air_dim d[2] = {rows, 16};
	air_value x = 0;
	CHECK_OK(air_graph_add_input(g, "x", AIR_F32, 2, d, &x));
	/* linear first, so that the elementwise group after it (mul of two
	 * tensors, a relu-tanh-exp chain, a residual add, neg: one fused_dag)
	 * reads an activation it can run in place of */
	air_value in[3] = {x, x};
	static float w[16 * 16];
	for (int i = 0; i < 16 * 16; i++)
		w[i] = (float)(i % 7) * 0.1f;
	int64_t wd[2] = {16, 16};
	CHECK_OK(air_graph_add_constant(g, AIR_F32, 2, wd, w, 0, &in[1]));
	air_value a = node(g, "linear", in, 2);
	in[0] = a;
	in[1] = a;
	a = node(g, "mul", in, 2);
	a = node(g, "relu", &a, 1);
	a = node(g, "tanh", &a, 1);
	a = node(g, "exp", &a, 1);
	in[0] = a;
	in[1] = x;
	a = node(g, "add", in, 2);
	a = node(g, "neg", &a, 1);
	in[0] = a; /* a last linear: the group's result is not a graph output */
	in[1] = in[2] = 0;
	CHECK_OK(air_graph_add_constant(g, AIR_F32, 2, wd, w, 0, &in[1]));
	a = node(g, "linear", in, 2);
	CHECK_OK(air_graph_set_outputs(g, &a, 1));
	air_compile_options o;
	air_compile_options_init(&o);
	o.flags = flags;
	CHECK_OK(air_compile(g, &o, &m));
	air_graph_destroy(g);
	(void)n_ops_expected;
	return m;
}

static bool has(const char *text, const char *what)
{
	bool ok = strstr(text, what) != NULL;
	if (!ok)
		fprintf(stderr, "expected \"%s\" in:\n%s\n", what, text);
	return ok;
}

static int count(const char *text, const char *what)
{
	int n = 0;
	for (const char *p = text; (p = strstr(p, what)); p++)
		n++;
	return n;
}

static char *dot(const air_model *m, int which)
{
	size_t len = 0;
	CHECK_OK(air_model_dot(m, which, NULL, 0, &len));
	CHECK(len > 0);
	char *buf = malloc(len + 1);
	size_t len2 = 0;
	CHECK_OK(air_model_dot(m, which, buf, len + 1, &len2));
	CHECK(len2 == len && strlen(buf) == len);
	return buf;
}

/* the node lines of ops: "  n<k> [" */
static int op_nodes(const char *text)
{
	int n = 0;
	for (const char *p = text; (p = strstr(p, "\n  n")); p++) {
		const char *q = p + 4;
		while (*q >= '0' && *q <= '9')
			q++;
		n += q > p + 4 && !strncmp(q, " [", 2);
	}
	return n;
}

static void report_static(void)
{
	air_model *m = compile_small(5, 0, 8);
	if (!m)
		return;
	const char *r = air_model_report(m);
	printf("%s", r);
	CHECK(has(r, "ops before passes: 8: neg, exp, tanh, relu, add, mul, linear x2"));
	CHECK(has(r, "ops after passes:"));
	CHECK(has(r, "passes:\n"));
	CHECK(has(r, "fused groups:\n"));
	CHECK(has(r, "fused_dag (6 instructions, 2 input(s), 1 output(s)): mul(r0, r0) relu(r2) tanh(r3) exp(r4) add(r5, r1) neg(r6) -> r7"));
	CHECK(has(r, "kernels per step:\n"));
	CHECK(has(r, "in place of input 0"));
	CHECK(has(r, "memory (sizes known at compile time):"));
	CHECK(has(r, "arena planned: "));
	CHECK(has(r, "without reuse: "));
	CHECK(has(r, "weights held by the model: "));
	air_memory_info info = {.size = sizeof info};
	CHECK_OK(air_model_memory_info(m, &info));
	CHECK(info.known == 1);
	CHECK(info.inplace >= 1);
	CHECK(info.arena_bytes < info.no_reuse_bytes);
	/* the constant was copied (no BORROW): the model holds it, plus any
	 * packed copy the GEMM kernel made of it */
	CHECK(info.weight_bytes >= 16 * 16 * sizeof(float));
	CHECK(info.borrowed_bytes == 0);
	char num[64];
	snprintf(num, sizeof num, "(%zu bytes)", info.arena_bytes);
	CHECK(has(r, num));
	snprintf(num, sizeof num, "(%zu bytes)", info.no_reuse_bytes);
	CHECK(has(r, num));

	char *before = dot(m, AIR_DOT_BEFORE_PASSES), *after = dot(m, AIR_DOT_AFTER_PASSES);
	CHECK(!strncmp(before, "digraph ", 8) && !strncmp(after, "digraph ", 8));
	CHECK(op_nodes(before) == 8);
	int steps = 0;
	sscanf(strstr(r, "steps: "), "steps: %d", &steps);
	CHECK(op_nodes(after) == steps);
	CHECK(steps < 8);
	CHECK(has(before, "in0 -> n0"));
	CHECK(has(after, "fused_dag (6 instructions"));
	CHECK(has(after, "in place of input"));
	CHECK(count(before, "{") == count(before, "}"));
	CHECK(has(before, "out0 [shape=ellipse"));
	/* truncation: terminated, full length reported */
	char small[10];
	size_t len = 0;
	CHECK_OK(air_model_dot(m, AIR_DOT_AFTER_PASSES, small, sizeof small, &len));
	CHECK(len == strlen(after));
	CHECK(strlen(small) == sizeof small - 1 && !strncmp(small, after, sizeof small - 1));
	/* bad arguments */
	CHECK(air_model_dot(m, 2, NULL, 0, &len) == AIR_INVALID_ARGUMENT);
	CHECK(air_model_dot(NULL, 0, NULL, 0, &len) == AIR_INVALID_ARGUMENT);
	CHECK(air_model_dot(m, 0, NULL, 0, NULL) == AIR_INVALID_ARGUMENT);
	CHECK(air_model_dot(m, 0, NULL, 5, &len) == AIR_INVALID_ARGUMENT);
	air_memory_info old = {.size = 8};
	CHECK(air_model_memory_info(m, &old) == AIR_INVALID_ARGUMENT);
	CHECK(air_model_memory_info(NULL, &info) == AIR_INVALID_ARGUMENT);
	free(before);
	free(after);
	air_model_destroy(m);

	/* without memory reuse: nothing in place, planned == no-reuse total */
	m = compile_small(5, AIR_COMPILE_NO_MEMORY_REUSE, 8);
	CHECK_OK(air_model_memory_info(m, &info));
	CHECK(info.inplace == 0 && info.arena_bytes == info.no_reuse_bytes);
	CHECK(!strstr(air_model_report(m), "in place of input"));
	air_model_destroy(m);
}

static void report_symbolic(void)
{
	air_graph *g = NULL;
	air_model *m = NULL;
	air_session *s = NULL;
	CHECK_OK(air_graph_create(&g));
	air_dim n = 0;
	CHECK_OK(air_graph_symbol(g, "n", &n));
	air_dim d[2] = {n, 16};
	air_value x = 0;
	CHECK_OK(air_graph_add_input(g, "x", AIR_F32, 2, d, &x));
	air_value a = node(g, "neg", &x, 1);
	a = node(g, "relu", &a, 1);
	air_value in[2] = {a, x};
	a = node(g, "mul", in, 2);
	CHECK_OK(air_graph_set_outputs(g, &a, 1));
	air_compile_options o;
	air_compile_options_init(&o);
	o.flags = AIR_COMPILE_NO_FUSION;
	CHECK_OK(air_compile(g, &o, &m));
	air_graph_destroy(g);
	if (!m)
		return;
	CHECK(has(air_model_report(m), "sizes are symbolic"));
	air_memory_info info = {.size = sizeof info};
	CHECK_OK(air_model_memory_info(m, &info));
	CHECK(info.known == 0);
	CHECK_OK(air_session_create(m, &s));
	CHECK(air_session_memory_info(s, &info) == AIR_INVALID_STATE);
	float xs[3 * 16], ys[3 * 16];
	for (int i = 0; i < 3 * 16; i++)
		xs[i] = (float)i - 20.0f;
	int64_t dims[2] = {3, 16};
	CHECK_OK(air_session_set_input(s, 0, xs, 2, dims));
	CHECK_OK(air_session_set_output(s, 0, ys, sizeof ys));
	CHECK_OK(air_session_run(s));
	air_memory_info si = {.size = sizeof si};
	CHECK_OK(air_session_memory_info(s, &si));
	CHECK(si.known == 1 && si.buffers == 2 && si.inplace == 1);
	CHECK(si.arena_bytes == 192 && si.no_reuse_bytes == 2 * 192);
	CHECK_OK(air_model_memory_info(m, &info));
	CHECK(info.known == 1 && info.arena_bytes == si.arena_bytes && info.inplace == 1);
	for (int i = 0; i < 3 * 16; i++)
		CHECK(ys[i] == (xs[i] < 0 ? -xs[i] : 0.0f) * xs[i]);
	air_session_destroy(s);
	air_model_destroy(m);
}

int main(void)
{
	report_static();
	report_symbolic();
	return check_report("test_dot");
}

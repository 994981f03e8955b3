/* test_fuse.c - the elementwise fusion pass: a chain of f32 unary and
 * tensor-scalar ops becomes one fused_elementwise step with the same result
 * as the unfused graph; fusion_threshold caps group size; a value with two
 * uses, or one that is a graph output, ends a group; AIR_COMPILE_NO_FUSION
 * keeps one step per op. Checked through the public API and the report. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "air/air.h"
#include "check.h"

static air_value scalar(air_graph *g, float v)
{
	air_value c;
	CHECK_OK(air_graph_add_constant(g, AIR_F32, 0, NULL, &v, 0, &c));
	return c;
}

static air_value node1(air_graph *g, const char *op, air_value a)
{
	air_value out;
	int n;
	CHECK_OK(air_graph_add_node(g, op, &a, 1, NULL, 0, &out, 1, &n));
	return out;
}

static air_value node2(air_graph *g, const char *op, air_value a, air_value b)
{
	air_value in[2] = {a, b}, out;
	int n;
	CHECK_OK(air_graph_add_node(g, op, in, 2, NULL, 0, &out, 1, &n));
	return out;
}

/* y = sigmoid(x * 1.5 + 0.25) repeated rounds times (3 ops per round);
 * with branch, one intermediate also feeds a second output. */
static air_graph *build(int64_t n, int rounds, int branch)
{
	air_graph *g;
	CHECK_OK(air_graph_create(&g));
	air_dim d = n;
	air_value x, outs[2];
	CHECK_OK(air_graph_add_input(g, "x", AIR_F32, 1, &d, &x));
	air_value v = x, mid = x;
	for (int r = 0; r < rounds; r++) {
		v = node2(g, "mul", v, scalar(g, 1.5f));
		v = node2(g, "add", scalar(g, 0.25f), v); /* scalar first: add is commutative */
		v = node1(g, "sigmoid", v);
		if (r == rounds / 2)
			mid = v;
	}
	int nout = 1;
	outs[0] = v;
	if (branch) {
		outs[1] = node2(g, "sub", scalar(g, 1.0f), mid); /* rsub: 1 - mid */
		nout = 2;
	}
	CHECK_OK(air_graph_set_outputs(g, outs, nout));
	return g;
}

static int count_steps(const char *report)
{
	const char *p = strstr(report, "steps: ");
	return p ? atoi(p + 7) : -1;
}

static void run(air_model *m, const float *x, int64_t n, float *y0, float *y1)
{
	air_session *s;
	CHECK_OK(air_session_create(m, &s));
	CHECK_OK(air_session_set_input(s, 0, x, 1, &n));
	CHECK_OK(air_session_set_output(s, 0, y0, sizeof(float) * (size_t)n));
	if (y1)
		CHECK_OK(air_session_set_output(s, 1, y1, sizeof(float) * (size_t)n));
	CHECK_OK(air_session_run(s));
	air_session_destroy(s);
}

static air_model *compile(air_graph *g, uint32_t flags, int threshold)
{
	air_compile_options o;
	air_compile_options_init(&o);
	o.flags = flags;
	o.fusion_threshold = threshold;
	air_model *m = NULL;
	CHECK_OK(air_compile(g, &o, &m));
	return m;
}

static void test_chain(int64_t n)
{
	enum { ROUNDS = 6 }; /* 18 ops */
	float *x = malloc(sizeof(float) * (size_t)(n + 1)), *a = malloc(sizeof(float) * (size_t)(n + 1)),
	      *b = malloc(sizeof(float) * (size_t)(n + 1));
	for (int64_t i = 0; i < n; i++)
		x[i] = (float)((i % 97) - 48) / 7.0f;
	x[0] = NAN;
	air_graph *g = build(n, ROUNDS, 0);
	air_model *fused = compile(g, 0, 0), *plain = compile(g, AIR_COMPILE_NO_FUSION, 0);
	CHECK(count_steps(air_model_report(fused)) == 1);
	CHECK(count_steps(air_model_report(plain)) == 3 * ROUNDS);
	CHECK(strstr(air_model_report(fused), "fused group 0 (18 ops)") != NULL);
	run(fused, x, n, a, NULL);
	run(plain, x, n, b, NULL);
	int same = 1;
	for (int64_t i = 0; i < n; i++) {
		double expect = x[i];
		for (int r = 0; r < ROUNDS; r++)
			expect = 1.0 / (1.0 + exp(-(expect * 1.5 + 0.25)));
		if (i == 0) {
			same &= isnan(a[i]) && isnan(b[i]); /* NaN flows through like unfused ops */
			continue;
		}
		same &= fabs(a[i] - b[i]) <= 1e-6 && fabs(a[i] - expect) <= 1e-5;
	}
	CHECK(same);
	/* a cap of 4 ops per group: 18 ops make ceil(18/4) = 5 steps */
	air_model *capped = compile(g, 0, 4);
	CHECK(count_steps(air_model_report(capped)) == 5);
	run(capped, x, n, b, NULL);
	int same_capped = 1;
	for (int64_t i = 1; i < n; i++)
		same_capped &= fabs(a[i] - b[i]) <= 1e-6;
	CHECK(same_capped);
	air_model_destroy(capped);
	air_model_destroy(fused);
	air_model_destroy(plain);
	air_graph_destroy(g);
	free(x), free(a), free(b);
}

static void test_branch(void)
{
	/* the intermediate with two uses ends the first chain; fuse_dag then
	 * takes both chains and 1 - mid into one node with two outputs */
	const int64_t n = 37;
	float x[37], a0[37], a1[37], b0[37], b1[37];
	for (int i = 0; i < n; i++)
		x[i] = (float)i / 10.0f - 1.8f;
	air_graph *g = build(n, 4, 1);
	air_model *fused = compile(g, 0, 0), *plain = compile(g, AIR_COMPILE_NO_FUSION, 0);
	int steps = count_steps(air_model_report(fused));
	CHECK(steps == 1); /* one fused_dag: the shared value stays in registers */
	CHECK(strstr(air_model_report(fused), "fused_dag (") != NULL);
	run(fused, x, n, a0, a1);
	run(plain, x, n, b0, b1);
	int same = 1;
	for (int i = 0; i < n; i++)
		same &= fabsf(a0[i] - b0[i]) <= 1e-6f && fabsf(a1[i] - b1[i]) <= 1e-6f;
	CHECK(same);
	air_model_destroy(fused);
	air_model_destroy(plain);
	air_graph_destroy(g);
}

/* Every instruction of the fused program: [op, neg] (two ops, so they
 * fuse) run by the fast kernel and by the reference one, on random values
 * and the special ones. vmath's functions and x * x * x (for pow 3) are
 * within a few ulp of libm's; everything else is the same expression. */
typedef struct fused_case {
	const char *op;
	int scalar_first; /* 0: op(x) or op(x, c); 1: op(c, x) */
	int binary;
	float c;
} fused_case;

static const fused_case fused_cases[] = {
	{"neg", 0, 0, 0}, {"abs", 0, 0, 0}, {"exp", 0, 0, 0}, {"log", 0, 0, 0}, {"sqrt", 0, 0, 0},
	{"rsqrt", 0, 0, 0}, {"sin", 0, 0, 0}, {"cos", 0, 0, 0}, {"tanh", 0, 0, 0}, {"sigmoid", 0, 0, 0},
	{"erf", 0, 0, 0}, {"relu", 0, 0, 0}, {"gelu", 0, 0, 0}, {"gelu_tanh", 0, 0, 0}, {"silu", 0, 0, 0},
	{"hardswish", 0, 0, 0}, {"hardsigmoid", 0, 0, 0}, {"reciprocal", 0, 0, 0}, {"add", 0, 1, 0.75f},
	{"sub", 0, 1, 0.75f}, {"sub", 1, 1, 0.75f}, {"mul", 0, 1, -1.5f}, {"div", 0, 1, 3.0f},
	{"div", 1, 1, 3.0f}, {"maximum", 0, 1, 0.5f}, {"minimum", 0, 1, 0.5f}, {"maximum", 0, 1, NAN},
	{"pow", 0, 1, 2.0f}, {"pow", 0, 1, 3.0f}, {"pow", 0, 1, 2.5f}, {"pow", 1, 1, 1.5f},
};

static bool close_enough(float a, float b)
{
	if (isnan(a) || isnan(b))
		return isnan(a) && isnan(b);
	if (isinf(a) || isinf(b))
		return a == b;
	return fabsf(a - b) <= 1e-5f * fabsf(b) + 1e-6f;
}

static void test_fast_matches_reference(int64_t n)
{
	static const float special[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e30f, -1e30f, 1e-40f, -3.0f, 3.0f, 6.0f};
	const int ns = (int)(sizeof special / sizeof special[0]);
	float *x = malloc(sizeof(float) * (size_t)n), *a = malloc(sizeof(float) * (size_t)n),
	      *b = malloc(sizeof(float) * (size_t)n);
	uint64_t s = 12345;
	for (int64_t i = 0; i < n; i++) {
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		x[i] = i < ns ? special[i] : (float)((s >> 40) & 0xffffff) / (float)(1 << 20) - 8.0f;
	}
	for (size_t k = 0; k < sizeof fused_cases / sizeof fused_cases[0]; k++) {
		const fused_case *fc = &fused_cases[k];
		air_graph *g;
		CHECK_OK(air_graph_create(&g));
		air_dim d = n;
		air_value v;
		CHECK_OK(air_graph_add_input(g, "x", AIR_F32, 1, &d, &v));
		if (!fc->binary)
			v = node1(g, fc->op, v);
		else if (fc->scalar_first)
			v = node2(g, fc->op, scalar(g, fc->c), v);
		else
			v = node2(g, fc->op, v, scalar(g, fc->c));
		v = node1(g, "neg", v);
		CHECK_OK(air_graph_set_outputs(g, &v, 1));
		air_model *fast = compile(g, 0, 0), *ref = compile(g, AIR_COMPILE_REFERENCE_KERNELS, 0);
		CHECK(strstr(air_model_report(fast), "fused_elementwise_vec") != NULL);
		CHECK(strstr(air_model_report(ref), "fused_elementwise_tiles") != NULL);
		run(fast, x, n, a, NULL);
		run(ref, x, n, b, NULL);
		int64_t bad = 0, first = -1;
		for (int64_t i = 0; i < n; i++)
			if (!close_enough(a[i], b[i]) && bad++ == 0)
				first = i;
		if (bad)
			fprintf(stderr, "fused %s%s (c %g), n %lld: %lld differ, first x %g: fast %g ref %g\n", fc->op,
				fc->scalar_first ? " (scalar first)" : "", (double)fc->c, (long long)n, (long long)bad,
				(double)x[first], (double)a[first], (double)b[first]);
		CHECK(bad == 0);
		air_model_destroy(fast);
		air_model_destroy(ref);
		air_graph_destroy(g);
	}
	free(x), free(a), free(b);
}

int main(void)
{
	const int64_t sizes[] = {1, 7, 512, 513, 100003};
	for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
		test_chain(sizes[k]);
	test_branch();
	const int64_t fast_sizes[] = {11, 13, 512, 1000, 40000};
	for (size_t k = 0; k < sizeof fast_sizes / sizeof fast_sizes[0]; k++)
		test_fast_matches_reference(fast_sizes[k]);
	return check_report("test_fuse");
}

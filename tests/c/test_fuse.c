/* test_fuse.c - the elementwise fusion pass: a chain of f32 unary and
 * tensor-scalar ops becomes one fused_elementwise step with the same result
 * as the unfused graph; fusion_threshold caps group size; a value with two
 * uses, or one that is a graph output, ends a group; AIR_COMPILE_NO_FUSION
 * keeps one step per op. Checked through the public API and the report. */
#include <math.h>
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
	/* the intermediate with two uses ends the first group; the second
	 * output (1 - mid) is a group of its own or joins nothing */
	const int64_t n = 37;
	float x[37], a0[37], a1[37], b0[37], b1[37];
	for (int i = 0; i < n; i++)
		x[i] = (float)i / 10.0f - 1.8f;
	air_graph *g = build(n, 4, 1);
	air_model *fused = compile(g, 0, 0), *plain = compile(g, AIR_COMPILE_NO_FUSION, 0);
	int steps = count_steps(air_model_report(fused));
	CHECK(steps >= 3 && steps < 13); /* fused, but not across the shared value */
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

int main(void)
{
	const int64_t sizes[] = {1, 7, 512, 513, 100003};
	for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
		test_chain(sizes[k]);
	test_branch();
	return check_report("test_fuse");
}

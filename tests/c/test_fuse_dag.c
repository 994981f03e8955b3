/* test_fuse_dag.c - fusion of elementwise groups with several tensor inputs
 * (passes/fuse_dag.c, op fused_dag): an AdamW-like update (four tensors and
 * a one-element learning rate in, three results out), comparisons feeding
 * where, maximum/minimum/pow of two tensors, a bool input, scalar constants,
 * inputs and constants repeating over leading dims ([C] against [R, C]),
 * transcendental ops, and a value read by an outside node before the group
 * ends (which must not be fused across). Each graph is compiled fused (fast
 * kernel of the ISA AIR_ISA picks), fused with reference kernels, and
 * unfused with fast and with reference kernels (the threaded sqrt and where
 * of sqrt_where_fast.c among the fast ones); all must agree, on odd lengths
 * around the tile and the thread grain. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "air/air.h"
#include "check.h"

enum { MAX_IO = 6 };

static air_value scalar(air_graph *g, float v)
{
	air_value c;
	CHECK_OK(air_graph_add_constant(g, AIR_F32, 0, NULL, &v, 0, &c));
	return c;
}

static air_value op(air_graph *g, const char *name, air_value a, air_value b)
{
	air_value in[2] = {a, b}, out;
	int n;
	CHECK_OK(air_graph_add_node(g, name, in, b == (air_value)-1 ? 1 : 2, NULL, 0, &out, 1, &n));
	return out;
}
#define op1(g, name, a) op(g, name, a, (air_value)-1)

static air_value where(air_graph *g, air_value c, air_value a, air_value b)
{
	air_value in[3] = {c, a, b}, out;
	int n;
	CHECK_OK(air_graph_add_node(g, "where", in, 3, NULL, 0, &out, 1, &n));
	return out;
}

/* A test graph: its inputs (x0..x3 f32 [n]; "lr" f32 [1]; "mask" bool [n])
 * and outputs. */
typedef struct tcase {
	const char *name;
	int n_x;      /* f32 [n] inputs */
	bool lr;      /* then an f32 [1] input */
	bool mask;    /* then a bool [n] input */
	int steps;    /* fused steps expected */
	float tol;    /* relative, fast vs reference (transcendentals: vmath) */
	int (*build)(air_graph *g, const air_value *in, air_value *out);
} tcase;

/* AdamW's update: m, v and p from grad, m, v, p and lr (x0..x3, lr) */
static int build_adamw(air_graph *g, const air_value *in, air_value *out)
{
	air_value gr = in[0], m = in[1], v = in[2], p = in[3], lr = in[4];
	air_value m2 = op(g, "add", op(g, "mul", m, scalar(g, 0.9f)), op(g, "mul", gr, scalar(g, 0.1f)));
	air_value gg = op(g, "mul", gr, gr);
	air_value v2 = op(g, "add", op(g, "mul", v, scalar(g, 0.999f)), op(g, "mul", gg, scalar(g, 0.001f)));
	air_value den = op(g, "add", op1(g, "sqrt", v2), scalar(g, 1e-8f));
	air_value upd = op(g, "div", m2, den);
	air_value p2 = op(g, "sub", op(g, "mul", p, scalar(g, 0.99f)), op(g, "mul", lr, upd));
	out[0] = p2, out[1] = m2, out[2] = v2;
	return 3;
}

/* comparisons feeding where, maximum/minimum/pow of two tensors, a value
 * (t) read four times */
static int build_select(air_graph *g, const air_value *in, air_value *out)
{
	air_value t = op(g, "sub", in[0], in[1]);
	air_value c = op(g, "gt", t, in[2]);
	air_value w = where(g, c, op(g, "mul", t, t), op1(g, "neg", t));
	air_value u = op(g, "minimum", op(g, "maximum", w, in[2]), op(g, "add", t, in[0]));
	air_value y = op(g, "div", u, op(g, "add", op1(g, "abs", in[1]), scalar(g, 1.0f)));
	air_value z = op(g, "pow", op(g, "add", op1(g, "abs", in[0]), scalar(g, 0.5f)), op(g, "mul", in[1], scalar(g, 0.25f)));
	air_value e = where(g, op(g, "le", in[0], in[1]), op(g, "sub", y, z), y);
	out[0] = e;
	return 1;
}

/* a bool input and scalar constants in where, comparisons with constants,
 * two outputs */
static int build_mask(air_graph *g, const air_value *in, air_value *out)
{
	air_value mask = in[2];
	air_value a = where(g, mask, in[0], scalar(g, 0.5f));
	air_value b = where(g, op(g, "lt", in[0], scalar(g, 0.25f)), scalar(g, -2.0f), in[1]);
	air_value s = op(g, "add", op(g, "mul", a, in[1]), b);
	out[0] = s;
	out[1] = op1(g, "relu", op(g, "sub", s, a));
	return 2;
}

/* transcendental ops (vmath in the fast kernel, libm in the reference) */
static int build_vmath(air_graph *g, const air_value *in, air_value *out)
{
	air_value a = op(g, "mul", op1(g, "exp", op(g, "mul", in[0], scalar(g, 0.25f))), op1(g, "sigmoid", in[1]));
	out[0] = op(g, "add", a, op1(g, "tanh", op(g, "mul", in[0], in[1])));
	return 1;
}

/* a = x0 * x1 is read by sum before b = a + x0 + sum(a): not one group */
static int build_outside(air_graph *g, const air_value *in, air_value *out)
{
	air_value a = op(g, "mul", in[0], in[1]);
	int64_t axes[1] = {0};
	air_attr at[2] = {{"axes", AIR_ATTR_INTS, 0, 0, axes, 1}, {"keepdim", AIR_ATTR_INT, 1, 0, NULL, 0}};
	air_value s;
	int n;
	CHECK_OK(air_graph_add_node(g, "sum", &a, 1, at, 2, &s, 1, &n));
	out[0] = op(g, "add", op(g, "add", a, in[0]), s);
	return 1;
}

static const tcase cases[] = {
	{"adamw", 4, true, false, 1, 0.0f, build_adamw},
	{"select", 3, false, false, 1, 0.0f, build_select},
	{"mask", 2, false, true, 1, 0.0f, build_mask},
	{"vmath", 2, false, false, 1, 2e-6f, build_vmath},
	{"outside", 2, false, false, 3, 0.0f, build_outside},
};

static int count_steps(const char *report)
{
	const char *p = strstr(report, "steps: ");
	return p ? atoi(p + 7) : -1;
}

static bool close_to(float a, float b, float tol)
{
	if (isnan(a) || isnan(b))
		return isnan(a) && isnan(b);
	if (isinf(a) || isinf(b))
		return a == b;
	return fabsf(a - b) <= tol * fabsf(b) + (tol > 0 ? 1e-6f : 0.0f);
}

static air_model *compile(air_graph *g, uint32_t flags)
{
	air_compile_options o;
	air_compile_options_init(&o);
	o.flags = flags;
	air_model *m = NULL;
	CHECK_OK(air_compile(g, &o, &m));
	return m;
}

static void run(air_model *m, const tcase *tc, int64_t n, void *const *in, float **out, int n_out)
{
	air_session *s;
	CHECK_OK(air_session_create(m, &s));
	int k = 0;
	for (int i = 0; i < tc->n_x; i++, k++)
		CHECK_OK(air_session_set_input(s, k, in[k], 1, &n));
	int64_t one = 1;
	if (tc->lr) {
		CHECK_OK(air_session_set_input(s, k, in[k], 1, &one));
		k++;
	}
	if (tc->mask)
		CHECK_OK(air_session_set_input(s, k, in[k], 1, &n));
	for (int o = 0; o < n_out; o++)
		CHECK_OK(air_session_set_output(s, o, out[o], sizeof(float) * (size_t)n));
	CHECK_OK(air_session_run(s));
	air_session_destroy(s);
}

static void test_case(const tcase *tc, int64_t n)
{
	static const float special[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e30f, -3.0f, 3.0f};
	air_graph *g;
	CHECK_OK(air_graph_create(&g));
	air_dim d = n, one = 1;
	air_value in[MAX_IO], out[MAX_IO];
	void *data[MAX_IO];
	char name[8];
	int k = 0;
	uint64_t s = 777 + (uint64_t)n;
	for (int i = 0; i < tc->n_x; i++, k++) {
		snprintf(name, sizeof name, "x%d", i);
		CHECK_OK(air_graph_add_input(g, name, AIR_F32, 1, &d, &in[k]));
		float *x = malloc(sizeof(float) * (size_t)n);
		for (int64_t j = 0; j < n; j++) {
			s = s * 6364136223846793005ull + 1442695040888963407ull;
			x[j] = (float)((s >> 40) & 0xffffff) / (float)(1 << 21) - 4.0f;
			if (i == 2 && tc->build == build_adamw)
				x[j] = fabsf(x[j]); /* v >= 0 */
		}
		/* specials in input 0 at a few places, also past the first tile */
		for (int j = 0; j < 8 && tc->build != build_adamw; j++)
			if ((int64_t)(j * 37 + i) < n)
				x[j * 37 + i] = special[j];
		data[k] = x;
	}
	if (tc->lr) {
		CHECK_OK(air_graph_add_input(g, "lr", AIR_F32, 1, &one, &in[k]));
		float *x = malloc(sizeof(float));
		*x = 1e-3f;
		data[k++] = x;
	}
	if (tc->mask) {
		CHECK_OK(air_graph_add_input(g, "mask", AIR_BOOL, 1, &d, &in[k]));
		uint8_t *b = malloc((size_t)n);
		for (int64_t j = 0; j < n; j++)
			b[j] = (uint8_t)((j * 7 + 3) % 5 < 2);
		data[k++] = b;
	}
	int n_out = tc->build(g, tc->mask ? (air_value[]){in[0], in[1], in[2]} : in, out);
	CHECK_OK(air_graph_set_outputs(g, out, n_out));
	air_model *fast = compile(g, 0), *ref = compile(g, AIR_COMPILE_REFERENCE_KERNELS),
		  *plain = compile(g, AIR_COMPILE_NO_FUSION | AIR_COMPILE_REFERENCE_KERNELS),
		  *unfused = compile(g, AIR_COMPILE_NO_FUSION);
	const char *rf = air_model_report(fast);
	CHECK(count_steps(rf) == tc->steps);
	CHECK(strstr(rf, "fused_dag (") != NULL);
	CHECK(strstr(air_model_report(ref), "fused_dag_ref") != NULL);
	const char *isa = getenv("AIR_ISA");
	if (isa && !strcmp(isa, "scalar"))
		CHECK(strstr(rf, "fused_dag_tiles") != NULL);
	/* unfused, sqrt and where run their threaded kernels */
	const char *ru = air_model_report(unfused);
	if (tc->build == build_adamw)
		CHECK(strstr(ru, "sqrt_lanes") != NULL);
	if (tc->build == build_select || tc->build == build_mask)
		CHECK(strstr(ru, "where_lanes") != NULL && strstr(ru, "where_ref") == NULL);
	float *a[MAX_IO], *b[MAX_IO], *c[MAX_IO], *u[MAX_IO];
	for (int o = 0; o < n_out; o++) {
		u[o] = malloc(sizeof(float) * (size_t)n);
		a[o] = malloc(sizeof(float) * (size_t)n);
		b[o] = malloc(sizeof(float) * (size_t)n);
		c[o] = malloc(sizeof(float) * (size_t)n);
	}
	run(fast, tc, n, data, a, n_out);
	run(ref, tc, n, data, b, n_out);
	run(plain, tc, n, data, c, n_out);
	run(unfused, tc, n, data, u, n_out);
	for (int o = 0; o < n_out; o++) {
		int64_t bad_fast = 0, bad_ref = 0, bad_unfused = 0, first = -1;
		for (int64_t j = 0; j < n; j++) {
			bad_unfused += !close_to(u[o][j], c[o][j], tc->tol);
			if (!close_to(a[o][j], b[o][j], tc->tol) && bad_fast++ == 0)
				first = j;
			bad_ref += !close_to(b[o][j], c[o][j], 0.0f);
		}
		if (bad_fast || bad_ref)
			fprintf(stderr, "%s n %lld output %d: %lld fast/ref differ (first at %lld: %g vs %g), %lld ref/unfused\n",
				tc->name, (long long)n, o, (long long)bad_fast, (long long)first,
				first >= 0 ? (double)a[o][first] : 0.0, first >= 0 ? (double)b[o][first] : 0.0,
				(long long)bad_ref);
		CHECK(bad_fast == 0);
		CHECK(bad_ref == 0);
		CHECK(bad_unfused == 0); /* the unfused fast kernels, as the reference */
		free(a[o]), free(b[o]), free(c[o]), free(u[o]);
	}
	for (int i = 0; i < k; i++)
		free(data[i]);
	air_model_destroy(fast);
	air_model_destroy(ref);
	air_model_destroy(plain);
	air_model_destroy(unfused);
	air_graph_destroy(g);
}

/* inputs repeating over the output's leading dims: a [C] input and a [C]
 * constant against [R, C] (and [1, C] against [B, R, C]), two outputs */
static void test_broadcast(int rank3, int64_t R, int64_t C)
{
	air_graph *g;
	CHECK_OK(air_graph_create(&g));
	int64_t B = rank3 ? 3 : 1, n = B * R * C;
	air_dim xd[3] = {B, R, C}, wd[2] = {1, C};
	air_value x, w, out[2];
	CHECK_OK(air_graph_add_input(g, "x", AIR_F32, rank3 ? 3 : 2, rank3 ? xd : xd + 1, &x));
	CHECK_OK(air_graph_add_input(g, "w", AIR_F32, rank3 ? 2 : 1, rank3 ? wd : wd + 1, &w));
	float *bias = malloc(sizeof(float) * (size_t)C);
	for (int64_t j = 0; j < C; j++)
		bias[j] = (float)j * 0.125f - 1.0f;
	air_value b;
	CHECK_OK(air_graph_add_constant(g, AIR_F32, 1, &C, bias, 0, &b));
	air_value y = op(g, "sub", op1(g, "relu", op(g, "add", op(g, "mul", x, w), b)), op(g, "mul", x, scalar(g, 0.5f)));
	out[0] = y;
	out[1] = where(g, op(g, "gt", x, w), y, op(g, "div", w, b));
	CHECK_OK(air_graph_set_outputs(g, out, 2));
	float *xv = malloc(sizeof(float) * (size_t)n), *wv = malloc(sizeof(float) * (size_t)C);
	for (int64_t j = 0; j < n; j++)
		xv[j] = (float)((j * 7919) % 1001) / 250.0f - 2.0f;
	for (int64_t j = 0; j < C; j++)
		wv[j] = (float)((j * 31) % 17) / 8.0f - 1.0f;
	air_model *m[4] = {compile(g, 0), compile(g, AIR_COMPILE_REFERENCE_KERNELS),
			   compile(g, AIR_COMPILE_NO_FUSION | AIR_COMPILE_REFERENCE_KERNELS), compile(g, AIR_COMPILE_NO_FUSION)};
	/* w / b is of shape [C]: a step of its own; the rest one fused_dag */
	CHECK(count_steps(air_model_report(m[0])) == 2);
	CHECK(strstr(air_model_report(m[0]), "fused_dag (") != NULL);
	float *res[4][2];
	for (int k = 0; k < 4; k++) {
		air_session *s;
		CHECK_OK(air_session_create(m[k], &s));
		int64_t xs[3] = {B, R, C}, ws[2] = {1, C};
		CHECK_OK(air_session_set_input(s, 0, xv, rank3 ? 3 : 2, rank3 ? xs : xs + 1));
		CHECK_OK(air_session_set_input(s, 1, wv, rank3 ? 2 : 1, rank3 ? ws : ws + 1));
		for (int o = 0; o < 2; o++) {
			res[k][o] = malloc(sizeof(float) * (size_t)n);
			CHECK_OK(air_session_set_output(s, o, res[k][o], sizeof(float) * (size_t)n));
		}
		CHECK_OK(air_session_run(s));
		air_session_destroy(s);
	}
	for (int o = 0; o < 2; o++) {
		int64_t bad = 0;
		for (int k = 1; k < 4; k++)
			for (int64_t j = 0; j < n; j++)
				bad += !close_to(res[k][o][j], res[2][o][j], 0.0f) || !close_to(res[0][o][j], res[2][o][j], 0.0f);
		if (bad)
			fprintf(stderr, "broadcast rank3 %d [%lld, %lld] output %d: %lld differ\n", rank3, (long long)R,
				(long long)C, o, (long long)bad);
		CHECK(bad == 0);
	}
	for (int k = 0; k < 4; k++) {
		free(res[k][0]), free(res[k][1]);
		air_model_destroy(m[k]);
	}
	free(xv), free(wv), free(bias);
	air_graph_destroy(g);
}

int main(void)
{
	const int64_t sizes[] = {1, 7, 255, 256, 257, 1000, 16385, 40001};
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
		for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
			test_case(&cases[c], sizes[k]);
	test_broadcast(0, 37, 19);
	test_broadcast(0, 300, 67); /* past a thread's grain */
	test_broadcast(1, 5, 300);  /* the period longer than a tile */
	return check_report("test_fuse_dag");
}

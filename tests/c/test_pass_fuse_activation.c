/* test_pass_fuse_activation.c - GELU written out in elementwise ops becomes
 * one gelu_tanh / gelu op: every operand order and form of the cube, the
 * erf form with a multiply and with a divide, and then the linear before
 * it takes it as its epilogue. Near misses (another constant, an
 * intermediate used twice, another input under the cube) stay as they
 * are. Results against the graph without the pass, in the reference
 * kernels, over values out to the tails. */
#include <math.h>
#include <stdio.h>

#include "pass_graph.h"

static air_value unary(air_graph *g, const char *op, air_value a)
{
	return node(g, op, &a, 1, NULL, 0);
}

/* op(a, c) or op(c, a) */
static air_value with(air_graph *g, const char *op, air_value a, float c, int scalar_first)
{
	return scalar_first ? binary(g, op, scalar(g, c), a) : binary(g, op, a, scalar(g, c));
}

enum { CUBE_POW, CUBE_X_XX, CUBE_XX_X };

typedef struct gelu_form {
	const char *label;
	int erf;        /* 0: tanh form; 1: erf(x * 1/sqrt2); 2: erf(x / sqrt2) */
	int cube;       /* CUBE_* (tanh form) */
	int swap;       /* every commutative op with its operands the other way round */
	float k_cube;   /* 0.044715, or a near miss */
	int extra_use;  /* the tanh / erf output is also a graph output */
	int other_cube; /* the cube is of another value than x */
	int want;       /* does it match? */
} gelu_form;

/* y = x * 0.5 * (1 + f(...)) after a linear [M, K] x [N, K]^T + bias */
static air_graph *build(const gelu_form *f, int64_t M, int64_t K, int64_t N, int linear)
{
	air_graph *g;
	CHECK_OK(air_graph_create(&g));
	int64_t xd[2] = {M, K}, wd[2] = {N, K}, bd[1] = {N};
	air_value x = input(g, "x", 2, xd);
	if (linear) {
		air_value in[3] = {x, constant(g, 2, wd, -0.3f, 0.3f), constant(g, 1, bd, -0.5f, 0.5f)};
		x = node(g, "linear", in, 3, NULL, 0);
	}
	int s = f->swap;
	air_value inner;
	if (!f->erf) {
		air_value base = f->other_cube ? unary(g, "neg", x) : x, cube;
		if (f->cube == CUBE_POW)
			cube = with(g, "pow", base, 3.0f, 0);
		else if (f->cube == CUBE_X_XX)
			cube = s ? binary(g, "mul", binary(g, "mul", base, base), base)
				 : binary(g, "mul", base, binary(g, "mul", base, base));
		else
			cube = binary(g, "mul", binary(g, "mul", base, base), base);
		air_value t = with(g, "mul", cube, f->k_cube, s);
		air_value v = s ? binary(g, "add", t, x) : binary(g, "add", x, t);
		inner = unary(g, "tanh", with(g, "mul", v, 0.7978845608f, !s));
	} else if (f->erf == 1) {
		inner = unary(g, "erf", with(g, "mul", x, 0.70710678f, s));
	} else {
		inner = unary(g, "erf", with(g, "div", x, 1.41421356f, 0));
	}
	air_value a = with(g, "add", inner, 1.0f, s);
	air_value h = with(g, "mul", x, 0.5f, !s);
	air_value y = s ? binary(g, "mul", a, h) : binary(g, "mul", h, a);
	air_value outs[2] = {y, inner};
	CHECK_OK(air_graph_set_outputs(g, outs, f->extra_use ? 2 : 1));
	return g;
}

static void check_form(const gelu_form *f, int linear)
{
	const int64_t M = 37, K = 24, N = 29;
	air_graph *g = build(f, M, K, N, linear);
	/* the pass alone, then with the epilogue pass after it */
	uint32_t others = ~(uint32_t)(AIR_PASS_FUSE_ACTIVATION | AIR_PASS_FUSE_EPILOGUE);
	air_model *on = compile(g, 0, others), *off = compile(g, 0, others | AIR_PASS_FUSE_ACTIVATION);
	air_model *ref = compile(g, AIR_COMPILE_REFERENCE_KERNELS, others | AIR_PASS_FUSE_ACTIVATION);
	const char *rep = air_model_report(on);
	const char *want_log = f->erf ? "0 tanh GELU(s), 1 erf GELU(s)" : "1 tanh GELU(s), 0 erf GELU(s)";
	int matched = strstr(rep, want_log) != NULL;
	if (matched != f->want)
		fprintf(stderr, "%s (linear %d): matched %d, want %d\n%s", f->label, linear, matched, f->want, rep);
	CHECK(matched == f->want);
	if (f->want && linear) {
		const char *ep = f->erf ? "linear epilogue: + bias -> gelu\n" : "linear epilogue: + bias -> gelu_tanh";
		CHECK(strstr(rep, ep) != NULL);
		CHECK(steps(on) == 1);
	}
	/* x over [-6, 6]: both tails of the GELU */
	float *x = randv(M * K, -6.0f, 6.0f);
	if (!linear)
		for (int64_t i = 0; i < M * K; i++)
			x[i] *= 1.5f;
	int rank[1] = {2};
	int64_t dims[1][4] = {{M, K}}, n[3];
	float *r[3] = {run(on, 1, &x, rank, dims, &n[0]), run(off, 1, &x, rank, dims, &n[1]),
		       run(ref, 1, &x, rank, dims, &n[2])};
	int bad = 0;
	double worst = 0;
	for (int64_t i = 0; i < n[2]; i++) {
		double c = r[2][i], scale = 1.0 + fabs(c);
		double e = fmax(fabs(r[0][i] - c), fabs(r[1][i] - c)) / scale;
		worst = fmax(worst, e);
		bad += !(e <= 2e-5);
	}
	if (bad)
		fprintf(stderr, "%s (linear %d): %d elements differ (worst %.3g)\n", f->label, linear, bad, worst);
	CHECK(bad == 0);
	for (int k = 0; k < 3; k++)
		free(r[k]);
	free(x);
	air_model_destroy(on), air_model_destroy(off), air_model_destroy(ref);
	air_graph_destroy(g);
}

int main(void)
{
	static const gelu_form forms[] = {
		{"tanh, pow", 0, CUBE_POW, 0, 0.044715f, 0, 0, 1},
		{"tanh, pow, swapped", 0, CUBE_POW, 1, 0.044715f, 0, 0, 1},
		{"tanh, x*(x*x)", 0, CUBE_X_XX, 0, 0.044715f, 0, 0, 1},
		{"tanh, (x*x)*x, swapped", 0, CUBE_X_XX, 1, 0.044715f, 0, 0, 1},
		{"tanh, (x*x)*x", 0, CUBE_XX_X, 0, 0.044715f, 0, 0, 1},
		{"erf, mul", 1, 0, 0, 0, 0, 0, 1},
		{"erf, mul, swapped", 1, 0, 1, 0, 0, 0, 1},
		{"erf, div", 2, 0, 0, 0, 0, 0, 1},
		{"near miss: 0.0447", 0, CUBE_POW, 0, 0.0447f, 0, 0, 0},
		{"near miss: tanh used twice", 0, CUBE_POW, 0, 0.044715f, 1, 0, 0},
		{"near miss: erf used twice", 1, 0, 0, 0, 1, 0, 0},
		{"near miss: cube of -x", 0, CUBE_X_XX, 0, 0.044715f, 0, 1, 0},
	};
	for (size_t k = 0; k < sizeof forms / sizeof forms[0]; k++)
		for (int linear = 0; linear < 2; linear++)
			check_form(&forms[k], linear);
	for (int i = 0; i < nkeep; i++)
		free(keep[i]);
	return check_report("test_pass_fuse_activation");
}

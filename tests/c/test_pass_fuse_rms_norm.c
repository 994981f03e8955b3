/* test_pass_fuse_rms_norm.c - an RMS norm written out in elementwise ops
 * (w * (x * rsqrt(mean(x^2, -1, keepdim) + eps)), as LLaMA writes it)
 * becomes one rms_norm op: with and without the weight, every operand
 * order, x^2 as x * x and as pow(x, 2). Near misses stay as they are: an
 * intermediate that is also a graph output, the mean over another dim,
 * eps that is not a constant, a weight that is not [n]. Results against
 * the graph with the pass off; the report's steps say what ran. */
#include <math.h>
#include <stdio.h>

#include "pass_graph.h"

enum { R = 33, N = 96 };

enum {
	F_SWAP = 1,         /* every product and the eps add with operands the other way */
	F_POW = 2,          /* x^2 as pow(x, 2) */
	F_NO_WEIGHT = 4,    /* no w: rms_norm(x) */
	N_EXTRA_USE = 8,    /* the mean is also a graph output */
	N_OTHER_AXIS = 16,  /* the mean over dim 0 (keepdim), not the last */
	N_EPS_INPUT = 32,   /* eps is an input, not a constant */
	N_WEIGHT_2D = 64,   /* w is [1, n]: the inner part still fuses, w * stays */
};

static air_value ordered(air_graph *g, const char *op, air_value a, air_value b, int swap)
{
	return swap ? binary(g, op, b, a) : binary(g, op, a, b);
}

static air_graph *build(int flags)
{
	air_graph *g;
	CHECK_OK(air_graph_create(&g));
	const int64_t xd[2] = {R, N}, one[1] = {1};
	air_value x = input(g, "x", 2, xd);
	air_value eps = flags & N_EPS_INPUT ? input(g, "eps", 1, one) : scalar(g, 1e-6f);
	int s = flags & F_SWAP;
	air_value sq;
	if (flags & F_POW) {
		air_value in[2] = {x, scalar(g, 2.0f)};
		sq = node(g, "pow", in, 2, NULL, 0);
	} else {
		sq = binary(g, "mul", x, x);
	}
	const int64_t axes[1] = {flags & N_OTHER_AXIS ? 0 : 1};
	air_attr ma[2] = {ints("axes", axes, 1), iattr("keepdim", 1)};
	air_value var = node(g, "mean", &sq, 1, ma, 2);
	air_value t = ordered(g, "add", var, eps, s);
	air_value r = node(g, "rsqrt", &t, 1, NULL, 0);
	air_value y = ordered(g, "mul", x, r, s);
	if (!(flags & F_NO_WEIGHT)) {
		const int64_t wd1[1] = {N}, wd2[2] = {1, N};
		air_value w = flags & N_WEIGHT_2D ? constant(g, 2, wd2, 0.5f, 1.5f) : constant(g, 1, wd1, 0.5f, 1.5f);
		y = ordered(g, "mul", w, y, s);
	}
	air_value outs[2] = {y, var};
	CHECK_OK(air_graph_set_outputs(g, outs, flags & N_EXTRA_USE ? 2 : 1));
	return g;
}

static void check(int flags, int want_norms, int want_muls)
{
	air_graph *g = build(flags);
	air_model *on = compile(g, 0, 0), *off = compile(g, 0, AIR_PASS_FUSE_RMS_NORM);
	air_graph_destroy(g);
	float *x = randv(R * N, -3, 3), eps = 1e-6f;
	x[5] = 1e4f; /* a large row */
	for (int i = 0; i < N; i++)
		x[2 * N + i] = 0.0f; /* a zero row: 0 * rsqrt(eps) */
	float *in[2] = {x, &eps};
	int rank[2] = {2, 1};
	int64_t dims[2][4] = {{R, N, 0, 0}, {1, 0, 0, 0}};
	int n_in = flags & N_EPS_INPUT ? 2 : 1;
	int64_t n_on, n_off;
	float *y_on = run(on, n_in, in, rank, dims, &n_on), *y_off = run(off, n_in, in, rank, dims, &n_off);
	CHECK(n_on == n_off && n_on == R * N);
	double worst = 0;
	for (int64_t i = 0; i < n_on; i++) {
		double e = fabs((double)y_on[i] - (double)y_off[i]) / (1.0 + fabs((double)y_off[i]));
		worst = e > worst || e != e ? (e != e ? INFINITY : e) : worst;
	}
	int norms = count_steps(on, "rms_norm"), muls = count_steps(on, "mul");
	if (worst > 2e-6 || norms != want_norms || muls != want_muls)
		fprintf(stderr, "flags %d: worst %g, %d rms_norm (want %d), %d mul (want %d)\n%s\n", flags, worst, norms,
			want_norms, muls, want_muls, air_model_report(on));
	CHECK(worst <= 2e-6);
	CHECK(norms == want_norms);
	CHECK(muls == want_muls);
	CHECK(count_steps(off, "rms_norm") == 0);
	free(x);
	free(y_on);
	free(y_off);
	air_model_destroy(on);
	air_model_destroy(off);
}

int main(void)
{
	/* fused: one step, no product left */
	check(0, 1, 0);
	check(F_SWAP, 1, 0);
	check(F_POW, 1, 0);
	check(F_POW | F_SWAP, 1, 0);
	check(F_NO_WEIGHT, 1, 0);
	check(F_NO_WEIGHT | F_SWAP | F_POW, 1, 0);
	/* near misses: nothing fuses (x * x, x * r and w * ... stay) */
	check(N_EXTRA_USE, 0, 3);
	check(N_OTHER_AXIS, 0, 1); /* x * r and w * . ([1, N], [N] repeat over rows): one fused_dag */
	check(N_EPS_INPUT, 0, 3);
	/* a [1, n] weight: the norm fuses without it, its product stays */
	check(N_WEIGHT_2D, 1, 1);
	return check_report("test_pass_fuse_rms_norm");
}

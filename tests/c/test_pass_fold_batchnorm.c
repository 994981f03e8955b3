/* test_pass_fold_batchnorm.c - the fold_batchnorm pass on small graphs
 * built through the public API: conv2d + batch_norm (with and without
 * weight and bias, conv with and without bias, grouped and depthwise),
 * followed by per-channel mul/add/sub/div by constants, and linear + mul/add
 * or batch_norm; the folded model has fewer steps and gives the unfolded
 * result (compiled with the pass off) within f32 rounding. The pass must
 * not fire when the product's output has a second use or is a graph output,
 * when a batch_norm parameter or the weight is not a constant, or when the
 * operand is not per channel. A 16-bit conv weight folds into a 16-bit
 * weight. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "air/air.h"
#include "check.h"
#include "kernels/common/half.h"
#include "pass_graph.h"

/* Only the pass under test on or off (every other pass off in both, so
 * step counts say what this pass did). */
enum { OTHERS = ~(uint32_t)AIR_PASS_FOLD_BATCHNORM };

/* Compiles g with the fold on and off (and off with the reference
 * kernels), checks the step counts (want_removed steps fewer), the log,
 * and that all three agree. */
static void compare(const char *label, const air_graph *g, int n_in, float *const *in, const int *rank,
		    int64_t (*dims)[4], int want_removed)
{
	air_model *on = compile(g, 0, OTHERS), *off = compile(g, 0, OTHERS | AIR_PASS_FOLD_BATCHNORM);
	air_model *ref = compile(g, AIR_COMPILE_REFERENCE_KERNELS, OTHERS | AIR_PASS_FOLD_BATCHNORM);
	if (!on || !off || !ref) {
		air_model_destroy(on), air_model_destroy(off), air_model_destroy(ref);
		return;
	}
	int removed = steps(off) - steps(on);
	if (removed != want_removed)
		fprintf(stderr, "%s: %d steps removed, want %d\n%s", label, removed, want_removed, air_model_report(on));
	CHECK(removed == want_removed);
	CHECK(strstr(air_model_report(off), "fold_batchnorm: off") != NULL);
	int64_t n1, n2, n3;
	float *a = run(on, n_in, in, rank, dims, &n1), *b = run(off, n_in, in, rank, dims, &n2);
	float *c = run(ref, n_in, in, rank, dims, &n3);
	CHECK(n1 == n2 && n2 == n3);
	int bad = 0;
	double worst = 0;
	for (int64_t i = 0; i < n1 && n1 == n2 && n2 == n3; i++) {
		double scale = 1.0 + fabs((double)c[i]);
		double e = fmax(fabs((double)a[i] - c[i]), fabs((double)b[i] - c[i])) / scale;
		worst = fmax(worst, e);
		bad += !(e <= 2e-5);
	}
	if (bad)
		fprintf(stderr, "%s: %d elements differ (worst relative %.3g)\n", label, bad, worst);
	CHECK(bad == 0);
	free(a), free(b), free(c);
	air_model_destroy(on), air_model_destroy(off), air_model_destroy(ref);
}

/* ---- conv2d + batch_norm (+ scale/shift) ----------------------------------- */

typedef struct conv_case {
	int64_t N, C, H, W, O, K, groups, pad;
	int conv_bias, bn_weight, bn_bias;
	int extra; /* 0: none; 1: then mul [O,1,1]; 2: then add [1,O,1,1]; 3: sub [1]; 4: div [O,1,1] */
} conv_case;

static air_value conv(air_graph *g, air_value x, const conv_case *c, int wconst)
{
	int64_t wd[4] = {c->O, c->C / c->groups, c->K, c->K}, bd[1] = {c->O}, pad[2] = {c->pad, c->pad};
	air_value in[3] = {x, wconst ? constant(g, 4, wd, -0.5f, 0.5f) : input(g, "w", 4, wd)};
	int n = 2;
	if (c->conv_bias)
		in[n++] = constant(g, 1, bd, -1, 1);
	air_attr attrs[3] = {iattr("groups", c->groups), iattr("has_bias", c->conv_bias), ints("padding", pad, 2)};
	return node(g, "conv2d", in, n, attrs, 3);
}

/* batch_norm of y with constant parameters (the mean an input if
 * mean_input) */
static air_value bn(air_graph *g, air_value y, int64_t C, int hw, int hb, int mean_input)
{
	int64_t cd[1] = {C};
	air_value in[5] = {y};
	int n = 1;
	if (hw)
		in[n++] = constant(g, 1, cd, 0.5f, 2.0f);
	if (hb)
		in[n++] = constant(g, 1, cd, -1, 1);
	in[n++] = mean_input ? input(g, "mean", 1, cd) : constant(g, 1, cd, -0.5f, 0.5f);
	in[n++] = constant(g, 1, cd, 0.25f, 1.5f);
	air_attr attrs[3] = {{"eps", AIR_ATTR_FLOAT, 0, 1e-3, NULL, 0}, iattr("has_weight", hw), iattr("has_bias", hb)};
	return node(g, "batch_norm", in, n, attrs, 3);
}

static void test_conv_bn(const conv_case *c)
{
	air_graph *g;
	CHECK_OK(air_graph_create(&g));
	int64_t xd[4] = {c->N, c->C, c->H, c->W};
	air_value x = input(g, "x", 4, xd);
	air_value y = bn(g, conv(g, x, c, 1), c->O, c->bn_weight, c->bn_bias, 0);
	int64_t chan[4] = {c->O, 1, 1}, chan4[4] = {1, c->O, 1, 1}, one[1] = {1};
	int removed = 1;
	switch (c->extra) {
	case 1: y = binary(g, "mul", constant(g, 3, chan, -2, 2), y), removed++; break;
	case 2: y = binary(g, "add", y, constant(g, 4, chan4, -1, 1)), removed++; break;
	case 3: y = binary(g, "sub", y, constant(g, 1, one, -1, 1)), removed++; break;
	case 4: y = binary(g, "div", y, constant(g, 3, chan, 0.5f, 2)), removed++; break;
	}
	CHECK_OK(air_graph_set_outputs(g, &y, 1));
	float *xv = randv(c->N * c->C * c->H * c->W, -1, 1);
	int rank[1] = {4};
	int64_t dims[1][4] = {{c->N, c->C, c->H, c->W}};
	char label[128];
	snprintf(label, sizeof label, "conv+bn N%lld C%lld %lldx%lld O%lld k%lld g%lld bias %d w %d b %d extra %d",
		 (long long)c->N, (long long)c->C, (long long)c->H, (long long)c->W, (long long)c->O, (long long)c->K,
		 (long long)c->groups, c->conv_bias, c->bn_weight, c->bn_bias, c->extra);
	compare(label, g, 1, &xv, rank, dims, removed);
	free(xv);
	air_graph_destroy(g);
}

static const conv_case conv_cases[] = {
	/* N  C  H   W   O  K  g  pad cb bw bb extra */
	{1, 3, 7, 7, 5, 3, 1, 1, 0, 1, 1, 0},
	{2, 5, 11, 13, 13, 3, 1, 0, 1, 1, 1, 0},
	{1, 4, 5, 5, 4, 1, 1, 0, 0, 0, 0, 0},
	{1, 4, 5, 5, 4, 1, 1, 0, 1, 1, 0, 0},
	{1, 4, 5, 5, 4, 1, 1, 0, 0, 0, 1, 0},
	{2, 6, 9, 7, 6, 3, 6, 1, 0, 1, 1, 0}, /* depthwise */
	{1, 6, 9, 7, 4, 3, 2, 1, 1, 1, 1, 0}, /* grouped */
	{1, 3, 7, 7, 5, 3, 1, 1, 0, 1, 1, 1},
	{3, 2, 5, 3, 7, 3, 1, 1, 1, 1, 1, 2},
	{1, 3, 7, 7, 5, 3, 1, 1, 0, 1, 1, 3},
	{1, 3, 7, 7, 5, 3, 1, 1, 0, 0, 1, 4},
	{0, 3, 7, 7, 5, 3, 1, 1, 0, 1, 1, 1}, /* empty batch */
	{1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0},
};

/* ---- a 16-bit conv weight ---------------------------------------------------- */

/* conv2d with a bf16 or f16 constant weight (and an f32 bias, or none) +
 * batch_norm: the folded weight keeps the weight's type, rounded once more
 * (the weight times the scale), the bias stays f32. Against the unfolded
 * graph (reference kernels both, which round x to the weight's type as the
 * fast ones do): within that extra rounding of the weight, 2^-8 of the
 * terms' magnitudes. */
static void test_conv_bn_16bit(air_dtype wt, int conv_bias, int64_t K)
{
	const int64_t N = 2, C = 5, H = 7, W = 6, O = 9;
	air_graph *g;
	CHECK_OK(air_graph_create(&g));
	int64_t xd[4] = {N, C, H, W}, wd[4] = {O, C, K, K}, bd[1] = {O}, pad[2] = {K / 2, K / 2};
	air_value x = input(g, "x", 4, xd);
	int64_t wn = O * C * K * K;
	float *wf = randv(wn, -0.5f, 0.5f);
	uint16_t *w16 = malloc(sizeof *w16 * (size_t)wn);
	for (int64_t i = 0; i < wn; i++)
		w16[i] = wt == AIR_BF16 ? k_f32_to_bf16(wf[i]) : k_f32_to_f16(wf[i]);
	keep[nkeep++] = wf;
	keep[nkeep++] = (float *)w16;
	air_value in[3] = {x, 0, 0};
	CHECK_OK(air_graph_add_constant(g, wt, 4, wd, w16, AIR_CONSTANT_BORROW, &in[1]));
	int n = 2;
	if (conv_bias)
		in[n++] = constant(g, 1, bd, -1, 1);
	air_attr attrs[3] = {iattr("groups", 1), iattr("has_bias", conv_bias), ints("padding", pad, 2)};
	air_value y = bn(g, node(g, "conv2d", in, n, attrs, 3), O, 1, 1, 0);
	CHECK_OK(air_graph_set_outputs(g, &y, 1));
	float *xv = randv(N * C * H * W, -1, 1);
	int rank[1] = {4};
	int64_t dims[1][4] = {{N, C, H, W}};
	air_model *on = compile(g, AIR_COMPILE_REFERENCE_KERNELS, OTHERS);
	air_model *off = compile(g, AIR_COMPILE_REFERENCE_KERNELS, OTHERS | AIR_PASS_FOLD_BATCHNORM);
	if (on && off) {
		CHECK(steps(off) - steps(on) == 1);
		int64_t n1, n2;
		float *a = run(on, 1, &xv, rank, dims, &n1), *b = run(off, 1, &xv, rank, dims, &n2);
		CHECK(n1 == n2 && n1 == N * O * H * W);
		/* |terms| <= 1 * 0.5 * |s| with |s| <= 2 / sqrt(0.25): C * K * K of them */
		double bound = (double)(C * K * K) * 0.5 * 4.0 / 256.0, worst = 0;
		for (int64_t i = 0; i < n1 && n1 == n2; i++)
			worst = fmax(worst, fabs((double)a[i] - b[i]));
		if (!(worst <= bound))
			fprintf(stderr, "conv+bn %s K%lld bias %d: off by %.3g (bound %.3g)\n", wt == AIR_BF16 ? "bf16" : "f16",
				(long long)K, conv_bias, worst, bound);
		CHECK(worst <= bound);
		/* and not bit-equal to an unrounded fold: the weight is 16-bit */
		CHECK(worst > 0);
		free(a), free(b);
	}
	air_model_destroy(on), air_model_destroy(off);
	free(xv);
	air_graph_destroy(g);
}

/* ---- linear + scale/shift or batch_norm ------------------------------------ */

static void test_linear(int64_t M, int64_t K, int64_t N, int what)
{
	air_graph *g;
	CHECK_OK(air_graph_create(&g));
	int64_t xd[2] = {M, K}, wd[2] = {N, K}, nd[1] = {N}, row[2] = {1, N};
	air_value x = input(g, "x", 2, xd);
	air_value in[3] = {x, constant(g, 2, wd, -0.5f, 0.5f), constant(g, 1, nd, -1, 1)};
	air_attr hb = iattr("has_bias", what == 0);
	air_value y = node(g, "linear", in, what == 0 ? 3 : 2, &hb, 1);
	switch (what) {
	case 0: y = binary(g, "mul", y, constant(g, 1, nd, -2, 2)); break;
	case 1: y = binary(g, "add", constant(g, 2, row, -1, 1), y); break;
	case 2: y = bn(g, y, N, 1, 1, 0); break;
	}
	CHECK_OK(air_graph_set_outputs(g, &y, 1));
	float *xv = randv(M * K, -1, 1);
	int rank[1] = {2};
	int64_t dims[1][4] = {{M, K}};
	char label[96];
	snprintf(label, sizeof label, "linear %lldx%lldx%lld then %s", (long long)M, (long long)K, (long long)N,
		 what == 0 ? "mul" : what == 1 ? "add" : "batch_norm");
	compare(label, g, 1, &xv, rank, dims, 1);
	free(xv);
	air_graph_destroy(g);
}

/* ---- where it must not fire ---------------------------------------------- */

static void test_no_fold(int which)
{
	conv_case c = {2, 3, 6, 5, 4, 3, 1, 1, 1, 1, 1, 0};
	air_graph *g;
	CHECK_OK(air_graph_create(&g));
	int64_t xd[4] = {c.N, c.C, c.H, c.W};
	air_value x = input(g, "x", 4, xd);
	air_value outs[2];
	int nout = 1;
	air_value y = conv(g, x, &c, which != 2);
	int64_t full[4] = {1, c.O, c.H, c.W}, wide[4] = {2, c.O, 1, 1};
	switch (which) {
	case 0: /* the conv output has a second use */
		outs[0] = bn(g, y, c.O, 1, 1, 0);
		outs[0] = binary(g, "add", outs[0], y);
		break;
	case 1: /* the conv output is a graph output */
		outs[0] = bn(g, y, c.O, 1, 1, 0);
		outs[1] = y;
		nout = 2;
		break;
	case 2: /* the weight is an input */
		outs[0] = bn(g, y, c.O, 1, 1, 0);
		break;
	case 3: /* the mean is an input */
		outs[0] = bn(g, y, c.O, 1, 1, 1);
		break;
	case 4: /* varies over H and W: not per channel */
		outs[0] = binary(g, "mul", y, constant(g, 4, full, -1, 1));
		break;
	case 5: /* varies over the batch, not the channel */
		outs[0] = binary(g, "mul", y, constant(g, 4, wide, -1, 1));
		break;
	case 6: /* c - y: the pass takes only x - c and x / c */
		outs[0] = binary(g, "sub", constant(g, 3, (int64_t[]){c.O, 1, 1}, 1, 2), y);
		break;
	}
	CHECK_OK(air_graph_set_outputs(g, outs, nout));
	float *in[2] = {randv(c.N * c.C * c.H * c.W, -1, 1), randv(c.O * c.C * 9, -1, 1)};
	int rank[2] = {4, 4};
	int64_t dims[2][4] = {{c.N, c.C, c.H, c.W}, {c.O, c.C, 3, 3}};
	if (which == 3) {
		in[1][0] = 0.0f;
		rank[1] = 1;
		dims[1][0] = c.O;
	}
	char label[64];
	snprintf(label, sizeof label, "no fold %d", which);
	compare(label, g, which == 2 || which == 3 ? 2 : 1, in, rank, dims, 0);
	free(in[0]), free(in[1]);
	air_graph_destroy(g);
}

/* conv + bn + mul + add: the whole chain folds into one conv, in the one
 * weight copy the pass made. */
static void test_chain(void)
{
	conv_case c = {2, 5, 9, 8, 7, 3, 1, 1, 1, 1, 1, 0};
	air_graph *g;
	CHECK_OK(air_graph_create(&g));
	int64_t xd[4] = {c.N, c.C, c.H, c.W}, chan[3] = {c.O, 1, 1};
	air_value x = input(g, "x", 4, xd);
	air_value y = bn(g, conv(g, x, &c, 1), c.O, 1, 1, 0);
	y = binary(g, "mul", y, constant(g, 3, chan, -2, 2));
	y = binary(g, "add", y, constant(g, 3, chan, -2, 2));
	CHECK_OK(air_graph_set_outputs(g, &y, 1));
	float *xv = randv(c.N * c.C * c.H * c.W, -1, 1);
	int rank[1] = {4};
	int64_t dims[1][4] = {{c.N, c.C, c.H, c.W}};
	compare("conv+bn+mul+add", g, 1, &xv, rank, dims, 3);
	air_model *m = compile(g, 0, OTHERS);
	if (m) {
		const char *r = air_model_report(m);
		CHECK(strstr(r, "fold_batchnorm: 1 batch_norm(s) and 2 scale/shift op(s) folded") != NULL);
		/* the graph's 8 constants + one new weight and one new bias */
		CHECK(strstr(r, "constants: 10,") != NULL);
	}
	air_model_destroy(m);
	free(xv);
	air_graph_destroy(g);
}

int main(void)
{
	for (size_t i = 0; i < sizeof conv_cases / sizeof conv_cases[0]; i++)
		test_conv_bn(&conv_cases[i]);
	test_conv_bn_16bit(AIR_BF16, 0, 3);
	test_conv_bn_16bit(AIR_BF16, 1, 1);
	test_conv_bn_16bit(AIR_F16, 1, 3);
	const int64_t lin[][3] = {{1, 1, 1}, {7, 13, 5}, {33, 17, 65}, {0, 3, 4}};
	for (int i = 0; i < 4; i++)
		for (int what = 0; what < 3; what++)
			test_linear(lin[i][0], lin[i][1], lin[i][2], what);
	for (int which = 0; which < 7; which++)
		test_no_fold(which);
	test_chain();
	for (int i = 0; i < nkeep; i++)
		free(keep[i]);
	return check_report("test_pass_fold_batchnorm");
}

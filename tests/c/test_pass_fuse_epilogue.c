/* test_pass_fuse_epilogue.c - the fuse_epilogue pass on small graphs built
 * through the public API: conv2d + bias add + residual add + relu (ResNet's
 * block end, identity or downsample branch), linear with each activation,
 * what nn.Linear lowers to (reshape, addmm over a transposed weight,
 * reshape, residual add), mm with a constant B; the fused model has fewer
 * steps and gives the unfused result (the pass off, fast and reference
 * kernels) within f32 rounding, at awkward sizes. It must not fuse across a
 * value with a second use or that is a graph output, a broadcast that is
 * not per channel, clamp bounds that are no activation, or an addmm with
 * beta != 1. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "air/air.h"
#include "check.h"
#include "pass_graph.h"

static air_attr fattr(const char *name, double v)
{
	air_attr a = {name, AIR_ATTR_FLOAT, 0, v, NULL, 0};
	return a;
}

static air_value unary(air_graph *g, const char *op, air_value a)
{
	return node(g, op, &a, 1, NULL, 0);
}

/* Only the pass under test on or off (every other pass off in both, so
 * step counts say what this pass did). */
enum { OTHERS = ~(uint32_t)AIR_PASS_FUSE_EPILOGUE };

static void compare(const char *label, const air_graph *g, int n_in, float *const *in, const int *rank,
		    int64_t (*dims)[4], int want_removed, const char *want_log)
{
	air_model *on = compile(g, 0, OTHERS), *off = compile(g, 0, OTHERS | AIR_PASS_FUSE_EPILOGUE);
	air_model *ref = compile(g, AIR_COMPILE_REFERENCE_KERNELS, OTHERS | AIR_PASS_FUSE_EPILOGUE);
	air_model *ref_on = compile(g, AIR_COMPILE_REFERENCE_KERNELS, OTHERS);
	if (!on || !off || !ref || !ref_on) {
		air_model_destroy(on), air_model_destroy(off), air_model_destroy(ref), air_model_destroy(ref_on);
		return;
	}
	int removed = steps(off) - steps(on);
	if (removed != want_removed)
		fprintf(stderr, "%s: %d steps removed, want %d\n%s", label, removed, want_removed, air_model_report(on));
	CHECK(removed == want_removed);
	if (want_log && !strstr(air_model_report(on), want_log)) {
		fprintf(stderr, "%s: no '%s' in\n%s", label, want_log, air_model_report(on));
		CHECK(0);
	}
	int64_t n[4];
	float *r[4] = {run(on, n_in, in, rank, dims, &n[0]), run(off, n_in, in, rank, dims, &n[1]),
		       run(ref_on, n_in, in, rank, dims, &n[2]), run(ref, n_in, in, rank, dims, &n[3])};
	CHECK(n[0] == n[3] && n[1] == n[3] && n[2] == n[3]);
	int bad = 0;
	double worst = 0;
	for (int64_t i = 0; i < n[3] && n[0] == n[3] && n[1] == n[3] && n[2] == n[3]; i++) {
		double c = r[3][i], scale = 1.0 + fabs(c), e = 0;
		for (int k = 0; k < 3; k++)
			e = fmax(e, fabs((double)r[k][i] - c) / scale);
		worst = fmax(worst, e);
		bad += !(e <= 2e-5);
	}
	if (bad)
		fprintf(stderr, "%s: %d elements differ (worst relative %.3g)\n", label, bad, worst);
	CHECK(bad == 0);
	for (int k = 0; k < 4; k++)
		free(r[k]);
	air_model_destroy(on), air_model_destroy(off), air_model_destroy(ref), air_model_destroy(ref_on);
}

/* ---- conv2d ------------------------------------------------------------------ */

typedef struct conv_case {
	int64_t N, C, H, W, O, K, groups, pad, stride;
} conv_case;

static air_value conv(air_graph *g, air_value x, const conv_case *c, int wconst, int bias)
{
	int64_t wd[4] = {c->O, c->C / c->groups, c->K, c->K}, bd[1] = {c->O}, pad[2] = {c->pad, c->pad};
	int64_t st[2] = {c->stride, c->stride};
	air_value in[3] = {x, wconst ? constant(g, 4, wd, -0.5f, 0.5f) : input(g, "w", 4, wd)};
	int n = 2;
	if (bias)
		in[n++] = constant(g, 1, bd, -1, 1);
	air_attr attrs[4] = {iattr("groups", c->groups), iattr("has_bias", bias), ints("padding", pad, 2),
			     ints("stride", st, 2)};
	return node(g, "conv2d", in, n, attrs, 4);
}

static int64_t out_hw(int64_t in, const conv_case *c)
{
	return (in + 2 * c->pad - c->K) / c->stride + 1;
}

/* conv [+ bias add] [+ residual add] [+ relu]; wconst: weight constant */
static void test_conv_chain(const conv_case *c, int bias_add, int residual, int relu, int wconst)
{
	air_graph *g;
	CHECK_OK(air_graph_create(&g));
	int64_t OH = out_hw(c->H, c), OW = out_hw(c->W, c);
	int64_t xd[4] = {c->N, c->C, c->H, c->W}, rd[4] = {c->N, c->O, OH, OW}, chan[3] = {c->O, 1, 1};
	air_value x = input(g, "x", 4, xd);
	air_value y = conv(g, x, c, wconst, 1);
	int removed = 0;
	if (bias_add)
		y = binary(g, "add", constant(g, 3, chan, -1, 1), y), removed++;
	if (residual)
		y = binary(g, "add", y, input(g, "res", 4, rd)), removed++;
	if (relu)
		y = unary(g, "relu", y), removed++;
	CHECK_OK(air_graph_set_outputs(g, &y, 1));
	float *in[3];
	int rank[3] = {4, 4, 4}, n_in = 0;
	int64_t dims[3][4] = {{0}};
	in[n_in] = randv(c->N * c->C * c->H * c->W, -1, 1);
	memcpy(dims[n_in++], xd, sizeof xd);
	if (!wconst) {
		int64_t wd[4] = {c->O, c->C / c->groups, c->K, c->K};
		in[n_in] = randv(wd[0] * wd[1] * wd[2] * wd[3], -0.5f, 0.5f);
		memcpy(dims[n_in++], wd, sizeof wd);
	}
	if (residual) {
		in[n_in] = randv(c->N * c->O * OH * OW, -2, 2);
		memcpy(dims[n_in++], rd, sizeof rd);
	}
	char label[160];
	snprintf(label, sizeof label, "conv N%lld C%lld %lldx%lld O%lld k%lld g%lld s%lld: bias %d res %d relu %d wconst %d",
		 (long long)c->N, (long long)c->C, (long long)c->H, (long long)c->W, (long long)c->O, (long long)c->K,
		 (long long)c->groups, (long long)c->stride, bias_add, residual, relu, wconst);
	compare(label, g, n_in, in, rank, dims, removed, removed ? "product(s) took" : NULL);
	for (int i = 0; i < n_in; i++)
		free(in[i]);
	air_graph_destroy(g);
}

/* ResNet's bottleneck end with a downsample branch: relu(conv3(a) + ds(x)),
 * the downsample conv coming after conv3 in node order. */
static void test_resnet_block(void)
{
	conv_case c3 = {2, 8, 7, 7, 16, 1, 1, 0, 1}, ds = {2, 4, 13, 13, 16, 1, 1, 0, 2};
	air_graph *g;
	CHECK_OK(air_graph_create(&g));
	int64_t ad[4] = {2, 8, 7, 7}, xd[4] = {2, 4, 13, 13};
	air_value a = input(g, "a", 4, ad), x = input(g, "x", 4, xd);
	air_value y3 = conv(g, a, &c3, 1, 1), yd = conv(g, x, &ds, 1, 1);
	air_value y = unary(g, "relu", binary(g, "add", y3, yd));
	CHECK_OK(air_graph_set_outputs(g, &y, 1));
	float *in[2] = {randv(2 * 8 * 49, -1, 1), randv(2 * 4 * 169, -1, 1)};
	int rank[2] = {4, 4};
	int64_t dims[2][4] = {{2, 8, 7, 7}, {2, 4, 13, 13}};
	compare("resnet block end", g, 2, in, rank, dims, 2, "1 residual(s), 1 activation(s)");
	free(in[0]), free(in[1]);
	air_graph_destroy(g);
}

/* ---- linear, addmm, mm ----------------------------------------------------- */

static const char *const act_names[] = {"relu", "relu6", "relu_clamp", "gelu", "gelu_tanh", "silu",
					"hardswish", "sigmoid", "tanh"};

static air_value activation(air_graph *g, int a, air_value y)
{
	if (a == 1) {
		air_attr at[4] = {fattr("min", 0), fattr("max", 6), iattr("has_min", 1), iattr("has_max", 1)};
		return node(g, "clamp", &y, 1, at, 4);
	}
	if (a == 2) {
		air_attr at[2] = {fattr("min", 0), iattr("has_min", 1)};
		return node(g, "clamp", &y, 1, at, 2);
	}
	return unary(g, act_names[a], y);
}

/* linear [+ bias vector add] [+ residual] + act */
static void test_linear_act(int64_t M, int64_t K, int64_t N, int act, int residual, int wconst)
{
	air_graph *g;
	CHECK_OK(air_graph_create(&g));
	int64_t xd[2] = {M, K}, wd[2] = {N, K}, nd[1] = {N}, od[2] = {M, N};
	air_value x = input(g, "x", 2, xd);
	air_value in[3] = {x, wconst ? constant(g, 2, wd, -0.5f, 0.5f) : input(g, "w", 2, wd)};
	air_attr nob = iattr("has_bias", 0);
	air_value y = node(g, "linear", in, 2, &nob, 1);
	/* a bias vector as an input (not a constant): it becomes linear's bias */
	y = binary(g, "add", y, input(g, "b", 1, nd));
	int removed = 1;
	if (residual)
		y = binary(g, "add", input(g, "res", 2, od), y), removed++;
	y = activation(g, act, y);
	removed++;
	CHECK_OK(air_graph_set_outputs(g, &y, 1));
	float *ins[4];
	int rank[4] = {2, 2, 1, 2}, n_in = 0;
	int64_t dims[4][4] = {{M, K}};
	ins[n_in++] = randv(M * K, -2, 2);
	if (!wconst) {
		ins[n_in] = randv(N * K, -0.5f, 0.5f);
		dims[n_in][0] = N, dims[n_in][1] = K, rank[n_in++] = 2;
	}
	ins[n_in] = randv(N, -3, 3);
	dims[n_in][0] = N, rank[n_in++] = 1;
	if (residual) {
		ins[n_in] = randv(M * N, -3, 3);
		dims[n_in][0] = M, dims[n_in][1] = N, rank[n_in++] = 2;
	}
	char label[128];
	snprintf(label, sizeof label, "linear %lldx%lldx%lld + %s res %d wconst %d", (long long)M, (long long)K,
		 (long long)N, act_names[act], residual, wconst);
	compare(label, g, n_in, ins, rank, dims, removed, "product(s) took");
	for (int i = 0; i < n_in; i++)
		free(ins[i]);
	air_graph_destroy(g);
}

/* What nn.Linear on [B, S, K] lowers to: reshape -> addmm(bias, x,
 * permute(w)) -> reshape -> add(residual) [-> gelu]; with mm when there is
 * no bias. All of it is one linear step. */
static void test_lowered_linear(int64_t B, int64_t S, int64_t K, int64_t N, int bias, int gelu, int wconst)
{
	air_graph *g;
	CHECK_OK(air_graph_create(&g));
	int64_t xd[3] = {B, S, K}, wd[2] = {N, K}, nd[1] = {N}, od[3] = {B, S, N};
	int64_t flat[2] = {B * S, K}, back[3] = {B, S, N}, perm[2] = {1, 0};
	air_value x = input(g, "x", 3, xd);
	air_value w = wconst ? constant(g, 2, wd, -0.5f, 0.5f) : input(g, "w", 2, wd);
	air_attr shape = ints("shape", flat, 2), pa = ints("perm", perm, 2), shape3 = ints("shape", back, 3);
	air_value x2 = node(g, "reshape", &x, 1, &shape, 1);
	air_value wt = node(g, "permute", &w, 1, &pa, 1);
	air_value y;
	int n_steps = 5 + gelu; /* reshape, permute, addmm, reshape, add [, gelu] */
	if (bias) {
		air_value in[3] = {wconst ? constant(g, 1, nd, -1, 1) : input(g, "b", 1, nd), x2, wt};
		y = node(g, "addmm", in, 3, NULL, 0);
	} else {
		y = binary(g, "mm", x2, wt);
	}
	y = node(g, "reshape", &y, 1, &shape3, 1);
	y = binary(g, "add", y, input(g, "res", 3, od));
	if (gelu)
		y = unary(g, "gelu", y);
	CHECK_OK(air_graph_set_outputs(g, &y, 1));
	float *ins[4];
	int rank[4], n_in = 0;
	int64_t dims[4][4] = {{0}};
	ins[n_in] = randv(B * S * K, -1, 1);
	rank[n_in] = 3, memcpy(dims[n_in++], xd, sizeof xd);
	if (!wconst) {
		ins[n_in] = randv(N * K, -0.5f, 0.5f);
		rank[n_in] = 2, memcpy(dims[n_in++], wd, sizeof wd);
		if (bias) {
			ins[n_in] = randv(N, -1, 1);
			rank[n_in] = 1, memcpy(dims[n_in++], nd, sizeof nd);
		}
	}
	ins[n_in] = randv(B * S * N, -1, 1);
	rank[n_in] = 3, memcpy(dims[n_in++], od, sizeof od);
	char label[128];
	snprintf(label, sizeof label, "lowered linear [%lld,%lld,%lld] N %lld bias %d gelu %d wconst %d", (long long)B,
		 (long long)S, (long long)K, (long long)N, bias, gelu, wconst);
	compare(label, g, n_in, ins, rank, dims, n_steps - 1, "1 linear(s) lifted over reshapes");
	for (int i = 0; i < n_in; i++)
		free(ins[i]);
	air_graph_destroy(g);
}

/* mm(x, B) with a constant B [K, N] and a relu: linear on B's transpose. */
static void test_mm_constant(int64_t M, int64_t K, int64_t N)
{
	air_graph *g;
	CHECK_OK(air_graph_create(&g));
	int64_t xd[2] = {M, K}, bd[2] = {K, N};
	air_value x = input(g, "x", 2, xd);
	air_value y = unary(g, "relu", binary(g, "mm", x, constant(g, 2, bd, -0.5f, 0.5f)));
	CHECK_OK(air_graph_set_outputs(g, &y, 1));
	float *xv = randv(M * K, -1, 1);
	int rank[1] = {2};
	int64_t dims[1][4] = {{M, K}};
	compare("mm constant + relu", g, 1, &xv, rank, dims, 1, "1 mm/addmm made linear");
	free(xv);
	air_graph_destroy(g);
}

/* ---- where it must not fuse ------------------------------------------------- */

static void test_no_fuse(int which)
{
	conv_case c = {2, 3, 6, 5, 4, 3, 1, 1, 1};
	air_graph *g;
	CHECK_OK(air_graph_create(&g));
	int64_t xd[4] = {c.N, c.C, c.H, c.W}, full1[4] = {1, c.O, c.H, c.W};
	air_value x = input(g, "x", 4, xd);
	air_value y = conv(g, x, &c, 1, 1), outs[2];
	int nout = 1, removed = 0;
	switch (which) {
	case 0: /* the conv output has a second use */
		outs[0] = binary(g, "add", unary(g, "relu", y), y);
		break;
	case 1: /* the conv output is a graph output */
		outs[0] = unary(g, "relu", y);
		outs[1] = y;
		nout = 2;
		break;
	case 2: /* [1, C, H, W] over N = 2: a broadcast, neither bias nor residual */
		outs[0] = binary(g, "add", y, constant(g, 4, full1, -1, 1));
		break;
	case 3: { /* clamp(0, 5) is no activation the epilogue has */
		air_attr at[4] = {fattr("min", 0), fattr("max", 5), iattr("has_min", 1), iattr("has_max", 1)};
		outs[0] = node(g, "clamp", &y, 1, at, 4);
		break;
	}
	case 4: /* relu then a residual: only the relu joins (act comes last) */
		outs[0] = binary(g, "add", unary(g, "relu", y), constant(g, 4, (int64_t[]){c.N, c.O, 6, 5}, -1, 1));
		removed = 1;
		break;
	case 5: { /* an addmm with beta 0.5 stays an addmm: no epilogue */
		int64_t ad[2] = {5, 7}, bd[2] = {7, 3}, nd[1] = {3};
		air_value a = input(g, "a", 2, ad);
		air_value in[3] = {constant(g, 1, nd, -1, 1), a, constant(g, 2, bd, -1, 1)};
		air_attr beta = fattr("beta", 0.5);
		outs[0] = unary(g, "relu", node(g, "addmm", in, 3, &beta, 1));
		break;
	}
	case 6: /* the intermediate of a chain is a graph output: conv+bias only */
		y = binary(g, "add", y, constant(g, 3, (int64_t[]){c.O, 1, 1}, -1, 1));
		outs[0] = unary(g, "relu", y);
		outs[1] = y;
		nout = 2;
		removed = 1;
		break;
	}
	CHECK_OK(air_graph_set_outputs(g, outs, nout));
	float *in[2] = {randv(c.N * c.C * c.H * c.W, -1, 1), randv(35, -1, 1)};
	int rank[2] = {4, 2};
	int64_t dims[2][4] = {{c.N, c.C, c.H, c.W}, {5, 7}};
	char label[64];
	snprintf(label, sizeof label, "no fuse %d", which);
	compare(label, g, which == 5 ? 2 : 1, in, rank, dims, removed, NULL);
	free(in[0]), free(in[1]);
	air_graph_destroy(g);
}

int main(void)
{
	static const conv_case convs[] = {
		/* N  C  H   W   O  K  g  pad stride */
		{1, 3, 7, 7, 5, 3, 1, 1, 1},
		{2, 5, 11, 13, 13, 3, 1, 0, 1},
		{3, 37, 5, 7, 29, 1, 1, 0, 1},
		{2, 6, 9, 7, 6, 3, 6, 1, 1}, /* depthwise */
		{1, 6, 9, 7, 4, 3, 2, 1, 2}, /* grouped, strided */
		{0, 3, 5, 5, 4, 3, 1, 1, 1}, /* empty batch */
		{1, 1, 1, 1, 1, 1, 1, 0, 1},
	};
	for (size_t i = 0; i < sizeof convs / sizeof convs[0]; i++)
		for (int v = 0; v < 8; v++)
			test_conv_chain(&convs[i], v & 1, (v >> 1) & 1, (v >> 2) & 1, i % 2 == 0);
	test_resnet_block();
	const int64_t lin[][3] = {{1, 1, 1}, {7, 13, 5}, {33, 17, 65}, {0, 3, 4}, {5, 0, 3}};
	for (int i = 0; i < 5; i++)
		for (int act = 0; act < 9; act++)
			test_linear_act(lin[i][0], lin[i][1], lin[i][2], act, (act + i) % 2, act % 3 == 0);
	for (int v = 0; v < 8; v++)
		test_lowered_linear(v % 2 + 1, 7, 13, 17, v & 1, (v >> 1) & 1, (v >> 2) & 1);
	test_mm_constant(9, 11, 21);
	for (int which = 0; which < 7; which++)
		test_no_fuse(which);
	for (int i = 0; i < nkeep; i++)
		free(keep[i]);
	return check_report("test_pass_fuse_epilogue");
}

/* test_pass_layout.c - the layout pass on small graphs: a conv -> relu ->
 * conv -> add -> pool region gets exactly two permutes and gives the NCHW
 * result; a region without a conv is left alone; a value used both inside
 * and outside a region leaves it once; a global pool leaves through a free
 * reshape; a conv's fused act and residual carry over; pointwise convs
 * alone stay NCHW unless their weight is 16-bit; symbolic batch and image sizes keep their dims. Each graph is
 * compiled with the pass and without it (fast and reference kernels). */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels/common/cpu.h"
#include "kernels/common/half.h"
#include "op_harness.h"

#define TRY(x) CHECK_OK(x)

static int count(const char *s, const char *what)
{
	int n = 0;
	for (const char *p = strstr(s, what); p; p = strstr(p + 1, what))
		n++;
	return n;
}

typedef struct gb {
	air_graph *g;
	float *bufs[16];
	int nbufs;
} gb;

static air_value constant(gb *b, int rank, const int64_t *dims)
{
	int64_t n = 1;
	for (int d = 0; d < rank; d++)
		n *= dims[d];
	float *p = th_randf(n);
	for (int64_t i = 0; i < n; i++)
		p[i] *= 0.5f;
	b->bufs[b->nbufs++] = p;
	air_value v = 0;
	TRY(air_graph_add_constant(b->g, AIR_F32, rank, dims, p, 0, &v));
	return v;
}

static air_value node(gb *b, const char *op, const air_value *in, int n, const air_attr *a, int na)
{
	air_value out = 0;
	int nout;
	TRY(air_graph_add_node(b->g, op, in, n, a, na, &out, 1, &nout));
	return out;
}

/* conv2d 3x3 pad 1 (stride s) with bias: x [N, C, H, W] -> [N, O, H', W'] */
static air_value conv(gb *b, air_value x, int64_t C, int64_t O, int64_t k, int64_t s)
{
	int64_t wd[4] = {O, C, k, k}, bd[1] = {O}, st[2] = {s, s}, pd[2] = {k / 2, k / 2};
	air_value in[3] = {x, constant(b, 4, wd), constant(b, 1, bd)};
	air_attr a[2] = {th_ints("stride", st, 2), th_ints("padding", pd, 2)};
	return node(b, "conv2d", in, 3, a, 2);
}

/* Runs the graph's model on inputs (all f32 of the given dims); output o
 * into a new buffer. */
static float *run(air_model *m, int nin, float *const *in, int64_t (*dims)[4], int o, int64_t *numel)
{
	air_session *s = NULL;
	TRY(air_session_create(m, &s));
	for (int i = 0; i < nin; i++)
		TRY(air_session_set_input(s, i, in[i], 4, dims[i]));
	int nout = air_model_output_count(m);
	float *outs[4] = {NULL};
	float *ret = NULL;
	for (int i = 0; i < nout; i++) {
		int rank;
		int64_t od[AIR_MAX_RANK], n = 1;
		TRY(air_session_output_shape(s, i, &rank, od));
		for (int d = 0; d < rank; d++)
			n *= od[d];
		outs[i] = malloc(sizeof(float) * (size_t)(n ? n : 1));
		TRY(air_session_set_output(s, i, outs[i], sizeof(float) * (size_t)n));
		if (i == o)
			*numel = n;
	}
	TRY(air_session_run(s));
	air_session_destroy(s);
	for (int i = 0; i < nout; i++) {
		if (i == o)
			ret = outs[i];
		else
			free(outs[i]);
	}
	return ret;
}

/* Compiles b's graph with and without the layout pass and with reference
 * kernels, checks every output agrees, and returns the pass-on report's
 * permute count (-1 on failure); *report gets a copy of it. */
static int compare(gb *b, const char *label, int nin, float *const *in, int64_t (*dims)[4], char **report)
{
	air_model *m[3] = {NULL, NULL, NULL};
	uint32_t flags[3] = {0, 0, AIR_COMPILE_REFERENCE_KERNELS}, off[3] = {0, AIR_PASS_LAYOUT, 0};
	for (int k = 0; k < 3; k++) {
		air_compile_options o;
		air_compile_options_init(&o);
		o.flags = flags[k];
		o.disabled_passes = off[k];
		TRY(air_compile(b->g, &o, &m[k]));
		if (!m[k])
			return -1;
	}
	const char *rep = air_model_report(m[0]);
	*report = strdup(rep);
	int nout = air_model_output_count(m[0]);
	for (int o = 0; o < nout; o++) {
		int64_t n[3];
		float *y[3];
		for (int k = 0; k < 3; k++)
			y[k] = run(m[k], nin, in, dims, o, &n[k]);
		CHECK(n[0] == n[1] && n[0] == n[2]);
		double *want = malloc(sizeof(double) * (size_t)(n[1] ? n[1] : 1));
		for (int64_t i = 0; i < n[1]; i++)
			want[i] = y[1][i];
		char buf[160];
		snprintf(buf, sizeof buf, "%s output %d [layout vs NCHW]", label, o);
		th_compare(buf, AIR_F32, y[0], want, NULL, n[1], 1e-4, 1e-4);
		snprintf(buf, sizeof buf, "%s output %d [layout, reference kernels]", label, o);
		th_compare(buf, AIR_F32, y[2], want, NULL, n[1], 1e-4, 1e-4);
		free(want);
		for (int k = 0; k < 3; k++)
			free(y[k]);
	}
	/* kernel names in the report's per-step list: permute_ref, permute_nchw_... */
	int permutes = count(rep, " permute_");
	for (int k = 0; k < 3; k++)
		air_model_destroy(m[k]);
	return permutes;
}

static void gb_free(gb *b)
{
	air_graph_destroy(b->g);
	for (int i = 0; i < b->nbufs; i++)
		free(b->bufs[i]);
}

/* x -> conv -> relu -> conv -> add(relu, .) -> max_pool -> output, and
 * means over H and W of the add and of the pool */
static void test_region(int symbolic)
{
	gb b = {0};
	TRY(air_graph_create(&b.g));
	int64_t N = 3, C = 5, H = 13, W = 11;
	air_dim d[4] = {N, C, H, W};
	if (symbolic) {
		TRY(air_graph_symbol(b.g, "n", &d[0]));
		TRY(air_graph_symbol(b.g, "h", &d[2]));
		TRY(air_graph_symbol(b.g, "w", &d[3]));
	}
	air_value x;
	TRY(air_graph_add_input(b.g, "x", AIR_F32, 4, d, &x));
	air_value c1 = conv(&b, x, C, 17, 3, 1);
	air_value r = node(&b, "relu", &c1, 1, NULL, 0);
	air_value c2 = conv(&b, r, 17, 17, 3, 1);
	air_value sum_in[2] = {r, c2};
	air_value s = node(&b, "add", sum_in, 2, NULL, 0);
	int64_t k3[2] = {3, 3}, s2[2] = {2, 2}, p1[2] = {1, 1};
	air_attr mp[3] = {th_ints("kernel", k3, 2), th_ints("stride", s2, 2), th_ints("padding", p1, 2)};
	air_value y = node(&b, "max_pool2d", &s, 1, mp, 3);
	/* global average pools: without keepdim [N, C] leaves with no permute,
	 * with keepdim [N, C, 1, 1] through a free reshape */
	int64_t hw[2] = {-1, -2};
	air_attr ma[2] = {th_ints("axes", hw, 2), th_int("keepdim", 0)};
	air_value outs[3] = {y, node(&b, "mean", &s, 1, ma, 2), 0};
	ma[1] = th_int("keepdim", 1);
	outs[2] = node(&b, "mean", &y, 1, ma, 2);
	TRY(air_graph_set_outputs(b.g, outs, 3));
	float *xin = th_randf(N * C * H * W);
	int64_t dims[1][4] = {{N, C, H, W}};
	char *rep = NULL;
	int permutes = compare(&b, symbolic ? "region (symbolic)" : "region", 1, &xin, dims, &rep);
	CHECK(permutes == 2);
	CHECK(rep && count(rep, " conv2d_nhwc_") == 2 && count(rep, " max_pool2d_nhwc_") == 1);
	CHECK(rep && strstr(rep, "3 pool, ") && strstr(rep, "1 free reshape(s) out"));
	CHECK(rep && count(rep, " adaptive_avg_pool2d_nhwc_") == 1 && count(rep, " mean_") == 1);
	if (permutes != 2 && rep)
		fprintf(stderr, "%s\n", rep);
	free(rep);
	free(xin);
	gb_free(&b);
}

/* no conv: relu -> max_pool stays NCHW */
static void test_no_conv(void)
{
	gb b = {0};
	TRY(air_graph_create(&b.g));
	int64_t dd[4] = {1, 3, 7, 7};
	air_value x;
	TRY(air_graph_add_input(b.g, "x", AIR_F32, 4, dd, &x));
	air_value r = node(&b, "relu", &x, 1, NULL, 0);
	int64_t k2[2] = {2, 2};
	air_attr mp = th_ints("kernel", k2, 2);
	air_value y = node(&b, "max_pool2d", &r, 1, &mp, 1);
	TRY(air_graph_set_outputs(b.g, &y, 1));
	float *xin = th_randf(3 * 49);
	int64_t dims[1][4] = {{1, 3, 7, 7}};
	char *rep = NULL;
	CHECK(compare(&b, "no conv", 1, &xin, dims, &rep) == 0);
	CHECK(rep && !strstr(rep, "_nhwc"));
	free(rep);
	free(xin);
	gb_free(&b);
}

/* A value used in and out of the region: relu's output feeds a conv and is
 * also a graph output and a sum's input; a second input enters the region
 * at an add, a per-channel constant at a mul. The global average pool leaves through a reshape. */
static void test_shared(void)
{
	gb b = {0};
	TRY(air_graph_create(&b.g));
	int64_t xd[4] = {2, 12, 9, 9}, zd[4] = {2, 8, 9, 9}; /* 12: not a narrow conv */
	air_value x, z;
	TRY(air_graph_add_input(b.g, "x", AIR_F32, 4, xd, &x));
	TRY(air_graph_add_input(b.g, "z", AIR_F32, 4, zd, &z));
	air_value c1 = conv(&b, x, 12, 8, 3, 1);
	air_value r = node(&b, "relu", &c1, 1, NULL, 0);
	air_value c2 = conv(&b, r, 8, 8, 1, 1);
	air_value ai[2] = {c2, z};
	air_value a0 = node(&b, "add", ai, 2, NULL, 0);
	/* a per-channel scale broadcasts: it enters permuted too */
	int64_t cd[4] = {1, 8, 1, 1};
	air_value mi[2] = {constant(&b, 4, cd), a0};
	air_value a = node(&b, "mul", mi, 2, NULL, 0);
	int64_t o1[2] = {1, 1}, axes[2] = {1, 2};
	air_attr ad = th_ints("output_size", o1, 2);
	air_value p = node(&b, "adaptive_avg_pool2d", &a, 1, &ad, 1);
	air_attr sa[2] = {th_ints("axes", axes, 2), th_int("keepdim", 1)};
	air_value sm = node(&b, "sum", &r, 1, sa, 2);
	air_value outs[3] = {p, r, sm};
	TRY(air_graph_set_outputs(b.g, outs, 3));
	float *in[2] = {th_randf(2 * 12 * 81), th_randf(2 * 8 * 81)};
	int64_t dims[2][4] = {{2, 12, 9, 9}, {2, 8, 9, 9}};
	char *rep = NULL;
	int permutes = compare(&b, "shared", 2, in, dims, &rep);
	/* in: x, z and the scale; out: r (once, for both its outside uses) */
	CHECK(permutes == 4);
	CHECK(rep && strstr(rep, "1 free reshape(s) out"));
	if (permutes != 4 && rep)
		fprintf(stderr, "%s\n", rep);
	free(rep);
	free(in[0]), free(in[1]);
	gb_free(&b);
}

/* conv2d with a fused act and residual (as fuse_epilogue leaves it):
 * the NHWC conv takes both, the residual from inside the region */
static void test_fused_conv(void)
{
	gb b = {0};
	TRY(air_graph_create(&b.g));
	int64_t xd[4] = {3, 17, 7, 13}, wd[4] = {17, 17, 3, 3}, bd[1] = {17}, pd[2] = {1, 1};
	air_value x;
	TRY(air_graph_add_input(b.g, "x", AIR_F32, 4, xd, &x));
	air_value in1[3] = {x, constant(&b, 4, wd), constant(&b, 1, bd)};
	air_attr a1[2] = {th_ints("padding", pd, 2), th_int("act", 1)};
	air_value c1 = node(&b, "conv2d", in1, 3, a1, 2);
	air_value in2[3] = {c1, constant(&b, 4, wd), c1};
	air_attr a2[4] = {th_ints("padding", pd, 2), th_int("act", 2), th_int("has_bias", 0),
			  th_int("has_residual", 1)};
	air_value c2 = node(&b, "conv2d", in2, 3, a2, 4);
	TRY(air_graph_set_outputs(b.g, &c2, 1));
	float *xin = th_randf(3 * 17 * 7 * 13);
	int64_t dims[1][4] = {{3, 17, 7, 13}};
	char *rep = NULL;
	CHECK(compare(&b, "fused conv", 1, &xin, dims, &rep) == 2);
	CHECK(rep && count(rep, " conv2d_nhwc_") == 2);
	free(rep);
	free(xin);
	gb_free(&b);
}

/* a fused_dag between convs (c1 * c1 + c1, relu: two-tensor ops and a
 * value read twice, fused by fuse_dag) stays in the NHWC region: two
 * permutes in all, not four */
static void test_fused_dag(void)
{
	gb b = {0};
	TRY(air_graph_create(&b.g));
	int64_t xd[4] = {2, 17, 7, 13}, wd[4] = {17, 17, 3, 3}, pd[2] = {1, 1};
	air_value x;
	TRY(air_graph_add_input(b.g, "x", AIR_F32, 4, xd, &x));
	air_value in1[2] = {x, constant(&b, 4, wd)};
	air_attr a1[2] = {th_ints("padding", pd, 2), th_int("has_bias", 0)};
	air_value c1 = node(&b, "conv2d", in1, 2, a1, 2);
	air_value sq[2] = {c1, c1};
	air_value t = node(&b, "mul", sq, 2, NULL, 0);
	air_value su[2] = {t, c1};
	air_value u = node(&b, "add", su, 2, NULL, 0);
	u = node(&b, "tanh", &u, 1, NULL, 0);
	air_value in2[2] = {u, constant(&b, 4, wd)};
	air_value c2 = node(&b, "conv2d", in2, 2, a1, 2);
	TRY(air_graph_set_outputs(b.g, &c2, 1));
	float *xin = th_randf(2 * 17 * 7 * 13);
	int64_t dims[1][4] = {{2, 17, 7, 13}};
	char *rep = NULL;
	CHECK(compare(&b, "fused dag", 1, &xin, dims, &rep) == 2);
	CHECK(rep && count(rep, " conv2d_nhwc_") == 2 && count(rep, " fused_dag_") == 1);
	free(rep);
	free(xin);
	gb_free(&b);
}

/* 1x1 convs alone, strided or not, stay NCHW (one GEMM there, no
 * permutes); a 1x1 conv next to a 3x3 one is converted with it */
static void test_pointwise(void)
{
	static const struct {
		const char *label;
		int64_t k2, s1; /* second conv's size (0: none), first conv's stride */
		int nhwc_convs, permutes;
	} cases[] = {
		{"lone 1x1", 0, 1, 0, 0},
		{"two 1x1", 1, 1, 0, 0},
		{"1x1 stride 2", 0, 2, 0, 0},
		{"1x1 stride 2 then 3x3", 3, 2, 2, 2},
		{"1x1 then 3x3", 3, 1, 2, 2},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		gb b = {0};
		TRY(air_graph_create(&b.g));
		/* over 8 channels: a narrow 3x3 conv would stay NCHW (test_narrow) */
		int64_t dd[4] = {2, 12, 9, 10};
		air_value x;
		TRY(air_graph_add_input(b.g, "x", AIR_F32, 4, dd, &x));
		air_value y = conv(&b, x, 12, 16, 1, cases[i].s1);
		if (cases[i].k2)
			y = conv(&b, node(&b, "relu", &y, 1, NULL, 0), 16, 5, cases[i].k2, 1);
		TRY(air_graph_set_outputs(b.g, &y, 1));
		float *xin = th_randf(2 * 12 * 9 * 10);
		int64_t dims[1][4] = {{2, 12, 9, 10}};
		char *rep = NULL;
		int permutes = compare(&b, cases[i].label, 1, &xin, dims, &rep);
		CHECK(permutes == cases[i].permutes);
		CHECK(rep && count(rep, " conv2d_nhwc_") == cases[i].nhwc_convs);
		if (permutes != cases[i].permutes && rep)
			fprintf(stderr, "%s: %s\n", cases[i].label, rep);
		free(rep);
		free(xin);
		gb_free(&b);
	}
}

/* A conv with a 16-bit weight converts even alone and pointwise: its fast
 * kernels are channels-last only (conv_nhwc_lowp.c); a constant weight
 * and one that is a graph input (not frozen) alike. */
static void test_lowp_weight(void)
{
	for (int weight_input = 0; weight_input < 2; weight_input++) {
		gb b = {0};
		TRY(air_graph_create(&b.g));
		int64_t dd[4] = {2, 12, 9, 10}, wd[4] = {16, 12, 1, 1}, bd[1] = {16};
		air_value x, w;
		TRY(air_graph_add_input(b.g, "x", AIR_F32, 4, dd, &x));
		float *wf = th_randf(16 * 12);
		uint16_t *w16 = malloc(sizeof *w16 * 16 * 12);
		for (int i = 0; i < 16 * 12; i++)
			w16[i] = k_f32_to_bf16(wf[i]);
		b.bufs[b.nbufs++] = wf;
		b.bufs[b.nbufs++] = (float *)w16;
		if (weight_input)
			TRY(air_graph_add_input(b.g, "w", AIR_BF16, 4, wd, &w));
		else
			TRY(air_graph_add_constant(b.g, AIR_BF16, 4, wd, w16, 0, &w));
		air_value in[3] = {x, w, constant(&b, 1, bd)};
		air_value y = node(&b, "conv2d", in, 3, NULL, 0);
		TRY(air_graph_set_outputs(b.g, &y, 1));
		air_compile_options o;
		air_compile_options_init(&o);
		air_model *m = NULL;
		TRY(air_compile(b.g, &o, &m));
		const char *rep = m ? air_model_report(m) : "";
		CHECK(count(rep, " conv2d_nhwc_lowp_1x1") == 1);
		CHECK(count(rep, " permute_") == 2);
		if (count(rep, " conv2d_nhwc_lowp_1x1") != 1)
			fprintf(stderr, "lowp weight (input %d): %s\n", weight_input, rep);
		air_model_destroy(m);
		if (!weight_input) {
			float *xin = th_randf(2 * 12 * 9 * 10);
			int64_t dims[1][4] = {{2, 12, 9, 10}};
			char *r2 = NULL;
			CHECK(compare(&b, "lone 1x1, bf16 weight", 1, &xin, dims, &r2) == 2);
			free(r2);
			free(xin);
		}
		gb_free(&b);
	}
}

/* A conv of a narrow input (up to 8 channels, the stem's 3) alone stays
 * NCHW (with AVX-512 in conv_narrow.c, else in the implicit GEMM), which
 * needs no permutes; next to a wide 3x3 conv it runs channels-last with it. */
static void test_narrow(void)
{
	const char *nchw = (kcpu_features() & KCPU_AVX512) == KCPU_AVX512 ? "conv2d_narrow_nchw"
									   : "conv2d_implicit_gemm_nchw";
	static const struct {
		const char *label;
		int64_t C, k, s, k2; /* the first conv; the second's size (0: none) */
		int nhwc_convs, permutes;
		const char *kernel; /* the first conv's (NULL: nchw) */
	} cases[] = {
		{"lone 7x7 stride 2 stem", 3, 7, 2, 0, 0, 0, NULL},
		{"lone 3x3 on 8 channels", 8, 3, 1, 0, 0, 0, NULL},
		{"stem then a wide 3x3", 3, 7, 2, 3, 2, 2, "conv2d_nhwc_implicit_gemm"},
		{"9 channels: not narrow", 9, 3, 1, 0, 1, 2, "conv2d_nhwc_"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		gb b = {0};
		TRY(air_graph_create(&b.g));
		int64_t C = cases[i].C, dd[4] = {2, C, 23, 20};
		air_value x;
		TRY(air_graph_add_input(b.g, "x", AIR_F32, 4, dd, &x));
		air_value y = conv(&b, x, C, 16, cases[i].k, cases[i].s);
		if (cases[i].k2)
			y = conv(&b, node(&b, "relu", &y, 1, NULL, 0), 16, 12, cases[i].k2, 1);
		TRY(air_graph_set_outputs(b.g, &y, 1));
		float *xin = th_randf(2 * C * 23 * 20);
		int64_t dims[1][4] = {{2, C, 23, 20}};
		char *rep = NULL;
		int permutes = compare(&b, cases[i].label, 1, &xin, dims, &rep);
		CHECK(permutes == cases[i].permutes);
		CHECK(rep && count(rep, " conv2d_nhwc_") == cases[i].nhwc_convs);
		CHECK(rep && strstr(rep, cases[i].kernel ? cases[i].kernel : nchw));
		if (permutes != cases[i].permutes && rep)
			fprintf(stderr, "%s: %s\n", cases[i].label, rep);
		free(rep);
		free(xin);
		gb_free(&b);
	}
}

/* A lone strided 3x3 conv converts only when its work outweighs the
 * permutes' bytes (160 multiply-adds per edge byte; 0.45 C for C = O): 64
 * and 256 channels stay NCHW, 512 convert; next to a stride-1 3x3 (which
 * NHWC runs much faster) 64 channels convert too. */
static void test_strided_cost(void)
{
	static const struct {
		const char *label;
		int64_t C, HW, k2; /* k2: a stride-1 conv after it (0: none) */
		int nhwc_convs, permutes;
	} cases[] = {
		{"64>64 3x3 s2: permutes cost more", 64, 20, 0, 0, 0},
		{"256>256 3x3 s2: permutes cost more", 256, 8, 0, 0, 0},
		{"512>512 3x3 s2: the conv pays", 512, 8, 0, 1, 2},
		{"64>64 s2 then a 3x3 s1", 64, 20, 3, 2, 2},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		gb b = {0};
		TRY(air_graph_create(&b.g));
		int64_t C = cases[i].C, HW = cases[i].HW, dd[4] = {1, C, HW, HW};
		air_value x;
		TRY(air_graph_add_input(b.g, "x", AIR_F32, 4, dd, &x));
		air_value y = conv(&b, x, C, C, 3, 2);
		if (cases[i].k2)
			y = conv(&b, node(&b, "relu", &y, 1, NULL, 0), C, 16, cases[i].k2, 1);
		TRY(air_graph_set_outputs(b.g, &y, 1));
		float *xin = th_randf(C * HW * HW);
		int64_t dims[1][4] = {{1, C, HW, HW}};
		char *rep = NULL;
		int permutes = compare(&b, cases[i].label, 1, &xin, dims, &rep);
		CHECK(permutes == cases[i].permutes);
		CHECK(rep && count(rep, " conv2d_nhwc_") == cases[i].nhwc_convs);
		if ((permutes != cases[i].permutes || !rep || count(rep, " conv2d_nhwc_") != cases[i].nhwc_convs) && rep)
			fprintf(stderr, "%s: %s\n", cases[i].label, rep);
		free(rep);
		free(xin);
		gb_free(&b);
	}
}

/* A U-Net's join: cat(conv(x), conv(x)) on channels, then a conv. The cat
 * stays in the region (its axis renumbered), so only x enters and the last
 * conv leaves. A second output reads c1 channels-last through its own
 * permute (as a transposed convolution does): the region's exit permute and
 * it undo each other and both go, so that output is c1's NHWC value as it
 * stands. Two permutes in all. */
static void test_cat_and_inverse_permutes(void)
{
	gb b = {0};
	TRY(air_graph_create(&b.g));
	int64_t dd[4] = {1, 8, 10, 12};
	air_value x;
	TRY(air_graph_add_input(b.g, "x", AIR_F32, 4, dd, &x));
	air_value c1 = conv(&b, x, 8, 8, 3, 1), c2 = conv(&b, x, 8, 6, 3, 1);
	air_value both[2] = {c1, c2};
	air_attr ax = th_int("axis", 1);
	air_value joined = node(&b, "cat", both, 2, &ax, 1);
	air_value outs[2] = {conv(&b, joined, 14, 5, 3, 1), 0};
	air_attr perm = th_ints("perm", (int64_t[]){0, 2, 3, 1}, 4);
	outs[1] = node(&b, "permute", &c1, 1, &perm, 1);
	TRY(air_graph_set_outputs(b.g, outs, 2));
	float *xin = th_randf(8 * 10 * 12);
	int64_t dims[1][4] = {{1, 8, 10, 12}};
	char *rep = NULL;
	int permutes = compare(&b, "cat and inverse permutes", 1, &xin, dims, &rep);
	CHECK(permutes == 2);
	CHECK(rep && strstr(rep, "1 cat;") && strstr(rep, "1 permute pair(s) cancelled"));
	if ((permutes != 2 || !rep || !strstr(rep, "1 cat;") || !strstr(rep, "1 permute pair(s) cancelled")) && rep)
		fprintf(stderr, "cat and inverse permutes: %d permutes\n%s\n", permutes, rep);
	free(rep);
	free(xin);
	gb_free(&b);
}

int main(void)
{
	test_cat_and_inverse_permutes();
	test_strided_cost();
	test_pointwise();
	test_lowp_weight();
	test_narrow();
	test_fused_conv();
	test_fused_dag();
	test_region(0);
	test_region(1);
	test_no_conv();
	test_shared();
	return check_report("test_pass_layout");
}

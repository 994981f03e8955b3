/* bench_conv.c - time of conv2d on ResNet-50 and MobileNetV2 shapes (batch
 * 1, 224x224) and of linear on BERT shapes, reference kernels against fast
 * ones, through the public API (one-node graphs, constant weights). Not a
 * CTest test; build by hand:
 *   cc -O2 -Iinclude -Isrc tests/c/bench_conv.c build/libair.a -lm -lpthread
 * and run: bench_conv [seconds-per-case] [name-filter]. Times are the best
 * of the runs in that time (the machine is shared; the best run is the one
 * least disturbed); "cpu" is the process's CPU time per run over the thread
 * count, which is what the kernel cost without time given to others.
 *   bench_conv --layout [seconds-per-case] [batch] [name-filter]
 * times the 23 ResNet-50 conv shapes in the NCHW kernels (conv2d, layout
 * pass off) and the NHWC ones (conv2d_nhwc on an NHWC input, as inside a
 * converted region), each shape weighted by how often ResNet-50 runs it
 * for the totals. */
#define _POSIX_C_SOURCE 200112L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "air/air.h"

static double clock_of(clockid_t id)
{
	struct timespec t;
	clock_gettime(id, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct bcase {
	const char *name;
	int linear; /* 1: a linear [N, C] x [O, C]^T; 2: sdpa with q, k, v [N, C, H, W]
		     * (batch, heads, length, head size) and a float mask [N, 1, H, H] */
	int64_t N, C, H, W, O, KH, KW, stride, pad, groups;
} bcase;

static const bcase cases[] = {
	{"rn50 conv1 7x7 s2", 0, 1, 3, 224, 224, 64, 7, 7, 2, 3, 1},
	{"rn50 l1 1x1 64>64", 0, 1, 64, 56, 56, 64, 1, 1, 1, 0, 1},
	{"rn50 l1 3x3 64", 0, 1, 64, 56, 56, 64, 3, 3, 1, 1, 1},
	{"rn50 l1 1x1 64>256", 0, 1, 64, 56, 56, 256, 1, 1, 1, 0, 1},
	{"rn50 l1 1x1 256>64", 0, 1, 256, 56, 56, 64, 1, 1, 1, 0, 1},
	{"rn50 l2 3x3 128 s2", 0, 1, 128, 56, 56, 128, 3, 3, 2, 1, 1},
	{"rn50 l2 3x3 128", 0, 1, 128, 28, 28, 128, 3, 3, 1, 1, 1},
	{"rn50 l2 1x1 128>512", 0, 1, 128, 28, 28, 512, 1, 1, 1, 0, 1},
	{"rn50 l2 1x1 512>128", 0, 1, 512, 28, 28, 128, 1, 1, 1, 0, 1},
	{"rn50 l2 down 1x1 s2", 0, 1, 256, 56, 56, 512, 1, 1, 2, 0, 1},
	{"rn50 l3 3x3 256", 0, 1, 256, 14, 14, 256, 3, 3, 1, 1, 1},
	{"rn50 l3 1x1 256>1024", 0, 1, 256, 14, 14, 1024, 1, 1, 1, 0, 1},
	{"rn50 l3 1x1 1024>256", 0, 1, 1024, 14, 14, 256, 1, 1, 1, 0, 1},
	{"rn50 l4 3x3 512", 0, 1, 512, 7, 7, 512, 3, 3, 1, 1, 1},
	{"rn50 l4 1x1 512>2048", 0, 1, 512, 7, 7, 2048, 1, 1, 1, 0, 1},
	{"rn50 l4 1x1 2048>512", 0, 1, 2048, 7, 7, 512, 1, 1, 1, 0, 1},
	{"rn50 l1 3x3 64 batch 8", 0, 8, 64, 56, 56, 64, 3, 3, 1, 1, 1},
	{"mbv2 dw 3x3 144 s1", 0, 1, 144, 56, 56, 144, 3, 3, 1, 1, 144},
	{"mbv2 dw 3x3 144 s2", 0, 1, 144, 56, 56, 144, 3, 3, 2, 1, 144},
	{"mbv2 dw 3x3 960", 0, 1, 960, 7, 7, 960, 3, 3, 1, 1, 960},
	{"vit patch 16x16 s16", 0, 1, 3, 224, 224, 192, 16, 16, 16, 0, 1},
	{"bert linear 768>768", 1, 128, 768, 1, 1, 768, 0, 0, 0, 0, 0},
	{"bert linear 768>3072", 1, 128, 768, 1, 1, 3072, 0, 0, 0, 0, 0},
	{"rn50 fc 2048>1000", 1, 1, 2048, 1, 1, 1000, 0, 0, 0, 0, 0},
	{"bert sdpa 12x128x64 mask", 2, 1, 12, 128, 64, 0, 0, 0, 0, 0, 0},
	{"vit sdpa 3x197x64", 2, 1, 3, 197, 64, 0, 0, 0, 0, 0, 0},
};

static float *randf(int64_t n)
{
	float *p = malloc(sizeof(float) * (size_t)(n ? n : 1));
	uint64_t s = 0x9e3779b97f4a7c15ull ^ (uint64_t)n;
	for (int64_t i = 0; i < n; i++) {
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		p[i] = (float)((s >> 40) & 0xffff) / 32768.0f - 1.0f;
	}
	return p;
}

#define TRY(x)                                                                             \
	do {                                                                               \
		if ((x) != AIR_OK) {                                                       \
			fprintf(stderr, "%s: %s\n", #x, air_last_error());                 \
			exit(1);                                                           \
		}                                                                          \
	} while (0)

/* Best wall seconds and mean cpu seconds / threads per run of c. */
static void time_case(const bcase *c, uint32_t flags, double budget, double *wall, double *cpu, float **out,
		      const char **kernel)
{
	air_graph *g;
	TRY(air_graph_create(&g));
	air_value x, w, y;
	int64_t xd[4] = {c->N, c->C, c->H, c->W}, wd[4] = {c->O, c->groups ? c->C / c->groups : 0, c->KH, c->KW};
	int64_t wn = c->linear ? c->O * c->C : wd[0] * wd[1] * wd[2] * wd[3];
	float *wdata = randf(wn);
	int nout;
	if (c->linear == 2) {
		air_value in[4];
		for (int i = 0; i < 3; i++)
			TRY(air_graph_add_input(g, "qkv", AIR_F32, 4, xd, &in[i]));
		int64_t md[4] = {c->N, 1, c->H, c->H};
		float *mdata = randf(c->N * c->H * c->H);
		TRY(air_graph_add_constant(g, AIR_F32, 4, md, mdata, 0, &in[3]));
		free(mdata);
		TRY(air_graph_add_node(g, "sdpa", in, c->C == 3 ? 3 : 4, NULL, 0, &y, 1, &nout));
	} else if (c->linear) {
		int64_t xl[2] = {c->N, c->C}, wl[2] = {c->O, c->C};
		TRY(air_graph_add_input(g, "x", AIR_F32, 2, xl, &x));
		TRY(air_graph_add_constant(g, AIR_F32, 2, wl, wdata, 0, &w));
		air_value in[2] = {x, w};
		TRY(air_graph_add_node(g, "linear", in, 2, NULL, 0, &y, 1, &nout));
	} else {
		TRY(air_graph_add_input(g, "x", AIR_F32, 4, xd, &x));
		TRY(air_graph_add_constant(g, AIR_F32, 4, wd, wdata, 0, &w));
		int64_t s[2] = {c->stride, c->stride}, p[2] = {c->pad, c->pad};
		air_attr a[3] = {{"stride", AIR_ATTR_INTS, 0, 0, s, 2},
				 {"padding", AIR_ATTR_INTS, 0, 0, p, 2},
				 {"groups", AIR_ATTR_INT, c->groups, 0, NULL, 0}};
		air_value in[2] = {x, w};
		TRY(air_graph_add_node(g, "conv2d", in, 2, a, 3, &y, 1, &nout));
	}
	TRY(air_graph_set_outputs(g, &y, 1));
	air_compile_options o;
	air_compile_options_init(&o);
	o.flags = flags;
	air_model *m;
	TRY(air_compile(g, &o, &m));
	const char *op = c->linear == 2 ? "sdpa " : c->linear ? "linear " : "conv2d ";
	const char *rep = air_model_report(m), *k = strstr(rep, "kernels per step:");
	k = k ? strstr(k, op) : strstr(rep, op);
	static char kname[2][64];
	int slot = flags ? 0 : 1;
	if (k && sscanf(k + strlen(op), "%63s", kname[slot]) == 1)
		*kernel = kname[slot];
	air_session *s;
	TRY(air_session_create(m, &s));
	int64_t xn = c->linear == 1 ? c->N * c->C : c->N * c->C * c->H * c->W;
	float *xdata = randf(xn);
	if (c->linear == 2)
		for (int i = 1; i < 3; i++)
			TRY(air_session_set_input(s, i, xdata, 4, xd));
	TRY(air_session_set_input(s, 0, xdata, c->linear == 1 ? 2 : 4, c->linear == 1 ? (int64_t[]){c->N, c->C} : xd));
	int rank;
	int64_t od[8];
	TRY(air_session_output_shape(s, 0, &rank, od));
	int64_t on = 1;
	for (int i = 0; i < rank; i++)
		on *= od[i];
	float *ydata = malloc(sizeof(float) * (size_t)on);
	TRY(air_session_set_output(s, 0, ydata, sizeof(float) * (size_t)on));
	TRY(air_session_run(s)); /* warm up: arena, caches */
	double best = 1e30, cpu_total = 0, t_start = clock_of(CLOCK_MONOTONIC);
	int runs = 0;
	do {
		double c0 = clock_of(CLOCK_PROCESS_CPUTIME_ID), t0 = clock_of(CLOCK_MONOTONIC);
		TRY(air_session_run(s));
		double t1 = clock_of(CLOCK_MONOTONIC), c1 = clock_of(CLOCK_PROCESS_CPUTIME_ID);
		best = t1 - t0 < best ? t1 - t0 : best;
		cpu_total += c1 - c0;
		runs++;
	} while (clock_of(CLOCK_MONOTONIC) - t_start < budget || runs < 3);
	*wall = best;
	*cpu = cpu_total / runs / air_get_num_threads();
	*out = ydata;
	air_session_destroy(s);
	air_model_destroy(m);
	air_graph_destroy(g);
	free(xdata);
	free(wdata);
}

/* ---- NCHW against NHWC on the ResNet-50 convolutions ------------------- */

typedef struct rcase {
	int64_t C, O, k, s, p, H, count;
} rcase;

/* bench/workloads.py RESNET50_CONVS: (in, out, kernel, stride, pad, size, times used) */
static const rcase rn50[] = {
	{3, 64, 7, 2, 3, 224, 1},     {64, 64, 1, 1, 0, 56, 1},     {64, 64, 3, 1, 1, 56, 3},
	{64, 256, 1, 1, 0, 56, 4},    {256, 64, 1, 1, 0, 56, 2},    {256, 128, 1, 1, 0, 56, 1},
	{128, 128, 3, 2, 1, 56, 1},   {128, 512, 1, 1, 0, 28, 4},   {256, 512, 1, 2, 0, 56, 1},
	{512, 128, 1, 1, 0, 28, 3},   {128, 128, 3, 1, 1, 28, 3},   {512, 256, 1, 1, 0, 28, 1},
	{256, 256, 3, 2, 1, 28, 1},   {256, 1024, 1, 1, 0, 14, 6},  {512, 1024, 1, 2, 0, 28, 1},
	{1024, 256, 1, 1, 0, 14, 5},  {256, 256, 3, 1, 1, 14, 5},   {1024, 512, 1, 1, 0, 14, 1},
	{512, 512, 3, 2, 1, 14, 1},   {512, 2048, 1, 1, 0, 7, 3},   {1024, 2048, 1, 2, 0, 14, 1},
	{2048, 512, 1, 1, 0, 7, 2},   {512, 512, 3, 1, 1, 7, 2},
};

/* Best wall seconds of one conv in one layout (nhwc: conv2d_nhwc on an
 * NHWC input; else conv2d with the layout pass off), bias and relu fused
 * (the act attribute). Output (in that layout) in *out. */
static double time_layout(const rcase *c, int64_t N, int nhwc, double budget, float **out, char *kernel)
{
	air_graph *g;
	TRY(air_graph_create(&g));
	int64_t xd[4] = {N, c->C, c->H, c->H}, xh[4] = {N, c->H, c->H, c->C}, wd[4] = {c->O, c->C, c->k, c->k};
	int64_t bd[1] = {c->O};
	float *wdata = randf(c->O * c->C * c->k * c->k), *bdata = randf(c->O);
	air_value in[3], y;
	int nout;
	TRY(air_graph_add_input(g, "x", AIR_F32, 4, nhwc ? xh : xd, &in[0]));
	TRY(air_graph_add_constant(g, AIR_F32, 4, wd, wdata, 0, &in[1]));
	TRY(air_graph_add_constant(g, AIR_F32, 1, bd, bdata, 0, &in[2]));
	int64_t s[2] = {c->s, c->s}, p[2] = {c->p, c->p};
	air_attr a[3] = {{"stride", AIR_ATTR_INTS, 0, 0, s, 2}, {"padding", AIR_ATTR_INTS, 0, 0, p, 2},
			 {"act", AIR_ATTR_INT, 1, 0, NULL, 0}};
	TRY(air_graph_add_node(g, nhwc ? "conv2d_nhwc" : "conv2d", in, 3, a, 3, &y, 1, &nout));
	TRY(air_graph_set_outputs(g, &y, 1));
	air_compile_options o;
	air_compile_options_init(&o);
	o.disabled_passes = AIR_PASS_LAYOUT;
	air_model *m;
	TRY(air_compile(g, &o, &m));
	/* the kernel column of the report's per-step list */
	const char *op = nhwc ? "conv2d_nhwc " : "conv2d ", *k = strstr(air_model_report(m), "kernels per step:");
	k = k ? strstr(k, op) : NULL;
	if (!k || sscanf(k + strlen(op), "%63s", kernel) != 1)
		strcpy(kernel, "?");
	air_session *ss;
	TRY(air_session_create(m, &ss));
	int64_t xn = N * c->C * c->H * c->H;
	float *xdata = randf(xn);
	if (nhwc) {
		/* the same image as the NCHW run, transposed */
		float *t = malloc(sizeof(float) * (size_t)xn);
		int64_t HW = c->H * c->H;
		for (int64_t n = 0; n < N; n++)
			for (int64_t ch = 0; ch < c->C; ch++)
				for (int64_t i = 0; i < HW; i++)
					t[(n * HW + i) * c->C + ch] = xdata[(n * c->C + ch) * HW + i];
		free(xdata);
		xdata = t;
	}
	TRY(air_session_set_input(ss, 0, xdata, 4, nhwc ? xh : xd));
	int rank;
	int64_t od[8], on = 1;
	TRY(air_session_output_shape(ss, 0, &rank, od));
	for (int i = 0; i < rank; i++)
		on *= od[i];
	float *ydata = malloc(sizeof(float) * (size_t)on);
	TRY(air_session_set_output(ss, 0, ydata, sizeof(float) * (size_t)on));
	TRY(air_session_run(ss));
	double best = 1e30, t_start = clock_of(CLOCK_MONOTONIC);
	int runs = 0;
	do {
		double t0 = clock_of(CLOCK_MONOTONIC);
		TRY(air_session_run(ss));
		double t1 = clock_of(CLOCK_MONOTONIC);
		best = t1 - t0 < best ? t1 - t0 : best;
		runs++;
	} while (clock_of(CLOCK_MONOTONIC) - t_start < budget || runs < 3);
	*out = ydata;
	air_session_destroy(ss);
	air_model_destroy(m);
	air_graph_destroy(g);
	free(xdata), free(wdata), free(bdata);
	return best;
}

static int main_layout(int argc, char **argv)
{
	double budget = argc > 2 ? atof(argv[2]) : 0.5;
	int64_t N = argc > 3 ? atoll(argv[3]) : 1;
	const char *only = argc > 4 ? argv[4] : NULL;
	printf("threads: %d, batch %lld; conv + bias + relu, best of runs\n", air_get_num_threads(), (long long)N);
	printf("%-26s %3s %-22s %9s %-24s %9s | %8s %8s %7s | %7s\n", "shape (C>O kxk s p HxW)", "n", "nchw kernel",
	       "nchw ms", "nhwc kernel", "nhwc ms", "nchw GF", "nhwc GF", "speedup", "maxdiff");
	double tot[2] = {0, 0}, flops_total = 0;
	for (size_t i = 0; i < sizeof rn50 / sizeof rn50[0]; i++) {
		const rcase *c = &rn50[i];
		char name[64];
		snprintf(name, sizeof name, "%lld>%lld %lldx%lld s%lld p%lld %lld", (long long)c->C, (long long)c->O,
			 (long long)c->k, (long long)c->k, (long long)c->s, (long long)c->p, (long long)c->H);
		if (only && !strstr(name, only))
			continue;
		int64_t oh = (c->H + 2 * c->p - c->k) / c->s + 1;
		double flops = 2.0 * N * c->O * oh * oh * c->C * c->k * c->k;
		float *y[2];
		char kn[2][64];
		double t[2];
		for (int l = 0; l < 2; l++)
			t[l] = time_layout(c, N, l, budget, &y[l], kn[l]);
		double md = 0;
		int64_t P = oh * oh;
		for (int64_t n = 0; n < N; n++)
			for (int64_t o = 0; o < c->O; o++)
				for (int64_t q = 0; q < P; q++) {
					double d = y[0][(n * c->O + o) * P + q] - y[1][(n * P + q) * c->O + o];
					d = d < 0 ? -d : d;
					md = d > md ? d : md;
				}
		for (int l = 0; l < 2; l++)
			tot[l] += t[l] * (double)c->count;
		flops_total += flops * (double)c->count;
		printf("%-26s %3lld %-22s %9.3f %-24s %9.3f | %8.1f %8.1f %6.2fx | %7.1e\n", name, (long long)c->count,
		       kn[0], t[0] * 1e3, kn[1], t[1] * 1e3, flops / t[0] * 1e-9, flops / t[1] * 1e-9, t[0] / t[1], md);
		free(y[0]);
		free(y[1]);
	}
	printf("all convs, weighted by use: nchw %.2f ms (%.1f GFLOP/s), nhwc %.2f ms (%.1f GFLOP/s), %.2fx\n",
	       tot[0] * 1e3, flops_total / tot[0] * 1e-9, tot[1] * 1e3, flops_total / tot[1] * 1e-9, tot[0] / tot[1]);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "--layout") == 0)
		return main_layout(argc, argv);
	double budget = argc > 1 ? atof(argv[1]) : 1.0;
	const char *only = argc > 2 ? argv[2] : NULL;
	printf("threads: %d (AIR_NUM_THREADS)\n", air_get_num_threads());
	printf("%-24s %-20s %10s %10s | %9s %9s %8s | %7s %s\n", "case", "fast kernel", "ref ms", "fast ms",
	       "GFLOP/s", "cpu GF/s", "speedup", "maxdiff", "");
	double total_ref = 0, total_fast = 0;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const bcase *c = &cases[i];
		if (only && !strstr(c->name, only))
			continue;
		double flops;
		if (c->linear == 2) {
			flops = 4.0 * c->N * c->C * c->H * c->H * c->W;
		} else if (c->linear) {
			flops = 2.0 * c->N * c->C * c->O;
		} else {
			int64_t oh = (c->H + 2 * c->pad - c->KH) / c->stride + 1, ow = (c->W + 2 * c->pad - c->KW) / c->stride + 1;
			flops = 2.0 * c->N * c->O * oh * ow * (c->C / c->groups) * c->KH * c->KW;
		}
		double rw, rc, fw, fc;
		float *ry, *fy;
		const char *rk = "?", *fk = "?";
		/* the reference gets less time: it is slow and only the baseline */
		time_case(c, AIR_COMPILE_REFERENCE_KERNELS, budget / 4, &rw, &rc, &ry, &rk);
		time_case(c, 0, budget, &fw, &fc, &fy, &fk);
		int64_t on = c->linear == 2 ? c->N * c->C * c->H * c->W : c->linear ? c->N * c->O : 0;
		if (!c->linear) {
			int64_t oh = (c->H + 2 * c->pad - c->KH) / c->stride + 1, ow = (c->W + 2 * c->pad - c->KW) / c->stride + 1;
			on = c->N * c->O * oh * ow;
		}
		double md = 0;
		for (int64_t k = 0; k < on; k++) {
			double d = ry[k] - fy[k];
			d = d < 0 ? -d : d;
			md = d > md ? d : md;
		}
		total_ref += rw;
		total_fast += fw;
		printf("%-24s %-20s %10.3f %10.3f | %9.1f %9.1f %7.1fx | %7.1e\n", c->name, fk, rw * 1e3, fw * 1e3,
		       flops / fw * 1e-9, flops / fc * 1e-9, rw / fw, md);
		free(ry);
		free(fy);
	}
	printf("total: reference %.1f ms, fast %.1f ms\n", total_ref * 1e3, total_fast * 1e3);
	return 0;
}

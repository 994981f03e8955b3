/* test_ops_conv_backward.c - conv2d_backward_input and conv2d_backward_weight
 * through the public API: the gradients of x and of the weight computed here
 * in double from the convolution's definition (every tap of every output
 * position), against the reference kernels and the fast (GEMM) ones, and
 * fast against reference: odd sizes, strides 1 to 3, padding, dilation 2,
 * groups 1, 2 and depthwise, 1x1, 3x3, 5x3 and 7x7 kernels, batches that
 * split into chunks, an f64 run, and shapes the ops must reject. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "op_harness.h"

typedef struct ccase {
	const char *label;
	int64_t N, C, H, W, O, KH, KW, sh, sw, ph, pw, dh, dw, G;
} ccase;

static int64_t k_numel4(const int64_t *d)
{
	return d[0] * d[1] * d[2] * d[3];
}

static int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d)
{
	return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

/* dx and dw in double, with the sums of the magnitudes of their terms */
static void expected(const ccase *c, const double *x, const double *w, const double *dy, double *dx, double *dxm,
		     double *dw, double *dwm)
{
	int64_t OH = out_size(c->H, c->KH, c->sh, c->ph, c->dh), OW = out_size(c->W, c->KW, c->sw, c->pw, c->dw);
	int64_t Cg = c->C / c->G, Og = c->O / c->G;
	memset(dx, 0, sizeof(double) * (size_t)(c->N * c->C * c->H * c->W));
	memset(dxm, 0, sizeof(double) * (size_t)(c->N * c->C * c->H * c->W));
	memset(dw, 0, sizeof(double) * (size_t)(c->O * Cg * c->KH * c->KW));
	memset(dwm, 0, sizeof(double) * (size_t)(c->O * Cg * c->KH * c->KW));
	for (int64_t n = 0; n < c->N; n++)
		for (int64_t o = 0; o < c->O; o++)
			for (int64_t oh = 0; oh < OH; oh++)
				for (int64_t ow = 0; ow < OW; ow++) {
					double g = dy[((n * c->O + o) * OH + oh) * OW + ow];
					for (int64_t ci = 0; ci < Cg; ci++)
						for (int64_t ki = 0; ki < c->KH; ki++)
							for (int64_t kj = 0; kj < c->KW; kj++) {
								int64_t ih = oh * c->sh - c->ph + ki * c->dh;
								int64_t iw = ow * c->sw - c->pw + kj * c->dw;
								if (ih < 0 || ih >= c->H || iw < 0 || iw >= c->W)
									continue;
								int64_t ch = (o / Og) * Cg + ci;
								int64_t xi = ((n * c->C + ch) * c->H + ih) * c->W + iw;
								int64_t wi = ((o * Cg + ci) * c->KH + ki) * c->KW + kj;
								dx[xi] += w[wi] * g;
								dxm[xi] += fabs(w[wi] * g);
								dw[wi] += x[xi] * g;
								dwm[wi] += fabs(x[xi] * g);
							}
				}
}

/* The model's kernel for op, from its report: the fast kernel or the ref. */
static int uses(const air_model *m, const char *name)
{
	return strstr(air_model_report(m), name) != NULL;
}

static void run_case(const ccase *c, air_dtype dt)
{
	int64_t OH = out_size(c->H, c->KH, c->sh, c->ph, c->dh), OW = out_size(c->W, c->KW, c->sw, c->pw, c->dw);
	int64_t Cg = c->C / c->G;
	int64_t xd[4] = {c->N, c->C, c->H, c->W}, wd[4] = {c->O, Cg, c->KH, c->KW}, yd[4] = {c->N, c->O, OH, OW};
	int64_t nx = k_numel4(xd), nw = k_numel4(wd), ny = k_numel4(yd);
	double *x = th_values(nx, dt), *w = th_values(nw, dt), *dy = th_values(ny, dt);
	double *dx = malloc(sizeof(double) * (size_t)nx), *dxm = malloc(sizeof(double) * (size_t)nx);
	double *dw = malloc(sizeof(double) * (size_t)nw), *dwm = malloc(sizeof(double) * (size_t)nw);
	expected(c, x, w, dy, dx, dxm, dw, dwm);
	void *xs = th_as(x, nx, dt), *ws = th_as(w, nw, dt), *dys = th_as(dy, ny, dt);
	int64_t stride[2] = {c->sh, c->sw}, pad[2] = {c->ph, c->pw}, dil[2] = {c->dh, c->dw};
	int64_t size[2] = {c->H, c->W}, kern[2] = {c->KH, c->KW};
	/* of the sum of the terms' magnitudes: the sums' order differs */
	double tol = dt == AIR_F32 ? 1e-5 : 1e-13;
	bool depthwise = Cg == 1 && c->O == c->G;
	for (int which = 0; which < 2; which++) { /* 0: dx, 1: dw */
		const char *op = which ? "conv2d_backward_weight" : "conv2d_backward_input";
		air_attr attrs[5] = {th_ints("stride", stride, 2), th_ints("padding", pad, 2), th_ints("dilation", dil, 2),
				     th_int("groups", c->G),
				     which ? th_ints("kernel", kern, 2) : th_ints("input_size", size, 2)};
		th_arg args[2] = {th_make(dt, dys, 4, yd), which ? th_make(dt, xs, 4, xd) : th_make(dt, ws, 4, wd)};
		int64_t n = which ? nw : nx;
		void *res[2] = {NULL, NULL};
		for (int pass = 0; pass < 2; pass++) {
			air_model *m = th_compile(op, args, 2, attrs, 5, pass == 0 ? AIR_COMPILE_REFERENCE_KERNELS : 0);
			if (!m)
				continue;
			if (pass == 1 && dt == AIR_F32 && !depthwise)
				CHECK(uses(m, which ? "conv2d_backward_weight_gemm" : "conv2d_backward_input_gemm"));
			int r;
			int64_t got[4];
			res[pass] = th_run(m, args, 2, &r, got);
			air_model_destroy(m);
			if (!res[pass])
				continue;
			CHECK(r == 4);
			for (int d = 0; d < 4; d++)
				CHECK(got[d] == (which ? wd : xd)[d]);
			char label[160];
			snprintf(label, sizeof label, "%s %s %s %s", c->label, op, pass ? "fast" : "ref",
				 dt == AIR_F32 ? "f32" : "f64");
			th_compare(label, dt, res[pass], which ? dw : dx, which ? dwm : dxm, n, tol, 1e-30);
		}
		if (res[0] && res[1] && dt == AIR_F32) { /* fast against the oracle kernel */
			double *ref = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
			for (int64_t i = 0; i < n; i++)
				ref[i] = ((float *)res[0])[i];
			char label[160];
			snprintf(label, sizeof label, "%s %s fast vs ref", c->label, op);
			th_compare(label, dt, res[1], ref, which ? dwm : dxm, n, 2 * tol, 1e-30);
			free(ref);
		}
		free(res[0]);
		free(res[1]);
	}
	free(x), free(w), free(dy), free(dx), free(dxm), free(dw), free(dwm), free(xs), free(ws), free(dys);
}

static const ccase CASES[] = {
	/* label               N  C   H   W   O   KH KW sh sw ph pw dh dw G */
	{"1x1 s1",             2, 7, 9, 11, 5, 1, 1, 1, 1, 0, 0, 1, 1, 1},
	{"1x1 s2",             3, 6, 9, 8, 10, 1, 1, 2, 2, 0, 0, 1, 1, 1},
	{"3x3 s1 p1",          2, 5, 13, 10, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1},
	{"3x3 s2 p1",          3, 8, 15, 14, 9, 3, 3, 2, 2, 1, 1, 1, 1, 1},
	{"3x3 dil2 p2",        2, 4, 12, 13, 7, 3, 3, 1, 1, 2, 2, 2, 2, 1},
	{"7x7 s2 p3",          2, 3, 23, 21, 8, 7, 7, 2, 2, 3, 3, 1, 1, 1},
	{"5x3 asym",           2, 6, 14, 11, 4, 5, 3, 2, 1, 1, 2, 1, 2, 1},
	{"3x3 s3 no pad",      1, 5, 17, 16, 3, 3, 3, 3, 3, 0, 0, 1, 1, 1},
	{"groups 2 3x3",       3, 6, 11, 9, 10, 3, 3, 1, 1, 1, 1, 1, 1, 2},
	{"groups 2 1x1",       2, 8, 7, 9, 6, 1, 1, 1, 1, 0, 0, 1, 1, 2},
	{"groups 3 s2",        2, 9, 12, 13, 6, 3, 3, 2, 2, 1, 1, 1, 1, 3},
	{"depthwise 3x3",      2, 7, 10, 11, 7, 3, 3, 1, 1, 1, 1, 1, 1, 7},
	{"depthwise s2 dil2",  3, 5, 13, 12, 5, 3, 3, 2, 2, 2, 2, 2, 2, 5},
	{"depthwise x2",       2, 4, 9, 9, 8, 3, 3, 1, 1, 1, 1, 1, 1, 4},
	{"1x1 map",            3, 6, 1, 1, 5, 1, 1, 1, 1, 0, 0, 1, 1, 1},
	{"kernel = input",     2, 3, 4, 5, 6, 4, 5, 1, 1, 0, 0, 1, 1, 1},
	/* dw's images in chunks: N * P * O/g = 5 * 3600 * 64 floats of dy is
	 * more than the packed-dy cap (1M), so chunks of 4 and 1 */
	{"chunked 3x3",        5, 4, 60, 60, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1},
	/* one image a chunk (P * O > 512K): dw reads a pointwise conv's x in place */
	{"pointwise in place", 2, 3, 120, 120, 40, 1, 1, 1, 1, 0, 0, 1, 1, 1},
	/* dx takes ceil(512 / P) images a GEMM: chunks of 6 and 5 */
	{"dx chunks",         11, 5, 10, 10, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1},
	{"dx chunks groups",   7, 6, 9, 8, 4, 3, 3, 2, 1, 1, 1, 1, 1, 2},
	/* dw's last task has K % rows = 8 rows, whose one-thread GEMM takes all
	 * of its depth (1568) in one A block: more workspace than a full task's */
	{"short last task",    2, 128, 28, 28, 512, 1, 1, 1, 1, 0, 0, 1, 1, 1},
	{"big map 3x3",        1, 9, 70, 66, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1},
	{"many small maps",   11, 33, 7, 7, 17, 3, 3, 1, 1, 1, 1, 1, 1, 1},
	/* 3.5 MB of packed dy an image (one image a chunk): passes of 3 and 3
	 * images (PASS_CAP 16 MB), dw summing over passes as over chunks */
	{"passes",             6, 2, 104, 104, 80, 3, 3, 1, 1, 1, 1, 1, 1, 1},
	/* dx's chunks of 9 small maps, 7 MB a chunk: passes of 2 chunks and 1 */
	{"pass of chunks",    25, 3, 7, 7, 2000, 3, 3, 1, 1, 1, 1, 1, 1, 1},
};

static void test_errors(void)
{
	float buf[1024] = {0};
	int64_t yd[4] = {2, 6, 5, 5}, wd[4] = {6, 3, 3, 3}, size[2] = {7, 7}, bad_size[2] = {9, 7}, kern[2] = {3, 3};
	air_attr good[5] = {th_ints("stride", NULL, 0), th_ints("padding", NULL, 0), th_ints("dilation", NULL, 0),
			    th_int("groups", 1), th_ints("input_size", size, 2)};
	th_arg args[2] = {th_make(AIR_F32, buf, 4, yd), th_make(AIR_F32, buf, 4, wd)};
	air_graph *g = NULL;
	CHECK_OK(th_build("conv2d_backward_input", args, 2, good, 5, &g));
	air_graph_destroy(g);
	/* dy 5x5 is not what a 3x3 kernel makes of 9x7 */
	air_attr wrong[5] = {good[0], good[1], good[2], good[3], th_ints("input_size", bad_size, 2)};
	th_expect_build_error("conv2d_backward_input", args, 2, wrong, 5, AIR_SHAPE_MISMATCH, "dy size");
	/* 6 channels do not split into 4 groups */
	air_attr groups[5] = {good[0], good[1], good[2], th_int("groups", 4), good[4]};
	th_expect_build_error("conv2d_backward_input", args, 2, groups, 5, AIR_SHAPE_MISMATCH, "groups");
	/* an integer dy */
	th_arg ints[2] = {th_make(AIR_I32, buf, 4, yd), th_make(AIR_I32, buf, 4, wd)};
	th_expect_build_error("conv2d_backward_input", ints, 2, good, 5, AIR_UNSUPPORTED, "int dtype");
	/* x with 4 channels for 3 per group */
	int64_t xd[4] = {2, 4, 7, 7};
	air_attr wattrs[5] = {good[0], good[1], good[2], th_int("groups", 3), th_ints("kernel", kern, 2)};
	th_arg wargs[2] = {th_make(AIR_F32, buf, 4, yd), th_make(AIR_F32, buf, 4, xd)};
	th_expect_build_error("conv2d_backward_weight", wargs, 2, wattrs, 5, AIR_SHAPE_MISMATCH, "weight groups");
}

int main(void)
{
	for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++)
		run_case(&CASES[i], AIR_F32);
	run_case(&CASES[3], AIR_F64);
	run_case(&CASES[8], AIR_F64);
	test_errors();
	printf("%d checks, %d failures\n", check_count, check_failures);
	return check_failures != 0;
}

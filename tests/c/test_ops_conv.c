/* test_ops_conv.c - conv2d, batch_norm, max_pool2d, avg_pool2d and
 * adaptive_avg_pool2d and col2im through the public API, against values computed here
 * in double with PyTorch's rules written out plainly (output sizes, ceil
 * mode, padding in the divisor): awkward sizes, groups and depthwise,
 * strides, dilation, asymmetric attributes, empty batches, symbolic batch
 * and spatial sizes run at several sizes, and errors. Every graph is
 * compiled with the reference kernels and with the fast ones; both are
 * checked, and against each other. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "kernels/common/cpu.h"
#include "op_harness.h"

/* Compiles op with reference and with fast kernels, runs both and checks
 * shape, values, and fast against reference. */
static void check_op(const char *label, const char *op, const th_arg *args, int n, const air_attr *attrs, int na,
		     int rank, const int64_t *dims, const double *want, const double *mag, double tol_rel)
{
	void *res[2] = {NULL, NULL};
	air_dtype dt = AIR_F32;
	int64_t numel = 1;
	for (int d = 0; d < rank; d++)
		numel *= dims[d];
	for (int pass = 0; pass < 2; pass++) {
		air_model *m = th_compile(op, args, n, attrs, na, pass == 0 ? AIR_COMPILE_REFERENCE_KERNELS : 0);
		if (!m)
			return;
		air_model_output_info(m, 0, &dt, NULL, NULL);
		if (pass == 1 && dt == AIR_F32 && strcmp(op, "conv2d") == 0) {
			/* make sure the fast kernel is the one under test */
			char ref[64];
			snprintf(ref, sizeof ref, " %s_ref ", op);
			CHECK(strstr(air_model_report(m), ref) == NULL);
		}
		int r;
		int64_t got[AIR_MAX_RANK];
		res[pass] = th_run(m, args, n, &r, got);
		air_model_destroy(m);
		if (!res[pass])
			continue;
		int same = r == rank;
		for (int d = 0; d < rank && d < r; d++)
			same = same && got[d] == dims[d];
		CHECK(same);
		if (!same) {
			fprintf(stderr, "%s: output shape [", label);
			for (int d = 0; d < r; d++)
				fprintf(stderr, "%s%lld", d ? ", " : "", (long long)got[d]);
			fprintf(stderr, "], want [");
			for (int d = 0; d < rank; d++)
				fprintf(stderr, "%s%lld", d ? ", " : "", (long long)dims[d]);
			fprintf(stderr, "]\n");
			continue;
		}
		char buf[256];
		snprintf(buf, sizeof buf, "%s [%s]", label, pass == 0 ? "reference" : "fast");
		th_compare(buf, dt, res[pass], want, mag, numel, tol_rel, tol_rel * 1e-1);
	}
	if (res[0] && res[1]) {
		double *ref = malloc(sizeof(double) * (size_t)(numel ? numel : 1));
		for (int64_t i = 0; i < numel; i++)
			ref[i] = dt == AIR_F32 ? ((float *)res[0])[i] : ((double *)res[0])[i];
		char buf[256];
		snprintf(buf, sizeof buf, "%s [fast vs reference]", label);
		th_compare(buf, dt, res[1], ref, mag, numel, 2 * tol_rel, tol_rel * 1e-1);
		free(ref);
	}
	free(res[0]);
	free(res[1]);
}

/* PyTorch's pooling_output_shape, written out. */
static int64_t out_size(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dil, int ceil_mode)
{
	int64_t num = in + 2 * pad - dil * (k - 1) - 1 + (ceil_mode ? stride - 1 : 0);
	int64_t o = (num >= 0 ? num / stride : -((-num + stride - 1) / stride)) + 1;
	if (ceil_mode && (o - 1) * stride >= in + pad)
		o--;
	return o;
}

/* ---- conv2d ---------------------------------------------------------- */

typedef struct conv_case {
	int64_t N, C, H, W, O, KH, KW;
	int64_t s[2], p[2], d[2];
	int64_t groups;
	int bias;
} conv_case;

static void expect_conv(const conv_case *c, int64_t OH, int64_t OW, const double *x, const double *w,
			const double *b, double *want, double *mag)
{
	int64_t Cg = c->C / c->groups, Og = c->O / c->groups;
	for (int64_t n = 0; n < c->N; n++)
		for (int64_t o = 0; o < c->O; o++)
			for (int64_t oh = 0; oh < OH; oh++)
				for (int64_t ow = 0; ow < OW; ow++) {
					double s = c->bias ? b[o] : 0, m = c->bias ? fabs(b[o]) : 0;
					for (int64_t ci = 0; ci < Cg; ci++)
						for (int64_t i = 0; i < c->KH; i++)
							for (int64_t j = 0; j < c->KW; j++) {
								int64_t ih = oh * c->s[0] - c->p[0] + i * c->d[0];
								int64_t iw = ow * c->s[1] - c->p[1] + j * c->d[1];
								if (ih < 0 || ih >= c->H || iw < 0 || iw >= c->W)
									continue;
								int64_t cin = o / Og * Cg + ci;
								double t = x[((n * c->C + cin) * c->H + ih) * c->W + iw] *
									   w[((o * Cg + ci) * c->KH + i) * c->KW + j];
								s += t;
								m += fabs(t);
							}
					int64_t at = ((n * c->O + o) * OH + oh) * OW + ow;
					want[at] = s;
					mag[at] = m;
				}
}

static air_attr conv_attrs_of(const conv_case *c, air_attr *a)
{
	a[0] = th_ints("stride", c->s, 2);
	a[1] = th_ints("padding", c->p, 2);
	a[2] = th_ints("dilation", c->d, 2);
	a[3] = th_int("groups", c->groups);
	a[4] = th_int("has_bias", c->bias);
	return a[0];
}

static void test_conv_case(air_dtype dt, const conv_case *c, int wconst)
{
	int64_t OH = out_size(c->H, c->KH, c->p[0], c->s[0], c->d[0], 0);
	int64_t OW = out_size(c->W, c->KW, c->p[1], c->s[1], c->d[1], 0);
	int64_t nx = c->N * c->C * c->H * c->W, nw = c->O * (c->C / c->groups) * c->KH * c->KW;
	int64_t ny = c->N * c->O * OH * OW;
	double *x = th_values(nx, dt), *w = th_values(nw, dt), *b = th_values(c->O, dt);
	double *want = malloc(sizeof(double) * (size_t)(ny + 1)), *mag = malloc(sizeof(double) * (size_t)(ny + 1));
	expect_conv(c, OH, OW, x, w, b, want, mag);
	void *xb = th_as(x, nx, dt), *wb = th_as(w, nw, dt), *bb = th_as(b, c->O, dt);
	th_arg args[3] = {th_make(dt, xb, 4, (int64_t[]){c->N, c->C, c->H, c->W}),
			  th_make(dt, wb, 4, (int64_t[]){c->O, c->C / c->groups, c->KH, c->KW}),
			  th_make(dt, bb, 1, (int64_t[]){c->O})};
	args[1].constant = args[2].constant = wconst;
	air_attr attrs[5];
	conv_attrs_of(c, attrs);
	char label[200];
	snprintf(label, sizeof label,
		 "conv2d %s x[%lld,%lld,%lld,%lld] w[%lld,%lld,%lld,%lld] s%lld,%lld p%lld,%lld d%lld,%lld g%lld b%d c%d",
		 air_dtype_name(dt), (long long)c->N, (long long)c->C, (long long)c->H, (long long)c->W, (long long)c->O,
		 (long long)(c->C / c->groups), (long long)c->KH, (long long)c->KW, (long long)c->s[0], (long long)c->s[1],
		 (long long)c->p[0], (long long)c->p[1], (long long)c->d[0], (long long)c->d[1], (long long)c->groups,
		 c->bias, wconst);
	check_op(label, "conv2d", args, 2 + c->bias, attrs, 5, 4, (int64_t[]){c->N, c->O, OH, OW}, want, mag,
		 dt == AIR_F32 ? 3e-5 : 1e-12);
	free(x), free(w), free(b), free(want), free(mag), free(xb), free(wb), free(bb);
}

static const conv_case conv_cases[] = {
	/* N  C   H   W   O  KH KW  stride    pad      dil     g  bias */
	{1, 1, 1, 1, 1, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, 0},
	{1, 3, 5, 5, 4, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, 0},
	{2, 5, 7, 9, 6, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, 1},
	{1, 4, 11, 10, 3, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, 0},
	{2, 3, 13, 8, 5, 3, 2, {2, 1}, {2, 0}, {2, 3}, 1, 1},
	{1, 6, 9, 7, 4, 3, 3, {1, 1}, {1, 1}, {1, 1}, 2, 1},
	{2, 5, 8, 11, 5, 3, 3, {1, 1}, {1, 1}, {1, 1}, 5, 0},  /* depthwise */
	{1, 7, 9, 9, 7, 3, 3, {2, 2}, {1, 1}, {1, 1}, 7, 1},   /* depthwise, stride 2 */
	{1, 5, 6, 13, 5, 5, 3, {1, 2}, {2, 1}, {1, 2}, 5, 1},  /* depthwise, odd geometry */
	{1, 3, 7, 7, 6, 3, 3, {1, 1}, {1, 1}, {1, 1}, 3, 0},   /* channel multiplier 2 */
	{1, 3, 17, 17, 8, 7, 7, {2, 2}, {3, 3}, {1, 1}, 1, 0}, /* a small stem */
	{0, 4, 6, 6, 3, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, 1},   /* empty batch */
	{1, 8, 9, 9, 5, 1, 1, {2, 2}, {0, 0}, {1, 1}, 1, 0},   /* 1x1, stride 2 */
	{2, 2, 8, 8, 3, 4, 4, {4, 4}, {0, 0}, {1, 1}, 1, 1},   /* patch embedding */
	{1, 3, 6, 6, 4, 1, 1, {1, 1}, {1, 1}, {1, 1}, 1, 1},   /* 1x1 with padding */
	{1, 64, 14, 14, 64, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, 0},
	{3, 37, 7, 5, 29, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, 1},
	{1, 96, 10, 10, 96, 3, 3, {1, 1}, {1, 1}, {1, 1}, 96, 1},
	{2, 17, 10, 12, 130, 3, 3, {1, 1}, {0, 2}, {1, 1}, 1, 1},
	{1, 16, 5, 5, 24, 5, 5, {1, 1}, {2, 2}, {1, 1}, 4, 0}, /* groups with 5x5 */
	/* 1x1 with 128+ channels: pixel counts that are not whole GEMM
	 * panels, several pixel chunks, more than one channel block */
	{2, 130, 9, 7, 133, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, 1},
	{1, 128, 11, 13, 20, 1, 1, {2, 2}, {0, 0}, {1, 1}, 1, 0},
	{1, 256, 24, 25, 40, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, 1},
	/* too few pixel chunks for the threads: one GEMM per image and group
	 * (grouped here), strided 1x1 and 3x3 through a shared im2col */
	{2, 64, 9, 9, 96, 3, 3, {1, 1}, {1, 1}, {1, 1}, 2, 1},
	{1, 96, 14, 14, 80, 1, 1, {2, 2}, {0, 0}, {1, 1}, 1, 0},
	/* 1x1 chunks read in place by the GEMM: enough chunks for the threads,
	 * a last chunk of 11.5 tiles; and K past one K block (1100 > 1024) */
	{1, 300, 40, 41, 30, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, 1},
	{1, 1100, 16, 16, 13, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, 0},
	/* 1x1 on small maps whose last tile of pixels is mostly padding: the
	 * transposed product with a packed weight (conv_pointwise_t.c); two
	 * images, channel counts off the 8 x 8 transpose blocks */
	{2, 45, 7, 7, 70, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, 1},
	{1, 21, 5, 10, 130, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, 0},
	/* K a multiple of 1024: a constant weight is held with padded rows
	 * (1x1 direct, and im2col with 64 x 4 x 4 taps) */
	{1, 1024, 6, 5, 14, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, 1},
	{2, 64, 9, 8, 10, 4, 4, {1, 2}, {1, 0}, {1, 1}, 1, 0},
	/* 1x1 with 512+ output channels: the GEMM packs the pixels instead of
	 * reading them in place (one GEMM per image; and one per chunk) */
	{1, 40, 12, 11, 530, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, 1},
	{8, 16, 6, 8, 515, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, 0},
};

static void test_conv2d(void)
{
	for (int dti = 0; dti < 2; dti++)
		for (size_t i = 0; i < sizeof conv_cases / sizeof conv_cases[0]; i++)
			for (int wconst = 0; wconst < 2; wconst++)
				test_conv_case(dti ? AIR_F64 : AIR_F32, &conv_cases[i], wconst);
}

/* Narrow inputs (up to 8 channels, one group, no column dilation) stay
 * NCHW: with AVX-512 in conv_narrow.c, else in the implicit GEMM
 * (conv_implicit.c); the kernel is the one chosen, and its values (and
 * with each activation) are test_conv_case's. Stems at two sizes, a
 * batch, 8 channels, dilated rows, uneven strides and padding, outputs
 * narrower than a micro-tile, channels past a whole panel, an output row
 * (300 x 900 floats) past the 1 MiB an NCHW band's output may take. */
static const conv_case narrow_cases[] = {
	{1, 3, 40, 38, 64, 7, 7, {2, 2}, {3, 3}, {1, 1}, 1, 1},
	{2, 3, 17, 17, 8, 7, 7, {2, 2}, {3, 3}, {1, 1}, 1, 0},
	{1, 8, 12, 9, 33, 3, 3, {1, 2}, {1, 0}, {2, 1}, 1, 1},
	{3, 1, 9, 4, 17, 5, 3, {1, 1}, {2, 1}, {1, 1}, 1, 0},
	{1, 5, 6, 30, 16, 1, 3, {3, 1}, {0, 4}, {1, 1}, 1, 1},
	{1, 2, 5, 300, 900, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, 1},
	{1, 4, 9, 40, 12, 3, 5, {2, 3}, {1, 2}, {1, 1}, 1, 1}, /* column stride 3: three phases */
};

/* The fast kernel the compile picks for conv case c (one group), weight
 * and bias constant or not, is kernel (" name "). */
static void check_conv_kernel(const conv_case *c, int wconst, const char *kernel)
{
	float *x = calloc((size_t)(c->N * c->C * c->H * c->W), sizeof(float));
	float *w = calloc((size_t)(c->O * c->C * c->KH * c->KW), sizeof(float)), *b = calloc((size_t)c->O, 4);
	th_arg args[3] = {th_make(AIR_F32, x, 4, (int64_t[]){c->N, c->C, c->H, c->W}),
			  th_make(AIR_F32, w, 4, (int64_t[]){c->O, c->C, c->KH, c->KW}),
			  th_make(AIR_F32, b, 1, (int64_t[]){c->O})};
	args[1].constant = args[2].constant = wconst;
	air_attr attrs[5];
	conv_attrs_of(c, attrs);
	air_model *m = th_compile("conv2d", args, 2 + c->bias, attrs, 5, 0);
	if (!m || !strstr(air_model_report(m), kernel))
		fprintf(stderr, "conv x[%lld,%lld,%lld,%lld] O %lld k%lldx%lld: not%s\n%s\n", (long long)c->N,
			(long long)c->C, (long long)c->H, (long long)c->W, (long long)c->O, (long long)c->KH,
			(long long)c->KW, kernel, m ? air_model_report(m) : "(no model)");
	CHECK(m && strstr(air_model_report(m), kernel));
	air_model_destroy(m);
	free(x), free(w), free(b);
}

/* Wide inputs whose output rows hold two micro-tiles or more take it too;
 * the band is transposed from NCHW in 8 x 8 blocks (channels and widths
 * off them here). Narrower output rows stay with im2col. (All strided:
 * alone, a stride-1 spatial conv goes channels-last.) */
static const conv_case wide_cases[] = {
	{1, 16, 30, 50, 24, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, 1},
	{2, 13, 9, 27, 40, 3, 3, {2, 1}, {1, 1}, {1, 1}, 1, 0},
	{1, 37, 11, 57, 45, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, 0},
	/* conv1d's shape (one output row): column chunks, each transposed
	 * into its place in the NCHW rows; stride 2, both ends padded */
	{1, 24, 1, 400, 33, 1, 3, {1, 2}, {0, 1}, {1, 1}, 1, 1},
	{2, 20, 1, 301, 40, 1, 5, {1, 2}, {0, 2}, {1, 1}, 1, 0},
	/* ... and with wide kernel rows: K 300 and 1050 */
	{1, 100, 1, 150, 40, 1, 3, {1, 2}, {0, 1}, {1, 1}, 1, 1},
	{1, 350, 1, 60, 20, 1, 3, {1, 2}, {0, 1}, {1, 1}, 1, 0},
};

static void test_conv_epilogue_case(air_dtype dt, const conv_case *c, int act, int has_res, int wconst);
static bool conv_res_uses(const conv_case *c, const char *kernel);

static void test_conv2d_narrow(void)
{
	/* with AVX-512, straight into NCHW (conv_narrow.c); else the implicit GEMM */
	const char *narrow = (kcpu_features() & KCPU_AVX512) == KCPU_AVX512 ? " conv2d_narrow_nchw "
									 : " conv2d_implicit_gemm_nchw ";
	for (size_t i = 0; i < sizeof narrow_cases / sizeof narrow_cases[0]; i++) {
		test_conv_case(AIR_F32, &narrow_cases[i], 1);
		check_conv_kernel(&narrow_cases[i], 1, narrow);
		/* its activations (the others, and a residual, go to the implicit GEMM) */
		for (int act = 0; act <= 8; act++)
			test_conv_epilogue_case(AIR_F32, &narrow_cases[i], act, act == 5, 1);
	}
	for (size_t i = 0; i < sizeof wide_cases / sizeof wide_cases[0]; i++)
		for (int wconst = 0; wconst < 2; wconst++) {
			test_conv_case(AIR_F32, &wide_cases[i], wconst);
			check_conv_kernel(&wide_cases[i], wconst, " conv2d_implicit_gemm_nchw ");
		}
	conv_case narrow_rows = wide_cases[0];
	narrow_rows.W = 44; /* 22 output pixels a row */
	check_conv_kernel(&narrow_rows, 1, " conv2d_im2col_channels_last ");
}

/* Spatial convs with a constant weight, one group and no residual run
 * channels-last inside the NCHW op (conv_nhwc_im2col.c): the kernel is the
 * one chosen, and its values are test_conv_case's. Pixel chunks that span
 * two images, several chunks, channel blocks split between tasks (130 >
 * 128 on a small map), channel counts off the 8 x 8 transpose blocks,
 * strides, dilation, a non-square kernel (all strided: alone, a stride-1
 * spatial conv goes channels-last through the layout pass). A weight that
 * is a graph input (a training step's parameter) is packed by every call;
 * a residual or a grouped conv keep the NCHW im2col. */
static const conv_case channels_last_cases[] = {
	{2, 17, 10, 12, 130, 3, 3, {2, 1}, {0, 2}, {1, 1}, 1, 1},
	{3, 20, 9, 11, 130, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, 0},
	{2, 64, 30, 28, 37, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, 1},
	{1, 12, 13, 8, 9, 3, 2, {2, 1}, {2, 0}, {2, 3}, 1, 1},
};

static void test_conv2d_channels_last(void)
{
	for (size_t i = 0; i < sizeof channels_last_cases / sizeof channels_last_cases[0]; i++) {
		for (int wconst = 0; wconst < 2; wconst++) {
			test_conv_case(AIR_F32, &channels_last_cases[i], wconst);
			check_conv_kernel(&channels_last_cases[i], wconst, " conv2d_im2col_channels_last ");
		}
	}
	/* with a residual (here as in test_conv2d_epilogue), the NCHW im2col */
	CHECK(conv_res_uses(&channels_last_cases[0], " conv2d_im2col_gemm "));
}

/* Which kernel takes a 1x1: the transposed product on a 7x7 map (its
 * weight packed once, or by every call when it is a graph input), the
 * direct GEMM elsewhere, 14x14
 * included (196 pixels: the direct kernel's last tile is at most half
 * wide, one vector, on every ISA). */
static void test_conv2d_pointwise_choice(void)
{
	static const struct {
		int64_t H, W;
		int wconst;
		const char *kernel;
	} cases[] = {
		{7, 7, 1, " conv2d_gemm_1x1_t "},
		{7, 7, 0, " conv2d_gemm_1x1_t "},
		{14, 14, 1, " conv2d_gemm_1x1 "},
		{28, 28, 1, " conv2d_gemm_1x1 "},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		float *x = calloc((size_t)(32 * cases[i].H * cases[i].W), sizeof(float)), *w = calloc(32 * 48, sizeof(float));
		th_arg args[2] = {th_make(AIR_F32, x, 4, (int64_t[]){1, 32, cases[i].H, cases[i].W}),
				  th_make(AIR_F32, w, 4, (int64_t[]){48, 32, 1, 1})};
		args[1].constant = cases[i].wconst;
		air_model *m = th_compile("conv2d", args, 2, NULL, 0, 0);
		CHECK(m && strstr(air_model_report(m), cases[i].kernel));
		air_model_destroy(m);
		free(x), free(w);
	}
}

/* A weight that is a graph input is packed by every call, from the data
 * of that call: one model, run with one weight and then another (the
 * second run's packed copy must not be the first's), on each kernel that
 * packs it: channels-last im2col, the implicit GEMM, the transposed 1x1
 * (two images), and a weight with 130 output channels (two blocks of
 * columns) and 3x3 taps over 20 channels (runs of 16 and 4). */
static void test_conv2d_runtime_weight(void)
{
	static const struct {
		conv_case c;
		const char *kernel;
	} cases[] = {
		{{2, 17, 10, 12, 130, 3, 3, {2, 1}, {0, 2}, {1, 1}, 1, 1}, " conv2d_im2col_channels_last "},
		{{3, 20, 9, 11, 130, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, 0}, " conv2d_im2col_channels_last "},
		{{1, 16, 30, 50, 24, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, 1}, " conv2d_implicit_gemm_nchw "},
		{{2, 40, 7, 7, 70, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, 1}, " conv2d_gemm_1x1_t "},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const conv_case *c = &cases[i].c;
		int64_t OH = out_size(c->H, c->KH, c->p[0], c->s[0], c->d[0], 0);
		int64_t OW = out_size(c->W, c->KW, c->p[1], c->s[1], c->d[1], 0);
		int64_t nx = c->N * c->C * c->H * c->W, nw = c->O * c->C * c->KH * c->KW, ny = c->N * c->O * OH * OW;
		double *x = th_values(nx, AIR_F32), *b = th_values(c->O, AIR_F32);
		float *xb = th_as(x, nx, AIR_F32), *bb = th_as(b, c->O, AIR_F32);
		float *wb = malloc(sizeof(float) * (size_t)nw);
		double *want = malloc(sizeof(double) * (size_t)ny), *mag = malloc(sizeof(double) * (size_t)ny);
		th_arg args[3] = {th_make(AIR_F32, xb, 4, (int64_t[]){c->N, c->C, c->H, c->W}),
				  th_make(AIR_F32, wb, 4, (int64_t[]){c->O, c->C, c->KH, c->KW}),
				  th_make(AIR_F32, bb, 1, (int64_t[]){c->O})};
		air_attr attrs[5];
		conv_attrs_of(c, attrs);
		air_model *m = th_compile("conv2d", args, 2 + c->bias, attrs, 5, 0);
		CHECK(m && strstr(air_model_report(m), cases[i].kernel));
		for (int run = 0; m && run < 2; run++) {
			double *w = th_values(nw, AIR_F32);
			for (int64_t k = 0; k < nw; k++)
				wb[k] = (float)w[k];
			expect_conv(c, OH, OW, x, w, b, want, mag);
			int r;
			int64_t dims[AIR_MAX_RANK];
			float *y = th_run(m, args, 2 + c->bias, &r, dims);
			char label[96];
			snprintf(label, sizeof label, "runtime weight case %zu run %d", i, run);
			if (y)
				th_compare(label, AIR_F32, y, want, mag, ny, 3e-5, 3e-6);
			free(y), free(w);
		}
		air_model_destroy(m);
		free(x), free(b), free(xb), free(bb), free(wb), free(want), free(mag);
	}
}

/* A model with symbolic N, H and W, run at several sizes: the output size
 * expressions must give PyTorch's sizes. */
static void test_conv2d_symbolic(void)
{
	conv_case c = {1, 6, 1, 1, 8, 3, 3, {2, 1}, {1, 0}, {1, 2}, 1, 1};
	int64_t O = c.O, nw = c.O * c.C * 9;
	double *w = th_values(nw, AIR_F32), *b = th_values(O, AIR_F32);
	void *wb = th_as(w, nw, AIR_F32), *bb = th_as(b, O, AIR_F32);
	for (int pass = 0; pass < 2; pass++) {
		th_arg args[3] = {th_make(AIR_F32, NULL, 4, (int64_t[]){1, c.C, 1, 1}),
				  th_make(AIR_F32, wb, 4, (int64_t[]){O, c.C, 3, 3}), th_make(AIR_F32, bb, 1, (int64_t[]){O})};
		args[0].sym[0] = 1, args[0].sym[2] = 2, args[0].sym[3] = 3;
		args[1].constant = args[2].constant = 1;
		air_attr attrs[5];
		conv_attrs_of(&c, attrs);
		air_model *m = th_compile("conv2d", args, 3, attrs, 5, pass ? 0 : AIR_COMPILE_REFERENCE_KERNELS);
		int64_t sizes[][3] = {{2, 9, 11}, {0, 5, 5}, {1, 1, 5}, {3, 16, 7}};
		for (size_t si = 0; si < 4 && m; si++) {
			c.N = sizes[si][0], c.H = sizes[si][1], c.W = sizes[si][2];
			int64_t OH = out_size(c.H, 3, 1, 2, 1, 0), OW = out_size(c.W, 3, 0, 1, 2, 0);
			int64_t nx = c.N * c.C * c.H * c.W, ny = c.N * O * OH * OW;
			double *x = th_values(nx, AIR_F32);
			double *want = malloc(sizeof(double) * (size_t)(ny + 1)), *mag = malloc(sizeof(double) * (size_t)(ny + 1));
			expect_conv(&c, OH, OW, x, w, b, want, mag);
			void *xb = th_as(x, nx, AIR_F32);
			args[0].dims[0] = c.N, args[0].dims[2] = c.H, args[0].dims[3] = c.W;
			args[0].data = xb;
			int r;
			int64_t dims[AIR_MAX_RANK];
			void *out = th_run(m, args, 3, &r, dims);
			CHECK(r == 4 && dims[0] == c.N && dims[1] == O && dims[2] == OH && dims[3] == OW);
			if (out && dims[2] == OH && dims[3] == OW)
				th_compare("conv2d symbolic", AIR_F32, out, want, mag, ny, 3e-5, 3e-6);
			free(out), free(x), free(want), free(mag), free(xb);
		}
		/* too small for the window: an error at run time, not a crash */
		if (m) {
			float tiny[6 * 1 * 1];
			args[0].dims[0] = 1, args[0].dims[2] = 1, args[0].dims[3] = 1;
			args[0].data = tiny;
			int r;
			int64_t dims[AIR_MAX_RANK];
			air_status st;
			void *out = th_run_status(m, args, 3, &r, dims, &st);
			CHECK(out == NULL && st == AIR_SHAPE_MISMATCH);
			free(out);
		}
		air_model_destroy(m);
	}
	free(w), free(b), free(wb), free(bb);
}

/* ---- batch_norm -------------------------------------------------------- */

static void test_batch_norm(void)
{
	static const int64_t shapes[][5] = {{2, 3}, {0, 4, 5, 5}, {2, 5, 7, 3}, {1, 1, 1, 1}, {2, 3, 2, 3, 4}, {3, 17, 4}};
	static const int ranks[] = {2, 4, 4, 4, 5, 3};
	for (int dti = 0; dti < 2; dti++) {
		air_dtype dt = dti ? AIR_F64 : AIR_F32;
		for (size_t si = 0; si < 6; si++) {
			int rank = ranks[si];
			const int64_t *dims = shapes[si];
			int64_t n = 1, C = dims[1], inner = 1;
			for (int d = 0; d < rank; d++)
				n *= dims[d];
			for (int d = 2; d < rank; d++)
				inner *= dims[d];
			double *x = th_values(n, dt), *p[4];
			for (int i = 0; i < 4; i++)
				p[i] = th_values(C, dt);
			for (int64_t i = 0; i < C; i++)
				p[3][i] = fabs(p[3][i]) + (dt == AIR_F32 ? 0.25 : 0.125); /* variance */
			void *bufs[5] = {th_as(x, n, dt)};
			for (int i = 0; i < 4; i++)
				bufs[1 + i] = th_as(p[i], C, dt);
			double *want = malloc(sizeof(double) * (size_t)(n + 1)), *mag = malloc(sizeof(double) * (size_t)(n + 1));
			for (int variant = 0; variant < 4; variant++) {
				int hw = variant & 1, hb = variant >> 1;
				double eps = variant == 3 ? 1e-3 : 1e-5;
				for (int64_t i = 0; i < n; i++) {
					int64_t ch = i / inner % C;
					double inv = 1.0 / sqrt(p[3][ch] + eps);
					double wv = hw ? p[0][ch] : 1.0, bv = hb ? p[1][ch] : 0.0;
					want[i] = (x[i] - p[2][ch]) * inv * wv + bv;
					mag[i] = (fabs(x[i]) + fabs(p[2][ch])) * inv * fabs(wv) + fabs(bv);
				}
				th_arg args[5];
				int na = 0;
				args[na++] = th_make(dt, bufs[0], rank, dims);
				for (int i = 0; i < 4; i++) {
					if ((i == 0 && !hw) || (i == 1 && !hb))
						continue;
					args[na] = th_make(dt, bufs[1 + i], 1, (int64_t[]){C});
					args[na++].constant = 1;
				}
				air_attr attrs[3] = {th_float("eps", eps), th_int("has_weight", hw), th_int("has_bias", hb)};
				char label[128];
				snprintf(label, sizeof label, "batch_norm %s rank %d shape %zu weight %d bias %d",
					 air_dtype_name(dt), rank, si, hw, hb);
				check_op(label, "batch_norm", args, na, attrs, 3, rank, dims, want, mag,
					 dt == AIR_F32 ? 1e-6 : 1e-13);
			}
			free(x), free(want), free(mag);
			for (int i = 0; i < 4; i++)
				free(p[i]);
			for (int i = 0; i < 5; i++)
				free(bufs[i]);
		}
	}
}

/* ---- pooling ----------------------------------------------------------- */

typedef struct pool_case {
	int64_t lead[2]; /* N, C (N < 0: a 3-D input [C, H, W]) */
	int64_t H, W;
	int64_t k[2], s[2], p[2], d[2];
	int ceil_mode, count_include_pad;
	int64_t divisor;
} pool_case;

static const pool_case pool_cases[] = {
	/* N  C    H   W   kernel  stride  pad     dil   ceil cip div */
	{{1, 3}, 9, 9, {3, 3}, {2, 2}, {1, 1}, {1, 1}, 0, 1, 0},
	{{2, 2}, 6, 6, {3, 3}, {2, 2}, {1, 1}, {1, 1}, 1, 1, 0},
	{{1, 1}, 5, 5, {3, 3}, {2, 2}, {1, 1}, {1, 1}, 1, 1, 0},
	{{1, 1}, 5, 5, {2, 2}, {2, 2}, {1, 1}, {1, 1}, 1, 1, 0},
	{{1, 1}, 5, 5, {2, 2}, {2, 2}, {1, 1}, {1, 1}, 1, 0, 0},
	{{2, 3}, 2, 2, {3, 3}, {2, 2}, {0, 0}, {1, 1}, 1, 1, 0}, /* window larger than input, ceil */
	{{1, 2}, 11, 7, {3, 2}, {2, 1}, {1, 0}, {2, 3}, 0, 0, 0},
	{{1, 2}, 11, 7, {3, 2}, {3, 2}, {1, 1}, {1, 1}, 1, 0, 5},
	{{-1, 4}, 7, 8, {2, 2}, {2, 2}, {0, 0}, {1, 1}, 0, 1, 0}, /* 3-D input */
	{{0, 3}, 5, 5, {2, 2}, {1, 1}, {1, 1}, {1, 1}, 0, 1, 0},  /* empty batch */
	{{1, 1}, 1, 1, {1, 1}, {1, 1}, {0, 0}, {1, 1}, 0, 1, 0},
	{{2, 5}, 13, 17, {4, 3}, {3, 4}, {2, 1}, {1, 1}, 1, 0, 0},
	{{2, 5}, 13, 17, {4, 3}, {3, 4}, {2, 1}, {1, 1}, 1, 1, 0},
};

static void pool_shape(const pool_case *c, int *rank, int64_t *xd, int64_t *yd, int64_t *OH, int64_t *OW, int avg)
{
	int64_t d0 = avg ? 1 : c->d[0], d1 = avg ? 1 : c->d[1];
	*OH = out_size(c->H, c->k[0], c->p[0], c->s[0], d0, c->ceil_mode);
	*OW = out_size(c->W, c->k[1], c->p[1], c->s[1], d1, c->ceil_mode);
	int r = 0;
	if (c->lead[0] >= 0)
		xd[r] = yd[r] = c->lead[0], r++;
	xd[r] = yd[r] = c->lead[1], r++;
	xd[r] = c->H, yd[r] = *OH, r++;
	xd[r] = c->W, yd[r] = *OW, r++;
	*rank = r;
}

/* torch's max_pool2d and avg_pool2d for one plane, in double */
static void expect_pool(const pool_case *c, int avg, int64_t OH, int64_t OW, const double *x, double *y)
{
	for (int64_t oh = 0; oh < OH; oh++)
		for (int64_t ow = 0; ow < OW; ow++) {
			double m = -INFINITY, s = 0;
			int64_t cnt = 0;
			int64_t kd0 = avg ? 1 : c->d[0], kd1 = avg ? 1 : c->d[1];
			for (int64_t i = 0; i < c->k[0]; i++)
				for (int64_t j = 0; j < c->k[1]; j++) {
					int64_t ih = oh * c->s[0] - c->p[0] + i * kd0, iw = ow * c->s[1] - c->p[1] + j * kd1;
					if (ih < 0 || ih >= c->H || iw < 0 || iw >= c->W)
						continue;
					double v = x[ih * c->W + iw];
					if (v > m || isnan(v))
						m = isnan(m) ? m : v;
					s += v;
					cnt++;
				}
			if (!avg) {
				y[oh * OW + ow] = m;
				continue;
			}
			/* the padded window, clipped to input + padding */
			int64_t h0 = oh * c->s[0] - c->p[0], w0 = ow * c->s[1] - c->p[1];
			int64_t h1 = h0 + c->k[0] < c->H + c->p[0] ? h0 + c->k[0] : c->H + c->p[0];
			int64_t w1 = w0 + c->k[1] < c->W + c->p[1] ? w0 + c->k[1] : c->W + c->p[1];
			int64_t div = c->divisor ? c->divisor : c->count_include_pad ? (h1 - h0) * (w1 - w0) : cnt;
			y[oh * OW + ow] = cnt ? s / (double)div : 0;
		}
}

static void test_pools(void)
{
	for (int dti = 0; dti < 2; dti++) {
		air_dtype dt = dti ? AIR_F64 : AIR_F32;
		for (size_t ci = 0; ci < sizeof pool_cases / sizeof pool_cases[0]; ci++)
			for (int avg = 0; avg < 2; avg++) {
				const pool_case *c = &pool_cases[ci];
				if (!avg && c->divisor)
					continue;
				if (avg && (c->d[0] != 1 || c->d[1] != 1))
					continue;
				int rank;
				int64_t xd[4], yd[4], OH, OW;
				pool_shape(c, &rank, xd, yd, &OH, &OW, avg);
				int64_t planes = (c->lead[0] >= 0 ? c->lead[0] : 1) * c->lead[1];
				int64_t nx = planes * c->H * c->W, ny = planes * OH * OW;
				double *x = th_values(nx, dt);
				if (nx > 3)
					x[nx / 2] = NAN; /* NaN propagates through max and avg */
				double *want = malloc(sizeof(double) * (size_t)(ny + 1));
				for (int64_t pl = 0; pl < planes; pl++)
					expect_pool(c, avg, OH, OW, x + pl * c->H * c->W, want + pl * OH * OW);
				void *xb = th_as(x, nx, dt);
				th_arg args[1] = {th_make(dt, xb, rank, xd)};
				air_attr attrs[6];
				int na = 0;
				attrs[na++] = th_ints("kernel", c->k, 2);
				attrs[na++] = th_ints("stride", c->s, 2);
				attrs[na++] = th_ints("padding", c->p, 2);
				if (!avg)
					attrs[na++] = th_ints("dilation", c->d, 2);
				attrs[na++] = th_int("ceil_mode", c->ceil_mode);
				if (avg) {
					attrs[na++] = th_int("count_include_pad", c->count_include_pad);
					attrs[na++] = th_int("divisor_override", c->divisor);
				}
				char label[128];
				snprintf(label, sizeof label, "%s %s case %zu", avg ? "avg_pool2d" : "max_pool2d",
					 air_dtype_name(dt), ci);
				check_op(label, avg ? "avg_pool2d" : "max_pool2d", args, 1, attrs, na, rank, yd, want, NULL,
					 dt == AIR_F32 ? 1e-6 : 1e-14);
				free(x), free(want), free(xb);
			}
	}
	/* the default stride is the kernel */
	double x[16];
	for (int i = 0; i < 16; i++)
		x[i] = i;
	void *xb = th_as(x, 16, AIR_F32);
	th_arg args[1] = {th_make(AIR_F32, xb, 4, (int64_t[]){1, 1, 4, 4})};
	air_attr k2 = th_ints("kernel", (int64_t[]){2, 2}, 2);
	double want_max[4] = {5, 7, 13, 15}, want_avg[4] = {2.5, 4.5, 10.5, 12.5};
	check_op("max_pool2d default stride", "max_pool2d", args, 1, &k2, 1, 4, (int64_t[]){1, 1, 2, 2}, want_max, NULL, 0);
	check_op("avg_pool2d default stride", "avg_pool2d", args, 1, &k2, 1, 4, (int64_t[]){1, 1, 2, 2}, want_avg, NULL, 0);
	free(xb);
}

/* max_pool2d in ceil mode with symbolic H and W: the "last window starts
 * inside" correction must hold as an expression. */
/* The fast NCHW max pool (pool_nchw.c) takes every f32 max_pool2d and gives
 * the reference's values bit for bit: inputs of -1, -0, +0, 1 and NaN make
 * ties between the zeros (the first one met stays) and NaN windows, over
 * strides, padding, dilation and ceil mode. */
static void test_max_pool_rows(void)
{
	static const pool_case cases[] = {
		{{2, 3}, 13, 17, {3, 3}, {2, 2}, {1, 1}, {1, 1}, 0, 1, 0},
		{{1, 4}, 12, 9, {2, 2}, {2, 2}, {0, 0}, {1, 1}, 1, 1, 0},
		{{1, 2}, 11, 7, {3, 2}, {2, 1}, {1, 0}, {2, 3}, 1, 1, 0},
		{{2, 5}, 13, 17, {4, 3}, {3, 4}, {2, 1}, {1, 1}, 1, 1, 0},
		{{-1, 3}, 40, 37, {5, 5}, {1, 3}, {2, 2}, {1, 1}, 0, 1, 0},
	};
	static const float vals[5] = {-1.0f, -0.0f, 0.0f, 1.0f, NAN};
	int nan = 0, negzero = 0;
	for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
		const pool_case *c = &cases[ci];
		int rank;
		int64_t xd[4], yd[4], OH, OW;
		pool_shape(c, &rank, xd, yd, &OH, &OW, 0);
		int64_t planes = (c->lead[0] >= 0 ? c->lead[0] : 1) * c->lead[1], nx = planes * c->H * c->W;
		int64_t ny = planes * OH * OW;
		float *x = malloc(sizeof(float) * (size_t)nx);
		uint32_t seed = 12345;
		for (int64_t i = 0; i < nx; i++) {
			seed = seed * 1664525u + 1013904223u;
			uint32_t r = seed >> 24;
			x[i] = vals[r < 8 ? 4 : r % 4]; /* NaN about 1 in 32 */
		}
		th_arg args[1] = {th_make(AIR_F32, x, rank, xd)};
		air_attr attrs[5] = {th_ints("kernel", c->k, 2), th_ints("stride", c->s, 2), th_ints("padding", c->p, 2),
				     th_ints("dilation", c->d, 2), th_int("ceil_mode", c->ceil_mode)};
		float *out[2] = {NULL, NULL};
		for (int pass = 0; pass < 2; pass++) {
			air_model *m = th_compile("max_pool2d", args, 1, attrs, 5, pass == 0 ? AIR_COMPILE_REFERENCE_KERNELS : 0);
			CHECK(m != NULL);
			if (!m)
				continue;
			if (pass == 1)
				CHECK(strstr(air_model_report(m), " max_pool2d_rows ") != NULL);
			int r;
			int64_t got[AIR_MAX_RANK];
			out[pass] = th_run(m, args, 1, &r, got);
			CHECK(out[pass] && r == rank && got[rank - 1] == OW && got[rank - 2] == OH);
			air_model_destroy(m);
		}
		CHECK(out[0] && out[1] && memcmp(out[0], out[1], sizeof(float) * (size_t)ny) == 0);
		for (int64_t i = 0; out[1] && i < ny; i++) {
			nan += out[1][i] != out[1][i];
			negzero += out[1][i] == 0.0f && signbit(out[1][i]);
		}
		free(out[0]), free(out[1]), free(x);
	}
	CHECK(nan > 0 && negzero > 0); /* the cases reach both */
}

static void test_pool_symbolic(void)
{
	pool_case c = {{1, 2}, 1, 1, {3, 3}, {2, 2}, {1, 1}, {1, 1}, 1, 1, 0};
	for (int avg = 0; avg < 2; avg++) {
		th_arg args[1] = {th_make(AIR_F32, NULL, 4, (int64_t[]){1, 2, 1, 1})};
		args[0].sym[0] = 1, args[0].sym[2] = 2, args[0].sym[3] = 3;
		air_attr attrs[4] = {th_ints("kernel", c.k, 2), th_ints("stride", c.s, 2), th_ints("padding", c.p, 2),
				     th_int("ceil_mode", 1)};
		air_model *m = th_compile(avg ? "avg_pool2d" : "max_pool2d", args, 1, attrs, 4, 0);
		for (int64_t H = 1; H <= 9 && m; H++) {
			int64_t N = H % 3, W = 10 - H;
			c.H = H, c.W = W;
			int64_t OH = out_size(H, 3, 1, 2, 1, 1), OW = out_size(W, 3, 1, 2, 1, 1);
			int64_t nx = N * 2 * H * W, ny = N * 2 * OH * OW;
			double *x = th_values(nx, AIR_F32), *want = malloc(sizeof(double) * (size_t)(ny + 1));
			for (int64_t pl = 0; pl < N * 2; pl++)
				expect_pool(&c, avg, OH, OW, x + pl * H * W, want + pl * OH * OW);
			void *xb = th_as(x, nx, AIR_F32);
			args[0].dims[0] = N, args[0].dims[2] = H, args[0].dims[3] = W;
			args[0].data = xb;
			int r;
			int64_t dims[AIR_MAX_RANK];
			void *out = th_run(m, args, 1, &r, dims);
			CHECK(r == 4 && dims[2] == OH && dims[3] == OW);
			if (out && dims[2] == OH && dims[3] == OW)
				th_compare("pool symbolic ceil mode", AIR_F32, out, want, NULL, ny, 1e-6, 1e-7);
			free(out), free(x), free(want), free(xb);
		}
		air_model_destroy(m);
	}
}

static void test_adaptive_avg_pool2d(void)
{
	static const int64_t cases[][6] = {
		/* N C H W OH OW */
		{1, 3, 7, 7, 1, 1}, {2, 2, 10, 13, 3, 4}, {1, 2, 2, 3, 5, 4}, {0, 3, 4, 4, 2, 2}, {1, 1, 1, 1, 1, 1},
		{2, 4, 14, 14, 7, 7},
	};
	for (int dti = 0; dti < 2; dti++) {
		air_dtype dt = dti ? AIR_F64 : AIR_F32;
		for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
			const int64_t *c = cases[ci];
			int64_t planes = c[0] * c[1], H = c[2], W = c[3], OH = c[4], OW = c[5];
			double *x = th_values(planes * H * W, dt);
			double *want = malloc(sizeof(double) * (size_t)(planes * OH * OW + 1));
			for (int64_t pl = 0; pl < planes; pl++)
				for (int64_t i = 0; i < OH; i++)
					for (int64_t j = 0; j < OW; j++) {
						int64_t h0 = (int64_t)floor((double)(i * H) / (double)OH);
						int64_t h1 = (int64_t)ceil((double)((i + 1) * H) / (double)OH);
						int64_t w0 = (int64_t)floor((double)(j * W) / (double)OW);
						int64_t w1 = (int64_t)ceil((double)((j + 1) * W) / (double)OW);
						double s = 0;
						for (int64_t a = h0; a < h1; a++)
							for (int64_t b = w0; b < w1; b++)
								s += x[(pl * H + a) * W + b];
						want[(pl * OH + i) * OW + j] = s / (double)((h1 - h0) * (w1 - w0));
					}
			void *xb = th_as(x, planes * H * W, dt);
			th_arg args[1] = {th_make(dt, xb, 4, (int64_t[]){c[0], c[1], H, W})};
			air_attr a = th_ints("output_size", (int64_t[]){OH, OW}, 2);
			char label[96];
			snprintf(label, sizeof label, "adaptive_avg_pool2d %s case %zu", air_dtype_name(dt), ci);
			check_op(label, "adaptive_avg_pool2d", args, 1, &a, 1, 4, (int64_t[]){c[0], c[1], OH, OW}, want, NULL,
				 dt == AIR_F32 ? 1e-6 : 1e-14);
			free(x), free(want), free(xb);
		}
	}
}

/* ---- col2im ------------------------------------------------------------ */

/* N C KH KW OH OW sh sw ph pw dh dw: a transposed conv's shapes (stride 2,
 * kernel 4 and 3 with output padding), asymmetric everything, a kernel as
 * large as the output, blocks that overlap and blocks that leave gaps. */
static const int64_t col2im_cases[][12] = {
	{1, 4, 4, 4, 12, 12, 2, 2, 1, 1, 1, 1}, {2, 3, 3, 3, 10, 12, 2, 2, 1, 1, 1, 1},
	{1, 5, 3, 2, 7, 10, 1, 2, 2, 0, 2, 1},  {2, 2, 2, 2, 8, 8, 2, 2, 0, 0, 1, 1},
	{1, 3, 2, 3, 9, 11, 3, 3, 0, 1, 1, 2},  {1, 2, 5, 5, 5, 5, 1, 1, 0, 0, 1, 1},
	{0, 3, 3, 3, 6, 6, 1, 1, 1, 1, 1, 1},
};

static void test_col2im(void)
{
	/* variant 0: cols [N, C*KH*KW, L] into NCHW; 1: channels_last, cols
	 * [N, L, KH*KW*C] into [N, OH, OW, C]; 2: that and a bias */
	for (int v = 0; v < 6; v++) {
		air_dtype dt = v >= 3 ? AIR_F64 : AIR_F32;
		int last = v % 3 >= 1, has_bias = v % 3 == 2;
		for (size_t ci = 0; ci < sizeof col2im_cases / sizeof col2im_cases[0]; ci++) {
			const int64_t *c = col2im_cases[ci];
			int64_t N = c[0], C = c[1], KH = c[2], KW = c[3], OH = c[4], OW = c[5];
			int64_t LH = out_size(OH, KH, c[8], c[6], c[10], 0), LW = out_size(OW, KW, c[9], c[7], c[11], 0);
			int64_t rows = C * KH * KW, L = LH * LW, n_in = N * rows * L;
			double *x = th_values(n_in, dt), *bias = th_values(C, dt);
			double *want = calloc((size_t)(N * C * OH * OW + 1), sizeof(double));
			for (int64_t i = 0; i < N * C * OH * OW; i++)
				want[i] = has_bias ? bias[last ? i % C : i / (OH * OW) % C] : 0.0;
			/* every entry of cols, added where its tap lands */
			for (int64_t n = 0; n < N; n++)
				for (int64_t r = 0; r < rows; r++)
					for (int64_t l = 0; l < L; l++) {
						int64_t ch = r / (KH * KW), ki = r / KW % KH, kj = r % KW;
						int64_t oh = l / LW * c[6] - c[8] + ki * c[10];
						int64_t ow = l % LW * c[7] - c[9] + kj * c[11];
						int64_t at = last ? (n * L + l) * rows + (ki * KW + kj) * C + ch : (n * rows + r) * L + l;
						int64_t to = last ? ((n * OH + oh) * OW + ow) * C + ch : ((n * C + ch) * OH + oh) * OW + ow;
						if (oh >= 0 && oh < OH && ow >= 0 && ow < OW)
							want[to] += x[at];
					}
			void *xb = th_as(x, n_in, dt), *bb = th_as(bias, C, dt);
			th_arg args[2] = {th_make(dt, xb, 3, last ? (int64_t[]){N, L, rows} : (int64_t[]){N, rows, L}),
					  th_make(dt, bb, 1, (int64_t[]){C})};
			air_attr a[6] = {th_ints("output_size", (int64_t[]){OH, OW}, 2), th_ints("kernel", (int64_t[]){KH, KW}, 2),
					 th_ints("dilation", (int64_t[]){c[10], c[11]}, 2),
					 th_ints("padding", (int64_t[]){c[8], c[9]}, 2),
					 th_ints("stride", (int64_t[]){c[6], c[7]}, 2), th_int("channels_last", last)};
			char label[96];
			snprintf(label, sizeof label, "col2im %s case %zu%s%s", air_dtype_name(dt), ci,
				 last ? " channels_last" : "", has_bias ? " bias" : "");
			check_op(label, "col2im", args, 1 + has_bias, a, 6, 4,
				 last ? (int64_t[]){N, OH, OW, C} : (int64_t[]){N, C, OH, OW}, want, NULL,
				 dt == AIR_F32 ? 1e-6 : 1e-14);
			free(x), free(bias), free(want), free(xb), free(bb);
		}
	}
	/* bad geometry: rows not a whole number of kernels, blocks that do not
	 * match output_size, a window above the padded output, rank 2 */
	float d[256] = {0};
	air_attr a[2] = {th_ints("output_size", (int64_t[]){4, 4}, 2), th_ints("kernel", (int64_t[]){2, 2}, 2)};
	th_arg x = th_make(AIR_F32, d, 3, (int64_t[]){1, 6, 9});
	th_expect_build_error("col2im", &x, 1, a, 2, AIR_SHAPE_MISMATCH, "col2im rows not whole kernels");
	x = th_make(AIR_F32, d, 3, (int64_t[]){1, 8, 8});
	th_expect_build_error("col2im", &x, 1, a, 2, AIR_SHAPE_MISMATCH, "col2im blocks != output_size");
	a[1] = th_ints("kernel", (int64_t[]){5, 2}, 2);
	x = th_make(AIR_F32, d, 3, (int64_t[]){1, 10, 3});
	th_expect_build_error("col2im", &x, 1, a, 2, AIR_SHAPE_MISMATCH, "col2im window above output");
	a[1] = th_ints("kernel", (int64_t[]){2, 2}, 2);
	x = th_make(AIR_F32, d, 2, (int64_t[]){8, 9});
	th_expect_build_error("col2im", &x, 1, a, 2, AIR_SHAPE_MISMATCH, "col2im rank 2");
	th_arg xb[2] = {th_make(AIR_F32, d, 3, (int64_t[]){1, 8, 9}), th_make(AIR_F32, d, 1, (int64_t[]){3})};
	th_expect_build_error("col2im", xb, 2, a, 2, AIR_SHAPE_MISMATCH, "col2im bias size");
	air_attr al[3] = {a[0], a[1], th_int("channels_last", 1)};
	xb[0] = th_make(AIR_F32, d, 3, (int64_t[]){1, 8, 8}); /* 8 blocks of 2 channels' taps; 3 x 3 fit */
	th_expect_build_error("col2im", xb, 1, al, 3, AIR_SHAPE_MISMATCH, "col2im channels_last blocks");
	al[2] = th_int("channels_last", 2);
	th_expect_build_error("col2im", xb, 1, al, 3, AIR_INVALID_ARGUMENT, "col2im channels_last 2");
	th_expect_build_error("col2im", &x, 1, a + 1, 1, AIR_INVALID_ARGUMENT, "col2im no output_size");
}

/* ---- errors ------------------------------------------------------------ */

static void test_errors(void)
{
	float d[4096] = {0};
	th_arg args[5];
	air_attr attrs[5];
	conv_case c = {1, 4, 8, 8, 6, 3, 3, {1, 1}, {0, 0}, {1, 1}, 1, 0};
	conv_attrs_of(&c, attrs);
	args[0] = th_make(AIR_F32, d, 4, (int64_t[]){1, 4, 8, 8});
	args[1] = th_make(AIR_F32, d, 4, (int64_t[]){6, 3, 3, 3});
	th_expect_build_error("conv2d", args, 2, attrs, 5, AIR_SHAPE_MISMATCH, "conv2d channels");
	attrs[3] = th_int("groups", 4);
	args[1] = th_make(AIR_F32, d, 4, (int64_t[]){6, 1, 3, 3});
	th_expect_build_error("conv2d", args, 2, attrs, 5, AIR_SHAPE_MISMATCH, "conv2d O not divisible by groups");
	attrs[3] = th_int("groups", 0);
	th_expect_build_error("conv2d", args, 2, attrs, 5, AIR_INVALID_ARGUMENT, "conv2d groups 0");
	attrs[3] = th_int("groups", 1);
	args[1] = th_make(AIR_F32, d, 4, (int64_t[]){6, 4, 9, 3});
	th_expect_build_error("conv2d", args, 2, attrs, 5, AIR_SHAPE_MISMATCH, "conv2d kernel above input");
	args[1] = th_make(AIR_F32, d, 4, (int64_t[]){6, 4, 3, 3});
	args[2] = th_make(AIR_F32, d, 1, (int64_t[]){5});
	attrs[4] = th_int("has_bias", 1);
	th_expect_build_error("conv2d", args, 3, attrs, 5, AIR_SHAPE_MISMATCH, "conv2d bias size");
	attrs[4] = th_int("has_bias", 0);
	args[2] = th_make(AIR_F32, d, 1, (int64_t[]){6});
	th_expect_build_error("conv2d", args, 3, attrs, 5, AIR_INVALID_ARGUMENT, "conv2d has_bias 0 with a bias");
	attrs[4] = th_int("has_bias", 1);
	attrs[0] = th_ints("stride", (int64_t[]){0, 1}, 2);
	th_expect_build_error("conv2d", args, 3, attrs, 5, AIR_INVALID_ARGUMENT, "conv2d stride 0");
	attrs[0] = th_ints("stride", (int64_t[]){1, 1, 1}, 3);
	th_expect_build_error("conv2d", args, 3, attrs, 5, AIR_INVALID_ARGUMENT, "conv2d stride of 3");
	attrs[0] = th_ints("stride", (int64_t[]){1, 1}, 2);
	attrs[1] = th_ints("padding", (int64_t[]){-1, 0}, 2);
	th_expect_build_error("conv2d", args, 3, attrs, 5, AIR_INVALID_ARGUMENT, "conv2d negative padding");
	args[0] = th_make(AIR_F32, d, 3, (int64_t[]){4, 8, 8});
	th_expect_build_error("conv2d", args, 2, NULL, 0, AIR_SHAPE_MISMATCH, "conv2d 3-D x");

	args[0] = th_make(AIR_F32, d, 4, (int64_t[]){2, 3, 4, 4});
	for (int i = 1; i < 5; i++)
		args[i] = th_make(AIR_F32, d, 1, (int64_t[]){3});
	args[4] = th_make(AIR_F32, d, 1, (int64_t[]){4});
	th_expect_build_error("batch_norm", args, 5, NULL, 0, AIR_SHAPE_MISMATCH, "batch_norm parameter size");
	th_expect_build_error("batch_norm", args, 4, NULL, 0, AIR_INVALID_ARGUMENT, "batch_norm 4 inputs, no attrs");
	air_attr bn = th_int("has_weight", 1);
	th_expect_build_error("batch_norm", args, 3, &bn, 1, AIR_INVALID_ARGUMENT, "batch_norm has_weight, 3 inputs");
	args[0] = th_make(AIR_F32, d, 1, (int64_t[]){3});
	th_expect_build_error("batch_norm", args, 3, NULL, 0, AIR_SHAPE_MISMATCH, "batch_norm 1-D x");

	args[0] = th_make(AIR_F32, d, 4, (int64_t[]){1, 1, 8, 8});
	air_attr pa[3] = {th_ints("kernel", (int64_t[]){3, 3}, 2), th_ints("padding", (int64_t[]){2, 2}, 2)};
	th_expect_build_error("max_pool2d", args, 1, pa, 2, AIR_INVALID_ARGUMENT, "max_pool2d padding above half");
	th_expect_build_error("avg_pool2d", args, 1, pa, 2, AIR_INVALID_ARGUMENT, "avg_pool2d padding above half");
	th_expect_build_error("max_pool2d", args, 1, pa + 1, 1, AIR_INVALID_ARGUMENT, "max_pool2d no kernel");
	pa[0] = th_ints("kernel", (int64_t[]){9, 3}, 2);
	th_expect_build_error("max_pool2d", args, 1, pa, 1, AIR_SHAPE_MISMATCH, "max_pool2d window above input");
	air_attr os = th_ints("output_size", (int64_t[]){2}, 1);
	th_expect_build_error("adaptive_avg_pool2d", args, 1, &os, 1, AIR_INVALID_ARGUMENT, "adaptive one size");
	args[0] = th_make(AIR_F32, d, 2, (int64_t[]){8, 8});
	os = th_ints("output_size", (int64_t[]){2, 2}, 2);
	th_expect_build_error("adaptive_avg_pool2d", args, 1, &os, 1, AIR_SHAPE_MISMATCH, "adaptive 2-D input");
}

/* ---- conv2d with a fused epilogue (act, residual) ------------------------ */

/* The activations of kernels/common/epilogue.h, in double. */
static double act_d(double x, int act)
{
	switch (act) {
	case 1: return x < 0 ? 0 : x;
	case 2: return x < 0 ? 0 : x > 6 ? 6 : x;
	case 3: return 0.5 * x * (1 + erf(x / sqrt(2.0)));
	case 4: return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
	case 5: return x / (1 + exp(-x));
	case 6: return 1 / (1 + exp(-x));
	case 7: return tanh(x);
	case 8: return x * (x + 3 < 0 ? 0 : x + 3 > 6 ? 6 : x + 3) / 6;
	default: return x;
	}
}

/* Each kernel kind: im2col, 1x1 direct, depthwise, grouped, empty batch,
 * 1x1 transposed (7x7), 1x1 read in place. */
static const conv_case epilogue_cases[] = {
	{2, 5, 7, 9, 6, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, 1},
	{3, 37, 7, 5, 29, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, 0},
	{1, 7, 9, 9, 7, 3, 3, {2, 2}, {1, 1}, {1, 1}, 7, 1},
	{1, 6, 9, 7, 4, 3, 3, {1, 1}, {1, 1}, {1, 1}, 2, 0},
	{0, 4, 6, 6, 3, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, 1},
	{1, 1, 1, 1, 1, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, 0},
	{2, 17, 10, 12, 130, 3, 3, {1, 1}, {0, 2}, {1, 1}, 1, 1},
	{2, 130, 9, 7, 133, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, 1},
	{1, 128, 11, 13, 20, 1, 1, {2, 2}, {0, 0}, {1, 1}, 1, 0},
	{2, 64, 9, 9, 96, 3, 3, {1, 1}, {1, 1}, {1, 1}, 2, 1},
	{2, 45, 7, 7, 70, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, 1},
	{1, 300, 40, 41, 30, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, 1},
};

/* wconst: whether the weight and bias are constants; -1: act % 2 (every
 * case then runs both ways across its activations) */
static void test_conv_epilogue_case(air_dtype dt, const conv_case *c, int act, int has_res, int wconst)
{
	if (wconst < 0)
		wconst = act % 2;
	int64_t OH = out_size(c->H, c->KH, c->p[0], c->s[0], c->d[0], 0);
	int64_t OW = out_size(c->W, c->KW, c->p[1], c->s[1], c->d[1], 0);
	int64_t nx = c->N * c->C * c->H * c->W, nw = c->O * (c->C / c->groups) * c->KH * c->KW;
	int64_t ny = c->N * c->O * OH * OW;
	double *x = th_values(nx, dt), *w = th_values(nw, dt), *b = th_values(c->O, dt), *r = th_values(ny, dt);
	for (int64_t i = 0; i < ny; i++)
		r[i] *= 4; /* reach relu6's and hardswish's upper bends too */
	double *want = malloc(sizeof(double) * (size_t)(ny + 1)), *mag = malloc(sizeof(double) * (size_t)(ny + 1));
	expect_conv(c, OH, OW, x, w, b, want, mag);
	for (int64_t i = 0; i < ny; i++) {
		double v = want[i] + (has_res ? r[i] : 0);
		want[i] = act_d(v, act);
		/* the activations' slopes are at most ~1.13 */
		mag[i] = 1.2 * (mag[i] + (has_res ? fabs(r[i]) : 0)) + 1e-3 * fabs(want[i]);
	}
	void *xb = th_as(x, nx, dt), *wb = th_as(w, nw, dt), *bb = th_as(b, c->O, dt), *rb = th_as(r, ny, dt);
	int64_t ydims[4] = {c->N, c->O, OH, OW};
	th_arg args[4];
	int na = 0;
	args[na++] = th_make(dt, xb, 4, (int64_t[]){c->N, c->C, c->H, c->W});
	args[na] = th_make(dt, wb, 4, (int64_t[]){c->O, c->C / c->groups, c->KH, c->KW});
	args[na++].constant = wconst;
	if (c->bias) {
		args[na] = th_make(dt, bb, 1, (int64_t[]){c->O});
		args[na++].constant = wconst;
	}
	if (has_res)
		args[na++] = th_make(dt, rb, 4, ydims);
	air_attr attrs[7];
	conv_attrs_of(c, attrs);
	attrs[5] = th_int("act", act);
	attrs[6] = th_int("has_residual", has_res);
	char label[200];
	snprintf(label, sizeof label, "conv2d epilogue %s x[%lld,%lld,%lld,%lld] O %lld k%lldx%lld g%lld act %d res %d",
		 air_dtype_name(dt), (long long)c->N, (long long)c->C, (long long)c->H, (long long)c->W, (long long)c->O,
		 (long long)c->KH, (long long)c->KW, (long long)c->groups, act, has_res);
	check_op(label, "conv2d", args, na, attrs, 7, 4, ydims, want, mag, dt == AIR_F32 ? 3e-5 : 1e-12);
	free(x), free(w), free(b), free(r), free(want), free(mag), free(xb), free(wb), free(bb), free(rb);
}

static void test_conv2d_epilogue(void)
{
	for (int dti = 0; dti < 2; dti++)
		for (size_t i = 0; i < sizeof epilogue_cases / sizeof epilogue_cases[0]; i++)
			for (int act = 0; act <= 8; act++)
				for (int res = 0; res < 2; res++)
					test_conv_epilogue_case(dti ? AIR_F64 : AIR_F32, &epilogue_cases[i], act, res, -1);
	/* the transposed 1x1 (7x7) in passes of images: 1.6 MB of product an
	 * image, 8 MB a pass, so 7 images run as passes of 4 and 3 */
	static const conv_case passes = {7, 16, 7, 7, 8192, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, 1};
	test_conv_epilogue_case(AIR_F32, &passes, 1, 1, 0);
	test_conv_epilogue_case(AIR_F32, &passes, 0, 0, 1);
	/* bad epilogue attributes and residual shapes are build errors */
	float xv[2 * 3 * 4 * 4] = {0}, wv[5 * 3] = {0}, rv[2 * 5 * 4 * 4] = {0};
	th_arg args[3] = {th_make(AIR_F32, xv, 4, (int64_t[]){2, 3, 4, 4}), th_make(AIR_F32, wv, 4, (int64_t[]){5, 3, 1, 1}),
			  th_make(AIR_F32, rv, 4, (int64_t[]){2, 5, 4, 4})};
	air_attr bad_act[1] = {th_int("act", -1)};
	th_expect_build_error("conv2d", args, 2, bad_act, 1, AIR_INVALID_ARGUMENT, "conv2d act -1");
	air_attr res1[1] = {th_int("has_residual", 1)};
	th_expect_build_error("conv2d", args, 2, res1, 1, AIR_INVALID_ARGUMENT, "conv2d residual missing");
	args[2] = th_make(AIR_F32, rv, 4, (int64_t[]){2, 5, 4, 3});
	th_expect_build_error("conv2d", args, 3, res1, 1, AIR_SHAPE_MISMATCH, "conv2d residual shape");
	/* with a residual, a bias needs has_bias or the count: x, w, bias, residual */
	float bv[5] = {0};
	th_arg four[4] = {args[0], args[1], th_make(AIR_F32, bv, 1, (int64_t[]){5}),
			  th_make(AIR_F32, rv, 4, (int64_t[]){2, 5, 4, 4})};
	air_graph *g = NULL;
	CHECK_OK(th_build("conv2d", four, 4, res1, 1, &g));
	air_graph_destroy(g);
}

/* Patch embeddings (stride == kernel, no padding, one group, a constant
 * weight) run conv_patches.c: ViT's stem, a 4x4 with rows and columns
 * left over (37 % 4), an odd kernel (copies that are not whole 16-float
 * lines), a non-square one, two images, without a bias; every activation
 * of the epilogue. A weight that is a graph input, a residual or a kernel
 * narrower than 4 go to the other kernels, and so do up to 8 input
 * channels at strides up to 4 (conv_narrow.c: Swin's 3-channel 4x4 stem
 * ran 0.27 ms there, 0.39 here). */
static const conv_case patch_cases[] = {
	{1, 3, 224, 224, 192, 16, 16, {16, 16}, {0, 0}, {1, 1}, 1, 1},
	{2, 12, 37, 37, 33, 4, 4, {4, 4}, {0, 0}, {1, 1}, 1, 1},
	{1, 3, 30, 31, 17, 5, 5, {5, 5}, {0, 0}, {1, 1}, 1, 0},
	{1, 2, 20, 40, 8, 4, 8, {4, 8}, {0, 0}, {1, 1}, 1, 1},
};

/* Does conv case c (constant weight and bias) run kernel? */
static bool conv_uses(const conv_case *c, const char *kernel)
{
	float *x = calloc((size_t)(c->N * c->C * c->H * c->W), sizeof(float));
	float *w = calloc((size_t)(c->O * c->C * c->KH * c->KW), sizeof(float)), *b = calloc((size_t)c->O, 4);
	th_arg args[3] = {th_make(AIR_F32, x, 4, (int64_t[]){c->N, c->C, c->H, c->W}),
			  th_make(AIR_F32, w, 4, (int64_t[]){c->O, c->C, c->KH, c->KW}),
			  th_make(AIR_F32, b, 1, (int64_t[]){c->O})};
	args[1].constant = args[2].constant = 1;
	air_attr attrs[5];
	conv_attrs_of(c, attrs);
	air_model *m = th_compile("conv2d", args, 2 + c->bias, attrs, 5, 0);
	bool uses = m && strstr(air_model_report(m), kernel);
	CHECK(m != NULL);
	air_model_destroy(m);
	free(x), free(w), free(b);
	return uses;
}

/* Does conv case c with a residual (constant weight, no bias) run kernel? */
static bool conv_res_uses(const conv_case *c, const char *kernel)
{
	int64_t OH = out_size(c->H, c->KH, c->p[0], c->s[0], c->d[0], 0);
	int64_t OW = out_size(c->W, c->KW, c->p[1], c->s[1], c->d[1], 0);
	float *x = calloc((size_t)(c->N * c->C * c->H * c->W), sizeof(float));
	float *w = calloc((size_t)(c->O * c->C * c->KH * c->KW), sizeof(float));
	float *r = calloc((size_t)(c->N * c->O * OH * OW), sizeof(float));
	th_arg args[3] = {th_make(AIR_F32, x, 4, (int64_t[]){c->N, c->C, c->H, c->W}),
			  th_make(AIR_F32, w, 4, (int64_t[]){c->O, c->C, c->KH, c->KW}),
			  th_make(AIR_F32, r, 4, (int64_t[]){c->N, c->O, OH, OW})};
	args[1].constant = 1;
	air_attr attrs[6];
	conv_attrs_of(c, attrs);
	attrs[4] = th_int("has_bias", 0);
	attrs[5] = th_int("has_residual", 1);
	air_model *m = th_compile("conv2d", args, 3, attrs, 6, 0);
	bool uses = m && strstr(air_model_report(m), kernel);
	CHECK(m != NULL);
	air_model_destroy(m);
	free(x), free(w), free(r);
	return uses;
}

static void test_conv2d_patches(void)
{
	for (size_t i = 0; i < sizeof patch_cases / sizeof patch_cases[0]; i++) {
		const conv_case *c = &patch_cases[i];
		test_conv_case(AIR_F32, c, 1);
		check_conv_kernel(c, 1, " conv2d_patches_gemm ");
		test_conv_case(AIR_F32, c, 0);
		float *x = calloc((size_t)(c->N * c->C * c->H * c->W), sizeof(float));
		float *w = calloc((size_t)(c->O * c->C * c->KH * c->KW), sizeof(float));
		th_arg args[2] = {th_make(AIR_F32, x, 4, (int64_t[]){c->N, c->C, c->H, c->W}),
				  th_make(AIR_F32, w, 4, (int64_t[]){c->O, c->C, c->KH, c->KW})};
		air_attr attrs[5];
		conv_attrs_of(c, attrs);
		attrs[4] = th_int("has_bias", 0);
		air_model *m = th_compile("conv2d", args, 2, attrs, 5, 0); /* weight an input */
		CHECK(m && !strstr(air_model_report(m), " conv2d_patches_gemm "));
		air_model_destroy(m);
		free(x), free(w);
		if (i > 0) /* (the 224x224 one is slow in the reference kernel) */
			for (int act = 0; act <= 8; act++)
				test_conv_epilogue_case(AIR_F32, c, act, act == 3, 1);
	}
	conv_case narrow = patch_cases[1];
	narrow.KW = narrow.s[1] = 3;
	test_conv_case(AIR_F32, &narrow, 1);
	CHECK(!conv_uses(&narrow, " conv2d_patches_gemm "));
	conv_case few = patch_cases[1];
	few.C = 3;
	check_conv_kernel(&few, 1, (kcpu_features() & KCPU_AVX512) == KCPU_AVX512 ? " conv2d_narrow_nchw "
										    : " conv2d_patches_gemm ");
	/* with a residual, not here */
	CHECK(!conv_res_uses(&patch_cases[1], " conv2d_patches_gemm "));
}

int main(void)
{
	test_conv2d_patches();
	test_conv2d_narrow();
	test_conv2d();
	test_conv2d_pointwise_choice();
	test_conv2d_runtime_weight();
	test_conv2d_channels_last();
	test_conv2d_symbolic();
	test_conv2d_epilogue();
	test_batch_norm();
	test_pools();
	test_max_pool_rows();
	test_pool_symbolic();
	test_adaptive_avg_pool2d();
	test_col2im();
	test_errors();
	return check_report("test_ops_conv");
}

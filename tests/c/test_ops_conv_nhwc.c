/* test_ops_conv_nhwc.c - the channels-last ops (conv2d_nhwc, max/avg/
 * adaptive_avg_pool2d_nhwc) through the public API: each case is run with
 * the reference kernels and the fast ones, and both are checked against
 * the NCHW reference op (conv2d, the pools) on the transposed input, with
 * the fused residual and activation applied here in double. Awkward sizes:
 * 1, 3, 17, 65 channels, 1, 7, 13 pixels, strides, padding, dilation,
 * groups, depthwise, every activation, residual, batches of 1 and 3. And
 * the NCHW <-> NHWC permutes' fast kernel against the reference. Bad
 * operands of conv2d_nhwc are refused. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels/common/half.h"
#include "op_harness.h"

static void *compile_run(const char *op, const th_arg *args, int n, const air_attr *attrs, int na, uint32_t flags,
			 uint32_t disabled, const char *want_kernel, int64_t *numel)
{
	air_graph *g;
	air_status st = th_build(op, args, n, attrs, na, &g);
	CHECK_OK(st);
	if (st != AIR_OK)
		return NULL;
	air_compile_options o;
	air_compile_options_init(&o);
	o.flags = flags;
	o.disabled_passes = disabled;
	air_model *m = NULL;
	st = air_compile(g, &o, &m);
	air_graph_destroy(g);
	CHECK_OK(st);
	if (st != AIR_OK)
		return NULL;
	if (want_kernel && !strstr(air_model_report(m), want_kernel)) {
		check_count++;
		check_failures++;
		fprintf(stderr, "%s: kernel %s not chosen:\n%s\n", op, want_kernel, air_model_report(m));
	}
	int rank;
	int64_t dims[AIR_MAX_RANK];
	void *out = th_run(m, args, n, &rank, dims);
	air_model_destroy(m);
	*numel = 1;
	for (int d = 0; d < rank; d++)
		*numel *= dims[d];
	return out;
}

/* [N, C, H, W] <-> [N, H, W, C] */
static void nchw_to_nhwc(const float *x, float *y, int64_t N, int64_t C, int64_t H, int64_t W)
{
	for (int64_t n = 0; n < N; n++)
		for (int64_t c = 0; c < C; c++)
			for (int64_t i = 0; i < H * W; i++)
				y[(n * H * W + i) * C + c] = x[(n * C + c) * H * W + i];
}

static double act_f64(double x, int act)
{
	switch (act) {
	case 1: return x > 0 ? x : 0;
	case 2: return x > 0 ? (x < 6 ? x : 6) : 0;
	case 3: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
	case 4: return 0.5 * x * (1.0 + tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x)));
	case 5: return x / (1.0 + exp(-x));
	case 6: return 1.0 / (1.0 + exp(-x));
	case 7: return tanh(x);
	case 8: {
		double t = x + 3;
		t = t > 0 ? (t < 6 ? t : 6) : 0;
		return x * t / 6;
	}
	default: return x;
	}
}

typedef struct conv_case {
	int64_t N, C, H, W, O, KH, KW, sh, sw, ph, pw, dh, dw, G;
	int bias, act, res;
	const char *kernel; /* the fast kernel expected */
} conv_case;

static const char *I2C = "conv2d_nhwc_im2col_gemm", *PW = "conv2d_nhwc_gemm_1x1", *DW = "conv2d_nhwc_depthwise";
static const char *WINO = "conv2d_nhwc_winograd_f2x3", *IMP = "conv2d_nhwc_implicit_gemm";

/* Narrow inputs (up to 8 channels, one group, no column dilation, a kernel
 * wider than 1x1) go to the implicit GEMM (conv/conv_implicit.c). */
static const char *narrow_or(const conv_case *k, const char *other)
{
	return k->C <= 8 && k->G == 1 && k->dw == 1 && (k->KH > 1 || k->KW > 1) ? IMP : other;
}

/* The 3x3 stride-1 convs that go to Winograd: one group, a simple
 * activation, at least 32 tiles of 2x2 output pixels (conv_winograd.c). */
static const char *wino_or(const conv_case *k, int act, const char *other)
{
	int64_t OH = k->H + 2 * k->ph - 2, OW = k->W + 2 * k->pw - 2;
	int simple = act <= 2 || act == 8;
	return simple && k->G == 1 && k->dh == 1 && k->dw == 1 && k->N * ((OH + 1) / 2) * ((OW + 1) / 2) >= 32
		       ? WINO
		       : other;
}

/* Runs conv2d_nhwc on x_nhwc with the weight warg (fast kernels, expecting
 * fast_kernel, and reference ones) against the oracle: the NCHW reference
 * conv2d (no layout pass) of x_nchw with the f32 weight w, with the fused
 * residual r and activation applied here in double. tol: absolute. */
static void run_case(const char *label, const conv_case *k, const float *x_nchw, const float *x_nhwc, const float *w,
		     th_arg warg, const float *b, const float *r, const char *fast_kernel, double tol)
{
	int64_t Cg = k->C / k->G;
	int64_t OH = (k->H + 2 * k->ph - k->dh * (k->KH - 1) - 1) / k->sh + 1;
	int64_t OW = (k->W + 2 * k->pw - k->dw * (k->KW - 1) - 1) / k->sw + 1;
	int64_t yn = k->N * k->O * OH * OW;
	int64_t s[2] = {k->sh, k->sw}, p[2] = {k->ph, k->pw}, d[2] = {k->dh, k->dw};
	air_attr attrs[7] = {th_ints("stride", s, 2), th_ints("padding", p, 2), th_ints("dilation", d, 2),
			     th_int("groups", k->G), th_int("has_bias", k->bias), th_int("act", k->act),
			     th_int("has_residual", k->res)};
	th_arg a[4];
	int64_t xd[4] = {k->N, k->C, k->H, k->W}, wd[4] = {k->O, Cg, k->KH, k->KW}, bd[1] = {k->O};
	int n = 0;
	a[n++] = th_make(AIR_F32, x_nchw, 4, xd);
	a[n] = th_make(AIR_F32, w, 4, wd);
	a[n++].constant = 1;
	if (k->bias)
		a[n++] = th_make(AIR_F32, b, 1, bd);
	int64_t cnt;
	float *ref = compile_run("conv2d", a, n, attrs, 5, AIR_COMPILE_REFERENCE_KERNELS, AIR_PASS_LAYOUT, NULL, &cnt);
	double *want = malloc(sizeof(double) * (size_t)(yn ? yn : 1));
	if (ref) {
		float *t = malloc(sizeof(float) * (size_t)(yn ? yn : 1));
		nchw_to_nhwc(ref, t, k->N, k->O, OH, OW);
		for (int64_t i = 0; i < yn; i++)
			want[i] = act_f64((double)t[i] + (k->res ? r[i] : 0.0), k->act);
		free(t);
	}
	int64_t xhd[4] = {k->N, k->H, k->W, k->C}, rd[4] = {k->N, OH, OW, k->O};
	a[0] = th_make(AIR_F32, x_nhwc, 4, xhd);
	a[1] = warg;
	if (k->res)
		a[n++] = th_make(AIR_F32, r, 4, rd);
	for (int fast = 0; fast < 2; fast++) {
		float *got = compile_run("conv2d_nhwc", a, n, attrs, 7, fast ? 0 : AIR_COMPILE_REFERENCE_KERNELS, 0,
					 fast ? fast_kernel : "conv2d_nhwc_ref", &cnt);
		if (got && ref) {
			CHECK(cnt == yn);
			char buf[256];
			snprintf(buf, sizeof buf, "%s [%s]", label, fast ? "fast" : "reference");
			th_compare(buf, AIR_F32, got, want, NULL, yn, 1e-5, tol);
		}
		free(got);
	}
	free(ref), free(want);
}

static void check_conv(const conv_case *k)
{
	char label[192];
	snprintf(label, sizeof label,
		 "conv N%lld C%lld %lldx%lld O%lld k%lldx%lld s%lld,%lld p%lld,%lld d%lld,%lld g%lld b%d act%d res%d",
		 (long long)k->N, (long long)k->C, (long long)k->H, (long long)k->W, (long long)k->O, (long long)k->KH,
		 (long long)k->KW, (long long)k->sh, (long long)k->sw, (long long)k->ph, (long long)k->pw,
		 (long long)k->dh, (long long)k->dw, (long long)k->G, k->bias, k->act, k->res);
	int64_t Cg = k->C / k->G;
	int64_t OH = (k->H + 2 * k->ph - k->dh * (k->KH - 1) - 1) / k->sh + 1;
	int64_t OW = (k->W + 2 * k->pw - k->dw * (k->KW - 1) - 1) / k->sw + 1;
	int64_t xn = k->N * k->C * k->H * k->W, wn = k->O * Cg * k->KH * k->KW, yn = k->N * k->O * OH * OW;
	float *x = th_randf(xn), *w = th_randf(wn), *b = th_randf(k->O), *r = th_randf(yn);
	float *xh = malloc(sizeof(float) * (size_t)(xn ? xn : 1));
	nchw_to_nhwc(x, xh, k->N, k->C, k->H, k->W);
	int64_t wd[4] = {k->O, Cg, k->KH, k->KW};
	th_arg warg = th_make(AIR_F32, w, 4, wd);
	warg.constant = 1;
	/* the sums run over Cg * KH * KW terms of size < 1 */
	run_case(label, k, x, xh, w, warg, b, r, k->kernel, 1e-5 * (double)(Cg * k->KH * k->KW + 2));
	free(x), free(w), free(b), free(r), free(xh);
}

static void test_conv(void)
{
	static const int64_t chans[] = {1, 3, 17, 65}, sizes[] = {1, 7, 13};
	/* 3x3 pad 1 over channel counts and sizes, stride 1 and 2 */
	for (int ci = 0; ci < 4; ci++)
		for (int si = 0; si < 3; si++)
			for (int st = 1; st <= 2; st++) {
				conv_case k = {1, chans[ci], sizes[si], sizes[(si + 1) % 3], chans[(ci + 1) % 4],
					       3, 3, st, st, 1, 1, 1, 1, 1, 1, 0, 0, NULL};
				k.kernel = narrow_or(&k, I2C);
				if (st == 1)
					k.kernel = wino_or(&k, 0, k.kernel);
				check_conv(&k);
			}
	/* Winograd: each act (the transcendental ones go to im2col), residual,
	 * batch 3, odd sizes (tiles past the edge), every padding up to 2 */
	for (int act = 0; act <= 8; act++) {
		conv_case k = {act % 2 ? 3 : 1, 17, 9, 13, 65, 3, 3, 1, 1, 1, 1, 1, 1, 1, act % 3 != 0, act, act % 2,
			       NULL};
		k.kernel = wino_or(&k, act, I2C);
		check_conv(&k);
	}
	for (int ph = 0; ph <= 2; ph++)
		for (int pw = 0; pw <= 2; pw += 2) {
			conv_case k = {4, 65, 9, 5, 17, 3, 3, 1, 1, ph, pw, 1, 1, 1, 1, 1, ph == pw, WINO};
			check_conv(&k);
		}
	/* few tiles and a big weight (at least 2 MiB of U): the GEMMs split by
	 * blocks of output channels (conv_winograd.c, WINO_SPLIT_*): 49 tiles,
	 * 200 channels in, 170 out (blocks of 64, 64, 42 on AVX-512), each
	 * simple act, bias and residual, padding 1 and 0 */
	for (int act = 0; act <= 2; act++) {
		conv_case k = {1, 200, 13, 14, 170, 3, 3, 1, 1, act != 2, 1, 1, 1, 1, act != 1, act, act != 0, WINO};
		check_conv(&k);
	}
	/* too few tiles (7x7 output at batch 1: 16): im2col */
	conv_case few = {1, 33, 7, 7, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, I2C};
	check_conv(&few);
	/* the implicit GEMM: the stem at two sizes and batches, each act
	 * (transcendental ones too), residual; 1 to 8 channels; a kernel row
	 * or column of one tap; dilated rows; asymmetric stride and padding;
	 * outputs narrower than a micro-tile; padding wider than the image */
	for (int act = 0; act <= 8; act++) {
		conv_case k = {act % 2 ? 2 : 1, 3, act < 4 ? 29 : 16, act < 4 ? 31 : 16, 64 + act, 7, 7, 2, 2, 3, 3,
			       1, 1, 1, act % 3 != 0, act, act % 2, IMP};
		check_conv(&k);
	}
	static const conv_case implicit[] = {
		{1, 1, 9, 11, 5, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 0, NULL},
		{2, 8, 13, 9, 33, 5, 5, 1, 2, 2, 1, 1, 1, 1, 0, 2, 1, NULL},
		{1, 4, 12, 12, 17, 1, 3, 1, 1, 0, 1, 1, 1, 1, 1, 0, 0, NULL},
		{1, 4, 12, 12, 17, 3, 1, 2, 1, 1, 0, 1, 1, 1, 1, 8, 1, NULL},
		{3, 5, 15, 14, 16, 3, 3, 1, 3, 2, 2, 2, 1, 1, 1, 1, 1, NULL},
		{1, 3, 3, 2, 40, 7, 7, 2, 2, 3, 3, 1, 1, 1, 1, 1, 0, NULL},
		{1, 3, 40, 1, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, NULL},
		/* wide inputs whose output rows hold two micro-tiles or more:
		 * the implicit GEMM too (stride 2 with a residual; 5x5 at batch
		 * 2; channels off the vector width) */
		{1, 16, 30, 50, 24, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, NULL},
		{2, 12, 9, 30, 20, 5, 5, 1, 1, 2, 2, 1, 1, 1, 0, 2, 0, NULL},
		{1, 37, 11, 57, 45, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0, NULL},
		/* conv1d's shape (one output row): the row is cut into column
		 * chunks, with residual and act, stride 2, padding at both
		 * ends, a last chunk off the micro-tile; batch 2 */
		{1, 20, 1, 301, 40, 1, 3, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, NULL},
		{1, 24, 1, 400, 33, 1, 3, 1, 2, 0, 1, 1, 1, 1, 1, 2, 1, NULL},
		{2, 17, 1, 100, 16, 1, 5, 1, 1, 0, 2, 1, 1, 1, 0, 0, 0, NULL},
		/* ... with 512 output channels or more, one GEMM per image:
		 * the row read in place (no padding; a last pixel no tap
		 * reads), or padded into the workspace; batch 2; K 1800 (past
		 * the band kernel's limit) */
		{2, 24, 1, 400, 520, 1, 3, 1, 2, 0, 0, 1, 1, 1, 1, 1, 1, NULL},
		{1, 20, 1, 301, 512, 1, 5, 1, 1, 0, 2, 1, 1, 1, 1, 2, 1, NULL},
		{1, 600, 1, 40, 530, 1, 3, 1, 2, 0, 1, 1, 1, 1, 0, 0, 0, NULL},
		/* ... and with wide kernel rows: K 300 and 1050 */
		{1, 100, 1, 150, 40, 1, 3, 1, 2, 0, 1, 1, 1, 1, 1, 1, 1, NULL},
		{1, 350, 1, 60, 20, 1, 3, 1, 1, 0, 1, 1, 1, 1, 1, 2, 1, NULL},
	};
	for (size_t i = 0; i < sizeof implicit / sizeof implicit[0]; i++) {
		conv_case k = implicit[i];
		k.kernel = IMP;
		check_conv(&k);
	}
	/* 1x1 direct: channels, batch 3, each act, with and without residual */
	for (int ci = 0; ci < 4; ci++)
		for (int act = 0; act <= 8; act++) {
			conv_case k = {act % 2 ? 3 : 1, chans[ci], 7, 13, chans[3 - ci], 1, 1, 1, 1, 0, 0, 1, 1, 1,
				       act % 3 != 0, act, act % 2, PW};
			check_conv(&k);
		}
	static const conv_case cases[] = {
		/* strided and padded 1x1 go through im2col */
		{1, 17, 13, 13, 65, 1, 1, 2, 2, 0, 0, 1, 1, 1, 1, 1, 0, NULL},
		{3, 17, 7, 7, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, NULL},
		/* 7x7 stride 2 pad 3 (a stem), batch 3 */
		{3, 3, 13, 13, 17, 7, 7, 2, 2, 3, 3, 1, 1, 1, 1, 1, 0, NULL},
		/* asymmetric: kernel, stride, padding, dilation */
		{1, 17, 13, 7, 17, 3, 2, 2, 1, 2, 0, 2, 1, 1, 0, 2, 1, NULL},
		{3, 65, 7, 13, 17, 3, 3, 1, 1, 2, 2, 2, 2, 1, 1, 8, 1, NULL},
		/* window of the whole image, no padding: 1x1 output */
		{3, 17, 7, 7, 65, 7, 7, 1, 1, 0, 0, 1, 1, 1, 1, 5, 1, NULL},
		/* grouped (not depthwise) */
		{3, 34, 7, 13, 68, 3, 3, 1, 2, 1, 1, 1, 1, 2, 1, 1, 1, NULL},
		{1, 65, 13, 13, 65, 3, 3, 1, 1, 1, 1, 1, 1, 5, 0, 0, 0, NULL},
		/* depthwise: channels, strides, pads, dilation, acts, residual */
		{1, 1, 7, 7, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, "depthwise"},
		{3, 17, 13, 13, 17, 3, 3, 2, 2, 1, 1, 1, 1, 17, 1, 2, 0, "depthwise"},
		{1, 65, 13, 7, 65, 3, 3, 1, 1, 1, 1, 1, 1, 65, 1, 2, 1, "depthwise"},
		{3, 65, 7, 13, 65, 5, 5, 2, 1, 2, 2, 1, 1, 65, 0, 5, 1, "depthwise"},
		{1, 17, 13, 13, 17, 3, 3, 1, 1, 2, 2, 2, 2, 17, 1, 8, 0, "depthwise"},
		{1, 3, 1, 1, 3, 3, 3, 1, 1, 1, 1, 1, 1, 3, 1, 3, 1, "depthwise"},
		/* channel multiplier 2: grouped path */
		{1, 17, 7, 7, 34, 3, 3, 1, 1, 1, 1, 1, 1, 17, 1, 1, 0, NULL},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		conv_case k = cases[i];
		if (!k.kernel)
			k.kernel = narrow_or(&k, I2C);
		else if (strcmp(k.kernel, "depthwise") == 0)
			k.kernel = DW;
		check_conv(&k);
	}
}

/* ---- 16-bit weights (conv_nhwc_lowp.c) ------------------------------------ */

static const char *LOWP_PW = "conv2d_nhwc_lowp_1x1", *LOWP_I2C = "conv2d_nhwc_lowp_im2col";

/* conv2d_nhwc with an f32 x and a wt (bf16 or f16) weight, a constant or
 * (weight_input) a graph input, fast and reference, against the NCHW
 * reference conv of x rounded to wt and the weight widened: the products
 * are exact in f32 on every path, so only the order of the sums differs. */
static void check_conv_lowp(const conv_case *k, air_dtype wt, int weight_input)
{
	char label[192];
	snprintf(label, sizeof label, "lowp %s%s conv N%lld C%lld %lldx%lld O%lld k%lldx%lld s%lld p%lld d%lld act%d res%d",
		 wt == AIR_BF16 ? "bf16" : "f16", weight_input ? " (input)" : "", (long long)k->N, (long long)k->C,
		 (long long)k->H, (long long)k->W, (long long)k->O, (long long)k->KH, (long long)k->KW,
		 (long long)k->sh, (long long)k->ph, (long long)k->dh, k->act, k->res);
	int64_t OH = (k->H + 2 * k->ph - k->dh * (k->KH - 1) - 1) / k->sh + 1;
	int64_t OW = (k->W + 2 * k->pw - k->dw * (k->KW - 1) - 1) / k->sw + 1;
	int64_t xn = k->N * k->C * k->H * k->W, wn = k->O * k->C * k->KH * k->KW, yn = k->N * k->O * OH * OW;
	float *x = th_randf(xn), *w = th_randf(wn), *b = th_randf(k->O), *r = th_randf(yn);
	float *xr = malloc(sizeof(float) * (size_t)xn), *xh = malloc(sizeof(float) * (size_t)xn);
	uint16_t *w16 = malloc(sizeof(uint16_t) * (size_t)wn);
	for (int64_t i = 0; i < wn; i++) {
		w16[i] = wt == AIR_BF16 ? k_f32_to_bf16(w[i]) : k_f32_to_f16(w[i]);
		w[i] = wt == AIR_BF16 ? k_bf16_to_f32(w16[i]) : k_f16_to_f32(w16[i]);
	}
	for (int64_t i = 0; i < xn; i++)
		xr[i] = wt == AIR_BF16 ? k_bf16_to_f32(k_f32_to_bf16(x[i])) : k_f16_to_f32(k_f32_to_f16(x[i]));
	nchw_to_nhwc(x, xh, k->N, k->C, k->H, k->W);
	int64_t wd[4] = {k->O, k->C, k->KH, k->KW};
	th_arg warg = th_make(wt, w16, 4, wd);
	warg.constant = !weight_input;
	int pw = k->KH == 1 && k->KW == 1 && k->sh == 1 && k->sw == 1 && k->ph == 0 && k->pw == 0;
	run_case(label, k, xr, xh, w, warg, b, r, pw ? LOWP_PW : LOWP_I2C, 1e-5 * (double)(k->C * k->KH * k->KW + 2));
	free(x), free(w), free(b), free(r), free(xr), free(xh), free(w16);
}

/* Sizes off every vector width and tile (channels 1, 17, 65 and 100; 1 to
 * 13 pixels; batches of 1 and 3), 1x1 (in place) and strided/padded 1x1,
 * 3x3 stride 1 and 2, 7x7 stride 2, dilation, asymmetric kernels, every
 * activation, bias and residual, prefill-sized M (the GEMM's packed path:
 * 72 rows or more) and decode-sized; bf16 and f16; a weight that is a
 * graph input (permuted per call). */
static void test_conv_lowp(void)
{
	static const conv_case cases[] = {
		{1, 17, 7, 13, 65, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1, NULL},
		{3, 65, 5, 7, 17, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0, 0, 0, NULL},
		{1, 100, 1, 1, 33, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 2, 1, NULL},
		{1, 17, 13, 13, 65, 1, 1, 2, 2, 0, 0, 1, 1, 1, 1, 1, 0, NULL},
		{3, 17, 7, 7, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, NULL},
		{1, 17, 13, 11, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, NULL},
		{3, 65, 7, 13, 17, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 8, 1, NULL},
		{1, 20, 29, 31, 64, 7, 7, 2, 2, 3, 3, 1, 1, 1, 1, 1, 0, NULL},
		{1, 17, 13, 7, 17, 3, 2, 2, 1, 2, 0, 2, 1, 1, 0, 2, 1, NULL},
		{3, 65, 7, 13, 17, 3, 3, 1, 1, 2, 2, 2, 2, 1, 1, 5, 1, NULL},
		{3, 17, 7, 7, 65, 7, 7, 1, 1, 0, 0, 1, 1, 1, 1, 3, 1, NULL},
		{1, 64, 12, 12, 96, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 4, 0, NULL},
		{1, 1, 7, 7, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 6, 0, NULL},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		check_conv_lowp(&cases[i], AIR_BF16, 0);
		check_conv_lowp(&cases[i], AIR_F16, i % 3 == 0);
	}
	for (int act = 0; act <= 8; act++) {
		conv_case k = {act % 2 ? 2 : 1, 33, 9, 11, 48, act % 3 ? 3 : 1, act % 3 ? 3 : 1, 1, 1, act % 3 ? 1 : 0,
			       act % 3 ? 1 : 0, 1, 1, 1, act % 4 != 0, act, act % 2, NULL};
		check_conv_lowp(&k, AIR_BF16, act == 4);
	}
}

/* pools: op (0 max, 1 avg, 2 adaptive) on NHWC against the NCHW ref op */
static void check_pool(int op, int64_t N, int64_t C, int64_t H, int64_t W, const air_attr *attrs, int na,
		       const char *what)
{
	static const char *const names[3] = {"max_pool2d", "avg_pool2d", "adaptive_avg_pool2d"};
	char nhwc[64], label[192];
	snprintf(nhwc, sizeof nhwc, "%s_nhwc", names[op]);
	snprintf(label, sizeof label, "%s N%lld C%lld %lldx%lld %s", nhwc, (long long)N, (long long)C, (long long)H,
		 (long long)W, what);
	int64_t xn = N * C * H * W;
	float *x = th_randf(xn), *xh = malloc(sizeof(float) * (size_t)(xn ? xn : 1));
	nchw_to_nhwc(x, xh, N, C, H, W);
	int64_t xd[4] = {N, C, H, W}, xhd[4] = {N, H, W, C};
	th_arg a = th_make(AIR_F32, x, 4, xd);
	air_graph *g;
	CHECK_OK(th_build(names[op], &a, 1, attrs, na, &g));
	air_dim od[AIR_MAX_RANK];
	int rank;
	air_dtype dt;
	CHECK_OK(air_graph_value_info(g, (air_value)1, &dt, &rank, od));
	air_graph_destroy(g);
	int64_t cnt, OH = od[2], OW = od[3], yn = N * C * OH * OW;
	float *ref = compile_run(names[op], &a, 1, attrs, na, AIR_COMPILE_REFERENCE_KERNELS, AIR_PASS_LAYOUT, NULL,
				 &cnt);
	double *want = malloc(sizeof(double) * (size_t)(yn ? yn : 1));
	float *t = malloc(sizeof(float) * (size_t)(yn ? yn : 1));
	if (ref) {
		nchw_to_nhwc(ref, t, N, C, OH, OW);
		for (int64_t i = 0; i < yn; i++)
			want[i] = t[i];
	}
	a = th_make(AIR_F32, xh, 4, xhd);
	for (int fast = 0; fast < 2; fast++) {
		char want_k[80];
		snprintf(want_k, sizeof want_k, fast ? "%s_channels" : "%s_ref", nhwc);
		float *got = compile_run(nhwc, &a, 1, attrs, na, fast ? 0 : AIR_COMPILE_REFERENCE_KERNELS, 0, want_k,
					 &cnt);
		if (got && ref) {
			char buf[256];
			snprintf(buf, sizeof buf, "%s [%s]", label, fast ? "fast" : "reference");
			CHECK(cnt == yn);
			th_compare(buf, AIR_F32, got, want, NULL, yn, 1e-6, 1e-6);
		}
		free(got);
	}
	free(x), free(xh), free(ref), free(want), free(t);
}

static void test_pools(void)
{
	int64_t k3[2] = {3, 3}, s2[2] = {2, 2}, p1[2] = {1, 1}, k2[2] = {2, 2}, d2[2] = {2, 2}, k32[2] = {3, 2},
		s21[2] = {2, 1}, p10[2] = {1, 0}, o1[2] = {1, 1}, o32[2] = {3, 2}, o77[2] = {7, 7};
	static const int64_t chans[] = {1, 3, 17, 65};
	for (int ci = 0; ci < 4; ci++) {
		int64_t C = chans[ci], N = ci % 2 ? 3 : 1;
		air_attr mp[3] = {th_ints("kernel", k3, 2), th_ints("stride", s2, 2), th_ints("padding", p1, 2)};
		check_pool(0, N, C, 13, 7, mp, 3, "k3 s2 p1");
		check_pool(0, N, C, 1, 1, mp, 3, "k3 s2 p1 1x1");
		air_attr mpd[4] = {th_ints("kernel", k3, 2), th_ints("stride", s21, 2), th_ints("dilation", d2, 2),
				   th_int("ceil_mode", 1)};
		check_pool(0, N, C, 13, 13, mpd, 4, "k3 s2,1 d2 ceil");
		air_attr ap[4] = {th_ints("kernel", k32, 2), th_ints("stride", s21, 2), th_ints("padding", p10, 2),
				  th_int("count_include_pad", ci % 2)};
		check_pool(1, N, C, 13, 7, ap, 4, "k3x2 s2,1 p1,0");
		air_attr apc[5] = {th_ints("kernel", k2, 2), th_ints("stride", s2, 2), th_int("ceil_mode", 1),
				   th_int("count_include_pad", 0), th_int("divisor_override", ci == 3 ? 3 : 0)};
		check_pool(1, N, C, 7, 13, apc, 5, "k2 s2 ceil");
		air_attr ad1 = th_ints("output_size", o1, 2), ad32 = th_ints("output_size", o32, 2),
			 ad77 = th_ints("output_size", o77, 2);
		check_pool(2, N, C, 7, 13, &ad1, 1, "global");
		check_pool(2, N, C, 7, 13, &ad32, 1, "3x2");
		check_pool(2, N, C, 7, 7, &ad77, 1, "identity");
	}
}

/* the layout permutes: fast tiles against the reference strided copy */
static void test_permute(void)
{
	static const int64_t into[4] = {0, 2, 3, 1}, back[4] = {0, 3, 1, 2};
	static const int64_t shapes[][4] = {{1, 1, 1, 1}, {3, 17, 7, 13}, {1, 65, 13, 13}, {2, 3, 1, 7},
					    {1, 16, 4, 8}, {0, 3, 5, 5}};
	for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
		for (int dir = 0; dir < 2; dir++) {
			int64_t n = shapes[i][0] * shapes[i][1] * shapes[i][2] * shapes[i][3], cnt[2];
			float *x = th_randf(n);
			th_arg a = th_make(AIR_F32, x, 4, shapes[i]);
			air_attr p = th_ints("perm", dir ? back : into, 4);
			float *ref = compile_run("permute", &a, 1, &p, 1, AIR_COMPILE_REFERENCE_KERNELS, 0, NULL, &cnt[0]);
			float *got = compile_run("permute", &a, 1, &p, 1, 0, 0, "permute_swap_tiles", &cnt[1]);
			CHECK(ref && got && cnt[0] == n && cnt[1] == n && (n == 0 || !memcmp(ref, got, sizeof(float) * (size_t)n)));
			free(x), free(ref), free(got);
		}
}

/* Bad operands are refused with conv2d's checks, read in NHWC: a residual
 * in NCHW order, a bias of the wrong size, f64, rank 3, channels that do
 * not match the weight. The good case next to them builds. */
static void test_bad_conv(void)
{
	static const float z[2 * 9 * 7 * 4 * 2];
	const int64_t s2[2] = {2, 2}, p1[2] = {1, 1};
	air_attr at[4] = {th_ints("stride", s2, 2), th_ints("padding", p1, 2), th_int("has_residual", 1),
			  th_int("has_bias", 0)};
	/* x [2, 9, 7, 4], w [6, 4, 3, 3], stride 2 pad 1 -> [2, 5, 4, 6] */
	th_arg good[3] = {{AIR_F32, 4, {2, 9, 7, 4}, z, 0, {0}},
			  {AIR_F32, 4, {6, 4, 3, 3}, z, 1, {0}},
			  {AIR_F32, 4, {2, 5, 4, 6}, z, 0, {0}}};
	air_graph *g = NULL;
	CHECK_OK(th_build("conv2d_nhwc", good, 3, at, 4, &g));
	air_graph_destroy(g);
	th_arg a[3];
	memcpy(a, good, sizeof a);
	a[2].dims[1] = 6, a[2].dims[2] = 5, a[2].dims[3] = 4; /* the residual as NCHW [2, 6, 5, 4] */
	th_expect_build_error("conv2d_nhwc", a, 3, at, 4, AIR_SHAPE_MISMATCH, "nhwc residual in NCHW order");
	memcpy(a, good, sizeof a);
	a[0].dtype = AIR_F64;
	th_expect_build_error("conv2d_nhwc", a, 3, at, 4, AIR_UNSUPPORTED, "nhwc f64");
	memcpy(a, good, sizeof a);
	a[0].rank = 3;
	th_expect_build_error("conv2d_nhwc", a, 3, at, 4, AIR_SHAPE_MISMATCH, "nhwc rank 3");
	memcpy(a, good, sizeof a);
	a[0].dims[3] = 5;
	th_expect_build_error("conv2d_nhwc", a, 3, at, 4, AIR_SHAPE_MISMATCH, "nhwc channels");
	th_arg b[3] = {good[0], good[1], {AIR_F32, 1, {5}, z, 1, {0}}};
	air_attr bt[3] = {at[0], at[1], th_int("has_bias", 1)};
	th_expect_build_error("conv2d_nhwc", b, 3, bt, 3, AIR_SHAPE_MISMATCH, "nhwc bias size");
}

int main(void)
{
	test_bad_conv();
	test_permute();
	test_conv();
	test_conv_lowp();
	test_pools();
	return check_report("test_ops_conv_nhwc");
}

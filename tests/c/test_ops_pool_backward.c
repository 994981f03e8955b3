/* test_ops_pool_backward.c - max_pool2d_indices and max_pool2d_backward
 * through the public API against values computed here in double with
 * torch's rules written out (first maximum in window order wins a tie, NaN
 * wins, a padded window's start index, ceil mode, dilation), on inputs with
 * many ties, batched and unbatched; the backward's scatter (overlapping
 * windows add twice) against a plain loop; and shapes the ops reject. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "op_harness.h"

typedef struct pcase {
	const char *label;
	int rank; /* 3: [C, H, W], 4: [N, C, H, W] */
	int64_t N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw;
	int ceil_mode;
} pcase;

static int64_t pool_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, int ceil_mode)
{
	int64_t ext = d * (k - 1) + 1, num = in + 2 * p - ext + (ceil_mode ? s - 1 : 0);
	int64_t o = num / s + 1;
	if (ceil_mode && (o - 1) * s >= in + p)
		o--;
	return o;
}

static void run_case(const pcase *c, bool with_nan)
{
	int64_t OH = pool_out(c->H, c->kh, c->sh, c->ph, c->dh, c->ceil_mode);
	int64_t OW = pool_out(c->W, c->kw, c->sw, c->pw, c->dw, c->ceil_mode);
	int64_t planes = c->N * c->C, nx = planes * c->H * c->W, ny = planes * OH * OW;
	float *x = malloc(sizeof(float) * (size_t)nx);
	for (int64_t i = 0; i < nx; i++) /* small integers: windows tie */
		x[i] = (float)(int)(th_rand() * 3);
	if (with_nan)
		x[nx / 3] = NAN, x[nx / 3 + 1] = NAN;
	double *y = malloc(sizeof(double) * (size_t)ny);
	int64_t *idx = malloc(sizeof(int64_t) * (size_t)ny);
	for (int64_t pl = 0; pl < planes; pl++)
		for (int64_t oh = 0; oh < OH; oh++)
			for (int64_t ow = 0; ow < OW; ow++) {
				int64_t h0 = oh * c->sh - c->ph, w0 = ow * c->sw - c->pw;
				while (h0 < 0)
					h0 += c->dh;
				while (w0 < 0)
					w0 += c->dw;
				double m = -INFINITY;
				int64_t at = h0 * c->W + w0;
				for (int64_t i = 0; i < c->kh; i++)
					for (int64_t j = 0; j < c->kw; j++) {
						int64_t ih = oh * c->sh - c->ph + i * c->dh, iw = ow * c->sw - c->pw + j * c->dw;
						if (ih < 0 || ih >= c->H || iw < 0 || iw >= c->W)
							continue;
						double v = x[(pl * c->H + ih) * c->W + iw];
						if (v > m || isnan(v))
							m = v, at = ih * c->W + iw;
					}
				y[(pl * OH + oh) * OW + ow] = m;
				idx[(pl * OH + oh) * OW + ow] = at;
			}
	int64_t xd[4] = {c->N, c->C, c->H, c->W}, yd[4] = {c->N, c->C, OH, OW};
	const int64_t *xdims = c->rank == 4 ? xd : xd + 1, *ydims = c->rank == 4 ? yd : yd + 1;
	int64_t k[2] = {c->kh, c->kw}, s[2] = {c->sh, c->sw}, p[2] = {c->ph, c->pw}, d[2] = {c->dh, c->dw};
	air_attr attrs[5] = {th_ints("kernel", k, 2), th_ints("stride", s, 2), th_ints("padding", p, 2),
			     th_ints("dilation", d, 2), th_int("ceil_mode", c->ceil_mode)};
	th_arg in = th_make(AIR_F32, x, c->rank, xdims);
	/* both outputs: build the graph by hand (the harness returns output 0) */
	air_graph *g = NULL;
	air_value xv, outs[2];
	int nout = 0;
	CHECK_OK(air_graph_create(&g));
	CHECK_OK(air_graph_add_input(g, NULL, AIR_F32, c->rank, xdims, &xv));
	CHECK_OK(air_graph_add_node(g, "max_pool2d_indices", &xv, 1, attrs, 5, outs, 2, &nout));
	CHECK(nout == 2);
	CHECK_OK(air_graph_set_outputs(g, outs, 2));
	air_compile_options o;
	air_compile_options_init(&o);
	air_model *m = NULL;
	CHECK_OK(air_compile(g, &o, &m));
	air_graph_destroy(g);
	float *gy = malloc(sizeof(float) * (size_t)ny);
	int64_t *gi = malloc(sizeof(int64_t) * (size_t)ny);
	air_session *sess = NULL;
	CHECK_OK(air_session_create(m, &sess));
	CHECK_OK(air_session_set_input(sess, 0, x, c->rank, xdims));
	CHECK_OK(air_session_set_output(sess, 0, gy, sizeof(float) * (size_t)ny));
	CHECK_OK(air_session_set_output(sess, 1, gi, sizeof(int64_t) * (size_t)ny));
	CHECK_OK(air_session_run(sess));
	air_session_destroy(sess);
	air_model_destroy(m);
	int bad = 0;
	for (int64_t i = 0; i < ny; i++)
		if (gi[i] != idx[i] || !((isnan(y[i]) && isnan(gy[i])) || gy[i] == y[i]))
			if (bad++ < 3)
				fprintf(stderr, "%s: output %lld is %g at %lld, want %g at %lld\n", c->label, (long long)i,
					gy[i], (long long)gi[i], y[i], (long long)idx[i]);
	CHECK(bad == 0);
	/* the backward: dy scattered to the indices, added where two windows chose one input */
	double *dyv = th_values(ny, AIR_F32), *dx = calloc((size_t)nx, sizeof(double));
	for (int64_t pl = 0; pl < planes; pl++)
		for (int64_t i = 0; i < OH * OW; i++)
			dx[pl * c->H * c->W + idx[pl * OH * OW + i]] += dyv[pl * OH * OW + i];
	float *dyf = th_as(dyv, ny, AIR_F32);
	int64_t size[2] = {c->H, c->W};
	air_attr battr = th_ints("input_size", size, 2);
	th_arg bargs[2] = {th_make(AIR_F32, dyf, c->rank, ydims), th_make(AIR_I64, idx, c->rank, ydims)};
	air_model *bm = th_compile("max_pool2d_backward", bargs, 2, &battr, 1, 0);
	if (bm) {
		int r;
		int64_t got[4];
		float *res = th_run(bm, bargs, 2, &r, got);
		CHECK(r == c->rank);
		if (res)
			th_compare(c->label, AIR_F32, res, dx, NULL, nx, 1e-6, 1e-6);
		free(res);
		air_model_destroy(bm);
	}
	(void)in;
	free(x), free(y), free(idx), free(gy), free(gi), free(dyv), free(dx), free(dyf);
}

static const pcase CASES[] = {
	/* label            rank N  C  H   W  kh kw sh sw ph pw dh dw ceil */
	{"resnet 3x3 s2 p1", 4, 2, 3, 17, 16, 3, 3, 2, 2, 1, 1, 1, 1, 0},
	{"2x2",              4, 3, 2, 9, 10, 2, 2, 2, 2, 0, 0, 1, 1, 0},
	{"ceil dilated",     4, 2, 3, 11, 9, 2, 3, 2, 1, 1, 1, 2, 1, 1},
	{"unbatched",        3, 1, 5, 8, 7, 3, 2, 1, 2, 1, 0, 1, 1, 1},
	{"stride 1 overlap", 4, 1, 2, 6, 7, 3, 3, 1, 1, 1, 1, 1, 1, 0},
};

static void test_errors(void)
{
	float buf[256] = {0};
	int64_t idx[256] = {0};
	int64_t yd[4] = {1, 2, 4, 4}, size[2] = {8, 8};
	air_attr a = th_ints("input_size", size, 2);
	th_arg f32idx[2] = {th_make(AIR_F32, buf, 4, yd), th_make(AIR_F32, buf, 4, yd)};
	th_expect_build_error("max_pool2d_backward", f32idx, 2, &a, 1, AIR_UNSUPPORTED, "float indices");
	int64_t other[4] = {1, 2, 4, 5};
	th_arg shape[2] = {th_make(AIR_F32, buf, 4, yd), th_make(AIR_I64, idx, 4, other)};
	th_expect_build_error("max_pool2d_backward", shape, 2, &a, 1, AIR_SHAPE_MISMATCH, "indices shape");
	/* an index outside the plane: a run-time error, not a write outside dx */
	int64_t small[2] = {2, 2};
	idx[5] = 4;
	air_attr sa = th_ints("input_size", small, 2);
	int64_t d1[4] = {1, 2, 2, 2};
	th_arg args[2] = {th_make(AIR_F32, buf, 4, d1), th_make(AIR_I64, idx, 4, d1)};
	air_model *m = th_compile("max_pool2d_backward", args, 2, &sa, 1, 0);
	if (m) {
		int r;
		int64_t got[4];
		air_status st = AIR_OK;
		void *out = th_run_status(m, args, 2, &r, got, &st);
		CHECK(st == AIR_INVALID_ARGUMENT && out == NULL);
		free(out);
		air_model_destroy(m);
	}
}

int main(void)
{
	for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
		run_case(&CASES[i], false);
		run_case(&CASES[i], true);
	}
	test_errors();
	printf("%d checks, %d failures\n", check_count, check_failures);
	return check_failures != 0;
}

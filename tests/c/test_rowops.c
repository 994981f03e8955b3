/* test_rowops.c - softmax, log-softmax, layer norm and RMS norm against a
 * double-precision reference, on shapes rows x n with n from 1 to past the
 * block size, gamma/beta NULL or not, large logits and offsets, rows of
 * -inf / NaN / +inf, in place, and through a thread pool (same bits as one
 * thread). Prints the worst error found, in ulp of the result; for layer
 * norm, in ulp of max(|result|, |gamma|, |beta|), since values near the mean
 * carry an absolute error relative to the row's spread (as in any float
 * implementation), and the mean in ulp of max(|mean|, standard deviation). */
#include <float.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels/norm/rowops.h"

/* Worst errors measured on these data, in ulp, with a little margin:
 *          softmax  log_softmax  layernorm  mean/rstd  rmsnorm
 *   avx2    2.21     1.22         3.07       0.97       2.34
 *   scalar  2.20     1.13         0.50       0.50       0.71      */
#define SOFTMAX_ULP 3.0
#define LOG_SOFTMAX_ULP 2.0
#define LAYERNORM_ULP 4.0
#define STATS_ULP 1.5
#define RMSNORM_ULP 3.0

static double worst_softmax, worst_log_softmax, worst_layernorm, worst_rmsnorm, worst_stats;

static uint64_t rng = 0x243f6a8885a308d3ull;
static double uniform(void) /* [0, 1) */
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (double)(rng >> 11) * 0x1p-53;
}

static double normal(void)
{
	double s = 0;
	for (int i = 0; i < 12; i++)
		s += uniform();
	return s - 6.0;
}

static double ulp_at(double r)
{
	r = fabs(r);
	if (r < FLT_MIN)
		return 0x1p-149;
	int e;
	frexp(r, &e);
	return ldexp(1.0, e - 24);
}

/* error of y against ref in ulp of scale; NaN must match NaN, inf inf */
static double err_ulp(float y, double ref, double scale)
{
	if (isnan(ref) || isnan(y))
		return isnan(ref) && isnan(y) ? 0 : INFINITY;
	if (isinf(ref) || isinf(y))
		return (double)y == ref ? 0 : INFINITY;
	return fabs((double)y - ref) / ulp_at(scale);
}

static void ref_softmax(const float *x, double *y, int64_t n, int log_form)
{
	double mx = -INFINITY;
	for (int64_t i = 0; i < n; i++)
		mx = isnan(x[i]) ? NAN : (x[i] > mx ? x[i] : mx);
	/* sum = ones + rest, the terms at the max apart: log1p(rest) is exact
	 * to double precision even when rest is tiny */
	double rest = 0;
	int64_t ones = 0;
	for (int64_t i = 0; i < n; i++) {
		if (x[i] == mx)
			ones++;
		else
			rest += exp((double)x[i] - mx);
	}
	double s = ones + rest, lse = ones == 1 ? log1p(rest) : log(s);
	if (isnan(mx) || isinf(mx))
		s = lse = NAN;
	for (int64_t i = 0; i < n; i++)
		y[i] = log_form ? ((double)x[i] - mx) - lse : exp((double)x[i] - mx) / s;
}

static void ref_layernorm(const float *x, const float *g, const float *b, double *y, double *scale,
			  int64_t n, double eps, double *mean, double *rstd, double *sd)
{
	double s = 0, ss = 0;
	for (int64_t i = 0; i < n; i++)
		s += x[i];
	*mean = s / n;
	for (int64_t i = 0; i < n; i++)
		ss += ((double)x[i] - *mean) * ((double)x[i] - *mean);
	*rstd = 1.0 / sqrt(ss / n + eps);
	*sd = sqrt(ss / n);
	for (int64_t i = 0; i < n; i++) {
		double t = ((double)x[i] - *mean) * *rstd * (g ? g[i] : 1.0);
		y[i] = t + (b ? b[i] : 0.0);
		/* the normalised value has scale 1 (times gamma): errors are
		 * measured in ulp of that, or of the result or beta if larger */
		scale[i] = fmax(fabs(g ? g[i] : 1.0), fmax(fabs(y[i]), b ? fabs(b[i]) : 0.0));
	}
}

static void ref_rmsnorm(const float *x, const float *g, double *y, int64_t n, double eps)
{
	double ss = 0;
	for (int64_t i = 0; i < n; i++)
		ss += (double)x[i] * x[i];
	double r = 1.0 / sqrt(ss / n + eps);
	for (int64_t i = 0; i < n; i++)
		y[i] = x[i] * r * (g ? g[i] : 1.0);
}

typedef enum { DATA_NORMAL, DATA_WIDE, DATA_OFFSET, DATA_TINY } data_kind;

static void fill(float *x, int64_t count, data_kind kind)
{
	for (int64_t i = 0; i < count; i++) {
		double v = normal();
		switch (kind) {
		case DATA_NORMAL: x[i] = (float)v; break;
		case DATA_WIDE: x[i] = (float)(v * 30.0); break;    /* many e^(x-max) underflow */
		case DATA_OFFSET: x[i] = (float)(1e4 + v); break;   /* mean far from 0 */
		case DATA_TINY: x[i] = (float)(v * 1e-30); break;
		}
	}
}

/* One shape and data kind through all four ops, checked row by row. */
static void check_shape(int64_t rows, int64_t n, data_kind kind, rt_pool *pool, int with_affine)
{
	int64_t count = rows * n;
	float *x = malloc(sizeof(float) * (count + 1)), *y = malloc(sizeof(float) * (count + 1));
	float *g = malloc(sizeof(float) * (n + 1)), *b = malloc(sizeof(float) * (n + 1));
	float *mean = malloc(sizeof(float) * (rows + 1)), *rstd = malloc(sizeof(float) * (rows + 1));
	double *ref = malloc(sizeof(double) * (n + 1)), *scale = malloc(sizeof(double) * (n + 1));
	if (!x || !y || !g || !b || !mean || !rstd || !ref || !scale) {
		CHECK(!"out of memory");
		goto done;
	}
	fill(x, count, kind);
	for (int64_t i = 0; i < n; i++) {
		g[i] = (float)(1.0 + 0.5 * normal());
		b[i] = (float)(0.1 * normal());
	}
	const float *gp = with_affine ? g : NULL, *bp = with_affine ? b : NULL;
	double w = 0;
	int bad = 0;

	for (int log_form = 0; log_form < 2; log_form++) {
		w = 0;
		(log_form ? kr_log_softmax_f32 : kr_softmax_f32)(x, y, rows, n, pool);
		for (int64_t r = 0; r < rows; r++) {
			ref_softmax(x + r * n, ref, n, log_form);
			for (int64_t i = 0; i < n; i++) {
				double e = err_ulp(y[r * n + i], ref[i], ref[i]);
				w = e > w ? e : w;
			}
		}
		double *worst = log_form ? &worst_log_softmax : &worst_softmax;
		double bound = log_form ? LOG_SOFTMAX_ULP : SOFTMAX_ULP;
		*worst = w > *worst ? w : *worst;
		if (w > bound) {
			fprintf(stderr, "%s %lldx%lld kind %d: %.2f ulp\n", log_form ? "log_softmax" : "softmax",
				(long long)rows, (long long)n, (int)kind, w);
			bad = 1;
		}
	}

	double eps = 1e-5, ws = 0;
	w = 0;
	kr_layernorm_f32(x, gp, bp, y, rows, n, eps, mean, rstd, pool);
	for (int64_t r = 0; r < rows; r++) {
		double m, rs, sd;
		ref_layernorm(x + r * n, gp, bp, ref, scale, n, eps, &m, &rs, &sd);
		for (int64_t i = 0; i < n; i++) {
			double e = err_ulp(y[r * n + i], ref[i], scale[i]);
			w = e > w ? e : w;
		}
		/* the mean to within ulp of the spread of the row */
		double em = err_ulp(mean[r], m, fmax(fabs(m), sd)), er = err_ulp(rstd[r], rs, rs);
		ws = fmax(ws, fmax(em, er));
	}
	worst_layernorm = fmax(worst_layernorm, w);
	worst_stats = fmax(worst_stats, ws);
	if (w > LAYERNORM_ULP || ws > STATS_ULP) {
		fprintf(stderr, "layernorm %lldx%lld kind %d affine %d: %.2f ulp, mean/rstd %.2f ulp\n",
			(long long)rows, (long long)n, (int)kind, with_affine, w, ws);
		bad = 1;
	}

	w = 0;
	kr_rmsnorm_f32(x, gp, y, rows, n, 1e-6, pool);
	for (int64_t r = 0; r < rows; r++) {
		ref_rmsnorm(x + r * n, gp, ref, n, 1e-6);
		for (int64_t i = 0; i < n; i++) {
			double e = err_ulp(y[r * n + i], ref[i], ref[i]);
			w = e > w ? e : w;
		}
	}
	worst_rmsnorm = fmax(worst_rmsnorm, w);
	if (w > RMSNORM_ULP) {
		fprintf(stderr, "rmsnorm %lldx%lld kind %d: %.2f ulp\n", (long long)rows, (long long)n, (int)kind, w);
		bad = 1;
	}
	CHECK(!bad);
done:
	free(x);
	free(y);
	free(g);
	free(b);
	free(mean);
	free(rstd);
	free(ref);
	free(scale);
}

static void test_shapes(void)
{
	static const int64_t ns[] = {1, 3, 7, 8, 9, 16, 17, 64, 100, 511, 512, 513, 768, 1023, 4099};
	static const int64_t rowss[] = {1, 2, 5};
	for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
		for (size_t c = 0; c < sizeof rowss / sizeof rowss[0]; c++)
			for (int kind = DATA_NORMAL; kind <= DATA_TINY; kind++)
				for (int affine = 0; affine < 2; affine++)
					check_shape(rowss[c], ns[a], (data_kind)kind, NULL, affine);
}

/* Large enough to fan out: same bits with 1 and 2 threads, in place too. */
static void test_threads(void)
{
	rt_pool *pool = NULL;
	CHECK_OK(rt_pool_create(2, &pool));
	if (!pool)
		return;
	const int64_t rows = 300, n = 1023, count = rows * n;
	float *x = malloc(sizeof(float) * count), *y1 = malloc(sizeof(float) * count);
	float *y2 = malloc(sizeof(float) * count), *g = malloc(sizeof(float) * n), *b = malloc(sizeof(float) * n);
	float *m1 = malloc(sizeof(float) * rows), *m2 = malloc(sizeof(float) * rows);
	float *r1 = malloc(sizeof(float) * rows), *r2 = malloc(sizeof(float) * rows);
	if (!x || !y1 || !y2 || !g || !b || !m1 || !m2 || !r1 || !r2) {
		CHECK(!"out of memory");
		goto done;
	}
	fill(x, count, DATA_NORMAL);
	fill(g, n, DATA_NORMAL);
	fill(b, n, DATA_NORMAL);
	for (int op = 0; op < 4; op++) {
		switch (op) {
		case 0:
			kr_softmax_f32(x, y1, rows, n, NULL);
			kr_softmax_f32(x, y2, rows, n, pool);
			break;
		case 1:
			kr_log_softmax_f32(x, y1, rows, n, NULL);
			kr_log_softmax_f32(x, y2, rows, n, pool);
			break;
		case 2:
			kr_layernorm_f32(x, g, b, y1, rows, n, 1e-5, m1, r1, NULL);
			kr_layernorm_f32(x, g, b, y2, rows, n, 1e-5, m2, r2, pool);
			CHECK(memcmp(m1, m2, sizeof(float) * rows) == 0);
			CHECK(memcmp(r1, r2, sizeof(float) * rows) == 0);
			break;
		case 3:
			kr_rmsnorm_f32(x, g, y1, rows, n, 1e-6, NULL);
			kr_rmsnorm_f32(x, g, y2, rows, n, 1e-6, pool);
			break;
		}
		CHECK(memcmp(y1, y2, sizeof(float) * count) == 0);
		/* in place, threaded */
		memcpy(y2, x, sizeof(float) * count);
		switch (op) {
		case 0: kr_softmax_f32(y2, y2, rows, n, pool); break;
		case 1: kr_log_softmax_f32(y2, y2, rows, n, pool); break;
		case 2: kr_layernorm_f32(y2, g, b, y2, rows, n, 1e-5, NULL, NULL, pool); break;
		case 3: kr_rmsnorm_f32(y2, g, y2, rows, n, 1e-6, pool); break;
		}
		CHECK(memcmp(y1, y2, sizeof(float) * count) == 0);
	}
	/* and the accuracy of a threaded call */
	check_shape(rows, n, DATA_WIDE, pool, 1);
done:
	free(x);
	free(y1);
	free(y2);
	free(g);
	free(b);
	free(m1);
	free(m2);
	free(r1);
	free(r2);
	rt_pool_destroy(pool);
}

/* PyTorch's answers on masked, NaN, infinite and extreme rows. */
static void test_specials(void)
{
	const float inf = INFINITY, nan = NAN;
	enum { N = 11 };
	float x[5][N], y[5][N];
	for (int i = 0; i < N; i++) {
		x[0][i] = -inf;                       /* fully masked */
		x[1][i] = i == 3 ? 0.0f : -inf;       /* one survivor */
		x[2][i] = i == 5 ? nan : (float)i;    /* NaN */
		x[3][i] = i == 2 ? inf : (float)i;    /* +inf */
		x[4][i] = i % 2 ? 3e38f : -3e38f;     /* extremes */
	}
	kr_softmax_f32(&x[0][0], &y[0][0], 5, N, NULL);
	for (int i = 0; i < N; i++) {
		CHECK(isnan(y[0][i]));
		CHECK(y[1][i] == (i == 3 ? 1.0f : 0.0f));
		CHECK(isnan(y[2][i]));
		CHECK(isnan(y[3][i]));
		CHECK(y[4][i] == (i % 2 ? 1.0f / 5 : 0.0f));
	}
	kr_log_softmax_f32(&x[0][0], &y[0][0], 5, N, NULL);
	for (int i = 0; i < N; i++) {
		CHECK(isnan(y[0][i]));
		CHECK(y[1][i] == (i == 3 ? 0.0f : -inf));
		CHECK(isnan(y[2][i]));
		CHECK(isnan(y[3][i]));
		if (i % 2)
			CHECK_NEAR(y[4][i], -log(5.0), 1e-6);
		else
			CHECK(y[4][i] == -inf);
	}
	/* layer norm: inf or NaN poisons the row; a constant row is 0 (+beta) */
	float c[2][4] = {{1, inf, 2, 3}, {7, 7, 7, 7}}, o[2][4], mean[2], rstd[2];
	float beta[4] = {0.5f, 0, 0, 0};
	kr_layernorm_f32(&c[0][0], NULL, beta, &o[0][0], 2, 4, 1e-5, mean, rstd, NULL);
	for (int i = 0; i < 4; i++) {
		CHECK(isnan(o[0][i]));
		CHECK(o[1][i] == beta[i]);
	}
	CHECK(mean[1] == 7.0f);
	CHECK_NEAR(rstd[1], 1.0 / sqrt(1e-5), 1e-3);
	/* n == 0: nothing written but mean 0, rstd NaN */
	kr_layernorm_f32(NULL, NULL, NULL, NULL, 2, 0, 1e-5, mean, rstd, NULL);
	CHECK(mean[0] == 0.0f && mean[1] == 0.0f && isnan(rstd[0]) && isnan(rstd[1]));
	/* RMS norm: [inf, 1] -> [NaN, 0]; zeros stay 0 */
	float q[2][2] = {{inf, 1}, {0, 0}}, p[2][2];
	kr_rmsnorm_f32(&q[0][0], NULL, &p[0][0], 2, 2, 1e-6, NULL);
	CHECK(isnan(p[0][0]) && p[0][1] == 0.0f && p[1][0] == 0.0f && p[1][1] == 0.0f);
	/* empty calls write nothing */
	float guard = 42.0f;
	kr_softmax_f32(&guard, &guard, 0, 5, NULL);
	kr_softmax_f32(&guard, &guard, 5, 0, NULL);
	kr_rmsnorm_f32(&guard, NULL, &guard, 0, 1, 1e-6, NULL);
	CHECK(guard == 42.0f);
}

int main(void)
{
	printf("rowops kernels: %s\n", kr_isa_name());
	test_specials();
	test_shapes();
	test_threads();
	printf("worst error: softmax %.3f ulp (bound %.1f), log_softmax %.3f (%.1f), layernorm %.3f (%.1f; "
	       "mean/rstd %.3f (%.1f)), rmsnorm %.3f (%.1f)\n",
	       worst_softmax, SOFTMAX_ULP, worst_log_softmax, LOG_SOFTMAX_ULP, worst_layernorm, LAYERNORM_ULP,
	       worst_stats, STATS_ULP, worst_rmsnorm, RMSNORM_ULP);
	return check_report("test_rowops");
}

/* rowops.c - softmax, log-softmax, layer norm and RMS norm over rows: the
 * portable row kernels, the choice of ISA (once), and the split of rows
 * across the thread pool. */
#include "kernels/norm/rowops.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

#include "kernels/common/cpu.h"
#include "kernels/norm/rowops_impl.h"
#include "kernels/vmath/vmath_scalar.h"

/* ---- portable kernels: sums in double, exp from vmath ---- */

/* e^(x - mx), with x - mx carried as a float pair so that the difference's
 * rounding does not cost relative accuracy in the small probabilities */
static inline float exp_diff1(float x, float mx)
{
	double d = (double)x - (double)mx;
	if (!(d >= KV_EXP_LO)) /* tiny (0), or NaN */
		return d != d ? (float)d : 0.0f;
	float hi = (float)d;
	return kv_exp_core1(hi < KV_EXP_HI ? hi : KV_EXP_HI, (float)(d - hi));
}

static float row_max1(const float *x, int64_t n)
{
	float mx = -INFINITY;
	for (int64_t i = 0; i < n; i++)
		mx = x[i] > mx ? x[i] : mx; /* NaN is skipped; it makes the sum NaN */
	return mx;
}

static void softmax_scalar(const float *x, float *y, int64_t rows, int64_t n)
{
	for (int64_t r = 0; r < rows; r++) {
		const float *xr = x + r * n;
		float *yr = y + r * n;
		float mx = row_max1(xr, n);
		double sum = 0.0;
		for (int64_t i = 0; i < n; i++) {
			float e = exp_diff1(xr[i], mx);
			yr[i] = e;
			sum += e;
		}
		float inv = (float)(1.0 / sum);
		for (int64_t i = 0; i < n; i++)
			yr[i] *= inv;
	}
}

static void log_softmax_scalar(const float *x, float *y, int64_t rows, int64_t n)
{
	for (int64_t r = 0; r < rows; r++) {
		const float *xr = x + r * n;
		float *yr = y + r * n;
		float mx = row_max1(xr, n);
		/* the terms at the max are exactly 1: counted apart, so that
		 * log1p keeps the rest when it is tiny */
		double rest = 0.0;
		int64_t ones = 0;
		for (int64_t i = 0; i < n; i++) {
			if (xr[i] == mx)
				ones++;
			else
				rest += exp_diff1(xr[i], mx);
		}
		double lse = ones == 1 ? log1p(rest) : log((double)ones + rest);
		if (mx == INFINITY) /* inf - inf: NaN, like softmax and PyTorch */
			lse = NAN;
		/* (x - mx) - lse, not x - (mx + lse): the largest terms, near
		 * -lse, keep their relative accuracy when lse << mx */
		for (int64_t i = 0; i < n; i++)
			yr[i] = (float)(((double)xr[i] - mx) - lse);
	}
}

static void layernorm_scalar(const float *x, const float *gamma, const float *beta, float *y, int64_t rows,
			     int64_t n, double eps, float *mean_out, float *rstd_out)
{
	for (int64_t r = 0; r < rows; r++) {
		const float *xr = x + r * n;
		float *yr = y + r * n;
		double sum = 0.0;
		for (int64_t i = 0; i < n; i++)
			sum += xr[i];
		double mean = sum / (double)n, ss = 0.0;
		for (int64_t i = 0; i < n; i++) {
			double d = (double)xr[i] - mean;
			ss += d * d;
		}
		double rstd = 1.0 / sqrt(ss / (double)n + eps);
		for (int64_t i = 0; i < n; i++) {
			double v = ((double)xr[i] - mean) * rstd;
			if (gamma)
				v *= gamma[i];
			if (beta)
				v += beta[i];
			yr[i] = (float)v;
		}
		if (mean_out)
			mean_out[r] = n > 0 ? (float)mean : 0.0f;
		if (rstd_out)
			rstd_out[r] = (float)rstd;
	}
}

static void rmsnorm_scalar(const float *x, const float *gamma, float *y, int64_t rows, int64_t n, double eps)
{
	for (int64_t r = 0; r < rows; r++) {
		const float *xr = x + r * n;
		float *yr = y + r * n;
		double ss = 0.0;
		for (int64_t i = 0; i < n; i++) {
			float sq = xr[i] * xr[i]; /* in float, like PyTorch: inf past 1.8e19 */
			ss += sq;
		}
		double rr = 1.0 / sqrt(ss / (double)n + eps);
		for (int64_t i = 0; i < n; i++) {
			double v = (double)xr[i] * rr;
			if (gamma)
				v *= gamma[i];
			yr[i] = (float)v;
		}
	}
}

const kr_rows_impl kr_rows_scalar = {softmax_scalar, log_softmax_scalar, layernorm_scalar, rmsnorm_scalar};

/* ---- choice of ISA ---- */

static pthread_once_t once = PTHREAD_ONCE_INIT;
static const kr_rows_impl *impl = &kr_rows_scalar;
static const char *impl_isa = "scalar";

static void choose(void)
{
#ifdef AIR_HAVE_X86
	if (kcpu_features() & KCPU_AVX2) {
		impl = &kr_rows_avx2;
		impl_isa = "avx2";
	}
#endif
}

static const kr_rows_impl *chosen(void)
{
	pthread_once(&once, choose);
	return impl;
}

const kr_rows_impl *kr_rows_isa(const char *isa)
{
	if (!isa)
		return NULL;
	if (strcmp(isa, "scalar") == 0)
		return &kr_rows_scalar;
#ifdef AIR_HAVE_X86
	if (strcmp(isa, "avx2") == 0)
		return &kr_rows_avx2;
#endif
	return NULL;
}

const char *kr_isa_name(void)
{
	chosen();
	return impl_isa;
}

/* ---- rows across threads ---- */

typedef enum { OP_SOFTMAX, OP_LOG_SOFTMAX, OP_LAYERNORM, OP_RMSNORM } row_op;

typedef struct {
	const kr_rows_impl *impl;
	row_op op;
	const float *x, *gamma, *beta;
	float *y, *mean_out, *rstd_out;
	int64_t rows, n, chunk;
	double eps;
} row_job;

static void run_range(const row_job *j, int64_t r0, int64_t r1)
{
	int64_t off = r0 * j->n, cnt = r1 - r0;
	switch (j->op) {
	case OP_SOFTMAX:
		j->impl->softmax(j->x + off, j->y + off, cnt, j->n);
		break;
	case OP_LOG_SOFTMAX:
		j->impl->log_softmax(j->x + off, j->y + off, cnt, j->n);
		break;
	case OP_LAYERNORM:
		j->impl->layernorm(j->x + off, j->gamma, j->beta, j->y + off, cnt, j->n, j->eps,
				   j->mean_out ? j->mean_out + r0 : NULL, j->rstd_out ? j->rstd_out + r0 : NULL);
		break;
	case OP_RMSNORM:
		j->impl->rmsnorm(j->x + off, j->gamma, j->y + off, cnt, j->n, j->eps);
		break;
	}
}

static void row_task(void *ctx, int64_t task, int thread)
{
	(void)thread;
	const row_job *j = ctx;
	int64_t r0 = task * j->chunk, r1 = r0 + j->chunk;
	run_range(j, r0, r1 < j->rows ? r1 : j->rows);
}

/* Tasks of whole rows, a few per thread so that uneven speeds balance, but
 * none smaller than about 8K elements. */
static void run_rows(row_job *j, rt_pool *pool)
{
	int threads = rt_pool_size(pool);
	int64_t total = j->rows * j->n;
	if (!pool || threads <= 1 || j->rows < 2 || total <= KR_PARALLEL_MIN) {
		run_range(j, 0, j->rows);
		return;
	}
	int64_t ntasks = (int64_t)threads * 4;
	if (ntasks > total / 8192)
		ntasks = total / 8192;
	if (ntasks > j->rows)
		ntasks = j->rows;
	if (ntasks < 2)
		ntasks = 2;
	j->chunk = (j->rows + ntasks - 1) / ntasks;
	rt_pool_run(pool, (j->rows + j->chunk - 1) / j->chunk, row_task, j);
}

void kr_softmax_f32(const float *x, float *y, int64_t rows, int64_t n, rt_pool *pool)
{
	if (rows <= 0 || n <= 0)
		return;
	row_job j = {.impl = chosen(), .op = OP_SOFTMAX, .x = x, .y = y, .rows = rows, .n = n};
	run_rows(&j, pool);
}

void kr_log_softmax_f32(const float *x, float *y, int64_t rows, int64_t n, rt_pool *pool)
{
	if (rows <= 0 || n <= 0)
		return;
	row_job j = {.impl = chosen(), .op = OP_LOG_SOFTMAX, .x = x, .y = y, .rows = rows, .n = n};
	run_rows(&j, pool);
}

void kr_layernorm_f32(const float *x, const float *gamma, const float *beta, float *y, int64_t rows,
		      int64_t n, double eps, float *mean_out, float *rstd_out, rt_pool *pool)
{
	if (rows <= 0)
		return;
	if (n <= 0) { /* as aten::native_layer_norm: mean 0, rstd NaN */
		for (int64_t r = 0; r < rows; r++) {
			if (mean_out)
				mean_out[r] = 0.0f;
			if (rstd_out)
				rstd_out[r] = NAN;
		}
		return;
	}
	row_job j = {.impl = chosen(), .op = OP_LAYERNORM, .x = x, .gamma = gamma, .beta = beta, .y = y,
		     .mean_out = mean_out, .rstd_out = rstd_out, .rows = rows, .n = n, .eps = eps};
	run_rows(&j, pool);
}

void kr_rmsnorm_f32(const float *x, const float *gamma, float *y, int64_t rows, int64_t n, double eps,
		    rt_pool *pool)
{
	if (rows <= 0 || n <= 0)
		return;
	row_job j = {.impl = chosen(), .op = OP_RMSNORM, .x = x, .gamma = gamma, .y = y, .rows = rows,
		     .n = n, .eps = eps};
	run_rows(&j, pool);
}

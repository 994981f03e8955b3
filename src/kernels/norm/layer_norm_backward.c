/* layer_norm_backward.c - the fast f32 layer_norm_backward: grad_x row by
 * row (rows split over the pool), then grad_weight and grad_bias by blocks
 * of KN_LNB_COLS columns, each block summing over every row (blocks split
 * over the pool). Each output element has one writer and a fixed order of
 * additions, so results do not depend on the thread count. Row sums run in
 * float lanes added into double every 256 elements; column sums in float
 * added into double every KN_LNB_FLUSH rows. The ISA (AVX2+FMA or portable
 * C, below) is chosen from kcpu_features(). */
#include "core/error.h"
#include "kernels/common/cpu.h"
#include "kernels/norm/layer_norm_backward.h"
#include "kernels/norm/layer_norm_backward_impl.h"

static void row_scalar(const float *g, const float *x, const float *w, float mu, float rs, float *gx, int64_t n)
{
	double a = 0, b = 0;
	for (int64_t i = 0; i < n; i++) {
		float gw = w ? g[i] * w[i] : g[i];
		a += gw;
		b += (double)gw * ((x[i] - mu) * rs);
	}
	float ma = (float)(a / (double)n), mb = (float)(b / (double)n);
	for (int64_t i = 0; i < n; i++) {
		float gw = w ? g[i] * w[i] : g[i];
		gx[i] = rs * (gw - ma - (x[i] - mu) * rs * mb);
	}
}

static void cols_scalar(const float *g, const float *x, const float *mean, const float *rstd, int64_t rows,
			int64_t n, int64_t j0, int64_t j1, float *gw, float *gb)
{
	double sw[KN_LNB_COLS] = {0}, sb[KN_LNB_COLS] = {0};
	int64_t m = j1 - j0;
	for (int64_t r0 = 0; r0 < rows; r0 += KN_LNB_FLUSH) {
		float pw[KN_LNB_COLS] = {0}, pb[KN_LNB_COLS] = {0};
		int64_t r1 = r0 + KN_LNB_FLUSH < rows ? r0 + KN_LNB_FLUSH : rows;
		for (int64_t r = r0; r < r1; r++) {
			const float *gr = g + r * n + j0, *xr = x + r * n + j0;
			float mu = mean[r], rs = rstd[r];
			for (int64_t j = 0; j < m; j++) {
				pw[j] += gr[j] * ((xr[j] - mu) * rs);
				pb[j] += gr[j];
			}
		}
		for (int64_t j = 0; j < m; j++) {
			sw[j] += pw[j];
			sb[j] += pb[j];
		}
	}
	for (int64_t j = 0; j < m; j++) {
		gw[j0 + j] = (float)sw[j];
		gb[j0 + j] = (float)sb[j];
	}
}

const kn_lnb_impl kn_lnb_scalar = {row_scalar, cols_scalar};

typedef struct fast_ctx {
	const kn_lnb_impl *impl;
	const float *g, *x, *mean, *rstd, *w;
	float *gx, *gw, *gb;
	int64_t rows, n, rows_per_task;
} fast_ctx;

static void rows_task(void *arg, int64_t t, int thread)
{
	(void)thread;
	const fast_ctx *c = arg;
	int64_t r1 = (t + 1) * c->rows_per_task < c->rows ? (t + 1) * c->rows_per_task : c->rows;
	for (int64_t r = t * c->rows_per_task; r < r1; r++)
		c->impl->row(c->g + r * c->n, c->x + r * c->n, c->w, c->mean[r], c->rstd[r], c->gx + r * c->n, c->n);
}

static void cols_task(void *arg, int64_t t, int thread)
{
	(void)thread;
	const fast_ctx *c = arg;
	int64_t j0 = t * KN_LNB_COLS, j1 = j0 + KN_LNB_COLS < c->n ? j0 + KN_LNB_COLS : c->n;
	c->impl->cols(c->g, c->x, c->mean, c->rstd, c->rows, c->n, j0, j1, c->gw, c->gb);
}

static const kn_lnb_impl *pick(void)
{
#ifdef AIR_HAVE_X86
	if (kcpu_features() & KCPU_AVX2)
		return &kn_lnb_avx2;
#endif
	return &kn_lnb_scalar;
}

static bool lnb_supports(const k_call *call)
{
	return k_all_f32(call) && call->in[1].numel > 0;
}

static air_status lnb_run(const k_call *call)
{
	fast_ctx c;
	AIR_TRY(kn_lnb_shape(call, &c.rows, &c.n));
	c.impl = pick();
	c.g = call->in[0].data;
	c.x = call->in[1].data;
	c.mean = call->in[2].data;
	c.rstd = call->in[3].data;
	c.w = call->n_in > 4 ? call->in[4].data : NULL;
	c.gx = call->out[0].data;
	c.gw = call->out[1].data;
	c.gb = call->out[2].data;
	c.rows_per_task = k_cdiv(K_GRAIN, c.n);
	rt_pool_run(call->pool, k_cdiv(c.rows, c.rows_per_task), rows_task, &c);
	rt_pool_run(call->pool, k_cdiv(c.n, KN_LNB_COLS), cols_task, &c);
	return AIR_OK;
}

const k_kernel kfast_layer_norm_backward_rows = {"layer_norm_backward_rows", 0, lnb_supports, NULL, NULL, NULL,
						  lnb_run};

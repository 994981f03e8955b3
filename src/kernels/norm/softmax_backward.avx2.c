/* softmax_backward.avx2.c - the fast f32 softmax and log_softmax gradients
 * over the last axis (softmax_backward.h), rows split over the pool: the
 * row's sum in float lanes added into double every 256 elements, then one
 * pass writing the gradient; log_softmax's exp(y) through vmath a tile at a
 * time. Tails run the same arithmetic in scalar. */
#include <immintrin.h>

#include "kernels/common/cpu.h"
#include "kernels/norm/softmax_backward.h"
#include "kernels/vmath/vmath.h"

enum { SB_TILE = 256 };

typedef struct sbf_ctx {
	const float *g, *y;
	float *out;
	int64_t rows, n, rows_per_task;
	bool log;
	kv_unary_f32 vexp;
} sbf_ctx;

static double hsum(__m256 v)
{
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	__m128d lo = _mm_cvtps_pd(s), hi = _mm_cvtps_pd(_mm_movehl_ps(s, s));
	__m128d t = _mm_add_pd(lo, hi);
	return _mm_cvtsd_f64(_mm_add_sd(t, _mm_unpackhi_pd(t, t)));
}

/* sum(g * y), or sum(g) when y is NULL */
static double row_sum(const float *g, const float *y, int64_t n)
{
	double s = 0;
	int64_t i = 0;
	while (i + 8 <= n) {
		__m256 acc = _mm256_setzero_ps();
		int64_t end = i + 256 < n ? i + 256 : n;
		for (; i + 8 <= end; i += 8) {
			__m256 gv = _mm256_loadu_ps(g + i);
			acc = y ? _mm256_fmadd_ps(gv, _mm256_loadu_ps(y + i), acc) : _mm256_add_ps(acc, gv);
		}
		s += hsum(acc);
	}
	for (; i < n; i++)
		s += y ? (double)(g[i] * y[i]) : (double)g[i];
	return s;
}

static void rows_task(void *arg, int64_t t, int thread)
{
	(void)thread;
	const sbf_ctx *c = arg;
	int64_t r1 = (t + 1) * c->rows_per_task < c->rows ? (t + 1) * c->rows_per_task : c->rows;
	for (int64_t r = t * c->rows_per_task; r < r1; r++) {
		const float *g = c->g + r * c->n, *y = c->y + r * c->n;
		float *o = c->out + r * c->n;
		int64_t n = c->n;
		if (!c->log) {
			float s = (float)row_sum(g, y, n);
			__m256 vs = _mm256_set1_ps(s);
			int64_t i = 0;
			for (; i + 8 <= n; i += 8)
				_mm256_storeu_ps(o + i, _mm256_mul_ps(_mm256_loadu_ps(y + i),
								      _mm256_sub_ps(_mm256_loadu_ps(g + i), vs)));
			for (; i < n; i++)
				o[i] = y[i] * (g[i] - s);
			continue;
		}
		float s = (float)row_sum(g, NULL, n);
		__m256 vs = _mm256_set1_ps(s);
		float e[SB_TILE];
		for (int64_t i0 = 0; i0 < n; i0 += SB_TILE) {
			int64_t m = n - i0 < SB_TILE ? n - i0 : SB_TILE;
			c->vexp(y + i0, e, m);
			int64_t i = 0;
			for (; i + 8 <= m; i += 8)
				_mm256_storeu_ps(o + i0 + i, _mm256_fnmadd_ps(_mm256_loadu_ps(e + i), vs,
									      _mm256_loadu_ps(g + i0 + i)));
			for (; i < m; i++)
				o[i0 + i] = g[i0 + i] - e[i] * s;
		}
	}
}

static bool sbf_supports(const k_call *call)
{
	const k_tensor *g = &call->in[0];
	int64_t axis = call->attrs[0].i;
	return k_all_f32(call) && g->rank >= 1 && (axis == -1 || axis == g->rank - 1) && g->numel > 0 &&
	       call->in[1].numel == g->numel;
}

static air_status sbf_run(const k_call *call)
{
	sbf_ctx c;
	c.g = call->in[0].data;
	c.y = call->in[1].data;
	c.out = call->out[0].data;
	c.n = call->in[0].dims[call->in[0].rank - 1];
	c.rows = call->in[0].numel / c.n;
	c.rows_per_task = k_cdiv(K_GRAIN, c.n);
	c.log = call->attrs[1].i != 0;
	c.vexp = kv_unary(KV_exp);
	rt_pool_run(call->pool, k_cdiv(c.rows, c.rows_per_task), rows_task, &c);
	return AIR_OK;
}

const k_kernel kfast_softmax_backward_avx2 = {"softmax_backward_rows_avx2", KCPU_AVX2, sbf_supports, NULL, NULL,
					       NULL, sbf_run};

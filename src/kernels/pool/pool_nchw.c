/* pool_nchw.c - max_pool2d over NCHW f32 maps, a whole output row at a
 * time. For output row oh the running max m[0, OW) takes the window's taps
 * in the reference's order (kernel rows, then columns), and each tap is one
 * contiguous vector step over the row: tap j reads x[ow * s + j * d - p]
 * for every ow, which are consecutive in one of the s phases of the padded
 * input row (its every s-th element), so each input row is split into its
 * phases once per use. Padding is -inf, which never replaces m, so the
 * values are kref_max_pool2d's bit for bit (NaN wins, a tie keeps the
 * first: +0 and -0 come out as there). The reference, one output row per
 * task and a data-dependent branch per element, took 3.3 ms for ResNet-50's
 * stem pool (64 x 112 x 112, 3x3 stride 2) alone in NCHW, this 0.54
 * (torchair.report.profile); eager 3.1. Pools in a channels-last region
 * (the layout pass) use conv_nhwc.c's instead. */
#include "kernels/pool/pool_nchw.h"

#include <math.h>

#include "core/error.h"
#include "kernels/common/cpu.h"
#include "kernels/conv/conv_nhwc_rows.h" /* knhwc_vmax, per ISA */
#include "kernels/conv/conv_ref.h" /* kref_pair */

/* Output elements per task. */
enum { ROWS_GRAIN = 16384 };

typedef struct mp_geom {
	int64_t planes, H, W, OH, OW;
	int64_t kh, kw, sh, sw, ph, pw, dh, dw;
	int64_t span;  /* padded positions a row's taps read: (OW - 1) * sw + (kw - 1) * dw + 1 */
	int64_t plen;  /* floats per phase */
	int64_t rows_per_task;
	size_t scratch; /* bytes per thread, 64-byte multiple */
} mp_geom;

static bool mp_make(const k_call *call, mp_geom *g)
{
	const k_tensor *x = &call->in[0], *y = &call->out[0];
	if (x->dtype != AIR_F32 || y->dtype != AIR_F32 || x->rank < 3 || y->rank != x->rank)
		return false;
	static const int64_t ones[2] = {1, 1}, zeros[2] = {0, 0};
	int64_t k[2], s[2], p[2], d[2];
	kref_pair(call->attrs[0].ints, call->attrs[0].n, ones, k);
	kref_pair(call->attrs[1].ints, call->attrs[1].n, k, s);
	kref_pair(call->attrs[2].ints, call->attrs[2].n, zeros, p);
	kref_pair(call->attrs[3].ints, call->attrs[3].n, ones, d);
	const int r = x->rank;
	g->H = x->dims[r - 2];
	g->W = x->dims[r - 1];
	g->OH = y->dims[r - 2];
	g->OW = y->dims[r - 1];
	g->kh = k[0], g->kw = k[1], g->sh = s[0], g->sw = s[1];
	g->ph = p[0], g->pw = p[1], g->dh = d[0], g->dw = d[1];
	if (g->kh < 1 || g->kw < 1 || g->sh < 1 || g->sw < 1 || g->dh < 1 || g->dw < 1 || g->ph < 0 || g->pw < 0)
		return false;
	/* compile time: sizes may be symbolic (-1); sized again per call */
	if (g->W < 0 || g->OW < 0 || g->H < 0 || g->OH < 0)
		return true;
	g->planes = 1;
	for (int i = 0; i < r - 2; i++)
		g->planes *= x->dims[i];
	g->span = g->OW > 0 ? (g->OW - 1) * g->sw + (g->kw - 1) * g->dw + 1 : 0;
	g->plen = k_cdiv(g->span, g->sw);
	g->rows_per_task = g->OW > 0 && g->OW < ROWS_GRAIN ? ROWS_GRAIN / g->OW : 1;
	g->scratch = k_align64(sizeof(float) * (size_t)(g->sw * g->plen + 1));
	return true;
}

static bool mp_supports(const k_call *call)
{
	mp_geom g;
	return mp_make(call, &g);
}

static size_t mp_workspace(const k_call *call, int nthreads)
{
	mp_geom g;
	if (!mp_make(call, &g) || g.OW < 0)
		return 0;
	return (size_t)(nthreads < 1 ? 1 : nthreads) * g.scratch;
}

typedef struct mp_job {
	mp_geom g;
	const float *x;
	float *y;
	char *ws;
	knhwc_vmax_fn vmax;
} mp_job;

static int64_t k_max64(int64_t a, int64_t b)
{
	return a > b ? a : b;
}

/* Phase q of padded row x (x[i] at position i + pw, -inf outside [0, W))
 * at ph + q * plen: ph[q * plen + k] is position k * sw + q. */
static void split_phases(const mp_geom *g, const float *x, float *ph)
{
	const int64_t s = g->sw;
	for (int64_t q = 0; q < s; q++) {
		float *dst = ph + q * g->plen;
		/* k in [k0, k1) reads the row: 0 <= k * s + q - pw < W */
		int64_t k0 = k_cdiv(k_max64(0, g->pw - q), s), k1 = k_cdiv(k_max64(0, g->W + g->pw - q), s);
		k0 = k_min64(k0, g->plen);
		k1 = k_max64(k0, k_min64(k1, g->plen));
		int64_t k = 0;
		for (; k < k0; k++)
			dst[k] = -INFINITY;
		const float *src = x + q - g->pw;
		if (s == 1)
			for (; k < k1; k++)
				dst[k] = src[k];
		else
			for (; k < k1; k++)
				dst[k] = src[k * s];
		for (; k < g->plen; k++)
			dst[k] = -INFINITY;
	}
}

static void mp_task(void *ctx, int64_t t, int thread)
{
	const mp_job *j = ctx;
	const mp_geom *g = &j->g;
	float *ph = (float *)(j->ws + (size_t)thread * g->scratch);
	const int64_t rows = g->planes * g->OH, r0 = t * g->rows_per_task, r1 = k_min64(rows, r0 + g->rows_per_task);
	for (int64_t r = r0; r < r1; r++) {
		const int64_t plane = r / g->OH, oh = r % g->OH;
		const float *xp = j->x + plane * g->H * g->W;
		float *m = j->y + r * g->OW;
		for (int64_t ow = 0; ow < g->OW; ow++)
			m[ow] = -INFINITY;
		for (int64_t i = 0; i < g->kh; i++) {
			int64_t ih = oh * g->sh - g->ph + i * g->dh;
			if (ih < 0 || ih >= g->H)
				continue;
			split_phases(g, xp + ih * g->W, ph);
			for (int64_t jj = 0; jj < g->kw; jj++) {
				int64_t tap = jj * g->dw;
				j->vmax(m, ph + (tap % g->sw) * g->plen + tap / g->sw, g->OW);
			}
		}
	}
}

static knhwc_vmax_fn pick_vmax(void)
{
#ifdef AIR_HAVE_X86
	unsigned isa = kcpu_features();
	const unsigned avx512 = KCPU_AVX512F | KCPU_AVX512BW | KCPU_AVX512VL;
	if ((isa & avx512) == avx512)
		return knhwc_vmax__avx512;
	if (isa & KCPU_AVX2)
		return knhwc_vmax__avx2;
#endif
	return knhwc_vmax__portable;
}

static air_status mp_run(const k_call *call)
{
	mp_job j;
	if (!mp_make(call, &j.g))
		return air_error(AIR_INVALID_ARGUMENT, "max_pool2d_rows: bad call");
	if (call->out[0].numel == 0)
		return AIR_OK;
	j.x = call->in[0].data;
	j.y = call->out[0].data;
	j.ws = call->workspace;
	j.vmax = pick_vmax();
	rt_pool_run(call->pool, k_cdiv(j.g.planes * j.g.OH, j.g.rows_per_task), mp_task, &j);
	return AIR_OK;
}

const k_kernel kfast_max_pool2d_rows = {"max_pool2d_rows", 0, mp_supports, NULL, NULL, mp_workspace, mp_run};

/* conv_narrow.c - see conv_narrow.h. The driver: which convs it takes, the
 * weight packed per group of KNARROW_CH output channels, the bands of
 * phase rows, the tap offsets, and the split into tasks.
 *
 * Why: the implicit GEMM (conv_implicit.c) computes the stem channels-last
 * and then transposes each band's output into NCHW, a burst of 3.2 MB of
 * transposed stores per stem after the arithmetic. Here the output leaves
 * the registers as NCHW rows of pixels. */
#include "kernels/conv/conv_narrow.h"

#include <string.h>

#include "core/error.h"
#include "kernels/common/cpu.h"
#include "kernels/common/epilogue.h"
#include "kernels/conv/conv_nhwc.h" /* kconv_implicit_fits */
#include "kernels/conv/conv_ref.h"

/* Band size per task (floats), as the implicit GEMM's: its rows stay in
 * L2; and the slack past its end that the micro-kernel may read. The
 * widest stride taken, whose phase rows the band holds side by side. */
enum { BAND_FLOATS = 32768, SLACK_FLOATS = 64, MAX_STRIDE = 4, ROW_ALIGN = 16 };

typedef struct narrow_plan {
	int64_t PW;        /* a phase row, floats */
	int64_t band;      /* output rows per task */
	int64_t bands;     /* tasks per image */
	int64_t rows_in;   /* input rows a band reads */
	int64_t K, groups; /* taps; groups of KNARROW_CH output channels */
	size_t tmp_at;     /* where fill_band's padded row starts in a thread's band */
	size_t band_bytes; /* per thread */
	size_t off_bytes;  /* the shared offset table, first in the workspace */
	size_t w_bytes;    /* the shared packed weight, after it */
} narrow_plan;

static bool geom(const k_call *call, kconv_geom *g)
{
	return kconv_geom_make(call, g) == AIR_OK && g->G == 1 && kconv_implicit_fits(g->C, g->G, g->KH, g->KW, g->dw) &&
	       g->sw >= 1 && g->sw <= MAX_STRIDE && g->O > 0 && g->OH > 0 && g->OW > 0 && !g->has_residual &&
	       (g->act == K_ACT_NONE || g->act == K_ACT_RELU || g->act == K_ACT_RELU6);
}

static narrow_plan make_plan(const kconv_geom *g, int nthreads)
{
	narrow_plan p;
	const int64_t Wp = (g->OW - 1) * g->sw + (g->KW - 1) * g->dw + 1;
	p.PW = k_cdiv(k_cdiv(Wp, g->sw), ROW_ALIGN) * ROW_ALIGN;
	/* bands of input rows within BAND_FLOATS, four tasks per thread, the
	 * rows split evenly between the threads (as conv_implicit.c) */
	const int64_t nt = nthreads > 0 ? nthreads : 1;
	const int64_t per_row = g->sh * g->sw * p.PW * g->C;
	int64_t band = per_row > 0 ? BAND_FLOATS / per_row : g->OH;
	const int64_t want = k_cdiv(g->N * g->OH, 4 * nt);
	band = band < want ? band : want;
	band = band < 1 ? 1 : band > g->OH ? g->OH : band;
	p.band = kconv_even_band(band, g->N, g->OH, nt);
	p.bands = k_cdiv(g->OH, p.band);
	p.rows_in = (p.band - 1) * g->sh + (g->KH - 1) * g->dh + 1;
	/* the band, its slack, and a padded input row (fill_band's tmp) */
	p.tmp_at = k_align64(sizeof(float) * (size_t)(g->C * p.rows_in * g->sw * p.PW + SLACK_FLOATS));
	p.band_bytes = p.tmp_at + k_align64(sizeof(float) * (size_t)(g->sw * p.PW));
	p.K = g->C * g->KH * g->KW;
	p.groups = k_cdiv(g->O, KNARROW_CH);
	p.off_bytes = k_align64(sizeof(int32_t) * (size_t)p.K);
	p.w_bytes = k_align64(sizeof(float) * (size_t)(p.groups * p.K * KNARROW_CH));
	return p;
}

static bool narrow_supports(const k_call *call)
{
#ifndef AIR_HAVE_X86
	(void)call;
	return false;
#else
	kconv_geom g;
	if (!k_all_f32(call) || !call->in_const || !call->in_const[1] || !geom(call, &g))
		return false;
	/* offsets are int32: the band must stay well inside that */
	narrow_plan p = make_plan(&g, 1);
	return p.band_bytes < ((size_t)1 << 30);
#endif
}

static size_t narrow_ws(const k_call *call, int nthreads)
{
	kconv_geom g;
	if (!geom(call, &g))
		return 0;
	narrow_plan p = make_plan(&g, nthreads);
	return p.off_bytes + p.w_bytes + (size_t)(nthreads < 1 ? 1 : nthreads) * p.band_bytes;
}

typedef struct narrow_job {
	kconv_geom g;
	narrow_plan p;
	const float *w; /* [groups][K][KNARROW_CH] */
	const int32_t *off;
	const float *x, *bias;
	float *y;
	char *bands;
} narrow_job;

/* Input rows [ih0, ih0 + rows_in) of image x (NCHW) as phase rows:
 * dst[((c * rows_in + r) * sw + ph) * PW + i] is padded column i * sw + ph
 * of row ih0 + r, zero outside the image. Each row is first laid out
 * padded in tmp (sw * PW floats), then split into its phases. */
static void fill_band(const narrow_job *j, const float *x, int64_t ih0, float *dst, float *tmp)
{
	const kconv_geom *g = &j->g;
	const int64_t sw = g->sw, PW = j->p.PW, row = sw * PW;
	const int64_t left = k_min64(g->pw, row), width = k_min64(g->W, row - left);
	for (int64_t c = 0; c < g->C; c++)
		for (int64_t r = 0; r < j->p.rows_in; r++) {
			const int64_t ih = ih0 + r;
			float *d = dst + (c * j->p.rows_in + r) * row;
			if (ih < 0 || ih >= g->H || width <= 0) {
				memset(d, 0, sizeof(float) * (size_t)row);
				continue;
			}
			float *t = sw == 1 ? d : tmp;
			memset(t, 0, sizeof(float) * (size_t)left);
			memcpy(t + left, x + (c * g->H + ih) * g->W, sizeof(float) * (size_t)width);
			memset(t + left + width, 0, sizeof(float) * (size_t)(row - left - width));
#ifdef AIR_HAVE_X86
			if (sw == 2) {
				knarrow_deinterleave2__avx512(t, PW, d, d + PW);
				continue;
			}
#endif
			for (int64_t ph = 0; sw > 1 && ph < sw; ph++)
				for (int64_t i = 0; i < PW; i++)
					d[ph * PW + i] = t[i * sw + ph];
		}
}

static void narrow_task(void *ctx, int64_t t, int thread)
{
	const narrow_job *j = ctx;
	const kconv_geom *g = &j->g;
	const narrow_plan *p = &j->p;
	const int64_t n = t / p->bands, oh0 = (t % p->bands) * p->band, oh1 = k_min64(g->OH, oh0 + p->band);
	float *band = (float *)(j->bands + (size_t)thread * p->band_bytes);
	float *tmp = (float *)((char *)band + p->tmp_at);
	fill_band(j, j->x + n * g->C * g->H * g->W, oh0 * g->sh - g->ph, band, tmp);
	/* (slack: read by a row's last tile, never stored; zeroed so that no
	 * lane computes on garbage) */
	memset(band + g->C * p->rows_in * g->sw * p->PW, 0, sizeof(float) * SLACK_FLOATS);
	const int64_t OHW = g->OH * g->OW, K = p->K;
	knarrow_row r;
	r.off = j->off;
	r.K = K;
	r.ystride = OHW;
	r.OW = g->OW;
	r.act = g->act;
	/* channel group outer: each of its planes is written in runs of the
	 * band's rows, contiguous in NCHW */
	for (int64_t grp = 0; grp < p->groups; grp++) {
		const int64_t o0 = grp * KNARROW_CH;
		float bias[KNARROW_CH] = {0};
		r.nch = (int)k_min64(KNARROW_CH, g->O - o0);
		for (int q = 0; q < r.nch && j->bias; q++)
			bias[q] = j->bias[o0 + q];
		r.bias = bias;
		r.w = j->w + grp * K * KNARROW_CH;
		for (int64_t oh = oh0; oh < oh1; oh++) {
			r.band = band + (oh - oh0) * g->sh * g->sw * p->PW;
			r.y = j->y + (n * g->O + o0) * OHW + oh * g->OW;
#ifdef AIR_HAVE_X86
			knarrow_row__avx512(&r);
#endif
		}
	}
}

static air_status narrow_run(const k_call *call)
{
	narrow_job j;
	if (!geom(call, &j.g))
		return air_error(AIR_INVALID_ARGUMENT, "conv2d_narrow_nchw: bad geometry");
	const kconv_geom *g = &j.g;
	if (call->out[0].numel == 0)
		return AIR_OK;
	j.p = make_plan(g, rt_pool_size(call->pool));
	/* the weight packed on every call, into the workspace: W[o][c][ki][kj]
	 * is row o of an O x K matrix (tap k = (c, ki, kj)), and each group of
	 * KNARROW_CH rows becomes K x KNARROW_CH. Small next to the conv (K
	 * multiply-adds per weight per output pixel), and the compiled model
	 * holds no copy of it. */
	float *w = (float *)((char *)call->workspace + j.p.off_bytes);
	const float *src = call->in[1].data;
	const int64_t K = j.p.K;
	memset(w, 0, j.p.w_bytes);
	for (int64_t o = 0; o < g->O; o++)
		for (int64_t k = 0; k < K; k++)
			w[((o / KNARROW_CH) * K + k) * KNARROW_CH + o % KNARROW_CH] = src[o * K + k];
	j.w = w;
	int32_t *off = call->workspace;
	for (int64_t c = 0, k = 0; c < g->C; c++)
		for (int64_t ki = 0; ki < g->KH; ki++)
			for (int64_t kj = 0; kj < g->KW; kj++, k++)
				off[k] = (int32_t)(((c * j.p.rows_in + ki * g->dh) * g->sw + (kj * g->dw) % g->sw) * j.p.PW +
						   (kj * g->dw) / g->sw);
	j.off = off;
	j.x = call->in[0].data;
	j.bias = g->has_bias ? call->in[2].data : NULL;
	j.y = call->out[0].data;
	j.bands = (char *)call->workspace + j.p.off_bytes + j.p.w_bytes;
	rt_pool_run(call->pool, g->N * j.p.bands, narrow_task, &j);
	return AIR_OK;
}

const k_kernel kfast_conv2d_narrow_nchw = {"conv2d_narrow_nchw", KCPU_AVX512, narrow_supports, NULL, NULL, narrow_ws,
					   narrow_run};

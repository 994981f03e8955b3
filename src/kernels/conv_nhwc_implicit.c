/* conv_nhwc_implicit.c - NHWC convolution of a narrow input (ResNet's stem:
 * 3 channels, 7x7, stride 2) as an implicit GEMM: no im2col.
 *
 * In NHWC, the taps of one kernel row (ki) of output pixel (oh, ow) are KW*C
 * consecutive floats of input row ih = oh*sh - ph + ki*dh, starting at
 * pixel ow*sw - pw; the next pixel's start sw*C floats further on. So for a
 * fixed output row and kernel row, the col rows of im2col are the input row
 * itself read with row stride sw*C, and the GEMM micro-kernel can read them
 * in place (A row-major with lda = sw*C). Summing the KH kernel rows is the
 * GEMM's K loop cut in KH blocks of KW*C, which the micro-kernel's tile
 * epilogue already supports (first block: bias and residual; last block:
 * activation).
 *
 * im2col copies every tap row: for the stem that is 7 runs of 21 floats per
 * output pixel, 7.4 MB of copies in runs too short to copy fast, which made
 * the im2col kernel 1.9 ms for 236 MFLOP at batch 1. Here the only copy is
 * a zero-padded band of input rows per task (which makes every read in
 * range), 3 channels wide. Wide inputs stay with im2col: their tap rows are
 * long runs, and the GEMM's K blocking wants them packed. */
#include <string.h>

#include "core/error.h"
#include "kernels/conv_nhwc.h"
#include "kernels/gemm_internal.h"

/* Input channels up to which this kernel is chosen over im2col. */
enum { IMPLICIT_MAX_C = 8, IMPLICIT_MAX_K = 1024, BAND_FLOATS = 32768 };

typedef struct imp_plan {
	int64_t Wp;    /* padded row, pixels: what the last output pixel reads */
	int64_t band;  /* output rows per task */
	int64_t bands; /* tasks per image */
	int64_t in_rows;
	size_t slot_bytes;
} imp_plan;

static imp_plan make_plan(const kconv_geom *g, int nthreads)
{
	imp_plan p;
	p.Wp = (g->OW - 1) * g->sw + (g->KW - 1) * g->dw + 1;
	/* bands small enough that the padded input rows stay in L1/L2 and there
	 * are several tasks per thread even at batch 1 */
	int64_t per_row = g->sh * p.Wp * g->C;
	int64_t band = per_row > 0 ? BAND_FLOATS / per_row : g->OH;
	int64_t want = k_cdiv(g->N * g->OH, 8 * (int64_t)(nthreads > 0 ? nthreads : 1));
	band = band < want ? band : want;
	p.band = band < 1 ? 1 : band > g->OH ? g->OH : band;
	p.bands = p.band ? k_cdiv(g->OH, p.band) : 0;
	p.in_rows = (p.band - 1) * g->sh + (g->KH - 1) * g->dh + 1;
	p.slot_bytes = k_align64(sizeof(float) * (size_t)(p.in_rows * p.Wp * g->C));
	return p;
}

static bool imp_geom_ok(const k_call *call, kconv_nhwc *c)
{
	if (!k_all_f32(call) || !call->in_const || !call->in_const[1] || kconv_nhwc_make(call, c) != AIR_OK)
		return false;
	const kconv_geom *g = &c->g;
	return g->G == 1 && g->dw == 1 && g->C > 0 && g->C <= IMPLICIT_MAX_C && g->O > 0 && g->KH > 0 &&
	       g->KW > 0 && g->KH * g->KW * g->C <= IMPLICIT_MAX_K && (g->KH > 1 || g->KW > 1);
}

typedef struct imp_job {
	kconv_nhwc c;
	imp_plan p;
	const kgemm_ukernel_desc *uk;
	const float *panels; /* the packed weight: K x nr per panel */
	const float *x, *bias, *res;
	float *y;
	char *ws;
} imp_job;

/* Copies input rows [ih0, ih0 + rows) of image x into dst, Wp pixels each,
 * with pw pixels of zeros in front and zeros wherever the row is outside
 * the image. */
static void pad_band(const kconv_geom *g, const float *x, int64_t ih0, int64_t rows, int64_t Wp, float *dst)
{
	const int64_t C = g->C, row = Wp * C;
	const int64_t left = g->pw < Wp ? g->pw : Wp;
	const int64_t width = k_min64(g->W, Wp - left);
	for (int64_t r = 0; r < rows; r++, dst += row) {
		int64_t ih = ih0 + r;
		if (ih < 0 || ih >= g->H || width <= 0) {
			memset(dst, 0, sizeof(float) * (size_t)row);
			continue;
		}
		memset(dst, 0, sizeof(float) * (size_t)(left * C));
		memcpy(dst + left * C, x + ih * g->W * C, sizeof(float) * (size_t)(width * C));
		memset(dst + (left + width) * C, 0, sizeof(float) * (size_t)((Wp - left - width) * C));
	}
}

static void imp_task(void *ctx, int64_t t, int thread)
{
	const imp_job *j = ctx;
	const kconv_geom *g = &j->c.g;
	const imp_plan *p = &j->p;
	const kgemm_ukernel_desc *uk = j->uk;
	const int64_t n = t / p->bands, oh0 = (t % p->bands) * p->band, oh1 = k_min64(g->OH, oh0 + p->band);
	const int64_t C = g->C, O = g->O, seg = g->KW * C, K = g->KH * seg, lda = g->sw * C;
	float *band = (float *)(j->ws + (size_t)thread * p->slot_bytes);
	pad_band(g, j->x + n * g->H * g->W * C, oh0 * g->sh - g->ph, (oh1 - oh0 - 1) * g->sh + (g->KH - 1) * g->dh + 1,
		 p->Wp, band);
	kgemm_tile_ep te;
	te.alpha = 1.0f;
	te.act = j->c.act;
	te.bias_m = NULL;
	te.ld_res = O;
	for (int64_t oh = oh0; oh < oh1; oh++) {
		const float *arow = band + (oh - oh0) * g->sh * p->Wp * C;
		float *yrow = j->y + (n * g->OH + oh) * g->OW * O;
		const float *rrow = j->res ? j->res + (n * g->OH + oh) * g->OW * O : NULL;
		for (int64_t o = 0; o < O; o += uk->nr) {
			const float *bp = j->panels + (o / uk->nr) * K * uk->nr;
			te.bias_n = j->bias ? j->bias + o : NULL;
			for (int64_t ow = 0; ow < g->OW; ow += uk->mr) {
				const int m = (int)k_min64(uk->mr, g->OW - ow);
				te.res = rrow ? rrow + ow * O + o : NULL;
				const float *a = arow + ow * lda;
				float *c = yrow + ow * O + o;
				const int n = (int)k_min64(uk->nr, O - o);
				if (uk->seg) {
					te.flags = KGEMM_TILE_FIRST | KGEMM_TILE_LAST;
					uk->seg(seg, g->KH, g->dh * p->Wp * C, a, lda, bp, c, O, m, n, &te);
					continue;
				}
				for (int64_t ki = 0; ki < g->KH; ki++) {
					te.flags = (ki == 0 ? KGEMM_TILE_FIRST : 0) | (ki == g->KH - 1 ? KGEMM_TILE_LAST : 0);
					uk->fn(seg, a + ki * g->dh * p->Wp * C, lda, 1, bp + ki * seg * uk->nr, c, O, m, n,
					       &te);
				}
			}
		}
	}
}

static bool imp_supports(const k_call *call)
{
	kconv_nhwc c;
	return imp_geom_ok(call, &c);
}

static air_status imp_prepare(const k_call *call, void **out)
{
	return kconv_nhwc_pack_weight(call, INT64_MAX, out);
}

static size_t imp_ws(const k_call *call, int nthreads)
{
	kconv_nhwc c;
	if (kconv_nhwc_make(call, &c) != AIR_OK)
		return 0;
	nthreads = nthreads < 1 ? 1 : nthreads;
	return kconv_nhwc_repack_bytes(call->prepared, &c.g) + (size_t)nthreads * make_plan(&c.g, nthreads).slot_bytes;
}

static air_status imp_run(const k_call *call)
{
	imp_job j;
	AIR_TRY(kconv_nhwc_make(call, &j.c));
	const kconv_geom *g = &j.c.g;
	if (call->out[0].numel == 0)
		return AIR_OK;
	j.p = make_plan(g, rt_pool_size(call->pool));
	j.uk = kgemm_active_ukernel();
	j.ws = call->workspace;
	j.panels = kgemm_packed_b_panel(kconv_nhwc_weight_blocks(call, g, &j.ws)[0], 0);
	kconv_nhwc_operands(call, &j.c, &j.bias, &j.res);
	j.x = call->in[0].data;
	j.y = call->out[0].data;
	rt_pool_run(call->pool, g->N * j.p.bands, imp_task, &j);
	return AIR_OK;
}

const k_kernel kfast_conv2d_nhwc_implicit = {"conv2d_nhwc_implicit_gemm", 0, imp_supports, imp_prepare,
					     kconv_nhwc_packed_release, imp_ws, imp_run};

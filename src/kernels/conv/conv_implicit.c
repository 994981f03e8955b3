/* conv_implicit.c - convolution of a narrow input (ResNet's stem: 3
 * channels, 7x7, stride 2), or of a wide one with long output rows
 * (ResNet's 128>128 3x3 stride 2 at 56x56), as an implicit GEMM: no im2col.
 *
 * Channels-last, the taps of one kernel row (ki) of output pixel (oh, ow)
 * are KW*C consecutive floats of input row ih = oh*sh - ph + ki*dh,
 * starting at pixel ow*sw - pw; the next pixel's start sw*C floats further
 * on. So for a fixed output row and kernel row, the rows of im2col's col
 * are the input row itself read with row stride sw*C, and the GEMM
 * micro-kernel reads them in place (A row-major with lda = sw*C). The KH
 * kernel rows are K blocks of KW*C, summed in registers by the segmented
 * micro-kernel (kgemm_ukernel_seg_fn) where there is one, else through the
 * tile epilogue's first/last blocks.
 *
 * im2col copies every tap row: for the stem that is 7 runs of 21 floats per
 * output pixel, 7.4 MB of copies in runs too short to copy fast (1.89 ms
 * for the stem at batch 1, against 1.27-1.34 here). The only copy here is
 * a zero-padded band of input rows per task, which makes every read in
 * range. Wide inputs stay with im2col: their tap rows are long runs, and
 * the GEMM's K blocking wants them packed.
 *
 * Two kernels share this: conv2d_nhwc, and the NCHW conv2d op, which builds
 * its band channels-last from NCHW rows and transposes the band's output
 * rows out of L2 at the end of the task. A lone stem then needs no layout
 * permutes: the one after it (64 x 112 x 112, written to memory and read
 * back) cost 0.55-0.65 ms, a third of the conv. Transposing each output
 * row as it was done wrote 64 planes 448 bytes at a time: 1.14 ms a stem
 * (C medians, bench_conv --layout) against 0.92-0.97 for a band of 7
 * rows at once (3 KiB runs per plane), 0.89-0.90 for 14 rows (see
 * make_plan), and 0.73-0.78 in NHWC. Spreading a row's transpose, 8
 * channels at a time, between the next row's tiles was worse: 1.12-1.20. */
#include <string.h>

#include "core/error.h"
#include "kernels/conv/conv_nhwc.h"
#include "kernels/gemm/ukernel.h"
#include "kernels/shape/transpose.h"

/* Input channels up to which this kernel is chosen over im2col. */
enum { IMPLICIT_MAX_C = 8, IMPLICIT_MAX_K = 1024, BAND_FLOATS = 32768, OUT_BAND_BYTES = 1 << 20 };
/* A wide input is taken too where an output row holds at least two whole
 * micro-tiles of pixels: each packed weight panel (K x nr, in L2) is then
 * used by several tiles per row. ResNet-50's 128>128 3x3 stride 2 at 56x56
 * (28 output pixels a row) took 0.55 ms NHWC against 0.61 through im2col,
 * 0.72 NCHW against 0.73 with the band gathered one float at a time; with
 * 14 or 7 pixels a row (256 and 512 channels) it lost 10-50% to im2col
 * (bench_conv --layout, best of 1 s). K is bounded so that a panel stays
 * well inside L2. */
enum { WIDE_MIN_OW = 24, WIDE_MAX_K = 2304 };

bool kconv_implicit_fits(int64_t C, int64_t G, int64_t KH, int64_t KW, int64_t dw)
{
	return G == 1 && dw == 1 && C > 0 && C <= IMPLICIT_MAX_C && KH > 0 && KW > 0 &&
	       KH * KW * C <= IMPLICIT_MAX_K && (KH > 1 || KW > 1);
}

int64_t kconv_even_band(int64_t band, int64_t N, int64_t OH, int64_t nthreads)
{
	/* (tasks are taken in turn: 28 rows in 7 bands of 4 left one thread 16
	 * rows to the other's 12; 14 bands of 2 split them evenly) */
	int64_t best = band, best_rows = INT64_MAX;
	for (int64_t b = band; b >= 1 && 2 * b >= band; b--) {
		int64_t rows = k_cdiv(N * k_cdiv(OH, b), nthreads) * b;
		if (rows < best_rows)
			best = b, best_rows = rows;
	}
	return best;
}

static bool wide_fits(const kconv_geom *g)
{
	return g->G == 1 && g->dw == 1 && g->C > IMPLICIT_MAX_C && g->KH > 0 && g->KW > 0 && (g->KH > 1 || g->KW > 1) &&
	       g->KH * g->KW * g->C <= WIDE_MAX_K && g->OW >= WIDE_MIN_OW && g->OW >= 2 * kgemm_tile_rows();
}

typedef struct imp_plan {
	int64_t Wp;     /* padded row, pixels: what the last output pixel reads */
	int64_t band;   /* output rows per task */
	int64_t bands;  /* row bands per image */
	int64_t cw;     /* output pixels per task (OW, or a column chunk) */
	int64_t chunks; /* column chunks per band */
	int64_t Wb;     /* a band's input row, pixels: what a chunk reads */
	size_t band_bytes, slot_bytes;
} imp_plan;

static imp_plan make_plan(const kconv_geom *g, int nchw, int nthreads)
{
	imp_plan p;
	p.Wp = (g->OW - 1) * g->sw + (g->KW - 1) * g->dw + 1;
	/* bands small enough that the padded input rows stay in L1/L2, and
	 * four tasks per thread at batch 1: the NCHW form transposes a band's
	 * output at once, and the stem's took 0.89-0.90 ms (C medians) in
	 * bands of 14 rows against 0.92-0.97 in 7 (NHWC level); in 23 rows,
	 * 5 tasks for 2 threads, 1.11 */
	int64_t per_row = g->sh * p.Wp * g->C;
	int64_t band = per_row > 0 ? BAND_FLOATS / per_row : g->OH;
	const int64_t nt = nthreads > 0 ? nthreads : 1;
	int64_t want = k_cdiv(g->N * g->OH, 4 * nt);
	band = band < want ? band : want;
	/* NCHW: the band's output, channels-last, within 1 MiB (a thread's
	 * share of L2 next to the input band); one row at least */
	int64_t out_row = g->OW * g->O * (int64_t)sizeof(float);
	if (nchw && out_row > 0 && band > OUT_BAND_BYTES / out_row)
		band = OUT_BAND_BYTES / out_row;
	band = band < 1 ? 1 : band > g->OH ? g->OH : band;
	p.band = kconv_even_band(band, g->N, g->OH, nt);
	p.bands = p.band ? k_cdiv(g->OH, p.band) : 0;
	/* Too few rows for four tasks a thread (a conv1d has one): the rows
	 * are cut into chunks of whole micro-tiles of pixels as well. Whisper's
	 * second conv1d (256 > 256, k3 s2, 1500 outputs) ran on one thread in
	 * 4.5 ms, against eager's 2.1. */
	const int64_t mr = kgemm_tile_rows();
	p.cw = g->OW;
	if (g->N * p.bands > 0 && g->N * p.bands < 4 * nt && g->OW > mr) {
		int64_t chunks = k_cdiv(4 * nt, g->N * p.bands);
		int64_t cw = k_cdiv(k_cdiv(g->OW, chunks), mr) * mr;
		p.cw = cw < g->OW ? cw : g->OW;
	}
	p.chunks = p.cw ? k_cdiv(g->OW, p.cw) : 0;
	p.Wb = p.cw == g->OW ? p.Wp : (p.cw - 1) * g->sw + (g->KW - 1) * g->dw + 1;
	int64_t in_rows = (p.band - 1) * g->sh + (g->KH - 1) * g->dh + 1;
	p.band_bytes = k_align64(sizeof(float) * (size_t)(in_rows * p.Wb * g->C));
	/* NCHW: the band's output rows channels-last, to transpose */
	p.slot_bytes = p.band_bytes + (nchw ? k_align64(sizeof(float) * (size_t)(p.band * p.cw * g->O)) : 0);
	return p;
}

typedef struct imp_job {
	kconv_geom g;
	k_act act;
	int nchw; /* x and y are NCHW (else NHWC) */
	imp_plan p;
	const kgemm_ukernel_desc *uk;
	const float *panels; /* the packed weight: K x nr per panel */
	const float *x, *bias, *res;
	float *y;
	char *ws;
} imp_job;

/* Input rows [ih0, ih0 + rows), pixels [iw0, iw0 + Wb) of image x into
 * dst channels-last, zeros wherever that is outside the image (iw0 may be
 * negative: the padding in front). x is NHWC, or NCHW (then gathered by
 * channel). */
static void pad_band(const imp_job *j, const float *x, int64_t ih0, int64_t rows, int64_t iw0, float *dst)
{
	const kconv_geom *g = &j->g;
	const int64_t C = g->C, Wb = j->p.Wb, row = Wb * C;
	const int64_t left = iw0 >= 0 ? 0 : -iw0 < Wb ? -iw0 : Wb, start = iw0 + left;
	const int64_t width = k_min64(g->W - start, Wb - left);
	for (int64_t r = 0; r < rows; r++, dst += row) {
		int64_t ih = ih0 + r;
		if (ih < 0 || ih >= g->H || width <= 0) {
			memset(dst, 0, sizeof(float) * (size_t)row);
			continue;
		}
		memset(dst, 0, sizeof(float) * (size_t)(left * C));
		if (j->nchw && C < 8) {
			/* (fewer channels than a transpose block: plane by plane) */
			for (int64_t c = 0; c < C; c++) {
				const float *xr = x + (c * g->H + ih) * g->W + start;
				for (int64_t iw = 0; iw < width; iw++)
					dst[(left + iw) * C + c] = xr[iw];
			}
		} else if (j->nchw) {
			/* [C x width] at row ih of each plane, to [width x C] */
			ktranspose(x + ih * g->W + start, g->H * g->W, dst + left * C, C, C, width);
		} else {
			memcpy(dst + left * C, x + (ih * g->W + start) * C, sizeof(float) * (size_t)(width * C));
		}
		memset(dst + (left + width) * C, 0, sizeof(float) * (size_t)((Wb - left - width) * C));
	}
}

/* The OW pixels of one output row from ow0 on, channels-last: yrow[ow * O
 * + o], from the band row where their first kernel row starts. */
static void output_row(const imp_job *j, const float *arow, float *yrow, const float *rrow, int64_t OW)
{
	const kconv_geom *g = &j->g;
	const kgemm_ukernel_desc *uk = j->uk;
	const int64_t C = g->C, O = g->O, seg = g->KW * C, K = g->KH * seg, lda = g->sw * C;
	const int64_t seg_stride = g->dh * j->p.Wb * C;
	kgemm_tile_ep te = {0};
	te.alpha = 1.0f;
	te.act = j->act;
	te.bias_m = NULL;
	te.ld_res = O;
	/* panel by panel: a panel (K x nr) and the row's input stay in L1
	 * over all of the row's tiles */
	for (int64_t o = 0; o < O; o += uk->nr) {
		const float *bp = j->panels + (o / uk->nr) * K * uk->nr;
		const int n = (int)k_min64(uk->nr, O - o);
		te.bias_n = j->bias ? j->bias + o : NULL;
		for (int64_t ow = 0; ow < OW; ow += uk->mr) {
			const int m = (int)k_min64(uk->mr, OW - ow);
			const float *a = arow + ow * lda;
			float *c = yrow + ow * O + o;
			te.res = rrow ? rrow + ow * O + o : NULL;
			if (uk->seg) {
				te.flags = KGEMM_TILE_FIRST | KGEMM_TILE_LAST;
				uk->seg(seg, g->KH, seg_stride, a, lda, bp, c, O, m, n, &te);
				continue;
			}
			for (int64_t ki = 0; ki < g->KH; ki++) {
				te.flags = (ki == 0 ? KGEMM_TILE_FIRST : 0) | (ki == g->KH - 1 ? KGEMM_TILE_LAST : 0);
				uk->fn(seg, a + ki * seg_stride, lda, 1, bp + ki * seg * uk->nr, c, O, m, n, &te);
			}
		}
	}
}

static void imp_task(void *ctx, int64_t t, int thread)
{
	const imp_job *j = ctx;
	const kconv_geom *g = &j->g;
	const imp_plan *p = &j->p;
	const int64_t per_image = p->bands * p->chunks, rest = t % per_image, n = t / per_image;
	const int64_t oh0 = rest / p->chunks * p->band, oh1 = k_min64(g->OH, oh0 + p->band);
	const int64_t ow0 = rest % p->chunks * p->cw, cols = k_min64(g->OW, ow0 + p->cw) - ow0;
	const int64_t C = g->C, O = g->O, OHW = g->OH * g->OW;
	char *slot = j->ws + (size_t)thread * p->slot_bytes;
	float *band = (float *)slot, *row = (float *)(slot + p->band_bytes);
	pad_band(j, j->x + n * g->H * g->W * C, oh0 * g->sh - g->ph, (oh1 - oh0 - 1) * g->sh + (g->KH - 1) * g->dh + 1,
		 ow0 * g->sw - g->pw, band);
	for (int64_t oh = oh0; oh < oh1; oh++) {
		const float *arow = band + (oh - oh0) * g->sh * p->Wb * C;
		if (j->nchw) {
			/* the residual is channels-last only: supports() refuses it here */
			output_row(j, arow, row + (oh - oh0) * cols * O, NULL, cols);
			continue;
		}
		const int64_t at = ((n * g->OH + oh) * g->OW + ow0) * O;
		output_row(j, arow, j->y + at, j->res ? j->res + at : NULL, cols);
	}
	if (!j->nchw)
		return;
	float *y = j->y + n * O * OHW + ow0;
	if (cols == g->OW) /* whole rows: the band's pixels are contiguous in each plane */
		ktranspose(row, O, y + oh0 * g->OW, OHW, (oh1 - oh0) * g->OW, O);
	else
		for (int64_t oh = oh0; oh < oh1; oh++)
			ktranspose(row + (oh - oh0) * cols * O, O, y + oh * g->OW, OHW, cols, O);
}

/* A channels-last conv1d (one input row, one kernel row, no row padding)
 * is one GEMM per image: output pixel ow's taps are the KW * C floats of
 * the input row from pixel ow * sw - pw on, so A is that row read with row
 * stride sw * C (zero-padded into the workspace when pw > 0 or the last
 * taps run past it). The GEMM driver then blocks K and, for ROW_GEMM_MIN_O
 * output channels or more, packs A: read in place, a stride of 4 KiB put a
 * tile's 12 rows in one L1 set. wav2vec2's feature encoder (512 channels,
 * stride 2, 1 s of audio) went from 0.88-0.90x to 0.99-1.00x eager; with
 * fewer channels the GEMM reads A in place too, and Whisper's two stem
 * convolutions (256 channels) were 3-5% faster in the band kernel. */
enum { ROW_GEMM_MIN_O = 512 };

static bool row_gemm(const kconv_geom *g, int nchw)
{
	return !nchw && g->H == 1 && g->KH == 1 && g->OH == 1 && g->ph == 0 && g->dw == 1 && g->G == 1 &&
	       g->O >= ROW_GEMM_MIN_O;
}

/* The geometry of either op's call, and whether this kernel takes it. */
static bool imp_geom(const k_call *call, int nchw, kconv_geom *g, k_act *act)
{
	if (nchw) {
		if (kconv_geom_make(call, g) != AIR_OK)
			return false;
		*act = g->act;
	} else {
		kconv_nhwc c;
		if (kconv_nhwc_make(call, &c) != AIR_OK)
			return false;
		*g = c.g;
		g->has_residual = c.has_residual;
		*act = c.act;
	}
	return true;
}

static bool supports(const k_call *call, int nchw)
{
	kconv_geom g;
	k_act act;
	/* the NCHW op takes a weight that is a graph input too (packed per
	 * call); the NHWC op exists only where the layout pass put it, for a
	 * constant weight */
	bool const_w = call->in_const && call->in_const[1];
	if (!k_all_f32(call) || (!nchw && !const_w) || !imp_geom(call, nchw, &g, &act))
		return false;
	return g.O > 0 && (kconv_implicit_fits(g.C, g.G, g.KH, g.KW, g.dw) || wide_fits(&g) || row_gemm(&g, nchw)) &&
	       !(nchw && g.has_residual);
}

static air_status prepare(const k_call *call, int nchw, void **out)
{
	kconv_geom g;
	k_act act;
	if (!imp_geom(call, nchw, &g, &act))
		return air_error(AIR_INVALID_ARGUMENT, "conv2d_implicit_gemm: bad geometry");
	return kconv_nhwc_pack_weight(call, &g, INT64_MAX, out);
}

/* Whether image rows must be copied with their padding: pixels [-pw, Wp -
 * pw) are read. */
static bool row_gemm_pads(const kconv_geom *g, const imp_plan *p)
{
	return g->pw > 0 || p->Wp > g->W;
}

static size_t row_gemm_workspace(const kconv_geom *g, const imp_plan *p, int nthreads)
{
	size_t row = row_gemm_pads(g, p) ? k_align64(sizeof(float) * (size_t)(p->Wp * g->C)) : 0;
	return row + kgemm_packed_workspace_bytes(g->OW, g->O, g->KW * g->C, nthreads);
}

static void row_gemm_run(const imp_job *j, const kgemm_packed_b *w, rt_pool *pool)
{
	const kconv_geom *g = &j->g;
	const int64_t C = g->C, O = g->O, Wp = j->p.Wp, pw = g->pw;
	const bool pads = row_gemm_pads(g, &j->p);
	float *row = (float *)j->ws;
	char *gemm_ws = j->ws + (pads ? k_align64(sizeof(float) * (size_t)(Wp * C)) : 0);
	k_epilogue ep = k_epilogue_none();
	ep.bias_n = j->bias;
	ep.act = j->act;
	ep.ld_residual = O;
	for (int64_t n = 0; n < g->N; n++) {
		const float *x = j->x + n * g->W * C, *a = x - pw * C;
		if (pads) {
			const int64_t width = k_min64(g->W, Wp - pw);
			memset(row, 0, sizeof(float) * (size_t)(pw * C));
			memcpy(row + pw * C, x, sizeof(float) * (size_t)(width * C));
			memset(row + (pw + width) * C, 0, sizeof(float) * (size_t)((Wp - pw - width) * C));
			a = row;
		}
		ep.residual = j->res ? j->res + n * g->OW * O : NULL;
		kgemm_f32_packed(g->OW, O, g->KW * C, a, g->sw * C, 1, w, j->y + n * g->OW * O, O, &ep, pool, gemm_ws);
	}
}

static size_t workspace(const k_call *call, int nchw, int nthreads)
{
	kconv_geom g;
	k_act act;
	if (!imp_geom(call, nchw, &g, &act))
		return 0;
	nthreads = nthreads < 1 ? 1 : nthreads;
	const imp_plan p = make_plan(&g, nchw, nthreads);
	return kconv_nhwc_repack_bytes(call->prepared, &g) +
	       (row_gemm(&g, nchw) ? row_gemm_workspace(&g, &p, nthreads) : (size_t)nthreads * p.slot_bytes);
}

static air_status run(const k_call *call, int nchw)
{
	imp_job j;
	if (!imp_geom(call, nchw, &j.g, &j.act))
		return air_error(AIR_INVALID_ARGUMENT, "conv2d_implicit_gemm: bad geometry");
	const kconv_geom *g = &j.g;
	if (call->out[0].numel == 0)
		return AIR_OK;
	j.nchw = nchw;
	j.p = make_plan(g, nchw, rt_pool_size(call->pool));
	j.uk = kgemm_active_ukernel();
	j.ws = call->workspace;
	kgemm_packed_b *w = kconv_nhwc_weight_blocks(call, g, &j.ws)[0];
	j.panels = kgemm_packed_b_panel(w, 0);
	j.bias = g->has_bias ? call->in[2].data : NULL;
	j.res = g->has_residual ? call->in[call->n_in - 1].data : NULL;
	j.x = call->in[0].data;
	j.y = call->out[0].data;
	if (row_gemm(g, nchw)) {
		row_gemm_run(&j, w, call->pool);
		return AIR_OK;
	}
	rt_pool_run(call->pool, g->N * j.p.bands * j.p.chunks, imp_task, &j);
	return AIR_OK;
}

static bool nhwc_supports(const k_call *call) { return supports(call, 0); }
static air_status nhwc_prepare(const k_call *call, void **out) { return prepare(call, 0, out); }
static size_t nhwc_ws(const k_call *call, int nthreads) { return workspace(call, 0, nthreads); }
static air_status nhwc_run(const k_call *call) { return run(call, 0); }
static bool nchw_supports(const k_call *call) { return supports(call, 1); }
static air_status nchw_prepare(const k_call *call, void **out) { return prepare(call, 1, out); }
static size_t nchw_ws(const k_call *call, int nthreads) { return workspace(call, 1, nthreads); }
static air_status nchw_run(const k_call *call) { return run(call, 1); }

const k_kernel kfast_conv2d_nhwc_implicit = {"conv2d_nhwc_implicit_gemm", 0, nhwc_supports, nhwc_prepare,
					     kconv_nhwc_packed_release, nhwc_ws, nhwc_run};
const k_kernel kfast_conv2d_implicit_nchw = {"conv2d_implicit_gemm_nchw", 0, nchw_supports, nchw_prepare,
					     kconv_nhwc_packed_release, nchw_ws, nchw_run};

/* conv_rows.c - channels-last convolution whose weight stays where its
 * owner keeps it: the module's parameter (OIHW), read in place by the
 * weight-rows GEMM that linear uses (matmul/linear_rows.c), with no packed
 * copy beside it. For the convs with too few output pixels to re-pack
 * their weight on every call (conv_nhwc.c, REPACK_MIN_ROWS): ResNet-50's
 * layer3 and layer4 at batch 1, whose packed copies were 104 MiB held next
 * to the parameters.
 *
 * The product is computed as its transpose, y^T[O, M] = W[O, K] col^T[K, M]:
 * with K ordered (c, ki, kj), row o of W is the parameter's W[o, :, :, :],
 * contiguous, so W is the GEMM's A as it stands, and col^T (the im2col of
 * the output pixels) is built straight into the GEMM's packed B panels:
 * per panel of pixels and per tap, the pixels' C channels under that tap
 * are gathered into a small buffer and transposed into the panel rows
 * (c, tap). A folded batch norm's scale (k_const_source.row_scale), which
 * the packed kernels multiply into their copy, is applied per output
 * channel after the product (linear_rows.c, scale_block), with the bias,
 * the residual and the activation. Grouped convs stay with the packed
 * kernels, and so do the 3x3 stride-1 convs Winograd takes (rows_supports). */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kernels/conv/conv_nhwc.h"
#include "kernels/conv/conv_rows.h"
#include "kernels/gemm/gemm.h"
#include "kernels/matmul/linear_rows.h"
#include "kernels/shape/transpose.h"

/* Output pixels from which conv_nhwc.c re-packs the weight per call anyway
 * (its REPACK_MIN_ROWS); below MIN_ROWS the GEMM's panels of pixels are
 * mostly empty (linear_rows.c's MIN_TOKENS). Weights with fewer than
 * MIN_DIM output channels or products shorter than MIN_DIM keep their
 * packed copy: it costs little memory, and there the rows kernel lost for
 * linear (linear_rows.c, MIN_WEIGHT_DIM). */
enum { MAX_ROWS = 512, MIN_ROWS = 16, MIN_DIM = 256 };

typedef struct rows_prep {
	const float *w;   /* the source weight, [O, C, KH, KW] */
	float *scale;     /* [O] (owned), or NULL */
	int64_t O, K;
} rows_prep;

static bool rows_supports(const k_call *call)
{
	kconv_nhwc c;
	if (!kconv_nhwc_gemm_ok(call, &c) || !call->weights_in_place || !call->in_source || !call->in_source[1].base)
		return false;
	const kconv_geom *g = &c.g;
	const int64_t M = g->N * g->OH * g->OW, K = g->Cg * g->KH * g->KW;
	if (g->G != 1 || g->N < 0 || g->OH < 0 || g->OW < 0 || g->C < 0)
		return false;
	if (M < MIN_ROWS || M >= MAX_ROWS || g->O < MIN_DIM || K < MIN_DIM)
		return false;
	/* 3x3 stride 1 with tiles enough stays with Winograd, which holds its
	 * transformed weight (16/9 of it) but does 2.25x fewer flops: at 14x14
	 * x 256 channels, batch 1, this kernel took 2.3x its time (AMD EPYC, 1
	 * thread, a busy machine) */
	return !kfast_conv2d_nhwc_winograd.supports(call);
}

static air_status rows_prepare(const k_call *call, void **out)
{
	kconv_nhwc c;
	AIR_TRY(kconv_nhwc_make(call, &c));
	rows_prep *p = calloc(1, sizeof *p);
	if (!p)
		return air_error(AIR_OUT_OF_MEMORY, "conv2d_nhwc: no memory for the weight's source");
	const k_const_source *cs = &call->in_source[1];
	p->w = cs->base;
	p->O = c.g.O;
	p->K = c.g.Cg * c.g.KH * c.g.KW;
	if (cs->row_scale) {
		p->scale = malloc(sizeof(float) * (size_t)p->O);
		if (!p->scale) {
			free(p);
			return air_error(AIR_OUT_OF_MEMORY, "conv2d_nhwc: no memory for the weight's scale");
		}
		for (int64_t o = 0; o < p->O; o++)
			p->scale[o] = (float)cs->row_scale[o];
	}
	*out = p;
	return AIR_OK;
}

static void rows_release(void *prepared)
{
	rows_prep *p = prepared;
	if (p)
		free(p->scale);
	free(p);
}

size_t kconv_rows_prepared_bytes(const void *prepared, size_t *source_bytes)
{
	const rows_prep *p = prepared;
	*source_bytes = 0;
	if (!p)
		return 0;
	/* a folded weight's source is read by this kernel alone (the graph
	 * reads the folded constant, which is freed) */
	if (p->scale)
		*source_bytes = sizeof(float) * (size_t)(p->O * p->K);
	return sizeof *p + (p->scale ? sizeof(float) * (size_t)p->O : 0);
}

/* Per thread: the gather buffer of one tap, a panel of pixels by C. */
static size_t gather_bytes(const kconv_geom *g)
{
	return k_align64(sizeof(float) * (size_t)(kgemm_tile_cols() * g->C));
}

static size_t rows_ws(const k_call *call, int nthreads)
{
	kconv_nhwc c;
	if (kconv_nhwc_make(call, &c) != AIR_OK)
		return 0;
	const kconv_geom *g = &c.g;
	const int64_t M = g->N * g->OH * g->OW, K = g->C * g->KH * g->KW;
	if (M <= 0 || g->O <= 0 || K <= 0)
		return 0;
	return k_align64(kwrows_workspace_bytes(M, g->O, K, nthreads, true)) +
	       (size_t)(nthreads < 1 ? 1 : nthreads) * gather_bytes(g);
}

typedef struct pack_job {
	const kconv_geom *g;
	const float *x;
	kgemm_packed_b *xt;
	char *gather;
	size_t gather_bytes;
	int64_t M, taps;
} pack_job;

/* Task t: tap (t % taps) of panel (t / taps): for each of the panel's
 * pixels, the C channels of x under that tap (zeros in the padding), then
 * transposed into the panel's rows c * taps + tap. In a partial last
 * panel each task zeroes the columns past M of its own rows, so no two
 * tasks write the same floats. */
static void pack_task(void *ctx, int64_t t, int thread)
{
	const pack_job *j = ctx;
	const kconv_geom *g = j->g;
	const int64_t nr = kgemm_tile_cols(), C = g->C, P = g->OH * g->OW;
	const int64_t tap = t % j->taps, m0 = (t / j->taps) * nr, n = k_min64(nr, j->M - m0);
	const int64_t ki = tap / g->KW, kj = tap % g->KW;
	float *buf = (float *)(j->gather + (size_t)thread * j->gather_bytes);
	float *panel = kgemm_packed_b_panel(j->xt, m0) + tap * nr;
	const int64_t ldp = j->taps * nr;
	const float *src = NULL;
	if (g->KH == 1 && g->KW == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0) {
		src = j->x + m0 * C; /* the pixels' rows are x's own, in order */
	} else {
		for (int64_t i = 0; i < n; i++) {
			const int64_t m = m0 + i, img = m / P, oh = (m % P) / g->OW, ow = m % g->OW;
			const int64_t ih = oh * g->sh - g->ph + ki * g->dh, iw = ow * g->sw - g->pw + kj * g->dw;
			if (ih < 0 || ih >= g->H || iw < 0 || iw >= g->W)
				memset(buf + i * C, 0, sizeof(float) * (size_t)C);
			else
				memcpy(buf + i * C, j->x + ((img * g->H + ih) * g->W + iw) * C, sizeof(float) * (size_t)C);
		}
		src = buf;
	}
	ktranspose(src, C, panel, ldp, n, C);
	if (n < nr)
		for (int64_t c = 0; c < C; c++)
			memset(panel + c * ldp + n, 0, sizeof(float) * (size_t)(nr - n));
}

static air_status rows_run(const k_call *call)
{
	kconv_nhwc c;
	AIR_TRY(kconv_nhwc_make(call, &c));
	const kconv_geom *g = &c.g;
	if (call->out[0].numel == 0)
		return AIR_OK;
	const rows_prep *p = call->prepared;
	const int64_t M = g->N * g->OH * g->OW, K = g->C * g->KH * g->KW;
	if (K != p->K || g->O != p->O)
		return air_error(AIR_SHAPE_MISMATCH, "conv2d_nhwc: the weight's shape changed since compile");
	const int nthreads = rt_pool_size(call->pool);
	pack_job j = {g, call->in[0].data, kwrows_panels(call->workspace, K, M), NULL, gather_bytes(g), M,
		      g->KH * g->KW};
	j.gather = (char *)call->workspace + k_align64(kwrows_workspace_bytes(M, g->O, K, nthreads, true));
	rt_pool_run(call->pool, k_cdiv(M, kgemm_tile_cols()) * j.taps, pack_task, &j);
	kwrows_args a = {M, g->O, K, p->w, p->scale, NULL, NULL, call->out[0].data, c.act, true};
	kconv_nhwc_operands(call, &c, &a.bias, &a.res);
	kwrows_product(&a, call->workspace, call->pool);
	return AIR_OK;
}

/* No K_INPLACE_RESIDUAL: the residual is read after the products are
 * stored into y (linear_rows.c), so it may not share y's buffer. */
const k_kernel kfast_conv2d_nhwc_rows = {"conv2d_nhwc_weight_rows", 0, rows_supports, rows_prepare, rows_release,
					 rows_ws, rows_run};

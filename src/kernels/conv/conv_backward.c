/* conv_backward.c - the 2-D convolution's gradients (NCHW, f32) on the
 * GEMM kernels. Per group g, with K = C/g * KH * KW taps and P = OH * OW:
 *   dx: cols[K, P] = W_g^T [K, O/g] @ dy_g [O/g, P] for each image, then
 *       col2im adds every tap's row back into the input position it read
 *       (a 1x1 stride-1 unpadded kernel has cols == dx: one GEMM into dx);
 *   dw: dw_g^T [K, O/g] = sum over images of im2col(x_g) [K, P] @ dy_g^T,
 *       the images of a chunk side by side as one GEMM of depth chunk * P
 *       (small late-network maps make a deep enough product together), the
 *       chunks summed through the epilogue's residual, then transposed.
 * The weight is transposed once per call to be the dx GEMMs' row-major A,
 * which the batched GEMM shares across the chunk's images. Depthwise
 * convolutions (one channel per group) have no product worth a GEMM and
 * run the reference kernel's direct loops, threaded over planes. */
#include <string.h>

#include "core/error.h"
#include "kernels/conv/conv_backward.h"
#include "kernels/gemm/gemm.h"
#include "kernels/shape/transpose.h"

/* Floats of the chunk's columns (im2col or col2im): 8 MB, a few images of
 * a mid-network map, so the workspace stays small at any batch. */
enum { COL_CAP = 1 << 21 };

typedef struct plan {
	kconv_geom g;
	int64_t K, P, nb;  /* taps per group, dy positions per image, images per chunk */
	bool pointwise;    /* 1x1, stride 1, no padding: x (and dx) are the columns */
	size_t wt_bytes, col_bytes, dy_bytes, gemm_bytes;
} plan;

static bool make_plan(const k_call *call, bool weight, int nthreads, plan *p)
{
	kconv_geom *g = &p->g;
	if (!k_all_f32(call) || kconvb_geom(call, weight, g) != AIR_OK)
		return false;
	if (g->N < 0 || g->C <= 0 || g->O <= 0 || g->OH < 0 || g->OW < 0 || g->KH <= 0 || g->KW <= 0)
		return false;
	if (g->Cg == 1 && g->Og == 1) /* depthwise: the reference's direct loops */
		return false;
	p->K = g->Cg * g->KH * g->KW;
	p->P = g->OH * g->OW;
	p->pointwise = g->KH == 1 && g->KW == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0;
	int64_t per = p->K * p->P > 0 ? p->K * p->P : 1;
	p->nb = k_min64(g->N > 0 ? g->N : 1, COL_CAP / per > 1 ? COL_CAP / per : 1);
	p->wt_bytes = p->col_bytes = p->dy_bytes = 0;
	if (weight) {
		p->wt_bytes = k_align64(sizeof(float) * (size_t)(p->K * g->Og)); /* dw_g^T */
		if (!(p->pointwise && p->nb == 1))
			p->col_bytes = k_align64(sizeof(float) * (size_t)(p->K * p->nb * p->P));
		if (p->nb > 1)
			p->dy_bytes = k_align64(sizeof(float) * (size_t)(g->Og * p->nb * p->P));
		p->gemm_bytes = k_align64(kgemm_workspace_bytes(p->K, g->Og, p->nb * p->P, 1, nthreads));
	} else {
		p->wt_bytes = k_align64(sizeof(float) * (size_t)(g->O * p->K)); /* W^T per group */
		if (p->pointwise)
			p->nb = g->N > 0 ? g->N : 1; /* straight into dx: no columns to bound */
		else
			p->col_bytes = k_align64(sizeof(float) * (size_t)(p->nb * p->K * p->P));
		p->gemm_bytes = k_align64(kgemm_batched_workspace_bytes(p->nb, p->K, p->P, g->Og, nthreads));
	}
	return true;
}

static bool input_supports(const k_call *call)
{
	plan p;
	return make_plan(call, false, 1, &p);
}

static bool weight_supports(const k_call *call)
{
	plan p;
	return make_plan(call, true, 1, &p);
}

static size_t input_ws(const k_call *call, int nthreads)
{
	plan p;
	return make_plan(call, false, nthreads, &p) ? p.wt_bytes + p.col_bytes + p.gemm_bytes : 0;
}

static size_t weight_ws(const k_call *call, int nthreads)
{
	plan p;
	return make_plan(call, true, nthreads, &p) ? p.wt_bytes + p.col_bytes + p.dy_bytes + p.gemm_bytes : 0;
}

/* ---- columns <-> images ----------------------------------------------------- */

typedef struct col_job {
	const kconv_geom *g;
	float *cols;       /* [j][K][P] for col2im; [K][nb * P] for im2col */
	const float *x;    /* im2col: image n0's group */
	float *dx;         /* col2im: image n0's group */
	int64_t K, P, nb;
} col_job;

/* dx plane (image j of the chunk, channel ci of the group): zero, then
 * each tap's row of cols added where that tap read the input. */
static void col2im_task(void *ctx, int64_t t, int thread)
{
	(void)thread;
	const col_job *c = ctx;
	const kconv_geom *g = c->g;
	int64_t j = t / g->Cg, ci = t % g->Cg;
	float *dx = c->dx + (j * g->C + ci) * g->H * g->W;
	const float *rows = c->cols + (j * c->K + ci * g->KH * g->KW) * c->P;
	memset(dx, 0, sizeof(float) * (size_t)(g->H * g->W));
	for (int64_t ki = 0; ki < g->KH; ki++) {
		int64_t oh0, oh1, offh = ki * g->dh - g->ph;
		kconv_valid_range(g->OH, g->H, g->sh, offh, &oh0, &oh1);
		for (int64_t kj = 0; kj < g->KW; kj++) {
			const float *r = rows + (ki * g->KW + kj) * c->P;
			int64_t ow0, ow1, off = kj * g->dw - g->pw;
			kconv_valid_range(g->OW, g->W, g->sw, off, &ow0, &ow1);
			for (int64_t oh = oh0; oh < oh1; oh++) {
				float *xr = dx + (oh * g->sh + offh) * g->W + off;
				const float *cr = r + oh * g->OW;
				if (g->sw == 1)
					for (int64_t ow = ow0; ow < ow1; ow++)
						xr[ow] += cr[ow];
				else
					for (int64_t ow = ow0; ow < ow1; ow++)
						xr[ow * g->sw] += cr[ow];
			}
		}
	}
}

/* The KH*KW rows of cols that channel ci of image j of the chunk gives:
 * row (ci, ki, kj) at column j*P + oh*OW + ow holds the input the tap read
 * there, 0 in the padding. */
static void im2col_task(void *ctx, int64_t t, int thread)
{
	(void)thread;
	const col_job *c = ctx;
	const kconv_geom *g = c->g;
	int64_t j = t / g->Cg, ci = t % g->Cg, ld = c->nb * c->P;
	const float *x = c->x + (j * g->C + ci) * g->H * g->W;
	for (int64_t ki = 0; ki < g->KH; ki++) {
		int64_t oh0, oh1, offh = ki * g->dh - g->ph;
		kconv_valid_range(g->OH, g->H, g->sh, offh, &oh0, &oh1);
		for (int64_t kj = 0; kj < g->KW; kj++) {
			float *r = c->cols + ((ci * g->KH + ki) * g->KW + kj) * ld + j * c->P;
			int64_t ow0, ow1, off = kj * g->dw - g->pw;
			kconv_valid_range(g->OW, g->W, g->sw, off, &ow0, &ow1);
			memset(r, 0, sizeof(float) * (size_t)(oh0 * g->OW));
			for (int64_t oh = oh0; oh < oh1; oh++) {
				float *cr = r + oh * g->OW;
				const float *xr = x + (oh * g->sh + offh) * g->W + off;
				for (int64_t ow = 0; ow < ow0; ow++)
					cr[ow] = 0;
				if (g->sw == 1)
					memcpy(cr + ow0, xr + ow0, sizeof(float) * (size_t)(ow1 - ow0));
				else
					for (int64_t ow = ow0; ow < ow1; ow++)
						cr[ow] = xr[ow * g->sw];
				for (int64_t ow = ow1; ow < g->OW; ow++)
					cr[ow] = 0;
			}
			memset(r + oh1 * g->OW, 0, sizeof(float) * (size_t)((g->OH - oh1) * g->OW));
		}
	}
}

/* ---- dx -------------------------------------------------------------------- */

static air_status input_run(const k_call *call)
{
	plan p;
	if (!make_plan(call, false, rt_pool_size(call->pool), &p))
		return air_error(AIR_INVALID_ARGUMENT, "conv2d_backward_input_gemm: unsupported call");
	const kconv_geom *g = &p.g;
	if (call->out[0].numel == 0)
		return AIR_OK;
	const float *dy = call->in[0].data, *w = call->in[1].data;
	float *dx = call->out[0].data;
	float *wt = call->workspace;
	float *cols = (float *)((char *)wt + p.wt_bytes);
	void *gemm_ws = (char *)cols + p.col_bytes;
	if (p.P == 0) { /* nothing reaches dx */
		memset(dx, 0, sizeof(float) * (size_t)call->out[0].numel);
		return AIR_OK;
	}
	/* W_g [O/g, K] -> wt_g [K, O/g], the row-major A every image shares */
	for (int64_t gi = 0; gi < g->G; gi++)
		ktranspose(w + gi * g->Og * p.K, p.K, wt + gi * p.K * g->Og, g->Og, g->Og, p.K);
	for (int64_t gi = 0; gi < g->G; gi++) {
		const float *a = wt + gi * p.K * g->Og;
		for (int64_t n0 = 0; n0 < g->N; n0 += p.nb) {
			int64_t nb = k_min64(p.nb, g->N - n0);
			const float *b = dy + (n0 * g->O + gi * g->Og) * p.P;
			float *dxg = dx + (n0 * g->C + gi * g->Cg) * g->H * g->W;
			if (p.pointwise) {
				kgemm_f32_batched(nb, p.K, p.P, g->Og, a, 0, g->Og, 1, b, g->O * p.P, p.P, 1, dxg,
						  g->C * p.P, p.P, NULL, call->pool, gemm_ws);
				continue;
			}
			kgemm_f32_batched(nb, p.K, p.P, g->Og, a, 0, g->Og, 1, b, g->O * p.P, p.P, 1, cols, p.K * p.P,
					  p.P, NULL, call->pool, gemm_ws);
			col_job c = {g, cols, NULL, dxg, p.K, p.P, nb};
			rt_pool_run(call->pool, nb * g->Cg, col2im_task, &c);
		}
	}
	return AIR_OK;
}

/* ---- dw -------------------------------------------------------------------- */

typedef struct dy_job {
	const float *dy; /* image n0, the group's first channel */
	float *out;      /* [Og][nb * P] */
	int64_t O, Og, P, nb;
} dy_job;

/* row o of the chunk's dy: each image's P values side by side */
static void gather_dy_task(void *ctx, int64_t o, int thread)
{
	(void)thread;
	const dy_job *d = ctx;
	for (int64_t j = 0; j < d->nb; j++)
		memcpy(d->out + (o * d->nb + j) * d->P, d->dy + (j * d->O + o) * d->P, sizeof(float) * (size_t)d->P);
}

static air_status weight_run(const k_call *call)
{
	plan p;
	if (!make_plan(call, true, rt_pool_size(call->pool), &p))
		return air_error(AIR_INVALID_ARGUMENT, "conv2d_backward_weight_gemm: unsupported call");
	const kconv_geom *g = &p.g;
	const float *dy = call->in[0].data, *x = call->in[1].data;
	float *dw = call->out[0].data;
	if (call->out[0].numel == 0)
		return AIR_OK;
	if (g->N == 0 || p.P == 0) {
		memset(dw, 0, sizeof(float) * (size_t)call->out[0].numel);
		return AIR_OK;
	}
	float *acc = call->workspace; /* dw_g^T [K][Og] */
	float *cols = (float *)((char *)acc + p.wt_bytes);
	float *dyc = (float *)((char *)cols + p.col_bytes);
	void *gemm_ws = (char *)dyc + p.dy_bytes;
	for (int64_t gi = 0; gi < g->G; gi++) {
		for (int64_t n0 = 0; n0 < g->N; n0 += p.nb) {
			int64_t nb = k_min64(p.nb, g->N - n0), depth = nb * p.P;
			const float *xg = x + (n0 * g->C + gi * g->Cg) * g->H * g->W;
			const float *dyg = dy + (n0 * g->O + gi * g->Og) * p.P;
			const float *a = xg; /* pointwise, one image: x_g [Cg][P] is the columns */
			if (p.col_bytes) {
				/* a short last chunk packs its columns at its own depth */
				col_job c = {g, cols, xg, NULL, p.K, p.P, nb};
				rt_pool_run(call->pool, nb * g->Cg, im2col_task, &c);
				a = cols;
			}
			/* B(q, o) = dy of image q / P, channel o, position q % P */
			const float *b = dyg;
			int64_t cs_b = p.P;
			if (nb > 1) {
				dy_job d = {dyg, dyc, g->O, g->Og, p.P, nb};
				rt_pool_run(call->pool, g->Og, gather_dy_task, &d);
				b = dyc;
				cs_b = depth;
			}
			k_epilogue ep = k_epilogue_none();
			if (n0 > 0) { /* add the earlier chunks' sum, read before written */
				ep.residual = acc;
				ep.ld_residual = g->Og;
			}
			kgemm_f32(p.K, g->Og, depth, a, depth, 1, b, 1, cs_b, acc, g->Og, &ep, call->pool, gemm_ws);
		}
		ktranspose(acc, g->Og, dw + gi * g->Og * p.K, p.K, p.K, g->Og);
	}
	return AIR_OK;
}

const k_kernel kfast_conv2d_backward_input_gemm = {"conv2d_backward_input_gemm", 0, input_supports, NULL, NULL,
						   input_ws, input_run, 0};
const k_kernel kfast_conv2d_backward_weight_gemm = {"conv2d_backward_weight_gemm", 0, weight_supports, NULL, NULL,
						    weight_ws, weight_run, 0};

/* conv_backward.c - the 2-D convolution's gradients (NCHW, f32) on the
 * GEMM kernels. Per group g, with K = C/g * KH * KW taps and P = OH * OW:
 *   dx: cols[K, P] = W_g^T [K, O/g] @ dy_g [O/g, P] for each image, then
 *       col2im adds every tap's row back into the input position it read
 *       (a 1x1 stride-1 unpadded kernel has cols == dx: one GEMM into dx);
 *   dw: dw_g^T [K, O/g] = sum over images of im2col(x_g) [K, P] @ dy_g^T,
 *       the images of a chunk side by side as one product of depth
 *       chunk * P (small late-network maps make a deep enough product
 *       together), the chunks summed through the epilogue's residual, then
 *       transposed into dw.
 * dy is the B of both products, packed once per chunk of images by all
 * threads, every chunk of a pass (up to PASS_CAP bytes of packed dy) in
 * one parallel loop; then each task takes one chunk's
 * (dx) or every chunk's (dw) block of rows of K (whole input
 * channels for dx, as col2im needs every tap of a channel), makes its
 * columns in its own thread's buffer, sized to stay in L2, and runs a
 * one-thread GEMM on them, so the columns never go out to memory (one
 * pool-wide GEMM into a [K, P] buffer and a separate col2im pass took 3x
 * as long on ResNet-50's 3x3 convs). The weight is transposed once per
 * call into the dx products' row-major A. Depthwise convolutions (one
 * channel per group) have no product worth a GEMM and run the reference
 * kernel's direct loops, threaded over planes. */
#include <string.h>

#include "core/error.h"
#include "kernels/conv/conv_backward.h"
#include "kernels/gemm/gemm.h"
#include "kernels/shape/transpose.h"

/* GCC's -O2 vectorizes only loops that need no remainder; the rows here
 * are of any length (as kernels/conv/conv_dw.h) */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("vect-cost-model=dynamic")
#endif

enum {
	B_CAP = 1 << 20,     /* floats of packed dy: 4 MB, a chunk of images for dw */
	SLOT_CAP = 96 << 10, /* floats of a task's columns: 384 KB, in L2 beside its GEMM's blocks */
	DX_WIDTH = 512,      /* dy positions a dx GEMM takes at least, from several images of a small map */
	PASS_CAP = 16 << 20, /* bytes of packed dy a pass holds: ResNet-50's at batch 16 in one pass */
};

typedef struct plan {
	kconv_geom g;
	int64_t K, KK, P;  /* taps per group, per channel; dy positions per image */
	int64_t nb;        /* images per chunk */
	int64_t nsc;       /* chunks a pass packs together (PASS_CAP) */
	int64_t rows;      /* rows of K per task (dx: a multiple of KK, whole channels) */
	bool pointwise;    /* 1x1, stride 1, no padding: x (and dx) are the columns */
	size_t wt_bytes, b_bytes, dyc_bytes, slot_bytes, cols_floats, gemm_bytes;
} plan;

/* A task's one-thread GEMM workspace, for its m = rows rows or the last
 * task's K % rows: the GEMM's A block depends on m (m <= its tile rows
 * takes all of the depth at once), so a shorter product may need more. */
static size_t task_gemm_bytes(int64_t rows, int64_t K, int64_t N, int64_t depth)
{
	size_t a = kgemm_packed_workspace_bytes(rows, N, depth, 1);
	size_t b = K % rows ? kgemm_packed_workspace_bytes(K % rows, N, depth, 1) : 0;
	return k_align64(a > b ? a : b);
}

/* Images per chunk: at most `most` (at least 1), the N images split into
 * chunks as even as that allows (4 images of at most 3 a chunk: 2 and 2,
 * not 3 and a thin 1). */
static int64_t even_chunk(int64_t N, int64_t most)
{
	if (N <= 0)
		return 1;
	most = most < 1 ? 1 : k_min64(most, N);
	return k_cdiv(N, k_cdiv(N, most));
}

static bool make_plan(const k_call *call, bool weight, plan *p)
{
	kconv_geom *g = &p->g;
	if (!k_all_f32(call) || kconvb_geom(call, weight, g) != AIR_OK)
		return false;
	if (g->N < 0 || g->C <= 0 || g->O <= 0 || g->OH < 0 || g->OW < 0 || g->KH <= 0 || g->KW <= 0)
		return false;
	if (g->Cg == 1 && g->Og == 1) /* depthwise: the reference's direct loops */
		return false;
	p->KK = g->KH * g->KW;
	p->K = g->Cg * p->KK;
	p->P = g->OH * g->OW;
	p->pointwise = p->KK == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0;
	int64_t P1 = p->P > 0 ? p->P : 1, tr = kgemm_tile_rows();
	if (weight) {
		p->nb = even_chunk(g->N, B_CAP / (P1 * g->Og));
		int64_t depth = p->nb * P1;
		p->rows = SLOT_CAP / depth;
		if (p->rows >= tr)
			p->rows -= p->rows % tr;
		p->rows = p->rows < 1 ? 1 : k_min64(p->rows, p->K);
		/* at least four tasks a thread's worth where K allows */
		p->rows = k_min64(p->rows, k_cdiv(p->K, 8) > tr ? k_cdiv(k_cdiv(p->K, 8), tr) * tr : tr);
		p->rows = k_min64(p->rows, p->K);
		p->wt_bytes = k_align64(sizeof(float) * (size_t)(p->K * g->Og)); /* dw_g^T */
		p->dyc_bytes = 0;
		p->b_bytes = k_align64(kgemm_packed_b_size(depth, g->Og));
		p->cols_floats = p->pointwise && p->nb == 1 ? 0 : (size_t)(p->rows * depth);
		p->gemm_bytes = task_gemm_bytes(p->rows, p->K, g->Og, depth);
	} else {
		/* small maps: the columns of a few images side by side, so that
		 * each GEMM is wide enough to fill its tiles */
		p->nb = p->pointwise ? 1 : even_chunk(g->N, k_cdiv(DX_WIDTH, P1));
		int64_t width = p->nb * P1;
		int64_t ch = SLOT_CAP / (p->KK * width);
		ch = ch < 1 ? 1 : k_min64(ch, g->Cg);
		ch = k_min64(ch, k_cdiv(g->Cg, 8)); /* several tasks a thread */
		p->rows = ch * p->KK;
		p->wt_bytes = p->pointwise ? k_align64(sizeof(float) * (size_t)(g->O * p->K)) : 0; /* W^T per group */
		p->dyc_bytes = p->nb > 1 ? k_align64(sizeof(float) * (size_t)(g->Og * width)) : 0;
		p->b_bytes = p->pointwise ? 0 : p->dyc_bytes + k_align64(kgemm_packed_b_size(g->Og, width));
		p->cols_floats = p->pointwise ? 0 : (size_t)(p->rows * width);
		p->gemm_bytes = p->pointwise ? 0 : task_gemm_bytes(p->rows, p->K, width, g->Og);
	}
	p->slot_bytes = k_align64(sizeof(float) * p->cols_floats) + p->gemm_bytes;
	/* as many chunks a pass as PASS_CAP holds (at least one), the passes even */
	int64_t nchunks = k_cdiv(g->N > 0 ? g->N : 1, p->nb);
	p->nsc = p->b_bytes ? k_min64(nchunks, (int64_t)(PASS_CAP / p->b_bytes)) : nchunks;
	p->nsc = even_chunk(nchunks, p->nsc);
	return true;
}

static bool input_supports(const k_call *call)
{
	plan p;
	return make_plan(call, false, &p);
}

static bool weight_supports(const k_call *call)
{
	plan p;
	return make_plan(call, true, &p);
}

/* the weight's transpose or dw's sum, packed dy, a slot per thread (the
 * pointwise dx's pool-wide batched GEMM: one workspace for all threads) */
static size_t workspace(const k_call *call, bool weight, int nthreads)
{
	plan p;
	if (!make_plan(call, weight, &p))
		return 0;
	if (!weight && p.pointwise)
		return p.wt_bytes +
		       k_align64(kgemm_batched_workspace_bytes(p.g.N > 0 ? p.g.N : 1, p.K, p.P, p.g.Og, nthreads));
	return p.wt_bytes + (size_t)p.nsc * p.b_bytes + (size_t)nthreads * p.slot_bytes;
}

static size_t input_ws(const k_call *call, int nthreads)
{
	return workspace(call, false, nthreads);
}

static size_t weight_ws(const k_call *call, int nthreads)
{
	return workspace(call, true, nthreads);
}

/* ---- a pass: chunks of images whose dy is packed together ----------------- */

/* Chunk c of a pass of nimg images: images [c * nb, c * nb + chunk_images). */
static int64_t chunk_images(const plan *p, int64_t c, int64_t nimg)
{
	return k_min64(p->nb, nimg - c * p->nb);
}

/* Chunk c's memory in a pass: dx's gathered rows (when nb > 1), then the packed B. */
static char *chunk_mem(const plan *p, char *mem, int64_t c)
{
	return mem + (size_t)c * p->b_bytes;
}

static kgemm_packed_b *chunk_b(const plan *p, char *mem, int64_t c)
{
	return (kgemm_packed_b *)(chunk_mem(p, mem, c) + p->dyc_bytes);
}

/* One pass over nchunks chunks of one group: three parallel loops in all
 * (gather, pack, products) however many images, so that a call has a few
 * fork-joins rather than two or three per image: each join waits for the
 * slowest thread, and on a machine with more runnable threads than cores
 * that wait is a scheduler time slice (ResNet-50's 64-channel 3x3 dx at
 * batch 16 on 2 loaded cores: 7x its one-thread time with a join per image). */
typedef struct pass_job {
	const plan *p;
	const float *dy;  /* the pass's first image, the group's first channel */
	char *mem;        /* the chunks' gathered and packed dy */
	int64_t nimg, nchunks;
	int64_t cols_per_task, ptasks; /* pack: columns of B a task, tasks a chunk (dw: an image) */
	const float *w;   /* dx: W_g [Og][K] */
	float *dx;        /* dx: the pass's first image's group of channels */
	const float *x;   /* dw: the pass's first image's group of channels */
	float *acc;       /* dw: dw_g^T [K][Og] */
	bool first;       /* dw: the group's first pass: acc is written, not added to */
	char *slots;      /* a slot per thread */
} pass_job;

/* dx, nb > 1: row o of chunk c's images side by side, [Og][nbc * P] */
static void gather_task(void *ctx, int64_t t, int thread)
{
	(void)thread;
	const pass_job *j = ctx;
	const plan *p = j->p;
	int64_t c = t / p->g.Og, o = t % p->g.Og, nbc = chunk_images(p, c, j->nimg);
	float *out = (float *)chunk_mem(p, j->mem, c);
	const float *dy = j->dy + c * p->nb * p->g.O * p->P;
	for (int64_t i = 0; i < nbc; i++)
		memcpy(out + (o * nbc + i) * p->P, dy + (i * p->g.O + o) * p->P, sizeof(float) * (size_t)p->P);
}

/* One block of panels of one chunk's B: dx's is dy_g as it is, [Og rows]
 * [nbc * P columns]; dw's is its transpose, each image's P positions rows
 * of their own (a task an image and block of columns). */
static void pack_task(void *ctx, int64_t t, int thread)
{
	(void)thread;
	const pass_job *j = ctx;
	const plan *p = j->p;
	const kconv_geom *g = &p->g;
	bool weight = j->w == NULL;
	int64_t per_chunk = (weight ? p->nb : 1) * j->ptasks;
	int64_t c = t / per_chunk, r = t % per_chunk, img = r / j->ptasks, k = r % j->ptasks;
	int64_t nbc = chunk_images(p, c, j->nimg);
	int64_t cols = weight ? g->Og : nbc * p->P, c0 = k * j->cols_per_task, c1 = k_min64(cols, c0 + j->cols_per_task);
	if (img >= nbc || c0 >= cols)
		return;
	kgemm_packed_b *b = chunk_b(p, j->mem, c);
	const float *dy = j->dy + c * p->nb * g->O * p->P;
	if (weight)
		kgemm_pack_b_block(b, img * p->P, p->P, c0, c1, dy + (img * g->O + c0) * p->P, 1, p->P, NULL);
	else if (nbc > 1)
		kgemm_pack_b_block(b, 0, g->Og, c0, c1, (const float *)chunk_mem(p, j->mem, c) + c0, cols, 1, NULL);
	else
		kgemm_pack_b_block(b, 0, g->Og, c0, c1, dy + c0, p->P, 1, NULL);
}

/* The pass's dy packed as the B of this plan's products: dx's [Og][nbc * P]
 * per chunk (gathered first when nb > 1), dw's [nbc * P][Og]. */
static void pack_pass(const k_call *call, pass_job *j, bool weight)
{
	const plan *p = j->p;
	const kconv_geom *g = &p->g;
	if (!weight && p->nb > 1)
		rt_pool_run(call->pool, j->nchunks * g->Og, gather_task, j);
	for (int64_t c = 0; c < j->nchunks; c++) {
		int64_t nbc = chunk_images(p, c, j->nimg);
		kgemm_packed_b_init(chunk_mem(p, j->mem, c) + p->dyc_bytes, weight ? nbc * p->P : g->Og,
				    weight ? g->Og : nbc * p->P);
	}
	/* about 64 KiB of dy per task, whole panels */
	int64_t nr = kgemm_tile_cols(), per = weight ? p->P : g->Og;
	int64_t chunk = k_cdiv(16384 / (per > 0 ? per : 1), nr) * nr;
	j->cols_per_task = chunk < nr ? nr : chunk;
	j->ptasks = k_cdiv(weight ? g->Og : p->nb * p->P, j->cols_per_task);
	rt_pool_run(call->pool, j->nchunks * (weight ? p->nb : 1) * j->ptasks, pack_task, j);
}

/* ---- dx -------------------------------------------------------------------- */

/* dx plane ci of the group, from its KK rows of cols: zero, then each tap's
 * row added where that tap read the input. */
static void col2im_plane(const kconv_geom *g, const float *rows, int64_t ld, float *dx)
{
	memset(dx, 0, sizeof(float) * (size_t)(g->H * g->W));
	for (int64_t ki = 0; ki < g->KH; ki++) {
		int64_t oh0, oh1, offh = ki * g->dh - g->ph;
		kconv_valid_range(g->OH, g->H, g->sh, offh, &oh0, &oh1);
		for (int64_t kj = 0; kj < g->KW; kj++) {
			const float *r = rows + (ki * g->KW + kj) * ld;
			int64_t ow0, ow1, off = kj * g->dw - g->pw;
			kconv_valid_range(g->OW, g->W, g->sw, off, &ow0, &ow1);
			for (int64_t oh = oh0; oh < oh1; oh++) {
				float *restrict xr = dx + (oh * g->sh + offh) * g->W + off;
				const float *restrict cr = r + oh * g->OW;
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

/* A block of whole channels of one chunk: their rows of cols in this
 * thread's slot, then their dx planes. */
static void input_task(void *ctx, int64_t t, int thread)
{
	const pass_job *j = ctx;
	const plan *p = j->p;
	const kconv_geom *g = &p->g;
	int64_t ntr = k_cdiv(p->K, p->rows), c = t / ntr, r0 = t % ntr * p->rows, m = k_min64(p->rows, p->K - r0);
	int64_t nbc = chunk_images(p, c, j->nimg), width = nbc * p->P;
	float *cols = (float *)(j->slots + (size_t)thread * p->slot_bytes);
	void *gemm_ws = (char *)cols + k_align64(sizeof(float) * p->cols_floats);
	float *dx = j->dx + c * p->nb * g->C * g->H * g->W;
	/* A(k, o) = W_g[o][k], packed by the GEMM block by block */
	kgemm_f32_packed(m, width, g->Og, j->w + r0, 1, p->K, chunk_b(p, j->mem, c), cols, width, NULL, NULL, gemm_ws);
	for (int64_t ch = 0; ch < m / p->KK; ch++)
		for (int64_t img = 0; img < nbc; img++)
			col2im_plane(g, cols + ch * p->KK * width + img * p->P, width,
				     dx + (img * g->C + r0 / p->KK + ch) * g->H * g->W);
}

static air_status input_run(const k_call *call)
{
	plan p;
	if (!make_plan(call, false, &p))
		return air_error(AIR_INVALID_ARGUMENT, "conv2d_backward_input_gemm: unsupported call");
	const kconv_geom *g = &p.g;
	if (call->out[0].numel == 0)
		return AIR_OK;
	const float *dy = call->in[0].data, *w = call->in[1].data;
	float *dx = call->out[0].data;
	float *wt = call->workspace;
	char *rest = (char *)wt + p.wt_bytes;
	if (p.P == 0) { /* nothing reaches dx */
		memset(dx, 0, sizeof(float) * (size_t)call->out[0].numel);
		return AIR_OK;
	}
	if (p.pointwise) /* W_g [O/g, K] -> wt_g [K, O/g], the row-major A the batched GEMM takes */
		for (int64_t gi = 0; gi < g->G; gi++)
			ktranspose(w + gi * g->Og * p.K, p.K, wt + gi * p.K * g->Og, g->Og, g->Og, p.K);
	for (int64_t gi = 0; gi < g->G; gi++) {
		const float *a = p.pointwise ? wt + gi * p.K * g->Og : w + gi * g->Og * p.K;
		if (p.pointwise) { /* dx_g [Cg, P] = W_g^T @ dy_g: every image in one batched GEMM */
			kgemm_f32_batched(g->N, p.K, p.P, g->Og, a, 0, g->Og, 1, dy + gi * g->Og * p.P, g->O * p.P, p.P,
					  1, dx + gi * g->Cg * p.P, g->C * p.P, p.P, NULL, call->pool, rest);
			continue;
		}
		for (int64_t n0 = 0; n0 < g->N; n0 += p.nsc * p.nb) {
			int64_t nimg = k_min64(p.nsc * p.nb, g->N - n0);
			pass_job j = {.p = &p, .dy = dy + (n0 * g->O + gi * g->Og) * p.P, .mem = rest,
				      .nimg = nimg, .nchunks = k_cdiv(nimg, p.nb), .w = a,
				      .dx = dx + (n0 * g->C + gi * g->Cg) * g->H * g->W,
				      .slots = rest + (size_t)p.nsc * p.b_bytes};
			pack_pass(call, &j, false);
			rt_pool_run(call->pool, j.nchunks * k_cdiv(p.K, p.rows), input_task, &j);
		}
	}
	return AIR_OK;
}

/* ---- dw -------------------------------------------------------------------- */

/* Row r = (ci, ki, kj) of the columns of one image: at oh*OW + ow the
 * input that tap read there, 0 in the padding. */
static void im2col_row(const kconv_geom *g, const float *x, int64_t r, float *restrict out)
{
	int64_t KK = g->KH * g->KW, ci = r / KK, ki = r % KK / g->KW, kj = r % g->KW;
	int64_t oh0, oh1, offh = ki * g->dh - g->ph, ow0, ow1, off = kj * g->dw - g->pw;
	kconv_valid_range(g->OH, g->H, g->sh, offh, &oh0, &oh1);
	kconv_valid_range(g->OW, g->W, g->sw, off, &ow0, &ow1);
	x += ci * g->H * g->W;
	memset(out, 0, sizeof(float) * (size_t)(oh0 * g->OW));
	for (int64_t oh = oh0; oh < oh1; oh++) {
		float *restrict cr = out + oh * g->OW;
		const float *restrict xr = x + (oh * g->sh + offh) * g->W + off;
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
	memset(out + oh1 * g->OW, 0, sizeof(float) * (size_t)((g->OH - oh1) * g->OW));
}

/* A block of rows of K, over every chunk of the pass: the chunk's columns
 * for its images side by side in this thread's slot (or x itself, for one
 * image of a pointwise conv), times dy^T, added into those rows of acc.
 * The rows are the task's alone, so the chunks are summed without a join
 * between them. */
static void weight_task(void *ctx, int64_t t, int thread)
{
	const pass_job *j = ctx;
	const plan *p = j->p;
	const kconv_geom *g = &p->g;
	int64_t r0 = t * p->rows, m = k_min64(p->rows, p->K - r0);
	float *cols = (float *)(j->slots + (size_t)thread * p->slot_bytes);
	void *gemm_ws = (char *)cols + k_align64(sizeof(float) * p->cols_floats);
	for (int64_t c = 0; c < j->nchunks; c++) {
		int64_t nbc = chunk_images(p, c, j->nimg), depth = nbc * p->P;
		const float *x = j->x + c * p->nb * g->C * g->H * g->W, *a = x + r0 * p->P;
		if (p->cols_floats) {
			for (int64_t r = 0; r < m; r++)
				for (int64_t img = 0; img < nbc; img++)
					im2col_row(g, x + img * g->C * g->H * g->W, r0 + r, cols + r * depth + img * p->P);
			a = cols;
		}
		k_epilogue ep = k_epilogue_none();
		if (!(j->first && c == 0)) { /* add the earlier chunks' sum, read before written */
			ep.residual = j->acc + r0 * g->Og;
			ep.ld_residual = g->Og;
		}
		kgemm_f32_packed(m, g->Og, depth, a, depth, 1, chunk_b(p, j->mem, c), j->acc + r0 * g->Og, g->Og, &ep,
				 NULL, gemm_ws);
	}
}

static air_status weight_run(const k_call *call)
{
	plan p;
	if (!make_plan(call, true, &p))
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
	float *acc = call->workspace;
	char *bmem = (char *)acc + p.wt_bytes, *slots = bmem + (size_t)p.nsc * p.b_bytes;
	for (int64_t gi = 0; gi < g->G; gi++) {
		for (int64_t n0 = 0; n0 < g->N; n0 += p.nsc * p.nb) {
			int64_t nimg = k_min64(p.nsc * p.nb, g->N - n0);
			pass_job j = {.p = &p, .dy = dy + (n0 * g->O + gi * g->Og) * p.P, .mem = bmem, .nimg = nimg,
				      .nchunks = k_cdiv(nimg, p.nb), .x = x + (n0 * g->C + gi * g->Cg) * g->H * g->W,
				      .acc = acc, .first = n0 == 0, .slots = slots};
			pack_pass(call, &j, true);
			rt_pool_run(call->pool, k_cdiv(p.K, p.rows), weight_task, &j);
		}
		ktranspose(acc, g->Og, dw + gi * g->Og * p.K, p.K, p.K, g->Og);
	}
	return AIR_OK;
}

const k_kernel kfast_conv2d_backward_input_gemm = {"conv2d_backward_input_gemm", 0, input_supports, NULL, NULL,
						   input_ws, input_run, 0};
const k_kernel kfast_conv2d_backward_weight_gemm = {"conv2d_backward_weight_gemm", 0, weight_supports, NULL, NULL,
						    weight_ws, weight_run, 0};

/* conv_nhwc.c - fast channels-last (NHWC) convolution and pooling, f32.
 * In NHWC a convolution is a GEMM whose rows are output pixels and whose
 * columns are output channels: Y[N*OH*OW, O] = col[N*OH*OW, K] @ Wp[K, O]
 * with K = KH*KW*Cg ordered (ki, kj, c), so every tap of a row of col is a
 * contiguous run of channels copied from x. The weight is packed once at
 * compile time (kgemm_pack_b, one matrix per group), bias, residual and the
 * activation run in the GEMM's epilogue (bias per column), and the output
 * is NHWC as it stands.
 *   1x1, stride 1, unpadded: col is x itself: one GEMM, no copy.
 *   otherwise: col is built per task for a chunk of output pixels, sized
 *     to stay in L2, and multiplied at once (conv_nhwc_im2col.c).
 *   depthwise: a direct loop over taps, vectorized over channels.
 * The loops over channels (depthwise, pooling windows) are in
 * conv_nhwc_rows.h, compiled per ISA. */
#include "kernels/conv/conv_nhwc.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kernels/common/cpu.h"
#include "kernels/conv/conv_nhwc_ref.h"
#include "kernels/gemm/gemm.h"
#include "kernels/gemm/ukernel.h"
#define KNHWC_SUFFIX portable
#include "kernels/conv/conv_nhwc_rows.h"

typedef struct rows_fns {
	knhwc_dw_row_fn dw;
	knhwc_max_fn max;
	knhwc_avg_fn avg;
} rows_fns;

static rows_fns pick_rows(void)
{
	rows_fns f = {knhwc_dw_row__portable, knhwc_max__portable, knhwc_avg__portable};
#ifdef AIR_HAVE_X86
	unsigned isa = kcpu_features();
	const unsigned avx512 = KCPU_AVX512F | KCPU_AVX512BW | KCPU_AVX512VL;
	if ((isa & avx512) == avx512) {
		rows_fns a = {knhwc_dw_row__avx512, knhwc_max__avx512, knhwc_avg__avx512};
		f = a;
	} else if (isa & KCPU_AVX2) {
		rows_fns a = {knhwc_dw_row__avx2, knhwc_max__avx2, knhwc_avg__avx2};
		f = a;
	}
#endif
	return f;
}

static int is_transcendental(k_act act)
{
	return kgemm_act_is_transcendental(act);
}

void kconv_nhwc_operands(const k_call *call, const kconv_nhwc *c, const float **bias, const float **res)
{
	*bias = c->g.has_bias ? call->in[2].data : NULL;
	*res = c->has_residual ? call->in[call->n_in - 1].data : NULL;
}

air_status kconv_nhwc_weight_source(const k_call *call, int64_t O, const float **src, double **scale)
{
	const k_const_source *cs = &call->in_source[1];
	*src = cs->base;
	*scale = NULL;
	if (!cs->row_scale)
		return AIR_OK;
	*scale = malloc(sizeof(double) * (size_t)O);
	if (!*scale)
		return air_error(AIR_OUT_OF_MEMORY, "conv2d_nhwc: no memory for the weight's scale");
	memcpy(*scale, cs->row_scale, sizeof(double) * (size_t)O);
	return AIR_OK;
}

/* Shared by both GEMM kernels: f32, a constant weight of known size with
 * something to multiply (K == 0 or O == 0 is left to the reference). */
bool kconv_nhwc_gemm_ok(const k_call *call, kconv_nhwc *c)
{
	if (!k_all_f32(call) || !call->in_const || !call->in_const[1] || kconv_nhwc_make(call, c) != AIR_OK)
		return false;
	const kconv_geom *g = &c->g;
	return g->O > 0 && g->Cg > 0 && g->KH > 0 && g->KW > 0 && g->G >= 1 && g->O % g->G == 0;
}

/* ---- packed weights ------------------------------------------------------ */

/* The weight as GEMM B operands: per group, per block of nb output
 * channels, rows k = (ki * KW + kj) * Cg + c. Column blocks let the threads
 * split a small convolution's channels between them.
 *
 * Packed once at prepare time, or, when the compile asks for low memory
 * and the product is big enough that packing costs little next to it
 * (REPACK_MIN_ROWS), re-packed into the workspace on every call from the
 * caller's own weight (k_const_source: the module's parameter, scaled by the
 * folded batch norm). Then the model holds no copy of the weight at all:
 * for ResNet-50 at batch 16 that is 98 MiB, and the model ran as fast (a
 * packed copy of 98 MiB comes from memory each call too). */
typedef struct packed_w {
	int64_t G, nblk, nb, O;
	const float *src;    /* re-packed per call from here, or NULL */
	bool runtime;        /* the weight is a graph input: re-packed per call from call->in[1] */
	int64_t src_floats;  /* the weight's size */
	double *scale;       /* per output channel (owned), or NULL */
	kgemm_packed_b *b[]; /* packed once: [grp * nblk + block] */
} packed_w;

/* Output pixels from which re-packing per call costs little next to the
 * product: packing moves 8 bytes per weight (about 18 GB/s here), the
 * product does 2 * rows flops with it (about 175 GFLOP/s). At 784 pixels
 * (ResNet-50's 7x7 maps at batch 16) a conv alone, its packed copy hot in
 * L3, took 6-14% longer; inside the model no difference was measurable. */
enum { REPACK_MIN_ROWS = 512 };

/* Whether the blocks are packed per call (into the workspace) rather than
 * held: from a weight source, or from a weight that is a graph input. */
static bool repacks(const packed_w *pw)
{
	return pw->src || pw->runtime;
}

void kconv_nhwc_packed_release(void *p)
{
	packed_w *pw = p;
	if (!pw)
		return;
	if (!repacks(pw))
		for (int64_t i = 0; i < pw->G * pw->nblk; i++)
			kgemm_packed_b_free(pw->b[i]);
	free(pw->scale);
	free(pw);
}

size_t kconv_nhwc_prepared_bytes(const void *prepared, size_t *source_bytes)
{
	const packed_w *pw = prepared;
	*source_bytes = 0;
	if (!pw)
		return 0;
	if (pw->src && pw->scale)
		*source_bytes = sizeof(float) * (size_t)pw->src_floats;
	size_t bytes = sizeof *pw + (pw->scale ? sizeof(double) * (size_t)pw->O : 0);
	if (!repacks(pw))
		for (int64_t i = 0; i < pw->G * pw->nblk; i++)
			bytes += sizeof pw->b[0] + kgemm_packed_b_bytes(pw->b[i]);
	return bytes;
}

bool kconv_nhwc_repack_per_call(const k_call *call, const kconv_geom *g)
{
	return call->low_memory && call->in_source && call->in_source[1].base && g->N >= 0 && g->OH >= 0 &&
	       g->OW >= 0 && g->N * g->OH * g->OW >= REPACK_MIN_ROWS;
}

air_status kconv_nhwc_pack_weight(const k_call *call, const kconv_geom *g, int64_t nb_want, void **out)
{
	const int64_t taps = g->KH * g->KW, K = taps * g->Cg, Og = g->Og;
	const int64_t nb = nb_want < Og ? nb_want : Og, nblk = k_cdiv(Og, nb);
	/* a weight that is a graph input (a training step's parameter) is
	 * packed by every call, from wherever it is then */
	bool runtime = !call->in_const || !call->in_const[1];
	bool repack = runtime || kconv_nhwc_repack_per_call(call, g);
	packed_w *pw = calloc(1, sizeof *pw + sizeof pw->b[0] * (size_t)(repack ? 0 : g->G * nblk));
	if (!pw)
		return air_error(AIR_OUT_OF_MEMORY, "conv2d_nhwc: no memory to pack the weight");
	pw->G = g->G;
	pw->nblk = nblk;
	pw->nb = nb;
	pw->O = g->O;
	pw->runtime = runtime;
	if (runtime) {
		*out = pw;
		return AIR_OK;
	}
	if (repack) {
		pw->src_floats = g->O * K;
		air_status st = kconv_nhwc_weight_source(call, g->O, &pw->src, &pw->scale);
		if (st != AIR_OK) {
			free(pw);
			return st;
		}
		*out = pw;
		return AIR_OK;
	}
	const float *w = call->in[1].data;
	float *tmp = malloc(sizeof(float) * (size_t)(K * Og));
	if (!tmp) {
		free(pw);
		return air_error(AIR_OUT_OF_MEMORY, "conv2d_nhwc: no memory to pack the weight");
	}
	air_status st = AIR_OK;
	for (int64_t grp = 0; grp < g->G && st == AIR_OK; grp++) {
		for (int64_t o = 0; o < Og; o++)
			for (int64_t ci = 0; ci < g->Cg; ci++)
				for (int64_t t = 0; t < taps; t++)
					tmp[(t * g->Cg + ci) * Og + o] = w[((grp * Og + o) * g->Cg + ci) * taps + t];
		for (int64_t jb = 0; jb < nblk && st == AIR_OK; jb++)
			st = kgemm_pack_b(K, k_min64(nb, Og - jb * nb), tmp + jb * nb, Og, 1, &pw->b[grp * nblk + jb]);
	}
	free(tmp);
	if (st != AIR_OK) {
		kconv_nhwc_packed_release(pw);
		return st;
	}
	*out = pw;
	return AIR_OK;
}

/* Workspace of a re-packed weight: the block pointers, then the blocks. */
size_t kconv_nhwc_repack_bytes(const void *prepared, const kconv_geom *g)
{
	const packed_w *pw = prepared;
	if (!pw || !repacks(pw))
		return 0;
	const int64_t K = g->KH * g->KW * g->Cg;
	size_t bytes = k_align64(sizeof(kgemm_packed_b *) * (size_t)(pw->G * pw->nblk));
	for (int64_t jb = 0; jb < pw->nblk; jb++)
		bytes += (size_t)pw->G * kgemm_packed_b_size(K, k_min64(pw->nb, g->Og - jb * pw->nb));
	return bytes;
}

void kconv_nhwc_weight_blocking(const void *prepared, int64_t *nblk, int64_t *nb)
{
	const packed_w *pw = prepared;
	*nblk = pw->nblk;
	*nb = pw->nb;
}

typedef struct repack_job {
	const kconv_geom *g;
	const packed_w *pw;
	const float *src; /* the weight, [O, Cg, KH, KW] */
	kgemm_packed_b **b;
	int64_t taps, chunk, nchunk; /* columns per task, tasks per block */
} repack_job;

/* Channels of the weight's rows a task packs for every tap before moving
 * on: their taps x RUN_C floats per output channel stay in L1 meanwhile. */
enum { RUN_C = 16 };

/* Task t packs one column chunk of one block, every tap: the rows (c) of
 * tap (ki, kj) of output channel o are w[((grp * Og + o) * Cg + c) * taps
 * + tap], strided by taps down and Cg * taps across. Taps are the inner
 * loop over a run of channels, so each line of the weight comes from
 * memory once; with a task per tap, every task read all of the chunk's
 * lines for one float in taps of each. */
static void repack_task(void *ctx, int64_t t, int thread)
{
	const repack_job *j = ctx;
	const kconv_geom *g = j->g;
	const packed_w *pw = j->pw;
	int64_t q = t % j->nchunk, blk = t / j->nchunk;
	int64_t grp = blk / pw->nblk, jb = blk % pw->nblk, o0 = grp * g->Og + jb * pw->nb;
	int64_t cols = k_min64(pw->nb, g->Og - jb * pw->nb), c0 = q * j->chunk, c1 = k_min64(cols, c0 + j->chunk);
	if (c0 >= cols)
		return;
	const float *w = j->src + (o0 + c0) * g->Cg * j->taps;
	const double *scale = pw->scale ? pw->scale + o0 + c0 : NULL;
	for (int64_t ci = 0; ci < g->Cg; ci += RUN_C) {
		int64_t run = k_min64(RUN_C, g->Cg - ci);
		for (int64_t tap = 0; tap < j->taps; tap++)
			kgemm_pack_b_block(j->b[blk], tap * g->Cg + ci, run, c0, c1, w + ci * j->taps + tap, j->taps,
					   g->Cg * j->taps, scale);
	}
}

/* The B operands for this call: the prepacked ones, or the weight
 * re-packed into the front of the workspace (*ws moves past it). */
kgemm_packed_b *const *kconv_nhwc_weight_blocks(const k_call *call, const kconv_geom *g, char **ws)
{
	const packed_w *pw = call->prepared;
	if (!repacks(pw))
		return pw->b;
	const int64_t taps = g->KH * g->KW, K = taps * g->Cg, nblks = pw->G * pw->nblk;
	kgemm_packed_b **b = (kgemm_packed_b **)*ws;
	char *at = *ws + k_align64(sizeof *b * (size_t)nblks);
	for (int64_t i = 0; i < nblks; i++) {
		int64_t cols = k_min64(pw->nb, g->Og - (i % pw->nblk) * pw->nb);
		b[i] = kgemm_packed_b_init(at, K, cols);
		at += kgemm_packed_b_size(K, cols);
	}
	*ws = at;
	/* about 64 KiB of packed weight per task, whole panels */
	int64_t nr = kgemm_tile_cols(), chunk = k_cdiv(16384 / (K > 0 ? K : 1), nr) * nr;
	chunk = chunk < nr ? nr : chunk;
	const float *src = pw->runtime ? (const float *)call->in[1].data : pw->src;
	repack_job j = {g, pw, src, b, taps, chunk, k_cdiv(k_min64(pw->nb, g->Og), chunk)};
	rt_pool_run(call->pool, nblks * j.nchunk, repack_task, &j);
	/* so that products of 512 rows and more may take the AMX path
	 * (gemm/amx.h) as a packed copy's do: ResNet-50 at batch 16 403-408
	 * ms against 425 (python -m bench, 2 runs each); batch 1, whose 1x1
	 * convs at 56x56 take it, within noise (30.3-30.7 against 29.9-30.5) */
	for (int64_t i = 0; i < nblks; i++)
		kgemm_packed_b_check_range(b[i]);
	return b;
}

/* the 1x1 kernel runs one GEMM over every column */
static air_status packed_prepare_whole(const k_call *call, void **out)
{
	kconv_nhwc c;
	AIR_TRY(kconv_nhwc_make(call, &c));
	return kconv_nhwc_pack_weight(call, &c.g, INT64_MAX, out);
}

/* ---- 1x1, stride 1, unpadded: one GEMM on x ------------------------------ */

static bool is_pointwise(const kconv_geom *g)
{
	return g->KH == 1 && g->KW == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0 && g->G == 1;
}

static bool pw_supports(const k_call *call)
{
	kconv_nhwc c;
	return kconv_nhwc_gemm_ok(call, &c) && is_pointwise(&c.g);
}

static size_t pw_ws(const k_call *call, int nthreads)
{
	kconv_nhwc c;
	if (kconv_nhwc_make(call, &c) != AIR_OK)
		return 0;
	const kconv_geom *g = &c.g;
	return kconv_nhwc_repack_bytes(call->prepared, g) +
	       kgemm_packed_workspace_bytes(g->N * g->H * g->W, g->O, g->C, nthreads);
}

static air_status pw_run(const k_call *call)
{
	kconv_nhwc c;
	AIR_TRY(kconv_nhwc_make(call, &c));
	const kconv_geom *g = &c.g;
	if (call->out[0].numel == 0)
		return AIR_OK;
	char *ws = call->workspace;
	kgemm_packed_b *const *b = kconv_nhwc_weight_blocks(call, g, &ws);
	k_epilogue ep = k_epilogue_none();
	kconv_nhwc_operands(call, &c, &ep.bias_n, &ep.residual);
	ep.ld_residual = g->O;
	ep.act = c.act;
	kgemm_f32_packed(g->N * g->H * g->W, g->O, g->C, call->in[0].data, g->C, 1, b[0], call->out[0].data, g->O,
			 &ep, call->pool, ws);
	return AIR_OK;
}

/* K_INPLACE_RESIDUAL: the residual goes through the GEMM epilogue, which
 * folds it into C on the first K block, reading each tile of it just before
 * it writes that tile of C, through the pointer and row stride passed. */
const k_kernel kfast_conv2d_nhwc_1x1 = {"conv2d_nhwc_gemm_1x1", 0, pw_supports, packed_prepare_whole,
					kconv_nhwc_packed_release, pw_ws, pw_run, K_INPLACE_RESIDUAL};

/* ---- depthwise -------------------------------------------------------------- */

static bool dw_supports(const k_call *call)
{
	kconv_nhwc c;
	if (!k_all_f32(call) || !call->in_const || !call->in_const[1] || kconv_nhwc_make(call, &c) != AIR_OK)
		return false;
	const kconv_geom *g = &c.g;
	return g->C > 0 && g->G == g->C && g->O == g->C && g->Cg == 1 && g->KH > 0 && g->KW > 0;
}

/* The weight as [KH * KW][C]: a tap's weights over contiguous channels. */
static air_status dw_prepare(const k_call *call, void **out)
{
	const k_tensor *w = &call->in[1];
	int64_t C = w->dims[0], taps = w->dims[2] * w->dims[3];
	float *wt = malloc(sizeof(float) * (size_t)(C * taps > 0 ? C * taps : 1));
	if (!wt)
		return air_error(AIR_OUT_OF_MEMORY, "conv2d_nhwc: no memory to repack the weight");
	const float *src = w->data;
	for (int64_t ch = 0; ch < C; ch++)
		for (int64_t t = 0; t < taps; t++)
			wt[t * C + ch] = src[ch * taps + t];
	*out = wt;
	return AIR_OK;
}

typedef struct dw_job {
	kconv_nhwc c;
	rows_fns f;
	const float *x, *wt, *bias, *res;
	float *y;
	int64_t rows_per_task;
} dw_job;

static void dw_task(void *p, int64_t t, int thread)
{
	const dw_job *j = p;
	const kconv_geom *g = &j->c.g;
	const int64_t OH = g->OH, row = g->OW * g->C;
	int64_t r0 = t * j->rows_per_task, r1 = k_min64(g->N * OH, r0 + j->rows_per_task);
	for (int64_t r = r0; r < r1; r++) {
		const float *x = j->x + (r / OH) * g->H * g->W * g->C;
		float *y = j->y + r * row;
		j->f.dw(g, x, j->wt, j->bias, j->res ? j->res + r * row : NULL, y, r % OH, j->c.act);
		if (is_transcendental(j->c.act))
			kgemm_act_tile(y, row, 1, row, j->c.act);
	}
}

static air_status dw_run(const k_call *call)
{
	dw_job j;
	AIR_TRY(kconv_nhwc_make(call, &j.c));
	const kconv_geom *g = &j.c.g;
	if (call->out[0].numel == 0)
		return AIR_OK;
	j.f = pick_rows();
	j.x = call->in[0].data;
	j.wt = call->prepared;
	kconv_nhwc_operands(call, &j.c, &j.bias, &j.res);
	j.y = call->out[0].data;
	int64_t row = g->OW * g->C * g->KH * g->KW;
	j.rows_per_task = row > 0 ? k_cdiv(K_GRAIN, row) : 1;
	rt_pool_run(call->pool, k_cdiv(g->N * g->OH, j.rows_per_task), dw_task, &j);
	return AIR_OK;
}

const k_kernel kfast_conv2d_nhwc_depthwise = {"conv2d_nhwc_depthwise", 0, dw_supports, dw_prepare, free, NULL,
					      dw_run};

/* ---- pooling ------------------------------------------------------------------ */

typedef struct pool_job {
	rows_fns f;
	const float *x;
	float *y;
	int64_t H, W, C, OH, OW;
	int64_t kh, kw, sh, sw, ph, pw, dh, dw;
	int count_include_pad;
	int64_t divisor;
	int kind; /* 0 max, 1 avg, 2 adaptive */
	int64_t rows, rows_per_task;
} pool_job;

static void pool_window_max(const pool_job *j, const float *x, int64_t oh, int64_t ow, float *y)
{
	int64_t i0, i1, j0, j1, offh = oh * j->sh - j->ph, offw = ow * j->sw - j->pw;
	kconv_valid_range(j->kh, j->H, j->dh, offh, &i0, &i1);
	kconv_valid_range(j->kw, j->W, j->dw, offw, &j0, &j1);
	j->f.max(x, j->W, j->C, offh + i0 * j->dh, offh + i1 * j->dh, j->dh, offw + j0 * j->dw, offw + j1 * j->dw,
		 j->dw, y);
}

/* torch's avg_pool2d windows and divisors (as kernels/pool/pool_ref.c) */
static void pool_window_avg(const pool_job *j, const float *x, int64_t oh, int64_t ow, float *y)
{
	int64_t h0 = oh * j->sh - j->ph, h1 = k_min64(h0 + j->kh, j->H + j->ph);
	int64_t w0 = ow * j->sw - j->pw, w1 = k_min64(w0 + j->kw, j->W + j->pw);
	int64_t pool_size = (h1 - h0) * (w1 - w0);
	h0 = h0 < 0 ? 0 : h0;
	w0 = w0 < 0 ? 0 : w0;
	h1 = k_min64(h1, j->H);
	w1 = k_min64(w1, j->W);
	if (h0 >= h1 || w0 >= w1) {
		memset(y, 0, sizeof(float) * (size_t)j->C);
		return;
	}
	int64_t div = j->divisor ? j->divisor : j->count_include_pad ? pool_size : (h1 - h0) * (w1 - w0);
	j->f.avg(x, j->W, j->C, h0, h1, w0, w1, (float)(1.0 / (double)div), y);
}

static void pool_window_adaptive(const pool_job *j, const float *x, int64_t oh, int64_t ow, float *y)
{
	int64_t h0 = oh * j->H / j->OH, h1 = ((oh + 1) * j->H + j->OH - 1) / j->OH;
	int64_t w0 = ow * j->W / j->OW, w1 = ((ow + 1) * j->W + j->OW - 1) / j->OW;
	j->f.avg(x, j->W, j->C, h0, h1, w0, w1, (float)(1.0 / (double)((h1 - h0) * (w1 - w0))), y);
}

static void pool_task(void *p, int64_t t, int thread)
{
	const pool_job *j = p;
	int64_t r0 = t * j->rows_per_task, r1 = k_min64(j->rows, r0 + j->rows_per_task);
	for (int64_t r = r0; r < r1; r++) {
		int64_t n = r / j->OH, oh = r % j->OH;
		const float *x = j->x + n * j->H * j->W * j->C;
		for (int64_t ow = 0; ow < j->OW; ow++) {
			float *y = j->y + (r * j->OW + ow) * j->C;
			if (j->kind == 0)
				pool_window_max(j, x, oh, ow, y);
			else if (j->kind == 1)
				pool_window_avg(j, x, oh, ow, y);
			else
				pool_window_adaptive(j, x, oh, ow, y);
		}
	}
}

static air_status pool_run(const k_call *call, int kind)
{
	const k_tensor *x = &call->in[0], *y = &call->out[0];
	pool_job j;
	memset(&j, 0, sizeof j);
	j.kind = kind;
	j.f = pick_rows();
	j.x = x->data;
	j.y = y->data;
	j.H = x->dims[1];
	j.W = x->dims[2];
	j.C = x->dims[3];
	j.OH = y->dims[1];
	j.OW = y->dims[2];
	if (kind != 2) {
		static const int64_t ones[2] = {1, 1}, zeros[2] = {0, 0};
		int64_t k[2], s[2], pd[2], d[2] = {1, 1};
		kref_pair(call->attrs[0].ints, call->attrs[0].n, ones, k);
		kref_pair(call->attrs[1].ints, call->attrs[1].n, k, s);
		kref_pair(call->attrs[2].ints, call->attrs[2].n, zeros, pd);
		if (kind == 0)
			kref_pair(call->attrs[3].ints, call->attrs[3].n, ones, d);
		j.kh = k[0], j.kw = k[1], j.sh = s[0], j.sw = s[1];
		j.ph = pd[0], j.pw = pd[1], j.dh = d[0], j.dw = d[1];
		if (kind == 1) {
			j.count_include_pad = call->attrs[4].i != 0;
			j.divisor = call->attrs[5].i;
		}
	} else if (y->numel > 0 && (j.H == 0 || j.W == 0)) {
		return air_error(AIR_SHAPE_MISMATCH, "adaptive_avg_pool2d_nhwc: cannot pool an empty %s",
				 j.H == 0 ? "height" : "width");
	}
	if (y->numel == 0)
		return AIR_OK;
	int64_t row = j.OW * j.C;
	j.rows = y->dims[0] * j.OH;
	j.rows_per_task = k_cdiv(K_GRAIN, row > 0 ? row : 1);
	int64_t ntasks = k_cdiv(j.rows, j.rows_per_task);
	rt_pool_run(call->pool, ntasks, pool_task, &j);
	return AIR_OK;
}

static bool pool_supports(const k_call *call)
{
	return call->in[0].dtype == AIR_F32 && call->out[0].dtype == AIR_F32;
}

static air_status max_run(const k_call *call)
{
	return pool_run(call, 0);
}

static air_status avg_run(const k_call *call)
{
	return pool_run(call, 1);
}

static air_status adaptive_run(const k_call *call)
{
	return pool_run(call, 2);
}

const k_kernel kfast_max_pool2d_nhwc = {"max_pool2d_nhwc_channels", 0, pool_supports, NULL, NULL, NULL, max_run};
const k_kernel kfast_avg_pool2d_nhwc = {"avg_pool2d_nhwc_channels", 0, pool_supports, NULL, NULL, NULL, avg_run};
const k_kernel kfast_adaptive_avg_pool2d_nhwc = {"adaptive_avg_pool2d_nhwc_channels", 0, pool_supports, NULL,
						 NULL, NULL, adaptive_run};

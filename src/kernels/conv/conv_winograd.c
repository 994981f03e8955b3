/* conv_winograd.c - channels-last 3x3 stride-1 convolution by Winograd's
 * F(2x2, 3x3): each 2x2 block of output pixels (a tile) comes from the 4x4
 * input patch under it, and in the transformed domain the 9 taps become 16
 * elementwise products, so a tile costs 16 multiply-adds per channel pair
 * instead of 36 (2.25x fewer).
 *   weight:          U = G g G^T (4x4 per (o, c)), in double, packed as 16
 *                    GEMM B operands [C x O]; once at prepare, or on every
 *                    call into the workspace when the im2col kernel would
 *                    re-pack its weight (low memory: kconv_nhwc_repack_per_call);
 *   per chunk of tiles: V = B^T d B per (tile, c), 16 GEMMs M_k = V_k U_k,
 *                    then Y = A^T M A per (tile, o) with bias, residual and
 *                    the activation, into NHWC y. V and M are [tiles][16]
 *                    [channels], so each tile's transforms touch one row,
 *                    and a chunk stays in its thread's L2.
 * The tile transforms are in conv_winograd_tiles.h, compiled per ISA. Only
 * the simple activations (min/max) are fused here. The transforms multiply
 * by 0, +-1 and 1/2 only; ResNet-50's output moved by at most 5e-5 from the
 * im2col kernels' (8e-5 from eager's either way).
 * ResNet-50 shapes at batch 1 (bench_conv --layout, 2 threads, Zen 3), ms,
 * im2col -> Winograd: 64 at 56x56 1.49 -> 0.85, 128 at 28x28 1.30 -> 0.75,
 * 256 at 14x14 1.29 -> 0.70; 512 at 7x7 (16 tiles) 1.32 -> 1.29, so under
 * WINO_MIN_TILES it stays im2col. Few tiles with a big weight split the
 * GEMMs by output channels instead of the tiles by chunks (WINO_SPLIT_*). */
#include "kernels/conv/conv_nhwc.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kernels/common/cpu.h"
#include "kernels/conv/conv_nhwc_ref.h"
#include "kernels/gemm/gemm.h"
#include "kernels/gemm/ukernel.h"
#define KWINO_SUFFIX portable
#include "kernels/conv/conv_winograd_tiles.h"

/* Floats of one chunk's V and M together (1 MiB): as im2col's chunk. */
enum { WINO_CHUNK_FLOATS = 262144 };

/* Fewer tiles than this (ResNet-50's 7x7 maps at batch 1: 16) leave the
 * 16 GEMMs too few rows to beat im2col (1.29 against 1.32 ms). */
enum { WINO_MIN_TILES = 32 };

/* Transforming a weight costs more than packing it (about 25 ns per
 * (o, c) pair and thread: 2% of ResNet-50's time at batch 1 and at batch
 * 16 when every Winograd conv did it per call); below this many bytes of U
 * (256 x 256 channels) the copy is kept even in low memory: ResNet-50's
 * 64- and 128-channel ones hold 3.9 MB in all. */
enum { WINO_REPACK_MIN_BYTES = 4 << 20 };

/* The transformed weight: packed once, or (low memory, as the im2col
 * kernel's weight: kconv_nhwc_repack_per_call, and a big one) transformed
 * and packed into the workspace on every call from the caller's weight
 * and scale. */
typedef struct wino_w {
	int64_t C, O;
	const float *src; /* [O, C, 3, 3], transformed per call, or NULL */
	double *scale;    /* per output channel (owned), or NULL */
	kgemm_packed_b *u[16]; /* packed once: U_k [C x O] */
} wino_w;

static void wino_release(void *p)
{
	wino_w *w = p;
	if (!w)
		return;
	for (int k = 0; k < 16; k++)
		kgemm_packed_b_free(w->u[k]);
	free(w->scale);
	free(w);
}

size_t kconv_winograd_prepared_bytes(const void *prepared, size_t *source_bytes)
{
	const wino_w *w = prepared;
	*source_bytes = w && w->src && w->scale ? sizeof(float) * (size_t)(w->O * w->C * 9) : 0;
	size_t bytes = w ? sizeof *w + (w->scale ? sizeof(double) * (size_t)w->O : 0) : 0;
	for (int k = 0; w && k < 16; k++)
		bytes += kgemm_packed_b_bytes(w->u[k]);
	return bytes;
}

/* U = G g G^T for one 3x3 kernel g (row-major) into u[k * stride] for k =
 * i * 4 + j; G's rows: [1 0 0], [1/2 1/2 1/2], [1/2 -1/2 1/2], [0 0 1]. In
 * float, the same operations at prepare and per call (bit for bit the same
 * U either way); *s (if s) scales g first as fold_batchnorm folds it (in
 * double, rounded once). */
static void weight_tile(const float *g, const double *s, float *u, int64_t stride)
{
	float w[9], t[4][3];
	for (int e = 0; e < 9; e++)
		w[e] = s ? (float)((double)g[e] * *s) : g[e];
	for (int j = 0; j < 3; j++) {
		float g0 = w[j], g1 = w[3 + j], g2 = w[6 + j];
		t[0][j] = g0;
		t[1][j] = 0.5f * (g0 + g1 + g2);
		t[2][j] = 0.5f * (g0 - g1 + g2);
		t[3][j] = g2;
	}
	for (int i = 0; i < 4; i++) {
		u[(i * 4 + 0) * stride] = t[i][0];
		u[(i * 4 + 1) * stride] = 0.5f * (t[i][0] + t[i][1] + t[i][2]);
		u[(i * 4 + 2) * stride] = 0.5f * (t[i][0] - t[i][1] + t[i][2]);
		u[(i * 4 + 3) * stride] = t[i][2];
	}
}

static bool wino_geometry(const k_call *call, kconv_nhwc *c)
{
	if (!k_all_f32(call) || !call->in_const || !call->in_const[1] || kconv_nhwc_make(call, c) != AIR_OK)
		return false;
	const kconv_geom *g = &c->g;
	return g->KH == 3 && g->KW == 3 && g->sh == 1 && g->sw == 1 && g->dh == 1 && g->dw == 1 && g->G == 1 &&
	       g->C > 0 && g->O > 0 && !kgemm_act_is_transcendental(c->act);
}

static bool wino_supports(const k_call *call)
{
	kconv_nhwc c;
	if (!wino_geometry(call, &c))
		return false;
	const kconv_geom *g = &c.g;
	/* a batch unknown at compile time (-1: dynamo's automatic dynamic
	 * shapes make it symbolic once a second batch size is seen) is at
	 * least 1; ResNet-50 at batch 2 with a symbolic batch ran 65.7 ms
	 * against 61.1 static when it was refused */
	const int64_t N = g->N < 0 ? 1 : g->N;
	/* an unknown image size (dynamic=True) is taken as big enough: for
	 * ResNet-50 at 224x224 that loses on layer 4's two 7x7 maps at batch 1
	 * (1.69 against 1.08 ms each with cold weights, the transformed weight
	 * being 16/9 of the weight) but gains more on the 56x56 to 14x14 ones:
	 * 36.3-37.4 -> 32.9-34.6 ms at batch 1, 64.7 -> 59.5 at batch 2
	 * (kernel time, torchair.report.profile) */
	if (g->OH < 0 || g->OW < 0)
		return true;
	return N * ((g->OH + 1) / 2) * ((g->OW + 1) / 2) >= WINO_MIN_TILES;
}

static air_status wino_prepare(const k_call *call, void **out)
{
	kconv_nhwc c;
	AIR_TRY(kconv_nhwc_make(call, &c));
	const int64_t C = c.g.C, O = c.g.O;
	wino_w *ww = calloc(1, sizeof *ww);
	if (!ww)
		return air_error(AIR_OUT_OF_MEMORY, "conv2d_nhwc: no memory for the weight");
	ww->C = C;
	ww->O = O;
	if (kconv_nhwc_repack_per_call(call, &c.g) && 16 * C * O * (int64_t)sizeof(float) >= WINO_REPACK_MIN_BYTES) {
		air_status st = kconv_nhwc_weight_source(call, O, &ww->src, &ww->scale);
		if (st != AIR_OK) {
			free(ww);
			return st;
		}
		*out = ww;
		return AIR_OK;
	}
	const float *w = call->in[1].data; /* [O, C, 3, 3] */
	float *u = malloc(sizeof(float) * 16 * (size_t)(C * O)); /* [16][C][O] */
	if (!u) {
		free(ww);
		return air_error(AIR_OUT_OF_MEMORY, "conv2d_nhwc: no memory to transform the weight");
	}
	for (int64_t o = 0; o < O; o++)
		for (int64_t ci = 0; ci < C; ci++)
			weight_tile(w + (o * C + ci) * 9, NULL, u + ci * O + o, C * O);
	air_status st = AIR_OK;
	for (int k = 0; k < 16 && st == AIR_OK; k++)
		st = kgemm_pack_b(C, O, u + (size_t)k * (size_t)(C * O), O, 1, &ww->u[k]);
	free(u);
	if (st != AIR_OK) {
		wino_release(ww);
		return st;
	}
	*out = ww;
	return AIR_OK;
}

/* Workspace of a weight transformed per call: the 16 packed U_k. */
static size_t transform_bytes(const wino_w *w)
{
	return w && w->src ? 16 * kgemm_packed_b_size(w->C, w->O) : 0;
}

typedef struct transform_job {
	const wino_w *w;
	kgemm_packed_b *u[16];
} transform_job;

/* Task t: the panel of output channels [t * nr, +nr), transformed straight
 * into the 16 U_k's panels (zero past O). */
static void transform_task(void *ctx, int64_t t, int thread)
{
	const transform_job *j = ctx;
	const wino_w *w = j->w;
	const int64_t nr = kgemm_tile_cols(), o0 = t * nr, cols = k_min64(nr, w->O - o0);
	float *panel[16];
	for (int k = 0; k < 16; k++)
		panel[k] = kgemm_packed_b_panel(j->u[k], o0);
	/* 16 input channels at a time, so the 16 rows of w being read and the
	 * 16 panels' lines being written stay few (measured: no faster than
	 * channel by channel; the scalar math, about 25 ns per (o, c) pair,
	 * is the cost) */
	for (int64_t c0 = 0; c0 < w->C; c0 += 16) {
		int64_t c1 = k_min64(w->C, c0 + 16);
		for (int64_t q = 0; q < nr; q++) {
			const double *s = w->scale && q < cols ? &w->scale[o0 + q] : NULL;
			for (int64_t ci = c0; ci < c1; ci++) {
				float u[16] = {0};
				if (q < cols)
					weight_tile(w->src + ((o0 + q) * w->C + ci) * 9, s, u, 1);
				for (int k = 0; k < 16; k++)
					panel[k][ci * nr + q] = u[k];
			}
		}
	}
}

/* The packed U_k for this call: prepared ones, or transformed into the
 * front of the workspace (*ws moves past them). */
static kgemm_packed_b *const *weight_blocks(const k_call *call, const wino_w *w, transform_job *j, char **ws)
{
	if (!w->src)
		return w->u;
	char *at = *ws;
	for (int k = 0; k < 16; k++) {
		j->u[k] = kgemm_packed_b_init(at, w->C, w->O);
		at += kgemm_packed_b_size(w->C, w->O);
	}
	j->w = w;
	*ws = at;
	rt_pool_run(call->pool, k_cdiv(w->O, kgemm_tile_cols()), transform_task, j);
	return j->u;
}

/* Floats per tile in V (channels C) or M (O): 16 transforms, plus a cache
 * line so that the GEMMs' rows are not a power of two apart (4 KiB apart,
 * 64 channels, they would all fall in one L1 set). */
static int64_t wino_row(int64_t channels)
{
	return 16 * channels + 16;
}

typedef struct wino_plan {
	int64_t th, tw, T; /* tiles down, across, in all */
	int64_t tc, nchunk;
	size_t v_bytes, m_bytes, zero_bytes, slot_bytes;
	/* split by output channels (see WINO_SPLIT_*): V and M of all tiles
	 * shared, the 16 GEMMs split into blocks of ob output channels */
	int split_o;
	int64_t ob, nob;
	size_t gemm_bytes; /* per thread */
} wino_plan;

/* Few tiles and a big weight (ResNet-50's 256-channel convs at 14x14,
 * batch 1: 49 tiles, 4 MiB of U): chunks of tiles each ran all 16 GEMMs
 * over the whole of U, so U was read from memory once per chunk (5 chunks
 * of 12 tiles there). With at least WINO_SPLIT_MIN_U_BYTES of U and V and M
 * of all tiles within WINO_SPLIT_MAX_VM_BYTES, the input transform runs for
 * every tile first, then each task does one GEMM on one block of output
 * channels (one read of its part of U), then the output transform. Lone
 * convs on Sapphire Rapids (torchair.report.profile), chunks -> split: 512
 * channels at 14x14 (3.2 MB of V and M) 2.18-2.26 -> 1.81-1.82 ms, 256 at
 * 28x28 (6.4 MB) 2.85-2.89 -> 2.65-2.81 ms. */
enum { WINO_SPLIT_MIN_U_BYTES = 2 << 20, WINO_SPLIT_MAX_VM_BYTES = 8 << 20, WINO_SPLIT_TILES_PER_TASK = 4 };

static wino_plan make_plan(const kconv_geom *g, int nthreads)
{
	wino_plan p;
	const int64_t mr = kgemm_tile_rows();
	p.th = (g->OH + 1) / 2;
	p.tw = (g->OW + 1) / 2;
	p.T = g->N * p.th * p.tw;
	int64_t tc = WINO_CHUNK_FLOATS / (wino_row(g->C) + wino_row(g->O));
	/* at least 4 chunks per thread when there are tiles enough */
	int64_t want = k_cdiv(p.T, 4 * (int64_t)(nthreads < 1 ? 1 : nthreads));
	tc = tc < want ? tc : want;
	tc = k_cdiv(tc < 1 ? 1 : tc, mr) * mr;
	p.tc = tc;
	p.nchunk = k_cdiv(p.T, tc);
	p.v_bytes = k_align64(sizeof(float) * (size_t)(tc * wino_row(g->C)));
	p.m_bytes = k_align64(sizeof(float) * (size_t)(tc * wino_row(g->O)));
	p.zero_bytes = k_align64(sizeof(float) * (size_t)g->C);
	p.slot_bytes = p.v_bytes + p.m_bytes + p.zero_bytes + k_align64(kgemm_packed_workspace_bytes(tc, g->O, g->C, 1));
	const double u_bytes = 16.0 * (double)g->C * (double)g->O * sizeof(float);
	const double vm_bytes = (double)p.T * (double)(wino_row(g->C) + wino_row(g->O)) * sizeof(float);
	p.split_o = p.nchunk > 1 && u_bytes >= WINO_SPLIT_MIN_U_BYTES && vm_bytes <= WINO_SPLIT_MAX_VM_BYTES;
	p.ob = p.nob = 0;
	p.gemm_bytes = 0;
	if (p.split_o) {
		/* two tile panels of channels a block: 4 blocks x 16 GEMMs = 64
		 * tasks at O = 256 */
		const int64_t nr = kgemm_tile_cols();
		p.ob = k_min64(2 * nr, k_cdiv(g->O, nr) * nr);
		p.nob = k_cdiv(g->O, p.ob);
		p.v_bytes = k_align64(sizeof(float) * (size_t)(p.T * wino_row(g->C)));
		p.m_bytes = k_align64(sizeof(float) * (size_t)(p.T * wino_row(g->O)));
		p.gemm_bytes = k_align64(kgemm_packed_workspace_bytes(p.T, p.ob, g->C, 1));
	}
	return p;
}

/* Workspace after the per-call U (if any): per-thread slots, or (split_o)
 * V, M, the zero row, then per-thread GEMM workspaces. */
static size_t plan_bytes(const wino_plan *p, int nthreads)
{
	if (p->split_o)
		return p->v_bytes + p->m_bytes + p->zero_bytes + (size_t)nthreads * p->gemm_bytes;
	return (size_t)nthreads * p->slot_bytes;
}

static size_t wino_ws(const k_call *call, int nthreads)
{
	kconv_nhwc c;
	if (kconv_nhwc_make(call, &c) != AIR_OK)
		return 0;
	nthreads = nthreads < 1 ? 1 : nthreads;
	wino_plan p = make_plan(&c.g, nthreads);
	return transform_bytes(call->prepared) + plan_bytes(&p, nthreads);
}

typedef struct wino_job {
	kconv_nhwc c;
	wino_plan p;
	kgemm_packed_b *const *u; /* U_k */
	const float *x, *bias, *res;
	float *y;
	char *ws;
	kwino_input_fn input;
	kwino_output_fn output;
} wino_job;

/* The ISA's tile transforms, chosen once. */
static void pick_transforms(kwino_input_fn *in, kwino_output_fn *out)
{
	*in = kwino_input__portable;
	*out = kwino_output__portable;
#ifdef AIR_HAVE_X86
	if (kcpu_features() & KCPU_AVX2) {
		*in = kwino_input__avx2;
		*out = kwino_output__avx2;
	}
#endif
}

/* Tile t's row of V, from its 4x4 input patch (pixels outside x: the
 * zero row). */
static void input_transform(const wino_job *j, int64_t t, const float *zero, float *v)
{
	const kconv_geom *g = &j->c.g;
	const int64_t C = g->C, per_img = j->p.th * j->p.tw;
	const int64_t n = t / per_img, rest = t % per_img, ih0 = (rest / j->p.tw) * 2 - g->ph,
		      iw0 = (rest % j->p.tw) * 2 - g->pw;
	const float *d[16];
	for (int i = 0; i < 4; i++)
		for (int jj = 0; jj < 4; jj++) {
			int64_t ih = ih0 + i, iw = iw0 + jj;
			d[i * 4 + jj] = ih < 0 || ih >= g->H || iw < 0 || iw >= g->W
						? zero
						: j->x + ((n * g->H + ih) * g->W + iw) * C;
		}
	j->input(d, C, v);
}

/* Tile t's 2x2 output pixels (those inside y), from its row of M. */
static void output_transform(const wino_job *j, int64_t t, const float *m)
{
	const kconv_geom *g = &j->c.g;
	const int64_t O = g->O, per_img = j->p.th * j->p.tw;
	const int64_t n = t / per_img, rest = t % per_img, oh0 = (rest / j->p.tw) * 2, ow0 = (rest % j->p.tw) * 2;
	float *y[4];
	const float *res[4];
	for (int q = 0; q < 4; q++) {
		int64_t oh = oh0 + q / 2, ow = ow0 + q % 2;
		bool in = oh < g->OH && ow < g->OW;
		int64_t at = ((n * g->OH + oh) * g->OW + ow) * O;
		y[q] = in ? j->y + at : NULL;
		res[q] = in && j->res ? j->res + at : NULL;
	}
	j->output(m, O, y, res, j->bias, j->c.act);
}

static void wino_task(void *ctx, int64_t chunk, int thread)
{
	const wino_job *j = ctx;
	const kconv_geom *g = &j->c.g;
	const wino_plan *p = &j->p;
	int64_t t0 = chunk * p->tc, rows = k_min64(p->tc, p->T - t0);
	if (rows <= 0)
		return;
	char *slot = j->ws + (size_t)thread * p->slot_bytes;
	float *v = (float *)slot, *m = (float *)(slot + p->v_bytes), *zero = (float *)(slot + p->v_bytes + p->m_bytes);
	void *gemm_ws = slot + p->v_bytes + p->m_bytes + p->zero_bytes;
	const int64_t C = g->C, O = g->O;
	memset(zero, 0, sizeof(float) * (size_t)C);
	/* V and M are [tiles][16][channels]: a tile's transforms are one
	 * contiguous row, and GEMM k reads and writes every 16th block of it */
	const int64_t lv = wino_row(C), lm = wino_row(O);
	for (int64_t r = 0; r < rows; r++)
		input_transform(j, t0 + r, zero, v + r * lv);
	/* each GEMM prefetches the next one's U_k as it ends (k_epilogue.next_b) */
	k_epilogue ep = k_epilogue_none();
	for (int k = 0; k < 16; k++) {
		ep.next_b = k < 15 ? kgemm_packed_b_panel(j->u[k + 1], 0) : NULL;
		ep.next_b_bytes = k < 15 ? (int64_t)kgemm_packed_b_bytes(j->u[k + 1]) : 0;
		kgemm_f32_packed(rows, O, C, v + k * C, lv, 1, j->u[k], m + k * O, lm, &ep, NULL, gemm_ws);
	}
	for (int64_t r = 0; r < rows; r++)
		output_transform(j, t0 + r, m + r * lm);
}

/* ---- split by output channels (wino_plan.split_o) ----------------------- */

typedef struct split_job {
	const wino_job *j;
	float *v, *m;
	const float *zero;
	char *gemm_ws; /* per thread: plan.gemm_bytes */
	int output;    /* the transform phase being run: 0 input, 1 output */
	int nthreads;
} split_job;

/* Tiles [4t, 4t + 4): their input transforms into V, or (output) their
 * output transforms from M. */
static void split_transform_task(void *ctx, int64_t t, int thread)
{
	(void)thread;
	const split_job *s = ctx;
	const int64_t lv = wino_row(s->j->c.g.C), lm = wino_row(s->j->c.g.O);
	const int64_t t0 = t * WINO_SPLIT_TILES_PER_TASK, t1 = k_min64(s->j->p.T, t0 + WINO_SPLIT_TILES_PER_TASK);
	for (int64_t r = t0; r < t1; r++) {
		if (s->output)
			output_transform(s->j, r, s->m + r * lm);
		else
			input_transform(s->j, r, s->zero, s->v + r * lv);
	}
}

/* Task t: GEMM k = t / nob on output channels [ob * (t % nob), +ob). */
static void split_gemm_task(void *ctx, int64_t t, int thread)
{
	const split_job *s = ctx;
	const wino_job *j = s->j;
	const wino_plan *p = &j->p;
	const int64_t C = j->c.g.C, O = j->c.g.O, k = t / p->nob, o0 = (t % p->nob) * p->ob;
	const int64_t lv = wino_row(C), lm = wino_row(O);
	/* the thread's next task is likely t + nthreads (the pool hands tasks
	 * out in turn): its block of U is prefetched as this GEMM ends. Without
	 * it, a task's two panels (K = 256) came cold from memory with no
	 * prefetch at all: 256 channels at 14x14 ran 0.48 ms hot, 0.83 cold */
	k_epilogue ep = k_epilogue_none();
	const int64_t t2 = t + s->nthreads;
	if (t2 < 16 * p->nob) {
		const int64_t k2 = t2 / p->nob, o2 = (t2 % p->nob) * p->ob;
		ep.next_b = kgemm_packed_b_panel(j->u[k2], o2);
		ep.next_b_bytes = (int64_t)sizeof(float) * k_min64(p->ob, O - o2) * C;
	}
	kgemm_f32_packed_cols(p->T, k_min64(p->ob, O - o0), C, s->v + k * C, lv, 1, j->u[k], o0, s->m + k * O + o0, lm,
			      &ep, NULL, s->gemm_ws + (size_t)thread * p->gemm_bytes);
}

static void wino_run_split(const wino_job *j, rt_pool *pool)
{
	const wino_plan *p = &j->p;
	split_job s;
	s.j = j;
	s.v = (float *)j->ws;
	s.m = (float *)(j->ws + p->v_bytes);
	float *zero = (float *)(j->ws + p->v_bytes + p->m_bytes);
	memset(zero, 0, sizeof(float) * (size_t)j->c.g.C);
	s.zero = zero;
	s.gemm_ws = j->ws + p->v_bytes + p->m_bytes + p->zero_bytes;
	s.nthreads = rt_pool_size(pool);
	const int64_t tile_tasks = k_cdiv(p->T, WINO_SPLIT_TILES_PER_TASK);
	s.output = 0;
	rt_pool_run(pool, tile_tasks, split_transform_task, &s);
	rt_pool_run(pool, 16 * p->nob, split_gemm_task, &s);
	s.output = 1;
	rt_pool_run(pool, tile_tasks, split_transform_task, &s);
}

static air_status wino_run(const k_call *call)
{
	wino_job j;
	AIR_TRY(kconv_nhwc_make(call, &j.c));
	const kconv_geom *g = &j.c.g;
	if (call->out[0].numel == 0)
		return AIR_OK;
	j.p = make_plan(g, rt_pool_size(call->pool));
	j.x = call->in[0].data;
	kconv_nhwc_operands(call, &j.c, &j.bias, &j.res);
	j.y = call->out[0].data;
	j.ws = call->workspace;
	transform_job tj;
	j.u = weight_blocks(call, call->prepared, &tj, &j.ws);
	pick_transforms(&j.input, &j.output);
	if (j.p.split_o)
		wino_run_split(&j, call->pool);
	else
		rt_pool_run(call->pool, j.p.nchunk, wino_task, &j);
	return AIR_OK;
}

/* K_INPLACE_RESIDUAL: the output transform reads each output element's
 * residual just before it writes that element. */
const k_kernel kfast_conv2d_nhwc_winograd = {"conv2d_nhwc_winograd_f2x3", 0, wino_supports, wino_prepare,
					     wino_release, wino_ws, wino_run, K_INPLACE_RESIDUAL};

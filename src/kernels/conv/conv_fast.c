/* conv_fast.c - fast conv2d kernels (NCHW, f32):
 *   depthwise (groups == C == O): a direct loop (conv_dw.h), per ISA;
 *   1x1, stride 1, no padding: a GEMM straight on the input, no im2col,
 *       reading the pixels in place where the micro-kernel can (no packing);
 *   everything else: im2col + GEMM.
 * The GEMMs compute one image's output as Y[O, P] = W[O, K] @ col[K, P]
 * (P = OH*OW pixels, K = C/groups * KH * KW), which is NCHW as it stands,
 * with the bias as the epilogue's per-row bias, and a fused residual and
 * activation in the same epilogue. The weight is the GEMM's A,
 * which it reads in place (row-major), so it needs no packing and may be a
 * graph input as well as a constant (a constant whose rows are 4 KiB apart
 * is read from a copy with padded rows: see conv_prepare). The work is cut into tasks of (image,
 * group, chunk of pixels); each task builds the im2col of its pixel chunk in
 * its thread's workspace, sized to stay in L2, and runs a one-thread GEMM
 * on it, so the columns never go out to memory. Small maps with too few
 * chunks for the threads run one pool-wide GEMM per image and group. */
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "core/error.h"
#include "kernels/common/cpu.h"
#include "kernels/gemm/gemm.h"
#include "kernels/matmul/matmul_fast.h"
#include "kernels/vmath/vmath.h"
#define KCONV_DW_FN kconv_dw_rows__portable
#include "kernels/conv/conv_dw.h"

/* ---- the fused epilogue outside a GEMM -------------------------------------- */

/* y = act(y + res) over n floats just written (still in cache). Transcendental
 * activations go through vmath, as the GEMM's epilogue does; the others are
 * exact, and keep NaN as the standalone ops do. */
static void epilogue_rows(float *y, const float *res, int64_t n, k_act act)
{
	if (res)
		for (int64_t i = 0; i < n; i++)
			y[i] += res[i];
	switch (act) {
	case K_ACT_GELU: kv_unary(KV_gelu)(y, y, n); break;
	case K_ACT_GELU_TANH: kv_unary(KV_gelu_tanh)(y, y, n); break;
	case K_ACT_SILU: kv_unary(KV_silu)(y, y, n); break;
	case K_ACT_SIGMOID: kv_unary(KV_sigmoid)(y, y, n); break;
	case K_ACT_TANH: kv_unary(KV_tanh)(y, y, n); break;
	default: kref_act_f32(y, n, act); break;
	}
}

/* ---- depthwise ------------------------------------------------------------ */

static bool dw_supports(const k_call *call)
{
	kconv_geom g;
	if (!k_all_f32(call) || kconv_geom_make(call, &g) != AIR_OK)
		return false;
	return g.C >= 0 && g.G == g.C && g.O == g.C && g.KH >= 0 && g.KW >= 0 &&
	       g.KH * g.KW <= KCONV_DW_MAX_TAPS && g.sw <= KCONV_DW_MAX_STRIDE;
}

typedef struct dw_job {
	kconv_geom g;
	const float *x, *w, *bias, *res;
	float *y;
	int64_t planes_per_task, planes;
	kconv_dw_fn fn;
	char *ws;
	size_t slot; /* scratch bytes per thread */
} dw_job;

static void dw_task(void *p, int64_t t, int thread)
{
	const dw_job *j = p;
	int64_t t0 = t * j->planes_per_task, t1 = k_min64(j->planes, t0 + j->planes_per_task);
	j->fn(&j->g, j->x, j->w, j->bias, j->y, t0, t1, (float *)(j->ws + (size_t)thread * j->slot));
	if (j->res || j->g.act != K_ACT_NONE) {
		int64_t plane = j->g.OH * j->g.OW;
		/* the residual must not alias y: the loop above wrote y first */
		epilogue_rows(j->y + t0 * plane, j->res ? j->res + t0 * plane : NULL, (t1 - t0) * plane, j->g.act);
	}
}

static size_t dw_slot(const kconv_geom *g)
{
	return k_align64(kconv_dw_scratch_floats(g) * sizeof(float));
}

static size_t dw_ws(const k_call *call, int nthreads)
{
	kconv_geom g;
	if (kconv_geom_make(call, &g) != AIR_OK)
		return 0;
	return (size_t)(nthreads < 1 ? 1 : nthreads) * dw_slot(&g);
}

static air_status dw_run(const k_call *call)
{
	dw_job j;
	AIR_TRY(kconv_geom_make(call, &j.g));
	j.x = call->in[0].data;
	j.w = call->in[1].data;
	j.bias = j.g.has_bias ? call->in[2].data : NULL;
	j.res = j.g.has_residual ? call->in[call->n_in - 1].data : NULL;
	j.y = call->out[0].data;
	j.planes = j.g.N * j.g.C;
	if (call->out[0].numel == 0)
		return AIR_OK;
	/* ~K_GRAIN outputs per task */
	j.ws = call->workspace;
	j.slot = dw_slot(&j.g);
	j.planes_per_task = K_GRAIN / (j.g.OH * j.g.OW);
	if (j.planes_per_task < 1)
		j.planes_per_task = 1;
#ifdef AIR_HAVE_X86
	j.fn = (kcpu_features() & KCPU_AVX2) ? kconv_dw_rows__avx2 : kconv_dw_rows__portable;
#else
	j.fn = kconv_dw_rows__portable;
#endif
	rt_pool_run(call->pool, k_cdiv(j.planes, j.planes_per_task), dw_task, &j);
	return AIR_OK;
}

const k_kernel kfast_conv2d_depthwise = {"conv2d_depthwise", 0, dw_supports, NULL, NULL, dw_ws, dw_run};

/* ---- GEMM-based ------------------------------------------------------------ */

/* Floats of im2col per task: 64K floats (256 KiB) and the GEMM's packed copy
 * of them fit in a 512 KiB L2 with room for the weight's rows. */
enum { COL_FLOATS = 65536, MIN_PIXELS = 32, MAX_PIXELS = 1024, PACK_PIXELS_MIN_OUT = 512 };

typedef struct conv_plan {
	int64_t K, P;      /* GEMM depth, pixels per image */
	int64_t pc, nchunks;
	size_t col_bytes;  /* per thread (whole: once) */
	size_t gemm_bytes; /* per thread (whole: once) */
	int direct;
	int in_place; /* direct, and the GEMM reads the pixels where they are */
	int whole; /* one pool-wide GEMM per image and group (see make_plan) */
} conv_plan;

static bool is_direct(const kconv_geom *g)
{
	return g->KH == 1 && g->KW == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0;
}

/* The task split; workspace sizing and the run must agree on it, so it
 * depends only on the geometry and the thread count. */
static conv_plan make_plan(const kconv_geom *g, int nthreads)
{
	conv_plan p;
	p.direct = is_direct(g);
	/* a 1x1's pixels are read in place by the GEMM, not packed: packing
	 * took 11% of 256>64 at 56x56 (0.69-0.78 ms, in place 0.61;
	 * bench_conv --layout, AVX2). Packed pixels are used by every row
	 * tile of the weight, so with PACK_PIXELS_MIN_OUT rows and more the
	 * copy pays for itself (lone convs, medians of 600 interleaved runs,
	 * AVX-512, 2 threads: 256>1024 at 14x14 0.448 -> 0.411 ms, 1024>512
	 * 0.83 -> 0.81; batch 16 6.62 -> 5.89 and 13.5 -> 12.4; with 256
	 * rows, 1024>256 at batch 1 lost 6%) */
	p.in_place = p.direct && kgemm_b_in_place_available() && g->Og < PACK_PIXELS_MIN_OUT;
	p.K = g->Cg * g->KH * g->KW;
	p.P = g->OH * g->OW;
	int64_t pc = COL_FLOATS / (p.K > 0 ? p.K : 1);
	pc = pc < MIN_PIXELS ? MIN_PIXELS : pc > MAX_PIXELS ? MAX_PIXELS : pc;
	p.nchunks = p.P > 0 ? k_cdiv(p.P, pc) : 0;
	/* chunks as equal as whole B panels allow: pixels are the GEMM's N,
	 * and a chunk ending a few pixels into a panel pays for all of it
	 * (14x14 in 4 equal chunks of 49 pixels was 16 panels' work for 12.25;
	 * 64, 64, 64, 4 is 13) */
	int64_t nr = kgemm_tile_cols();
	p.pc = p.nchunks ? k_cdiv(k_cdiv(p.P, p.nchunks), nr) * nr : 0;
	p.pc = p.pc > p.P ? p.P : p.pc;
	p.nchunks = p.pc ? k_cdiv(p.P, p.pc) : 0;
	p.whole = 0;
	int64_t tasks = g->N * g->G * p.nchunks;
	if (nthreads > 1 && tasks > 0 && tasks < 4 * (int64_t)nthreads && g->Og > 24) {
		/* too few chunks to keep the threads busy (the small maps of
		 * ResNet's later stages): one GEMM per image and group over all
		 * its pixels, split between the threads by the GEMM itself, with
		 * col built once and packed once. Splitting the channels into
		 * tasks instead had each task pack the whole col again: 512>1024
		 * 1x1 stride 2 at 28x28 took 1.44 ms this way against 1.17 for
		 * the NHWC kernel on the same product */
		p.whole = 1;
		p.pc = p.P;
		p.nchunks = 1;
		p.col_bytes = p.direct ? 0 : k_align64((size_t)p.K * (size_t)p.P * sizeof(float));
		p.gemm_bytes = p.in_place ? 0 : k_align64(kgemm_workspace_bytes(g->Og, p.P, p.K, 1, nthreads));
		return p;
	}
	p.col_bytes = p.direct ? 0 : k_align64((size_t)p.K * (size_t)p.pc * sizeof(float));
	p.gemm_bytes = p.in_place ? 0 : k_align64(kgemm_workspace_bytes(g->Og, p.pc, p.K, 1, 1));
	return p;
}

typedef struct conv_job {
	kconv_geom g;
	conv_plan p;
	const float *x, *w, *bias, *res;
	int64_t ldw; /* the weight's row stride: K, or a padded copy's */
	float *y;
	char *ws;
} conv_job;

/* d[i] = s[i * stride] for i in [0, n). Stride 2 (every strided conv of
 * ResNet) pairs even lanes of two loads: the scalar gather took 3 cycles a
 * float and was a quarter of 128>128 3x3 stride 2 at 56x56. */
static void gather_row(float *d, const float *s, int64_t n, int64_t stride)
{
	int64_t i = 0;
	if (stride == 1) {
		memcpy(d, s, (size_t)n * sizeof(float));
		return;
	}
#ifdef __SSE2__
	/* four outputs read s[2i .. 2i + 7]; the last one used is s[2n - 2],
	 * so a vector needs i + 5 <= n (s[2n - 1] may be past the row's end) */
	if (stride == 2)
		for (; i + 5 <= n; i += 4)
			_mm_storeu_ps(d + i, _mm_shuffle_ps(_mm_loadu_ps(s + 2 * i), _mm_loadu_ps(s + 2 * i + 4),
							    _MM_SHUFFLE(2, 0, 2, 0)));
#endif
	for (; i < n; i++)
		d[i] = s[i * stride];
}

/* col[k][q] for q in [0, np): the input under tap k = (c, ki, kj) for pixel
 * p0 + q, zero where the tap falls in the padding. The pixels run along
 * output rows, which are found once: a division per row and tap cost more
 * than the copy on small rows. */
static void im2col(const kconv_geom *g, const float *x, int64_t p0, int64_t np, float *col)
{
	const int64_t OW = g->OW, H = g->H, W = g->W;
	const int64_t oh0 = p0 / OW, ow0 = p0 % OW;
	for (int64_t c = 0; c < g->Cg; c++)
		for (int64_t ki = 0; ki < g->KH; ki++)
			for (int64_t kj = 0; kj < g->KW; kj++) {
				float *dst = col + ((c * g->KH + ki) * g->KW + kj) * np;
				const float *xc = x + c * H * W;
				const int64_t off = kj * g->dw - g->pw;
				int64_t lo, hi;
				kconv_valid_range(OW, W, g->sw, off, &lo, &hi);
				int64_t oh = oh0, ow = ow0;
				for (int64_t q0 = 0; q0 < np; oh++, ow = 0) {
					int64_t end = k_min64(OW, ow + (np - q0));
					int64_t ih = oh * g->sh - g->ph + ki * g->dh;
					/* d[q] is the slot of pixel (oh, q); columns [ow, a)
					 * and [b, end) are padding, [a, b) read the input row */
					float *d = dst + q0 - ow;
					int64_t a = end, b = end;
					if (ih >= 0 && ih < H) {
						a = lo < ow ? ow : lo > end ? end : lo;
						b = hi < a ? a : hi > end ? end : hi;
					}
					for (int64_t q = ow; q < a; q++)
						d[q] = 0.0f;
					if (b > a)
						gather_row(d + a, xc + ih * W + a * g->sw + off, b - a, g->sw);
					for (int64_t q = b; q < end; q++)
						d[q] = 0.0f;
					q0 += end - ow;
				}
			}
}

/* The GEMM epilogue for output channels from o0 of one image, whose
 * output starts at y + at (rows of P pixels). */
static k_epilogue conv_epilogue(const conv_job *j, int64_t o0, int64_t at)
{
	k_epilogue ep = k_epilogue_none();
	ep.bias_m = j->bias ? j->bias + o0 : NULL;
	ep.act = j->g.act;
	if (j->res) {
		ep.residual = j->res + at; /* may alias C: the GEMM reads it first */
		ep.ld_residual = j->p.P;
	}
	return ep;
}

static void conv_task(void *ctx, int64_t t, int thread)
{
	const conv_job *j = ctx;
	const kconv_geom *g = &j->g;
	const conv_plan *p = &j->p;
	int64_t chunk = t % p->nchunks, ng = t / p->nchunks;
	int64_t grp = ng % g->G, n = ng / g->G;
	int64_t p0 = chunk * p->pc, np = k_min64(p->pc, p->P - p0);
	int64_t o0 = grp * g->Og, no = g->Og;
	if (np <= 0 || no <= 0)
		return;
	char *slot = j->ws + (size_t)thread * (p->col_bytes + p->gemm_bytes);
	const float *x = j->x + (n * g->C + grp * g->Cg) * g->H * g->W;
	const float *B;
	int64_t rs_b;
	if (p->direct) {
		B = x + p0;
		rs_b = p->P;
	} else {
		im2col(g, x, p0, np, (float *)slot);
		B = (const float *)slot;
		rs_b = np;
	}
	int64_t at = (n * g->O + o0) * p->P + p0;
	k_epilogue ep = conv_epilogue(j, o0, at);
	const float *w = j->w + o0 * j->ldw;
	if (p->in_place && kgemm_f32_b_in_place(no, np, p->K, w, j->ldw, B, rs_b, j->y + at, p->P, &ep, NULL))
		return;
	kgemm_f32(no, np, p->K, w, j->ldw, 1, B, rs_b, 1, j->y + at, p->P, &ep, NULL,
		  slot + p->col_bytes);
}

static size_t conv_ws(const k_call *call, int nthreads)
{
	kconv_geom g;
	if (kconv_geom_make(call, &g) != AIR_OK)
		return 0;
	conv_plan p = make_plan(&g, nthreads);
	return (size_t)(nthreads < 1 || p.whole ? 1 : nthreads) * (p.col_bytes + p.gemm_bytes);
}

/* The whole plan's im2col of one image and group, split over channels. */
typedef struct col_job {
	kconv_geom g;
	const float *x;
	float *col;
	int64_t P, cpt; /* pixels, channels per task */
} col_job;

static void col_task(void *ctx, int64_t t, int thread)
{
	(void)thread;
	const col_job *j = ctx;
	kconv_geom part = j->g;
	int64_t c0 = t * j->cpt;
	part.Cg = k_min64(j->cpt, j->g.Cg - c0);
	if (part.Cg > 0)
		im2col(&part, j->x + c0 * j->g.H * j->g.W, 0, j->P, j->col + c0 * j->g.KH * j->g.KW * j->P);
}

static void conv_whole(const conv_job *j, rt_pool *pool)
{
	const kconv_geom *g = &j->g;
	const conv_plan *p = &j->p;
	float *col = (float *)j->ws;
	for (int64_t n = 0; n < g->N; n++)
		for (int64_t grp = 0; grp < g->G; grp++) {
			const float *x = j->x + (n * g->C + grp * g->Cg) * g->H * g->W;
			if (!p->direct) {
				col_job cj = {*g, x, col, p->P, k_cdiv(g->Cg, 4 * (int64_t)rt_pool_size(pool))};
				rt_pool_run(pool, k_cdiv(g->Cg, cj.cpt), col_task, &cj);
				x = col;
			}
			int64_t o0 = grp * g->Og, at = (n * g->O + o0) * p->P;
			k_epilogue ep = conv_epilogue(j, o0, at);
			const float *w = j->w + o0 * j->ldw;
			if (p->in_place &&
			    kgemm_f32_b_in_place(g->Og, p->P, p->K, w, j->ldw, x, p->P, j->y + at, p->P, &ep, pool))
				continue;
			kgemm_f32(g->Og, p->P, p->K, w, j->ldw, 1, x, p->P, 1, j->y + at, p->P, &ep, pool,
				  j->ws + p->col_bytes);
		}
}

/* A constant weight whose rows are a multiple of 4 KiB apart (K = 1024,
 * 2048) puts the six rows a micro-tile reads in place in one L1 set; a copy
 * with its rows 64 bytes further apart spreads them. M = 256 and 512, N =
 * 196, K = 1024 (the 14x14 1x1s) ran 6-10% faster with lda 1040 (a
 * standalone kgemm_f32_b_in_place timing, 2 threads, best of 300). */
enum { W_ALIAS_FLOATS = 1024, W_PAD_FLOATS = 16 };

typedef struct padded_w {
	int64_t ldw;
	float w[];
} padded_w;

static air_status conv_prepare(const k_call *call, void **out)
{
	*out = NULL;
	kconv_geom g;
	if (!call->in_const || !call->in_const[1] || kconv_geom_make(call, &g) != AIR_OK)
		return AIR_OK;
	const int64_t K = g.Cg * g.KH * g.KW, O = g.O;
	if (K <= 0 || O <= 0 || K % W_ALIAS_FLOATS != 0)
		return AIR_OK;
	padded_w *pw = malloc(sizeof *pw + sizeof(float) * (size_t)(O * (K + W_PAD_FLOATS)));
	if (!pw)
		return air_error(AIR_OUT_OF_MEMORY, "conv2d: no memory for the padded weight");
	pw->ldw = K + W_PAD_FLOATS;
	const float *w = call->in[1].data;
	for (int64_t o = 0; o < O; o++) {
		memcpy(pw->w + o * pw->ldw, w + o * K, sizeof(float) * (size_t)K);
		memset(pw->w + o * pw->ldw + K, 0, sizeof(float) * W_PAD_FLOATS);
	}
	*out = pw;
	return AIR_OK;
}

static air_status conv_run(const k_call *call)
{
	conv_job j;
	AIR_TRY(kconv_geom_make(call, &j.g));
	if (call->out[0].numel == 0)
		return AIR_OK;
	j.p = make_plan(&j.g, rt_pool_size(call->pool));
	j.x = call->in[0].data;
	const padded_w *pw = call->prepared;
	j.w = pw ? pw->w : call->in[1].data;
	j.ldw = pw ? pw->ldw : j.p.K;
	j.bias = j.g.has_bias ? call->in[2].data : NULL;
	j.res = j.g.has_residual ? call->in[call->n_in - 1].data : NULL;
	j.y = call->out[0].data;
	j.ws = call->workspace;
	if (j.p.whole)
		conv_whole(&j, call->pool);
	else
		rt_pool_run(call->pool, j.g.N * j.g.G * j.p.nchunks, conv_task, &j);
	return AIR_OK;
}

static bool direct_supports(const k_call *call)
{
	kconv_geom g;
	return k_all_f32(call) && kconv_geom_make(call, &g) == AIR_OK && is_direct(&g);
}

/* K_INPLACE_RESIDUAL: the residual goes through the GEMM epilogue, which
 * folds it into C on the first K block, reading each tile of it just before
 * it writes that tile of C, through the pointer and row stride passed. */
const k_kernel kfast_conv2d_1x1 = {"conv2d_gemm_1x1", 0, direct_supports, conv_prepare, free, conv_ws, conv_run, K_INPLACE_RESIDUAL};
const k_kernel kfast_conv2d_im2col = {"conv2d_im2col_gemm", 0, k_all_f32, conv_prepare, free, conv_ws, conv_run, K_INPLACE_RESIDUAL};

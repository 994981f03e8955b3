/* conv_nhwc_im2col.c - channels-last convolution as im2col + GEMM: the
 * kernel for every conv2d_nhwc that is not 1x1, depthwise, narrow (the
 * implicit GEMM) or Winograd. Rows of col are output pixels, each the KH x
 * KW runs of Cg channels under its window, so building col is a copy of
 * contiguous runs; the weight is packed GEMM B blocks (conv_nhwc.c). */
#include <string.h>

#include "core/error.h"
#include "kernels/conv/conv_nhwc.h"
#include "kernels/gemm/gemm.h"
#include "kernels/shape/transpose.h"

/* ---- im2col in row blocks + GEMM ------------------------------------------ */

/* The work is cut into tasks of (group, chunk of output pixels, range of
 * column blocks); each task builds its chunk's col in its thread's slot,
 * sized (1 MiB) to stay in that thread's L2 (2 MiB per core on Sapphire
 * Rapids; 512 KiB cost 5% over all ResNet-50 shapes, bench_conv --layout),
 * and runs one-thread GEMMs on it, so col never goes out to
 * memory and the threads never wait for each other inside a convolution.
 * When there are too few chunks for the threads, the column blocks are
 * split too (each part then redoes the chunk's col, cheap next to its GEMM). */
enum { COL_FLOATS = 262144, BLOCK_COLS = 128 };

typedef struct i2c_plan {
	int64_t K, M;       /* GEMM depth, output pixels */
	int64_t rc, nrc;    /* rows per chunk, chunks */
	int64_t bpg, ncg;   /* column blocks per task, column ranges */
	size_t col_bytes, slot_bytes;
	size_t out_bytes;  /* NCHW: a task's output, channels-last, to transpose */
	size_t band_bytes; /* NCHW: the input rows a task reads, channels-last */
} i2c_plan;

/* The input rows [*ih0, *ih1) (within the image) that output pixels [r0,
 * r1) of an image read. */
static void band_rows(const kconv_geom *g, int64_t r0, int64_t r1, int64_t *ih0, int64_t *ih1)
{
	int64_t lo = r0 / g->OW * g->sh - g->ph, hi = (r1 - 1) / g->OW * g->sh - g->ph + (g->KH - 1) * g->dh + 1;
	*ih0 = lo < 0 ? 0 : lo;
	*ih1 = hi > g->H ? g->H : hi;
}

/* Depends only on the geometry and the thread count: the workspace size
 * and the run must agree. */
static i2c_plan make_plan(const kconv_geom *g, int nchw, int nthreads)
{
	i2c_plan p;
	p.K = g->KH * g->KW * g->Cg;
	p.M = g->N * g->OH * g->OW;
	const int64_t mr = kgemm_tile_rows();
	/* as few chunks as fit col in a thread's share of L2: each chunk reads
	 * the whole weight, and at 7x7 (49 pixels, a 9 MiB weight) reading it
	 * twice cost more than the arithmetic; then whole tiles per chunk when
	 * that still fits */
	int64_t rmax = COL_FLOATS / (p.K > 0 ? p.K : 1);
	rmax = rmax < mr ? mr : rmax;
	p.nrc = k_cdiv(p.M, rmax);
	p.rc = p.nrc ? k_cdiv(p.M, p.nrc) : 0;
	if (k_cdiv(p.rc, mr) * mr <= rmax)
		p.rc = k_min64(p.M, k_cdiv(p.rc, mr) * mr);
	p.nrc = p.rc ? k_cdiv(p.M, p.rc) : 0;
	int64_t nb = BLOCK_COLS < g->Og ? BLOCK_COLS : g->Og, nblk = nb > 0 ? k_cdiv(g->Og, nb) : 0;
	int64_t tasks = g->G * p.nrc, want = 4 * (int64_t)nthreads, ncg = 1;
	if (nthreads > 1 && tasks > 0 && tasks < want)
		ncg = k_min64(nblk, k_cdiv(want, tasks));
	p.bpg = ncg > 0 && nblk > 0 ? k_cdiv(nblk, ncg) : 1;
	p.ncg = nblk > 0 ? k_cdiv(nblk, p.bpg) : 0;
	p.col_bytes = k_align64(sizeof(float) * (size_t)(p.rc * p.K));
	p.out_bytes = nchw ? k_align64(sizeof(float) * (size_t)(p.rc * g->O)) : 0;
	/* rc pixels span at most rc / OW + 2 output rows */
	int64_t out_rows = k_min64(g->OH, p.rc / (g->OW > 0 ? g->OW : 1) + 2);
	int64_t in_rows = k_min64(g->H, (out_rows - 1) * g->sh + (g->KH - 1) * g->dh + 1);
	p.band_bytes = nchw ? k_align64(sizeof(float) * (size_t)(in_rows * g->W * g->C)) : 0;
	p.slot_bytes = p.col_bytes + p.out_bytes + p.band_bytes +
		       k_align64(kgemm_packed_workspace_bytes(p.rc, nb, p.K, 1));
	return p;
}
/* Row r (a pixel of its image) of col for group grp: for each tap (ki, kj)
 * the Cg channels of the image under it, zeros where it falls in the
 * padding. xi holds the image's rows from ih0 on, channels-last (any row
 * a tap of this pixel reads must be there). */
void kconv_nhwc_im2col_row(const kconv_geom *g, const float *xi, int64_t ih0, int64_t r, int64_t grp, float *dst)
{
	const int64_t C = g->C, Cg = g->Cg, W = g->W, KW = g->KW;
	const int64_t oh = r / g->OW, ow = r % g->OW;
	xi += grp * Cg;
	const int64_t iw0 = ow * g->sw - g->pw;
	for (int64_t ki = 0; ki < g->KH; ki++, dst += KW * Cg) {
		int64_t ih = oh * g->sh - g->ph + ki * g->dh;
		if (ih < 0 || ih >= g->H) {
			memset(dst, 0, sizeof(float) * (size_t)(KW * Cg));
			continue;
		}
		const float *xr = xi + (ih - ih0) * W * C;
		if (g->G == 1 && g->dw == 1) {
			/* the row's taps are one contiguous run of x */
			int64_t lo = iw0 < 0 ? -iw0 : 0, hi = W - iw0 < KW ? W - iw0 : KW;
			lo = lo > KW ? KW : lo;
			hi = hi < lo ? lo : hi;
			memset(dst, 0, sizeof(float) * (size_t)(lo * C));
			memcpy(dst + lo * C, xr + (iw0 + lo) * C, sizeof(float) * (size_t)((hi - lo) * C));
			memset(dst + hi * C, 0, sizeof(float) * (size_t)((KW - hi) * C));
			continue;
		}
		for (int64_t kj = 0; kj < KW; kj++) {
			int64_t iw = iw0 + kj * g->dw;
			if (iw < 0 || iw >= W)
				memset(dst + kj * Cg, 0, sizeof(float) * (size_t)Cg);
			else
				memcpy(dst + kj * Cg, xr + iw * C, sizeof(float) * (size_t)Cg);
		}
	}
}

typedef struct i2c_job {
	kconv_nhwc c;
	i2c_plan p;
	kgemm_packed_b *const *b; /* [grp * nblk + block] */
	int64_t nblk, nb;
	const float *x, *bias, *res;
	float *y;
	int nchw; /* y is NCHW: each task writes channels-last into its slot */
	char *ws;
} i2c_job;

/* Rows [m0, m0 + rows) of the channels-last output out (row stride O),
 * columns [o0, o1), into NCHW y: per image, a transpose of its pixels. */
static void store_nchw(const kconv_geom *g, const float *out, int64_t m0, int64_t rows, int64_t o0, int64_t o1,
		       float *y)
{
	const int64_t P = g->OH * g->OW;
	for (int64_t m = m0; m < m0 + rows;) {
		int64_t n = m / P, r = m % P, seg = k_min64(P - r, m0 + rows - m);
		ktranspose(out + (m - m0) * g->O + o0, g->O, y + (n * g->O + o0) * P + r, P, seg, o1 - o0);
		m += seg;
	}
}

static void i2c_task(void *ctx, int64_t t, int thread)
{
	const i2c_job *j = ctx;
	const kconv_geom *g = &j->c.g;
	const i2c_plan *p = &j->p;
	int64_t cg = t % p->ncg, rest = t / p->ncg, chunk = rest % p->nrc, grp = rest / p->nrc;
	int64_t m0 = chunk * p->rc, rows = k_min64(p->rc, p->M - m0);
	if (rows <= 0)
		return;
	char *slot = j->ws + (size_t)thread * p->slot_bytes;
	float *col = (float *)slot;
	/* NCHW: the output rows m0.. at out, as if y started m0 rows earlier */
	float *out = j->nchw ? (float *)(slot + p->col_bytes) : j->y + m0 * g->O;
	float *band = (float *)(slot + p->col_bytes + p->out_bytes);
	const int64_t P = g->OH * g->OW, HW = g->H * g->W;
	for (int64_t m = m0; m < m0 + rows;) {
		/* the chunk's pixels of one image */
		int64_t n = m / P, r0 = m % P, seg = k_min64(P - r0, m0 + rows - m), ih0 = 0, ih1;
		const float *xi = j->x + n * HW * g->C;
		if (j->nchw) {
			band_rows(g, r0, r0 + seg, &ih0, &ih1);
			if (ih1 > ih0)
				ktranspose(xi + ih0 * g->W, HW, band, g->C, g->C, (ih1 - ih0) * g->W);
			xi = band;
		}
		for (int64_t q = 0; q < seg; q++)
			kconv_nhwc_im2col_row(g, xi, ih0, r0 + q, grp, col + (m - m0 + q) * p->K);
		m += seg;
	}
	int64_t jb0 = cg * p->bpg, jb1 = k_min64(j->nblk, (cg + 1) * p->bpg);
	for (int64_t jb = jb0; jb < jb1; jb++) {
		int64_t o0 = grp * g->Og + jb * j->nb, no = k_min64(j->nb, g->Og - jb * j->nb);
		k_epilogue ep = k_epilogue_none();
		ep.bias_n = j->bias ? j->bias + o0 : NULL;
		ep.residual = j->res ? j->res + m0 * g->O + o0 : NULL;
		ep.ld_residual = g->O;
		ep.act = j->c.act;
		kgemm_f32_packed(rows, no, p->K, col, p->K, 1, j->b[grp * j->nblk + jb], out + o0, g->O, &ep, NULL,
				 slot + p->col_bytes + p->out_bytes + p->band_bytes);
	}
	if (j->nchw && jb1 > jb0)
		store_nchw(g, out, m0, rows, grp * g->Og + jb0 * j->nb, k_min64(grp * g->Og + jb1 * j->nb, g->O), j->y);
}

static bool i2c_supports(const k_call *call)
{
	kconv_nhwc c;
	return kconv_nhwc_gemm_ok(call, &c);
}

static air_status packed_prepare_blocks(const k_call *call, void **out)
{
	kconv_nhwc c;
	AIR_TRY(kconv_nhwc_make(call, &c));
	return kconv_nhwc_pack_weight(call, &c.g, BLOCK_COLS, out);
}

/* The geometry of a call of either op: conv2d_nhwc, or (nchw) conv2d. */
static air_status i2c_geom(const k_call *call, int nchw, kconv_nhwc *c)
{
	if (!nchw)
		return kconv_nhwc_make(call, c);
	AIR_TRY(kconv_geom_make(call, &c->g));
	c->act = c->g.act;
	c->has_residual = c->g.has_residual;
	return AIR_OK;
}

static size_t workspace(const k_call *call, int nchw, int nthreads)
{
	kconv_nhwc c;
	if (i2c_geom(call, nchw, &c) != AIR_OK)
		return 0;
	nthreads = nthreads < 1 ? 1 : nthreads;
	return kconv_nhwc_repack_bytes(call->prepared, &c.g) +
	       (size_t)nthreads * make_plan(&c.g, nchw, nthreads).slot_bytes;
}

static air_status run(const k_call *call, int nchw)
{
	i2c_job j;
	AIR_TRY(i2c_geom(call, nchw, &j.c));
	const kconv_geom *g = &j.c.g;
	if (call->out[0].numel == 0)
		return AIR_OK;
	j.p = make_plan(g, nchw, rt_pool_size(call->pool));
	j.ws = call->workspace;
	j.b = kconv_nhwc_weight_blocks(call, g, &j.ws);
	kconv_nhwc_weight_blocking(call->prepared, &j.nblk, &j.nb);
	kconv_nhwc_operands(call, &j.c, &j.bias, &j.res);
	j.x = call->in[0].data;
	j.y = call->out[0].data;
	j.nchw = nchw;
	rt_pool_run(call->pool, g->G * j.p.nrc * j.p.ncg, i2c_task, &j);
	return AIR_OK;
}

static size_t i2c_ws(const k_call *call, int nthreads) { return workspace(call, 0, nthreads); }
static air_status i2c_run(const k_call *call) { return run(call, 0); }

/* K_INPLACE_RESIDUAL: the residual goes through the GEMM epilogue, which
 * folds it into C on the first K block, reading each tile of it just before
 * it writes that tile of C, through the pointer and row stride passed. */
const k_kernel kfast_conv2d_nhwc_im2col = {"conv2d_nhwc_im2col_gemm", 0, i2c_supports, packed_prepare_blocks,
					   kconv_nhwc_packed_release, i2c_ws, i2c_run, K_INPLACE_RESIDUAL};

/* ---- the NCHW conv2d op, run channels-last inside ---------------------------- */

/* Spatial, strided convs left in NCHW by the layout pass (alone in their
 * graph: see layout.c's conv_is_strong) were im2col GEMMs over NCHW col,
 * whose every tap row is a strided gather. Channels-last, the NHWC kernel
 * is 1.3-1.4x faster on ResNet-50's 3x3 stride-2 shapes (bench_conv
 * --layout), more than the transposes in and out cost. Its residual would
 * be NCHW and must be added before the activation, which the channels-last
 * GEMM cannot do: such convs stay with the NCHW im2col. */
static bool cl_supports(const k_call *call)
{
	kconv_nhwc c;
	if (!k_all_f32(call) || i2c_geom(call, 1, &c) != AIR_OK)
		return false;
	const kconv_geom *g = &c.g;
	return g->O > 0 && g->C > 0 && g->G == 1 && !c.has_residual && g->KH * g->KW > 1 &&
	       g->N * g->OH * g->OW > 0;
}

static air_status cl_prepare(const k_call *call, void **out)
{
	kconv_nhwc c;
	AIR_TRY(i2c_geom(call, 1, &c));
	return kconv_nhwc_pack_weight(call, &c.g, BLOCK_COLS, out);
}

static size_t cl_ws(const k_call *call, int nthreads) { return workspace(call, 1, nthreads); }
static air_status cl_run(const k_call *call) { return run(call, 1); }

const k_kernel kfast_conv2d_im2col_channels_last = {"conv2d_im2col_channels_last", 0, cl_supports, cl_prepare,
						    kconv_nhwc_packed_release, cl_ws, cl_run};

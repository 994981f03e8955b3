/* conv_nhwc_im2col.c - channels-last convolution as im2col + GEMM: the
 * kernel for every conv2d_nhwc that is not 1x1, depthwise, narrow (the
 * implicit GEMM) or Winograd. Rows of col are output pixels, each the KH x
 * KW runs of Cg channels under its window, so building col is a copy of
 * contiguous runs; the weight is packed GEMM B blocks (conv_nhwc.c). */
#include <string.h>

#include "core/error.h"
#include "kernels/conv_nhwc.h"
#include "kernels/gemm.h"

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
} i2c_plan;

/* Depends only on the geometry and the thread count: the workspace size
 * and the run must agree. */
static i2c_plan make_plan(const kconv_geom *g, int nthreads)
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
	p.slot_bytes = p.col_bytes + k_align64(kgemm_packed_workspace_bytes(p.rc, nb, p.K, 1));
	return p;
}

/* Row pix of col for group grp: for each tap (ki, kj) the Cg channels of
 * x under it, zeros where it falls in the padding. */
static void im2col_row(const kconv_geom *g, const float *x, int64_t pix, int64_t grp, float *dst)
{
	const int64_t P = g->OH * g->OW, C = g->C, Cg = g->Cg, W = g->W, KW = g->KW;
	const int64_t n = pix / P, r = pix % P, oh = r / g->OW, ow = r % g->OW;
	const float *xi = x + n * g->H * W * C + grp * Cg;
	const int64_t iw0 = ow * g->sw - g->pw;
	for (int64_t ki = 0; ki < g->KH; ki++, dst += KW * Cg) {
		int64_t ih = oh * g->sh - g->ph + ki * g->dh;
		if (ih < 0 || ih >= g->H) {
			memset(dst, 0, sizeof(float) * (size_t)(KW * Cg));
			continue;
		}
		const float *xr = xi + ih * W * C;
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
	char *ws;
} i2c_job;

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
	for (int64_t r = 0; r < rows; r++)
		im2col_row(g, j->x, m0 + r, grp, col + r * p->K);
	int64_t jb1 = k_min64(j->nblk, (cg + 1) * p->bpg);
	for (int64_t jb = cg * p->bpg; jb < jb1; jb++) {
		int64_t o0 = grp * g->Og + jb * j->nb, no = k_min64(j->nb, g->Og - jb * j->nb);
		k_epilogue ep = k_epilogue_none();
		ep.bias_n = j->bias ? j->bias + o0 : NULL;
		ep.residual = j->res ? j->res + m0 * g->O + o0 : NULL;
		ep.ld_residual = g->O;
		ep.act = j->c.act;
		kgemm_f32_packed(rows, no, p->K, col, p->K, 1, j->b[grp * j->nblk + jb], j->y + m0 * g->O + o0, g->O,
				 &ep, NULL, slot + p->col_bytes);
	}
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

static size_t i2c_ws(const k_call *call, int nthreads)
{
	kconv_nhwc c;
	if (kconv_nhwc_make(call, &c) != AIR_OK)
		return 0;
	nthreads = nthreads < 1 ? 1 : nthreads;
	return kconv_nhwc_repack_bytes(call->prepared, &c.g) +
	       (size_t)nthreads * make_plan(&c.g, nthreads).slot_bytes;
}

static air_status i2c_run(const k_call *call)
{
	i2c_job j;
	AIR_TRY(kconv_nhwc_make(call, &j.c));
	const kconv_geom *g = &j.c.g;
	if (call->out[0].numel == 0)
		return AIR_OK;
	j.p = make_plan(g, rt_pool_size(call->pool));
	j.ws = call->workspace;
	j.b = kconv_nhwc_weight_blocks(call, g, &j.ws);
	kconv_nhwc_weight_blocking(call->prepared, &j.nblk, &j.nb);
	kconv_nhwc_operands(call, &j.c, &j.bias, &j.res);
	j.x = call->in[0].data;
	j.y = call->out[0].data;
	rt_pool_run(call->pool, g->G * j.p.nrc * j.p.ncg, i2c_task, &j);
	return AIR_OK;
}

const k_kernel kfast_conv2d_nhwc_im2col = {"conv2d_nhwc_im2col_gemm", 0, i2c_supports, packed_prepare_blocks,
					   kconv_nhwc_packed_release, i2c_ws, i2c_run};

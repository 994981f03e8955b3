/* conv_nhwc_lowp.c - conv2d_nhwc with a 16-bit float weight (bf16 or f16:
 * a bf16 model's own, or an f32 one converted once under mixed_precision)
 * and f32 activations, on the 16-bit-weight GEMM (kernels/gemm/lowp_w.h:
 * activations rounded to the weight's type, f32 sums), which reads its
 * weight as [O, K] rows of k, PyTorch's layout.
 *   1x1, stride 1, unpadded: the weight [O, C, 1, 1] is [O, K] already and
 *     x [N*H*W, C] is the GEMM's A, so the conv is one pool-wide GEMM with
 *     the weight read in place: no copy of it at all.
 *   anything else of one group: the weight permuted once to [O, KH, KW, C]
 *     in its own 16-bit type (at prepare; per call into the workspace when
 *     it is a graph input), the order of channels-last im2col's rows. Each
 *     task builds the im2col of a chunk of output pixels in its thread's
 *     slot, sized to stay in L2, and runs a one-thread GEMM on it against
 *     a range of output channels, as the f32 kernel does
 *     (conv_nhwc_im2col.c).
 * Bias, residual and activation go through the GEMM's epilogue. Grouped
 * convolutions (depthwise) are not taken: the lowering keeps their small
 * weights f32 (lowering/conv.py); the reference kernel widens any other. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kernels/conv/conv_nhwc.h"
#include "kernels/gemm/lowp_w.h"

/* A task's im2col chunk at most this many floats (1 MiB: the f32
 * kernel's); column ranges a multiple of LANES channels. */
enum { COL_FLOATS = 262144, LANES = 32 };

static int64_t round_up(int64_t x, int64_t m)
{
	return (x + m - 1) / m * m;
}

static bool is_lowp(air_dtype dt)
{
	return dt == AIR_BF16 || dt == AIR_F16;
}

/* f32 x, a 16-bit weight, f32 bias/residual/output, one group, something
 * to multiply. */
static bool lowp_ok(const k_call *call, kconv_nhwc *c)
{
	if (call->in[0].dtype != AIR_F32 || !is_lowp(call->in[1].dtype) || call->out[0].dtype != AIR_F32)
		return false;
	for (int i = 2; i < call->n_in; i++)
		if (call->in[i].dtype != AIR_F32)
			return false;
	if (kconv_nhwc_make(call, c) != AIR_OK)
		return false;
	const kconv_geom *g = &c->g;
	return g->G == 1 && g->O > 0 && g->C > 0 && g->KH > 0 && g->KW > 0;
}

static bool is_pointwise(const kconv_geom *g)
{
	return g->KH == 1 && g->KW == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0;
}

static klowp_type wtype(const k_call *call)
{
	return call->in[1].dtype == AIR_BF16 ? KLOWP_BF16 : KLOWP_F16;
}

static k_epilogue epilogue(const k_call *call, const kconv_nhwc *c)
{
	k_epilogue ep = k_epilogue_none();
	kconv_nhwc_operands(call, c, &ep.bias_n, &ep.residual);
	ep.ld_residual = c->g.O;
	ep.act = c->act;
	return ep;
}

/* ---- 1x1, stride 1: one GEMM on x itself --------------------------------- */

static bool pw_supports(const k_call *call)
{
	kconv_nhwc c;
	return lowp_ok(call, &c) && is_pointwise(&c.g);
}

static size_t pw_ws(const k_call *call, int nthreads)
{
	kconv_nhwc c;
	if (kconv_nhwc_make(call, &c) != AIR_OK)
		return 0;
	return kgemm_lowp_w_workspace_bytes(c.g.N * c.g.H * c.g.W, c.g.C, nthreads);
}

static air_status pw_run(const k_call *call)
{
	kconv_nhwc c;
	AIR_TRY(kconv_nhwc_make(call, &c));
	const kconv_geom *g = &c.g;
	if (call->out[0].numel == 0)
		return AIR_OK;
	k_epilogue ep = epilogue(call, &c);
	kgemm_lowp_w(wtype(call), g->N * g->H * g->W, g->O, g->C, call->in[0].data, g->C, call->in[1].data, g->C,
		     call->out[0].data, g->O, &ep, call->pool, call->workspace);
	return AIR_OK;
}

/* K_INPLACE_RESIDUAL: the GEMM reads each residual tile before it writes
 * that tile of the output, through the same pointer and row stride. */
const k_kernel kfast_conv2d_nhwc_lowp_1x1 = {"conv2d_nhwc_lowp_1x1", 0, pw_supports, NULL, NULL, pw_ws, pw_run,
					     K_INPLACE_RESIDUAL};

/* ---- everything else of one group: im2col chunks ------------------------- */

/* The weight permuted to [O][KH][KW][C] (k = (ki * KW + kj) * C + c). */
typedef struct lowp_w {
	size_t bytes;
	uint16_t w[];
} lowp_w;

static void permute_weight(const kconv_geom *g, const uint16_t *src, uint16_t *dst)
{
	const int64_t taps = g->KH * g->KW, K = taps * g->C;
	for (int64_t o = 0; o < g->O; o++)
		for (int64_t c = 0; c < g->C; c++)
			for (int64_t t = 0; t < taps; t++)
				dst[o * K + t * g->C + c] = src[(o * g->C + c) * taps + t];
}

static size_t weight_bytes(const kconv_geom *g)
{
	return sizeof(uint16_t) * (size_t)(g->O * g->KH * g->KW * g->C);
}

static air_status i2c_prepare(const k_call *call, void **out)
{
	kconv_nhwc c;
	*out = NULL;
	if (!call->in_const || !call->in_const[1])
		return AIR_OK; /* a graph input: permuted per call */
	AIR_TRY(kconv_nhwc_make(call, &c));
	size_t bytes = weight_bytes(&c.g);
	lowp_w *p = malloc(sizeof *p + (bytes ? bytes : 1));
	if (!p)
		return air_error(AIR_OUT_OF_MEMORY, "conv2d_nhwc: no memory for the permuted 16-bit weight");
	p->bytes = bytes;
	permute_weight(&c.g, call->in[1].data, p->w);
	*out = p;
	return AIR_OK;
}

size_t kconv_lowp_prepared_bytes(const void *prepared)
{
	return prepared ? ((const lowp_w *)prepared)->bytes : 0;
}

typedef struct i2c_plan {
	int64_t K, M;     /* GEMM depth, output pixels */
	int64_t rc, nrc;  /* rows per chunk, chunks */
	int64_t oc, noc;  /* output channels per task, their ranges */
	size_t col_bytes; /* a slot: col, then the GEMM's workspace */
	size_t slot_bytes;
	size_t w_bytes;   /* the front of the workspace: the weight, when permuted per call */
} i2c_plan;

/* Depends only on the geometry, the thread count and whether the weight
 * is prepared: the workspace size and the run must agree. */
static i2c_plan make_plan(const kconv_geom *g, int nthreads, bool prepared)
{
	i2c_plan p;
	p.K = g->KH * g->KW * g->C;
	p.M = g->N * g->OH * g->OW;
	int64_t rmax = COL_FLOATS / p.K;
	rmax = rmax < 12 ? 12 : rmax;
	p.nrc = k_cdiv(p.M, rmax);
	p.rc = p.nrc ? k_cdiv(p.M, p.nrc) : 0;
	/* few chunks: split the output channels too, so each thread has work
	 * (each part redoes its chunk's col, cheap next to its GEMM) */
	int64_t ranges = 1, want = 4 * (int64_t)nthreads;
	if (nthreads > 1 && p.nrc < want)
		ranges = k_min64(k_cdiv(g->O, LANES), k_cdiv(want, p.nrc > 0 ? p.nrc : 1));
	p.oc = round_up(k_cdiv(g->O, ranges), LANES);
	p.noc = k_cdiv(g->O, p.oc);
	p.col_bytes = k_align64(sizeof(float) * (size_t)(p.rc * p.K));
	p.slot_bytes = p.col_bytes + k_align64(kgemm_lowp_w_workspace_bytes(p.rc, p.K, 1));
	p.w_bytes = prepared ? 0 : k_align64(weight_bytes(g));
	return p;
}

typedef struct i2c_job {
	kconv_nhwc c;
	i2c_plan p;
	klowp_type wt;
	const uint16_t *w;
	const float *x;
	float *y;
	k_epilogue ep;
	char *slots;
} i2c_job;

static void i2c_task(void *ctx, int64_t t, int thread)
{
	const i2c_job *j = ctx;
	const kconv_geom *g = &j->c.g;
	const i2c_plan *p = &j->p;
	const int64_t chunk = t / p->noc, o0 = t % p->noc * p->oc, no = k_min64(p->oc, g->O - o0);
	const int64_t m0 = chunk * p->rc, rows = k_min64(p->rc, p->M - m0);
	if (rows <= 0 || no <= 0)
		return;
	char *slot = j->slots + (size_t)thread * p->slot_bytes;
	float *col = (float *)slot;
	const int64_t P = g->OH * g->OW, HW = g->H * g->W;
	for (int64_t m = m0; m < m0 + rows; m++)
		kconv_nhwc_im2col_row(g, j->x + m / P * HW * g->C, 0, m % P, 0, col + (m - m0) * p->K);
	k_epilogue ep = j->ep;
	ep.bias_n = ep.bias_n ? ep.bias_n + o0 : NULL;
	ep.residual = ep.residual ? ep.residual + m0 * g->O + o0 : NULL;
	kgemm_lowp_w(j->wt, rows, no, p->K, col, p->K, j->w + o0 * p->K, p->K, j->y + m0 * g->O + o0, g->O, &ep, NULL,
		     slot + p->col_bytes);
}

static bool i2c_supports(const k_call *call)
{
	kconv_nhwc c;
	return lowp_ok(call, &c) && !is_pointwise(&c.g);
}

static size_t i2c_ws(const k_call *call, int nthreads)
{
	kconv_nhwc c;
	if (kconv_nhwc_make(call, &c) != AIR_OK || c.g.KH * c.g.KW * c.g.C <= 0)
		return 0;
	nthreads = nthreads < 1 ? 1 : nthreads;
	i2c_plan p = make_plan(&c.g, nthreads, call->prepared != NULL);
	return p.w_bytes + (size_t)nthreads * p.slot_bytes;
}

static air_status i2c_run(const k_call *call)
{
	i2c_job j;
	AIR_TRY(kconv_nhwc_make(call, &j.c));
	const kconv_geom *g = &j.c.g;
	if (call->out[0].numel == 0)
		return AIR_OK;
	j.p = make_plan(g, rt_pool_size(call->pool), call->prepared != NULL);
	char *ws = call->workspace;
	if (call->prepared) {
		j.w = ((const lowp_w *)call->prepared)->w;
	} else {
		permute_weight(g, call->in[1].data, (uint16_t *)ws);
		j.w = (const uint16_t *)ws;
	}
	j.slots = ws + j.p.w_bytes;
	j.wt = wtype(call);
	j.x = call->in[0].data;
	j.y = call->out[0].data;
	j.ep = epilogue(call, &j.c);
	rt_pool_run(call->pool, j.p.nrc * j.p.noc, i2c_task, &j);
	return AIR_OK;
}

/* K_INPLACE_RESIDUAL: as the 1x1 kernel's, tile by tile through the GEMM. */
const k_kernel kfast_conv2d_nhwc_lowp_im2col = {"conv2d_nhwc_lowp_im2col", 0, i2c_supports, i2c_prepare, free,
						i2c_ws, i2c_run, K_INPLACE_RESIDUAL};

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
 *     it is a graph input), the order of channels-last im2col's rows, and
 *     one pool-wide GEMM whose A is the im2col, built row by row as the
 *     GEMM packs it (klowp_rows): 12 rows at a time in a thread's scratch,
 *     never whole. Chunks of col in L2 with one-thread GEMMs on each, as
 *     the f32 kernel runs (conv_nhwc_im2col.c), were up to 1.6x slower here
 *     (1.3x over ResNet-50's 19 such convs, Zen 4):
 *     each chunk re-packed the weight, and col went through L2 in f32.
 * Bias, residual and activation go through the GEMM's epilogue. Grouped
 * convolutions (depthwise) are not taken: the lowering keeps their small
 * weights f32 (lowering/conv.py); the reference kernel widens any other. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kernels/conv/conv_nhwc.h"
#include "kernels/gemm/lowp_w.h"

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

/* The implicit im2col: row r of col (output pixel r over all images)
 * built into the GEMM's scratch as it packs A (kernels/gemm/lowp_w.h,
 * klowp_rows), so col never exists whole, in memory or in L2 chunks. */
typedef struct i2c_src {
	const kconv_geom *g;
	const float *x;
} i2c_src;

static const float *i2c_row(const void *ctx, int64_t r, float *tmp)
{
	const i2c_src *s = ctx;
	const kconv_geom *g = s->g;
	const int64_t P = g->OH * g->OW;
	kconv_nhwc_im2col_row(g, s->x + r / P * g->H * g->W * g->C, 0, r % P, 0, tmp);
	return tmp;
}

/* Depends only on the geometry and whether the weight is prepared: the
 * workspace size and the run must agree. The weight, when permuted per
 * call, comes first. */
static size_t weight_room(const kconv_geom *g, bool prepared)
{
	return prepared ? 0 : k_align64(weight_bytes(g));
}

static bool i2c_supports(const k_call *call)
{
	kconv_nhwc c;
	return lowp_ok(call, &c) && !is_pointwise(&c.g);
}

static size_t i2c_ws(const k_call *call, int nthreads)
{
	kconv_nhwc c;
	if (kconv_nhwc_make(call, &c) != AIR_OK)
		return 0;
	const kconv_geom *g = &c.g;
	return weight_room(g, call->prepared != NULL) +
	       kgemm_lowp_w_rows_workspace_bytes(g->N * g->OH * g->OW, g->KH * g->KW * g->C, nthreads);
}

static air_status i2c_run(const k_call *call)
{
	kconv_nhwc c;
	AIR_TRY(kconv_nhwc_make(call, &c));
	const kconv_geom *g = &c.g;
	if (call->out[0].numel == 0)
		return AIR_OK;
	char *ws = call->workspace;
	const uint16_t *w;
	if (call->prepared) {
		w = ((const lowp_w *)call->prepared)->w;
	} else {
		permute_weight(g, call->in[1].data, (uint16_t *)ws);
		w = (const uint16_t *)ws;
	}
	const i2c_src src = {g, call->in[0].data};
	const klowp_rows rows = {i2c_row, &src};
	const int64_t K = g->KH * g->KW * g->C;
	k_epilogue ep = epilogue(call, &c);
	kgemm_lowp_w_rows(wtype(call), g->N * g->OH * g->OW, g->O, K, &rows, w, K, call->out[0].data, g->O, &ep,
			  call->pool, ws + weight_room(g, call->prepared != NULL));
	return AIR_OK;
}

/* K_INPLACE_RESIDUAL: as the 1x1 kernel's, tile by tile through the GEMM. */
const k_kernel kfast_conv2d_nhwc_lowp_im2col = {"conv2d_nhwc_lowp_im2col", 0, i2c_supports, i2c_prepare, free,
						i2c_ws, i2c_run, K_INPLACE_RESIDUAL};

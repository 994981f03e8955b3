/* conv_nhwc_ref.c - reference kernels of the channels-last convolution and
 * pooling ops, f32 with double sums: plain loops over each output element
 * and its window, written to be obviously right. They are the oracle for
 * kernels/conv/conv_nhwc.c, and for the layout pass (NHWC against NCHW). */
#include "kernels/conv/conv_nhwc_ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kernels/matmul/matmul_ref.h"


air_status kconv_nhwc_make(const k_call *call, kconv_nhwc *c)
{
	const k_tensor *x = &call->in[0], *w = &call->in[1], *y = &call->out[0];
	kconv_geom *g = &c->g;
	static const int64_t ones[2] = {1, 1}, zeros[2] = {0, 0};
	int64_t s[2], p[2], d[2];
	kref_pair(call->attrs[0].ints, call->attrs[0].n, ones, s);
	kref_pair(call->attrs[1].ints, call->attrs[1].n, zeros, p);
	kref_pair(call->attrs[2].ints, call->attrs[2].n, ones, d);
	c->has_residual = call->attrs[6].i != 0;
	c->act = (k_act)call->attrs[5].i;
	g->N = x->dims[0];
	g->H = x->dims[1];
	g->W = x->dims[2];
	g->C = x->dims[3];
	g->O = w->dims[0];
	g->Cg = w->dims[1];
	g->KH = w->dims[2];
	g->KW = w->dims[3];
	g->OH = y->dims[1];
	g->OW = y->dims[2];
	g->G = call->attrs[3].i;
	g->Og = g->O >= 0 ? g->O / g->G : -1;
	g->sh = s[0];
	g->sw = s[1];
	g->ph = p[0];
	g->pw = p[1];
	g->dh = d[0];
	g->dw = d[1];
	g->has_bias = kref_present(call->attrs[4].i, call->n_in - c->has_residual, 2);
	if (g->C >= 0 && g->Cg >= 0 && g->C != g->Cg * g->G)
		return air_error(AIR_SHAPE_MISMATCH,
				 "conv2d_nhwc: x has %lld channels but the weight takes %lld x %lld groups",
				 (long long)g->C, (long long)g->Cg, (long long)g->G);
	if (g->has_bias && call->in[2].dims[0] >= 0 && g->O >= 0 && call->in[2].dims[0] != g->O)
		return air_error(AIR_SHAPE_MISMATCH, "conv2d_nhwc: bias has %lld entries for %lld channels",
				 (long long)call->in[2].dims[0], (long long)g->O);
	if (c->has_residual) {
		const k_tensor *r = &call->in[call->n_in - 1];
		for (int k = 0; k < 4; k++)
			if (r->dims[k] >= 0 && y->dims[k] >= 0 && r->dims[k] != y->dims[k])
				return air_error(AIR_SHAPE_MISMATCH, "conv2d_nhwc: the residual's dim %d is %lld, not %lld",
						 k, (long long)r->dims[k], (long long)y->dims[k]);
	}
	return AIR_OK;
}

/* ---- conv2d_nhwc ------------------------------------------------------ */

typedef struct conv_ctx {
	kconv_nhwc c;
	const float *x, *w, *bias, *res;
	float *y;
} conv_ctx;

/* One task: the output row (n, oh), every column and channel. */
static void conv_task(void *p, int64_t t, int thread)
{
	const conv_ctx *cc = p;
	const kconv_geom *g = &cc->c.g;
	int64_t n = t / g->OH, oh = t % g->OH;
	for (int64_t ow = 0; ow < g->OW; ow++) {
		int64_t at = ((n * g->OH + oh) * g->OW + ow) * g->O;
		for (int64_t o = 0; o < g->O; o++) {
			int64_t grp = o / g->Og;
			double s = cc->bias ? cc->bias[o] : 0.0;
			for (int64_t ki = 0; ki < g->KH; ki++) {
				int64_t ih = oh * g->sh - g->ph + ki * g->dh;
				if (ih < 0 || ih >= g->H)
					continue;
				for (int64_t kj = 0; kj < g->KW; kj++) {
					int64_t iw = ow * g->sw - g->pw + kj * g->dw;
					if (iw < 0 || iw >= g->W)
						continue;
					const float *xp = cc->x + ((n * g->H + ih) * g->W + iw) * g->C + grp * g->Cg;
					const float *wp = cc->w + o * g->Cg * g->KH * g->KW + ki * g->KW + kj;
					for (int64_t ci = 0; ci < g->Cg; ci++)
						s += (double)xp[ci] * wp[ci * g->KH * g->KW];
				}
			}
			if (cc->res)
				s += cc->res[at + o];
			kref_act_f64(&s, 1, cc->c.act); /* the same formulas as conv2d's */
			cc->y[at + o] = (float)s;
		}
	}
}

static air_status bad_dtype(const char *op, air_dtype dt)
{
	return air_error(AIR_UNSUPPORTED, "%s: no reference kernel for %s", op, air_dtype_name(dt));
}

air_status kref_conv2d_nhwc(const k_call *call)
{
	conv_ctx c;
	AIR_TRY(kconv_nhwc_make(call, &c.c));
	if (call->out[0].dtype != AIR_F32)
		return bad_dtype("conv2d_nhwc", call->out[0].dtype);
	c.bias = c.c.g.has_bias ? call->in[2].data : NULL;
	c.res = c.c.has_residual ? call->in[call->n_in - 1].data : NULL;
	c.y = call->out[0].data;
	if (call->out[0].numel == 0)
		return AIR_OK;
	float *wide;
	AIR_TRY(kconv_lowp_operands(call, &c.x, &c.w, &wide));
	rt_pool_run(call->pool, c.c.g.N * c.c.g.OH, conv_task, &c);
	free(wide);
	return AIR_OK;
}

/* ---- pooling ---------------------------------------------------------- */

typedef struct pool_ctx {
	const float *x;
	float *y;
	int64_t H, W, C, OH, OW;
	int64_t kh, kw, sh, sw, ph, pw, dh, dw;
	int count_include_pad;
	int64_t divisor;
} pool_ctx;

static void pool_geometry(const k_call *call, pool_ctx *c, bool has_dilation)
{
	const k_tensor *x = &call->in[0], *y = &call->out[0];
	int64_t k[2], s[2], p[2], d[2] = {1, 1};
	static const int64_t ones[2] = {1, 1}, zeros[2] = {0, 0};
	memset(c, 0, sizeof *c);
	kref_pair(call->attrs[0].ints, call->attrs[0].n, ones, k);
	kref_pair(call->attrs[1].ints, call->attrs[1].n, k, s);
	kref_pair(call->attrs[2].ints, call->attrs[2].n, zeros, p);
	if (has_dilation)
		kref_pair(call->attrs[3].ints, call->attrs[3].n, ones, d);
	c->kh = k[0], c->kw = k[1], c->sh = s[0], c->sw = s[1];
	c->ph = p[0], c->pw = p[1], c->dh = d[0], c->dw = d[1];
	c->x = x->data;
	c->y = y->data;
	c->H = x->dims[1];
	c->W = x->dims[2];
	c->C = x->dims[3];
	c->OH = y->dims[1];
	c->OW = y->dims[2];
}

/* NaN wins, as in torch. One task: output row (n, oh). */
static void max_pool_task(void *p, int64_t t, int thread)
{
	const pool_ctx *c = p;
	int64_t n = t / c->OH, oh = t % c->OH;
	for (int64_t ow = 0; ow < c->OW; ow++)
		for (int64_t ch = 0; ch < c->C; ch++) {
			float m = -INFINITY;
			for (int64_t i = 0; i < c->kh; i++) {
				int64_t ih = oh * c->sh - c->ph + i * c->dh;
				if (ih < 0 || ih >= c->H)
					continue;
				for (int64_t j = 0; j < c->kw; j++) {
					int64_t iw = ow * c->sw - c->pw + j * c->dw;
					if (iw < 0 || iw >= c->W)
						continue;
					float v = c->x[((n * c->H + ih) * c->W + iw) * c->C + ch];
					if (v > m || v != v)
						m = v;
				}
			}
			c->y[(t * c->OW + ow) * c->C + ch] = m;
		}
}

/* torch's avg_pool2d divisor rules, as kernels/pool/pool_ref.c. */
static void avg_pool_task(void *p, int64_t t, int thread)
{
	const pool_ctx *c = p;
	int64_t n = t / c->OH, oh = t % c->OH;
	int64_t h0 = oh * c->sh - c->ph, h1 = h0 + c->kh;
	if (h1 > c->H + c->ph)
		h1 = c->H + c->ph;
	int64_t ph_size = h1 - h0;
	h0 = h0 < 0 ? 0 : h0;
	h1 = h1 > c->H ? c->H : h1;
	for (int64_t ow = 0; ow < c->OW; ow++) {
		int64_t w0 = ow * c->sw - c->pw, w1 = w0 + c->kw;
		if (w1 > c->W + c->pw)
			w1 = c->W + c->pw;
		int64_t pool_size = ph_size * (w1 - w0);
		w0 = w0 < 0 ? 0 : w0;
		w1 = w1 > c->W ? c->W : w1;
		int64_t div = c->divisor ? c->divisor : c->count_include_pad ? pool_size : (h1 - h0) * (w1 - w0);
		for (int64_t ch = 0; ch < c->C; ch++) {
			float *y = &c->y[(t * c->OW + ow) * c->C + ch];
			if (h0 >= h1 || w0 >= w1) {
				*y = 0;
				continue;
			}
			double s = 0;
			for (int64_t ih = h0; ih < h1; ih++)
				for (int64_t iw = w0; iw < w1; iw++)
					s += c->x[((n * c->H + ih) * c->W + iw) * c->C + ch];
			*y = (float)(s / (double)div);
		}
	}
}

/* Window i of out_n over in_n: [floor(i*in/out), ceil((i+1)*in/out)). */
static void adaptive_task(void *p, int64_t t, int thread)
{
	const pool_ctx *c = p;
	int64_t n = t / c->OH, oh = t % c->OH;
	int64_t h0 = oh * c->H / c->OH, h1 = ((oh + 1) * c->H + c->OH - 1) / c->OH;
	for (int64_t ow = 0; ow < c->OW; ow++) {
		int64_t w0 = ow * c->W / c->OW, w1 = ((ow + 1) * c->W + c->OW - 1) / c->OW;
		for (int64_t ch = 0; ch < c->C; ch++) {
			double s = 0;
			for (int64_t ih = h0; ih < h1; ih++)
				for (int64_t iw = w0; iw < w1; iw++)
					s += c->x[((n * c->H + ih) * c->W + iw) * c->C + ch];
			c->y[(t * c->OW + ow) * c->C + ch] = (float)(s / (double)((h1 - h0) * (w1 - w0)));
		}
	}
}

static air_status run_pool(const k_call *call, pool_ctx *c, rt_task_fn fn, const char *op)
{
	const k_tensor *y = &call->out[0];
	if (y->dtype != AIR_F32)
		return bad_dtype(op, y->dtype);
	if (y->numel == 0)
		return AIR_OK;
	rt_pool_run(call->pool, y->dims[0] * c->OH, fn, c);
	return AIR_OK;
}

air_status kref_max_pool2d_nhwc(const k_call *call)
{
	pool_ctx c;
	pool_geometry(call, &c, true);
	return run_pool(call, &c, max_pool_task, "max_pool2d_nhwc");
}

air_status kref_avg_pool2d_nhwc(const k_call *call)
{
	pool_ctx c;
	pool_geometry(call, &c, false);
	c.count_include_pad = call->attrs[4].i != 0;
	c.divisor = call->attrs[5].i;
	return run_pool(call, &c, avg_pool_task, "avg_pool2d_nhwc");
}

air_status kref_adaptive_avg_pool2d_nhwc(const k_call *call)
{
	const k_tensor *x = &call->in[0], *y = &call->out[0];
	pool_ctx c;
	memset(&c, 0, sizeof c);
	c.x = x->data;
	c.y = y->data;
	c.H = x->dims[1];
	c.W = x->dims[2];
	c.C = x->dims[3];
	c.OH = y->dims[1];
	c.OW = y->dims[2];
	if (y->numel > 0 && (c.H == 0 || c.W == 0))
		return air_error(AIR_SHAPE_MISMATCH, "adaptive_avg_pool2d_nhwc: cannot pool an empty %s",
				 c.H == 0 ? "height" : "width");
	return run_pool(call, &c, adaptive_task, "adaptive_avg_pool2d_nhwc");
}

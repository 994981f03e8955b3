/* conv_ref.c - reference kernel of 2-D convolution, NCHW, and the conv2d
 * geometry the fast convolutions share. Direct loops written to be obviously
 * right (they are the oracle for the fast convolutions); the inner loops run
 * over a contiguous output row with padding handled by clipping the range,
 * not by branches. */
#include "kernels/conv/conv_ref.h"

#include <stdlib.h>

#include "core/error.h"
#include "kernels/common/half.h"

static air_status bad_dtype(const char *op, air_dtype dt)
{
	return air_error(AIR_UNSUPPORTED, "%s: no reference kernel for %s", op, air_dtype_name(dt));
}

/* ---- conv2d ---------------------------------------------------------- */

static float widen(air_dtype dt, uint16_t h)
{
	return dt == AIR_BF16 ? k_bf16_to_f32(h) : k_f16_to_f32(h);
}

air_status kconv_lowp_operands(const k_call *call, const float **x, const float **w, float **owned)
{
	const k_tensor *xt = &call->in[0], *wt = &call->in[1];
	*owned = NULL;
	*x = xt->data;
	*w = wt->data;
	if (wt->dtype != AIR_BF16 && wt->dtype != AIR_F16)
		return AIR_OK;
	int64_t n = xt->numel + wt->numel;
	float *f = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
	if (!f)
		return air_error(AIR_OUT_OF_MEMORY, "conv2d: no memory to widen the %s weight", air_dtype_name(wt->dtype));
	const float *xs = xt->data;
	const uint16_t *h = wt->data;
	uint16_t (*narrow)(float) = wt->dtype == AIR_BF16 ? k_f32_to_bf16 : k_f32_to_f16;
	for (int64_t i = 0; i < xt->numel; i++)
		f[i] = widen(wt->dtype, narrow(xs[i]));
	for (int64_t i = 0; i < wt->numel; i++)
		f[xt->numel + i] = widen(wt->dtype, h[i]);
	*owned = f;
	*x = f;
	*w = f + xt->numel;
	return AIR_OK;
}

air_status kconv_geom_make(const k_call *call, kconv_geom *g)
{
	const k_tensor *x = &call->in[0], *w = &call->in[1], *y = &call->out[0];
	static const int64_t ones[2] = {1, 1}, zeros[2] = {0, 0};
	int64_t s[2], p[2], d[2];
	kref_pair(call->attrs[0].ints, call->attrs[0].n, ones, s);
	kref_pair(call->attrs[1].ints, call->attrs[1].n, zeros, p);
	kref_pair(call->attrs[2].ints, call->attrs[2].n, ones, d);
	g->N = x->dims[0];
	g->C = x->dims[1];
	g->H = x->dims[2];
	g->W = x->dims[3];
	g->O = w->dims[0];
	g->KH = w->dims[2];
	g->KW = w->dims[3];
	g->OH = y->dims[2];
	g->OW = y->dims[3];
	g->G = call->attrs[3].i;
	g->Cg = w->dims[1];
	g->Og = g->O >= 0 ? g->O / g->G : -1;
	g->sh = s[0];
	g->sw = s[1];
	g->ph = p[0];
	g->pw = p[1];
	g->dh = d[0];
	g->dw = d[1];
	g->has_residual = call->attrs[6].i != 0;
	g->act = (k_act)call->attrs[5].i;
	g->has_bias = kref_present(call->attrs[4].i, call->n_in - g->has_residual, 2);
	if (g->C >= 0 && g->Cg >= 0 && g->C != g->Cg * g->G)
		return air_error(AIR_SHAPE_MISMATCH, "conv2d: x has %lld channels but the weight takes %lld x %lld groups",
				 (long long)g->C, (long long)g->Cg, (long long)g->G);
	if (g->has_bias && call->in[2].dims[0] >= 0 && g->O >= 0 && call->in[2].dims[0] != g->O)
		return air_error(AIR_SHAPE_MISMATCH, "conv2d: bias has %lld entries for %lld channels",
				 (long long)call->in[2].dims[0], (long long)g->O);
	if (g->has_residual && y->numel >= 0 && call->in[call->n_in - 1].numel >= 0)
		AIR_TRY(kref_check_residual("conv2d", &call->in[call->n_in - 1], y));
	return AIR_OK;
}

typedef struct conv_ctx {
	kconv_geom g;
	const void *x, *w, *bias, *res;
	void *y;
} conv_ctx;

/* One task: the output plane (n, o). For each input channel and kernel tap
 * the whole plane gets w * (shifted input), over the rows and columns where
 * the tap reads real input. */
#define CONV_TASK(T)                                                                              \
	static void conv_task_##T(void *p, int64_t t, int thread)                                 \
	{                                                                                         \
		const conv_ctx *c = p;                                                            \
		const kconv_geom *g = &c->g;                                                      \
		int64_t n = t / g->O, o = t % g->O, grp = o / g->Og;                              \
		T *y = (T *)c->y + t * g->OH * g->OW;                                             \
		T b0 = c->bias ? ((const T *)c->bias)[o] : (T)0;                                  \
		for (int64_t i = 0; i < g->OH * g->OW; i++)                                       \
			y[i] = b0;                                                                \
		for (int64_t ci = 0; ci < g->Cg; ci++) {                                          \
			const T *x = (const T *)c->x + (n * g->C + grp * g->Cg + ci) * g->H * g->W; \
			const T *w = (const T *)c->w + (o * g->Cg + ci) * g->KH * g->KW;          \
			for (int64_t ki = 0; ki < g->KH; ki++) {                                  \
				int64_t oh0, oh1;                                                 \
				kconv_valid_range(g->OH, g->H, g->sh, ki * g->dh - g->ph, &oh0, &oh1); \
				for (int64_t kj = 0; kj < g->KW; kj++) {                          \
					T wv = w[ki * g->KW + kj];                                \
					int64_t ow0, ow1, off = kj * g->dw - g->pw;               \
					kconv_valid_range(g->OW, g->W, g->sw, off, &ow0, &ow1);   \
					for (int64_t oh = oh0; oh < oh1; oh++) {                  \
						const T *xr = x + (oh * g->sh + ki * g->dh - g->ph) * g->W; \
						T *yr = y + oh * g->OW;                           \
						for (int64_t ow = ow0; ow < ow1; ow++)            \
							yr[ow] += wv * xr[ow * g->sw + off];      \
					}                                                         \
				}                                                                 \
			}                                                                         \
		}                                                                                 \
		if (c->res) {                                                                     \
			const T *r = (const T *)c->res + t * g->OH * g->OW;                       \
			for (int64_t i = 0; i < g->OH * g->OW; i++)                               \
				y[i] += r[i];                                                     \
		}                                                                                 \
		ACT_##T(y, g->OH * g->OW, g->act);                                                \
	}
#define ACT_float kref_act_f32
#define ACT_double kref_act_f64
CONV_TASK(float)
CONV_TASK(double)

air_status kref_conv2d(const k_call *call)
{
	conv_ctx c;
	AIR_TRY(kconv_geom_make(call, &c.g));
	c.bias = c.g.has_bias ? call->in[2].data : NULL;
	/* the residual must not alias y here: y accumulates over the taps */
	c.res = c.g.has_residual ? call->in[call->n_in - 1].data : NULL;
	c.y = call->out[0].data;
	if (call->out[0].numel == 0)
		return AIR_OK;
	float *wide;
	const float *x, *w;
	AIR_TRY(kconv_lowp_operands(call, &x, &w, &wide));
	c.x = x;
	c.w = w;
	air_status st = AIR_OK;
	switch (call->out[0].dtype) {
	case AIR_F32: rt_pool_run(call->pool, c.g.N * c.g.O, conv_task_float, &c); break;
	case AIR_F64: rt_pool_run(call->pool, c.g.N * c.g.O, conv_task_double, &c); break;
	default: st = bad_dtype("conv2d", call->out[0].dtype);
	}
	free(wide);
	return st;
}

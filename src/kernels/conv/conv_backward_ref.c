/* conv_backward_ref.c - reference kernels of the 2-D convolution's
 * gradients (NCHW), the oracle for conv_backward.c, and the geometry both
 * share. Direct loops that run the forward's taps backwards: each tap
 * (ki, kj) of an output position (oh, ow) read x[oh*sh - ph + ki*dh,
 * ow*sw - pw + kj*dw], so dx there gains w * dy and dw[tap] gains x * dy.
 * Padding is clipped out of the ranges (kconv_valid_range), as the forward
 * reference does. dw sums in double: it adds N*OH*OW products per entry. */
#include "kernels/conv/conv_backward.h"

#include <string.h>

#include "core/error.h"

air_status kconvb_geom(const k_call *call, bool weight, kconv_geom *g)
{
	const k_tensor *dy = &call->in[0], *other = &call->in[1], *out = &call->out[0];
	static const int64_t ones[2] = {1, 1}, zeros[2] = {0, 0};
	int64_t s[2], p[2], d[2];
	kref_pair(call->attrs[KCONVB_STRIDE].ints, call->attrs[KCONVB_STRIDE].n, ones, s);
	kref_pair(call->attrs[KCONVB_PADDING].ints, call->attrs[KCONVB_PADDING].n, zeros, p);
	kref_pair(call->attrs[KCONVB_DILATION].ints, call->attrs[KCONVB_DILATION].n, ones, d);
	memset(g, 0, sizeof *g);
	const k_tensor *x = weight ? other : out, *w = weight ? out : other;
	g->N = dy->dims[0];
	g->O = dy->dims[1];
	g->OH = dy->dims[2];
	g->OW = dy->dims[3];
	g->C = x->dims[1];
	g->H = x->dims[2];
	g->W = x->dims[3];
	g->KH = w->dims[2];
	g->KW = w->dims[3];
	g->G = call->attrs[KCONVB_GROUPS].i;
	g->Cg = w->dims[1];
	g->Og = g->O >= 0 ? g->O / g->G : -1;
	g->sh = s[0];
	g->sw = s[1];
	g->ph = p[0];
	g->pw = p[1];
	g->dh = d[0];
	g->dw = d[1];
	g->act = K_ACT_NONE;
	if (g->C >= 0 && g->Cg >= 0 && g->C != g->Cg * g->G)
		return air_error(AIR_SHAPE_MISMATCH, "conv2d backward: %lld channels are not %lld groups of %lld",
				 (long long)g->C, (long long)g->G, (long long)g->Cg);
	if (g->N >= 0 && x->dims[0] >= 0 && g->N != x->dims[0])
		return air_error(AIR_SHAPE_MISMATCH, "conv2d backward: dy has batch %lld, x %lld", (long long)g->N,
				 (long long)x->dims[0]);
	int64_t ins[2] = {g->H, g->W}, ks[2] = {g->KH, g->KW}, outs[2] = {g->OH, g->OW};
	for (int k = 0; k < 2; k++) {
		if (ins[k] < 0 || ks[k] < 0 || outs[k] < 0)
			continue;
		int64_t want = (ins[k] + 2 * p[k] - d[k] * (ks[k] - 1) - 1) / s[k] + 1;
		if (want != outs[k])
			return air_error(AIR_SHAPE_MISMATCH, "conv2d backward: dy's size %lld is not the forward's %lld",
					 (long long)outs[k], (long long)want);
	}
	return AIR_OK;
}

typedef struct bwd_ctx {
	kconv_geom g;
	const void *dy, *src; /* src: w for dx, x for dw */
	void *out;
} bwd_ctx;

/* One task: the dx plane (n, c), over every output channel of c's group
 * and every tap. */
#define INPUT_TASK(T)                                                                                   \
	static void input_task_##T(void *p, int64_t t, int thread)                                      \
	{                                                                                               \
		(void)thread;                                                                           \
		const bwd_ctx *c = p;                                                                   \
		const kconv_geom *g = &c->g;                                                            \
		int64_t n = t / g->C, ch = t % g->C, grp = ch / g->Cg, ci = ch % g->Cg;                 \
		T *dx = (T *)c->out + t * g->H * g->W;                                                  \
		for (int64_t i = 0; i < g->H * g->W; i++)                                               \
			dx[i] = 0;                                                                      \
		for (int64_t og = 0; og < g->Og; og++) {                                                \
			int64_t o = grp * g->Og + og;                                           \
			const T *dy = (const T *)c->dy + (n * g->O + o) * g->OH * g->OW;                \
			const T *w = (const T *)c->src + (o * g->Cg + ci) * g->KH * g->KW;              \
			for (int64_t ki = 0; ki < g->KH; ki++) {                                        \
				int64_t oh0, oh1, offh = ki * g->dh - g->ph;                            \
				kconv_valid_range(g->OH, g->H, g->sh, offh, &oh0, &oh1);                \
				for (int64_t kj = 0; kj < g->KW; kj++) {                                \
					T wv = w[ki * g->KW + kj];                                      \
					int64_t ow0, ow1, off = kj * g->dw - g->pw;                     \
					kconv_valid_range(g->OW, g->W, g->sw, off, &ow0, &ow1);         \
					for (int64_t oh = oh0; oh < oh1; oh++) {                        \
						T *xr = dx + (oh * g->sh + offh) * g->W;                \
						const T *yr = dy + oh * g->OW;                          \
						for (int64_t ow = ow0; ow < ow1; ow++)                  \
							xr[ow * g->sw + off] += wv * yr[ow];            \
					}                                                               \
				}                                                                       \
			}                                                                               \
		}                                                                                       \
	}

/* One task: the dw entries of output channel o and input channel ci of its
 * group, every tap summed over the batch and dy's positions. */
#define WEIGHT_TASK(T)                                                                                  \
	static void weight_task_##T(void *p, int64_t t, int thread)                                     \
	{                                                                                               \
		(void)thread;                                                                           \
		const bwd_ctx *c = p;                                                                   \
		const kconv_geom *g = &c->g;                                                            \
		int64_t o = t / g->Cg, ci = t % g->Cg, ch = (o / g->Og) * g->Cg + ci;                   \
		T *dw = (T *)c->out + t * g->KH * g->KW;                                                \
		for (int64_t ki = 0; ki < g->KH; ki++) {                                                \
			int64_t oh0, oh1, offh = ki * g->dh - g->ph;                                    \
			kconv_valid_range(g->OH, g->H, g->sh, offh, &oh0, &oh1);                        \
			for (int64_t kj = 0; kj < g->KW; kj++) {                                        \
				int64_t ow0, ow1, off = kj * g->dw - g->pw;                             \
				kconv_valid_range(g->OW, g->W, g->sw, off, &ow0, &ow1);                 \
				double acc = 0;                                                         \
				for (int64_t n = 0; n < g->N; n++) {                                    \
					const T *dy = (const T *)c->dy + (n * g->O + o) * g->OH * g->OW; \
					const T *x = (const T *)c->src + (n * g->C + ch) * g->H * g->W; \
					for (int64_t oh = oh0; oh < oh1; oh++) {                        \
						const T *xr = x + (oh * g->sh + offh) * g->W;           \
						const T *yr = dy + oh * g->OW;                          \
						for (int64_t ow = ow0; ow < ow1; ow++)                  \
							acc += (double)yr[ow] * xr[ow * g->sw + off];   \
					}                                                               \
				}                                                                       \
				dw[ki * g->KW + kj] = (T)acc;                                           \
			}                                                                               \
		}                                                                                       \
	}

INPUT_TASK(float)
INPUT_TASK(double)
WEIGHT_TASK(float)
WEIGHT_TASK(double)

static air_status run(const k_call *call, bool weight)
{
	bwd_ctx c;
	AIR_TRY(kconvb_geom(call, weight, &c.g));
	c.dy = call->in[0].data;
	c.src = call->in[1].data;
	c.out = call->out[0].data;
	if (call->out[0].numel == 0)
		return AIR_OK;
	int64_t tasks = weight ? c.g.O * c.g.Cg : c.g.N * c.g.C;
	bool f64 = call->out[0].dtype == AIR_F64;
	if (!f64 && call->out[0].dtype != AIR_F32)
		return air_error(AIR_UNSUPPORTED, "conv2d backward: no reference kernel for %s",
				 air_dtype_name(call->out[0].dtype));
	if (weight)
		rt_pool_run(call->pool, tasks, f64 ? weight_task_double : weight_task_float, &c);
	else
		rt_pool_run(call->pool, tasks, f64 ? input_task_double : input_task_float, &c);
	return AIR_OK;
}

air_status kref_conv2d_backward_input(const k_call *call)
{
	return run(call, false);
}

air_status kref_conv2d_backward_weight(const k_call *call)
{
	return run(call, true);
}

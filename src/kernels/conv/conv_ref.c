/* conv.c - reference kernels of convolution, inference batch norm and 2-D
 * pooling, NCHW. Direct loops written to be obviously right (they are the
 * oracle for the fast convolutions); the inner loops run over a contiguous
 * output row with padding handled by clipping the range, not by branches,
 * so the pooling and batch-norm kernels are also fast enough to serve until
 * fast variants exist. */
#include "kernels/conv/conv_ref.h"

#include <math.h>
#include <string.h>

#include "core/error.h"

static air_status bad_dtype(const char *op, air_dtype dt)
{
	return air_error(AIR_UNSUPPORTED, "%s: no reference kernel for %s", op, air_dtype_name(dt));
}

/* ---- conv2d ---------------------------------------------------------- */

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
	c.x = call->in[0].data;
	c.w = call->in[1].data;
	c.bias = c.g.has_bias ? call->in[2].data : NULL;
	/* the residual must not alias y here: y accumulates over the taps */
	c.res = c.g.has_residual ? call->in[call->n_in - 1].data : NULL;
	c.y = call->out[0].data;
	if (call->out[0].numel == 0)
		return AIR_OK;
	switch (call->out[0].dtype) {
	case AIR_F32: rt_pool_run(call->pool, c.g.N * c.g.O, conv_task_float, &c); break;
	case AIR_F64: rt_pool_run(call->pool, c.g.N * c.g.O, conv_task_double, &c); break;
	default: return bad_dtype("conv2d", call->out[0].dtype);
	}
	return AIR_OK;
}

/* ---- batch_norm (inference) ------------------------------------------ */

void kref_bn_inputs(const k_call *call, const k_tensor **weight, const k_tensor **bias, const k_tensor **mean,
		    const k_tensor **var)
{
	int i = 1;
	*weight = kref_present(call->attrs[1].i, call->n_in, 3) ? &call->in[i++] : NULL;
	*bias = kref_present(call->attrs[2].i, call->n_in, 3) ? &call->in[i++] : NULL;
	*mean = &call->in[i++];
	*var = &call->in[i];
}

typedef struct bn_ctx {
	const void *x, *w, *b, *mean, *var;
	void *y;
	double eps;
	int64_t C, inner, rows, rows_per_task;
} bn_ctx;

/* y = (x - mean) / sqrt(var + eps) * weight + bias, as y = x * scale + shift
 * with scale and shift per channel in double. */
#define BN_TASK(T)                                                                        \
	static void bn_task_##T(void *p, int64_t t, int thread)                           \
	{                                                                                 \
		const bn_ctx *c = p;                                                      \
		int64_t r0 = t * c->rows_per_task, r1 = r0 + c->rows_per_task;            \
		if (r1 > c->rows)                                                         \
			r1 = c->rows;                                                     \
		for (int64_t r = r0; r < r1; r++) {                                       \
			int64_t ch = r % c->C;                                            \
			double w = c->w ? ((const T *)c->w)[ch] : 1.0;                    \
			double b = c->b ? ((const T *)c->b)[ch] : 0.0;                    \
			double scale = w / sqrt((double)((const T *)c->var)[ch] + c->eps); \
			T s = (T)scale, sh = (T)(b - ((const T *)c->mean)[ch] * scale);   \
			const T *x = (const T *)c->x + r * c->inner;                      \
			T *y = (T *)c->y + r * c->inner;                                  \
			for (int64_t i = 0; i < c->inner; i++)                            \
				y[i] = x[i] * s + sh;                                     \
		}                                                                         \
	}
BN_TASK(float)
BN_TASK(double)

air_status kref_batch_norm(const k_call *call)
{
	const k_tensor *x = &call->in[0], *w, *b, *mean, *var;
	kref_bn_inputs(call, &w, &b, &mean, &var);
	bn_ctx c;
	c.C = x->dims[1];
	const k_tensor *params[4] = {w, b, mean, var};
	for (int i = 0; i < 4; i++)
		if (params[i] && params[i]->dims[0] != c.C)
			return air_error(AIR_SHAPE_MISMATCH, "batch_norm: a parameter has %lld entries for %lld channels",
					 (long long)params[i]->dims[0], (long long)c.C);
	c.x = x->data;
	c.w = w ? w->data : NULL;
	c.b = b ? b->data : NULL;
	c.mean = mean->data;
	c.var = var->data;
	c.y = call->out[0].data;
	c.eps = call->attrs[0].f;
	c.inner = k_numel(x->rank - 2, x->dims + 2);
	c.rows = x->dims[0] * c.C;
	if (x->numel == 0)
		return AIR_OK;
	c.rows_per_task = K_GRAIN / c.inner;
	if (c.rows_per_task < 1)
		c.rows_per_task = 1;
	int64_t ntasks = (c.rows + c.rows_per_task - 1) / c.rows_per_task;
	switch (x->dtype) {
	case AIR_F32: rt_pool_run(call->pool, ntasks, bn_task_float, &c); break;
	case AIR_F64: rt_pool_run(call->pool, ntasks, bn_task_double, &c); break;
	default: return bad_dtype("batch_norm", x->dtype);
	}
	return AIR_OK;
}

/* ---- pooling --------------------------------------------------------- */

typedef struct pool_ctx {
	const void *x;
	void *y;
	int64_t H, W, OH, OW;
	int64_t kh, kw, sh, sw, ph, pw, dh, dw;
	int count_include_pad;
	int64_t divisor;
} pool_ctx;

/* Each task is one output row (plane, oh). */
static void pool_geometry(const k_call *call, pool_ctx *c, bool has_dilation)
{
	const k_tensor *x = &call->in[0], *y = &call->out[0];
	int r = x->rank;
	int64_t k[2], s[2], p[2], d[2] = {1, 1};
	static const int64_t ones[2] = {1, 1}, zeros[2] = {0, 0};
	kref_pair(call->attrs[0].ints, call->attrs[0].n, ones, k);
	kref_pair(call->attrs[1].ints, call->attrs[1].n, k, s);
	kref_pair(call->attrs[2].ints, call->attrs[2].n, zeros, p);
	if (has_dilation)
		kref_pair(call->attrs[3].ints, call->attrs[3].n, ones, d);
	c->x = x->data;
	c->y = y->data;
	c->H = x->dims[r - 2];
	c->W = x->dims[r - 1];
	c->OH = y->dims[r - 2];
	c->OW = y->dims[r - 1];
	c->kh = k[0];
	c->kw = k[1];
	c->sh = s[0];
	c->sw = s[1];
	c->ph = p[0];
	c->pw = p[1];
	c->dh = d[0];
	c->dw = d[1];
}

/* NaN wins, as in torch: once m is NaN, nothing replaces it. */
#define MAX_POOL_TASK(T)                                                                     \
	static void max_pool_task_##T(void *p, int64_t t, int thread)                        \
	{                                                                                    \
		const pool_ctx *c = p;                                                       \
		int64_t plane = t / c->OH, oh = t % c->OH;                                   \
		const T *x = (const T *)c->x + plane * c->H * c->W;                          \
		T *y = (T *)c->y + t * c->OW;                                                \
		for (int64_t ow = 0; ow < c->OW; ow++) {                                     \
			T m = -(T)INFINITY;                                                  \
			for (int64_t i = 0; i < c->kh; i++) {                                \
				int64_t ih = oh * c->sh - c->ph + i * c->dh;                 \
				if (ih < 0 || ih >= c->H)                                    \
					continue;                                            \
				for (int64_t j = 0; j < c->kw; j++) {                        \
					int64_t iw = ow * c->sw - c->pw + j * c->dw;         \
					if (iw < 0 || iw >= c->W)                            \
						continue;                                    \
					T v = x[ih * c->W + iw];                             \
					if (v > m || v != v)                                 \
						m = v;                                       \
				}                                                            \
			}                                                                    \
			y[ow] = m;                                                           \
		}                                                                            \
	}
MAX_POOL_TASK(float)
MAX_POOL_TASK(double)

static air_status run_pool(const k_call *call, pool_ctx *c, rt_task_fn f32, rt_task_fn f64, const char *op)
{
	const k_tensor *y = &call->out[0];
	if (y->numel == 0)
		return AIR_OK;
	int64_t rows = y->numel / c->OW;
	switch (y->dtype) {
	case AIR_F32: rt_pool_run(call->pool, rows, f32, c); break;
	case AIR_F64: rt_pool_run(call->pool, rows, f64, c); break;
	default: return bad_dtype(op, y->dtype);
	}
	return AIR_OK;
}

air_status kref_max_pool2d(const k_call *call)
{
	pool_ctx c;
	memset(&c, 0, sizeof c);
	pool_geometry(call, &c, true);
	return run_pool(call, &c, max_pool_task_float, max_pool_task_double, "max_pool2d");
}

/* torch's avg_pool2d: the window is clipped to the padded input for the
 * count_include_pad divisor, then to the input for the sum and the other
 * divisor; a divisor_override replaces both. */
#define AVG_POOL_TASK(T)                                                                     \
	static void avg_pool_task_##T(void *p, int64_t t, int thread)                        \
	{                                                                                    \
		const pool_ctx *c = p;                                                       \
		int64_t plane = t / c->OH, oh = t % c->OH;                                   \
		const T *x = (const T *)c->x + plane * c->H * c->W;                          \
		T *y = (T *)c->y + t * c->OW;                                                \
		int64_t h0 = oh * c->sh - c->ph, h1 = h0 + c->kh;                            \
		if (h1 > c->H + c->ph)                                                       \
			h1 = c->H + c->ph;                                                   \
		int64_t ph_size = h1 - h0;                                                   \
		if (h0 < 0)                                                                  \
			h0 = 0;                                                              \
		if (h1 > c->H)                                                               \
			h1 = c->H;                                                           \
		for (int64_t ow = 0; ow < c->OW; ow++) {                                     \
			int64_t w0 = ow * c->sw - c->pw, w1 = w0 + c->kw;                    \
			if (w1 > c->W + c->pw)                                               \
				w1 = c->W + c->pw;                                           \
			int64_t pool_size = ph_size * (w1 - w0);                             \
			if (w0 < 0)                                                          \
				w0 = 0;                                                      \
			if (w1 > c->W)                                                       \
				w1 = c->W;                                                   \
			if (h0 >= h1 || w0 >= w1) {                                          \
				y[ow] = 0;                                                   \
				continue;                                                    \
			}                                                                    \
			double s = 0;                                                        \
			for (int64_t ih = h0; ih < h1; ih++)                                 \
				for (int64_t iw = w0; iw < w1; iw++)                         \
					s += x[ih * c->W + iw];                              \
			int64_t div = c->divisor ? c->divisor                                \
				      : c->count_include_pad ? pool_size : (h1 - h0) * (w1 - w0); \
			y[ow] = (T)(s / (double)div);                                        \
		}                                                                            \
	}
AVG_POOL_TASK(float)
AVG_POOL_TASK(double)

air_status kref_avg_pool2d(const k_call *call)
{
	pool_ctx c;
	memset(&c, 0, sizeof c);
	pool_geometry(call, &c, false);
	c.count_include_pad = call->attrs[4].i != 0;
	c.divisor = call->attrs[5].i;
	return run_pool(call, &c, avg_pool_task_float, avg_pool_task_double, "avg_pool2d");
}

/* Window i of out_n over in_n: [floor(i*in/out), ceil((i+1)*in/out)). */
#define ADAPTIVE_TASK(T)                                                                     \
	static void adaptive_task_##T(void *p, int64_t t, int thread)                        \
	{                                                                                    \
		const pool_ctx *c = p;                                                       \
		int64_t plane = t / c->OH, oh = t % c->OH;                                   \
		const T *x = (const T *)c->x + plane * c->H * c->W;                          \
		T *y = (T *)c->y + t * c->OW;                                                \
		int64_t h0 = oh * c->H / c->OH, h1 = ((oh + 1) * c->H + c->OH - 1) / c->OH;  \
		for (int64_t ow = 0; ow < c->OW; ow++) {                                     \
			int64_t w0 = ow * c->W / c->OW, w1 = ((ow + 1) * c->W + c->OW - 1) / c->OW; \
			double s = 0;                                                        \
			for (int64_t ih = h0; ih < h1; ih++)                                 \
				for (int64_t iw = w0; iw < w1; iw++)                         \
					s += x[ih * c->W + iw];                              \
			y[ow] = (T)(s / (double)((h1 - h0) * (w1 - w0)));                    \
		}                                                                            \
	}
ADAPTIVE_TASK(float)
ADAPTIVE_TASK(double)

air_status kref_adaptive_avg_pool2d(const k_call *call)
{
	const k_tensor *x = &call->in[0], *y = &call->out[0];
	int r = x->rank;
	pool_ctx c;
	memset(&c, 0, sizeof c);
	c.x = x->data;
	c.y = y->data;
	c.H = x->dims[r - 2];
	c.W = x->dims[r - 1];
	c.OH = y->dims[r - 2];
	c.OW = y->dims[r - 1];
	if (y->numel > 0 && (c.H == 0 || c.W == 0))
		return air_error(AIR_SHAPE_MISMATCH, "adaptive_avg_pool2d: cannot pool an empty %s",
				 c.H == 0 ? "height" : "width");
	return run_pool(call, &c, adaptive_task_float, adaptive_task_double, "adaptive_avg_pool2d");
}

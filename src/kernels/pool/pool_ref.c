/* pool_ref.c - reference kernels of 2-D pooling, NCHW: max_pool2d,
 * avg_pool2d and adaptive_avg_pool2d, one task per output row. Direct loops
 * written to be obviously right (the oracle for pool_nchw.c), also fast
 * enough to serve until fast variants exist. */
#include "kernels/pool/pool_ref.h"

#include <math.h>
#include <string.h>

#include "core/error.h"
#include "kernels/conv/conv_ref.h" /* kref_pair */

static air_status bad_dtype(const char *op, air_dtype dt)
{
	return air_error(AIR_UNSUPPORTED, "%s: no reference kernel for %s", op, air_dtype_name(dt));
}

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

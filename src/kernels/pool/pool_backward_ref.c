/* pool_backward_ref.c - max pooling with indices and its backward, NCHW
 * (or CHW), as torch's CPU kernels define them:
 *   max_pool2d_indices: y as max_pool2d's, and the int64 index h * W + w
 *     within its plane of the input each y came from. The first maximum in
 *     window order wins a tie; a NaN wins over numbers and a later NaN over
 *     an earlier one; a window of -inf only keeps its first in-bounds
 *     position (torch's starting index).
 *   max_pool2d_backward(dy, indices): dx zero, then each dy added at its
 *     index (overlapping windows may pick one input twice: both add).
 * One task per plane, so the backward's adds into a plane never race and
 * come in output order, as torch's. Simple loops, also the kernels that run:
 * pooling is a small part of a network's time. */
#include "kernels/pool/pool_backward.h"

#include <math.h>
#include <string.h>

#include "core/error.h"
#include "kernels/conv/conv_ref.h" /* kref_pair */

typedef struct mp_ctx {
	const void *x, *dy;
	const int64_t *idx_in;
	void *y, *dx;
	int64_t *idx;
	int64_t H, W, OH, OW;
	int64_t kh, kw, sh, sw, ph, pw, dh, dw;
} mp_ctx;

#define MAX_POOL_INDICES_TASK(T)                                                                     \
	static void indices_task_##T(void *p, int64_t plane, int thread)                             \
	{                                                                                            \
		(void)thread;                                                                        \
		const mp_ctx *c = p;                                                                 \
		const T *x = (const T *)c->x + plane * c->H * c->W;                                  \
		T *y = (T *)c->y + plane * c->OH * c->OW;                                            \
		int64_t *idx = c->idx + plane * c->OH * c->OW;                                       \
		for (int64_t oh = 0; oh < c->OH; oh++)                                               \
			for (int64_t ow = 0; ow < c->OW; ow++) {                                     \
				int64_t h0 = oh * c->sh - c->ph, w0 = ow * c->sw - c->pw;            \
				while (h0 < 0)                                                       \
					h0 += c->dh;                                                 \
				while (w0 < 0)                                                       \
					w0 += c->dw;                                                 \
				T m = -(T)INFINITY;                                                  \
				int64_t at = h0 * c->W + w0;                                         \
				for (int64_t i = 0; i < c->kh; i++) {                                \
					int64_t ih = oh * c->sh - c->ph + i * c->dh;                 \
					if (ih < 0 || ih >= c->H)                                    \
						continue;                                            \
					for (int64_t j = 0; j < c->kw; j++) {                        \
						int64_t iw = ow * c->sw - c->pw + j * c->dw;         \
						if (iw < 0 || iw >= c->W)                            \
							continue;                                    \
						T v = x[ih * c->W + iw];                             \
						if (v > m || v != v) {                               \
							m = v;                                       \
							at = ih * c->W + iw;                         \
						}                                                    \
					}                                                            \
				}                                                                    \
				y[oh * c->OW + ow] = m;                                              \
				idx[oh * c->OW + ow] = at;                                           \
			}                                                                            \
	}

#define MAX_POOL_BACKWARD_TASK(T)                                                                    \
	static void backward_task_##T(void *p, int64_t plane, int thread)                            \
	{                                                                                            \
		(void)thread;                                                                        \
		const mp_ctx *c = p;                                                                 \
		T *dx = (T *)c->dx + plane * c->H * c->W;                                            \
		const T *dy = (const T *)c->dy + plane * c->OH * c->OW;                              \
		const int64_t *idx = c->idx_in + plane * c->OH * c->OW;                              \
		memset(dx, 0, sizeof(T) * (size_t)(c->H * c->W));                                   \
		for (int64_t i = 0; i < c->OH * c->OW; i++)                                          \
			dx[idx[i]] += dy[i];                                                         \
	}

MAX_POOL_INDICES_TASK(float)
MAX_POOL_INDICES_TASK(double)
MAX_POOL_BACKWARD_TASK(float)
MAX_POOL_BACKWARD_TASK(double)

air_status kref_max_pool2d_indices(const k_call *call)
{
	const k_tensor *x = &call->in[0], *y = &call->out[0];
	int r = x->rank;
	static const int64_t ones[2] = {1, 1}, zeros[2] = {0, 0};
	int64_t k[2], s[2], p[2], d[2];
	kref_pair(call->attrs[0].ints, call->attrs[0].n, ones, k);
	kref_pair(call->attrs[1].ints, call->attrs[1].n, k, s);
	kref_pair(call->attrs[2].ints, call->attrs[2].n, zeros, p);
	kref_pair(call->attrs[3].ints, call->attrs[3].n, ones, d);
	mp_ctx c = {x->data, NULL, NULL, y->data, NULL, call->out[1].data, x->dims[r - 2], x->dims[r - 1],
		    y->dims[r - 2], y->dims[r - 1], k[0], k[1], s[0], s[1], p[0], p[1], d[0], d[1]};
	if (y->numel == 0)
		return AIR_OK;
	int64_t planes = y->numel / (c.OH * c.OW);
	switch (y->dtype) {
	case AIR_F32: rt_pool_run(call->pool, planes, indices_task_float, &c); break;
	case AIR_F64: rt_pool_run(call->pool, planes, indices_task_double, &c); break;
	default: return air_error(AIR_UNSUPPORTED, "max_pool2d_indices: no kernel for %s", air_dtype_name(y->dtype));
	}
	return AIR_OK;
}

air_status kref_max_pool2d_backward(const k_call *call)
{
	const k_tensor *dy = &call->in[0], *idx = &call->in[1], *dx = &call->out[0];
	int r = dx->rank;
	mp_ctx c;
	memset(&c, 0, sizeof c);
	c.dy = dy->data;
	c.idx_in = idx->data;
	c.dx = dx->data;
	c.H = dx->dims[r - 2];
	c.W = dx->dims[r - 1];
	c.OH = dy->dims[r - 2];
	c.OW = dy->dims[r - 1];
	if (dx->numel == 0)
		return AIR_OK;
	/* an index outside its plane would write outside dx: refuse the call */
	for (int64_t i = 0; i < idx->numel; i++)
		if (c.idx_in[i] < 0 || c.idx_in[i] >= c.H * c.W)
			return air_error(AIR_INVALID_ARGUMENT, "max_pool2d_backward: index %lld is outside the %lldx%lld input",
					 (long long)c.idx_in[i], (long long)c.H, (long long)c.W);
	int64_t planes = dx->numel / (c.H * c.W);
	switch (dx->dtype) {
	case AIR_F32: rt_pool_run(call->pool, planes, backward_task_float, &c); break;
	case AIR_F64: rt_pool_run(call->pool, planes, backward_task_double, &c); break;
	default: return air_error(AIR_UNSUPPORTED, "max_pool2d_backward: no kernel for %s", air_dtype_name(dx->dtype));
	}
	return AIR_OK;
}

/* softmax_backward_ref.c - the reference gradients of softmax and
 * log_softmax (softmax_backward.h): x viewed as [outer, len, inner] around
 * the axis; each (outer, inner) line is one task's, its sum in double. */
#include <math.h>

#include "core/error.h"
#include "kernels/norm/softmax_backward.h"

typedef struct sb_ctx {
	const void *g, *y;
	void *out;
	int64_t len, inner, lines_per_task, lines;
	bool log;
} sb_ctx;

#define SB_DEFINE(T, SUFFIX)                                                                   \
	static void lines_##SUFFIX(void *arg, int64_t t, int thread)                           \
	{                                                                                      \
		(void)thread;                                                                  \
		const sb_ctx *c = arg;                                                         \
		int64_t l1 = (t + 1) * c->lines_per_task < c->lines ? (t + 1) * c->lines_per_task : c->lines; \
		for (int64_t l = t * c->lines_per_task; l < l1; l++) {                         \
			int64_t base = (l / c->inner) * c->len * c->inner + l % c->inner;      \
			const T *g = (const T *)c->g + base, *y = (const T *)c->y + base;      \
			T *o = (T *)c->out + base;                                             \
			double s = 0;                                                          \
			for (int64_t i = 0; i < c->len; i++)                                   \
				s += c->log ? (double)g[i * c->inner]                          \
					    : (double)g[i * c->inner] * (double)y[i * c->inner]; \
			for (int64_t i = 0; i < c->len; i++) {                                 \
				double gi = g[i * c->inner], yi = y[i * c->inner];             \
				o[i * c->inner] = (T)(c->log ? gi - exp(yi) * s : yi * (gi - s)); \
			}                                                                      \
		}                                                                              \
	}

SB_DEFINE(float, f32)
SB_DEFINE(double, f64)

air_status kref_softmax_backward(const k_call *call)
{
	const k_tensor *g = &call->in[0];
	int rank = g->rank ? g->rank : 1;
	int64_t axis = call->attrs[0].i;
	if (axis < 0)
		axis += rank;
	sb_ctx c;
	c.g = g->data;
	c.y = call->in[1].data;
	c.out = call->out[0].data;
	c.log = call->attrs[1].i != 0;
	c.len = g->rank ? g->dims[axis] : 1;
	c.inner = 1;
	for (int d = (int)axis + 1; d < g->rank; d++)
		c.inner *= g->dims[d];
	for (int d = 0; d < g->rank; d++)
		if (g->dims[d] != call->in[1].dims[d])
			return air_error(AIR_SHAPE_MISMATCH, "softmax_backward: g and y differ at dim %d", d);
	if (g->numel == 0)
		return AIR_OK;
	c.lines = g->numel / c.len;
	c.lines_per_task = k_cdiv(K_GRAIN, c.len);
	rt_task_fn fn;
	switch (g->dtype) {
	case AIR_F32: fn = lines_f32; break;
	case AIR_F64: fn = lines_f64; break;
	default: return air_error(AIR_UNSUPPORTED, "softmax_backward: no kernel for %s", air_dtype_name(g->dtype));
	}
	rt_pool_run(call->pool, k_cdiv(c.lines, c.lines_per_task), fn, &c);
	return AIR_OK;
}

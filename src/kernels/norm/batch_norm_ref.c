/* batch_norm_ref.c - reference kernel of inference batch norm over [N, C,
 * ...]: one multiply-add per element with a per-channel scale and shift,
 * fast enough to serve until a fast variant exists. */
#include "kernels/norm/norm_ref.h"

#include <math.h>

#include "core/error.h"

static air_status bad_dtype(const char *op, air_dtype dt)
{
	return air_error(AIR_UNSUPPORTED, "%s: no reference kernel for %s", op, air_dtype_name(dt));
}

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

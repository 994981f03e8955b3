/* layer_norm_backward_ref.c - the reference gradients of layer_norm (the
 * oracle for the fast kernel): per row, with xhat = (x - mean) * rstd and
 * gw = grad_out * weight,
 *   grad_x = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)),
 * and per column grad_weight = sum over rows of grad_out * xhat, grad_bias =
 * sum of grad_out. Sums in double. Rows are split over the pool for grad_x,
 * columns for the column sums, so no two tasks write one element. */
#include "core/error.h"
#include "kernels/norm/layer_norm_backward.h"

air_status kn_lnb_shape(const k_call *call, int64_t *rows, int64_t *n)
{
	const k_tensor *x = &call->in[1];
	int nd = (int)call->attrs[0].i;
	*n = 1;
	for (int d = x->rank - nd; d < x->rank; d++)
		*n *= x->dims[d];
	*rows = *n ? x->numel / *n : 0;
	for (int d = 0; d < x->rank; d++)
		if (call->in[0].dims[d] != x->dims[d])
			return air_error(AIR_SHAPE_MISMATCH, "layer_norm_backward: grad_out and x differ at dim %d", d);
	if (call->in[2].numel != *rows || call->in[3].numel != *rows)
		return air_error(AIR_SHAPE_MISMATCH, "layer_norm_backward: mean and rstd need %lld values, got %lld, %lld",
				 (long long)*rows, (long long)call->in[2].numel, (long long)call->in[3].numel);
	if (call->n_in > 4)
		for (int d = 0; d < nd; d++)
			if (call->in[4].dims[d] != x->dims[x->rank - nd + d])
				return air_error(AIR_SHAPE_MISMATCH, "layer_norm_backward: weight has size %lld at dim %d where x has %lld",
						 (long long)call->in[4].dims[d], d, (long long)x->dims[x->rank - nd + d]);
	return AIR_OK;
}

typedef struct lnb_ctx {
	const void *g, *x, *mean, *rstd, *w;
	void *gx, *gw, *gb;
	int64_t rows, n;
} lnb_ctx;

#define LNB_DEFINE(T, SUFFIX)                                                                   \
	static void rows_##SUFFIX(void *arg, int64_t r, int thread)                             \
	{                                                                                       \
		(void)thread;                                                                   \
		const lnb_ctx *c = arg;                                                         \
		const T *g = (const T *)c->g + r * c->n, *x = (const T *)c->x + r * c->n;      \
		const T *w = c->w;                                                              \
		T *gx = (T *)c->gx + r * c->n;                                                  \
		double mu = ((const T *)c->mean)[r], rs = ((const T *)c->rstd)[r];              \
		double a = 0, b = 0;                                                            \
		for (int64_t i = 0; i < c->n; i++) {                                            \
			double gw = (double)g[i] * (w ? (double)w[i] : 1.0);                    \
			a += gw;                                                                \
			b += gw * ((double)x[i] - mu) * rs;                                     \
		}                                                                               \
		a /= (double)c->n;                                                              \
		b /= (double)c->n;                                                              \
		for (int64_t i = 0; i < c->n; i++) {                                            \
			double gw = (double)g[i] * (w ? (double)w[i] : 1.0);                    \
			double xh = ((double)x[i] - mu) * rs;                                   \
			gx[i] = (T)(rs * (gw - a - xh * b));                                    \
		}                                                                               \
	}                                                                                       \
	static void cols_##SUFFIX(void *arg, int64_t j, int thread)                             \
	{                                                                                       \
		(void)thread;                                                                   \
		const lnb_ctx *c = arg;                                                         \
		const T *g = c->g, *x = c->x, *mean = c->mean, *rstd = c->rstd;                 \
		double sw = 0, sb = 0;                                                          \
		for (int64_t r = 0; r < c->rows; r++) {                                         \
			double gv = g[r * c->n + j];                                            \
			sw += gv * ((double)x[r * c->n + j] - (double)mean[r]) * (double)rstd[r]; \
			sb += gv;                                                               \
		}                                                                               \
		((T *)c->gw)[j] = (T)sw;                                                        \
		((T *)c->gb)[j] = (T)sb;                                                        \
	}

LNB_DEFINE(float, f32)
LNB_DEFINE(double, f64)

air_status kref_layer_norm_backward(const k_call *call)
{
	int64_t rows, n;
	AIR_TRY(kn_lnb_shape(call, &rows, &n));
	lnb_ctx c = {call->in[0].data, call->in[1].data, call->in[2].data, call->in[3].data,
		     call->n_in > 4 ? call->in[4].data : NULL, call->out[0].data, call->out[1].data, call->out[2].data,
		     rows, n};
	bool f32 = call->in[1].dtype == AIR_F32;
	if (call->in[1].dtype != AIR_F32 && call->in[1].dtype != AIR_F64)
		return air_error(AIR_UNSUPPORTED, "layer_norm_backward: no kernel for %s",
				 air_dtype_name(call->in[1].dtype));
	if (n > 0)
		rt_pool_run(call->pool, rows, f32 ? rows_f32 : rows_f64, &c);
	rt_pool_run(call->pool, n, f32 ? cols_f32 : cols_f64, &c);
	return AIR_OK;
}

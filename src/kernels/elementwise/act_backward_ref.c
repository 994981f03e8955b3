/* act_backward_ref.c - reference kernels of activation_backward and
 * dropout_backward (act_backward.h): each element in double through libm,
 * rounded once; f32 and f64; operands of one shape (no broadcast). */
#include <math.h>

#include "core/error.h"
#include "kernels/elementwise/act_backward.h"

static const double SQRT1_2 = 0.70710678118654752440, INV_SQRT_2PI = 0.39894228040143267794;
static const double GELU_BETA = 0.79788456080286535588, GELU_KAPPA = 0.044715; /* sqrt(2/pi) */

static double act_grad(int kind, double g, double t)
{
	switch (kind) {
	case KA_GELU: return g * (0.5 * (1.0 + erf(t * SQRT1_2)) + t * INV_SQRT_2PI * exp(-0.5 * t * t));
	case KA_GELU_TANH: {
		double th = tanh(GELU_BETA * (t + GELU_KAPPA * t * t * t));
		return g * (0.5 * (1.0 + th) + 0.5 * t * (1.0 - th * th) * GELU_BETA * (1.0 + 3.0 * GELU_KAPPA * t * t));
	}
	case KA_SILU: {
		double s = 1.0 / (1.0 + exp(-t));
		return g * s * (1.0 + t * (1.0 - s));
	}
	case KA_TANH: return g * (1.0 - t * t);
	default: return g * (1.0 - t) * t;
	}
}

air_status kref_activation_backward(const k_call *call)
{
	const k_tensor *g = &call->in[0], *t = &call->in[1];
	int kind = (int)call->attrs[0].i;
	if (g->numel != t->numel || g->numel != call->out[0].numel)
		return air_error(AIR_SHAPE_MISMATCH, "activation_backward: %lld gradients for %lld values",
				 (long long)g->numel, (long long)t->numel);
	if (g->dtype == AIR_F32) {
		const float *gp = g->data, *tp = t->data;
		float *y = call->out[0].data;
		for (int64_t i = 0; i < g->numel; i++)
			y[i] = (float)act_grad(kind, gp[i], tp[i]);
	} else if (g->dtype == AIR_F64) {
		const double *gp = g->data, *tp = t->data;
		double *y = call->out[0].data;
		for (int64_t i = 0; i < g->numel; i++)
			y[i] = act_grad(kind, gp[i], tp[i]);
	} else {
		return air_error(AIR_UNSUPPORTED, "activation_backward: no kernel for %s", air_dtype_name(g->dtype));
	}
	return AIR_OK;
}

air_status kref_dropout_backward(const k_call *call)
{
	const k_tensor *g = &call->in[0], *m = &call->in[1];
	if (g->numel != m->numel || g->numel != call->out[0].numel)
		return air_error(AIR_SHAPE_MISMATCH, "dropout_backward: %lld gradients for %lld mask values",
				 (long long)g->numel, (long long)m->numel);
	const uint8_t *mp = m->data;
	double scale = call->attrs[0].f;
	if (g->dtype == AIR_F32) {
		/* torch: g * (mask * scale), the product rounded to f32 first */
		const float *gp = g->data;
		float *y = call->out[0].data, s = (float)scale;
		for (int64_t i = 0; i < g->numel; i++)
			y[i] = gp[i] * ((float)mp[i] * s);
	} else if (g->dtype == AIR_F64) {
		const double *gp = g->data;
		double *y = call->out[0].data;
		for (int64_t i = 0; i < g->numel; i++)
			y[i] = gp[i] * ((double)mp[i] * scale);
	} else {
		return air_error(AIR_UNSUPPORTED, "dropout_backward: no kernel for %s", air_dtype_name(g->dtype));
	}
	return AIR_OK;
}

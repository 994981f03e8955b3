/* act_backward.c - the fast f32 activation_backward and dropout_backward:
 * chunks of K_GRAIN elements over the pool, each in tiles of AB_TILE whose
 * transcendental part (erf, exp, tanh, sigmoid) goes through vmath into a
 * stack buffer and whose arithmetic is a plain loop the vectorizer takes
 * (built with its dynamic cost model: CMakeLists.txt). One pass over g, t
 * and the output instead of the seven to nine of the op-by-op formula. */
#include "core/error.h"
#include "kernels/common/cpu.h"
#include "kernels/elementwise/act_backward.h"
#include "kernels/elementwise/dropout.h"
#include "kernels/vmath/vmath.h"

enum { AB_TILE = 256 };

static const float SQRT1_2 = 0.70710678118654752440f, INV_SQRT_2PI = 0.39894228040143267794f;
static const float GELU_BETA = 0.79788456080286535588f, GELU_KAPPA = 0.044715f;

typedef struct ab_job {
	const float *g, *t;
	const uint8_t *mask;
	float *y;
	int64_t n;
	int kind;
	float scale;
} ab_job;

/* One tile of m <= AB_TILE elements. */
static void act_tile(int kind, const float *restrict g, const float *restrict t, float *restrict y, int64_t m)
{
	float a[AB_TILE], b[AB_TILE];
	switch (kind) {
	case KA_GELU:
		for (int64_t i = 0; i < m; i++) {
			a[i] = t[i] * SQRT1_2;
			b[i] = -0.5f * t[i] * t[i];
		}
		kv_erf_f32(a, a, m);
		kv_exp_f32(b, b, m);
		for (int64_t i = 0; i < m; i++)
			y[i] = g[i] * (0.5f * (1.0f + a[i]) + t[i] * (INV_SQRT_2PI * b[i]));
		break;
	case KA_GELU_TANH:
		for (int64_t i = 0; i < m; i++)
			a[i] = GELU_BETA * (t[i] + GELU_KAPPA * t[i] * t[i] * t[i]);
		kv_tanh_f32(a, a, m);
		for (int64_t i = 0; i < m; i++) {
			float th = a[i], x = t[i];
			y[i] = g[i] * (0.5f * (1.0f + th) +
				       0.5f * x * (1.0f - th * th) * GELU_BETA * (1.0f + 3.0f * GELU_KAPPA * x * x));
		}
		break;
	case KA_SILU:
		kv_sigmoid_f32(t, a, m);
		for (int64_t i = 0; i < m; i++)
			y[i] = g[i] * a[i] * (1.0f + t[i] * (1.0f - a[i]));
		break;
	case KA_TANH:
		for (int64_t i = 0; i < m; i++)
			y[i] = g[i] * (1.0f - t[i] * t[i]);
		break;
	default:
		for (int64_t i = 0; i < m; i++)
			y[i] = g[i] * (1.0f - t[i]) * t[i];
		break;
	}
}

static void act_task(void *arg, int64_t c, int thread)
{
	(void)thread;
	const ab_job *j = arg;
	int64_t i1 = (c + 1) * K_GRAIN < j->n ? (c + 1) * K_GRAIN : j->n;
	for (int64_t i = c * K_GRAIN; i < i1; i += AB_TILE)
		act_tile(j->kind, j->g + i, j->t + i, j->y + i, i1 - i < AB_TILE ? i1 - i : AB_TILE);
}

static void mask_task(void *arg, int64_t c, int thread)
{
	(void)thread;
	const ab_job *j = arg;
	int64_t i0 = c * K_GRAIN, i1 = i0 + K_GRAIN < j->n ? i0 + K_GRAIN : j->n;
	const float *restrict g = j->g;
	const uint8_t *restrict m = j->mask;
	float *restrict y = j->y;
	float s = j->scale;
#ifdef AIR_HAVE_X86
	if (kcpu_features() & KCPU_AVX2) {
		kd_masked_scale_avx2(g + i0, m + i0, y + i0, i1 - i0, s);
		return;
	}
#endif
	for (int64_t i = i0; i < i1; i++)
		y[i] = g[i] * ((float)m[i] * s);
}

/* same element count everywhere (shape inference made the shapes equal) */
static bool ab_supports(const k_call *call)
{
	return call->in[0].dtype == AIR_F32 && call->out[0].dtype == AIR_F32 &&
	       call->in[0].numel == call->in[1].numel && call->in[0].numel == call->out[0].numel;
}

static air_status act_run(const k_call *call)
{
	ab_job j = {call->in[0].data, call->in[1].data, NULL, call->out[0].data, call->out[0].numel,
		    (int)call->attrs[0].i, 0};
	rt_pool_run(call->pool, k_cdiv(j.n, K_GRAIN), act_task, &j);
	return AIR_OK;
}

static air_status mask_run(const k_call *call)
{
	ab_job j = {call->in[0].data, NULL, call->in[1].data, call->out[0].data, call->out[0].numel, 0,
		    (float)call->attrs[0].f};
	rt_pool_run(call->pool, k_cdiv(j.n, K_GRAIN), mask_task, &j);
	return AIR_OK;
}

/* Not K_INPLACE_ANY: the tiles' pointers are restrict. */
const k_kernel kfast_activation_backward = {"activation_backward_vmath", 0, ab_supports, NULL, NULL, NULL, act_run};
const k_kernel kfast_dropout_backward = {"dropout_backward_lanes", 0, ab_supports, NULL, NULL, NULL, mask_run};

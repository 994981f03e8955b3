/* elu_fast.c - elu (and SELU, CELU) over f32 through vmath's exp. Built
 * with the vectorizer's dynamic cost model and -fno-trapping-math
 * (CMakeLists.txt): its selects become blends, where GCC's -O2 scalar code
 * branched on every element's sign and mispredicted half of them (9 ns an
 * element). */
#include <math.h>

#include "kernels/norm/rowops_fast.h"
#include "kernels/vmath/vmath.h"

/* elu through vmath's exp, a tile at a time: expm1(t) is exp(t) - 1 where
 * that keeps its relative accuracy (|t| >= 0.35: at most 3.4x exp's own
 * error) and a Taylor polynomial nearer 0 (its first dropped term is under
 * 2e-8 of t). The reference's libm expm1f took 6 ns an element. */
typedef struct elu_job {
	const float *x;
	float *y;
	int64_t n;
	float pos, neg, in; /* scale, alpha * scale, input_scale */
} elu_job;

enum { ELU_TILE = 256 };

static void elu_task(void *arg, int64_t t, int thread)
{
	(void)thread;
	const elu_job *j = arg;
	const int64_t i0 = t * K_GRAIN, i1 = j->n - i0 < K_GRAIN ? j->n : i0 + K_GRAIN;
	const kv_unary_f32 vexp = kv_unary(KV_exp);
	/* locals, not j->...: a store through y could alias them */
	const float pos = j->pos, neg = j->neg, in = j->in;
	float tt[ELU_TILE], ex[ELU_TILE];
	for (int64_t b = i0; b < i1; b += ELU_TILE) {
		const int m = (int)(i1 - b < ELU_TILE ? i1 - b : ELU_TILE);
		const float *x = j->x + b;
		float *y = j->y + b;
		for (int i = 0; i < m; i++)
			tt[i] = x[i] * in;
		vexp(tt, ex, m);
		for (int i = 0; i < m; i++) {
			const float v = tt[i], xi = x[i];
			float p = 1.0f / 720 + v * (1.0f / 5040);
			p = 1.0f / 24 + v * (1.0f / 120 + v * p);
			p = v * (1.0f + v * (0.5f + v * (1.0f / 6 + v * p)));
			const float em1 = fabsf(v) < 0.35f ? p : ex[i] - 1.0f;
			const float a = xi * pos, c = em1 * neg;
			y[i] = xi > 0.0f ? a : c;
		}
	}
}

static bool elu_supports(const k_call *call)
{
	return call->n_in == 1 && k_all_f32(call) && call->in[0].numel == call->out[0].numel;
}

static air_status elu_run(const k_call *call)
{
	elu_job j = {call->in[0].data, call->out[0].data, call->out[0].numel,
		     (float)call->attrs[1].f, (float)(call->attrs[0].f * call->attrs[1].f), (float)call->attrs[2].f};
	if (j.n <= 0)
		return AIR_OK;
	rt_pool_run(call->pool, (j.n + K_GRAIN - 1) / K_GRAIN, elu_task, &j);
	return AIR_OK;
}

/* K_INPLACE_ANY: each tile of x is copied before the last loop, which reads
 * x[i] before it writes y[i]. */
const k_kernel kfast_elu_vmath = {"elu_vmath", 0, elu_supports, NULL, NULL, NULL, elu_run, K_INPLACE_ANY};

/* sqrt_where_fast.c - f32 sqrt and where(cond, a, b) as fast kernels: split
 * over the pool, SSE lanes for sqrt (correctly rounded, as sqrtf), a
 * branch-free select for where. Each input is of the output's size or of
 * one element (a scalar operand); other broadcasts stay with the reference.
 *
 * Why: the reference kernels run on one thread, and elementwise fusion
 * leaves a sqrt or where alone when its group does not fit (an AdamW step
 * ran sqrt_ref and where_ref over every parameter before fuse_dag). */
#include "kernels/elementwise/sqrt_where_fast.h"

#include <math.h>
#include <string.h>

#ifdef __SSE2__
#include <immintrin.h>
#endif

#include "kernels/elementwise/elementwise_ref.h"
#include "platform/pool.h"

typedef struct sw_job {
	const float *x, *a, *b;
	const uint8_t *c;
	float *y;
	int64_t n;
	bool ca, aa, ba; /* cond, a, b of the output's size (else one element) */
} sw_job;

static void sqrt_task(void *p, int64_t t, int th)
{
	(void)th;
	const sw_job *j = p;
	int64_t lo = t * K_GRAIN, hi = k_min64(lo + K_GRAIN, j->n), i = lo;
#ifdef __SSE2__
	for (; i + 4 <= hi; i += 4)
		_mm_storeu_ps(j->y + i, _mm_sqrt_ps(_mm_loadu_ps(j->x + i)));
#endif
	for (; i < hi; i++)
		j->y[i] = sqrtf(j->x[i]);
}

static void where_task(void *p, int64_t t, int th)
{
	(void)th;
	const sw_job *j = p;
	int64_t lo = t * K_GRAIN, hi = k_min64(lo + K_GRAIN, j->n);
	if (j->ca && j->aa && j->ba) {
		const uint8_t *c = j->c;
		const float *a = j->a, *b = j->b;
		float *y = j->y;
		for (int64_t i = lo; i < hi; i++)
			y[i] = c[i] ? a[i] : b[i];
		return;
	}
	for (int64_t i = lo; i < hi; i++) {
		uint8_t c = j->c[j->ca ? i : 0];
		j->y[i] = c ? j->a[j->aa ? i : 0] : j->b[j->ba ? i : 0];
	}
}

/* f32 (sqrt) or bool, f32, f32 (where) in, f32 out; each input of the
 * output's numel or of one element. A size unknown at compile time counts
 * as fitting; the run checks again. */
static bool fits(const k_tensor *x, const k_tensor *out)
{
	return x->numel < 0 || out->numel < 0 || x->numel == out->numel || x->numel == 1;
}

static bool sqrt_supports(const k_call *call)
{
	return call->n_in == 1 && call->n_out == 1 && k_all_f32(call) && fits(&call->in[0], &call->out[0]) &&
	       (call->in[0].numel < 0 || call->out[0].numel < 0 || call->in[0].numel == call->out[0].numel);
}

static bool where_supports(const k_call *call)
{
	if (call->n_in != 3 || call->n_out != 1 || call->in[0].dtype != AIR_BOOL || call->in[1].dtype != AIR_F32 ||
	    call->in[2].dtype != AIR_F32 || call->out[0].dtype != AIR_F32)
		return false;
	for (int i = 0; i < 3; i++)
		if (!fits(&call->in[i], &call->out[0]))
			return false;
	return true;
}

static air_status sqrt_run(const k_call *call)
{
	if (call->in[0].numel != call->out[0].numel)
		return kref_sqrt(call);
	sw_job j = {.x = call->in[0].data, .y = call->out[0].data, .n = call->out[0].numel};
	if (j.n > 0)
		rt_pool_run(call->pool, (j.n + K_GRAIN - 1) / K_GRAIN, sqrt_task, &j);
	return AIR_OK;
}

static air_status where_run(const k_call *call)
{
	int64_t n = call->out[0].numel;
	for (int i = 0; i < 3; i++)
		if (call->in[i].numel != n && call->in[i].numel != 1)
			return kref_where(call);
	sw_job j = {.c = call->in[0].data, .a = call->in[1].data, .b = call->in[2].data, .y = call->out[0].data,
		    .n = n, .ca = call->in[0].numel == n, .aa = call->in[1].numel == n, .ba = call->in[2].numel == n};
	if (n > 0)
		rt_pool_run(call->pool, (n + K_GRAIN - 1) / K_GRAIN, where_task, &j);
	return AIR_OK;
}

/* K_INPLACE_ANY: element i (or lanes i..i+3) of every input is loaded
 * before element i of the output is stored, and never read again. */
const k_kernel kfast_sqrt_lanes = {"sqrt_lanes", 0, sqrt_supports, NULL, NULL, NULL, sqrt_run, K_INPLACE_ANY};
const k_kernel kfast_where_lanes = {"where_lanes", 0, where_supports, NULL, NULL, NULL, where_run, K_INPLACE_ANY};

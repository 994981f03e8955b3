/* elementwise_fast.c - relu, and add, sub, mul and div of two f32 tensors
 * of the output's shape, as fast kernels: split over the pool, four lanes
 * at a time.
 *
 * Why: in a training step the batch norms run in eager between torchair's
 * subgraphs, so a relu or a residual add is often alone in its subgraph,
 * where elementwise fusion (one streaming input and constants) has nothing
 * to fuse it with; the backward graph adds gradients tensor to tensor.
 * The reference kernels ran them on one thread: ResNet-50 at batch 4 spent
 * 33 ms a step in add_ref and 12 ms in relu_ref. The ops move memory and
 * do next to no arithmetic, so SSE is as fast as wider vectors here; what
 * counts is the second thread. */
#include "kernels/elementwise_fast.h"

#ifdef __SSE2__
#include <immintrin.h>
#endif

#include "kernels/ref/elementwise.h"
#include "runtime/pool.h"

typedef enum ew_op { EW_RELU, EW_ADD, EW_SUB, EW_MUL, EW_DIV } ew_op;

typedef struct ew_job {
	ew_op op;
	const float *a, *b; /* b: NULL for relu */
	float *y;           /* may be a or b exactly (an in-place op) */
	int64_t n;
} ew_job;

/* torch's relu: NaN stays NaN, -0.0 stays -0.0 (the reference's x < 0 ? 0 : x) */
static inline float relu_f(float x)
{
	return x < 0.0f ? 0.0f : x;
}

static inline float binary_f(ew_op op, float a, float b)
{
	switch (op) {
	case EW_ADD: return a + b;
	case EW_SUB: return a - b;
	case EW_MUL: return a * b;
	case EW_DIV: return a / b;
	default: return relu_f(a);
	}
}

#ifdef __SSE2__
/* max(0, x) returns x when either is NaN, and x for -0.0: relu_f's values */
static inline __m128 binary4(ew_op op, __m128 a, __m128 b)
{
	switch (op) {
	case EW_ADD: return _mm_add_ps(a, b);
	case EW_SUB: return _mm_sub_ps(a, b);
	case EW_MUL: return _mm_mul_ps(a, b);
	case EW_DIV: return _mm_div_ps(a, b);
	default: return _mm_max_ps(_mm_setzero_ps(), a);
	}
}
#endif

/* y[i] = a[i] op b[i] for i in [0, n), the op a constant after inlining */
static inline void ew_range(ew_op op, const float *a, const float *b, float *y, int64_t n)
{
	int64_t i = 0;
#ifdef __SSE2__
	const __m128 zero = _mm_setzero_ps();
	for (; i + 8 <= n; i += 8) {
		__m128 b0 = b ? _mm_loadu_ps(b + i) : zero, b1 = b ? _mm_loadu_ps(b + i + 4) : zero;
		__m128 y0 = binary4(op, _mm_loadu_ps(a + i), b0), y1 = binary4(op, _mm_loadu_ps(a + i + 4), b1);
		_mm_storeu_ps(y + i, y0);
		_mm_storeu_ps(y + i + 4, y1);
	}
#endif
	for (; i < n; i++)
		y[i] = binary_f(op, a[i], b ? b[i] : 0.0f);
}

static void ew_task(void *ctx, int64_t t, int thread)
{
	(void)thread;
	const ew_job *j = ctx;
	const int64_t i0 = t * K_GRAIN, n = j->n - i0 < K_GRAIN ? j->n - i0 : K_GRAIN;
	const float *b = j->b ? j->b + i0 : NULL;
	switch (j->op) {
	case EW_ADD: ew_range(EW_ADD, j->a + i0, b, j->y + i0, n); break;
	case EW_SUB: ew_range(EW_SUB, j->a + i0, b, j->y + i0, n); break;
	case EW_MUL: ew_range(EW_MUL, j->a + i0, b, j->y + i0, n); break;
	case EW_DIV: ew_range(EW_DIV, j->a + i0, b, j->y + i0, n); break;
	default: ew_range(EW_RELU, j->a + i0, NULL, j->y + i0, n); break;
	}
}

/* Whether every input has the output's size, so element i of each is at
 * [i]: an input that broadcasts to the output with as many elements differs
 * from it at most by leading 1s. */
static bool same_size(const k_call *call)
{
	for (int i = 0; i < call->n_in; i++)
		if (call->in[i].numel != call->out[0].numel)
			return false;
	return true;
}

/* Sizes unknown at compile time are known here: when they broadcast after
 * all (or do not fit), the reference kernel does it (or says why not). */
static air_status ew_run(const k_call *call, ew_op op, air_status (*ref)(const k_call *))
{
	if (!same_size(call))
		return ref(call);
	ew_job j = {op, call->in[0].data, op == EW_RELU ? NULL : call->in[1].data, call->out[0].data,
		    call->out[0].numel};
	if (j.n > 0)
		rt_pool_run(call->pool, (j.n + K_GRAIN - 1) / K_GRAIN, ew_task, &j);
	return AIR_OK;
}

/* f32 throughout, every input of the output's size as far as the compile
 * knows (a size it does not know counts as equal: ew_run checks); real
 * broadcasting stays with the reference kernels. */
static bool same_shape_supports(const k_call *call)
{
	return k_all_f32(call) && call->n_out == 1 && same_size(call);
}

static air_status relu_run(const k_call *call) { return ew_run(call, EW_RELU, kref_relu); }
static air_status add_run(const k_call *call) { return ew_run(call, EW_ADD, kref_add); }
static air_status sub_run(const k_call *call) { return ew_run(call, EW_SUB, kref_sub); }
static air_status mul_run(const k_call *call) { return ew_run(call, EW_MUL, kref_mul); }
static air_status div_run(const k_call *call) { return ew_run(call, EW_DIV, kref_div); }

const k_kernel kfast_relu_lanes = {"relu_lanes", 0, same_shape_supports, NULL, NULL, NULL, relu_run};
const k_kernel kfast_add_lanes = {"add_lanes", 0, same_shape_supports, NULL, NULL, NULL, add_run};
const k_kernel kfast_sub_lanes = {"sub_lanes", 0, same_shape_supports, NULL, NULL, NULL, sub_run};
const k_kernel kfast_mul_lanes = {"mul_lanes", 0, same_shape_supports, NULL, NULL, NULL, mul_run};
const k_kernel kfast_div_lanes = {"div_lanes", 0, same_shape_supports, NULL, NULL, NULL, div_run};

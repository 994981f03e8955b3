/* elementwise_fast.c - relu, clamp (relu6, hardtanh), and add, sub, mul
 * and div of two f32 tensors of the output's shape or repeating over its
 * leading dims (a scalar, a bias, a mask shared by the heads), as fast
 * kernels: split over the pool, four lanes at a time; and casts of bool,
 * u8 and i8 to f32.
 *
 * Why: in a training step the batch norms run in eager between torchair's
 * subgraphs, so a relu or a residual add is often alone in its subgraph,
 * where elementwise fusion (one streaming input and constants) has nothing
 * to fuse it with; the backward graph adds gradients tensor to tensor.
 * The reference kernels ran them on one thread: ResNet-50 at batch 4 spent
 * 33 ms a step in add_ref and 12 ms in relu_ref; MobileNetV2 at batch 2
 * spent 40 ms in clamp_ref (its relu6), two thirds of its compiled time.
 * The ops move memory and do next to no arithmetic, so SSE is as fast as
 * wider vectors here; what counts is the second thread. */
#include "kernels/elementwise/elementwise_fast.h"

#include <math.h>

#ifdef __SSE2__
#include <immintrin.h>
#endif

#include "kernels/elementwise/elementwise_ref.h"
#include "platform/pool.h"

typedef enum ew_op { EW_RELU, EW_CLAMP, EW_ADD, EW_SUB, EW_MUL, EW_DIV } ew_op;

typedef struct ew_job {
	ew_op op;
	float lo, hi;       /* clamp's bounds: -inf, +inf where there is none */
	const float *a, *b; /* b: NULL for relu and clamp */
	float *y;           /* may be a or b exactly (an in-place op) */
	int64_t n;
	/* element i of a is a[i % pa], of b b[i % pb]: n for an input of the
	 * output's size, less for one broadcast over leading dims (a bias, a
	 * mask shared by the heads, a scalar) */
	int64_t pa, pb;
} ew_job;

/* torch's relu: NaN stays NaN, -0.0 stays -0.0 (the reference's x < 0 ? 0 : x) */
static inline float relu_f(float x)
{
	return x < 0.0f ? 0.0f : x;
}

/* torch's clamp as the reference computes it: NaN stays NaN, the lower
 * bound first, so min > max gives max */
static inline float clamp_f(float x, float lo, float hi)
{
	float l = x < lo ? lo : x;
	return l > hi ? hi : l;
}

static inline float binary_f(ew_op op, float a, float b, float lo, float hi)
{
	switch (op) {
	case EW_CLAMP: return clamp_f(a, lo, hi);
	case EW_ADD: return a + b;
	case EW_SUB: return a - b;
	case EW_MUL: return a * b;
	case EW_DIV: return a / b;
	default: return relu_f(a);
	}
}

#ifdef __SSE2__
/* max(l, x) is l only when l > x, so x when either is NaN and for -0.0
 * against 0.0: relu_f's and clamp_f's values; min(h, x) likewise */
static inline __m128 binary4(ew_op op, __m128 a, __m128 b, __m128 lo, __m128 hi)
{
	switch (op) {
	case EW_CLAMP: return _mm_min_ps(hi, _mm_max_ps(lo, a));
	case EW_ADD: return _mm_add_ps(a, b);
	case EW_SUB: return _mm_sub_ps(a, b);
	case EW_MUL: return _mm_mul_ps(a, b);
	case EW_DIV: return _mm_div_ps(a, b);
	default: return _mm_max_ps(_mm_setzero_ps(), a);
	}
}
#endif

/* y[i] = a[i] op b[i] for i in [0, n), the op a constant after inlining */
static inline void ew_range(ew_op op, const float *a, const float *b, float *y, int64_t n, float lo, float hi)
{
	int64_t i = 0;
#ifdef __SSE2__
	const __m128 zero = _mm_setzero_ps(), vlo = _mm_set1_ps(lo), vhi = _mm_set1_ps(hi);
	for (; i + 8 <= n; i += 8) {
		__m128 b0 = b ? _mm_loadu_ps(b + i) : zero, b1 = b ? _mm_loadu_ps(b + i + 4) : zero;
		__m128 y0 = binary4(op, _mm_loadu_ps(a + i), b0, vlo, vhi);
		__m128 y1 = binary4(op, _mm_loadu_ps(a + i + 4), b1, vlo, vhi);
		_mm_storeu_ps(y + i, y0);
		_mm_storeu_ps(y + i + 4, y1);
	}
#endif
	for (; i < n; i++)
		y[i] = binary_f(op, a[i], b ? b[i] : 0.0f, lo, hi);
}

/* y[0, n) from a and b, the op chosen at run time */
static void ew_any(ew_op op, const float *a, const float *b, float *y, int64_t n, float lo, float hi)
{
	switch (op) {
	case EW_CLAMP: ew_range(EW_CLAMP, a, NULL, y, n, lo, hi); break;
	case EW_ADD: ew_range(EW_ADD, a, b, y, n, 0.0f, 0.0f); break;
	case EW_SUB: ew_range(EW_SUB, a, b, y, n, 0.0f, 0.0f); break;
	case EW_MUL: ew_range(EW_MUL, a, b, y, n, 0.0f, 0.0f); break;
	case EW_DIV: ew_range(EW_DIV, a, b, y, n, 0.0f, 0.0f); break;
	default: ew_range(EW_RELU, a, NULL, y, n, 0.0f, 0.0f); break;
	}
}

/* A short period (a scalar, a bias of a few floats) is repeated into buf to
 * at least REP_MIN floats, so runs stay long; returns the new period. */
enum { REP_MIN = 256, REP_BUF = 2 * REP_MIN };
static int64_t repeat_short(const float **p, int64_t period, float *buf)
{
	if (period >= REP_MIN)
		return period;
	const int64_t len = (REP_MIN + period - 1) / period * period;
	for (int64_t i = 0; i < len; i++)
		buf[i] = (*p)[i % period];
	*p = buf;
	return len;
}

static void ew_task(void *ctx, int64_t t, int thread)
{
	(void)thread;
	const ew_job *j = ctx;
	const int64_t i0 = t * K_GRAIN, i1 = j->n - i0 < K_GRAIN ? j->n : i0 + K_GRAIN;
	float bufa[REP_BUF], bufb[REP_BUF];
	const float *a = j->a, *b = j->b;
	const int64_t pa = repeat_short(&a, j->pa, bufa), pb = b ? repeat_short(&b, j->pb, bufb) : 0;
	/* runs over which neither input wraps around its period */
	for (int64_t i = i0; i < i1;) {
		const int64_t oa = i % pa, ob = b ? i % pb : 0;
		int64_t len = i1 - i;
		len = len < pa - oa ? len : pa - oa;
		if (b)
			len = len < pb - ob ? len : pb - ob;
		ew_any(j->op, a + oa, b ? b + ob : NULL, j->y + i, len, j->lo, j->hi);
		i += len;
	}
}

/* The period of input x in the output's element order: its numel when x
 * is the output's size (an input that broadcasts to the output with as
 * many elements differs from it at most by leading 1s) or when, past its
 * leading 1s, its dims are the output's last ones (x repeats over the
 * leading dims); 0 for any other broadcast, or a size not known yet (-1),
 * which ew_run checks again at run time. */
static int64_t period_of(const k_tensor *x, const k_tensor *y)
{
	if (x->numel == y->numel)
		return x->numel;
	int lead = 0;
	while (lead < x->rank && x->dims[lead] == 1)
		lead++;
	const int tail = x->rank - lead;
	if (tail > y->rank)
		return 0;
	for (int d = 0; d < tail; d++)
		if (x->dims[lead + d] != y->dims[y->rank - tail + d] || x->dims[lead + d] < 0)
			return 0;
	return x->numel > 0 ? x->numel : 0;
}

static bool periodic(const k_call *call)
{
	for (int i = 0; i < call->n_in; i++)
		if (period_of(&call->in[i], &call->out[0]) == 0)
			return false;
	return true;
}

/* Sizes unknown at compile time are known here: when they broadcast some
 * other way after all (or do not fit), the reference kernel does it (or
 * says why not). */
static air_status ew_run(const k_call *call, ew_op op, air_status (*ref)(const k_call *))
{
	if (!periodic(call))
		return ref(call);
	ew_job j = {op, -INFINITY, INFINITY, call->in[0].data, call->n_in > 1 ? call->in[1].data : NULL,
		    call->out[0].data, call->out[0].numel, period_of(&call->in[0], &call->out[0]),
		    call->n_in > 1 ? period_of(&call->in[1], &call->out[0]) : 0};
	if (op == EW_CLAMP) {
		/* attrs min, max, has_min, has_max (ops/elementwise.c); the
		 * bounds rounded to float as the reference rounds them */
		if (call->attrs[2].i)
			j.lo = (float)call->attrs[0].f;
		if (call->attrs[3].i)
			j.hi = (float)call->attrs[1].f;
	}
	if (j.n > 0)
		rt_pool_run(call->pool, (j.n + K_GRAIN - 1) / K_GRAIN, ew_task, &j);
	return AIR_OK;
}

/* f32 throughout, every input of the output's size or repeating over its
 * leading dims as far as the compile knows (a size it does not know counts
 * as fitting: ew_run checks); other broadcasts stay with the reference
 * kernels. */
static bool same_shape_supports(const k_call *call)
{
	if (!k_all_f32(call) || call->n_out != 1)
		return false;
	for (int i = 0; i < call->n_in; i++) {
		const k_tensor *x = &call->in[i];
		bool unknown = x->numel < 0 || call->out[0].numel < 0;
		if (!unknown && period_of(x, &call->out[0]) == 0)
			return false;
	}
	return true;
}

static air_status relu_run(const k_call *call) { return ew_run(call, EW_RELU, kref_relu); }
static air_status clamp_run(const k_call *call) { return ew_run(call, EW_CLAMP, kref_clamp); }
static air_status add_run(const k_call *call) { return ew_run(call, EW_ADD, kref_add); }
static air_status sub_run(const k_call *call) { return ew_run(call, EW_SUB, kref_sub); }
static air_status mul_run(const k_call *call) { return ew_run(call, EW_MUL, kref_mul); }
static air_status div_run(const k_call *call) { return ew_run(call, EW_DIV, kref_div); }

/* K_INPLACE_ANY: the lanes loops load a[i..i+7] and b[i..i+7] before they
 * store y[i..i+7]; a call they hand to the reference kernel (a broadcast
 * known only at run time) runs y[i] = f(a[i], b[i]) in order too. */
const k_kernel kfast_relu_lanes = {"relu_lanes", 0, same_shape_supports, NULL, NULL, NULL, relu_run, K_INPLACE_ANY};
const k_kernel kfast_clamp_lanes = {"clamp_lanes", 0, same_shape_supports, NULL, NULL, NULL, clamp_run, K_INPLACE_ANY};
const k_kernel kfast_add_lanes = {"add_lanes", 0, same_shape_supports, NULL, NULL, NULL, add_run, K_INPLACE_ANY};
const k_kernel kfast_sub_lanes = {"sub_lanes", 0, same_shape_supports, NULL, NULL, NULL, sub_run, K_INPLACE_ANY};
const k_kernel kfast_mul_lanes = {"mul_lanes", 0, same_shape_supports, NULL, NULL, NULL, mul_run, K_INPLACE_ANY};
const k_kernel kfast_div_lanes = {"div_lanes", 0, same_shape_supports, NULL, NULL, NULL, div_run, K_INPLACE_ANY};

/* ---- casts of bytes to f32 ---------------------------------------------- */

/* A training step multiplies gradients by the float of a dropout mask:
 * cast_ref switched on the dtypes per element ([128, 3072] bool took
 * 348 us against eager's 105); this is a plain loop per chunk. */

typedef struct cast_job {
	const void *x;
	float *y;
	air_dtype from;
	int64_t n;
} cast_job;

static void cast_task(void *ctx, int64_t t, int thread)
{
	(void)thread;
	const cast_job *j = ctx;
	const int64_t i0 = t * K_GRAIN, n = j->n - i0 < K_GRAIN ? j->n - i0 : K_GRAIN;
	float *y = j->y + i0;
	if (j->from == AIR_I8) {
		const int8_t *x = (const int8_t *)j->x + i0;
		for (int64_t i = 0; i < n; i++)
			y[i] = (float)x[i];
		return;
	}
	/* bool is one byte holding 0 or 1, read as u8 like the reference does */
	const uint8_t *x = (const uint8_t *)j->x + i0;
	for (int64_t i = 0; i < n; i++)
		y[i] = (float)x[i];
}

static bool cast_from_bytes(const k_call *call)
{
	air_dtype from = call->in[0].dtype;
	return call->out[0].dtype == AIR_F32 && (from == AIR_BOOL || from == AIR_U8 || from == AIR_I8);
}

static air_status cast_run(const k_call *call)
{
	cast_job j = {call->in[0].data, call->out[0].data, call->in[0].dtype, call->out[0].numel};
	if (call->in[0].numel != j.n)
		return kref_cast(call);
	if (j.n > 0)
		rt_pool_run(call->pool, (j.n + K_GRAIN - 1) / K_GRAIN, cast_task, &j);
	return AIR_OK;
}

const k_kernel kfast_cast_bytes_f32 = {"cast_bytes_f32", 0, cast_from_bytes, NULL, NULL, NULL, cast_run};

/* fused_fast.c - the fast kernel of fused_elementwise. The same tile loop
 * as the reference (kernels/elementwise/fused_ref.c): the first instruction reads the
 * input tile, the rest work in place on the output tile while it is in L1.
 * What differs is each instruction's loop:
 *   - the transcendental ones call vmath (AVX2 or portable, chosen at run
 *     time), the kernels the standalone ops run, so a fused exp or tanh
 *     gives what the unfused op gives;
 *   - x ** 2 and x ** 3 are products (GPT-2's tanh GELU cubes its input;
 *     powf per element was most of that chain);
 *   - the rest are plain loops this file's flags let the vectorizer turn
 *     into SIMD (CMakeLists.txt), branch-free: a relu on random signs
 *     mispredicted every other element.
 * sin, cos and the other powers stay scalar libm calls, as in the
 * reference. */
#include "kernels/elementwise/fused_fast.h"

#include <math.h>
#include <string.h>

#include "core/error.h"
#include "kernels/elementwise/fused_ref.h"
#include "kernels/vmath/vmath.h"

enum { TILE = 512 };

typedef struct {
	const float *x;
	float *y;
	int64_t n;
	const int64_t *prog;
	int len; /* instructions */
} fused_job;

/* One instruction over a tile; in == out (in place) is allowed. NaN
 * behaviour as the unfused ops. */
static void apply(kf_opcode op, float c, const float *in, float *out, int64_t n)
{
	int f = kf_vmath_kernel(op);
	if (f >= 0) {
		kv_unary((kv_func)f)(in, out, n);
		return;
	}
#define LOOP(EXPR)                               \
	for (int64_t i = 0; i < n; i++) {        \
		float x = in[i];                 \
		out[i] = (EXPR);                 \
	}                                        \
	break;
	switch (op) {
	case KF_NEG: LOOP(-x)
	case KF_ABS: LOOP(fabsf(x))
	case KF_SQRT: LOOP(sqrtf(x))
	case KF_SIN: LOOP(sinf(x))
	case KF_COS: LOOP(cosf(x))
	case KF_RELU: LOOP(x < 0.0f ? 0.0f : x)
	case KF_HARDSWISH: LOOP(x * kf_relu6(x + 3.0f) / 6.0f)
	case KF_HARDSIGMOID: LOOP(kf_relu6(x + 3.0f) / 6.0f)
	case KF_RECIPROCAL: LOOP(1.0f / x)
	case KF_ADD_S: LOOP(x + c)
	case KF_SUB_S: LOOP(x - c)
	case KF_RSUB_S: LOOP(c - x)
	case KF_MUL_S: LOOP(x * c)
	case KF_DIV_S: LOOP(x / c)
	case KF_RDIV_S: LOOP(c / x)
	case KF_MAX_S: LOOP(x != x ? x : (c != c ? c : (x > c ? x : c)))
	case KF_MIN_S: LOOP(x != x ? x : (c != c ? c : (x < c ? x : c)))
	case KF_POW_S:
		/* x * x is powf(x, 2) exactly (both round the exact square
		 * once); x * x * x rounds twice, within an ulp of powf */
		if (c == 2.0f) {
			LOOP(x * x)
		} else if (c == 3.0f) {
			LOOP(x * x * x)
		}
		LOOP(powf(x, c))
	case KF_RPOW_S: LOOP(powf(c, x))
	default: break;
	}
#undef LOOP
}

static void fused_task(void *p, int64_t t, int th)
{
	(void)th;
	const fused_job *j = p;
	int64_t lo = t * K_GRAIN, hi = lo + K_GRAIN < j->n ? lo + K_GRAIN : j->n;
	for (int64_t s = lo; s < hi; s += TILE) {
		int64_t n = hi - s < TILE ? hi - s : TILE;
		const float *in = j->x + s;
		float *out = j->y + s;
		for (int k = 0; k < j->len; k++) {
			apply((kf_opcode)j->prog[2 * k], kf_f32_operand(j->prog[2 * k + 1]), in, out, n);
			in = out;
		}
	}
}

static bool fused_supports(const k_call *call)
{
	const k_attr *prog = &call->attrs[0];
	if (!k_all_f32(call) || prog->n == 0 || prog->n % 2 != 0)
		return false;
	for (int k = 0; k < prog->n; k += 2)
		if (prog->ints[k] < 0 || prog->ints[k] >= KF_OPCODE_COUNT)
			return false;
	return true;
}

static air_status fused_run(const k_call *call)
{
	const k_attr *prog = &call->attrs[0];
	fused_job j = {call->in[0].data, call->out[0].data, call->out[0].numel, prog->ints, prog->n / 2};
	rt_pool_run(call->pool, (j.n + K_GRAIN - 1) / K_GRAIN, fused_task, &j);
	return AIR_OK;
}

/* K_INPLACE_ANY: the reference's tile loop, whose instructions are vmath
 * calls (safe in place) or loops out[i] = f(in[i]). */
const k_kernel kfast_fused_elementwise = {"fused_elementwise_vec", 0, fused_supports, NULL, NULL, NULL,
					  fused_run, K_INPLACE_ANY};

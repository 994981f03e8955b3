/* fused_ref.c - runs a fused elementwise program tile by tile: the first
 * instruction reads the input tile, the rest work in place on the output
 * tile while it sits in L1. */
#include "kernels/elementwise/fused_ref.h"

#include <math.h>
#include <string.h>

#include "core/error.h"

enum { TILE = 512 };

typedef struct {
	const float *x;
	float *y;
	int64_t n;
	const int64_t *prog;
	int len; /* instructions */
} fused_ctx;

/* one instruction over a tile; NaN behaviour as the unfused ops */
static void apply(kf_opcode op, float c, const float *in, float *out, int64_t n)
{
#define LOOP(EXPR)                               \
	for (int64_t i = 0; i < n; i++) {        \
		float x = in[i];                 \
		out[i] = (EXPR);                 \
	}                                        \
	break;
	switch (op) {
	case KF_NEG: LOOP(-x)
	case KF_ABS: LOOP(fabsf(x))
	case KF_EXP: LOOP(expf(x))
	case KF_LOG: LOOP(logf(x))
	case KF_SQRT: LOOP(sqrtf(x))
	case KF_RSQRT: LOOP(1.0f / sqrtf(x))
	case KF_SIN: LOOP(sinf(x))
	case KF_COS: LOOP(cosf(x))
	case KF_TANH: LOOP(tanhf(x))
	case KF_SIGMOID: LOOP(1.0f / (1.0f + expf(-x)))
	case KF_ERF: LOOP(erff(x))
	case KF_RELU: LOOP(x < 0.0f ? 0.0f : x)
	case KF_GELU: LOOP(0.5f * x * (1.0f + erff(x * 0.70710678118654752f)))
	case KF_GELU_TANH: LOOP(0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x))))
	case KF_SILU: LOOP(x / (1.0f + expf(-x)))
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
	case KF_POW_S: LOOP(powf(x, c))
	case KF_RPOW_S: LOOP(powf(c, x))
	default: break;
	}
#undef LOOP
}

static void fused_task(void *p, int64_t t, int th)
{
	const fused_ctx *c = p;
	int64_t lo = t * K_GRAIN, hi = lo + K_GRAIN < c->n ? lo + K_GRAIN : c->n;
	for (int64_t s = lo; s < hi; s += TILE) {
		int64_t n = hi - s < TILE ? hi - s : TILE;
		const float *in = c->x + s;
		float *out = c->y + s;
		for (int k = 0; k < c->len; k++) {
			apply((kf_opcode)c->prog[2 * k], kf_f32_operand(c->prog[2 * k + 1]), in, out, n);
			in = out;
		}
	}
}

air_status kref_fused_elementwise(const k_call *call)
{
	const k_attr *prog = &call->attrs[0];
	if (prog->n % 2 != 0 || prog->n == 0)
		return air_error(AIR_INVALID_ARGUMENT, "fused_elementwise: a malformed program");
	for (int k = 0; k < prog->n; k += 2)
		if (prog->ints[k] < 0 || prog->ints[k] >= KF_OPCODE_COUNT)
			return air_error(AIR_INVALID_ARGUMENT, "fused_elementwise: unknown opcode %lld",
					 (long long)prog->ints[k]);
	fused_ctx c = {call->in[0].data, call->out[0].data, call->out[0].numel, prog->ints, prog->n / 2};
	rt_pool_run(call->pool, (c.n + K_GRAIN - 1) / K_GRAIN, fused_task, &c);
	return AIR_OK;
}

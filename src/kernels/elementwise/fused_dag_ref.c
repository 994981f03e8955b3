/* fused_dag_ref.c - the reference kernel of fused_dag (the oracle of
 * fused_dag_fast.c): element by element, each instruction on scalars held in
 * a register array, exactly as the unfused ops compute them (libm, IEEE
 * arithmetic, NaN-propagating maximum/minimum). */
#include "kernels/elementwise/fused_dag_ref.h"

#include <math.h>
#include <string.h>

#include "core/error.h"

static int arity(int64_t op)
{
	if (op >= 0 && op < KF_OPCODE_COUNT)
		return 1;
	if (op == KD_CONST)
		return 0;
	if (op == KD_WHERE)
		return 3;
	return op > KD_CONST && op < KD_OPCODE_END ? 2 : -1;
}

bool kd_program_ok(const int64_t *prog, int n_prog, const int64_t *outs, int n_outs, int n_in)
{
	if (n_in < 1 || n_in > KD_MAX_IN || n_prog <= 0 || n_prog % 4 != 0 || n_prog / 4 > KD_MAX_INSTR || n_outs < 1)
		return false;
	for (int k = 0; k < n_prog / 4; k++) {
		const int64_t *ins = prog + 4 * k;
		int na = arity(ins[0]);
		if (na < 0)
			return false;
		for (int o = 0; o < na; o++)
			if (ins[1 + o] < 0 || ins[1 + o] >= n_in + k)
				return false;
	}
	for (int j = 0; j < n_outs; j++)
		if (outs[j] < 0 || outs[j] >= n_in + n_prog / 4)
			return false;
	return true;
}

/* one kf_opcode on one element, as kernels/elementwise/fused_ref.c does */
static float unary(int op, float x, float c)
{
	switch (op) {
	case KF_NEG: return -x;
	case KF_ABS: return fabsf(x);
	case KF_EXP: return expf(x);
	case KF_LOG: return logf(x);
	case KF_SQRT: return sqrtf(x);
	case KF_RSQRT: return 1.0f / sqrtf(x);
	case KF_SIN: return sinf(x);
	case KF_COS: return cosf(x);
	case KF_TANH: return tanhf(x);
	case KF_SIGMOID: return 1.0f / (1.0f + expf(-x));
	case KF_ERF: return erff(x);
	case KF_RELU: return x < 0.0f ? 0.0f : x;
	case KF_GELU: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
	case KF_GELU_TANH: return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
	case KF_SILU: return x / (1.0f + expf(-x));
	case KF_HARDSWISH: return x * kf_relu6(x + 3.0f) / 6.0f;
	case KF_HARDSIGMOID: return kf_relu6(x + 3.0f) / 6.0f;
	case KF_RECIPROCAL: return 1.0f / x;
	case KF_ADD_S: return x + c;
	case KF_SUB_S: return x - c;
	case KF_RSUB_S: return c - x;
	case KF_MUL_S: return x * c;
	case KF_DIV_S: return x / c;
	case KF_RDIV_S: return c / x;
	case KF_MAX_S: return x != x ? x : (c != c ? c : (x > c ? x : c));
	case KF_MIN_S: return x != x ? x : (c != c ? c : (x < c ? x : c));
	case KF_POW_S: return powf(x, c);
	case KF_RPOW_S: return powf(c, x);
	default: return 0.0f;
	}
}

static float binary(int op, float a, float b)
{
	switch (op) {
	case KD_ADD: return a + b;
	case KD_SUB: return a - b;
	case KD_MUL: return a * b;
	case KD_DIV: return a / b;
	case KD_MAX: return a != a ? a : (b != b ? b : (a > b ? a : b));
	case KD_MIN: return a != a ? a : (b != b ? b : (a < b ? a : b));
	case KD_POW: return powf(a, b);
	case KD_EQ: return a == b ? 1.0f : 0.0f;
	case KD_NE: return a != b ? 1.0f : 0.0f;
	case KD_LT: return a < b ? 1.0f : 0.0f;
	case KD_LE: return a <= b ? 1.0f : 0.0f;
	case KD_GT: return a > b ? 1.0f : 0.0f;
	case KD_GE: return a >= b ? 1.0f : 0.0f;
	default: return 0.0f;
	}
}

typedef struct {
	const k_call *call;
	const int64_t *prog, *outs;
	int n_instr, n_outs;
	int64_t n;
} dag_ctx;

static float load(const k_tensor *t, int64_t i, int64_t n)
{
	int64_t j = t->numel == n ? i : i % t->numel; /* broadcast: repeats */
	if (t->dtype == AIR_BOOL)
		return ((const uint8_t *)t->data)[j] ? 1.0f : 0.0f;
	return ((const float *)t->data)[j];
}

static void dag_task(void *p, int64_t t, int th)
{
	(void)th;
	const dag_ctx *c = p;
	const k_call *call = c->call;
	int n_in = call->n_in;
	int64_t lo = t * K_GRAIN, hi = lo + K_GRAIN < c->n ? lo + K_GRAIN : c->n;
	float r[KD_MAX_REGS];
	for (int64_t i = lo; i < hi; i++) {
		for (int k = 0; k < n_in; k++)
			r[k] = load(&call->in[k], i, c->n);
		for (int k = 0; k < c->n_instr; k++) {
			const int64_t *ins = c->prog + 4 * k;
			int op = (int)ins[0];
			float v;
			if (op < KF_OPCODE_COUNT)
				v = unary(op, r[ins[1]], kf_f32_operand(ins[2]));
			else if (op == KD_CONST)
				v = kf_f32_operand(ins[1]);
			else if (op == KD_WHERE)
				v = r[ins[1]] != 0.0f ? r[ins[2]] : r[ins[3]];
			else
				v = binary(op, r[ins[1]], r[ins[2]]);
			r[n_in + k] = v;
		}
		for (int j = 0; j < c->n_outs; j++)
			((float *)call->out[j].data)[i] = r[c->outs[j]];
	}
}

air_status kref_fused_dag(const k_call *call)
{
	const k_attr *prog = &call->attrs[0], *outs = &call->attrs[1];
	if (!kd_program_ok(prog->ints, prog->n, outs->ints, outs->n, call->n_in) || outs->n != call->n_out)
		return air_error(AIR_INVALID_ARGUMENT, "fused_dag: a malformed program");
	for (int i = 0; i < call->n_in; i++)
		if (call->in[i].numel != call->out[0].numel &&
		    (call->in[i].numel <= 0 || call->out[0].numel % call->in[i].numel != 0))
			return air_error(AIR_INVALID_ARGUMENT, "fused_dag: input %d does not repeat over the output", i);
	dag_ctx c = {call, prog->ints, outs->ints, prog->n / 4, outs->n, call->out[0].numel};
	rt_pool_run(call->pool, (c.n + K_GRAIN - 1) / K_GRAIN, dag_task, &c);
	return AIR_OK;
}

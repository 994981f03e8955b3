/* fused_dag_body.h - the tile interpreter of fused_dag, included once per
 * ISA (fused_dag_fast.c portable, fused_dag.avx2.c, fused_dag.avx512.c):
 * the loops are plain C, and each file's compiler flags let the vectorizer
 * give them that ISA's width. The includer defines KD_RUN (the run function's
 * name).
 *
 * Per tile of TILE elements: every register is a pointer to TILE floats; an
 * f32 input of full size points into the input itself, other inputs (one
 * element, repeating over the output, or bool) are expanded into a slot, and each instruction writes a
 * slot it takes from a free list once the registers it read are dead. The
 * outputs are copied out after the whole tile's program, so an output may
 * share its buffer with any input (every input element i of this tile was
 * read before element i is written, and never again after). */
#include <math.h>
#include <string.h>

#include "kernels/elementwise/fused_dag_ref.h"
#include "kernels/vmath/vmath.h"

enum { TILE = 256 };

typedef struct {
	const k_call *call;
	const int64_t *prog;
	int n_instr;
	int64_t n;
	int slot_of[KD_MAX_REGS]; /* register -> slot, or -1: reads input memory */
	int n_slots;
} kd_job;

#define KD_LOOP1(EXPR)                              \
	for (int i = 0; i < n; i++) {               \
		float x = a[i];                     \
		y[i] = (EXPR);                      \
	}                                           \
	return;
#define KD_LOOP2(EXPR)                              \
	for (int i = 0; i < n; i++) {               \
		float x = a[i], z = b[i];           \
		y[i] = (EXPR);                      \
	}                                           \
	return;

static void kd_unary(int op, float c, const float *restrict a, float *restrict y, int n)
{
	int f = kf_vmath_kernel(op);
	if (f >= 0) {
		kv_unary((kv_func)f)(a, y, n);
		return;
	}
	switch (op) {
	case KF_NEG: KD_LOOP1(-x)
	case KF_ABS: KD_LOOP1(fabsf(x))
	case KF_SQRT: KD_LOOP1(sqrtf(x))
	case KF_SIN: KD_LOOP1(sinf(x))
	case KF_COS: KD_LOOP1(cosf(x))
	case KF_RELU: KD_LOOP1(x < 0.0f ? 0.0f : x)
	case KF_HARDSWISH: KD_LOOP1(x * kf_relu6(x + 3.0f) / 6.0f)
	case KF_HARDSIGMOID: KD_LOOP1(kf_relu6(x + 3.0f) / 6.0f)
	case KF_RECIPROCAL: KD_LOOP1(1.0f / x)
	case KF_ADD_S: KD_LOOP1(x + c)
	case KF_SUB_S: KD_LOOP1(x - c)
	case KF_RSUB_S: KD_LOOP1(c - x)
	case KF_MUL_S: KD_LOOP1(x * c)
	case KF_DIV_S: KD_LOOP1(x / c)
	case KF_RDIV_S: KD_LOOP1(c / x)
	case KF_MAX_S: KD_LOOP1(x != x ? x : (c != c ? c : (x > c ? x : c)))
	case KF_MIN_S: KD_LOOP1(x != x ? x : (c != c ? c : (x < c ? x : c)))
	case KF_POW_S:
		/* x * x is powf(x, 2) exactly (both round the exact square once) */
		if (c == 2.0f) {
			KD_LOOP1(x * x)
		}
		KD_LOOP1(powf(x, c))
	case KF_RPOW_S: KD_LOOP1(powf(c, x))
	default: return;
	}
}

static void kd_binary(int op, const float *restrict a, const float *restrict b, float *restrict y, int n)
{
	switch (op) {
	case KD_ADD: KD_LOOP2(x + z)
	case KD_SUB: KD_LOOP2(x - z)
	case KD_MUL: KD_LOOP2(x * z)
	case KD_DIV: KD_LOOP2(x / z)
	case KD_MAX: KD_LOOP2(x != x ? x : (z != z ? z : (x > z ? x : z)))
	case KD_MIN: KD_LOOP2(x != x ? x : (z != z ? z : (x < z ? x : z)))
	case KD_POW: KD_LOOP2(powf(x, z))
	case KD_EQ: KD_LOOP2(x == z ? 1.0f : 0.0f)
	case KD_NE: KD_LOOP2(x != z ? 1.0f : 0.0f)
	case KD_LT: KD_LOOP2(x < z ? 1.0f : 0.0f)
	case KD_LE: KD_LOOP2(x <= z ? 1.0f : 0.0f)
	case KD_GT: KD_LOOP2(x > z ? 1.0f : 0.0f)
	case KD_GE: KD_LOOP2(x >= z ? 1.0f : 0.0f)
	default: return;
	}
}

static void kd_task(void *p, int64_t t, int th)
{
	(void)th;
	const kd_job *j = p;
	const k_call *call = j->call;
	int n_in = call->n_in;
	_Alignas(64) float slots[KD_MAX_REGS][TILE];
	const float *reg[KD_MAX_REGS];
	/* one-element inputs: their slot is filled once per task */
	for (int k = 0; k < n_in; k++) {
		const k_tensor *x = &call->in[k];
		if (x->numel == 1 && j->n != 1) {
			float v = x->dtype == AIR_BOOL ? (*(const uint8_t *)x->data ? 1.0f : 0.0f) : *(const float *)x->data;
			for (int i = 0; i < TILE; i++)
				slots[j->slot_of[k]][i] = v;
		}
	}
	int64_t lo = t * K_GRAIN, hi = lo + K_GRAIN < j->n ? lo + K_GRAIN : j->n;
	for (int64_t s = lo; s < hi; s += TILE) {
		int n = (int)(hi - s < TILE ? hi - s : TILE);
		for (int k = 0; k < n_in; k++) {
			const k_tensor *x = &call->in[k];
			if (j->slot_of[k] < 0) {
				reg[k] = (const float *)x->data + s;
				continue;
			}
			float *d = slots[j->slot_of[k]];
			int64_t p = x->numel;
			if (p == 1 && j->n != 1) {
				/* filled once per task, above */
			} else if (x->dtype == AIR_BOOL) {
				const uint8_t *b = x->data;
				int64_t off = s % p;
				for (int i = 0; i < n; i++) {
					d[i] = b[off] ? 1.0f : 0.0f;
					off = off + 1 == p ? 0 : off + 1;
				}
			} else {
				/* f32 repeating over the output: runs of the
				 * period, from where this tile starts in it */
				const float *f = x->data;
				int64_t off = s % p;
				for (int i = 0; i < n;) {
					int m = (int)(p - off < n - i ? p - off : n - i);
					memcpy(d + i, f + off, sizeof(float) * (size_t)m);
					i += m;
					off = 0;
				}
			}
			reg[k] = d;
		}
		for (int k = 0; k < j->n_instr; k++) {
			const int64_t *ins = j->prog + 4 * k;
			int op = (int)ins[0];
			float *y = slots[j->slot_of[n_in + k]];
			if (op < KF_OPCODE_COUNT) {
				kd_unary(op, kf_f32_operand(ins[2]), reg[ins[1]], y, n);
			} else if (op == KD_CONST) {
				float c = kf_f32_operand(ins[1]);
				for (int i = 0; i < n; i++)
					y[i] = c;
			} else if (op == KD_WHERE) {
				const float *restrict cd = reg[ins[1]], *restrict a = reg[ins[2]], *restrict b = reg[ins[3]];
				for (int i = 0; i < n; i++)
					y[i] = cd[i] != 0.0f ? a[i] : b[i];
			} else {
				kd_binary(op, reg[ins[1]], reg[ins[2]], y, n);
			}
			reg[n_in + k] = y;
		}
		const int64_t *outs = call->attrs[1].ints;
		for (int o = 0; o < call->n_out; o++)
			memcpy((float *)call->out[o].data + s, reg[outs[o]], sizeof(float) * (size_t)n);
	}
}

/* Slots by liveness: a register's slot returns to the free list after the
 * last instruction that reads it; outputs keep theirs to the end. An
 * instruction never writes a slot it reads (its result takes a slot before
 * its operands' are freed), so the loops above may take restrict. */
static void kd_assign_slots(kd_job *j, const int64_t *outs, int n_outs)
{
	const k_call *call = j->call;
	int n_in = call->n_in, n_regs = n_in + j->n_instr;
	int last[KD_MAX_REGS], free_list[KD_MAX_REGS], n_free = 0;
	for (int r = 0; r < n_regs; r++)
		last[r] = -1;
	for (int k = 0; k < j->n_instr; k++) {
		const int64_t *ins = j->prog + 4 * k;
		int op = (int)ins[0];
		int na = op < KF_OPCODE_COUNT ? 1 : op == KD_CONST ? 0 : op == KD_WHERE ? 3 : 2;
		for (int o = 0; o < na; o++)
			last[ins[1 + o]] = k;
	}
	for (int o = 0; o < n_outs; o++)
		last[outs[o]] = j->n_instr; /* to the end */
	j->n_slots = 0;
	for (int k = 0; k < n_in; k++) {
		const k_tensor *x = &call->in[k];
		bool direct = x->dtype == AIR_F32 && (x->numel == j->n || j->n == 1);
		j->slot_of[k] = direct ? -1 : j->n_slots++;
	}
	for (int k = 0; k < j->n_instr; k++) {
		j->slot_of[n_in + k] = n_free > 0 ? free_list[--n_free] : j->n_slots++;
		const int64_t *ins = j->prog + 4 * k;
		int op = (int)ins[0];
		int na = op < KF_OPCODE_COUNT ? 1 : op == KD_CONST ? 0 : op == KD_WHERE ? 3 : 2;
		for (int o = 0; o < na; o++) {
			int r = (int)ins[1 + o];
			bool again = false;
			for (int q = 0; q < o; q++)
				again |= ins[1 + q] == r;
			if (!again && last[r] == k && r >= n_in)
				free_list[n_free++] = j->slot_of[r];
		}
		if (last[n_in + k] < 0) /* never read: its slot is free at once */
			free_list[n_free++] = j->slot_of[n_in + k];
	}
}

static air_status KD_RUN(const k_call *call)
{
	const k_attr *prog = &call->attrs[0], *outs = &call->attrs[1];
	kd_job j;
	j.call = call;
	j.prog = prog->ints;
	j.n_instr = prog->n / 4;
	j.n = call->out[0].numel;
	kd_assign_slots(&j, outs->ints, outs->n);
	rt_pool_run(call->pool, (j.n + K_GRAIN - 1) / K_GRAIN, kd_task, &j);
	return AIR_OK;
}

/* fused_dag_ref.h - the program behind fused_dag nodes: a small register
 * program over same-shape f32 tensors (fuse_dag.c builds it from a group of
 * elementwise ops with several tensor inputs, shared intermediates and up to
 * OP_MAX_OUT results), so the group crosses memory once.
 *
 * Registers: 0 .. n_in-1 hold the node's inputs (a one-element input is
 * broadcast; a bool input reads as 1.0 / 0.0); instruction k writes
 * register n_in + k. An instruction is four int64s (op, a, b, c):
 *   - op < KF_OPCODE_COUNT: a kf_opcode (fused_ref.h) applied to register a;
 *     b is the f32 bit pattern of its scalar (unused by unary ones);
 *   - KD_CONST: the f32 whose bit pattern is a, in every element;
 *   - KD_ADD .. KD_POW: register a op register b;
 *   - KD_EQ .. KD_GE: 1.0 where the comparison of a and b holds, else 0.0;
 *   - KD_WHERE: a != 0 ? b : c.
 * Output j is register outputs[j]. Every operand names a lower register. */
#ifndef AIR_KERNELS_ELEMENTWISE_FUSED_DAG_REF_H
#define AIR_KERNELS_ELEMENTWISE_FUSED_DAG_REF_H

#include <stdbool.h>

#include "kernels/common/kernel.h"
#include "kernels/elementwise/fused_ref.h"

enum kd_opcode {
	KD_CONST = 64,
	KD_ADD, KD_SUB, KD_MUL, KD_DIV, KD_MAX, KD_MIN, KD_POW,
	KD_EQ, KD_NE, KD_LT, KD_LE, KD_GT, KD_GE,
	KD_WHERE,
	KD_OPCODE_END
};

enum { KD_MAX_IN = 8, KD_MAX_INSTR = 40, KD_MAX_REGS = KD_MAX_IN + KD_MAX_INSTR };

/* Is this a well-formed program for n_in inputs (known opcodes, operands
 * naming earlier registers, outputs naming registers)? */
bool kd_program_ok(const int64_t *prog, int n_prog, const int64_t *outs, int n_outs, int n_in);

air_status kref_fused_dag(const k_call *call);

#endif

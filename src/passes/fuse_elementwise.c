/* fuse_elementwise.c - elementwise fusion: a chain x -> op1 -> op2 -> ... of
 * f32 unary ops, or binary ops whose other operand is a one-element constant,
 * where each intermediate has exactly one use and is not a graph output,
 * becomes one fused_elementwise node running a tile program (one pass over
 * memory instead of one per op). Requires: node order is execution order. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kernels/elementwise/fused_ref.h"
#include "ops/op.h"
#include "passes/pass.h"

enum { MAX_PROGRAM = 32 };

/* The fused tile program's opcode for a unary op, -1 if it has none (shared
 * with fuse_dag.c). */
int pass_fused_unary_opcode(int op)
{
	switch (op) {
	case OP_neg: return KF_NEG;
	case OP_abs: return KF_ABS;
	case OP_exp: return KF_EXP;
	case OP_log: return KF_LOG;
	case OP_sqrt: return KF_SQRT;
	case OP_rsqrt: return KF_RSQRT;
	case OP_sin: return KF_SIN;
	case OP_cos: return KF_COS;
	case OP_tanh: return KF_TANH;
	case OP_sigmoid: return KF_SIGMOID;
	case OP_erf: return KF_ERF;
	case OP_relu: return KF_RELU;
	case OP_gelu: return KF_GELU;
	case OP_gelu_tanh: return KF_GELU_TANH;
	case OP_silu: return KF_SILU;
	case OP_hardswish: return KF_HARDSWISH;
	case OP_hardsigmoid: return KF_HARDSIGMOID;
	case OP_reciprocal: return KF_RECIPROCAL;
	default: return -1;
	}
}

int pass_fused_scalar_opcode(int op, bool scalar_first)
{
	switch (op) {
	case OP_add: return KF_ADD_S;
	case OP_mul: return KF_MUL_S;
	case OP_maximum: return KF_MAX_S;
	case OP_minimum: return KF_MIN_S;
	case OP_sub: return scalar_first ? KF_RSUB_S : KF_SUB_S;
	case OP_div: return scalar_first ? KF_RDIV_S : KF_DIV_S;
	case OP_pow: return scalar_first ? KF_RPOW_S : KF_POW_S;
	default: return -1;
	}
}

static bool same_type(const ir_value *a, const ir_value *b)
{
	if (a->dtype != b->dtype || a->rank != b->rank)
		return false;
	for (int d = 0; d < a->rank; d++)
		if (a->dims[d] != b->dims[d])
			return false;
	return true;
}

/* If node n is fusible, its instruction and its streaming input. */
static bool fusible(const air_graph *g, const ir_node *n, int64_t ins[2], air_value *stream)
{
	const ir_value *out = &g->values[n->out[0]];
	if (out->dtype != AIR_F32)
		return false;
	int code = pass_fused_unary_opcode(n->op);
	if (code >= 0) {
		ins[0] = code;
		ins[1] = 0;
		*stream = n->in[0];
		return true;
	}
	if (n->n_in != 2)
		return false;
	float c;
	for (int first = 0; first < 2; first++) {
		air_value sv = n->in[first], other = n->in[1 - first];
		if (!pass_f32_scalar(g, sv, &c) || !same_type(&g->values[other], out))
			continue;
		code = pass_fused_scalar_opcode(n->op, first == 0);
		if (code < 0)
			return false;
		uint32_t bits;
		memcpy(&bits, &c, 4);
		ins[0] = code;
		ins[1] = bits;
		*stream = other;
		return true;
	}
	return false;
}

air_status pass_fuse_elementwise(air_graph *g, int max_group, pass_log *log)
{
	int limit = (max_group > 0 && max_group < MAX_PROGRAM) ? max_group : MAX_PROGRAM;
	int nv = g->n_values, nn = g->n_nodes;
	int *uses = calloc((size_t)nv + 1, sizeof *uses);
	int *user = malloc(sizeof *user * ((size_t)nv + 1));
	char *dead = calloc((size_t)nn + 1, 1);
	int64_t *prog = malloc(sizeof *prog * 2 * MAX_PROGRAM);
	if (!uses || !user || !dead || !prog) {
		free(uses), free(user), free(dead), free(prog);
		return air_error(AIR_OUT_OF_MEMORY, "fuse_elementwise: no memory");
	}
	for (int v = 0; v < nv; v++)
		user[v] = -1;
	for (int k = 0; k < nn; k++)
		for (int i = 0; i < g->nodes[k].n_in; i++) {
			uses[g->nodes[k].in[i]]++;
			user[g->nodes[k].in[i]] = k;
		}
	for (int i = 0; i < g->n_outputs; i++)
		uses[g->outputs[i]] += 2; /* an output is never fused away */
	int groups = 0, fused_ops = 0;
	for (int k = 0; k < nn; k++) {
		if (dead[k])
			continue;
		int64_t ins[2];
		air_value stream;
		if (!fusible(g, &g->nodes[k], ins, &stream))
			continue;
		int len = 0, members[MAX_PROGRAM];
		prog[0] = ins[0];
		prog[1] = ins[1];
		members[len++] = k;
		air_value v = g->nodes[k].out[0];
		while (len < limit && uses[v] == 1) {
			int u = user[v];
			int64_t next[2];
			air_value s;
			if (u < 0 || dead[u] || !fusible(g, &g->nodes[u], next, &s) || s != v)
				break;
			prog[2 * len] = next[0];
			prog[2 * len + 1] = next[1];
			members[len++] = u;
			v = g->nodes[u].out[0];
		}
		if (len < 2)
			continue;
		/* node k becomes the fused node; it now defines the chain's last
		 * value, and the other members die */
		ir_node *n = &g->nodes[k];
		int64_t *p = malloc(sizeof *p * 2 * (size_t)len);
		if (!p) {
			free(uses), free(user), free(dead), free(prog);
			return air_error(AIR_OUT_OF_MEMORY, "fuse_elementwise: no memory");
		}
		memcpy(p, prog, sizeof *p * 2 * (size_t)len);
		pass_logf(log, "  fused group %d (%d ops):", groups, len);
		for (int m = 0; m < len; m++)
			pass_logf(log, " %s", op_get(g->nodes[members[m]].op)->name);
		pass_logf(log, "\n");
		g->values[n->out[0]].kind = IR_DEAD;
		for (int m = 1; m < len; m++) {
			dead[members[m]] = 1;
			if (m < len - 1)
				g->values[g->nodes[members[m]].out[0]].kind = IR_DEAD;
		}
		for (int a = 0; a < IR_MAX_ATTRS; a++) {
			free(n->attrs[a].ints);
			memset(&n->attrs[a], 0, sizeof n->attrs[a]);
		}
		n->op = OP_fused_elementwise;
		n->in[0] = stream;
		n->n_in = 1;
		n->out[0] = v;
		n->attrs[0].set = true;
		n->attrs[0].ints = p;
		n->attrs[0].n = 2 * len;
		groups++;
		fused_ops += len;
	}
	pass_compact(g, dead);
	pass_logf(log, "fuse_elementwise: %d group(s) of %d ops in all\n", groups, fused_ops);
	free(uses), free(user), free(dead), free(prog);
	return AIR_OK;
}

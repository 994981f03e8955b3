/* fuse_activation.c - activations that a model wrote out in elementwise ops
 * become their one op again:
 *   x * 0.5 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))  -> gelu_tanh(x)
 *   x * 0.5 * (1 + erf(x * (1/sqrt 2)))                       -> gelu(x)
 * The first is GPT-2's "gelu_new" (Hugging Face's NewGELUActivation and its
 * copies); after aot_autograd it is six f32 ops over the FFN's widest
 * tensor, of which only runs of unary and scalar ops fuse. As one op, vmath
 * runs it in one pass and fuse_epilogue (next) puts it in the linear's
 * epilogue, where the tile is still in registers.
 *
 * Matched from the final product in either operand order (0.5 * x or
 * x * 0.5, 1 + t or t + 1, ...), with x^3 as pow(x, 3), x * (x * x) or
 * (x * x) * x. Every intermediate must have no other use, the constants must
 * be scalars within 1e-6 of the formula's, and the types f32 throughout.
 * Requires: node order is an execution order. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "ops/op.h"
#include "passes/pass.h"

/* "no match" for the functions that return a value */
#define NO_VALUE ((air_value)-1)

/* Is v a scalar constant within 1e-6 (relative) of want? */
static bool is_scalar(const air_graph *g, air_value v, double want)
{
	float f;
	return pass_f32_scalar(g, v, &f) && fabs((double)f - want) <= 1e-6 * fabs(want);
}

/* n = op(other, c) or op(c, other) with c the scalar want: the other
 * operand, or -1. */
static air_value with_scalar(const air_graph *g, const ir_node *n, double want)
{
	if (!n || n->n_in != 2)
		return NO_VALUE;
	if (is_scalar(g, n->in[1], want))
		return n->in[0];
	if (is_scalar(g, n->in[0], want))
		return n->in[1];
	return NO_VALUE;
}

/* Is v x^3 of x: pow(x, 3), x * (x * x) or (x * x) * x? */
static bool is_cube(pass_pattern *c, air_value v, air_value x)
{
	const ir_value *pv = &c->g->values[v];
	if (pv->kind != IR_NODE_OUTPUT)
		return false;
	if (c->g->nodes[pv->index].op == OP_pow) {
		ir_node *p = pass_pattern_take(c, v, OP_pow);
		return p && p->in[0] == x && is_scalar(c->g, p->in[1], 3.0);
	}
	ir_node *m = pass_pattern_take(c, v, OP_mul);
	if (!m)
		return false;
	for (int side = 0; side < 2; side++) {
		if (m->in[side] != x)
			continue;
		int mark = c->n_members;
		ir_node *sq = pass_pattern_take(c, m->in[1 - side], OP_mul);
		if (sq && sq->in[0] == x && sq->in[1] == x)
			return true;
		c->n_members = mark;
	}
	return false;
}

/* u = k * x (tanh form: k * (x + 0.044715 x^3)) -> x, else NO_VALUE. */
static air_value tanh_argument(pass_pattern *c, air_value u)
{
	air_value v = with_scalar(c->g, pass_pattern_take(c, u, OP_mul), 0.7978845608028654);
	if (v == NO_VALUE)
		return NO_VALUE;
	ir_node *s = pass_pattern_take(c, v, OP_add);
	if (!s || s->n_in != 2)
		return NO_VALUE;
	for (int side = 0; side < 2; side++) {
		air_value x = s->in[side];
		int mark = c->n_members;
		air_value cube = with_scalar(c->g, pass_pattern_take(c, s->in[1 - side], OP_mul), 0.044715);
		if (cube != NO_VALUE && is_cube(c, cube, x))
			return x;
		c->n_members = mark;
	}
	return NO_VALUE;
}

/* Tries node k as the final product; on a match rewrites it into the op
 * and marks the rest of the pattern dead. Returns the op made, or -1. */
static int match(pass_pattern *c, int k)
{
	ir_node *n = &c->g->nodes[k];
	if (n->op != OP_mul || n->n_in != 2 || c->g->values[n->out[0]].dtype != AIR_F32)
		return -1;
	for (int side = 0; side < 2; side++) {
		c->n_members = 0;
		air_value x = with_scalar(c->g, pass_pattern_take(c, n->in[side], OP_mul), 0.5);
		if (x == NO_VALUE)
			continue;
		air_value t = with_scalar(c->g, pass_pattern_take(c, n->in[1 - side], OP_add), 1.0);
		if (t == NO_VALUE)
			continue;
		int op = -1;
		air_value arg = NO_VALUE;
		ir_node *f = pass_pattern_take(c, t, OP_tanh);
		if (f) {
			op = OP_gelu_tanh;
			arg = tanh_argument(c, f->in[0]);
		} else if ((f = pass_pattern_take(c, t, OP_erf)) != NULL) {
			/* erf(x * (1/sqrt 2)) or erf(x / sqrt 2) */
			op = OP_gelu;
			ir_node *s = pass_pattern_take(c, f->in[0], OP_mul);
			arg = with_scalar(c->g, s, 0.7071067811865476);
			if (!s && (s = pass_pattern_take(c, f->in[0], OP_div)) != NULL && is_scalar(c->g, s->in[1], 1.4142135623730951))
				arg = s->in[0];
		}
		if (arg == NO_VALUE || arg != x)
			continue;
		pass_pattern_kill(c);
		pass_set_op(n, op);
		n->in[0] = x;
		n->n_in = 1;
		return op;
	}
	return -1;
}

air_status pass_fuse_activation(air_graph *g, const pass_options *po, pass_log *log)
{
	(void)po;
	pass_pattern c;
	AIR_TRY(pass_pattern_init(&c, g, "fuse_activation"));
	int made[2] = {0, 0};
	for (int k = 0; k < g->n_nodes; k++) {
		if (c.dead[k])
			continue;
		int op = match(&c, k);
		if (op >= 0)
			made[op == OP_gelu ? 1 : 0]++;
	}
	pass_compact(g, c.dead);
	pass_pattern_free(&c);
	pass_logf(log, "fuse_activation: %d tanh GELU(s), %d erf GELU(s) written out in ops made one op\n", made[0],
		  made[1]);
	return AIR_OK;
}

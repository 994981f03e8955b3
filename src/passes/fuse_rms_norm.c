/* fuse_rms_norm.c - an RMS norm written out in elementwise ops becomes the
 * rms_norm op:
 *
 *   w * (x * rsqrt(mean(x * x, -1, keepdim) + eps))  -> rms_norm(x, w, eps)
 *
 * (Hugging Face's LlamaRMSNorm and its copies: Mistral, Qwen, T5, ...;
 * x^2 may be pow(x, 2), products in either order, without w ->
 * rms_norm(x)). Written out it is five ops, three of them full passes over
 * x and two of those broadcasts (reference kernels); rms_norm_rows does
 * it in one pass over the rows, in L1.
 *
 * Every intermediate must have no other use, eps be a scalar constant >= 0,
 * w have exactly x's last dim, and the types f32 throughout.
 * Requires: node order is an execution order. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "ops/op.h"
#include "passes/pass.h"

#define NO_VALUE ((air_value)-1)

/* Is v x * x or pow(x, 2)? */
static bool is_square(pass_pattern *c, air_value v, air_value x)
{
	const ir_value *pv = &c->g->values[v];
	if (pv->kind != IR_NODE_OUTPUT)
		return false;
	float two;
	if (c->g->nodes[pv->index].op == OP_pow) {
		ir_node *p = pass_pattern_take(c, v, OP_pow);
		return p && p->in[0] == x && pass_f32_scalar(c->g, p->in[1], &two) && two == 2.0f;
	}
	ir_node *m = pass_pattern_take(c, v, OP_mul);
	return m && m->in[0] == x && m->in[1] == x;
}

/* r = rsqrt(mean(x^2 over the last dim, keepdim) + eps): true with *eps */
static bool is_rms_factor(pass_pattern *c, air_value r, air_value x, float *eps)
{
	const ir_value *xv = &c->g->values[x];
	ir_node *rs = pass_pattern_take(c, r, OP_rsqrt);
	ir_node *add = rs ? pass_pattern_take(c, rs->in[0], OP_add) : NULL;
	if (!add || add->n_in != 2 || xv->rank < 1)
		return false;
	for (int side = 0; side < 2; side++) {
		int mark = c->n_members;
		if (pass_f32_scalar(c->g, add->in[1 - side], eps) && *eps >= 0.0f) {
			ir_node *mean = pass_pattern_take(c, add->in[side], OP_mean);
			const ir_attr *axes = mean ? &mean->attrs[0] : NULL;
			bool last = axes && axes->n == 1 &&
				    (axes->ints[0] == xv->rank - 1 || axes->ints[0] == -1) && mean->attrs[1].i == 1;
			if (last && is_square(c, mean->in[0], x))
				return true;
		}
		c->n_members = mark;
	}
	return false;
}

/* h = x * r or r * x with r the RMS factor of x: x, else NO_VALUE. */
static air_value normalized(pass_pattern *c, ir_node *h, float *eps)
{
	if (!h || h->n_in != 2)
		return NO_VALUE;
	for (int side = 0; side < 2; side++) {
		int mark = c->n_members;
		if (is_rms_factor(c, h->in[1 - side], h->in[side], eps))
			return h->in[side];
		c->n_members = mark;
	}
	return NO_VALUE;
}

/* Is w a weight for x's last dim ([n], f32)? */
static bool is_weight(const air_graph *g, air_value w, air_value x)
{
	const ir_value *wv = &g->values[w], *xv = &g->values[x];
	return wv->dtype == AIR_F32 && wv->rank == 1 && ir_dim_equal(g, wv->dims[0], xv->dims[xv->rank - 1]);
}

static void rewrite(pass_pattern *c, ir_node *n, air_value x, air_value w, float eps)
{
	pass_pattern_kill(c);
	pass_set_op(n, OP_rms_norm);
	n->in[0] = x;
	n->n_in = 1;
	if (w != NO_VALUE) {
		n->in[1] = w;
		n->n_in = 2;
	}
	n->attrs[0].i = 1; /* normalized_ndim */
	n->attrs[0].set = true;
	n->attrs[1].f = eps;
	n->attrs[1].set = true;
	n->attrs[2].i = w != NO_VALUE;
	n->attrs[2].set = true;
}

/* Node k as w * h (weighted: a node of 2 inputs, ready to take [x, w]) or as
 * h itself. */
static bool match(pass_pattern *c, int k, bool weighted)
{
	ir_node *n = &c->g->nodes[k];
	if (n->op != OP_mul || n->n_in != 2 || c->g->values[n->out[0]].dtype != AIR_F32)
		return false;
	float eps;
	if (!weighted) {
		c->n_members = 0;
		air_value x = normalized(c, n, &eps);
		if (x == NO_VALUE)
			return false;
		rewrite(c, n, x, NO_VALUE, eps);
		return true;
	}
	for (int side = 0; side < 2; side++) {
		c->n_members = 0;
		air_value x = normalized(c, pass_pattern_take(c, n->in[side], OP_mul), &eps);
		if (x == NO_VALUE || !is_weight(c->g, n->in[1 - side], x))
			continue;
		rewrite(c, n, x, n->in[1 - side], eps);
		return true;
	}
	return false;
}

air_status pass_fuse_rms_norm(air_graph *g, const pass_options *po, pass_log *log)
{
	(void)po;
	pass_pattern c;
	AIR_TRY(pass_pattern_init(&c, g, "fuse_rms_norm"));
	/* weighted norms first: else each one's inner product, visited first,
	 * would match alone and leave the weight's product outside */
	int made[2] = {0, 0};
	for (int pass = 0; pass < 2; pass++)
		for (int k = 0; k < g->n_nodes; k++)
			if (!c.dead[k] && match(&c, k, pass == 0))
				made[pass]++;
	pass_compact(g, c.dead);
	pass_pattern_free(&c);
	pass_logf(log, "fuse_rms_norm: %d RMS norm(s) with a weight and %d without, written out in ops, made one op\n",
		  made[0], made[1]);
	return AIR_OK;
}

/* fuse_rope.c - the rotary position embedding written out in ops becomes
 * the rope op:
 *
 *   x * cos + cat(-x[..., h:], x[..., :h]) * sin  ->  rope(x, cos, sin)
 *
 * (Hugging Face's apply_rotary_pos_emb with rotate_half, on q and on k in
 * every LLaMA-style layer; h is half of x's last dim). Written out it is
 * seven ops, five of them copies of x's size; rope reads x, cos and sin
 * once (kernels/rope/rope_ref.h).
 *
 * On a head split (x = permute(y, (0, 2, 1, 3)), read by nothing else,
 * with cos and sin [B or 1, 1, L, E], as LLaMA's q and k are) the rope runs
 * on y instead (attr bshd) and the permute after it, where attention_views,
 * the next pass, folds it into sdpa: the split's copy goes.
 *
 * Products and the sum in either operand order; every intermediate used
 * once; the slices on the last dim, step 1, splitting it in halves; cos
 * and sin of x's rank and last dim (broadcast over the others); f32.
 * Requires: node order is an execution order. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "ops/op.h"
#include "passes/pass.h"

/* Is v a slice of the last dim of x (rank r, last dim n) from start to end? */
static bool is_half(pass_pattern *c, air_value v, air_value *x, int64_t start, int64_t end)
{
	ir_node *s = pass_pattern_take(c, v, OP_slice);
	if (!s)
		return false;
	const ir_value *in = &c->g->values[s->in[0]];
	int64_t axis = s->attrs[0].i < 0 ? s->attrs[0].i + in->rank : s->attrs[0].i;
	if (axis != in->rank - 1 || s->attrs[1].i != start || s->attrs[2].i != end || s->attrs[3].i != 1)
		return false;
	*x = s->in[0];
	return true;
}

/* Is r cat(-x[..., h:], x[..., :h]) along x's last dim? */
static bool is_rotate_half(pass_pattern *c, air_value r, air_value x)
{
	const ir_value *xv = &c->g->values[x];
	if (xv->rank < 1 || !ir_dim_is_const(xv->dims[xv->rank - 1]))
		return false;
	int64_t n = xv->dims[xv->rank - 1], h = n / 2;
	ir_node *cat = pass_pattern_take(c, r, OP_cat);
	if (!cat || cat->n_in != 2 || n % 2 != 0 || n == 0)
		return false;
	int64_t axis = cat->attrs[0].i < 0 ? cat->attrs[0].i + xv->rank : cat->attrs[0].i;
	ir_node *neg = axis == xv->rank - 1 ? pass_pattern_take(c, cat->in[0], OP_neg) : NULL;
	air_value hi, lo;
	return neg && is_half(c, neg->in[0], &hi, h, n) && is_half(c, cat->in[1], &lo, 0, h) && hi == x && lo == x;
}

/* Can t be rope's cos or sin for x? */
static bool is_table(const air_graph *g, air_value t, air_value x)
{
	const ir_value *tv = &g->values[t], *xv = &g->values[x];
	if (tv->dtype != AIR_F32 || tv->rank != xv->rank ||
	    !ir_dim_equal(g, tv->dims[xv->rank - 1], xv->dims[xv->rank - 1]))
		return false;
	for (int d = 0; d < xv->rank - 1; d++)
		if (tv->dims[d] != 1 && !ir_dim_equal(g, tv->dims[d], xv->dims[d]))
			return false;
	return true;
}

/* When x is the head split permute(y, (0, 2, 1, 3)) of y [B, L, H, E],
 * read by nothing but the pattern, and cos and sin are [B or 1, 1, L, E]:
 * the rope runs on y (bshd) in the slot of the pattern's last member, and
 * node k becomes the permute of its result, which attention_views (next)
 * folds into sdpa; the split's copy goes. in: x, cos, sin (taken over on
 * success). */
static bool heads_first(pass_pattern *c, int k, air_value *in)
{
	air_graph *g = c->g;
	const ir_value *xv = &g->values[in[0]];
	int p = xv->kind == IR_NODE_OUTPUT ? xv->index : -1;
	/* the pattern's three reads of x (a graph output would be a fourth use) */
	if (p < 0 || g->nodes[p].op != OP_permute || xv->rank != 4 || c->uses[in[0]] != 3)
		return false;
	const ir_attr *perm = &g->nodes[p].attrs[0];
	static const int64_t swap12[4] = {0, 2, 1, 3};
	for (int d = 0; d < 4; d++)
		if (perm->n != 4 || perm->ints[d] != swap12[d])
			return false;
	for (int i = 1; i < 3; i++)
		if (g->values[in[i]].rank != 4 || g->values[in[i]].dims[1] != 1)
			return false;
	/* the slot: the last member (after x, cos and sin are made, before k) */
	int slot = -1;
	for (int m = 0; m < c->n_members; m++)
		slot = c->members[m] > slot ? c->members[m] : slot;
	air_value y = g->nodes[p].in[0], r;
	const ir_value *yv = &g->values[y];
	air_dim dims[4] = {yv->dims[0], yv->dims[1], yv->dims[2], yv->dims[3]};
	if (slot < 0 || ir_add_value(g, AIR_F32, 4, dims, IR_NODE_OUTPUT, slot, &r) != AIR_OK)
		return false;
	ir_node *sn = &g->nodes[slot], *pn = &g->nodes[p], *n = &g->nodes[k];
	/* the slot's node: rope(y, cos, sin) -> r */
	in[0] = y;
	pass_set_op(sn, OP_rope);
	free(sn->in);
	sn->in = in;
	sn->n_in = 3;
	sn->out[0] = r;
	sn->n_out = 1;
	sn->attrs[0].i = 1;
	sn->attrs[0].set = true;
	c->dead[slot] = 0;
	/* node k: permute(r) -> its own output, the split's permutation */
	n->in[0] = r;
	n->n_in = 1;
	pass_set_op(n, OP_permute);
	n->attrs[0] = pn->attrs[0];
	pn->attrs[0].ints = NULL; /* moved to n */
	pn->attrs[0].n = 0;
	/* the split's permute: nothing reads it now */
	c->dead[p] = 1;
	g->values[pn->out[0]].kind = IR_DEAD;
	return true;
}

/* Node k as the final sum; on a match it becomes rope(x, cos, sin). */
static bool match(pass_pattern *c, int k)
{
	ir_node *n = &c->g->nodes[k];
	if (n->op != OP_add || n->n_in != 2 || c->g->values[n->out[0]].dtype != AIR_F32)
		return false;
	for (int side = 0; side < 2; side++) {
		c->n_members = 0;
		ir_node *a = pass_pattern_take(c, n->in[side], OP_mul);
		ir_node *b = a ? pass_pattern_take(c, n->in[1 - side], OP_mul) : NULL;
		if (!b)
			continue;
		int mark = c->n_members;
		for (int ax = 0; ax < 2; ax++)
			for (int bx = 0; bx < 2; bx++) {
				c->n_members = mark;
				air_value x = a->in[ax], cos = a->in[1 - ax], sin = b->in[1 - bx];
				if (!is_rotate_half(c, b->in[bx], x) || !is_table(c->g, cos, x) || !is_table(c->g, sin, x))
					continue;
				const ir_value *xv = &c->g->values[x], *ov = &c->g->values[n->out[0]];
				bool same = xv->rank == ov->rank;
				for (int d = 0; d < xv->rank && same; d++)
					same = ir_dim_equal(c->g, xv->dims[d], ov->dims[d]);
				air_value *in = same ? malloc(sizeof *in * 3) : NULL;
				if (!in) /* cos or sin would broadcast x itself (or no memory): left as it is */
					continue;
				pass_pattern_kill(c);
				in[0] = x;
				in[1] = cos;
				in[2] = sin;
				if (heads_first(c, k, in)) /* n is now the permute */
					return true;
				pass_set_op(n, OP_rope);
				free(n->in);
				n->in = in;
				n->n_in = 3;
				return true;
			}
	}
	return false;
}

air_status pass_fuse_rope(air_graph *g, const pass_options *po, pass_log *log)
{
	(void)po;
	pass_pattern c;
	AIR_TRY(pass_pattern_init(&c, g, "fuse_rope"));
	int made = 0;
	for (int k = 0; k < g->n_nodes; k++)
		if (!c.dead[k] && match(&c, k))
			made++;
	pass_compact(g, c.dead);
	pass_pattern_free(&c);
	pass_logf(log, "fuse_rope: %d rotary embedding(s) written out in ops made one op\n", made);
	return AIR_OK;
}

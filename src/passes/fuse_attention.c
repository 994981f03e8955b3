/* fuse_attention.c - decomposed attention becomes one sdpa node:
 *
 *   bmm(Q', Kt') -> [reshape] -> [mul/div by f32 scalar]* -> [add mask]
 *     -> softmax(-1) -> [reshape] -> bmm(., V')
 *
 * where Q', Kt', V' are Q, K^T, V seen through the noise that aot_autograd
 * leaves around a bmm: reshapes that only merge or split leading dims,
 * expands and copies that change nothing. K^T must come from a permute
 * (after simplify, usually one that also does the head split): K [..., S, E]
 * is then that permute's input (when the two cancel) or a new permute of it
 * with the last two axes swapped, placed just before the sdpa node. Q, K and V must agree in
 * rank and leading dims, except that K and V may be grouped-query heads
 * repeated by reshape -> expand -> reshape (repeat_kv), which sdpa reads
 * without the copy. The mask
 * must broadcast to [lead..., L, S]. Every value between the two bmms has
 * exactly one use and is not a graph output; otherwise nothing changes.
 * The result: sdpa(Q, K, V[, mask], scale, empty_nan=1), since a row that
 * is -inf everywhere gives NaN through softmax. Its output takes the place
 * of a reshape of the second bmm to [lead..., L, Ev], or of the bmm itself
 * (with a reshape inserted when the shapes differ).
 * Requires: node order is execution order. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "ops/op.h"
#include "passes/pass.h"

typedef struct fa_state {
	air_graph *g;
	int *uses, *user; /* per value: use count (outputs count), the (last) node using it */
	char *dead;       /* per node */
} fa_state;

static const ir_value *val(const fa_state *s, air_value v)
{
	return &s->g->values[v];
}

static int producer(const fa_state *s, air_value v)
{
	const ir_value *x = val(s, v);
	return x->kind == IR_NODE_OUTPUT ? x->index : -1;
}

static bool dims_equal(const fa_state *s, const air_dim *a, const air_dim *b, int n)
{
	for (int i = 0; i < n; i++)
		if (!ir_dim_equal(s->g, a[i], b[i]))
			return false;
	return true;
}

static bool same_shape(const fa_state *s, air_value a, air_value b)
{
	const ir_value *x = val(s, a), *y = val(s, b);
	return x->rank == y->rank && dims_equal(s, x->dims, y->dims, x->rank);
}

/* a reshape that keeps the last two dims (it only merges or splits leading
 * ones), an expand to the same shape, or a copy */
static bool is_noise(const fa_state *s, int k)
{
	const ir_node *n = &s->g->nodes[k];
	if (n->n_in != 1 || n->n_out != 1)
		return false;
	const ir_value *in = val(s, n->in[0]), *out = val(s, n->out[0]);
	if (n->op == OP_copy)
		return true;
	if (n->op == OP_expand)
		return same_shape(s, n->in[0], n->out[0]);
	if (n->op == OP_reshape)
		return in->rank >= 2 && out->rank >= 2 &&
		       ir_dim_equal(s->g, in->dims[in->rank - 1], out->dims[out->rank - 1]) &&
		       ir_dim_equal(s->g, in->dims[in->rank - 2], out->dims[out->rank - 2]);
	return false;
}

/* Follows v back through noise; *single says whether every value passed
 * (v included) has one use, so the whole path dies with its consumer. */
static air_value strip_back(const fa_state *s, air_value v, bool *single)
{
	*single = true;
	for (;;) {
		int k = producer(s, v);
		if (k < 0 || !is_noise(s, k))
			return v;
		if (s->uses[v] != 1)
			*single = false;
		v = s->g->nodes[k].in[0];
	}
}

/* Grouped-query k/v as repeat_kv writes it: X [..., Hkv, S, D] -> reshape
 * [..., Hkv, 1, S, D] -> expand [..., Hkv, n, S, D] (= e). Returns X, whose
 * heads sdpa repeats itself (q head h reads X head h / n), or e itself. */
static air_value ungroup(const fa_state *s, air_value e)
{
	int k = producer(s, e);
	if (k < 0 || s->g->nodes[k].op != OP_expand)
		return e;
	air_value u = s->g->nodes[k].in[0];
	int k2 = producer(s, u);
	if (k2 < 0 || s->g->nodes[k2].op != OP_reshape)
		return e;
	air_value x = s->g->nodes[k2].in[0];
	const ir_value *E = val(s, e), *U = val(s, u), *X = val(s, x);
	int r = X->rank;
	if (r < 3 || U->rank != r + 1 || E->rank != r + 1 || U->dims[r - 2] != 1)
		return e;
	for (int d = 0, du = 0; d < r; d++, du++) {
		if (du == r - 2)
			du++;
		if (!ir_dim_equal(s->g, X->dims[d], U->dims[du]) || !ir_dim_equal(s->g, X->dims[d], E->dims[du]))
			return e;
	}
	return x;
}

/* An operand of rank r behind v: v through noise, and through the expand
 * of grouped-query k/v when allow_group; ~0u if there is none. */
static air_value operand(const fa_state *s, air_value v, int r, bool allow_group)
{
	bool single;
	air_value x = strip_back(s, v, &single);
	if (val(s, x)->rank == r)
		return x;
	if (allow_group && val(s, x)->rank == r + 1) {
		air_value u = ungroup(s, x);
		if (u != x && val(s, u)->rank == r)
			return u;
	}
	return ~(air_value)0;
}

/* k/v leading dims against q's: equal, except that dim r-3 (heads) may be
 * a constant divisor of q's (grouped-query attention). */
static bool lead_fits(const fa_state *s, const ir_value *q, const ir_value *t, int r)
{
	for (int d = 0; d < r - 2; d++) {
		if (ir_dim_equal(s->g, q->dims[d], t->dims[d]))
			continue;
		if (d != r - 3 || q->dims[d] < 0 || t->dims[d] <= 0 || q->dims[d] % t->dims[d] != 0)
			return false;
	}
	return true;
}

/* The one node using v, if v has exactly one use that is a node input. */
static int sole_user(const fa_state *s, air_value v)
{
	return s->uses[v] == 1 ? s->user[v] : -1;
}

static bool f32_scalar(const fa_state *s, air_value v, float *out)
{
	const ir_value *x = val(s, v);
	if (x->kind != IR_CONSTANT || x->dtype != AIR_F32)
		return false;
	for (int d = 0; d < x->rank; d++)
		if (x->dims[d] != 1)
			return false;
	const void *p = ir_constant_data(s->g, v);
	if (!p)
		return false;
	memcpy(out, p, sizeof *out);
	return true;
}

enum { FA_MAX_CHAIN = 16 };

typedef struct fa_match {
	int bmm1, bmm2, out_reshape; /* out_reshape: -1 if none */
	int chain[FA_MAX_CHAIN], n_chain; /* nodes strictly between bmm1 and bmm2 */
	air_value q, k_src, k, v, mask;  /* k_src: the permute's input; k: K when that permute goes */
	bool has_mask;
	int kperm_node;                  /* the permute producing K^T */
	int64_t kperm[AIR_MAX_RANK];     /* the permute that gives K */
	bool k_identity;                 /* that permute is the identity: K = k_src */
	double scale;
} fa_match;

/* Does bmm node k start a decomposed attention? Fills m. */
static bool match(const fa_state *s, int k, fa_match *m)
{
	const air_graph *g = s->g;
	const ir_node *b1 = &g->nodes[k];
	memset(m, 0, sizeof *m);
	m->bmm1 = k;
	m->out_reshape = -1;
	m->scale = 1.0;
	if (val(s, b1->out[0])->dtype != AIR_F32)
		return false;
	/* the chain from the scores to the second bmm */
	air_value v = b1->out[0];
	bool soft = false, added = false;
	for (;;) {
		if (s->uses[v] != 1 || m->n_chain >= FA_MAX_CHAIN)
			return false;
		int u = s->user[v];
		if (u < 0)
			return false; /* a graph output */
		const ir_node *n = &g->nodes[u];
		if (n->op == OP_bmm && soft && n->in[0] == v) {
			m->bmm2 = u;
			break;
		}
		m->chain[m->n_chain++] = u;
		if (is_noise(s, u) && n->in[0] == v) {
			v = n->out[0];
			continue;
		}
		if (soft)
			return false;
		if (n->op == OP_softmax) {
			const ir_value *x = val(s, v);
			if (n->attrs[0].i != x->rank - 1 && n->attrs[0].i != -1)
				return false;
			soft = true;
			v = n->out[0];
			continue;
		}
		if (n->n_in != 2 || !same_shape(s, n->out[0], v))
			return false;
		air_value other = n->in[0] == v ? n->in[1] : n->in[0];
		float c;
		if ((n->op == OP_mul || n->op == OP_div) && !added && f32_scalar(s, other, &c)) {
			if (n->op == OP_div && n->in[1] != other)
				return false; /* c / scores */
			m->scale = n->op == OP_mul ? m->scale * c : m->scale / c;
			v = n->out[0];
			continue;
		}
		if (n->op == OP_add && !added && n->in[0] != n->in[1]) {
			m->mask = other;
			m->has_mask = true;
			added = true;
			v = n->out[0];
			continue;
		}
		return false;
	}
	if (!(m->scale != 0.0 && isfinite(m->scale)))
		return false; /* sdpa reads scale 0 as 1/sqrt(E) */
	/* operands */
	const ir_node *b2 = &g->nodes[m->bmm2];
	bool single;
	m->q = strip_back(s, b1->in[0], &single);
	int r = val(s, m->q)->rank;
	m->v = operand(s, b2->in[1], r, true);
	if (m->v == ~(air_value)0)
		return false;
	air_value kt = strip_back(s, b1->in[1], &single);
	(void)single;
	m->kperm_node = producer(s, kt);
	if (m->kperm_node < 0 || g->nodes[m->kperm_node].op != OP_permute)
		return false;
	const ir_node *pn = &g->nodes[m->kperm_node];
	const ir_value *Q = val(s, m->q), *KT = val(s, kt), *V = val(s, m->v);
	if (r < 3 || KT->rank != r || V->rank != r || Q->dtype != AIR_F32 || KT->dtype != AIR_F32 ||
	    V->dtype != AIR_F32 || pn->attrs[0].n != r)
		return false;
	if (!dims_equal(s, Q->dims, KT->dims, r - 2) || !lead_fits(s, Q, V, r))
		return false;
	if (!ir_dim_equal(g, Q->dims[r - 1], KT->dims[r - 2]) || !ir_dim_equal(g, KT->dims[r - 1], V->dims[r - 2]))
		return false;
	m->k_src = pn->in[0];
	m->k_identity = true;
	for (int d = 0; d < r; d++) {
		m->kperm[d] = pn->attrs[0].ints[d == r - 2 ? r - 1 : d == r - 1 ? r - 2 : d];
		m->k_identity &= m->kperm[d] == d;
	}
	m->k = m->k_src;
	if (m->k_identity) {
		/* K = the permute's input, seen through noise and repeat_kv */
		m->k = operand(s, m->k_src, r, true);
		if (m->k == ~(air_value)0 || !lead_fits(s, Q, val(s, m->k), r))
			return false;
	}
	/* the mask broadcasts to [lead..., L, S] */
	if (m->has_mask) {
		const ir_value *M = val(s, m->mask);
		if (M->rank > r || (M->dtype != AIR_F32))
			return false;
		/* find the add's scores operand shape: compare with [lead.., L, S] */
		air_dim want[AIR_MAX_RANK];
		for (int d = 0; d < r - 2; d++)
			want[d] = Q->dims[d];
		want[r - 2] = Q->dims[r - 2];
		want[r - 1] = KT->dims[r - 1];
		const ir_node *add = NULL;
		for (int i = 0; i < m->n_chain; i++)
			if (g->nodes[m->chain[i]].op == OP_add)
				add = &g->nodes[m->chain[i]];
		const ir_value *sc = val(s, add->out[0]);
		bool aligned = sc->rank == r && dims_equal(s, sc->dims, want, r);
		for (int i = 0; i < M->rank - 2 && !aligned; i++)
			if (M->dims[i] != 1)
				return false;
		for (int i = 0; i < M->rank; i++) {
			air_dim md = M->dims[i], wd = want[r - M->rank + i];
			if (md != 1 && !ir_dim_equal(g, md, wd))
				return false;
		}
	}
	/* where the result goes */
	air_value o = b2->out[0];
	int ru = sole_user(s, o);
	if (ru >= 0 && g->nodes[ru].op == OP_reshape) {
		const ir_value *R = val(s, g->nodes[ru].out[0]);
		if (R->rank == r && dims_equal(s, R->dims, Q->dims, r - 1) &&
		    ir_dim_equal(g, R->dims[r - 1], V->dims[r - 1]))
			m->out_reshape = ru;
	}
	return true;
}

static void kill(fa_state *s, int k)
{
	ir_node *n = &s->g->nodes[k];
	s->dead[k] = 1;
	for (int i = 0; i < n->n_in; i++)
		s->uses[n->in[i]]--;
	for (int o = 0; o < n->n_out; o++)
		s->g->values[n->out[o]].kind = IR_DEAD;
}

/* Kills the nodes from v back that nothing reads any more (every op is
 * pure, so an unused value's node can go). */
static void kill_unused_back(fa_state *s, air_value v, int depth)
{
	int k = producer(s, v);
	if (k < 0 || s->dead[k] || s->uses[v] != 0 || s->g->nodes[k].n_out != 1 || depth > 8)
		return;
	kill(s, k);
	const ir_node *n = &s->g->nodes[k];
	for (int i = 0; i < n->n_in; i++)
		kill_unused_back(s, n->in[i], depth + 1);
}

/* A node slot at position pos (later nodes move one down). */
static air_status insert_node(fa_state *s, int pos)
{
	air_graph *g = s->g;
	AIR_TRY(ir_grow((void **)&g->nodes, &g->cap_nodes, g->n_nodes, sizeof *g->nodes));
	char *dead = realloc(s->dead, (size_t)g->n_nodes + 2);
	if (!dead)
		return air_error(AIR_OUT_OF_MEMORY, "fuse_attention: no memory");
	s->dead = dead;
	memmove(&g->nodes[pos + 1], &g->nodes[pos], sizeof *g->nodes * (size_t)(g->n_nodes - pos));
	memmove(&s->dead[pos + 1], &s->dead[pos], (size_t)(g->n_nodes - pos));
	memset(&g->nodes[pos], 0, sizeof *g->nodes);
	s->dead[pos] = 0;
	g->n_nodes++;
	for (int k = pos + 1; k < g->n_nodes; k++)
		for (int o = 0; o < g->nodes[k].n_out; o++)
			g->values[g->nodes[k].out[o]].index = k;
	return AIR_OK;
}

static void clear_attrs(ir_node *n)
{
	for (int a = 0; a < IR_MAX_ATTRS; a++) {
		free(n->attrs[a].ints);
		memset(&n->attrs[a], 0, sizeof n->attrs[a]);
	}
}

static air_status rewrite(fa_state *s, fa_match *m, pass_log *log)
{
	air_graph *g = s->g;
	int r = val(s, m->q)->rank;
	/* K: the K^T permute's input, or a new permute of it just before the
	 * second bmm (K^T itself may have other readers; if not, it dies below) */
	air_value k = m->k;
	if (!m->k_identity) {
		ir_value kt = *val(s, g->nodes[m->kperm_node].out[0]);
		air_dim d2 = kt.dims[r - 2];
		kt.dims[r - 2] = kt.dims[r - 1];
		kt.dims[r - 1] = d2;
		int pos = m->bmm2;
		AIR_TRY(ir_add_value(g, kt.dtype, r, kt.dims, IR_NODE_OUTPUT, pos, &k));
		int *uses = realloc(s->uses, sizeof *uses * ((size_t)g->n_values + 1));
		if (!uses)
			return air_error(AIR_OUT_OF_MEMORY, "fuse_attention: no memory");
		s->uses = uses;
		s->uses[k] = 0;
		AIR_TRY(insert_node(s, pos));
		m->bmm2++;
		if (m->out_reshape >= pos)
			m->out_reshape++;
		ir_node *pn = &g->nodes[pos];
		pn->op = OP_permute;
		pn->in = malloc(sizeof *pn->in);
		pn->out = malloc(sizeof *pn->out);
		pn->attrs[0].ints = malloc(sizeof(int64_t) * (size_t)r);
		if (!pn->in || !pn->out || !pn->attrs[0].ints)
			return air_error(AIR_OUT_OF_MEMORY, "fuse_attention: no memory");
		pn->n_in = pn->n_out = 1;
		pn->in[0] = m->k_src;
		pn->out[0] = k;
		s->uses[m->k_src]++;
		pn->attrs[0].set = true;
		pn->attrs[0].n = r;
		memcpy(pn->attrs[0].ints, m->kperm, sizeof(int64_t) * (size_t)r);
	}
	/* the sdpa node's inputs */
	int n_in = m->has_mask ? 4 : 3;
	air_value *in = malloc(sizeof *in * (size_t)n_in);
	if (!in)
		return air_error(AIR_OUT_OF_MEMORY, "fuse_attention: no memory");
	in[0] = m->q;
	in[1] = k;
	in[2] = m->v;
	if (n_in == 4)
		in[3] = m->mask;
	/* everything between the bmms dies; the bmms too, except the slot */
	air_value b1q = g->nodes[m->bmm1].in[0], b1k = g->nodes[m->bmm1].in[1], b2v = g->nodes[m->bmm2].in[1];
	air_value b2out = g->nodes[m->bmm2].out[0];
	kill(s, m->bmm1);
	for (int i = 0; i < m->n_chain; i++)
		kill(s, m->chain[i]);
	int slot = m->bmm2;
	air_value out;
	ir_node *n = &g->nodes[slot];
	for (int i = 0; i < n->n_in; i++)
		s->uses[n->in[i]]--;
	if (m->out_reshape >= 0) {
		out = g->nodes[m->out_reshape].out[0];
		g->values[b2out].kind = IR_DEAD;
		s->uses[b2out] = 0;
		ir_node *rn = &g->nodes[m->out_reshape];
		s->dead[m->out_reshape] = 1;
		rn->n_out = 0; /* its output now comes from the sdpa node */
	} else if (val(s, b2out)->rank == r) {
		out = b2out;
	} else {
		/* sdpa gives [lead..., L, Ev]; a reshape after it gives bmm's shape */
		air_dim od[AIR_MAX_RANK];
		memcpy(od, val(s, m->q)->dims, sizeof od);
		od[r - 1] = val(s, m->v)->dims[r - 1];
		AIR_TRY(ir_add_value(g, AIR_F32, r, od, IR_NODE_OUTPUT, slot, &out));
		AIR_TRY(insert_node(s, slot + 1));
		n = &g->nodes[slot];
		ir_node *rs = &g->nodes[slot + 1];
		const ir_value *bo = val(s, b2out);
		rs->op = OP_reshape;
		rs->in = malloc(sizeof *rs->in);
		rs->out = malloc(sizeof *rs->out);
		rs->attrs[0].ints = malloc(sizeof(int64_t) * (size_t)bo->rank);
		if (!rs->in || !rs->out || !rs->attrs[0].ints) {
			free(in);
			return air_error(AIR_OUT_OF_MEMORY, "fuse_attention: no memory");
		}
		rs->n_in = rs->n_out = 1;
		rs->in[0] = out;
		rs->out[0] = b2out;
		g->values[b2out].index = slot + 1;
		rs->attrs[0].set = true;
		rs->attrs[0].n = bo->rank;
		for (int d = 0; d < bo->rank; d++)
			rs->attrs[0].ints[d] = bo->dims[d];
	}
	free(n->in);
	n->in = in;
	n->n_in = n_in;
	n->out[0] = out;
	n->n_out = 1;
	g->values[out].kind = IR_NODE_OUTPUT;
	g->values[out].index = slot;
	clear_attrs(n);
	n->op = OP_sdpa;
	n->attrs[0].set = true;
	n->attrs[0].f = m->scale;
	n->attrs[1].set = true;
	n->attrs[1].i = 0;
	n->attrs[2].set = true;
	n->attrs[2].i = m->has_mask;
	n->attrs[3].set = true;
	n->attrs[3].i = 1;
	for (int i = 0; i < n_in; i++)
		s->uses[in[i]]++;
	/* whatever fed the bmms that nothing reads now */
	kill_unused_back(s, b1q, 0);
	kill_unused_back(s, b1k, 0);
	kill_unused_back(s, b2v, 0);
	kill_unused_back(s, m->k_src, 0);
	char q[96], kk[96], vv[96];
	ir_value_string(g, m->q, q, sizeof q);
	ir_value_string(g, k, kk, sizeof kk);
	ir_value_string(g, m->v, vv, sizeof vv);
	pass_logf(log, "  sdpa(q %s, k %s, v %s%s, scale %g)\n", q, kk, vv, m->has_mask ? ", mask" : "", m->scale);
	return AIR_OK;
}

static air_status count(fa_state *s)
{
	air_graph *g = s->g;
	free(s->uses);
	free(s->user);
	free(s->dead);
	s->uses = calloc((size_t)g->n_values + 1, sizeof *s->uses);
	s->user = malloc(sizeof *s->user * ((size_t)g->n_values + 1));
	s->dead = calloc((size_t)g->n_nodes + 1, 1);
	if (!s->uses || !s->user || !s->dead)
		return air_error(AIR_OUT_OF_MEMORY, "fuse_attention: no memory");
	for (int v = 0; v < g->n_values; v++)
		s->user[v] = -1;
	for (int k = 0; k < g->n_nodes; k++)
		for (int i = 0; i < g->nodes[k].n_in; i++) {
			s->uses[g->nodes[k].in[i]]++;
			s->user[g->nodes[k].in[i]] = k;
		}
	for (int i = 0; i < g->n_outputs; i++)
		s->uses[g->outputs[i]]++;
	return AIR_OK;
}

air_status pass_fuse_attention(air_graph *g, const pass_options *po, pass_log *log)
{
	(void)po;
	fa_state s = {g, NULL, NULL, NULL};
	int fused = 0;
	air_status st = AIR_OK;
	for (int k = 0; k < g->n_nodes; k++) {
		if (g->nodes[k].op != OP_bmm)
			continue;
		if ((st = count(&s)) != AIR_OK)
			break;
		fa_match m;
		if (!match(&s, k, &m))
			continue;
		if ((st = rewrite(&s, &m, log)) != AIR_OK)
			break;
		/* nodes before k only lose members, so k's new index is k minus
		 * the dead ones before it; restart from there */
		int before = 0;
		for (int i = 0; i < k; i++)
			before += s.dead[i];
		pass_compact(g, s.dead);
		k -= before + 1;
		if (k < -1)
			k = -1;
		fused++;
	}
	free(s.uses);
	free(s.user);
	free(s.dead);
	if (st == AIR_OK)
		pass_logf(log, "fuse_attention: %d attention block(s) became sdpa\n", fused);
	return st;
}

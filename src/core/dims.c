/* dims.c - symbolic dims: a dim is a constant (>= 0) or an expression over
 * input symbols. Constants fold as expressions are built, identical
 * expressions are shared (so equality of ids means equality of values), and
 * a session evaluates them once per new set of input sizes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/graph.h"

static air_status new_expr(air_graph *g, ir_expr e, air_dim *out)
{
	/* share an identical expression: equal ids then mean equal values */
	for (int i = 0; i < g->n_exprs; i++) {
		ir_expr *x = &g->exprs[i];
		if (x->kind == e.kind && e.kind == IR_EXPR_BINARY && x->op == e.op && x->a == e.a && x->b == e.b) {
			*out = -(air_dim)i - 1;
			return AIR_OK;
		}
	}
	AIR_TRY(ir_grow((void **)&g->exprs, &g->cap_exprs, g->n_exprs, sizeof *g->exprs));
	g->exprs[g->n_exprs] = e;
	*out = -(air_dim)g->n_exprs - 1;
	g->n_exprs++;
	return AIR_OK;
}

air_status air_graph_symbol(air_graph *g, const char *name, air_dim *out)
{
	if (!g || !out)
		return air_error(AIR_INVALID_ARGUMENT, "air_graph_symbol: NULL argument");
	*out = 0;
	AIR_TRY(ir_grow((void **)&g->symbol_names, &g->cap_symbols, g->n_symbols, sizeof(char *)));
	char buf[32];
	if (!name) {
		snprintf(buf, sizeof buf, "s%d", g->n_symbols);
		name = buf;
	}
	char *copy = strdup(name);
	if (!copy)
		return air_error(AIR_OUT_OF_MEMORY, "air_graph_symbol: no memory");
	ir_expr e = {IR_EXPR_SYMBOL, AIR_DIM_ADD, 0, 0, g->n_symbols};
	/* symbols are never shared, so bypass new_expr's lookup */
	air_status st = ir_grow((void **)&g->exprs, &g->cap_exprs, g->n_exprs, sizeof *g->exprs);
	if (st != AIR_OK) {
		free(copy);
		return st;
	}
	g->symbol_names[g->n_symbols++] = copy;
	g->exprs[g->n_exprs] = e;
	*out = -(air_dim)g->n_exprs - 1;
	g->n_exprs++;
	return AIR_OK;
}

static int64_t floordiv(int64_t a, int64_t b)
{
	int64_t q = a / b;
	if ((a % b != 0) && ((a < 0) != (b < 0)))
		q--;
	return q;
}

static air_status overflow(int64_t a, const char *op, int64_t b)
{
	return air_error(AIR_SHAPE_MISMATCH, "dim expression %lld %s %lld overflows", (long long)a, op, (long long)b);
}

static air_status apply(air_dim_op op, int64_t a, int64_t b, int64_t *out)
{
	switch (op) {
	/* sizes come from users: an overflow is an error, not UB */
	case AIR_DIM_ADD:
		if (__builtin_add_overflow(a, b, out))
			return overflow(a, "+", b);
		break;
	case AIR_DIM_SUB:
		if (__builtin_sub_overflow(a, b, out))
			return overflow(a, "-", b);
		break;
	case AIR_DIM_MUL:
		if (__builtin_mul_overflow(a, b, out))
			return overflow(a, "*", b);
		break;
	case AIR_DIM_FLOORDIV:
		if (b == 0)
			return air_error(AIR_INVALID_ARGUMENT, "dim expression divides by zero");
		*out = floordiv(a, b);
		break;
	case AIR_DIM_CEILDIV:
		if (b == 0)
			return air_error(AIR_INVALID_ARGUMENT, "dim expression divides by zero");
		*out = -floordiv(-a, b);
		break;
	case AIR_DIM_MOD:
		if (b == 0)
			return air_error(AIR_INVALID_ARGUMENT, "dim expression takes a modulo by zero");
		*out = a - floordiv(a, b) * b;
		break;
	case AIR_DIM_MIN: *out = a < b ? a : b; break;
	case AIR_DIM_MAX: *out = a > b ? a : b; break;
	default: return air_error(AIR_INVALID_ARGUMENT, "unknown dim operation %d", (int)op);
	}
	return AIR_OK;
}

/* The constant offset of expression a, if it is e + c or e - c (a
 * constant c): *base = e, *off = +-c; else a itself and 0. */
static void split_offset(const air_graph *g, air_dim a, air_dim *base, int64_t *off)
{
	*base = a;
	*off = 0;
	if (a >= 0)
		return;
	const ir_expr *x = &g->exprs[-a - 1];
	if (x->kind == IR_EXPR_BINARY && (x->op == AIR_DIM_ADD || x->op == AIR_DIM_SUB) && x->b >= 0) {
		*base = x->a;
		*off = x->op == AIR_DIM_ADD ? x->b : -x->b;
	}
}

/* e + off for an expression e, as e + c or e - c with the constant folded
 * into any offset e already has: shape formulas chain offsets (a conv's
 * (H + 2p - k) // s + 1, then the next layer's + 2p - k), and two that
 * differ only in how they got there must come out as the same expression,
 * or the passes cannot tell that a residual has the output's shape. It
 * changes no value that evaluates: the sum's intermediate terms may go
 * negative where the folded one does not (that was an error, not a size). */
static air_status offset_expr(air_graph *g, air_dim e, int64_t off, air_dim *out)
{
	if (e >= 0) {
		int64_t v;
		if (__builtin_add_overflow(e, off, &v))
			return overflow(e, "+", off);
		if (v < 0)
			return air_error(AIR_SHAPE_MISMATCH, "dim expression is negative (%lld)", (long long)v);
		*out = v;
		return AIR_OK;
	}
	air_dim base;
	int64_t own;
	split_offset(g, e, &base, &own);
	int64_t sum;
	if (own != 0 && !__builtin_add_overflow(own, off, &sum)) {
		e = base;
		off = sum;
	}
	if (off == 0) {
		*out = e;
		return AIR_OK;
	}
	if (off == INT64_MIN)
		return air_error(AIR_SHAPE_MISMATCH, "dim expression offset overflows");
	ir_expr x = {IR_EXPR_BINARY, off > 0 ? AIR_DIM_ADD : AIR_DIM_SUB, e, off > 0 ? off : -off, -1};
	return new_expr(g, x, out);
}

static bool valid_dim(const air_graph *g, air_dim d)
{
	return d >= 0 || -(d + 1) < g->n_exprs; /* not -d - 1: d may be INT64_MIN */
}

air_status air_graph_dim_expr(air_graph *g, air_dim_op op, air_dim a, air_dim b, air_dim *out)
{
	if (!g || !out)
		return air_error(AIR_INVALID_ARGUMENT, "air_graph_dim_expr: NULL argument");
	*out = 0;
	if (!valid_dim(g, a) || !valid_dim(g, b))
		return air_error(AIR_INVALID_ARGUMENT, "air_graph_dim_expr: unknown dim");
	if ((unsigned)op > AIR_DIM_MAX)
		return air_error(AIR_INVALID_ARGUMENT, "air_graph_dim_expr: unknown operation %d", (int)op);
	if (a >= 0 && b >= 0) {
		int64_t v;
		AIR_TRY(apply(op, a, b, &v));
		if (v < 0)
			return air_error(AIR_SHAPE_MISMATCH, "dim expression is negative (%lld)", (long long)v);
		*out = v;
		return AIR_OK;
	}
	/* identities that keep expressions small */
	switch (op) {
	case AIR_DIM_ADD:
		if (a == 0) { *out = b; return AIR_OK; }
		if (b == 0) { *out = a; return AIR_OK; }
		break;
	case AIR_DIM_SUB:
		if (b == 0) { *out = a; return AIR_OK; }
		break;
	case AIR_DIM_MUL:
		if (a == 1) { *out = b; return AIR_OK; }
		if (b == 1) { *out = a; return AIR_OK; }
		if (a == 0 || b == 0) { *out = 0; return AIR_OK; }
		break;
	case AIR_DIM_FLOORDIV: case AIR_DIM_CEILDIV:
		if (b == 0)
			return air_error(AIR_INVALID_ARGUMENT, "dim expression divides by zero");
		if (b == 1) { *out = a; return AIR_OK; }
		if (a == b) { *out = 1; return AIR_OK; }
		break;
	case AIR_DIM_MOD:
		if (b == 0)
			return air_error(AIR_INVALID_ARGUMENT, "dim expression takes a modulo by zero");
		if (b == 1 || a == b) { *out = 0; return AIR_OK; }
		break;
	case AIR_DIM_MIN: case AIR_DIM_MAX:
		if (a == b) { *out = a; return AIR_OK; }
		break;
	}
	/* constant offsets fold into one (see offset_expr) */
	if (op == AIR_DIM_ADD && a >= 0)
		return offset_expr(g, b, a, out);
	if (op == AIR_DIM_ADD && b >= 0)
		return offset_expr(g, a, b, out);
	if (op == AIR_DIM_SUB && b >= 0)
		return offset_expr(g, a, -b, out);
	/* (e + c) // s is e // s + c / s when s divides c, for any integer e */
	if (op == AIR_DIM_FLOORDIV && b > 0) {
		air_dim base;
		int64_t off;
		split_offset(g, a, &base, &off);
		if (off != 0 && off % b == 0) {
			air_dim q;
			AIR_TRY(air_graph_dim_expr(g, op, base, b, &q));
			return offset_expr(g, q, off / b, out);
		}
	}
	ir_expr e = {IR_EXPR_BINARY, op, a, b, -1};
	return new_expr(g, e, out);
}

air_status ir_dim_eval(const air_graph *g, air_dim d, const int64_t *sym, int64_t *out)
{
	if (d >= 0) {
		*out = d;
		return AIR_OK;
	}
	const ir_expr *e = &g->exprs[-d - 1];
	if (e->kind == IR_EXPR_SYMBOL) {
		*out = sym[e->symbol];
		return AIR_OK;
	}
	int64_t a, b;
	AIR_TRY(ir_dim_eval(g, e->a, sym, &a));
	AIR_TRY(ir_dim_eval(g, e->b, sym, &b));
	AIR_TRY(apply(e->op, a, b, out));
	if (*out < 0)
		return air_error(AIR_SHAPE_MISMATCH, "a dim evaluates to %lld for these input sizes", (long long)*out);
	return AIR_OK;
}

bool ir_dim_equal(const air_graph *g, air_dim a, air_dim b)
{
	return a == b;
}

static void dim_string(const air_graph *g, air_dim d, char *buf, size_t size, int paren)
{
	if (size == 0)
		return;
	if (d >= 0) {
		snprintf(buf, size, "%lld", (long long)d);
		return;
	}
	const ir_expr *e = &g->exprs[-d - 1];
	if (e->kind == IR_EXPR_SYMBOL) {
		snprintf(buf, size, "%s", g->symbol_names[e->symbol]);
		return;
	}
	static const char *ops[] = {"+", "-", "*", "//", "ceildiv", "%", "min", "max"};
	char a[128], b[128];
	dim_string(g, e->a, a, sizeof a, 1);
	dim_string(g, e->b, b, sizeof b, 1);
	if (e->op == AIR_DIM_MIN || e->op == AIR_DIM_MAX || e->op == AIR_DIM_CEILDIV)
		snprintf(buf, size, "%s(%s, %s)", ops[e->op], a, b);
	else
		snprintf(buf, size, paren ? "(%s%s%s)" : "%s%s%s", a, ops[e->op], b);
}

air_status air_graph_dim_string(const air_graph *g, air_dim d, char *buf, size_t size)
{
	if (!g || !buf || size == 0)
		return air_error(AIR_INVALID_ARGUMENT, "air_graph_dim_string: bad argument");
	if (!valid_dim(g, d)) {
		buf[0] = '\0';
		return air_error(AIR_INVALID_ARGUMENT, "air_graph_dim_string: unknown dim");
	}
	dim_string(g, d, buf, size, 0);
	return AIR_OK;
}

air_status ir_value_numel(air_graph *g, const ir_value *v, air_dim *out)
{
	air_dim n = 1;
	for (int i = 0; i < v->rank; i++)
		AIR_TRY(air_graph_dim_expr(g, AIR_DIM_MUL, n, v->dims[i], &n));
	*out = n;
	return AIR_OK;
}

void ir_value_string(const air_graph *g, air_value v, char *buf, size_t size)
{
	const ir_value *x = &g->values[v];
	size_t len = (size_t)snprintf(buf, size, "%s[", air_dtype_name(x->dtype));
	for (int i = 0; i < x->rank && len < size; i++) {
		char d[128];
		dim_string(g, x->dims[i], d, sizeof d, 0);
		len += (size_t)snprintf(buf + len, size - len, "%s%s", i ? ", " : "", d);
	}
	if (len < size)
		snprintf(buf + len, size - len, "]");
}

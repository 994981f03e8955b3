/* table.c - the op table built from optable.h, lookup by name, and the
 * helpers shared by shape-inference functions. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "ops/op.h"

#define OP(name) extern const op_def op_def_##name;
#include "ops/optable.h"
#undef OP

static const op_def *const table[OP_COUNT] = {
#define OP(name) &op_def_##name,
#include "ops/optable.h"
#undef OP
};

const op_def *op_get(int op)
{
	return (op >= 0 && op < OP_COUNT) ? table[op] : NULL;
}

int op_find(const char *name)
{
	for (int i = 0; i < OP_COUNT; i++)
		if (strcmp(table[i]->name, name) == 0)
			return i;
	return -1;
}

int air_op_count(void)
{
	return OP_COUNT;
}

const char *air_op_name(int op)
{
	return (op >= 0 && op < OP_COUNT) ? table[op]->name : NULL;
}

air_status op_fail(op_infer_ctx *c, air_status st, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return air_error(st, "%s: %s", op_get(c->node->op)->name, msg);
}

air_status op_broadcast(op_infer_ctx *c, const ir_value *a, const ir_value *b, int *rank, air_dim *dims)
{
	int r = a->rank > b->rank ? a->rank : b->rank;
	for (int i = 0; i < r; i++) {
		int ia = i - (r - a->rank), ib = i - (r - b->rank);
		air_dim da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
		if (da == db || db == 1)
			dims[i] = da;
		else if (da == 1)
			dims[i] = db;
		else if (da >= 0 && db >= 0)
			return op_fail(c, AIR_SHAPE_MISMATCH, "cannot broadcast size %lld against %lld at dim %d",
				       (long long)da, (long long)db, i);
		else
			/* symbolic and different: sizes must agree at run time (or
			 * one be 1); the kernel checks with concrete sizes */
			AIR_TRY(air_graph_dim_expr(c->g, AIR_DIM_MAX, da, db, &dims[i]));
	}
	*rank = r;
	return AIR_OK;
}

air_status op_lowp_weight(op_infer_ctx *c, bool *lowp)
{
	const ir_value *x = c->in[0], *w = c->in[1];
	*lowp = x->dtype == AIR_F32 && (w->dtype == AIR_BF16 || w->dtype == AIR_F16);
	if (!*lowp)
		return AIR_OK;
	for (int i = 2; i < c->n_in; i++)
		if (c->in[i]->dtype != AIR_F32)
			return op_fail(c, AIR_DTYPE_MISMATCH, "with a %s weight, input %d must be f32, not %s",
				       air_dtype_name(w->dtype), i, air_dtype_name(c->in[i]->dtype));
	return AIR_OK;
}

air_status op_same_dtype(op_infer_ctx *c, int first, int last)
{
	for (int i = first + 1; i <= last && i < c->n_in; i++)
		if (c->in[i]->dtype != c->in[first]->dtype)
			return op_fail(c, AIR_DTYPE_MISMATCH, "input %d is %s but input %d is %s", i,
				       air_dtype_name(c->in[i]->dtype), first, air_dtype_name(c->in[first]->dtype));
	return AIR_OK;
}

air_status op_axis(op_infer_ctx *c, int64_t axis, int rank, int *out)
{
	int64_t a = axis < 0 ? axis + rank : axis;
	if (a < 0 || a >= (rank ? rank : 1))
		return op_fail(c, AIR_INVALID_ARGUMENT, "axis %lld is out of range for rank %d", (long long)axis,
			       rank);
	*out = (int)a;
	return AIR_OK;
}

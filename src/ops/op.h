/* op.h - the op table's entry: attribute schema, shape inference, flags,
 * and the reference kernel that is the oracle for every fast kernel.
 * Adding an op: an entry in ops/optable.h, its op_def in its family file,
 * its reference kernel in its family's folder (kernels/<family>/<name>_ref.c),
 * tests, and one line in the Python lowering table. */
#ifndef AIR_OPS_OP_H
#define AIR_OPS_OP_H

#include "core/graph.h"
#include "kernels/common/kernel.h"

typedef enum op_attr_type {
	OPA_INT,   /* int64 */
	OPA_FLOAT, /* double */
	OPA_INTS,  /* list of int64 */
	OPA_DIM,   /* one air_dim (may be symbolic) */
	OPA_DIMS,  /* list of air_dims */
} op_attr_type;

typedef struct op_attr_spec {
	const char *name;
	op_attr_type type;
	bool required;
	int64_t def_i;  /* default for INT/DIM */
	double def_f;   /* default for FLOAT */
} op_attr_spec;

enum { OP_MAX_OUT = 4, OP_MAX_IN = 64 };

/* Shape inference: reads the node's inputs and attributes, fills out[] with
 * dtype, rank and dims. It may create dim expressions in g. */
typedef struct op_infer_ctx {
	air_graph *g;
	const ir_node *node;
	const ir_value *in[OP_MAX_IN];
	int n_in;
	ir_value out[OP_MAX_OUT];
	int n_out;
} op_infer_ctx;

typedef air_status (*op_infer_fn)(op_infer_ctx *ctx);

enum op_flags {
	OPF_ELEMENTWISE = 1u << 0, /* out[i] depends on in[...][i] only (after broadcast) */
	OPF_ALIAS = 1u << 1,       /* out 0 is in 0's memory reinterpreted (no kernel runs) */
	OPF_VARIADIC = 1u << 2,    /* max_in is a bound, any count in [min_in, max_in] */
	OPF_VARIADIC_OUT = 1u << 3, /* n_out is a bound, any count in [1, n_out] (fused_dag) */
};

typedef struct op_def {
	const char *name;
	int min_in, max_in;
	int n_out;
	const op_attr_spec *attrs;
	int n_attrs;
	op_infer_fn infer;
	k_kernel ref; /* the reference kernel */
	unsigned flags;
} op_def;

/* The op ids, in table order. */
typedef enum op_id {
#define OP(name) OP_##name,
#include "ops/optable.h"
#undef OP
	OP_COUNT
} op_id;

const op_def *op_get(int op);
int op_find(const char *name); /* -1 if unknown */

/* Helpers for infer functions. */
air_status op_broadcast(op_infer_ctx *c, const ir_value *a, const ir_value *b, int *rank, air_dim *dims);
air_status op_same_dtype(op_infer_ctx *c, int first, int last);
/* A product (linear, conv2d) whose input 1 is a 16-bit float weight read as
 * it is: x (input 0) f32 and every input after the weight f32. *lowp: the
 * weight is 16-bit (then checked); else nothing is checked. */
air_status op_lowp_weight(op_infer_ctx *c, bool *lowp);
air_status op_fail(op_infer_ctx *c, air_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* attribute i of the node */
static inline const ir_attr *op_attr(const op_infer_ctx *c, int i)
{
	return &c->node->attrs[i];
}
/* Normalizes a possibly negative axis against rank; fails if out of range. */
air_status op_axis(op_infer_ctx *c, int64_t axis, int rank, int *out);

#endif

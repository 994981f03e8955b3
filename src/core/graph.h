/* graph.h - the IR: values (tensors with dtype and possibly symbolic dims),
 * nodes (an op, its inputs, outputs and attributes), constants, and the
 * table of symbolic dim expressions. Internal to libair. */
#ifndef AIR_CORE_GRAPH_H
#define AIR_CORE_GRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "air/air.h"

/* IR_DEAD: a value a pass made unreachable (its node was fused away); it
 * keeps its id so other ids stay stable, and nothing refers to it. */
typedef enum ir_value_kind { IR_INPUT, IR_CONSTANT, IR_NODE_OUTPUT, IR_DEAD } ir_value_kind;

typedef struct ir_value {
	air_dtype dtype;
	int rank;
	air_dim dims[AIR_MAX_RANK];
	ir_value_kind kind;
	int32_t index; /* input number, constant number, or producing node */
} ir_value;

/* An attribute value as stored on a node, in the op's schema order. */
typedef struct ir_attr {
	bool set;
	int64_t i;
	double f;
	int64_t *ints; /* owned; for DIM/DIMS schema types, air_dims */
	int n;
} ir_attr;

#define IR_MAX_ATTRS 12

/* Most elements a value with constant dims may have (times 8 bytes, still
 * far from overflowing a size_t). */
#define AIR_IR_MAX_NUMEL ((int64_t)1 << 56)

typedef struct ir_node {
	int op;
	int n_in, n_out;
	air_value *in;  /* owned */
	air_value *out; /* owned */
	ir_attr attrs[IR_MAX_ATTRS];
} ir_node;

typedef struct ir_constant {
	air_value value;
	const void *data; /* borrowed, or == owned */
	void *owned;
	size_t nbytes;
	/* the model let the bytes go after every reader's kernel packed them
	 * (data is NULL; nbytes still says how big the constant was) */
	bool released;
	/* Set by fold_batchnorm on a weight it scaled, row by row, from a
	 * borrowed f32 constant: W'[o] = row_base[o] * row_scale[o], in double,
	 * rounded once. A kernel that re-packs its weight on every call can read
	 * these instead, so the model need not hold W' or a packed copy. */
	const float *row_base; /* caller memory; NULL: none */
	double *row_scale;     /* owned, dims[0] of them */
} ir_constant;

/* A symbolic dim expression: leaf symbols and binary operations. A dim d < 0
 * refers to exprs[-d - 1]. */
typedef enum ir_expr_kind { IR_EXPR_SYMBOL, IR_EXPR_BINARY } ir_expr_kind;

typedef struct ir_expr {
	ir_expr_kind kind;
	air_dim_op op; /* for BINARY */
	air_dim a, b;  /* for BINARY */
	int symbol;    /* for SYMBOL */
} ir_expr;

struct air_graph {
	ir_value *values;
	int n_values, cap_values;
	ir_node *nodes;
	int n_nodes, cap_nodes;
	ir_constant *consts;
	int n_consts, cap_consts;
	air_value *inputs;
	char **input_names;
	int n_inputs, cap_inputs;
	air_value *outputs;
	int n_outputs;
	ir_expr *exprs;
	int n_exprs, cap_exprs;
	char **symbol_names;
	int n_symbols, cap_symbols;
};

/* Grows *array (of elem bytes) so that index n fits; doubling. */
/* Frees what a node owns (its inputs, outputs and attribute lists). */
void ir_free_node(ir_node *n);
air_status ir_grow(void **array, int *cap, int n, size_t elem);

/* Appends a value; returns its id in *out. */
air_status ir_add_value(air_graph *g, air_dtype dtype, int rank, const air_dim *dims, ir_value_kind kind,
			int32_t index, air_value *out);

/* For passes: a constant whose data (malloc'ed, nbytes matching dtype and
 * dims) the graph takes over; freed with the graph even on failure. */
air_status ir_add_owned_constant(air_graph *g, air_dtype dtype, int rank, const int64_t *dims, void *data,
				 air_value *out);

/* For passes: the data of a constant value, or NULL if v is not one. */
const void *ir_constant_data(const air_graph *g, air_value v);

/* For passes: every use of old (node inputs and graph outputs) becomes new.
 * Both must have the same dtype and shape; the caller checks. */
void ir_replace_uses(air_graph *g, air_value old_value, air_value new_value);

/* For passes: how many node inputs and graph outputs refer to each value
 * (uses[v], n_values entries, caller frees). NULL when out of memory. */
int *ir_count_uses(const air_graph *g);

/* Deep copy of a graph (constants stay borrowed where they were). */
air_status ir_graph_clone(const air_graph *src, air_graph **out);

/* Is dim a constant (>= 0)? */
static inline bool ir_dim_is_const(air_dim d)
{
	return d >= 0;
}

/* Evaluates dim given symbol values (sym[i] for symbol i); fails on an
 * operation that has no value (division by zero, negative result). */
air_status ir_dim_eval(const air_graph *g, air_dim d, const int64_t *sym, int64_t *out);

/* Number of elements of a value as a dim (symbolic if any dim is). */
air_status ir_value_numel(air_graph *g, const ir_value *v, air_dim *out);

/* Are two dims provably equal (same constant, or same expression id)? */
bool ir_dim_equal(const air_graph *g, air_dim a, air_dim b);

/* Formats a value's type as "f32[1, s0, 768]" into buf. */
void ir_value_string(const air_graph *g, air_value v, char *buf, size_t size);

#endif

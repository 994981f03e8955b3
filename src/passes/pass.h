/* pass.h - graph -> graph passes. Each pass rewrites the model's own graph
 * in place, leaves it valid (verified after every pass in debug builds), and
 * says in the log what it changed; the log goes into the compile report. */
#ifndef AIR_PASSES_PASS_H
#define AIR_PASSES_PASS_H

#include <stdbool.h>
#include <stddef.h>

#include "core/graph.h"

/* When one pass ran (CLOCK_MONOTONIC ns): the compile phases of a model. */
enum { PASS_MAX_TIMES = 32 };
typedef struct pass_time {
	const char *name;
	uint64_t start_ns, dur_ns;
} pass_time;

typedef struct pass_log {
	char *buf;
	size_t len, cap;
	int oom;
	pass_time times[PASS_MAX_TIMES];
	int n_times;
} pass_log;

void pass_logf(pass_log *log, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* What a pass may consult: the compile options that concern passes. */
typedef struct pass_options {
	uint32_t flags;           /* AIR_COMPILE_* */
	uint32_t disabled_passes; /* AIR_PASS_* */
	int fusion_threshold;     /* largest fused group; 0: no limit */
} pass_options;

typedef air_status (*pass_fn)(air_graph *g, const pass_options *po, pass_log *log);

/* Runs every pass of the pipeline (passes/pipeline.c) that is switched on,
 * verifying the graph after each. */
air_status pass_run_pipeline(air_graph *g, const pass_options *po, pass_log *log);

/* Fuses chains of f32 elementwise ops (unary, or with a scalar constant)
 * into fused_elementwise nodes of at most max_group ops (0: no limit).
 * Requires: node order is an execution order. */
air_status pass_fuse_elementwise(air_graph *g, int max_group, pass_log *log);
/* The fused tile program's opcode (KF_*) for a unary op, -1 if none. */
int pass_fused_unary_opcode(int op);
/* The tensor-scalar opcode (KF_*_S) of a binary op whose scalar operand is
 * the first (scalar_first) or the second, -1 if none. */
int pass_fused_scalar_opcode(int op, bool scalar_first);

/* Fuses groups of f32 elementwise ops over one shape with several tensor
 * inputs, shared intermediates and several results into fused_dag nodes
 * (passes/fuse_dag.c); run after pass_fuse_elementwise, as part of it. */
air_status pass_fuse_dag(air_graph *g, int max_group, pass_log *log);

/* Is v an f32 constant with every dim 1 (a scalar)? Its value in *out. */
bool pass_f32_scalar(const air_graph *g, air_value v, float *out);

/* Removes nodes marked dead and renumbers producers. */
void pass_compact(air_graph *g, const char *dead_nodes);

/* Index of op's attribute called name in its schema, or -1. */
int pass_attr_index(int op, const char *name);

/* Turns node n into op with every attribute at its schema default (the
 * caller sets inputs and the attributes it means). */
void pass_set_op(ir_node *n, int op);

/* A pattern of single-use f32 nodes matched from its last node back
 * (fuse_activation, fuse_rms_norm, fuse_rope): the nodes it has taken, to
 * kill when the whole pattern matches. A matcher that tries one way and
 * then another sets n_members back to what it was before the first. */
enum { PASS_PATTERN_MAX = 8 };
typedef struct pass_pattern {
	air_graph *g;
	int *uses;  /* ir_count_uses(g) */
	char *dead; /* per node */
	int members[PASS_PATTERN_MAX];
	int n_members;
} pass_pattern;

air_status pass_pattern_init(pass_pattern *p, air_graph *g, const char *pass);
void pass_pattern_free(pass_pattern *p);
/* The node producing v if it is op, f32, live, and v is its only use and
 * an output of nothing else (the node joins the pattern); else NULL. */
ir_node *pass_pattern_take(pass_pattern *p, air_value v, int op);
/* Marks the pattern's nodes dead and their outputs IR_DEAD (the caller
 * then rewrites the last node; pass_compact removes the dead ones). */
void pass_pattern_kill(pass_pattern *p);

#endif

/* simplify_internal.h - what the files of the simplify pass share: the
 * pass's state, the kinds of rewrite it counts, the bookkeeping that keeps
 * use counts right while rewriting (simplify_util.c) and the rules that the
 * driver (simplify.c) runs. */
#ifndef AIR_PASSES_SIMPLIFY_INTERNAL_H
#define AIR_PASSES_SIMPLIFY_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "core/graph.h"
#include "passes/pass.h"

/* What the pass counts and reports; simplify.c's RW_NAME names each, in
 * this order. */
typedef enum rewrite {
	RW_ADDMM_LINEAR,
	RW_MM_LINEAR,
	RW_MM_TRANS_A,
	RW_LINEAR_RANK,
	RW_RESHAPE_RESHAPE,
	RW_PERMUTE_PERMUTE,
	RW_SINK_RESHAPE,
	RW_NOOP_RESHAPE,
	RW_NOOP_PERMUTE,
	RW_NOOP_EXPAND,
	RW_NOOP_SLICE,
	RW_NOOP_COPY,
	RW_NOOP_CAST,
	RW_NOOP_ARITH,
	RW_CSE,
	RW_FOLD,
	RW_FOLD_SKIPPED,
	RW_FOLD_FAILED,
	RW_DEAD,
	RW_COUNT
} rewrite;

typedef struct simp {
	air_graph *g;
	pass_log *log;
	int *uses;  /* per value; grown as constants are added */
	int n_uses; /* entries of uses */
	char *dead; /* per node of the current round */
	int count[RW_COUNT];
	size_t folded_bytes;
	bool changed;
} simp;

/* ---- bookkeeping (simplify_util.c) ------------------------------------- */

/* Makes room in s->uses for constants added to the graph since. */
air_status simp_grow_uses(simp *s);
/* Node k's output old is equal to new: every use moves, node k dies. */
void simp_replace_output(simp *s, int k, air_value old_value, air_value new_value, rewrite why);
void simp_set_input(simp *s, ir_node *n, int i, air_value v);
/* The live node producing v, or NULL. */
ir_node *simp_producer(simp *s, air_value v);

/* ---- the rules, in the order round_once runs them ---------------------- */

/* 1. GEMM operands (simplify_rules.c) */
void simp_rule_gemm(simp *s, int k);
air_status simp_rule_linear_rank(simp *s, int k);
/* 2. compositions (simplify_rules.c) */
void simp_rule_sink_reshape(simp *s, int k);
void simp_rule_compose(simp *s, int k);
/* 3. no-ops (simplify_rules.c) */
void simp_rule_noop(simp *s, int k);
/* 4. repeats (simplify_repeats.c) */
air_status simp_rule_repeats(simp *s);
/* 5. constant folding (simplify_fold.c) */
air_status simp_rule_fold(simp *s, int k);

#endif

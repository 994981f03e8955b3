/* model.h - a compiled model (immutable, shareable) and its steps. */
#ifndef AIR_RUNTIME_MODEL_H
#define AIR_RUNTIME_MODEL_H

#include <stdbool.h>

#include "core/graph.h"
#include "kernels/common/kernel.h"
#include "plan/arena.h"
#include "platform/pool.h"

/* A step of the model: its node and kernel (plan/arena.h). */
typedef mp_step rt_step;

struct air_model {
	air_graph *g;   /* the model's own graph, after passes */
	rt_step *steps;
	int n_steps;
	rt_pool *pool;  /* the default pool (not owned) or own_pool */
	rt_pool *own_pool;
	uint32_t flags;
	int32_t *root;      /* per value: the value whose memory it uses */
	bool *is_output;    /* per value: in a caller's output buffer (some graph
			     * output is exactly it, or out_root names it) */
	/* per graph output: the value computed straight into that output's
	 * buffer because the output is an alias (reshape) of it, or -1 */
	int32_t *out_root;
	char *report;
	char *pass_log; /* what the passes changed */
	air_graph *before; /* the graph before the passes, without constant data */
	bool mem_static;   /* every size is a constant: mem is the plan */
	air_memory_info mem; /* the plan at compile time (weights always) */
	/* the first session's plan when sizes are symbolic: written once by
	 * whichever session gets the state from 0 to 1, readable at 2 */
	_Atomic int run_mem_state;
	air_memory_info run_mem;
	char *autotune_cache;     /* AIR_COMPILE_AUTOTUNE's file, or NULL */
	struct rt_tune_result *tune; /* per step, with AIR_COMPILE_AUTOTUNE; else NULL */
	air_file *file; /* the .air file it was loaded from (its weights used in
			 * place, names, metadata; one reference), or NULL */
};

/* What the autotuner did for one step (autotune.c). */
enum { RT_TUNE_MAX = 16 };
typedef struct rt_tune_result {
	bool tuned;      /* chosen by timing or from the cache (else: the default rule) */
	bool from_cache;
	int n;           /* candidates */
	int chosen;      /* index among them; 0 is the default rule's choice */
	const char *names[RT_TUNE_MAX];
	uint64_t ns[RT_TUNE_MAX]; /* median run time; UINT64_MAX: failed; 0: not timed */
	uint64_t tuning_ns;       /* spent timing this step */
} rt_tune_result;

/* Chooses among cand[0..ncand) (cand[0]: the default rule's choice) for step s by timing
 * them on call (compile-time call: constants bound, sizes known), or from the cache. */
air_status rt_autotune_step(air_model *m, int s, k_call *call, const k_kernel *const *cand, int ncand,
			    rt_tune_result *res);

/* The part of m the memory plan reads. */
static inline mp_program rt_program(const air_model *m)
{
	return (mp_program){m->g, m->steps, m->n_steps, m->root, m->is_output};
}

/* Keeps a copy of m->g without constant data as m->before (dot.c). */
air_status rt_keep_graph_before(air_model *m);

/* The memory plan of m when every size is a constant (session.c);
 * inplace (n_steps entries, or NULL) gets each step's in-place input or -1. */
air_status rt_static_memory(const air_model *m, air_memory_info *info, int *inplace);

/* What a fused node does ("linear epilogue: + bias -> gelu") into buf;
 * 0 if n is no fusion (report.c). */
int rt_fused_text(const ir_node *n, char *buf, size_t size);

/* Weight and borrowed bytes of m (report.c). */
void rt_weight_bytes(const air_model *m, size_t *weights, size_t *borrowed);

/* Builds the model's report text. */
air_status rt_model_report(air_model *m);

#endif

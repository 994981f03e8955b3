/* model.h - a compiled model (immutable, shareable) and its steps. */
#ifndef AIR_RUNTIME_MODEL_H
#define AIR_RUNTIME_MODEL_H

#include <stdbool.h>

#include "core/graph.h"
#include "kernels/kernel.h"
#include "runtime/pool.h"

typedef struct rt_step {
	int node;               /* index in the model's graph */
	const k_kernel *kernel;
	void *prepared;         /* kernel->prepare's result, released with the model */
	bool alias;             /* output 0 takes input 0's memory; nothing runs */
} rt_step;

struct air_model {
	air_graph *g;   /* the model's own graph, after passes */
	rt_step *steps;
	int n_steps;
	rt_pool *pool;  /* the default pool (not owned) or own_pool */
	rt_pool *own_pool;
	uint32_t flags;
	int32_t *root;      /* per value: the value whose memory it uses */
	bool *is_output;    /* per value: some graph output is exactly it */
	char *report;
	char *pass_log; /* what the passes changed */
};

/* Builds the model's report text. */
air_status rt_model_report(air_model *m);

#endif

/* pass.h - graph -> graph passes. Each pass rewrites the model's own graph
 * in place, leaves it valid (verified after every pass in debug builds), and
 * says in the log what it changed; the log goes into the compile report. */
#ifndef AIR_PASSES_PASS_H
#define AIR_PASSES_PASS_H

#include <stddef.h>

#include "core/graph.h"

typedef struct pass_log {
	char *buf;
	size_t len, cap;
	int oom;
} pass_log;

void pass_logf(pass_log *log, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Fuses chains of f32 elementwise ops (unary, or with a scalar constant)
 * into fused_elementwise nodes of at most max_group ops (0: no limit).
 * Requires: node order is an execution order. */
air_status pass_fuse_elementwise(air_graph *g, int max_group, pass_log *log);

/* Removes nodes marked dead and renumbers producers. */
void pass_compact(air_graph *g, const char *dead_nodes);

#endif

/* arena.h - a model's memory plan for concrete value sizes: which values
 * get arena buffers, their lifetimes over the step order, which steps write
 * their output into a dead input's buffer (in place), and the offsets. Used
 * by sessions (each time input sizes change) and by the compile report
 * (once, when every size is a constant). */
#ifndef AIR_PLAN_ARENA_H
#define AIR_PLAN_ARENA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/graph.h"
#include "kernels/common/kernel.h"

/* One step of a compiled program: a node and the kernel chosen for it. */
typedef struct mp_step {
	int node;               /* index in the program's graph */
	const k_kernel *kernel;
	void *prepared;         /* kernel->prepare's result, released with the program */
	bool alias;             /* output 0 takes input 0's memory; nothing runs */
} mp_step;

/* What the plan reads of a compiled program (the runtime's air_model holds
 * these): its graph, steps in order, and per value the value whose memory it
 * uses (root) and whether it lives in a caller's output buffer. */
typedef struct mp_program {
	const air_graph *g;
	const mp_step *steps;
	int n_steps;
	const int32_t *root;
	const bool *is_output;
} mp_program;

typedef struct mp_arena {
	int64_t *offset;       /* in, n_values entries: out, arena offset per value, or -1 */
	int *inplace;          /* in, n_steps entries: out, the input of step k whose buffer
				* its output 0 takes over, or -1 */
	size_t bytes;          /* planned peak: the arena without workspace */
	size_t no_reuse_bytes; /* sum of every activation buffer, each aligned */
	int n_buffers;         /* activation values (node outputs with their own memory) */
	int n_inplace;         /* steps that run in place */
} mp_arena;

/* Plans the arena of program p for value sizes value_bytes[v] (bytes of every value
 * for the current shapes). reuse false (AIR_COMPILE_NO_MEMORY_REUSE): every
 * activation gets its own range and nothing runs in place. */
air_status mp_plan_program(const mp_program *p, const size_t *value_bytes, bool reuse, mp_arena *out);

/* May step k's output 0 share memory with its input i, as far as its op and
 * kernel go (the kernel reads each element of input i before it writes that
 * element of the output, and never again after)? Sizes, dtypes and
 * lifetimes are mp_plan_model's to check. */
bool mp_inplace_allowed(const mp_program *p, int k, int i);

#endif

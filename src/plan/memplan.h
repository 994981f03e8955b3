/* memplan.h - the static memory plan: buffers with a size and a lifetime
 * [first, last] in step numbers get offsets in one arena so that buffers
 * alive at the same time never overlap. Largest first, then best fit: the
 * smallest gap between buffers alive at the same time that holds it, else
 * the top (as XNNPACK's planner, which takes the first gap); with reuse off
 * every buffer gets its own range. Which values are buffers, their
 * lifetimes, and in-place reuse are decided in plan/arena.c. */
#ifndef AIR_PLAN_MEMPLAN_H
#define AIR_PLAN_MEMPLAN_H

#include <stdbool.h>
#include <stddef.h>

#include "air/air.h"

typedef struct mp_buffer {
	size_t size;   /* bytes; 0 takes no space */
	int first;     /* step that writes it */
	int last;      /* last step that reads it (>= first) */
	size_t offset; /* out: offset in the arena, a multiple of MP_ALIGN */
} mp_buffer;

enum { MP_ALIGN = 64 };

/* Assigns offsets; *total gets the arena size. reuse false: no sharing. */
air_status mp_plan(mp_buffer *buffers, int n, bool reuse, size_t *total);

/* size rounded up to MP_ALIGN */
static inline size_t mp_align(size_t size)
{
	return (size + MP_ALIGN - 1) / MP_ALIGN * MP_ALIGN;
}

#endif

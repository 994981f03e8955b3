/* memplan.c - interval packing for the session arena: largest first, best
 * fit among the gaps left by buffers alive at the same time. */
#include "plan/memplan.h"

#include <stdlib.h>

#include "core/error.h"

typedef struct span {
	size_t start, end;
} span;

static int by_start(const void *a, const void *b)
{
	const span *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
}

/* largest first; among equal sizes, earlier first, then by index, so that
 * the order (and the plan) never depends on the sort's stability */
typedef struct order {
	size_t size;
	int first, index;
} order;

static int largest_first(const void *a, const void *b)
{
	const order *x = a, *y = b;
	if (x->size != y->size)
		return x->size > y->size ? -1 : 1;
	if (x->first != y->first)
		return x->first < y->first ? -1 : 1;
	return (x->index > y->index) - (x->index < y->index);
}

air_status mp_plan(mp_buffer *bs, int n, bool reuse, size_t *total)
{
	*total = 0;
	if (n == 0)
		return AIR_OK;
	if (!reuse) {
		size_t off = 0;
		for (int i = 0; i < n; i++) {
			bs[i].offset = off;
			off += mp_align(bs[i].size);
		}
		*total = off;
		return AIR_OK;
	}
	order *idx = malloc(sizeof *idx * (size_t)n);
	int *placed = malloc(sizeof *placed * (size_t)n);
	span *live = malloc(sizeof *live * (size_t)n);
	if (!idx || !placed || !live) {
		free(idx);
		free(placed);
		free(live);
		return air_error(AIR_OUT_OF_MEMORY, "memory plan: no memory");
	}
	for (int i = 0; i < n; i++)
		idx[i] = (order){bs[i].size, bs[i].first, i};
	qsort(idx, (size_t)n, sizeof *idx, largest_first);
	int n_placed = 0;
	size_t top = 0;
	for (int k = 0; k < n; k++) {
		mp_buffer *b = &bs[idx[k].index];
		size_t size = mp_align(b->size);
		/* the ranges of placed buffers alive at the same time, by offset */
		int n_live = 0;
		for (int j = 0; j < n_placed; j++) {
			const mp_buffer *o = &bs[placed[j]];
			if (o->size == 0 || o->last < b->first || o->first > b->last)
				continue;
			live[n_live].start = o->offset;
			live[n_live].end = o->offset + mp_align(o->size);
			n_live++;
		}
		qsort(live, (size_t)n_live, sizeof *live, by_start);
		/* walk the gaps between them; keep the smallest that fits */
		size_t cursor = 0, best = (size_t)-1, best_gap = (size_t)-1;
		for (int j = 0; j < n_live; j++) {
			if (live[j].start > cursor) {
				size_t gap = live[j].start - cursor;
				if (gap >= size && gap < best_gap) {
					best = cursor;
					best_gap = gap;
				}
			}
			if (live[j].end > cursor)
				cursor = live[j].end;
		}
		if (best == (size_t)-1)
			best = cursor; /* on top of everything alive then */
		b->offset = best;
		placed[n_placed++] = idx[k].index;
		if (best + size > top)
			top = best + size;
	}
	free(idx);
	free(placed);
	free(live);
	*total = top;
	return AIR_OK;
}

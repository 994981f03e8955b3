/* memplan.c - greedy interval packing for the session arena. */
#include "plan/memplan.h"

#include <stdlib.h>

#include "core/error.h"

static size_t align_up(size_t n)
{
	return (n + MP_ALIGN - 1) / MP_ALIGN * MP_ALIGN;
}

static int by_size_desc(const void *a, const void *b, void *ctx)
{
	const mp_buffer *bs = ctx;
	const mp_buffer *x = &bs[*(const int *)a], *y = &bs[*(const int *)b];
	if (x->size != y->size)
		return x->size < y->size ? 1 : -1;
	return x->first - y->first;
}

/* qsort_r is not portable C; a small insertion sort over indices is enough
 * for graphs of a few thousand values and keeps the order stable. */
static void sort_indices(int *idx, int n, const mp_buffer *bs)
{
	for (int i = 1; i < n; i++) {
		int v = idx[i], j = i - 1;
		while (j >= 0 && by_size_desc(&idx[j], &v, (void *)bs) > 0) {
			idx[j + 1] = idx[j];
			j--;
		}
		idx[j + 1] = v;
	}
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
			off += align_up(bs[i].size);
		}
		*total = off;
		return AIR_OK;
	}
	int *idx = malloc(sizeof *idx * (size_t)n);
	int *placed = malloc(sizeof *placed * (size_t)n);
	if (!idx || !placed) {
		free(idx);
		free(placed);
		return air_error(AIR_OUT_OF_MEMORY, "memory plan: no memory");
	}
	for (int i = 0; i < n; i++)
		idx[i] = i;
	sort_indices(idx, n, bs);
	int n_placed = 0;
	size_t top = 0;
	for (int k = 0; k < n; k++) {
		mp_buffer *b = &bs[idx[k]];
		size_t size = align_up(b->size);
		/* candidates: 0 and the end of every placed buffer alive at the
		 * same time; take the lowest that overlaps none of them */
		size_t best = (size_t)-1;
		for (int c = -1; c < n_placed; c++) {
			size_t cand = 0;
			if (c >= 0) {
				const mp_buffer *o = &bs[placed[c]];
				if (o->last < b->first || o->first > b->last)
					continue;
				cand = o->offset + align_up(o->size);
			}
			if (cand >= best)
				continue;
			int fits = 1;
			for (int j = 0; j < n_placed && fits; j++) {
				const mp_buffer *o = &bs[placed[j]];
				if (o->last < b->first || o->first > b->last)
					continue;
				size_t os = o->offset, oe = o->offset + align_up(o->size);
				if (cand < oe && os < cand + size)
					fits = 0;
			}
			if (fits)
				best = cand;
		}
		b->offset = best;
		placed[n_placed++] = idx[k];
		if (best + size > top)
			top = best + size;
	}
	free(idx);
	free(placed);
	*total = top;
	return AIR_OK;
}

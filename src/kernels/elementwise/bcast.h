/* bcast.h - iterating up to three broadcast inputs against an output:
 * dims are coalesced so that the inner loop runs over one contiguous (or
 * constant, stride 0) run per input, and rows are split across threads. */
#ifndef AIR_KERNELS_ELEMENTWISE_BCAST_H
#define AIR_KERNELS_ELEMENTWISE_BCAST_H

#include <stdbool.h>

#include "kernels/common/kernel.h"

typedef struct kb_plan {
	int rank;                        /* after coalescing, >= 1 */
	int64_t dims[AIR_MAX_RANK];
	int64_t strides[3][AIR_MAX_RANK]; /* element strides per input, 0 where broadcast */
	int n_in;
	int64_t inner;  /* dims[rank-1] */
	int64_t rows;   /* product of the other dims */
} kb_plan;

/* Plans out = f(in[0..n_in)). Fails if an input does not broadcast to out. */
air_status kb_make(kb_plan *p, const k_tensor *out, const k_tensor *const *in, int n_in);

/* Element offsets of row r (the first element of the inner run) per input. */
static inline void kb_row(const kb_plan *p, int64_t r, int64_t *off)
{
	for (int k = 0; k < p->n_in; k++)
		off[k] = 0;
	for (int d = p->rank - 2; d >= 0; d--) {
		int64_t i = r % p->dims[d];
		r /= p->dims[d];
		for (int k = 0; k < p->n_in; k++)
			off[k] += i * p->strides[k][d];
	}
}

/* Rows per task so that each task has about K_GRAIN elements. */
static inline int64_t kb_rows_per_task(const kb_plan *p)
{
	int64_t r = K_GRAIN / (p->inner ? p->inner : 1);
	return r < 1 ? 1 : r;
}

#endif

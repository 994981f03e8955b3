/* bcast.c - building a broadcast plan (see bcast.h). */
#include "kernels/elementwise/bcast.h"

#include "core/error.h"

air_status kb_make(kb_plan *p, const k_tensor *out, const k_tensor *const *in, int n_in)
{
	int r = out->rank;
	int64_t dims[AIR_MAX_RANK + 1], st[3][AIR_MAX_RANK + 1];
	for (int k = 0; k < n_in; k++) {
		const k_tensor *t = in[k];
		if (t->rank > r)
			return air_error(AIR_SHAPE_MISMATCH, "broadcast: input of rank %d into output of rank %d",
					 t->rank, r);
		int64_t s = 1;
		for (int d = r - 1; d >= 0; d--) {
			int id = d - (r - t->rank);
			int64_t n = id >= 0 ? t->dims[id] : 1;
			if (n != out->dims[d] && n != 1)
				return air_error(AIR_SHAPE_MISMATCH,
						 "broadcast: size %lld does not match output size %lld at dim %d",
						 (long long)n, (long long)out->dims[d], d);
			st[k][d] = (n == 1 && out->dims[d] != 1) ? 0 : s;
			s *= n;
		}
	}
	for (int d = 0; d < r; d++)
		dims[d] = out->dims[d];
	/* coalesce dim d into d+1 when every input is contiguous across them */
	int m = 0;
	int64_t cd[AIR_MAX_RANK], cs[3][AIR_MAX_RANK];
	for (int d = 0; d < r; d++) {
		if (dims[d] == 1)
			continue; /* size-1 dims never move an offset */
		if (m > 0) {
			bool merge = true;
			for (int k = 0; k < n_in; k++)
				if (cs[k][m - 1] != st[k][d] * dims[d])
					merge = false;
			if (merge) {
				cd[m - 1] *= dims[d];
				for (int k = 0; k < n_in; k++)
					cs[k][m - 1] = st[k][d];
				continue;
			}
		}
		cd[m] = dims[d];
		for (int k = 0; k < n_in; k++)
			cs[k][m] = st[k][d];
		m++;
	}
	if (m == 0) {
		cd[0] = 1;
		for (int k = 0; k < n_in; k++)
			cs[k][0] = 1;
		m = 1;
	}
	p->rank = m;
	p->n_in = n_in;
	p->rows = 1;
	for (int d = 0; d < m; d++) {
		p->dims[d] = cd[d];
		for (int k = 0; k < n_in; k++)
			p->strides[k][d] = cs[k][d];
		if (d < m - 1)
			p->rows *= cd[d];
	}
	p->inner = cd[m - 1];
	if (out->numel == 0)
		p->rows = 0;
	return AIR_OK;
}

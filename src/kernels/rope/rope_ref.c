/* rope_ref.c - see rope.h. f32 throughout, each product rounded before the sum
 * as the written-out ops round them (up to the compiler's contraction into
 * an FMA: one rounding less). Rows of x's last dim; cos and sin reach
 * theirs through broadcast strides (kernels/elementwise/bcast.h), which keep the
 * last dim contiguous since it is never broadcast. With the bshd attribute
 * the tables' [B, 1, L, E] is read as [B, L, 1, E] against x's [B, L, H,
 * E] (ops/fused.c). */
#include "kernels/rope/rope_ref.h"

#include "core/error.h"
#include "kernels/elementwise/bcast.h"

typedef struct rope_ctx {
	kb_plan p;
	krope_row_fn row;
	const float *x, *c, *s;
	float *y;
	int64_t n, rows_per_task; /* n: x's last dim */
} rope_ctx;

static void rope_row_portable(const float *restrict x, const float *restrict c, const float *restrict s,
			      float *restrict y, int64_t n)
{
	const int64_t h = n / 2;
	for (int64_t i = 0; i < h; i++)
		y[i] = x[i] * c[i] + -x[i + h] * s[i];
	for (int64_t i = h; i < n; i++)
		y[i] = x[i] * c[i] + x[i - h] * s[i];
}

static void rope_task(void *arg, int64_t t, int thread)
{
	(void)thread;
	const rope_ctx *r = arg;
	int64_t r0 = t * r->rows_per_task, r1 = r0 + r->rows_per_task;
	if (r1 > r->p.rows)
		r1 = r->p.rows;
	/* the first row's offsets from its index, the next ones by stepping the
	 * outer dims like an odometer: rows are short (a head, 64 floats), and
	 * kb_row's divisions for each cost about as much as the row */
	const kb_plan *p = &r->p;
	int64_t off[3], idx[AIR_MAX_RANK], rest = r0;
	kb_row(p, r0, off);
	for (int d = p->rank - 2; d >= 0; d--) {
		idx[d] = rest % p->dims[d];
		rest /= p->dims[d];
	}
	for (int64_t row = r0; row < r1; row++) {
		/* the inner run is whole rows of the last dim (dims coalesce whole) */
		for (int64_t j = 0; j < p->inner; j += r->n)
			r->row(r->x + off[0] + j, r->c + off[1] + j, r->s + off[2] + j, r->y + row * p->inner + j,
			       r->n);
		for (int d = p->rank - 2; d >= 0; d--) {
			for (int k = 0; k < 3; k++)
				off[k] += p->strides[k][d];
			if (++idx[d] < p->dims[d])
				break;
			for (int k = 0; k < 3; k++)
				off[k] -= p->strides[k][d] * p->dims[d];
			idx[d] = 0;
		}
	}
}

air_status krope_run(const k_call *call, krope_row_fn row)
{
	const k_tensor *out = &call->out[0];
	const k_tensor *in[3] = {&call->in[0], &call->in[1], &call->in[2]};
	k_tensor tables[2];
	if (call->attrs[0].i) {
		/* bshd: x [B, L, H, E], tables [B or 1, 1, L, E], the same bytes
		 * as [B or 1, L, 1, E], which broadcast to x */
		for (int i = 0; i < 2; i++) {
			tables[i] = *in[1 + i];
			if (tables[i].rank != 4 || tables[i].dims[1] != 1)
				return air_error(AIR_SHAPE_MISMATCH, "rope: with bshd, cos and sin must be [B or 1, 1, L, E]");
			tables[i].dims[1] = tables[i].dims[2];
			tables[i].dims[2] = 1;
			in[1 + i] = &tables[i];
		}
	}
	for (int i = 0; i < 3; i++)
		if (in[i]->dtype != AIR_F32 || in[i]->rank != out->rank ||
		    in[i]->dims[out->rank - 1] != out->dims[out->rank - 1])
			return air_error(AIR_SHAPE_MISMATCH, "rope: x, cos and sin must be f32 with x's rank and last dim");
	rope_ctx r;
	r.row = row;
	r.n = out->rank ? out->dims[out->rank - 1] : 1;
	if (out->numel == 0)
		return AIR_OK;
	if (r.n % 2 != 0)
		return air_error(AIR_SHAPE_MISMATCH, "rope: the last dim (%lld) must be even", (long long)r.n);
	AIR_TRY(kb_make(&r.p, out, in, 3));
	for (int i = 0; i < 3; i++)
		if (r.p.strides[i][r.p.rank - 1] != 1 || r.p.inner % r.n != 0)
			return air_error(AIR_SHAPE_MISMATCH, "rope: an input broadcasts along the last dim");
	r.x = in[0]->data;
	r.c = in[1]->data;
	r.s = in[2]->data;
	r.y = out->data;
	r.rows_per_task = kb_rows_per_task(&r.p);
	rt_pool_run(call->pool, (r.p.rows + r.rows_per_task - 1) / r.rows_per_task, rope_task, &r);
	return AIR_OK;
}

air_status kref_rope(const k_call *call)
{
	return krope_run(call, rope_row_portable);
}

/* reduce_fast.c - f32 sums over the leading dims (y[i] = sum over rows j of
 * x[j * inner + i]: a bias's gradient in a training step's backward), split
 * over the pool. Other reductions keep the reference kernels.
 *
 * Why: the reference sum keeps 256 double accumulators in memory per
 * column block and cut BERT's 768 columns into three tasks for two
 * threads; [394, 768] took 64 us against eager's 11. Here each task walks
 * a strip of 16 columns down the rows with its sums in registers: float
 * sums over blocks of 64 rows, added into double sums between blocks, so a
 * tall reduction (a conv's bias over a batch of pixels) keeps the
 * reference's accuracy while the inner loop stays four float adds a row. */
#include "kernels/reduce_fast.h"

#include <stdbool.h>

#ifdef __SSE2__
#include <immintrin.h>
#endif

#include "kernels/ref/reduce.h"
#include "runtime/pool.h"

enum {
	STRIP = 16,      /* columns a task's inner loop sums at once */
	ROW_BLOCK = 64,  /* rows summed in float before the double sums take them */
	MIN_INNER = 16,  /* fewer columns: one strip, no parallelism; the reference */
	STRIPS_PER_TASK_MAX = 16,
};

/* The reduced dims of x as a mask (no axes: all of them), as the reference
 * reads attrs (ops/reduce.c). */
static unsigned reduce_mask(const k_call *call, int rank)
{
	const k_attr *axes = &call->attrs[0];
	if (axes->n == 0)
		return rank >= 32 ? ~0u : (1u << rank) - 1;
	unsigned m = 0;
	for (int k = 0; k < axes->n; k++) {
		int64_t a = axes->ints[k] < 0 ? axes->ints[k] + rank : axes->ints[k];
		m |= 1u << a;
	}
	return m;
}

/* x as [rows, inner]: every reduced dim before every kept one (dims of size
 * 1 count as either). False otherwise, or when a size is not known yet. */
static bool leading_split(const k_call *call, int64_t *rows, int64_t *inner)
{
	const k_tensor *x = &call->in[0];
	unsigned mask = reduce_mask(call, x->rank);
	bool kept_seen = false;
	*rows = *inner = 1;
	for (int d = 0; d < x->rank; d++) {
		int64_t n = x->dims[d];
		if (n < 0)
			return false;
		if (n == 1)
			continue;
		if ((mask >> d) & 1u) {
			if (kept_seen)
				return false;
			*rows *= n;
		} else {
			kept_seen = true;
			*inner *= n;
		}
	}
	return kept_seen;
}

static bool sum_supports(const k_call *call)
{
	if (!k_all_f32(call) || call->in[0].rank < 1)
		return false;
	int64_t rows, inner;
	/* sizes unknown at compile time are checked again at run time */
	for (int d = 0; d < call->in[0].rank; d++)
		if (call->in[0].dims[d] < 0)
			return true;
	return leading_split(call, &rows, &inner) && inner >= MIN_INNER;
}

typedef struct colsum_job {
	const float *x;
	float *y;
	int64_t rows, inner, strips_per_task;
} colsum_job;

/* y[c + i] for i < n (n <= STRIP): the sum over all rows of that column */
static void colsum_strip(const float *x, float *y, int64_t rows, int64_t ld, int n)
{
	double tot[STRIP] = {0};
	for (int64_t r0 = 0; r0 < rows; r0 += ROW_BLOCK) {
		const int64_t r1 = r0 + ROW_BLOCK < rows ? r0 + ROW_BLOCK : rows;
		float s[STRIP] = {0};
		if (n == STRIP) {
#ifdef __SSE2__
			__m128 s0 = _mm_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
			for (int64_t r = r0; r < r1; r++) {
				const float *p = x + r * ld;
				s0 = _mm_add_ps(s0, _mm_loadu_ps(p));
				s1 = _mm_add_ps(s1, _mm_loadu_ps(p + 4));
				s2 = _mm_add_ps(s2, _mm_loadu_ps(p + 8));
				s3 = _mm_add_ps(s3, _mm_loadu_ps(p + 12));
			}
			_mm_storeu_ps(s, s0);
			_mm_storeu_ps(s + 4, s1);
			_mm_storeu_ps(s + 8, s2);
			_mm_storeu_ps(s + 12, s3);
#else
			for (int64_t r = r0; r < r1; r++)
				for (int i = 0; i < STRIP; i++)
					s[i] += x[r * ld + i];
#endif
		} else {
			for (int64_t r = r0; r < r1; r++)
				for (int i = 0; i < n; i++)
					s[i] += x[r * ld + i];
		}
		for (int i = 0; i < n; i++)
			tot[i] += s[i];
	}
	for (int i = 0; i < n; i++)
		y[i] = (float)tot[i];
}

static void colsum_task(void *ctx, int64_t t, int thread)
{
	(void)thread;
	const colsum_job *j = ctx;
	for (int64_t s = t * j->strips_per_task; s < (t + 1) * j->strips_per_task; s++) {
		const int64_t c = s * STRIP;
		if (c >= j->inner)
			return;
		const int n = (int)(j->inner - c < STRIP ? j->inner - c : STRIP);
		colsum_strip(j->x + c, j->y + c, j->rows, j->inner, n);
	}
}

static air_status sum_run(const k_call *call)
{
	int64_t rows, inner;
	if (!leading_split(call, &rows, &inner) || inner < MIN_INNER || call->out[0].numel != inner)
		return kref_sum(call);
	colsum_job j = {call->in[0].data, call->out[0].data, rows, inner, 1};
	const int64_t strips = (inner + STRIP - 1) / STRIP;
	/* a few tasks per thread, each at most STRIPS_PER_TASK_MAX strips */
	const int64_t want = 4 * (int64_t)rt_pool_size(call->pool);
	j.strips_per_task = (strips + want - 1) / want;
	if (j.strips_per_task > STRIPS_PER_TASK_MAX)
		j.strips_per_task = STRIPS_PER_TASK_MAX;
	rt_pool_run(call->pool, (strips + j.strips_per_task - 1) / j.strips_per_task, colsum_task, &j);
	return AIR_OK;
}

const k_kernel kfast_sum_columns = {"sum_columns", 0, sum_supports, NULL, NULL, NULL, sum_run};

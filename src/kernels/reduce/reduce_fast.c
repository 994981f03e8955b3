/* reduce_fast.c - f32 sums over the leading dims (y[i] = sum over rows j of
 * x[j * inner + i]: a bias's gradient in a training step's backward), split
 * over the pool. Other reductions keep the reference kernels.
 *
 * Why: the reference sum keeps 256 double accumulators in memory per
 * column block and cut BERT's 768 columns into three tasks for two
 * threads; [394, 768] took 64 us against eager's 11. Here tasks take
 * blocks of rows by chunks of columns, and read each row's columns in
 * order: float sums over blocks of 64 rows, added into double sums between
 * blocks (and between a column's row chunks, from the workspace), so a
 * tall reduction (a conv's bias over a batch of pixels) keeps the
 * reference's accuracy. Tasks that walked strips of 16 columns down all
 * the rows read memory 64 bytes a row, 3 KiB apart, and ran ViT-Tiny's
 * bias gradients ([1576, 768]) at half eager's speed. */
#include "kernels/reduce/reduce_fast.h"

#include <stdbool.h>

#ifdef __SSE2__
#include <immintrin.h>
#endif

#include "kernels/reduce/reduce_ref.h"
#include "platform/pool.h"

enum {
	ROW_BLOCK = 64,       /* rows summed in float before the double sums take them */
	MIN_INNER = 16,       /* fewer columns: no parallelism; the reference */
	COLS_MAX = 1024,      /* columns a task sums at once (its float sums: 4 KiB) */
	MIN_CHUNK_BLOCKS = 2, /* row blocks a task takes at least */
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

/* The split of a [rows, inner] sum into tasks: row chunks (whole row
 * blocks) by column chunks (at most COLS_MAX). With more than one row
 * chunk, tasks leave double partial sums in the workspace and a second
 * pass adds them up, chunk by chunk in order. */
typedef struct colsum_plan {
	int64_t row_chunks, rows_per_chunk, col_chunks, cols_per_chunk;
} colsum_plan;

static colsum_plan colsum_plan_of(int64_t rows, int64_t inner, int nthreads)
{
	colsum_plan p;
	p.col_chunks = (inner + COLS_MAX - 1) / COLS_MAX;
	p.cols_per_chunk = (inner + p.col_chunks - 1) / p.col_chunks;
	const int64_t want = 4 * (int64_t)(nthreads > 0 ? nthreads : 1);
	const int64_t blocks = (rows + ROW_BLOCK - 1) / ROW_BLOCK;
	int64_t rc = p.col_chunks >= want ? 1 : (want + p.col_chunks - 1) / p.col_chunks;
	/* at least MIN_CHUNK_BLOCKS row blocks a chunk, or the partials cost
	 * more than they spread */
	if (rc > blocks / MIN_CHUNK_BLOCKS)
		rc = blocks / MIN_CHUNK_BLOCKS;
	if (rc < 1)
		rc = 1;
	p.rows_per_chunk = (blocks + rc - 1) / rc * ROW_BLOCK;
	p.row_chunks = (rows + p.rows_per_chunk - 1) / p.rows_per_chunk;
	return p;
}

typedef struct colsum_job {
	const float *x;
	float *y;
	double *partial; /* [row_chunks, inner], when row_chunks > 1 */
	int64_t rows, inner;
	colsum_plan plan;
} colsum_job;

/* Sums of rows [r0, r1) of columns [c0, c1) (at most COLS_MAX) into
 * tot: row by row, each row's columns read in order (one stream through
 * memory), into float sums of ROW_BLOCK rows that the double sums take. */
static void colsum_block(const float *x, int64_t ld, int64_t r0, int64_t r1, int64_t c0, int64_t c1, double *tot)
{
	float s[COLS_MAX];
	const int64_t n = c1 - c0, vec = n / 16 * 16;
	for (int64_t i = 0; i < n; i++)
		tot[i] = 0.0;
	for (int64_t b0 = r0; b0 < r1; b0 += ROW_BLOCK) {
		const int64_t b1 = b0 + ROW_BLOCK < r1 ? b0 + ROW_BLOCK : r1;
		for (int64_t i = 0; i < n; i++)
			s[i] = 0.0f;
		for (int64_t r = b0; r < b1; r++) {
			const float *p = x + r * ld + c0;
			int64_t i = 0;
#ifdef __SSE2__
			for (; i < vec; i += 16) {
				_mm_storeu_ps(s + i, _mm_add_ps(_mm_loadu_ps(s + i), _mm_loadu_ps(p + i)));
				_mm_storeu_ps(s + i + 4, _mm_add_ps(_mm_loadu_ps(s + i + 4), _mm_loadu_ps(p + i + 4)));
				_mm_storeu_ps(s + i + 8, _mm_add_ps(_mm_loadu_ps(s + i + 8), _mm_loadu_ps(p + i + 8)));
				_mm_storeu_ps(s + i + 12, _mm_add_ps(_mm_loadu_ps(s + i + 12), _mm_loadu_ps(p + i + 12)));
			}
#endif
			for (; i < n; i++)
				s[i] += p[i];
		}
		for (int64_t i = 0; i < n; i++)
			tot[i] += s[i];
	}
}

static void colsum_task(void *ctx, int64_t t, int thread)
{
	(void)thread;
	const colsum_job *j = ctx;
	const colsum_plan *p = &j->plan;
	const int64_t ir = t / p->col_chunks, ic = t % p->col_chunks;
	const int64_t r0 = ir * p->rows_per_chunk, r1 = r0 + p->rows_per_chunk < j->rows ? r0 + p->rows_per_chunk : j->rows;
	const int64_t c0 = ic * p->cols_per_chunk, c1 = c0 + p->cols_per_chunk < j->inner ? c0 + p->cols_per_chunk : j->inner;
	if (c0 >= c1)
		return;
	if (p->row_chunks > 1) {
		colsum_block(j->x, j->inner, r0, r1, c0, c1, j->partial + ir * j->inner + c0);
		return;
	}
	double tot[COLS_MAX];
	colsum_block(j->x, j->inner, r0, r1, c0, c1, tot);
	for (int64_t i = 0; i < c1 - c0; i++)
		j->y[c0 + i] = (float)tot[i];
}

/* y from the row chunks' partial sums, added in chunk order */
static void colsum_combine_task(void *ctx, int64_t t, int thread)
{
	(void)thread;
	const colsum_job *j = ctx;
	const int64_t c0 = t * j->plan.cols_per_chunk;
	const int64_t c1 = c0 + j->plan.cols_per_chunk < j->inner ? c0 + j->plan.cols_per_chunk : j->inner;
	for (int64_t c = c0; c < c1; c++) {
		double v = 0.0;
		for (int64_t ir = 0; ir < j->plan.row_chunks; ir++)
			v += j->partial[ir * j->inner + c];
		j->y[c] = (float)v;
	}
}

static size_t sum_workspace(const k_call *call, int nthreads)
{
	int64_t rows, inner;
	if (!leading_split(call, &rows, &inner) || inner < MIN_INNER || call->out[0].numel != inner)
		return 0;
	colsum_plan p = colsum_plan_of(rows, inner, nthreads);
	return p.row_chunks > 1 ? (size_t)(p.row_chunks * inner) * sizeof(double) : 0;
}

static air_status sum_run(const k_call *call)
{
	int64_t rows, inner;
	if (!leading_split(call, &rows, &inner) || inner < MIN_INNER || call->out[0].numel != inner)
		return kref_sum(call);
	/* the pool's size, as the workspace was sized with (session.c) */
	colsum_job j = {call->in[0].data, call->out[0].data, call->workspace, rows, inner,
			colsum_plan_of(rows, inner, rt_pool_size(call->pool))};
	rt_pool_run(call->pool, j.plan.row_chunks * j.plan.col_chunks, colsum_task, &j);
	if (j.plan.row_chunks > 1)
		rt_pool_run(call->pool, j.plan.col_chunks, colsum_combine_task, &j);
	return AIR_OK;
}

const k_kernel kfast_sum_columns = {"sum_columns", 0, sum_supports, NULL, NULL, sum_workspace, sum_run};

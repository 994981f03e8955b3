/* test_ops_shape.c - the shape and data-movement ops (reshape, copy,
 * permute, expand, slice, cat) through the public API, against results the
 * test builds by its own index arithmetic, byte for byte, on dtypes of every
 * element size (bool, u8, f16, i32, f32, f64, i64):
 *   - reshape as an alias feeding other ops, chained, as a graph output, of
 *     an input and of a constant, empty, 0-d, symbolic;
 *   - permute: all 24 permutations of a rank-4 tensor, size-1 and size-0
 *     dims, negative axes;
 *   - expand with broadcasting (new leading dims, size-1 dims, 0-d, to 0);
 *   - slice with steps 1, 2, 3 and at the edges (empty, last element, whole),
 *     along every axis;
 *   - cat along every axis, with an empty input, one input, many inputs;
 *   - errors at build time, and sizes that only disagree at run time
 *     (symbolic reshape, cat, slice, expand) as errors, not memory faults. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/error.h"
#include "op_harness.h"

static const air_dtype TYPES[] = {AIR_BOOL, AIR_U8, AIR_F16, AIR_I32, AIR_F32, AIR_F64, AIR_I64};
enum { N_TYPES = sizeof TYPES / sizeof TYPES[0] };

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_u64(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static int64_t numel_of(int rank, const int64_t *dims)
{
	int64_t n = 1;
	for (int i = 0; i < rank; i++)
		n *= dims[i];
	return n;
}

/* n elements of dt with distinct-looking random bits (0/1 for bool); NULL
 * for n == 0, as empty tensors may be bound without data */
static void *random_data(air_dtype dt, int64_t n)
{
	if (n == 0)
		return NULL;
	size_t es = air_dtype_size(dt);
	uint8_t *p = malloc(es * (size_t)n);
	for (size_t i = 0; i < es * (size_t)n; i++)
		p[i] = dt == AIR_BOOL ? (uint8_t)(next_u64() & 1) : (uint8_t)next_u64();
	return p;
}

/* Row-major strides of dims. */
static void strides_of(int rank, const int64_t *dims, int64_t *st)
{
	int64_t s = 1;
	for (int d = rank - 1; d >= 0; d--) {
		st[d] = s;
		s *= dims[d];
	}
}

/* Runs op on args with the default and the reference kernels; compares
 * the output (rank, dims, bytes) with want. */
static void check_bytes(const char *label, const char *op, const th_arg *args, int n, const air_attr *attrs, int na,
			int rank, const int64_t *dims, const void *want)
{
	for (int f = 0; f < 2; f++) {
		air_model *m = th_compile(op, args, n, attrs, na, f ? AIR_COMPILE_REFERENCE_KERNELS : 0);
		if (!m) {
			fprintf(stderr, "  (%s)\n", label);
			return;
		}
		air_dtype dt;
		air_model_output_info(m, 0, &dt, NULL, NULL);
		int r = -1;
		int64_t d[AIR_MAX_RANK];
		void *got = th_run(m, args, n, &r, d);
		air_model_destroy(m);
		if (!got) {
			fprintf(stderr, "  (%s)\n", label);
			continue;
		}
		check_count++;
		bool ok = r == rank;
		for (int i = 0; ok && i < rank; i++)
			ok = d[i] == dims[i];
		size_t bytes = (size_t)numel_of(rank, dims) * air_dtype_size(dt);
		if (!ok) {
			check_failures++;
			fprintf(stderr, "%s: output rank %d, want %d (or dims differ)\n", label, r, rank);
		} else if (bytes && memcmp(got, want, bytes) != 0) {
			check_failures++;
			fprintf(stderr, "%s: output bytes differ\n", label);
		}
		free(got);
	}
}

/* Builds op on args and expects status want at build time, naming op. */
static void expect_build(const char *op, const th_arg *args, int n, const air_attr *attrs, int na, air_status want,
			 const char *label)
{
	th_expect_build_error(op, args, n, attrs, na, want, label);
}

/* Expects a run-time error (status want), with both kernel sets. */
static void expect_run(const char *op, const th_arg *args, int n, const air_attr *attrs, int na, air_status want,
		       const char *label)
{
	for (int f = 0; f < 2; f++) {
		air_model *m = th_compile(op, args, n, attrs, na, f ? AIR_COMPILE_REFERENCE_KERNELS : 0);
		if (!m)
			return;
		int r;
		int64_t d[AIR_MAX_RANK];
		air_status st = AIR_OK;
		void *got = th_run_status(m, args, n, &r, d, &st);
		free(got);
		air_model_destroy(m);
		check_count++;
		if (st != want || air_last_error()[0] == '\0') {
			check_failures++;
			fprintf(stderr, "%s: want %s at run time, got %s: '%s'\n", label, air_status_string(want),
				air_status_string(st), air_last_error());
		}
	}
}

/* ---- permute -------------------------------------------------------------- */

static void permute_case(air_dtype dt, int rank, const int64_t *dims, const int64_t *perm)
{
	int64_t n = numel_of(rank, dims);
	size_t es = air_dtype_size(dt);
	void *x = random_data(dt, n);
	int64_t xs[AIR_MAX_RANK], od[AIR_MAX_RANK], os[AIR_MAX_RANK];
	strides_of(rank, dims, xs);
	int p[AIR_MAX_RANK];
	for (int i = 0; i < rank; i++) {
		p[i] = (int)(perm[i] < 0 ? perm[i] + rank : perm[i]);
		od[i] = dims[p[i]];
	}
	strides_of(rank, od, os);
	uint8_t *want = malloc(es * (size_t)(n ? n : 1));
	for (int64_t o = 0; o < n; o++) {
		int64_t src = 0, rem = o;
		for (int i = 0; i < rank; i++) {
			int64_t idx = rem / os[i];
			rem %= os[i];
			src += idx * xs[p[i]];
		}
		memcpy(want + (size_t)o * es, (const uint8_t *)x + (size_t)src * es, es);
	}
	th_arg a = th_make(dt, x, rank, dims);
	air_attr at = th_ints("perm", perm, rank);
	char label[96];
	snprintf(label, sizeof label, "permute %s rank %d (%lld %lld %lld %lld)", air_dtype_name(dt), rank,
		 (long long)(rank > 0 ? perm[0] : -9), (long long)(rank > 1 ? perm[1] : -9),
		 (long long)(rank > 2 ? perm[2] : -9), (long long)(rank > 3 ? perm[3] : -9));
	check_bytes(label, "permute", &a, 1, &at, 1, rank, od, want);
	free(x);
	free(want);
}

static void test_permute(void)
{
	/* all 24 permutations of a rank-4 tensor */
	int64_t dims[4] = {2, 3, 4, 5};
	int count = 0;
	for (int a = 0; a < 4; a++)
		for (int b = 0; b < 4; b++)
			for (int c = 0; c < 4; c++)
				for (int d = 0; d < 4; d++) {
					if (a == b || a == c || a == d || b == c || b == d || c == d)
						continue;
					int64_t perm[4] = {a, b, c, d};
					count++;
					permute_case(AIR_F32, 4, dims, perm);
					if (count % 5 == 0) /* other element sizes on a few */
						for (int t = 0; t < N_TYPES; t++)
							permute_case(TYPES[t], 4, dims, perm);
				}
	CHECK(count == 24);
	/* negative axes, size-1 dims, a 0 dim, big enough to use threads */
	int64_t neg[4] = {-1, 0, -3, 2};
	permute_case(AIR_I64, 4, dims, neg);
	int64_t ones[4] = {1, 3, 1, 5}, p1[4] = {3, 2, 1, 0};
	permute_case(AIR_F32, 4, ones, p1);
	int64_t zero[4] = {2, 0, 3, 1};
	permute_case(AIR_F32, 4, zero, p1);
	int64_t big[3] = {64, 129, 33}, pb[3] = {2, 0, 1};
	permute_case(AIR_F32, 3, big, pb);
	permute_case(AIR_U8, 3, big, pb);
	/* the layout permutes (permute_swap_tiles): whole 8 x 8 blocks and
	 * edges on both sides, row strips, a 3-channel image split in column
	 * chunks; 4-byte types only (others take the generic kernel) */
	{
		int64_t into[4] = {0, 2, 3, 1}, back[4] = {0, 3, 1, 2};
		int64_t shapes[][4] = {{2, 19, 9, 11}, {1, 64, 16, 16}, {1, 3, 70, 70}, {3, 40, 5, 7}, {1, 8, 1, 8}};
		for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
			permute_case(AIR_F32, 4, shapes[i], into);
			permute_case(AIR_F32, 4, shapes[i], back);
			permute_case(AIR_I32, 4, shapes[i], into);
		}
	}
	/* other swaps of two trailing blocks take the same kernel: a matrix
	 * transpose (a linear's weight in a backward graph), the last two dims
	 * of a batch, blocks of two dims each after a kept one */
	{
		int64_t m[2] = {203, 77}, t2[2] = {1, 0};
		permute_case(AIR_F32, 2, m, t2);
		permute_case(AIR_I32, 2, m, t2);
		int64_t b3[3] = {3, 17, 40}, t3[3] = {0, 2, 1};
		permute_case(AIR_F32, 3, b3, t3);
		int64_t b5[5] = {2, 3, 5, 4, 9}, t5[5] = {0, 3, 4, 1, 2};
		permute_case(AIR_F32, 5, b5, t5);
	}
	int64_t d1[1] = {7}, p0[1] = {0};
	permute_case(AIR_F64, 1, d1, p0);
	permute_case(AIR_F32, 0, NULL, NULL);
	/* rank 6 */
	int64_t d6[6] = {2, 1, 3, 2, 1, 2}, p6[6] = {5, 3, 1, 0, 4, 2};
	permute_case(AIR_I32, 6, d6, p6);
	/* a pixel shuffle's permute, odd sizes and big enough for many tasks:
	 * rows of 3 elements whose runs (41 rows) straddle the task bounds */
	int64_t ps[6] = {2, 7, 3, 3, 37, 41}, pp[6] = {0, 1, 4, 2, 5, 3};
	permute_case(AIR_F32, 6, ps, pp);
	permute_case(AIR_U8, 6, ps, pp);

	float buf[120] = {0};
	th_arg a = th_make(AIR_F32, buf, 4, dims);
	int64_t rep[4] = {0, 1, 1, 3}, shortp[3] = {0, 1, 2}, outside[4] = {0, 1, 2, 4};
	air_attr at = th_ints("perm", rep, 4);
	expect_build("permute", &a, 1, &at, 1, AIR_INVALID_ARGUMENT, "permute repeated axis");
	at = th_ints("perm", shortp, 3);
	expect_build("permute", &a, 1, &at, 1, AIR_INVALID_ARGUMENT, "permute short perm");
	at = th_ints("perm", outside, 4);
	expect_build("permute", &a, 1, &at, 1, AIR_INVALID_ARGUMENT, "permute axis 4 of rank 4");
}

/* ---- expand --------------------------------------------------------------- */

static void expand_case(air_dtype dt, int rank, const int64_t *dims, int orank, const int64_t *odims)
{
	int64_t n = numel_of(rank, dims), no = numel_of(orank, odims);
	size_t es = air_dtype_size(dt);
	void *x = random_data(dt, n);
	int64_t xs[AIR_MAX_RANK];
	strides_of(rank, dims, xs);
	uint8_t *want = malloc(es * (size_t)(no ? no : 1));
	for (int64_t o = 0; o < no; o++) {
		int64_t rem = o, src = 0;
		for (int d = orank - 1; d >= 0; d--) {
			int64_t i = rem % odims[d];
			rem /= odims[d];
			int j = d - (orank - rank);
			if (j >= 0 && dims[j] != 1)
				src += i * xs[j];
		}
		memcpy(want + (size_t)o * es, (const uint8_t *)x + (size_t)src * es, es);
	}
	th_arg a = th_make(dt, x, rank, dims);
	air_attr at = th_ints("shape", odims, orank);
	char label[64];
	snprintf(label, sizeof label, "expand %s rank %d -> %d", air_dtype_name(dt), rank, orank);
	check_bytes(label, "expand", &a, 1, &at, 1, orank, odims, want);
	free(x);
	free(want);
}

static void test_expand(void)
{
	for (int t = 0; t < N_TYPES; t++) {
		air_dtype dt = TYPES[t];
		int64_t a[2] = {3, 1}, ao[3] = {2, 3, 4};
		expand_case(dt, 2, a, 3, ao);
		int64_t b[3] = {1, 4, 1}, bo[3] = {3, 4, 5};
		expand_case(dt, 3, b, 3, bo);
		int64_t s0[1] = {5};
		expand_case(dt, 0, NULL, 1, s0);
		int64_t c[1] = {4}, co[2] = {3, 4};
		expand_case(dt, 1, c, 2, co);
	}
	int64_t one[1] = {1}, zero[1] = {0}, same[3] = {2, 3, 4}, ones[3] = {1, 1, 1};
	expand_case(AIR_F32, 1, one, 1, zero);   /* to nothing */
	expand_case(AIR_F32, 3, same, 3, same);  /* no change */
	expand_case(AIR_F64, 3, ones, 3, same);  /* every dim */
	int64_t row[2] = {1, 1003}, rowo[2] = {300, 1003};
	expand_case(AIR_F32, 2, row, 2, rowo);   /* big enough for threads */
	int64_t col[2] = {300, 1}, colo[2] = {300, 1003};
	expand_case(AIR_I64, 2, col, 2, colo);

	float buf[12] = {0};
	int64_t d[2] = {3, 4};
	th_arg x = th_make(AIR_F32, buf, 2, d);
	int64_t bad1[2] = {3, 5}, bad2[1] = {12}, bad3[2] = {6, 4};
	air_attr at = th_ints("shape", bad1, 2);
	expect_build("expand", &x, 1, &at, 1, AIR_SHAPE_MISMATCH, "expand 4 to 5");
	at = th_ints("shape", bad2, 1);
	expect_build("expand", &x, 1, &at, 1, AIR_INVALID_ARGUMENT, "expand to a lower rank");
	at = th_ints("shape", bad3, 2);
	expect_build("expand", &x, 1, &at, 1, AIR_SHAPE_MISMATCH, "expand 3 to 6");
	/* sizes that disagree only at run time: x [s1] expanded to [2, s2] */
	air_graph *g = NULL;
	CHECK_OK(air_graph_create(&g));
	air_dim s1, s2;
	CHECK_OK(air_graph_symbol(g, NULL, &s1));
	CHECK_OK(air_graph_symbol(g, NULL, &s2));
	air_value xv, yv, ev;
	CHECK_OK(air_graph_add_input(g, "x", AIR_F32, 1, &s1, &xv));
	CHECK_OK(air_graph_add_input(g, "y", AIR_F32, 1, &s2, &yv));
	int64_t shape[2] = {2, s2};
	air_attr ea = th_ints("shape", shape, 2);
	int no;
	CHECK_OK(air_graph_add_node(g, "expand", &xv, 1, &ea, 1, &ev, 1, &no));
	air_value outs[2] = {ev, yv};
	CHECK_OK(air_graph_set_outputs(g, outs, 2));
	air_model *m = NULL;
	CHECK_OK(air_compile(g, NULL, &m));
	air_graph_destroy(g);
	air_session *s = NULL;
	CHECK_OK(air_session_create(m, &s));
	float xd[3] = {1, 2, 3}, yd[5] = {0}, out[10], yo[5];
	int64_t three = 3, five = 5, one1 = 1;
	CHECK_OK(air_session_set_input(s, 0, xd, 1, &three));
	CHECK_OK(air_session_set_input(s, 1, yd, 1, &five));
	CHECK_OK(air_session_set_output(s, 0, out, sizeof out));
	CHECK_OK(air_session_set_output(s, 1, yo, sizeof yo));
	CHECK(air_session_run(s) == AIR_SHAPE_MISMATCH);
	/* s1 = 1 broadcasts, s1 = s2 copies */
	CHECK_OK(air_session_set_input(s, 0, xd, 1, &one1));
	CHECK_OK(air_session_run(s));
	CHECK(out[0] == 1 && out[4] == 1 && out[9] == 1);
	air_session_destroy(s);
	air_model_destroy(m);
}

/* ---- slice ---------------------------------------------------------------- */

static void slice_case(air_dtype dt, int rank, const int64_t *dims, int axis, int64_t start, int64_t end, int64_t step,
		       bool give_step)
{
	int64_t n = numel_of(rank, dims);
	size_t es = air_dtype_size(dt);
	void *x = random_data(dt, n);
	int ax = axis < 0 ? axis + rank : axis;
	int64_t od[AIR_MAX_RANK], xs[AIR_MAX_RANK], os[AIR_MAX_RANK];
	memcpy(od, dims, sizeof(int64_t) * (size_t)rank);
	od[ax] = (end - start + step - 1) / step;
	strides_of(rank, dims, xs);
	strides_of(rank, od, os);
	int64_t no = numel_of(rank, od);
	uint8_t *want = malloc(es * (size_t)(no ? no : 1));
	for (int64_t o = 0; o < no; o++) {
		int64_t rem = o, src = 0;
		for (int d = 0; d < rank; d++) {
			int64_t i = rem / os[d];
			rem %= os[d];
			src += (d == ax ? start + i * step : i) * xs[d];
		}
		memcpy(want + (size_t)o * es, (const uint8_t *)x + (size_t)src * es, es);
	}
	th_arg a = th_make(dt, x, rank, dims);
	air_attr at[4] = {th_int("axis", axis), th_int("start", start), th_int("end", end), th_int("step", step)};
	char label[96];
	snprintf(label, sizeof label, "slice %s axis %d [%lld:%lld:%lld] of %lld", air_dtype_name(dt), axis,
		 (long long)start, (long long)end, (long long)step, (long long)dims[ax]);
	check_bytes(label, "slice", &a, 1, at, give_step ? 4 : 3, rank, od, want);
	free(x);
	free(want);
}

static void test_slice(void)
{
	int64_t d1[1] = {10};
	const int64_t cases[][3] = {{0, 10, 1}, {0, 10, 2}, {0, 10, 3}, {1, 10, 3}, {2, 9, 3}, {9, 10, 1},
				    {10, 10, 1}, {0, 0, 1}, {3, 9, 2}, {0, 1, 5}, {0, 10, 10}, {0, 10, 11},
				    {5, 10, 7}, {4, 5, 2}};
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
		for (int t = 0; t < N_TYPES; t++)
			slice_case(TYPES[t], 1, d1, 0, cases[c][0], cases[c][1], cases[c][2], true);
	/* every axis of a rank-3 tensor, negative axes, step defaulted */
	int64_t d3[3] = {4, 5, 6};
	for (int axis = -3; axis < 3; axis++) {
		int ax = axis < 0 ? axis + 3 : axis;
		slice_case(AIR_F32, 3, d3, axis, 1, d3[ax], 2, true);
		slice_case(AIR_I64, 3, d3, axis, 0, d3[ax], 3, true);
		slice_case(AIR_U8, 3, d3, axis, d3[ax] - 1, d3[ax], 1, false);
		slice_case(AIR_F16, 3, d3, axis, 1, 3, 1, false);
		slice_case(AIR_F32, 3, d3, axis, 2, 2, 1, true);
	}
	/* a large one for threads, and slicing an empty tensor */
	int64_t big[2] = {513, 257};
	slice_case(AIR_F32, 2, big, 1, 3, 250, 3, true);
	slice_case(AIR_F32, 2, big, 0, 1, 513, 2, true);
	int64_t empty[2] = {0, 6};
	slice_case(AIR_F32, 2, empty, 1, 1, 5, 2, true);

	float buf[10] = {0};
	th_arg a = th_make(AIR_F32, buf, 1, d1);
	air_attr bad[4] = {th_int("axis", 0), th_int("start", 0), th_int("end", 10), th_int("step", 0)};
	expect_build("slice", &a, 1, bad, 4, AIR_INVALID_ARGUMENT, "slice step 0");
	bad[3] = th_int("step", -1);
	expect_build("slice", &a, 1, bad, 4, AIR_INVALID_ARGUMENT, "slice step -1");
	bad[3] = th_int("step", 1);
	bad[2] = th_int("end", 11);
	expect_build("slice", &a, 1, bad, 4, AIR_INVALID_ARGUMENT, "slice end past size");
	bad[1] = th_int("start", 6);
	bad[2] = th_int("end", 5);
	expect_build("slice", &a, 1, bad, 4, AIR_INVALID_ARGUMENT, "slice start > end");
	bad[1] = th_int("start", 0);
	bad[0] = th_int("axis", 1);
	expect_build("slice", &a, 1, bad, 4, AIR_INVALID_ARGUMENT, "slice axis 1 of rank 1");
	bad[0] = th_int("axis", -2);
	expect_build("slice", &a, 1, bad, 4, AIR_INVALID_ARGUMENT, "slice axis -2 of rank 1");
	/* a 0-d tensor has no axis to slice */
	th_arg s0 = th_make(AIR_F32, buf, 0, NULL);
	air_attr sa[3] = {th_int("axis", 0), th_int("start", 0), th_int("end", 0)};
	expect_build("slice", &s0, 1, sa, 3, AIR_INVALID_ARGUMENT, "slice of a 0-d tensor");

	/* symbolic: x [s1] sliced [2 : s1 : 3]; run at several sizes, and at
	 * one where the bounds are impossible */
	air_graph *g = NULL;
	CHECK_OK(air_graph_create(&g));
	air_dim s;
	CHECK_OK(air_graph_symbol(g, NULL, &s));
	air_value xv, yv;
	CHECK_OK(air_graph_add_input(g, "x", AIR_F32, 1, &s, &xv));
	air_attr ssa[4] = {th_int("axis", 0), th_int("start", 2), th_int("end", s), th_int("step", 3)};
	int no;
	CHECK_OK(air_graph_add_node(g, "slice", &xv, 1, ssa, 4, &yv, 1, &no));
	CHECK_OK(air_graph_set_outputs(g, &yv, 1));
	air_model *m = NULL;
	CHECK_OK(air_compile(g, NULL, &m));
	air_graph_destroy(g);
	for (int64_t n = 2; n < 40; n += 7) {
		float x[40];
		for (int i = 0; i < 40; i++)
			x[i] = (float)i;
		th_arg sx = th_make(AIR_F32, x, 1, &n);
		int r;
		int64_t od[AIR_MAX_RANK];
		float *got = th_run(m, &sx, 1, &r, od);
		if (!got)
			continue;
		int64_t len = (n - 2 + 2) / 3;
		CHECK(r == 1 && od[0] == len);
		int bad_v = 0;
		for (int64_t i = 0; i < len; i++)
			bad_v += got[i] != (float)(2 + 3 * i);
		CHECK(bad_v == 0);
		free(got);
	}
	/* n = 1: end < start, so the length would be negative */
	float x1[1] = {0};
	int64_t n1 = 1;
	th_arg sx = th_make(AIR_F32, x1, 1, &n1);
	int r;
	int64_t od[AIR_MAX_RANK];
	air_status st = AIR_OK;
	void *got = th_run_status(m, &sx, 1, &r, od, &st);
	CHECK(st == AIR_SHAPE_MISMATCH && got == NULL);
	free(got);
	air_model_destroy(m);

	/* x [s1] sliced [0 : s2] where s2 comes from another input: s2 > s1
	 * reads past x unless the run refuses */
	CHECK_OK(air_graph_create(&g));
	air_dim s1, s2;
	CHECK_OK(air_graph_symbol(g, NULL, &s1));
	CHECK_OK(air_graph_symbol(g, NULL, &s2));
	air_value zv;
	CHECK_OK(air_graph_add_input(g, "x", AIR_F32, 1, &s1, &xv));
	CHECK_OK(air_graph_add_input(g, "z", AIR_F32, 1, &s2, &zv));
	air_attr sb[3] = {th_int("axis", 0), th_int("start", 0), th_int("end", s2)};
	CHECK_OK(air_graph_add_node(g, "slice", &xv, 1, sb, 3, &yv, 1, &no));
	air_value outs[2] = {yv, zv};
	CHECK_OK(air_graph_set_outputs(g, outs, 2));
	CHECK_OK(air_compile(g, NULL, &m));
	air_graph_destroy(g);
	air_session *se = NULL;
	CHECK_OK(air_session_create(m, &se));
	float *xs = malloc(sizeof(float) * 4), zs[9] = {0}, ys[9], zo[9];
	int64_t four = 4, nine = 9, three = 3;
	CHECK_OK(air_session_set_input(se, 0, xs, 1, &four));
	CHECK_OK(air_session_set_input(se, 1, zs, 1, &nine));
	CHECK_OK(air_session_set_output(se, 0, ys, sizeof ys));
	CHECK_OK(air_session_set_output(se, 1, zo, sizeof zo));
	CHECK(air_session_run(se) == AIR_SHAPE_MISMATCH);
	for (int i = 0; i < 4; i++)
		xs[i] = (float)i;
	CHECK_OK(air_session_set_input(se, 1, zs, 1, &three));
	CHECK_OK(air_session_run(se));
	CHECK(ys[0] == 0 && ys[2] == 2);
	air_session_destroy(se);
	air_model_destroy(m);
	free(xs);
}

/* ---- cat ------------------------------------------------------------------ */

/* cat of k inputs of rank r along axis; in_dims[i] are the inputs' dims */
static void cat_case(air_dtype dt, int rank, int k, int64_t (*in_dims)[AIR_MAX_RANK], int axis)
{
	int ax = axis < 0 ? axis + rank : axis;
	size_t es = air_dtype_size(dt);
	int64_t od[AIR_MAX_RANK];
	memcpy(od, in_dims[0], sizeof od);
	od[ax] = 0;
	for (int i = 0; i < k; i++)
		od[ax] += in_dims[i][ax];
	int64_t no = numel_of(rank, od), os[AIR_MAX_RANK];
	strides_of(rank, od, os);
	uint8_t *want = malloc(es * (size_t)(no ? no : 1));
	th_arg args[TH_MAX_ARGS];
	void *data[TH_MAX_ARGS];
	int64_t offset = 0;
	for (int i = 0; i < k; i++) {
		int64_t n = numel_of(rank, in_dims[i]), xs[AIR_MAX_RANK];
		data[i] = random_data(dt, n);
		args[i] = th_make(dt, data[i], rank, in_dims[i]);
		strides_of(rank, in_dims[i], xs);
		for (int64_t e = 0; e < n; e++) {
			int64_t rem = e, dst = 0;
			for (int d = 0; d < rank; d++) {
				int64_t idx = rem / xs[d];
				rem %= xs[d];
				dst += (d == ax ? idx + offset : idx) * os[d];
			}
			memcpy(want + (size_t)dst * es, (const uint8_t *)data[i] + (size_t)e * es, es);
		}
		offset += in_dims[i][ax];
	}
	air_attr at = th_int("axis", axis);
	char label[64];
	snprintf(label, sizeof label, "cat %s of %d along %d", air_dtype_name(dt), k, axis);
	check_bytes(label, "cat", args, k, &at, 1, rank, od, want);
	for (int i = 0; i < k; i++)
		free(data[i]);
	free(want);
}

static void test_cat(void)
{
	for (int t = 0; t < N_TYPES; t++) {
		for (int axis = -3; axis < 3; axis++) {
			int ax = axis < 0 ? axis + 3 : axis;
			int64_t dims[3][AIR_MAX_RANK] = {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}};
			dims[1][ax] = 5;
			dims[2][ax] = 1;
			cat_case(TYPES[t], 3, 3, dims, axis);
			/* with an empty input in the middle */
			dims[1][ax] = 0;
			cat_case(TYPES[t], 3, 3, dims, axis);
		}
	}
	/* one input; all empty; rank 1; large; many inputs (the harness holds
	 * up to TH_MAX_ARGS) */
	int64_t one[1][AIR_MAX_RANK] = {{3, 4}};
	cat_case(AIR_F32, 2, 1, one, 1);
	int64_t empties[2][AIR_MAX_RANK] = {{0, 4}, {0, 4}};
	cat_case(AIR_F32, 2, 2, empties, 0);
	cat_case(AIR_F32, 2, 2, empties, 1);
	int64_t r1[3][AIR_MAX_RANK] = {{1}, {7}, {17}};
	cat_case(AIR_I64, 1, 3, r1, 0);
	int64_t big[2][AIR_MAX_RANK] = {{300, 511}, {300, 3}};
	cat_case(AIR_F32, 2, 2, big, 1);
	int64_t many[TH_MAX_ARGS][AIR_MAX_RANK];
	for (int i = 0; i < TH_MAX_ARGS; i++) {
		many[i][0] = 2;
		many[i][1] = i % 3;
	}
	cat_case(AIR_F16, 2, TH_MAX_ARGS, many, 1);

	/* the most inputs a node takes, through the graph API */
	{
		air_graph *g = NULL;
		CHECK_OK(air_graph_create(&g));
		enum { K = 64 };
		air_value in[K + 1], out;
		air_dim d[1] = {2};
		for (int i = 0; i <= K; i++)
			CHECK_OK(air_graph_add_input(g, NULL, AIR_I32, 1, d, &in[i]));
		air_attr at = th_int("axis", 0);
		int no;
		air_error_clear();
		CHECK(air_graph_add_node(g, "cat", in, K + 1, &at, 1, &out, 1, &no) == AIR_INVALID_ARGUMENT);
		CHECK_OK(air_graph_add_node(g, "cat", in, K, &at, 1, &out, 1, &no));
		CHECK_OK(air_graph_set_outputs(g, &out, 1));
		air_model *m = NULL;
		CHECK_OK(air_compile(g, NULL, &m));
		air_graph_destroy(g);
		air_session *s = NULL;
		CHECK_OK(air_session_create(m, &s));
		int32_t data[K][2], o[2 * K];
		for (int i = 0; i < K; i++) {
			data[i][0] = 2 * i;
			data[i][1] = 2 * i + 1;
			int64_t two = 2;
			CHECK_OK(air_session_set_input(s, i, data[i], 1, &two));
		}
		int64_t two = 2;
		CHECK_OK(air_session_set_input(s, K, data[0], 1, &two));
		CHECK_OK(air_session_set_output(s, 0, o, sizeof o));
		CHECK_OK(air_session_run(s));
		int bad = 0;
		for (int i = 0; i < 2 * K; i++)
			bad += o[i] != i;
		CHECK(bad == 0);
		air_session_destroy(s);
		air_model_destroy(m);
	}

	/* errors */
	float buf[64] = {0};
	int64_t a[2] = {2, 3}, b[2] = {2, 4}, c[3] = {2, 3, 1};
	th_arg ab[2] = {th_make(AIR_F32, buf, 2, a), th_make(AIR_F32, buf, 2, b)};
	air_attr at0 = th_int("axis", 0), at1 = th_int("axis", 1), at2 = th_int("axis", 2);
	expect_build("cat", ab, 2, &at0, 1, AIR_SHAPE_MISMATCH, "cat dims differ off the axis");
	expect_build("cat", ab, 2, &at2, 1, AIR_INVALID_ARGUMENT, "cat axis 2 of rank 2");
	th_arg ac[2] = {th_make(AIR_F32, buf, 2, a), th_make(AIR_F32, buf, 3, c)};
	expect_build("cat", ac, 2, &at1, 1, AIR_SHAPE_MISMATCH, "cat ranks differ");
	th_arg ad[2] = {th_make(AIR_F32, buf, 2, a), th_make(AIR_I32, buf, 2, a)};
	expect_build("cat", ad, 2, &at1, 1, AIR_DTYPE_MISMATCH, "cat dtypes differ");
	th_arg scalars[2] = {th_make(AIR_F32, buf, 0, NULL), th_make(AIR_F32, buf, 0, NULL)};
	expect_build("cat", scalars, 2, &at0, 1, AIR_INVALID_ARGUMENT, "cat of 0-d tensors");

	/* sizes that disagree only at run time: x [s1, 3] and y [s2, 3]
	 * along axis 1 need s1 == s2 */
	int64_t x3[2] = {4, 3}, y3[2] = {2, 3};
	float *xd = calloc(12, sizeof(float)), *yd = calloc(6, sizeof(float));
	th_arg xy[2] = {th_make(AIR_F32, xd, 2, x3), th_make(AIR_F32, yd, 2, y3)};
	xy[0].sym[0] = 1;
	xy[1].sym[0] = 2;
	expect_run("cat", xy, 2, &at1, 1, AIR_SHAPE_MISMATCH, "cat [s1,3] with [s2,3], s1 > s2");
	xy[0].dims[0] = 2;
	xy[1].dims[0] = 4;
	float *yd4 = calloc(12, sizeof(float));
	xy[1].data = yd4;
	expect_run("cat", xy, 2, &at1, 1, AIR_SHAPE_MISMATCH, "cat [s1,3] with [s2,3], s1 < s2");
	free(xd);
	free(yd);
	free(yd4);
}

/* ---- reshape and copy ----------------------------------------------------- */

static void test_reshape_copy(void)
{
	for (int t = 0; t < N_TYPES; t++) {
		air_dtype dt = TYPES[t];
		int64_t d[3] = {2, 3, 4};
		void *x = random_data(dt, 24);
		th_arg a = th_make(dt, x, 3, d);
		const int64_t shapes[][4] = {{4, 6}, {24}, {2, 12}, {1, 24, 1}, {2, 3, 4}, {3, 2, 2, 2}};
		const int ranks[] = {2, 1, 2, 3, 3, 4};
		for (int k = 0; k < 6; k++) {
			air_attr at = th_ints("shape", shapes[k], ranks[k]);
			char label[48];
			snprintf(label, sizeof label, "reshape %s #%d", air_dtype_name(dt), k);
			check_bytes(label, "reshape", &a, 1, &at, 1, ranks[k], shapes[k], x);
		}
		check_bytes("copy", "copy", &a, 1, NULL, 0, 3, d, x);
		/* of a constant */
		a.constant = 1;
		air_attr at = th_ints("shape", shapes[0], 2);
		check_bytes("reshape const", "reshape", &a, 1, &at, 1, 2, shapes[0], x);
		check_bytes("copy const", "copy", &a, 1, NULL, 0, 3, d, x);
		free(x);
	}
	/* 0-d <-> [1], empty */
	double v = 3.5;
	int64_t one[1] = {1};
	th_arg s = th_make(AIR_F64, &v, 0, NULL);
	air_attr to1 = th_ints("shape", one, 1);
	check_bytes("reshape 0-d -> [1]", "reshape", &s, 1, &to1, 1, 1, one, &v);
	th_arg s1 = th_make(AIR_F64, &v, 1, one);
	air_attr to0 = th_ints("shape", NULL, 0);
	check_bytes("reshape [1] -> 0-d", "reshape", &s1, 1, &to0, 1, 0, NULL, &v);
	check_bytes("copy 0-d", "copy", &s, 1, NULL, 0, 0, NULL, &v);
	int64_t e1[2] = {0, 3}, e2[3] = {3, 0, 5};
	th_arg e = th_make(AIR_F32, NULL, 2, e1);
	air_attr toe = th_ints("shape", e2, 3);
	check_bytes("reshape empty", "reshape", &e, 1, &toe, 1, 3, e2, NULL);
	check_bytes("copy empty", "copy", &e, 1, NULL, 0, 2, e1, NULL);

	float buf[24] = {0};
	int64_t d[2] = {4, 6}, bad[2] = {5, 5};
	th_arg x = th_make(AIR_F32, buf, 2, d);
	air_attr at = th_ints("shape", bad, 2);
	expect_build("reshape", &x, 1, &at, 1, AIR_SHAPE_MISMATCH, "reshape 24 -> 25");
	int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 4, 6};
	at = th_ints("shape", nine, 9);
	expect_build("reshape", &x, 1, &at, 1, AIR_UNSUPPORTED, "reshape to rank 9");
}

/* Reshape as an alias inside graphs: feeding another op, chained, as a graph
 * output, an output that is also read, of an input that is an output. */
static void test_reshape_alias(void)
{
	air_graph *g = NULL;
	CHECK_OK(air_graph_create(&g));
	air_dim xd[2] = {4, 6}, bd[1] = {3};
	air_value x, b;
	CHECK_OK(air_graph_add_input(g, "x", AIR_F32, 2, xd, &x));
	CHECK_OK(air_graph_add_input(g, "b", AIR_F32, 1, bd, &b));
	int no;
	air_value t, r1, r2, r3, u, w, r4;
	/* t = relu(x); r1 = reshape(t, [8, 3]); u = r1 + b (broadcast over the
	 * new shape); r2 = reshape(u, [24]) (an output); r3 = reshape(r2,
	 * [2, 12]); w = neg(r3) (an output); r4 = reshape(x, [6, 4]) (an output
	 * of an input) */
	CHECK_OK(air_graph_add_node(g, "relu", &x, 1, NULL, 0, &t, 1, &no));
	int64_t s1[2] = {8, 3}, s2[1] = {24}, s3[2] = {2, 12}, s4[2] = {6, 4};
	air_attr a1 = th_ints("shape", s1, 2), a2 = th_ints("shape", s2, 1), a3 = th_ints("shape", s3, 2),
		 a4 = th_ints("shape", s4, 2);
	CHECK_OK(air_graph_add_node(g, "reshape", &t, 1, &a1, 1, &r1, 1, &no));
	air_value ub[2] = {r1, b};
	CHECK_OK(air_graph_add_node(g, "add", ub, 2, NULL, 0, &u, 1, &no));
	CHECK_OK(air_graph_add_node(g, "reshape", &u, 1, &a2, 1, &r2, 1, &no));
	CHECK_OK(air_graph_add_node(g, "reshape", &r2, 1, &a3, 1, &r3, 1, &no));
	CHECK_OK(air_graph_add_node(g, "neg", &r3, 1, NULL, 0, &w, 1, &no));
	CHECK_OK(air_graph_add_node(g, "reshape", &x, 1, &a4, 1, &r4, 1, &no));
	air_value outs[4] = {r2, w, r4, r1};
	CHECK_OK(air_graph_set_outputs(g, outs, 3));
	for (int variant = 0; variant < 4; variant++) {
		/* variant 3 also outputs r1 (an alias that is then an output) */
		CHECK_OK(air_graph_set_outputs(g, outs, variant == 3 ? 4 : 3));
		uint32_t flags = variant == 1 ? AIR_COMPILE_NO_MEMORY_REUSE
				 : variant == 2 ? AIR_COMPILE_REFERENCE_KERNELS | AIR_COMPILE_NO_FUSION
						: 0;
		air_model *m = NULL;
		CHECK_OK(air_compile(g, &(air_compile_options){.size = sizeof(air_compile_options), .flags = flags}, &m));
		if (!m)
			continue;
		if (variant == 0)
			CHECK(strstr(air_model_report(m), "(alias)") != NULL);
		air_session *s = NULL;
		CHECK_OK(air_session_create(m, &s));
		float xv[24], bv[3] = {10, 20, 30}, o_r2[24], o_w[24], o_r4[24], o_r1[24];
		for (int i = 0; i < 24; i++)
			xv[i] = (float)(i % 5) - 2.0f;
		int64_t xs[2] = {4, 6}, bs[1] = {3};
		CHECK_OK(air_session_set_input(s, 0, xv, 2, xs));
		CHECK_OK(air_session_set_input(s, 1, bv, 1, bs));
		CHECK_OK(air_session_set_output(s, 0, o_r2, sizeof o_r2));
		CHECK_OK(air_session_set_output(s, 1, o_w, sizeof o_w));
		CHECK_OK(air_session_set_output(s, 2, o_r4, sizeof o_r4));
		if (variant == 3)
			CHECK_OK(air_session_set_output(s, 3, o_r1, sizeof o_r1));
		int rank;
		int64_t od[AIR_MAX_RANK];
		CHECK_OK(air_session_output_shape(s, 0, &rank, od));
		CHECK(rank == 1 && od[0] == 24);
		CHECK_OK(air_session_output_shape(s, 1, &rank, od));
		CHECK(rank == 2 && od[0] == 2 && od[1] == 12);
		for (int rep = 0; rep < 2; rep++) {
			CHECK_OK(air_session_run(s));
			int bad = 0;
			for (int i = 0; i < 24; i++) {
				float relu = xv[i] > 0 ? xv[i] : 0;
				float uu = relu + bv[i % 3];
				bad += o_r2[i] != uu;
				bad += o_w[i] != -uu;
				bad += o_r4[i] != xv[i];
				if (variant == 3)
					bad += o_r1[i] != relu;
			}
			CHECK(bad == 0);
			if (bad)
				fprintf(stderr, "  reshape alias variant %d: %d wrong\n", variant, bad);
			xv[7] = 100; /* the second run sees new input data */
		}
		air_session_destroy(s);
		air_model_destroy(m);
	}
	air_graph_destroy(g);

	/* symbolic reshape: x [s1, 4] -> [s1 * 4] -> relu, at two sizes */
	CHECK_OK(air_graph_create(&g));
	air_dim sa;
	CHECK_OK(air_graph_symbol(g, NULL, &sa));
	air_dim sxd[2] = {sa, 4}, flat;
	CHECK_OK(air_graph_dim_expr(g, AIR_DIM_MUL, sa, 4, &flat));
	CHECK_OK(air_graph_add_input(g, "x", AIR_F32, 2, sxd, &x));
	int64_t fs[1] = {flat};
	air_attr fa = th_ints("shape", fs, 1);
	CHECK_OK(air_graph_add_node(g, "reshape", &x, 1, &fa, 1, &r1, 1, &no));
	CHECK_OK(air_graph_add_node(g, "relu", &r1, 1, NULL, 0, &t, 1, &no));
	CHECK_OK(air_graph_set_outputs(g, &t, 1));
	air_model *m = NULL;
	CHECK_OK(air_compile(g, NULL, &m));
	air_graph_destroy(g);
	for (int64_t n = 1; n < 300; n = n * 5 + 2) {
		float *xv = malloc(sizeof(float) * (size_t)(4 * n));
		for (int64_t i = 0; i < 4 * n; i++)
			xv[i] = (float)(i % 7) - 3.0f;
		int64_t dims[2] = {n, 4};
		th_arg ax = th_make(AIR_F32, xv, 2, dims);
		int r;
		int64_t od[AIR_MAX_RANK];
		float *got = th_run(m, &ax, 1, &r, od);
		if (got) {
			CHECK(r == 1 && od[0] == 4 * n);
			int bad = 0;
			for (int64_t i = 0; i < 4 * n; i++)
				bad += got[i] != (xv[i] > 0 ? xv[i] : 0);
			CHECK(bad == 0);
		}
		free(got);
		free(xv);
	}
	air_model_destroy(m);

	/* x [s1] reshaped to [s2, 2] with s2 from another input: an alias with
	 * more elements than its input must be refused at run time */
	CHECK_OK(air_graph_create(&g));
	air_dim q1, q2;
	CHECK_OK(air_graph_symbol(g, NULL, &q1));
	CHECK_OK(air_graph_symbol(g, NULL, &q2));
	air_value y;
	CHECK_OK(air_graph_add_input(g, "x", AIR_F32, 1, &q1, &x));
	CHECK_OK(air_graph_add_input(g, "y", AIR_F32, 1, &q2, &y));
	int64_t rs[2] = {q2, 2};
	air_attr ra = th_ints("shape", rs, 2);
	CHECK_OK(air_graph_add_node(g, "reshape", &x, 1, &ra, 1, &r1, 1, &no));
	CHECK_OK(air_graph_add_node(g, "neg", &r1, 1, NULL, 0, &w, 1, &no));
	air_value o2[3] = {w, y, r1};
	for (int as_output = 0; as_output < 2; as_output++) {
		/* the reshape is an alias, or (as an output) a copy */
		CHECK_OK(air_graph_set_outputs(g, o2, as_output ? 3 : 2));
		CHECK_OK(air_compile(g, NULL, &m));
		air_session *s = NULL;
		CHECK_OK(air_session_create(m, &s));
		float *xs = calloc(4, sizeof(float)), ys[5] = {0}, wo[10], yo[5], r1o[10];
		int64_t four = 4, five = 5, two = 2;
		CHECK_OK(air_session_set_input(s, 0, xs, 1, &four));
		CHECK_OK(air_session_set_input(s, 1, ys, 1, &five));
		CHECK_OK(air_session_set_output(s, 0, wo, sizeof wo));
		CHECK_OK(air_session_set_output(s, 1, yo, sizeof yo));
		if (as_output)
			CHECK_OK(air_session_set_output(s, 2, r1o, sizeof r1o));
		air_error_clear();
		CHECK(air_session_run(s) == AIR_SHAPE_MISMATCH);
		CHECK(air_last_error()[0] != '\0');
		/* consistent sizes then run */
		xs[3] = 5;
		CHECK_OK(air_session_set_input(s, 1, ys, 1, &two));
		CHECK_OK(air_session_run(s));
		CHECK(wo[3] == -5 && wo[0] == 0);
		air_session_destroy(s);
		air_model_destroy(m);
		free(xs);
	}
	air_graph_destroy(g);
}

int main(void)
{
	test_permute();
	test_expand();
	test_slice();
	test_cat();
	test_reshape_copy();
	test_reshape_alias();
	return check_report("test_ops_shape");
}

/* test_ops_reduce.c - the reduction, softmax and norm ops through the public
 * API against values computed here in double, on awkward and empty shapes. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "op_harness.h"

/* Covered: every axis pattern, keepdim, NaN and -inf, integer wrap-around,
 * sizes big enough to run on several threads, symbolic dims run at two
 * sizes, and errors at build and run time. */

enum { R_SUM, R_MEAN, R_AMAX, R_AMIN, R_PROD };
static const char *const rname[] = {"sum", "mean", "amax", "amin", "prod"};

static int64_t numel_of(int rank, const int64_t *dims)
{
	int64_t n = 1;
	for (int d = 0; d < rank; d++)
		n *= dims[d];
	return n;
}

/* mask of the dims an axes list names (empty: all) */
static unsigned axes_mask(const int64_t *axes, int n, int rank)
{
	if (n == 0)
		return (1u << rank) - 1;
	unsigned m = 0;
	for (int k = 0; k < n && rank > 0; k++)
		m |= 1u << (axes[k] < 0 ? axes[k] + rank : axes[k]);
	return m;
}

/* The reduction in double, by walking every input element. */
static void ref_reduce(int op, const double *x, int rank, const int64_t *dims, unsigned mask, double *out,
		       double *mag, int64_t nout)
{
	int64_t count = 1;
	for (int d = 0; d < rank; d++)
		if (mask & (1u << d))
			count *= dims[d];
	for (int64_t o = 0; o < nout; o++) {
		out[o] = op == R_PROD ? 1.0 : op == R_AMAX ? -INFINITY : op == R_AMIN ? INFINITY : 0.0;
		mag[o] = 0;
	}
	int64_t n = numel_of(rank, dims);
	for (int64_t i = 0; i < n; i++) {
		int64_t q = i, o = 0, ostride = 1;
		for (int d = rank - 1; d >= 0; d--) {
			int64_t p = q % dims[d];
			q /= dims[d];
			if (!(mask & (1u << d))) {
				o += p * ostride;
				ostride *= dims[d];
			}
		}
		double v = x[i];
		switch (op) {
		case R_SUM:
		case R_MEAN: out[o] += v; break;
		case R_PROD: out[o] *= v; break;
		case R_AMAX: out[o] = (isnan(v) || isnan(out[o])) ? NAN : (v > out[o] ? v : out[o]); break;
		case R_AMIN: out[o] = (isnan(v) || isnan(out[o])) ? NAN : (v < out[o] ? v : out[o]); break;
		}
		mag[o] += fabs(v);
	}
	for (int64_t o = 0; o < nout; o++) {
		if (op == R_MEAN) {
			out[o] /= (double)count;
			mag[o] /= (double)count;
		}
		if (op == R_PROD)
			mag[o] = fabs(out[o]);
		if (op == R_AMAX || op == R_AMIN)
			mag[o] = 0;
	}
}

/* Checks a model's output shape. */
static void check_shape(const char *label, int rank, const int64_t *dims, int want_rank, const int64_t *want)
{
	int ok = rank == want_rank;
	for (int d = 0; ok && d < rank; d++)
		ok = dims[d] == want[d];
	CHECK(ok);
	if (!ok)
		fprintf(stderr, "%s: wrong output shape (rank %d, want %d)\n", label, rank, want_rank);
}

static void test_reduce_float(void)
{
	static const struct {
		int rank;
		int64_t dims[4];
	} shapes[] = {
		{0, {0}},        {1, {1}},           {1, {7}},        {2, {3, 5}},      {3, {2, 3, 4}},
		{4, {4, 1, 5, 3}}, {2, {13, 37}},    {2, {0, 3}},     {2, {3, 0}},      {3, {5, 1, 1}},
		{2, {64, 1000}},   {3, {300, 7, 50}}, {2, {1, 70001}},
	};
	static const struct {
		int n;
		int64_t axes[3];
	} axes[] = {{0, {0}}, {1, {0}}, {1, {-1}}, {2, {0, 2}}, {2, {1, 3}}, {2, {-1, 0}}, {3, {0, 1, 2}}, {1, {1}}};
	for (int dti = 0; dti < 2; dti++) {
		air_dtype dt = dti ? AIR_F64 : AIR_F32;
		for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
			int rank = shapes[si].rank;
			const int64_t *dims = shapes[si].dims;
			int64_t n = numel_of(rank, dims);
			double *xv = th_values(n, dt);
			void *x = th_as(xv, n, dt);
			th_arg arg = th_make(dt, x, rank, dims);
			for (size_t ai = 0; ai < sizeof axes / sizeof *axes; ai++) {
				bool ok = true;
				for (int k = 0; k < axes[ai].n; k++) {
					int64_t a = axes[ai].axes[k];
					ok = ok && (rank == 0 ? (a == 0 || a == -1) : (a >= -rank && a < rank));
				}
				/* a repeated axis after wrapping, e.g. {-1, 0} at rank 1 */
				if (ok && axes[ai].n == 2 && rank > 0) {
					int64_t a0 = axes[ai].axes[0], a1 = axes[ai].axes[1];
					ok = (a0 < 0 ? a0 + rank : a0) != (a1 < 0 ? a1 + rank : a1);
				}
				if (!ok || (rank == 0 && axes[ai].n > 1))
					continue;
				unsigned mask = axes_mask(axes[ai].axes, axes[ai].n, rank);
				int64_t count = 1, odims[4];
				for (int d = 0; d < rank; d++)
					if (mask & (1u << d))
						count *= dims[d];
				for (int keep = 0; keep < 2; keep++) {
					int orank = 0;
					for (int d = 0; d < rank; d++)
						if (!(mask & (1u << d)))
							odims[orank++] = dims[d];
						else if (keep)
							odims[orank++] = 1;
					int64_t nout = numel_of(orank, odims);
					double *want = malloc(sizeof(double) * (size_t)(nout + 1));
					double *mag = malloc(sizeof(double) * (size_t)(nout + 1));
					for (int op = 0; op < 5; op++) {
						/* amax/amin over nothing fail: tested below */
						if ((op == R_AMAX || op == R_AMIN) && count == 0)
							continue;
						ref_reduce(op, xv, rank, dims, mask, want, mag, nout);
						air_attr at[2] = {th_ints("axes", axes[ai].axes, axes[ai].n),
								  th_int("keepdim", keep)};
						char label[160];
						snprintf(label, sizeof label, "%s %s shape#%zu axes#%zu keep %d", rname[op],
							 air_dtype_name(dt), si, ai, keep);
						air_model *m = th_compile(rname[op], &arg, 1, at, 2, 0);
						if (!m)
							continue;
						int r;
						int64_t got[AIR_MAX_RANK];
						void *y = th_run(m, &arg, 1, &r, got);
						if (y) {
							check_shape(label, r, got, orank, odims);
							double tol = dt == AIR_F32 ? 2e-7 : 1e-13;
							/* long products land in f32's subnormals */
							double abs_tol = dt == AIR_F32 && op == R_PROD ? 1.2e-38 : 1e-300;
							th_compare(label, dt, y, want, mag, nout, tol, abs_tol);
						}
						free(y);
						air_model_destroy(m);
					}
					free(want);
					free(mag);
				}
			}
			free(x);
			free(xv);
		}
	}
}

/* f32 sums over leading dims run sum_columns (reduce_fast.c): a bias's
 * gradient [M, N] -> [N], [B, T, C] over B and T, tall ones (many row
 * blocks, so the double sums between blocks matter), columns that are not
 * whole strips, several row and column chunks; NaN and infinities in a
 * column. Other patterns (a kept dim
 * before a reduced one, under 16 columns) keep sum_ref. */
static void test_sum_columns(void)
{
	static const struct {
		int rank;
		int64_t dims[3];
		int n;
		int64_t axes[2];
		int fast;
	} cases[] = {
		{2, {394, 768}, 1, {0}, 1},    {3, {2, 197, 768}, 2, {0, 1}, 1}, {2, {1000, 17}, 1, {0}, 1},
		{2, {20000, 48}, 1, {-2}, 1},  {3, {1, 130, 33}, 1, {1}, 1},      {2, {70, 15}, 1, {0}, 0},
		{3, {5, 64, 24}, 1, {1}, 0},   {2, {64, 32}, 1, {1}, 0},
		/* several row chunks (partial sums in the workspace); columns past
		 * one chunk of 1024, with a short last one and 16-column tails */
		{2, {1576, 768}, 1, {0}, 1},   {2, {300, 2085}, 1, {0}, 1},     {3, {3, 50, 1100}, 2, {0, 1}, 1},
	};
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		const int rank = cases[c].rank;
		const int64_t *dims = cases[c].dims;
		int64_t n = numel_of(rank, dims);
		double *xv = th_values(n, AIR_F32);
		if (c == 2) { /* column 3: NaN; column 5: +inf; column 6: +inf and -inf */
			xv[17 * 10 + 3] = NAN;
			xv[17 * 20 + 5] = INFINITY;
			xv[17 * 30 + 6] = INFINITY;
			xv[17 * 40 + 6] = -INFINITY;
		}
		if (c == 3) /* a large offset: float sums of the whole column would lose the rest */
			for (int64_t i = 0; i < n; i++)
				xv[i] = (double)(float)(xv[i] + 1000.0);
		float *x = th_as(xv, n, AIR_F32);
		th_arg arg = th_make(AIR_F32, x, rank, dims);
		unsigned mask = axes_mask(cases[c].axes, cases[c].n, rank);
		for (int keep = 0; keep < 2; keep++) {
			air_attr at[2] = {th_ints("axes", cases[c].axes, cases[c].n), th_int("keepdim", keep)};
			air_model *m = th_compile("sum", &arg, 1, at, 2, 0);
			if (!m)
				continue;
			const char *want_kernel = cases[c].fast ? " sum_columns " : " sum_ref ";
			CHECK(strstr(air_model_report(m), want_kernel) != NULL);
			int r;
			int64_t got[AIR_MAX_RANK];
			float *y = th_run(m, &arg, 1, &r, got);
			int64_t nout = numel_of(r, got);
			double *want = malloc(sizeof(double) * (size_t)nout), *mag = malloc(sizeof(double) * (size_t)nout);
			ref_reduce(R_SUM, xv, rank, dims, mask, want, mag, nout);
			char label[96];
			snprintf(label, sizeof label, "sum_columns case %zu keep %d", c, keep);
			/* infinite sums exactly (th_compare's bound is inf there) */
			for (int64_t i = 0; y && i < nout; i++)
				if (isinf(want[i])) {
					CHECK(y[i] == want[i]);
					want[i] = 0, mag[i] = 0, y[i] = 0;
				}
			if (y)
				th_compare(label, AIR_F32, y, want, mag, nout, 2e-7, 0);
			free(y);
			free(want);
			free(mag);
			air_model_destroy(m);
		}
		free(x);
		free(xv);
	}
}

/* NaN propagates through sum and amax/amin; -inf and +inf in sums. */
/* Exact comparison of f32 results, where NaN matches NaN and inf inf. */
static void check_exact_f32(const char *label, const float *got, const double *want, int64_t n)
{
	for (int64_t i = 0; i < n; i++) {
		bool ok = isnan(want[i]) ? isnan(got[i]) : got[i] == want[i];
		CHECK(ok);
		if (!ok)
			fprintf(stderr, "%s: element %lld is %g, want %g\n", label, (long long)i, got[i], want[i]);
	}
}

static void test_reduce_nan(void)
{
	float x[6] = {1.0f, NAN, 3.0f, -2.0f, -INFINITY, 5.0f};
	int64_t dims[2] = {2, 3}, axes1[1] = {1};
	th_arg arg = th_make(AIR_F32, x, 2, dims);
	air_attr at[1] = {th_ints("axes", axes1, 1)};
	const char *ops[4] = {"sum", "amax", "amin", "mean"};
	double want[4][2] = {{NAN, -INFINITY}, {NAN, 5.0}, {NAN, -INFINITY}, {NAN, -INFINITY}};
	for (int k = 0; k < 4; k++) {
		air_model *m = th_compile(ops[k], &arg, 1, at, 1, 0);
		if (!m)
			continue;
		int r;
		int64_t got[AIR_MAX_RANK];
		float *y = th_run(m, &arg, 1, &r, got);
		if (y)
			check_exact_f32(ops[k], y, want[k], 2);
		free(y);
		air_model_destroy(m);
	}
}

/* Integer reductions wrap like torch's; bool amax/amin are any/all. */
static void test_reduce_int(void)
{
	int8_t x8[4] = {100, 100, -7, 3};
	int64_t d22[2] = {2, 2}, ax1[1] = {1};
	th_arg a8 = th_make(AIR_I8, x8, 2, d22);
	air_attr at[1] = {th_ints("axes", ax1, 1)};
	struct {
		const char *op;
		int8_t want[2];
	} cases8[] = {{"sum", {-56, -4}}, {"prod", {16, -21}}, {"amax", {100, 3}}, {"amin", {100, -7}}};
	for (int k = 0; k < 4; k++) {
		air_model *m = th_compile(cases8[k].op, &a8, 1, at, 1, 0);
		if (!m)
			continue;
		int r;
		int64_t got[AIR_MAX_RANK];
		int8_t *y = th_run(m, &a8, 1, &r, got);
		if (y) {
			CHECK(y[0] == cases8[k].want[0] && y[1] == cases8[k].want[1]);
			if (y[0] != cases8[k].want[0] || y[1] != cases8[k].want[1])
				fprintf(stderr, "%s i8: got %d %d\n", cases8[k].op, y[0], y[1]);
		}
		free(y);
		air_model_destroy(m);
	}
	/* i64 / i32 / u8 over a prime length, against sums in int64 */
	enum { N = 1009 };
	int64_t x64[N];
	int32_t x32[N];
	uint8_t xu8[N];
	int64_t s64 = 0, mx = INT64_MIN, mn = INT64_MAX;
	int32_t s32 = 0;
	uint8_t su8 = 0, mxu = 0;
	for (int i = 0; i < N; i++) {
		x64[i] = (int64_t)(th_rand() * 4e15);
		x32[i] = (int32_t)(th_rand() * 2e9);
		xu8[i] = (uint8_t)(i * 37 + 11);
		s64 += x64[i];
		s32 = (int32_t)((uint32_t)s32 + (uint32_t)x32[i]);
		su8 = (uint8_t)(su8 + xu8[i]);
		mx = x64[i] > mx ? x64[i] : mx;
		mn = x64[i] < mn ? x64[i] : mn;
		mxu = xu8[i] > mxu ? xu8[i] : mxu;
	}
	int64_t dn[1] = {N};
	struct {
		const char *op;
		air_dtype dt;
		const void *x;
		int64_t want;
	} cases[] = {
		{"sum", AIR_I64, x64, s64}, {"amax", AIR_I64, x64, mx},  {"amin", AIR_I64, x64, mn},
		{"sum", AIR_I32, x32, s32}, {"sum", AIR_U8, xu8, su8},   {"amax", AIR_U8, xu8, mxu},
	};
	for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
		th_arg a = th_make(cases[k].dt, cases[k].x, 1, dn);
		air_model *m = th_compile(cases[k].op, &a, 1, NULL, 0, 0);
		if (!m)
			continue;
		int r;
		int64_t got[AIR_MAX_RANK];
		void *y = th_run(m, &a, 1, &r, got);
		if (y) {
			CHECK(r == 0);
			int64_t v = cases[k].dt == AIR_I64 ? *(int64_t *)y
				    : cases[k].dt == AIR_I32 ? *(int32_t *)y
							      : *(uint8_t *)y;
			CHECK(v == cases[k].want);
			if (v != cases[k].want)
				fprintf(stderr, "%s %s: got %lld want %lld\n", cases[k].op, air_dtype_name(cases[k].dt),
					(long long)v, (long long)cases[k].want);
		}
		free(y);
		air_model_destroy(m);
	}
	/* bool: any / all per row */
	uint8_t b[6] = {0, 1, 0, 1, 1, 1};
	int64_t d23[2] = {2, 3};
	th_arg ab = th_make(AIR_BOOL, b, 2, d23);
	const char *bops[2] = {"amax", "amin"};
	uint8_t bwant[2][2] = {{1, 1}, {0, 1}};
	for (int k = 0; k < 2; k++) {
		air_model *m = th_compile(bops[k], &ab, 1, at, 1, 0);
		if (!m)
			continue;
		int r;
		int64_t got[AIR_MAX_RANK];
		uint8_t *y = th_run(m, &ab, 1, &r, got);
		if (y)
			CHECK(y[0] == bwant[k][0] && y[1] == bwant[k][1]);
		free(y);
		air_model_destroy(m);
	}
}

/* Empty reductions: sum 0, prod 1, mean NaN; amax/amin fail at run time. */
static void test_reduce_empty(void)
{
	float dummy = 0;
	int64_t dims[2] = {0, 3}, ax0[1] = {0};
	th_arg arg = th_make(AIR_F32, &dummy, 2, dims);
	air_attr at[1] = {th_ints("axes", ax0, 1)};
	const char *ops[3] = {"sum", "prod", "mean"};
	double want[3] = {0.0, 1.0, NAN};
	for (int k = 0; k < 3; k++) {
		air_model *m = th_compile(ops[k], &arg, 1, at, 1, 0);
		if (!m)
			continue;
		int r;
		int64_t got[AIR_MAX_RANK];
		float *y = th_run(m, &arg, 1, &r, got);
		if (y) {
			CHECK(r == 1 && got[0] == 3);
			double w[3] = {want[k], want[k], want[k]};
			check_exact_f32(ops[k], y, w, 3);
		}
		free(y);
		air_model_destroy(m);
	}
	for (int k = 0; k < 2; k++) {
		const char *op = k ? "amin" : "amax";
		air_model *m = th_compile(op, &arg, 1, at, 1, 0);
		if (!m)
			continue;
		int r;
		int64_t got[AIR_MAX_RANK];
		air_status st;
		void *y = th_run_status(m, &arg, 1, &r, got, &st);
		CHECK(y == NULL && st == AIR_INVALID_ARGUMENT);
		CHECK(strstr(air_last_error(), "size 0") != NULL);
		free(y);
		air_model_destroy(m);
	}
}

/* x: [s, 6] with s symbolic; sum over 1 with keepdim gives [s, 1], mean
 * over 0 gives [6]; both run at s = 3 and s = 17. */
static void test_reduce_symbolic(void)
{
	for (int k = 0; k < 2; k++) {
		const char *op = k ? "mean" : "sum";
		air_graph *g;
		CHECK_OK(air_graph_create(&g));
		air_dim s, dims[2], got[AIR_MAX_RANK];
		CHECK_OK(air_graph_symbol(g, "s", &s));
		dims[0] = s;
		dims[1] = 6;
		air_value x, y;
		CHECK_OK(air_graph_add_input(g, "x", AIR_F32, 2, dims, &x));
		int64_t axes[1] = {k ? 0 : 1};
		air_attr at[2] = {th_ints("axes", axes, 1), th_int("keepdim", k ? 0 : 1)};
		int n;
		CHECK_OK(air_graph_add_node(g, op, &x, 1, at, 2, &y, 1, &n));
		air_dtype dt;
		int rank;
		CHECK_OK(air_graph_value_info(g, y, &dt, &rank, got));
		if (k)
			CHECK(dt == AIR_F32 && rank == 1 && got[0] == 6);
		else
			CHECK(dt == AIR_F32 && rank == 2 && got[0] == s && got[1] == 1);
		CHECK_OK(air_graph_set_outputs(g, &y, 1));
		air_model *m;
		CHECK_OK(air_compile(g, NULL, &m));
		air_graph_destroy(g);
		for (int run = 0; run < 2; run++) {
			int64_t rows = run ? 17 : 3, cd[2] = {rows, 6};
			double *xv = th_values(rows * 6, AIR_F32);
			float *xf = th_as(xv, rows * 6, AIR_F32);
			th_arg a = th_make(AIR_F32, xf, 2, cd);
			int r;
			int64_t od[AIR_MAX_RANK];
			float *out = th_run(m, &a, 1, &r, od);
			unsigned mask = k ? 1u : 2u;
			int64_t nout = k ? 6 : rows;
			double want[17], mag[17];
			ref_reduce(k ? R_MEAN : R_SUM, xv, 2, cd, mask, want, mag, nout);
			if (out) {
				CHECK(r == (k ? 1 : 2) && od[0] == (k ? 6 : rows));
				th_compare(op, AIR_F32, out, want, mag, nout, 2e-7, 0);
			}
			free(out);
			free(xf);
			free(xv);
		}
		air_model_destroy(m);
	}
}

static void test_reduce_errors(void)
{
	float x[6] = {0};
	int64_t dims[2] = {2, 3};
	th_arg a = th_make(AIR_F32, x, 2, dims);
	int64_t bad_axis[1] = {2}, dup[2] = {1, -1};
	air_attr at[2];
	at[0] = th_ints("axes", bad_axis, 1);
	th_expect_build_error("sum", &a, 1, at, 1, AIR_INVALID_ARGUMENT, "sum axis out of range");
	at[0] = th_ints("axes", dup, 2);
	th_expect_build_error("amax", &a, 1, at, 1, AIR_INVALID_ARGUMENT, "amax repeated axis");
	at[0] = th_int("keepdim", 2);
	th_expect_build_error("prod", &a, 1, at, 1, AIR_INVALID_ARGUMENT, "prod keepdim 2");
	at[0] = th_float("axes", 1.0);
	th_expect_build_error("sum", &a, 1, at, 1, AIR_INVALID_ARGUMENT, "sum axes not a list");
	th_arg ai = th_make(AIR_I32, x, 2, dims);
	th_expect_build_error("mean", &ai, 1, NULL, 0, AIR_UNSUPPORTED, "mean of i32");
	th_arg ab = th_make(AIR_BOOL, x, 2, dims);
	th_expect_build_error("sum", &ab, 1, NULL, 0, AIR_UNSUPPORTED, "sum of bool");
	th_arg ah = th_make(AIR_F16, x, 2, dims);
	th_expect_build_error("amax", &ah, 1, NULL, 0, AIR_UNSUPPORTED, "amax of f16");
	th_expect_build_error("argmax", &a, 1, NULL, 0, AIR_INVALID_ARGUMENT, "argmax without axis");
	at[0] = th_int("axis", -3);
	th_expect_build_error("argmax", &a, 1, at, 1, AIR_INVALID_ARGUMENT, "argmax axis out of range");
	th_expect_build_error("argmax", &ab, 1, at, 0, AIR_INVALID_ARGUMENT, "argmax of bool, no axis");
	at[0] = th_int("axis", 0);
	th_expect_build_error("argmax", &ab, 1, at, 1, AIR_UNSUPPORTED, "argmax of bool");
	at[0] = th_int("axis", 2);
	th_expect_build_error("cumsum", &a, 1, at, 1, AIR_INVALID_ARGUMENT, "cumsum axis out of range");
	at[0] = th_int("axis", 0);
	th_expect_build_error("cumsum", &ab, 1, at, 1, AIR_UNSUPPORTED, "cumsum of bool");
	th_expect_build_error("softmax", &ai, 1, at, 1, AIR_UNSUPPORTED, "softmax of i32");
	at[0] = th_int("axis", 5);
	th_expect_build_error("log_softmax", &a, 1, at, 1, AIR_INVALID_ARGUMENT, "log_softmax axis out of range");
}

/* ---- argmax, cumsum ----------------------------------------------------- */

static void split3(int rank, const int64_t *dims, int axis, int64_t *outer, int64_t *len, int64_t *inner)
{
	*outer = *inner = 1;
	*len = rank ? dims[axis] : 1;
	for (int d = 0; d < axis; d++)
		*outer *= dims[d];
	for (int d = axis + 1; d < rank; d++)
		*inner *= dims[d];
}

static void test_argmax(void)
{
	static const struct {
		int rank;
		int64_t dims[3];
		int axis;
	} cases[] = {
		{0, {0}, 0},        {1, {7}, 0},       {2, {3, 5}, 0},     {2, {3, 5}, 1},   {2, {3, 5}, -1},
		{3, {2, 3, 4}, 1},  {3, {2, 1, 4}, 1}, {2, {0, 4}, 1},     {2, {400, 300}, 0}, {2, {300, 401}, 1},
	};
	for (int dti = 0; dti < 3; dti++) {
		air_dtype dt = dti == 0 ? AIR_F32 : dti == 1 ? AIR_F64 : AIR_I32;
		for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
			int rank = cases[ci].rank;
			const int64_t *dims = cases[ci].dims;
			int axis = rank ? (cases[ci].axis < 0 ? cases[ci].axis + rank : cases[ci].axis) : 0;
			int64_t n = numel_of(rank, dims), outer, len, inner;
			split3(rank, dims, axis, &outer, &len, &inner);
			/* few distinct values so that ties happen */
			double *xv = malloc(sizeof(double) * (size_t)(n + 1));
			for (int64_t i = 0; i < n; i++)
				xv[i] = floor(th_rand() * 4);
			void *x;
			if (dt == AIR_I32) {
				int32_t *p = malloc(sizeof(int32_t) * (size_t)(n + 1));
				for (int64_t i = 0; i < n; i++)
					p[i] = (int32_t)xv[i];
				x = p;
			} else {
				x = th_as(xv, n, dt);
			}
			th_arg a = th_make(dt, x, rank, dims);
			for (int keep = 0; keep < 2; keep++) {
				air_attr at[2] = {th_int("axis", cases[ci].axis), th_int("keepdim", keep)};
				air_model *m = th_compile("argmax", &a, 1, at, 2, 0);
				if (!m)
					continue;
				int r;
				int64_t got[AIR_MAX_RANK];
				int64_t *y = th_run(m, &a, 1, &r, got);
				if (y) {
					CHECK(r == (keep || rank == 0 ? rank : rank - 1));
					if (keep && rank)
						CHECK(got[axis] == 1);
					int bad = 0;
					for (int64_t o = 0; o < outer; o++)
						for (int64_t i = 0; i < inner; i++) {
							int64_t best = 0;
							for (int64_t k = 1; k < len; k++)
								if (xv[(o * len + k) * inner + i] > xv[(o * len + best) * inner + i])
									best = k;
							bad += y[o * inner + i] != best;
						}
					CHECK(bad == 0);
					if (bad)
						fprintf(stderr, "argmax %s case %zu: %d wrong\n", air_dtype_name(dt), ci, bad);
				}
				free(y);
				air_model_destroy(m);
			}
			free(x);
			free(xv);
		}
	}
	/* NaN is the maximum, the first NaN wins */
	float xn[5] = {1.0f, NAN, 7.0f, NAN, INFINITY};
	int64_t d5[1] = {5};
	th_arg a = th_make(AIR_F32, xn, 1, d5);
	air_attr at[1] = {th_int("axis", 0)};
	air_model *m = th_compile("argmax", &a, 1, at, 1, 0);
	if (m) {
		int r;
		int64_t got[AIR_MAX_RANK];
		int64_t *y = th_run(m, &a, 1, &r, got);
		if (y)
			CHECK(r == 0 && y[0] == 1);
		free(y);
		air_model_destroy(m);
	}
	/* an empty reduced dim fails at run time, like torch */
	float dummy = 0;
	int64_t d30[2] = {3, 0};
	th_arg ae = th_make(AIR_F32, &dummy, 2, d30);
	at[0] = th_int("axis", 1);
	m = th_compile("argmax", &ae, 1, at, 1, 0);
	if (m) {
		int r;
		int64_t got[AIR_MAX_RANK];
		air_status st;
		void *y = th_run_status(m, &ae, 1, &r, got, &st);
		CHECK(y == NULL && st == AIR_INVALID_ARGUMENT);
		free(y);
		air_model_destroy(m);
	}
}

static void test_cumsum(void)
{
	static const struct {
		int rank;
		int64_t dims[3];
		int axis;
	} cases[] = {
		{0, {0}, 0},       {1, {1}, 0},       {1, {13}, 0},        {2, {3, 5}, 0},     {2, {3, 5}, -1},
		{3, {2, 300, 3}, 1}, {3, {2, 0, 3}, 1}, {2, {70, 1001}, 1}, {2, {1001, 70}, 0}, {3, {4, 5, 600}, 1},
	};
	for (int dti = 0; dti < 4; dti++) {
		air_dtype dt = (air_dtype[]){AIR_F32, AIR_F64, AIR_I64, AIR_I32}[dti];
		for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
			int rank = cases[ci].rank;
			const int64_t *dims = cases[ci].dims;
			int axis = rank ? (cases[ci].axis < 0 ? cases[ci].axis + rank : cases[ci].axis) : 0;
			int64_t n = numel_of(rank, dims), outer, len, inner;
			split3(rank, dims, axis, &outer, &len, &inner);
			double *xv = th_values(n, dt == AIR_F64 ? AIR_F64 : AIR_F32);
			void *x;
			if (dt == AIR_I64 || dt == AIR_I32) {
				x = malloc(8 * (size_t)(n + 1));
				for (int64_t i = 0; i < n; i++) {
					xv[i] = floor(xv[i] * 1000);
					if (dt == AIR_I64)
						((int64_t *)x)[i] = (int64_t)xv[i];
					else
						((int32_t *)x)[i] = (int32_t)xv[i];
				}
			} else {
				x = th_as(xv, n, dt);
			}
			double *want = malloc(sizeof(double) * (size_t)(n + 1));
			double *mag = malloc(sizeof(double) * (size_t)(n + 1));
			for (int64_t o = 0; o < outer; o++)
				for (int64_t i = 0; i < inner; i++) {
					double s = 0, m = 0;
					for (int64_t k = 0; k < len; k++) {
						int64_t p = (o * len + k) * inner + i;
						s += xv[p];
						m += fabs(xv[p]);
						want[p] = s;
						mag[p] = m;
					}
				}
			th_arg a = th_make(dt, x, rank, dims);
			air_attr at[1] = {th_int("axis", cases[ci].axis)};
			air_model *m = th_compile("cumsum", &a, 1, at, 1, 0);
			if (m) {
				int r;
				int64_t got[AIR_MAX_RANK];
				void *y = th_run(m, &a, 1, &r, got);
				if (y) {
					char label[64];
					snprintf(label, sizeof label, "cumsum %s case %zu", air_dtype_name(dt), ci);
					check_shape(label, r, got, rank, dims);
					if (dt == AIR_F32 || dt == AIR_F64) {
						th_compare(label, dt, y, want, mag, n, dt == AIR_F32 ? 2e-7 : 1e-13, 0);
					} else {
						int bad = 0;
						for (int64_t i = 0; i < n; i++)
							bad += (dt == AIR_I64 ? (double)((int64_t *)y)[i]
									      : (double)((int32_t *)y)[i]) != want[i];
						CHECK(bad == 0);
					}
				}
				free(y);
				air_model_destroy(m);
			}
			free(want);
			free(mag);
			free(x);
			free(xv);
		}
	}
	/* NaN propagates forward only */
	float xn[4] = {1.0f, NAN, 2.0f, 3.0f};
	int64_t d22[2] = {2, 2};
	th_arg a = th_make(AIR_F32, xn, 2, d22);
	air_attr at[1] = {th_int("axis", 1)};
	air_model *m = th_compile("cumsum", &a, 1, at, 1, 0);
	if (m) {
		int r;
		int64_t got[AIR_MAX_RANK];
		float *y = th_run(m, &a, 1, &r, got);
		double want[4] = {1.0, NAN, 2.0, 5.0};
		if (y)
			check_exact_f32("cumsum NaN", y, want, 4);
		free(y);
		air_model_destroy(m);
	}
}

/* ---- softmax, log_softmax ------------------------------------------------ */

static void ref_softmax(const double *x, int rank, const int64_t *dims, int axis, bool log_, double *want)
{
	int64_t outer, len, inner;
	split3(rank, dims, axis, &outer, &len, &inner);
	for (int64_t o = 0; o < outer; o++)
		for (int64_t i = 0; i < inner; i++) {
			double mx = -INFINITY, s = 0;
			int nan = 0;
			for (int64_t k = 0; k < len; k++) {
				double v = x[(o * len + k) * inner + i];
				nan |= isnan(v);
				mx = v > mx ? v : mx;
			}
			for (int64_t k = 0; k < len; k++)
				s += exp(x[(o * len + k) * inner + i] - mx);
			for (int64_t k = 0; k < len; k++) {
				int64_t p = (o * len + k) * inner + i;
				double d = x[p] - mx;
				want[p] = nan || isnan(d) ? NAN : log_ ? d - log(s) : exp(d) / s;
			}
		}
}

static void test_softmax(void)
{
	static const struct {
		int rank;
		int64_t dims[3];
		int axis;
	} cases[] = {
		{0, {0}, 0},      {1, {1}, 0},       {1, {7}, 0},       {2, {3, 5}, -1},     {2, {3, 5}, 0},
		{3, {2, 3, 4}, 1}, {3, {2, 0, 4}, 1}, {2, {40, 1000}, 1}, {3, {3, 37, 300}, 1}, {2, {2, 1}, 1},
	};
	for (int dti = 0; dti < 2; dti++) {
		air_dtype dt = dti ? AIR_F64 : AIR_F32;
		for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
			int rank = cases[ci].rank;
			const int64_t *dims = cases[ci].dims;
			int axis = rank ? (cases[ci].axis < 0 ? cases[ci].axis + rank : cases[ci].axis) : 0;
			int64_t n = numel_of(rank, dims);
			double *xv = th_values(n, dt);
			/* big values: only a max-subtracting softmax survives */
			for (int64_t i = 0; i < n; i++)
				xv[i] = dt == AIR_F32 ? (double)(float)(xv[i] * 30 + 80) : xv[i] * 30 + 700;
			void *x = th_as(xv, n, dt);
			double *want = malloc(sizeof(double) * (size_t)(n + 1));
			th_arg a = th_make(dt, x, rank, dims);
			air_attr at[1] = {th_int("axis", cases[ci].axis)};
			for (int lg = 0; lg < 2; lg++) {
				ref_softmax(xv, rank, dims, axis, lg, want);
				const char *op = lg ? "log_softmax" : "softmax";
				air_model *m = th_compile(op, &a, 1, at, 1, 0);
				if (!m)
					continue;
				int r;
				int64_t got[AIR_MAX_RANK];
				void *y = th_run(m, &a, 1, &r, got);
				if (y) {
					char label[64];
					snprintf(label, sizeof label, "%s %s case %zu", op, air_dtype_name(dt), ci);
					check_shape(label, r, got, rank, dims);
					/* log_softmax: |x - max| reaches ~60, relative error is about the input's */
					double tol = dt == AIR_F32 ? (lg ? 4e-6 : 2e-6) : 1e-12;
					th_compare(label, dt, y, want, NULL, n, tol, dt == AIR_F32 ? 1e-6 : 1e-13);
				}
				free(y);
				air_model_destroy(m);
			}
			free(want);
			free(x);
			free(xv);
		}
	}
	/* a row of -inf gives NaN, a row with NaN gives NaN, a row with one
	 * -inf gives 0 / -inf there */
	float x[9] = {-INFINITY, -INFINITY, -INFINITY, 1.0f, NAN, 2.0f, 0.0f, -INFINITY, 0.0f};
	int64_t d33[2] = {3, 3};
	th_arg a = th_make(AIR_F32, x, 2, d33);
	air_attr at[1] = {th_int("axis", 1)};
	double want[2][9] = {{NAN, NAN, NAN, NAN, NAN, NAN, 0.5, 0.0, 0.5},
			     {NAN, NAN, NAN, NAN, NAN, NAN, -0.69314718055994530942, -INFINITY, -0.69314718055994530942}};
	for (int lg = 0; lg < 2; lg++) {
		const char *op = lg ? "log_softmax" : "softmax";
		air_model *m = th_compile(op, &a, 1, at, 1, 0);
		if (!m)
			continue;
		int r;
		int64_t got[AIR_MAX_RANK];
		float *y = th_run(m, &a, 1, &r, got);
		if (y) {
			for (int i = 0; i < 9; i++) {
				bool ok = isnan(want[lg][i]) ? isnan(y[i])
					  : isinf(want[lg][i]) ? y[i] == want[lg][i]
							       : fabs(y[i] - want[lg][i]) < 1e-6;
				CHECK(ok);
				if (!ok)
					fprintf(stderr, "%s special %d: got %g want %g\n", op, i, y[i], want[lg][i]);
			}
		}
		free(y);
		air_model_destroy(m);
	}
}

/* ---- layer_norm, rms_norm ------------------------------------------------ */

/* Builds x (symbolic first dim if sym), optional w and b as inputs, runs
 * the norm and returns its outputs (3 for layer_norm, 1 for rms_norm). */
typedef struct {
	void *out[3];
	int rank[3];
	int64_t dims[3][AIR_MAX_RANK];
} norm_result;

static air_status run_norm(const char *op, air_dtype dt, int rank, const int64_t *dims, bool sym, int nd,
			   const void *x, const void *w, const void *b, const air_attr *at, int na, norm_result *res,
			   int *stage)
{
	memset(res, 0, sizeof *res);
	*stage = 0;
	air_graph *g;
	air_status st = air_graph_create(&g);
	if (st != AIR_OK)
		return st;
	air_dim gd[AIR_MAX_RANK];
	for (int d = 0; d < rank; d++)
		gd[d] = dims[d];
	if (sym)
		air_graph_symbol(g, "s", &gd[0]);
	air_value in[3], out[3];
	int n_in = 0, n_out = 0;
	const void *data[3];
	int64_t wdims[AIR_MAX_RANK];
	for (int d = 0; d < nd; d++)
		wdims[d] = dims[rank - nd + d];
	st = air_graph_add_input(g, "x", dt, rank, gd, &in[n_in]);
	data[n_in++] = x;
	if (st == AIR_OK && w) {
		st = air_graph_add_input(g, "w", dt, nd, wdims, &in[n_in]);
		data[n_in++] = w;
	}
	if (st == AIR_OK && b) {
		st = air_graph_add_input(g, "b", dt, nd, wdims, &in[n_in]);
		data[n_in++] = b;
	}
	if (st == AIR_OK)
		st = air_graph_add_node(g, op, in, n_in, at, na, out, 3, &n_out);
	if (st == AIR_OK)
		st = air_graph_set_outputs(g, out, n_out);
	air_model *m = NULL;
	if (st == AIR_OK) {
		*stage = 1;
		st = air_compile(g, NULL, &m);
	}
	air_graph_destroy(g);
	if (st != AIR_OK)
		return st;
	*stage = 2;
	air_session *s = NULL;
	st = air_session_create(m, &s);
	for (int i = 0; i < n_in && st == AIR_OK; i++)
		st = air_session_set_input(s, i, data[i], i ? nd : rank, i ? wdims : dims);
	for (int o = 0; o < n_out && st == AIR_OK; o++) {
		st = air_session_output_shape(s, o, &res->rank[o], res->dims[o]);
		size_t bytes = air_dtype_size(dt) * (size_t)numel_of(res->rank[o], res->dims[o]);
		res->out[o] = malloc(bytes + 8);
		memset(res->out[o], 0x7f, bytes);
		if (st == AIR_OK)
			st = air_session_set_output(s, o, res->out[o], bytes);
	}
	if (st == AIR_OK)
		st = air_session_run(s);
	air_session_destroy(s);
	air_model_destroy(m);
	return st;
}

static void free_norm(norm_result *r)
{
	for (int o = 0; o < 3; o++)
		free(r->out[o]);
}

static void test_layer_norm(void)
{
	static const struct {
		int rank;
		int64_t dims[4];
		int nd;
	} cases[] = {
		{1, {7}, 1},        {2, {3, 5}, 1},       {3, {2, 3, 5}, 2},  {3, {2, 3, 1}, 1},
		{2, {0, 4}, 1},     {2, {3, 0}, 1},       {2, {200, 769}, 1}, {4, {2, 3, 4, 5}, 3},
	};
	for (int dti = 0; dti < 2; dti++) {
		air_dtype dt = dti ? AIR_F64 : AIR_F32;
		for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
			int rank = cases[ci].rank, nd = cases[ci].nd;
			const int64_t *dims = cases[ci].dims;
			int64_t n = numel_of(rank, dims), N = numel_of(nd, dims + rank - nd);
			int64_t M = numel_of(rank - nd, dims);
			double *xv = th_values(n, dt), *wv = th_values(N, dt), *bv = th_values(N, dt);
			for (int64_t i = 0; i < n; i++)
				xv[i] = dt == AIR_F32 ? (double)(float)(xv[i] * 3 + 5) : xv[i] * 3 + 5;
			void *x = th_as(xv, n, dt), *w = th_as(wv, N, dt), *b = th_as(bv, N, dt);
			double *want = malloc(sizeof(double) * (size_t)(n + 1));
			double *wmean = malloc(sizeof(double) * (size_t)(M + 1));
			double *wrstd = malloc(sizeof(double) * (size_t)(M + 1));
			for (int flags = 0; flags < 4; flags++) {
				int hw = flags & 1, hb = (flags >> 1) & 1;
				double eps = 1e-5;
				for (int64_t r = 0; r < M; r++) {
					double s = 0, q = 0;
					for (int64_t i = 0; i < N; i++)
						s += xv[r * N + i];
					double mean = N ? s / N : 0;
					for (int64_t i = 0; i < N; i++)
						q += (xv[r * N + i] - mean) * (xv[r * N + i] - mean);
					double rstd = N ? 1 / sqrt(q / N + eps) : NAN;
					wmean[r] = mean;
					wrstd[r] = rstd;
					for (int64_t i = 0; i < N; i++)
						want[r * N + i] = (xv[r * N + i] - mean) * rstd * (hw ? wv[i] : 1) +
								  (hb ? bv[i] : 0);
				}
				air_attr at[4] = {th_int("normalized_ndim", nd), th_float("eps", eps),
						  th_int("has_weight", hw), th_int("has_bias", hb)};
				norm_result res;
				int stage;
				air_status st = run_norm("layer_norm", dt, rank, dims, false, nd, x, hw ? w : NULL,
							 hb ? b : NULL, at, 4, &res, &stage);
				CHECK_OK(st);
				if (st == AIR_OK) {
					char label[80];
					snprintf(label, sizeof label, "layer_norm %s case %zu flags %d", air_dtype_name(dt),
						 ci, flags);
					check_shape(label, res.rank[0], res.dims[0], rank, dims);
					int64_t sd[4];
					for (int d = 0; d < rank; d++)
						sd[d] = d < rank - nd ? dims[d] : 1;
					check_shape(label, res.rank[1], res.dims[1], rank, sd);
					check_shape(label, res.rank[2], res.dims[2], rank, sd);
					double tol = dt == AIR_F32 ? 2e-6 : 1e-12;
					th_compare(label, dt, res.out[0], want, NULL, n, tol, tol);
					th_compare(label, dt, res.out[1], wmean, NULL, M, tol, tol);
					th_compare(label, dt, res.out[2], wrstd, NULL, M, tol, tol);
				}
				free_norm(&res);
			}
			free(want);
			free(wmean);
			free(wrstd);
			free(x);
			free(w);
			free(b);
			free(xv);
			free(wv);
			free(bv);
		}
	}
}

static void test_rms_norm(void)
{
	static const struct {
		int rank;
		int64_t dims[3];
		int nd;
	} cases[] = {{1, {7}, 1}, {2, {3, 5}, 1}, {3, {2, 3, 5}, 2}, {2, {0, 4}, 1}, {2, {3, 0}, 1}, {2, {100, 1031}, 1}};
	for (int dti = 0; dti < 2; dti++) {
		air_dtype dt = dti ? AIR_F64 : AIR_F32;
		for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
			int rank = cases[ci].rank, nd = cases[ci].nd;
			const int64_t *dims = cases[ci].dims;
			int64_t n = numel_of(rank, dims), N = numel_of(nd, dims + rank - nd);
			int64_t M = numel_of(rank - nd, dims);
			double *xv = th_values(n, dt), *wv = th_values(N, dt);
			void *x = th_as(xv, n, dt), *w = th_as(wv, N, dt);
			double *want = malloc(sizeof(double) * (size_t)(n + 1));
			for (int hw = 0; hw < 2; hw++)
				for (int given_eps = 0; given_eps < 2; given_eps++) {
					double eps = given_eps ? 1e-6 : dt == AIR_F32 ? 1.1920928955078125e-07
										    : 2.220446049250313e-16;
					for (int64_t r = 0; r < M; r++) {
						double q = 0;
						for (int64_t i = 0; i < N; i++)
							q += xv[r * N + i] * xv[r * N + i];
						double rs = 1 / sqrt(q / N + eps);
						for (int64_t i = 0; i < N; i++)
							want[r * N + i] = xv[r * N + i] * rs * (hw ? wv[i] : 1);
					}
					air_attr at[3] = {th_int("normalized_ndim", nd), th_int("has_weight", hw),
							  th_float("eps", eps)};
					norm_result res;
					int stage;
					air_status st = run_norm("rms_norm", dt, rank, dims, false, nd, x, hw ? w : NULL,
								 NULL, at, given_eps ? 3 : 2, &res, &stage);
					CHECK_OK(st);
					if (st == AIR_OK) {
						char label[80];
						snprintf(label, sizeof label, "rms_norm %s case %zu w %d", air_dtype_name(dt),
							 ci, hw);
						check_shape(label, res.rank[0], res.dims[0], rank, dims);
						double tol = dt == AIR_F32 ? 2e-6 : 1e-12;
						th_compare(label, dt, res.out[0], want, NULL, n, tol, tol);
					}
					free_norm(&res);
				}
			free(want);
			free(x);
			free(w);
			free(xv);
			free(wv);
		}
	}
}

/* x: [s, 8] with s symbolic; mean/rstd infer as [s, 1]; run at 1 and 29. */
static void test_norm_symbolic(void)
{
	air_graph *g;
	CHECK_OK(air_graph_create(&g));
	air_dim s, dims[2], wd[1] = {8};
	CHECK_OK(air_graph_symbol(g, "s", &s));
	dims[0] = s;
	dims[1] = 8;
	air_value in[2], out[3];
	CHECK_OK(air_graph_add_input(g, "x", AIR_F32, 2, dims, &in[0]));
	CHECK_OK(air_graph_add_input(g, "w", AIR_F32, 1, wd, &in[1]));
	air_attr at[2] = {th_int("normalized_ndim", 1), th_int("has_weight", 1)};
	int n;
	CHECK_OK(air_graph_add_node(g, "layer_norm", in, 2, at, 2, out, 3, &n));
	CHECK(n == 3);
	air_dtype dt;
	int rank;
	air_dim got[AIR_MAX_RANK];
	CHECK_OK(air_graph_value_info(g, out[0], &dt, &rank, got));
	CHECK(rank == 2 && got[0] == s && got[1] == 8);
	CHECK_OK(air_graph_value_info(g, out[2], &dt, &rank, got));
	CHECK(dt == AIR_F32 && rank == 2 && got[0] == s && got[1] == 1);
	air_value y2;
	CHECK_OK(air_graph_add_node(g, "rms_norm", in, 2, at, 2, &y2, 1, &n));
	air_value outs[2] = {out[0], y2};
	CHECK_OK(air_graph_set_outputs(g, outs, 2));
	air_model *m;
	CHECK_OK(air_compile(g, NULL, &m));
	air_graph_destroy(g);
	for (int run = 0; run < 2; run++) {
		int64_t rows = run ? 29 : 1, cd[2] = {rows, 8}, cw[1] = {8};
		double *xv = th_values(rows * 8, AIR_F32), *wv = th_values(8, AIR_F32);
		float *x = th_as(xv, rows * 8, AIR_F32), *w = th_as(wv, 8, AIR_F32);
		float *y = malloc(sizeof(float) * (size_t)rows * 8), *y2v = malloc(sizeof(float) * (size_t)rows * 8);
		double *want = malloc(sizeof(double) * (size_t)rows * 8), *want2 = malloc(sizeof(double) * (size_t)rows * 8);
		for (int64_t r = 0; r < rows; r++) {
			double sm = 0, q = 0, q2 = 0;
			for (int i = 0; i < 8; i++) {
				sm += xv[r * 8 + i];
				q2 += xv[r * 8 + i] * xv[r * 8 + i];
			}
			double mean = sm / 8;
			for (int i = 0; i < 8; i++)
				q += (xv[r * 8 + i] - mean) * (xv[r * 8 + i] - mean);
			for (int i = 0; i < 8; i++) {
				want[r * 8 + i] = (xv[r * 8 + i] - mean) / sqrt(q / 8 + 1e-5) * wv[i];
				want2[r * 8 + i] = xv[r * 8 + i] / sqrt(q2 / 8 + 1.1920928955078125e-07) * wv[i];
			}
		}
		air_session *ses;
		CHECK_OK(air_session_create(m, &ses));
		CHECK_OK(air_session_set_input(ses, 0, x, 2, cd));
		CHECK_OK(air_session_set_input(ses, 1, w, 1, cw));
		int64_t od[AIR_MAX_RANK];
		CHECK_OK(air_session_output_shape(ses, 0, &rank, od));
		CHECK(rank == 2 && od[0] == rows);
		CHECK_OK(air_session_set_output(ses, 0, y, sizeof(float) * (size_t)rows * 8));
		CHECK_OK(air_session_set_output(ses, 1, y2v, sizeof(float) * (size_t)rows * 8));
		CHECK_OK(air_session_run(ses));
		th_compare("layer_norm symbolic", AIR_F32, y, want, NULL, rows * 8, 2e-6, 2e-6);
		th_compare("rms_norm symbolic", AIR_F32, y2v, want2, NULL, rows * 8, 2e-6, 2e-6);
		air_session_destroy(ses);
		free(xv);
		free(wv);
		free(x);
		free(w);
		free(y);
		free(y2v);
		free(want);
		free(want2);
	}
	air_model_destroy(m);
}

/* A symbolic weight size that disagrees with x is caught at run time. */
static void test_norm_runtime_mismatch(void)
{
	air_graph *g;
	CHECK_OK(air_graph_create(&g));
	air_dim s, t;
	CHECK_OK(air_graph_symbol(g, "s", &s));
	CHECK_OK(air_graph_symbol(g, "t", &t));
	air_dim xd[2] = {3, s}, wd[1] = {t};
	air_value in[2], out[3];
	CHECK_OK(air_graph_add_input(g, "x", AIR_F32, 2, xd, &in[0]));
	CHECK_OK(air_graph_add_input(g, "w", AIR_F32, 1, wd, &in[1]));
	air_attr at[2] = {th_int("normalized_ndim", 1), th_int("has_weight", 1)};
	int n;
	CHECK_OK(air_graph_add_node(g, "layer_norm", in, 2, at, 2, out, 3, &n));
	CHECK_OK(air_graph_set_outputs(g, out, 1));
	air_model *m;
	CHECK_OK(air_compile(g, NULL, &m));
	air_graph_destroy(g);
	float x[12] = {0}, w[5] = {0}, y[12];
	int64_t cx[2] = {3, 4}, cw[1] = {5};
	air_session *ses;
	CHECK_OK(air_session_create(m, &ses));
	CHECK_OK(air_session_set_input(ses, 0, x, 2, cx));
	CHECK_OK(air_session_set_input(ses, 1, w, 1, cw));
	CHECK_OK(air_session_set_output(ses, 0, y, sizeof y));
	CHECK(air_session_run(ses) == AIR_SHAPE_MISMATCH);
	CHECK(strstr(air_last_error(), "layer_norm") != NULL);
	air_session_destroy(ses);
	air_model_destroy(m);
}

static void test_norm_errors(void)
{
	float x[30] = {0};
	int64_t dims[3] = {2, 3, 5}, wd5[1] = {5}, wd4[1] = {4};
	th_arg args[3] = {th_make(AIR_F32, x, 3, dims), th_make(AIR_F32, x, 1, wd5), th_make(AIR_F32, x, 1, wd5)};
	air_attr at[4] = {th_int("normalized_ndim", 1), th_int("has_weight", 1), th_int("has_bias", 1),
			  th_float("eps", 1e-5)};
	/* flags that do not match the inputs */
	th_expect_build_error("layer_norm", args, 2, at, 3, AIR_INVALID_ARGUMENT, "layer_norm flags ask for 3");
	th_expect_build_error("layer_norm", args, 3, at, 1, AIR_INVALID_ARGUMENT, "layer_norm flags ask for 1");
	th_expect_build_error("rms_norm", args, 2, at, 1, AIR_INVALID_ARGUMENT, "rms_norm has_weight missing");
	th_expect_build_error("rms_norm", args, 3, at, 2, AIR_INVALID_ARGUMENT, "rms_norm with 3 inputs");
	th_expect_build_error("rms_norm", args, 2, at, 3, AIR_INVALID_ARGUMENT, "rms_norm has no has_bias");
	/* bad normalized_ndim, missing */
	air_attr nd0[1] = {th_int("normalized_ndim", 0)}, nd4[1] = {th_int("normalized_ndim", 4)};
	th_expect_build_error("layer_norm", args, 1, nd0, 1, AIR_INVALID_ARGUMENT, "layer_norm ndim 0");
	th_expect_build_error("layer_norm", args, 1, nd4, 1, AIR_INVALID_ARGUMENT, "layer_norm ndim 4");
	th_expect_build_error("layer_norm", args, 1, NULL, 0, AIR_INVALID_ARGUMENT, "layer_norm no ndim");
	/* weight of the wrong size, dtype, rank */
	args[1] = th_make(AIR_F32, x, 1, wd4);
	th_expect_build_error("layer_norm", args, 2, at, 2, AIR_SHAPE_MISMATCH, "layer_norm weight size");
	args[1] = th_make(AIR_F64, x, 1, wd5);
	th_expect_build_error("layer_norm", args, 2, at, 2, AIR_DTYPE_MISMATCH, "layer_norm weight dtype");
	args[1] = th_make(AIR_F32, x, 2, dims + 1);
	th_expect_build_error("rms_norm", args, 2, at, 2, AIR_SHAPE_MISMATCH, "rms_norm weight rank");
	args[0] = th_make(AIR_I32, x, 3, dims);
	th_expect_build_error("layer_norm", args, 1, at, 1, AIR_UNSUPPORTED, "layer_norm of i32");
	args[0] = th_make(AIR_F32, x, 3, dims);
	air_attr nan_eps[2] = {th_int("normalized_ndim", 1), th_float("eps", NAN)};
	th_expect_build_error("rms_norm", args, 1, nan_eps, 2, AIR_INVALID_ARGUMENT, "rms_norm NaN eps");
}

int main(void)
{
	test_reduce_float();
	test_sum_columns();
	test_reduce_nan();
	test_reduce_int();
	test_reduce_empty();
	test_reduce_symbolic();
	test_reduce_errors();
	test_argmax();
	test_cumsum();
	test_softmax();
	test_layer_norm();
	test_rms_norm();
	test_norm_symbolic();
	test_norm_runtime_mismatch();
	test_norm_errors();
	return check_report("test_ops_reduce");
}

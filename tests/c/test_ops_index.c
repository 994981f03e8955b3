/* test_ops_index.c - the indexing and creation ops through the public API
 * against values computed here, on awkward and empty shapes. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "op_harness.h"

/* Covered: i64 and i32 indices, negative indices, sizes that run on several
 * threads, symbolic dims run at two sizes, bad attributes at build time and
 * out-of-range indices at run time (AIR_INVALID_ARGUMENT, never a crash). */

static int64_t numel_of(int rank, const int64_t *dims)
{
	int64_t n = 1;
	for (int d = 0; d < rank; d++)
		n *= dims[d];
	return n;
}

static void check_shape(const char *label, int rank, const int64_t *dims, int want_rank, const int64_t *want)
{
	int ok = rank == want_rank;
	for (int d = 0; ok && d < rank; d++)
		ok = dims[d] == want[d];
	CHECK(ok);
	if (!ok) {
		fprintf(stderr, "%s: shape [", label);
		for (int d = 0; d < rank; d++)
			fprintf(stderr, "%s%lld", d ? ", " : "", (long long)dims[d]);
		fprintf(stderr, "], want rank %d\n", want_rank);
	}
}

/* Builds a graph with no inputs but a dummy one (so a symbol can be
 * bound), one node, runs it; returns the output (free it). */
static void *run_nullary(const char *op, const air_attr *at, int na, int *rank, int64_t *dims, air_dtype *dt)
{
	air_graph *g;
	CHECK_OK(air_graph_create(&g));
	air_value y;
	int n;
	air_status st = air_graph_add_node(g, op, NULL, 0, at, na, &y, 1, &n);
	CHECK_OK(st);
	void *out = NULL;
	air_model *m = NULL;
	if (st == AIR_OK) {
		CHECK_OK(air_graph_set_outputs(g, &y, 1));
		CHECK_OK(air_compile(g, NULL, &m));
	}
	air_graph_destroy(g);
	if (!m)
		return NULL;
	air_model_output_info(m, 0, dt, NULL, NULL);
	out = th_run(m, NULL, 0, rank, dims);
	air_model_destroy(m);
	return out;
}

/* ---- arange, full ---------------------------------------------------------- */

static void test_arange(void)
{
	static const struct {
		air_dtype dt;
		double start, step;
		int64_t len;
	} cases[] = {
		{AIR_F32, 0.5, 0.25, 7},      {AIR_F64, -3.0, 0.1, 101},    {AIR_I64, 0, 1, 128},
		{AIR_I64, -3, 2, 5},          {AIR_I32, 10, -3, 9},         {AIR_U8, 0, 1, 300},
		{AIR_I64, 0.5, 1.5, 5},       {AIR_F32, 0, 1, 0},           {AIR_I64, 0, 1, 50001},
		{AIR_F32, 1, 0.001, 40009},   {AIR_I16, -5, 7, 13},         {AIR_I8, 0, 5, 40},
		{AIR_I64, 4503599627370497.0, 3, 4},
	};
	for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
		air_attr at[4] = {th_float("start", cases[k].start), th_float("step", cases[k].step),
				  th_int("length", cases[k].len), th_int("dtype", cases[k].dt)};
		int rank;
		int64_t dims[AIR_MAX_RANK];
		air_dtype dt;
		void *y = run_nullary("arange", at, 4, &rank, dims, &dt);
		if (!y)
			continue;
		char label[64];
		snprintf(label, sizeof label, "arange case %zu", k);
		check_shape(label, rank, dims, 1, &cases[k].len);
		CHECK(dt == cases[k].dt);
		int bad = 0;
		int64_t is = (int64_t)cases[k].start, ist = (int64_t)cases[k].step;
		for (int64_t i = 0; i < cases[k].len; i++) {
			int64_t iv = is + ist * i;
			switch (dt) {
			case AIR_F32: bad += ((float *)y)[i] != (float)(cases[k].start + cases[k].step * (double)i); break;
			case AIR_F64: bad += ((double *)y)[i] != cases[k].start + cases[k].step * (double)i; break;
			case AIR_I64: bad += ((int64_t *)y)[i] != iv; break;
			case AIR_I32: bad += ((int32_t *)y)[i] != (int32_t)iv; break;
			case AIR_I16: bad += ((int16_t *)y)[i] != (int16_t)iv; break;
			case AIR_I8: bad += ((int8_t *)y)[i] != (int8_t)iv; break;
			case AIR_U8: bad += ((uint8_t *)y)[i] != (uint8_t)iv; break;
			default: bad++;
			}
		}
		CHECK(bad == 0);
		if (bad)
			fprintf(stderr, "%s: %d wrong\n", label, bad);
		free(y);
	}
	/* errors: bool, an unknown dtype, a missing length, a non-finite step,
	 * a start that does not fit int64 */
	air_attr at[4] = {th_int("length", 3), th_int("dtype", AIR_BOOL), th_float("step", 1)};
	air_graph *g;
	CHECK_OK(air_graph_create(&g));
	air_value y;
	int n;
	CHECK(air_graph_add_node(g, "arange", NULL, 0, at, 2, &y, 1, &n) == AIR_UNSUPPORTED);
	CHECK(strstr(air_last_error(), "arange") != NULL);
	at[1] = th_int("dtype", 99);
	CHECK(air_graph_add_node(g, "arange", NULL, 0, at, 2, &y, 1, &n) == AIR_INVALID_ARGUMENT);
	CHECK(air_graph_add_node(g, "arange", NULL, 0, at + 1, 1, &y, 1, &n) == AIR_INVALID_ARGUMENT);
	CHECK(strstr(air_last_error(), "length") != NULL);
	at[1] = th_int("dtype", AIR_F32);
	at[2] = th_float("step", INFINITY);
	CHECK(air_graph_add_node(g, "arange", NULL, 0, at, 3, &y, 1, &n) == AIR_INVALID_ARGUMENT);
	at[1] = th_int("dtype", AIR_I64);
	at[2] = th_float("start", 1e19);
	CHECK(air_graph_add_node(g, "arange", NULL, 0, at, 3, &y, 1, &n) == AIR_INVALID_ARGUMENT);
	at[2] = th_int("length", -7); /* names no dim expression */
	CHECK(air_graph_add_node(g, "arange", NULL, 0, at + 1, 2, &y, 1, &n) == AIR_INVALID_ARGUMENT);
	air_graph_destroy(g);
}

/* arange with a symbolic length (2*s + 1, s from an input) and full with a
 * symbolic shape [s, 3], run at s = 2 and s = 11. */
static void test_creation_symbolic(void)
{
	air_graph *g;
	CHECK_OK(air_graph_create(&g));
	air_dim s, len;
	CHECK_OK(air_graph_symbol(g, "s", &s));
	CHECK_OK(air_graph_dim_expr(g, AIR_DIM_MUL, s, 2, &len));
	CHECK_OK(air_graph_dim_expr(g, AIR_DIM_ADD, len, 1, &len));
	air_value x, y[2];
	CHECK_OK(air_graph_add_input(g, "x", AIR_F32, 1, &s, &x));
	air_attr at[3] = {th_float("start", 2), th_int("length", len), th_int("dtype", AIR_I64)};
	int n;
	CHECK_OK(air_graph_add_node(g, "arange", NULL, 0, at, 3, &y[0], 1, &n));
	int64_t shape[2] = {s, 3};
	air_attr fa[3] = {th_ints("shape", shape, 2), th_float("value", -2.5), th_int("dtype", AIR_F64)};
	CHECK_OK(air_graph_add_node(g, "full", NULL, 0, fa, 3, &y[1], 1, &n));
	air_dtype dt;
	int rank;
	air_dim got[AIR_MAX_RANK];
	CHECK_OK(air_graph_value_info(g, y[0], &dt, &rank, got));
	CHECK(dt == AIR_I64 && rank == 1 && got[0] == len);
	CHECK_OK(air_graph_value_info(g, y[1], &dt, &rank, got));
	CHECK(dt == AIR_F64 && rank == 2 && got[0] == s && got[1] == 3);
	CHECK_OK(air_graph_set_outputs(g, y, 2));
	air_model *m;
	CHECK_OK(air_compile(g, NULL, &m));
	air_graph_destroy(g);
	for (int run = 0; run < 2; run++) {
		int64_t sv = run ? 11 : 2;
		float xd[11] = {0};
		int64_t a[23];
		double f[33];
		air_session *ses;
		CHECK_OK(air_session_create(m, &ses));
		CHECK_OK(air_session_set_input(ses, 0, xd, 1, &sv));
		int64_t od[AIR_MAX_RANK];
		CHECK_OK(air_session_output_shape(ses, 0, &rank, od));
		CHECK(rank == 1 && od[0] == 2 * sv + 1);
		CHECK_OK(air_session_output_shape(ses, 1, &rank, od));
		CHECK(rank == 2 && od[0] == sv && od[1] == 3);
		CHECK_OK(air_session_set_output(ses, 0, a, sizeof a));
		CHECK_OK(air_session_set_output(ses, 1, f, sizeof f));
		CHECK_OK(air_session_run(ses));
		for (int64_t i = 0; i < 2 * sv + 1; i++)
			CHECK(a[i] == 2 + i);
		for (int64_t i = 0; i < sv * 3; i++)
			CHECK(f[i] == -2.5);
		air_session_destroy(ses);
	}
	air_model_destroy(m);
}

static void test_full(void)
{
	static const struct {
		air_dtype dt;
		double v;
		int rank;
		int64_t dims[3];
	} cases[] = {
		{AIR_F32, 1.5, 2, {2, 3}},          {AIR_F64, -0.1, 1, {7}},
		{AIR_I64, 4503599627370497.0, 1, {3}}, {AIR_I64, 2.7, 1, {2}},
		{AIR_I64, -2.7, 1, {2}},             {AIR_BOOL, 1, 0, {0}},
		{AIR_BOOL, 0.5, 1, {3}},             {AIR_BOOL, 0, 2, {2, 2}},
		{AIR_U8, 255, 1, {5}},               {AIR_I8, -128, 1, {5}},
		{AIR_I32, -7, 2, {0, 4}},            {AIR_F32, INFINITY, 1, {2}},
		{AIR_F32, NAN, 1, {2}},              {AIR_F16, 1.5, 1, {3}},
		{AIR_BF16, -2.0, 1, {3}},            {AIR_F32, 3.25, 3, {40, 30, 50}},
	};
	for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
		air_attr at[3] = {th_ints("shape", cases[k].dims, cases[k].rank), th_float("value", cases[k].v),
				  th_int("dtype", cases[k].dt)};
		int rank;
		int64_t dims[AIR_MAX_RANK];
		air_dtype dt;
		void *y = run_nullary("full", at, 3, &rank, dims, &dt);
		if (!y)
			continue;
		char label[64];
		snprintf(label, sizeof label, "full case %zu", k);
		check_shape(label, rank, dims, cases[k].rank, cases[k].dims);
		CHECK(dt == cases[k].dt);
		int64_t n = numel_of(cases[k].rank, cases[k].dims);
		double v = cases[k].v;
		int bad = 0;
		for (int64_t i = 0; i < n; i++) {
			switch (dt) {
			case AIR_F32: {
				float g = ((float *)y)[i];
				bad += isnan(v) ? !isnan(g) : g != (float)v;
				break;
			}
			case AIR_F64: bad += ((double *)y)[i] != v; break;
			case AIR_I64: bad += ((int64_t *)y)[i] != (int64_t)v; break;
			case AIR_I32: bad += ((int32_t *)y)[i] != (int32_t)v; break;
			case AIR_I8: bad += ((int8_t *)y)[i] != (int8_t)v; break;
			case AIR_U8: bad += ((uint8_t *)y)[i] != (uint8_t)v; break;
			case AIR_BOOL: bad += ((uint8_t *)y)[i] != (v != 0); break;
			/* 1.5 and -2.0 are exact in both 16-bit formats */
			case AIR_F16: bad += ((uint16_t *)y)[i] != 0x3e00; break;
			case AIR_BF16: bad += ((uint16_t *)y)[i] != 0xc000; break;
			default: bad++;
			}
		}
		CHECK(bad == 0);
		if (bad)
			fprintf(stderr, "%s: %d wrong\n", label, bad);
		free(y);
	}
	/* values the dtype cannot hold, like torch */
	static const struct {
		air_dtype dt;
		double v;
	} bad_cases[] = {{AIR_U8, 300}, {AIR_U8, -1.5}, {AIR_U8, 255.5}, {AIR_I8, -128.5}, {AIR_I64, NAN},
			 {AIR_I64, 9223372036854775808.0}, {AIR_F32, 1e300}, {AIR_I32, INFINITY}};
	air_graph *g;
	CHECK_OK(air_graph_create(&g));
	int64_t shape[1] = {2};
	for (size_t k = 0; k < sizeof bad_cases / sizeof *bad_cases; k++) {
		air_attr at[3] = {th_ints("shape", shape, 1), th_float("value", bad_cases[k].v),
				  th_int("dtype", bad_cases[k].dt)};
		air_value y;
		int n;
		air_status st = air_graph_add_node(g, "full", NULL, 0, at, 3, &y, 1, &n);
		CHECK(st == AIR_INVALID_ARGUMENT && strstr(air_last_error(), "overflow"));
		if (st != AIR_INVALID_ARGUMENT)
			fprintf(stderr, "full bad case %zu: %s\n", k, air_status_string(st));
	}
	air_attr at[3] = {th_ints("shape", shape, 1), th_float("value", 0), th_int("dtype", -1)};
	air_value y;
	int n;
	CHECK(air_graph_add_node(g, "full", NULL, 0, at, 3, &y, 1, &n) == AIR_INVALID_ARGUMENT);
	CHECK(air_graph_add_node(g, "full", NULL, 0, at + 1, 2, &y, 1, &n) == AIR_INVALID_ARGUMENT);
	air_graph_destroy(g);
}

/* ---- embedding ---------------------------------------------------------- */

static void test_embedding(void)
{
	static const struct {
		int64_t V, D;
		air_dtype idt;
		int rank;
		int64_t idims[3];
	} cases[] = {
		{5, 3, AIR_I64, 2, {2, 3}}, {1, 1, AIR_I32, 1, {4}},      {7, 13, AIR_I64, 0, {0}},
		{5, 3, AIR_I64, 2, {0, 3}}, {97, 64, AIR_I32, 2, {31, 37}}, {11, 0, AIR_I64, 1, {3}},
	};
	for (int dti = 0; dti < 2; dti++) {
		air_dtype dt = dti ? AIR_F64 : AIR_F32;
		for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
			int64_t V = cases[k].V, D = cases[k].D, wd[2] = {V, D};
			int rank = cases[k].rank;
			int64_t n = numel_of(rank, cases[k].idims);
			double *wv = th_values(V * D, dt);
			void *w = th_as(wv, V * D, dt);
			int64_t *iv = malloc(sizeof(int64_t) * (size_t)(n + 1));
			void *idx = malloc(8 * (size_t)(n + 1));
			for (int64_t i = 0; i < n; i++) {
				iv[i] = (int64_t)((th_rand() + 1) / 2 * (double)V);
				iv[i] = iv[i] >= V ? V - 1 : iv[i];
				if (cases[k].idt == AIR_I64)
					((int64_t *)idx)[i] = iv[i];
				else
					((int32_t *)idx)[i] = (int32_t)iv[i];
			}
			th_arg args[2] = {th_make(dt, w, 2, wd), th_make(cases[k].idt, idx, rank, cases[k].idims)};
			/* the weight as a constant too, as parameters will be */
			for (int c = 0; c < 2; c++) {
				args[0].constant = c;
				air_model *m = th_compile("embedding", args, 2, NULL, 0, 0);
				if (!m)
					continue;
				int r;
				int64_t got[AIR_MAX_RANK], want_dims[4];
				for (int d = 0; d < rank; d++)
					want_dims[d] = cases[k].idims[d];
				want_dims[rank] = D;
				void *y = th_run(m, args, 2, &r, got);
				if (y) {
					char label[64];
					snprintf(label, sizeof label, "embedding case %zu %s const %d", k, air_dtype_name(dt), c);
					check_shape(label, r, got, rank + 1, want_dims);
					double *want = malloc(sizeof(double) * (size_t)(n * D + 1));
					for (int64_t i = 0; i < n; i++)
						for (int64_t j = 0; j < D; j++)
							want[i * D + j] = wv[iv[i] * D + j];
					th_compare(label, dt, y, want, NULL, n * D, 0, 0);
					free(want);
				}
				free(y);
				air_model_destroy(m);
			}
			free(wv);
			free(w);
			free(iv);
			free(idx);
		}
	}
	/* out of range at run time: 7 of 5 rows, and -1 (torch does not wrap) */
	float w[15] = {0};
	int64_t wd[2] = {5, 3}, id[1] = {4};
	int64_t bad_idx[2][4] = {{0, 4, 7, 9}, {1, -1, 2, 3}};
	const char *msg[2] = {"index 7 is out of range for 5 rows", "index -1 is out of range for 5 rows"};
	for (int k = 0; k < 2; k++) {
		th_arg args[2] = {th_make(AIR_F32, w, 2, wd), th_make(AIR_I64, bad_idx[k], 1, id)};
		air_model *m = th_compile("embedding", args, 2, NULL, 0, 0);
		if (!m)
			continue;
		int r;
		int64_t got[AIR_MAX_RANK];
		air_status st;
		void *y = th_run_status(m, args, 2, &r, got, &st);
		CHECK(y == NULL && st == AIR_INVALID_ARGUMENT);
		CHECK(strstr(air_last_error(), msg[k]) != NULL);
		if (!strstr(air_last_error(), msg[k]))
			fprintf(stderr, "embedding error message: %s\n", air_last_error());
		free(y);
		air_model_destroy(m);
	}
	/* build errors */
	th_arg args[2] = {th_make(AIR_F32, w, 1, wd), th_make(AIR_I64, bad_idx[0], 1, id)};
	th_expect_build_error("embedding", args, 2, NULL, 0, AIR_SHAPE_MISMATCH, "embedding weight rank 1");
	args[0] = th_make(AIR_F32, w, 2, wd);
	args[1] = th_make(AIR_F32, w, 1, id);
	th_expect_build_error("embedding", args, 2, NULL, 0, AIR_UNSUPPORTED, "embedding float indices");
}

/* indices [s, 4] with s symbolic: output [s, 4, D], run at s = 1 and 6 */
static void test_embedding_symbolic(void)
{
	air_graph *g;
	CHECK_OK(air_graph_create(&g));
	air_dim s;
	CHECK_OK(air_graph_symbol(g, "s", &s));
	air_dim wd[2] = {10, 3}, id[2] = {s, 4};
	air_value in[2], y;
	CHECK_OK(air_graph_add_input(g, "w", AIR_F32, 2, wd, &in[0]));
	CHECK_OK(air_graph_add_input(g, "idx", AIR_I32, 2, id, &in[1]));
	int n;
	CHECK_OK(air_graph_add_node(g, "embedding", in, 2, NULL, 0, &y, 1, &n));
	air_dtype dt;
	int rank;
	air_dim got[AIR_MAX_RANK];
	CHECK_OK(air_graph_value_info(g, y, &dt, &rank, got));
	CHECK(dt == AIR_F32 && rank == 3 && got[0] == s && got[1] == 4 && got[2] == 3);
	CHECK_OK(air_graph_set_outputs(g, &y, 1));
	air_model *m;
	CHECK_OK(air_compile(g, NULL, &m));
	air_graph_destroy(g);
	float w[30];
	for (int i = 0; i < 30; i++)
		w[i] = (float)i;
	for (int run = 0; run < 2; run++) {
		int64_t sv = run ? 6 : 1, cw[2] = {10, 3}, ci[2] = {sv, 4};
		int32_t idx[24];
		for (int i = 0; i < sv * 4; i++)
			idx[i] = (i * 7) % 10;
		th_arg args[2] = {th_make(AIR_F32, w, 2, cw), th_make(AIR_I32, idx, 2, ci)};
		int r;
		int64_t od[AIR_MAX_RANK];
		float *out = th_run(m, args, 2, &r, od);
		if (out) {
			CHECK(r == 3 && od[0] == sv);
			int bad = 0;
			for (int i = 0; i < sv * 4; i++)
				for (int j = 0; j < 3; j++)
					bad += out[i * 3 + j] != (float)(idx[i] * 3 + j);
			CHECK(bad == 0);
		}
		free(out);
	}
	air_model_destroy(m);
}

/* ---- gather --------------------------------------------------------------- */

static void test_gather(void)
{
	static const struct {
		int rank;
		int64_t xd[3], id[3];
		int axis;
	} cases[] = {
		{2, {3, 4}, {2, 4}, 0},       {2, {3, 4}, {3, 2}, 1},     {2, {3, 4}, {1, 1}, -1},
		{2, {3, 4}, {3, 7}, 1},       {3, {2, 3, 5}, {2, 2, 5}, 1}, {3, {2, 3, 5}, {1, 3, 4}, 2},
		{1, {5}, {0}, 0},             {0, {0}, {0}, 0},            {2, {200, 300}, {200, 301}, 1},
		{2, {211, 3}, {400, 3}, 0},
	};
	for (int ti = 0; ti < 2; ti++) {
		air_dtype idt = ti ? AIR_I32 : AIR_I64;
		for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
			int rank = cases[k].rank;
			const int64_t *xd = cases[k].xd, *id = cases[k].id;
			int axis = rank ? (cases[k].axis < 0 ? cases[k].axis + rank : cases[k].axis) : 0;
			int64_t nx = numel_of(rank, xd), ni = numel_of(rank, id);
			double *xv = th_values(nx, AIR_F64);
			void *x = th_as(xv, nx, AIR_F64);
			int64_t asz = rank ? xd[axis] : 1;
			int64_t *iv = malloc(sizeof(int64_t) * (size_t)(ni + 1));
			void *idx = malloc(8 * (size_t)(ni + 1));
			for (int64_t i = 0; i < ni; i++) {
				iv[i] = (int64_t)((th_rand() + 1) / 2 * (double)asz);
				iv[i] = iv[i] >= asz ? asz - 1 : iv[i];
				if (idt == AIR_I64)
					((int64_t *)idx)[i] = iv[i];
				else
					((int32_t *)idx)[i] = (int32_t)iv[i];
			}
			double *want = malloc(sizeof(double) * (size_t)(ni + 1));
			for (int64_t p = 0; p < ni; p++) {
				int64_t q = p, off = 0, stride = 1;
				for (int d = rank - 1; d >= 0; d--) {
					int64_t pos = q % id[d];
					q /= id[d];
					off += (d == axis ? iv[p] : pos) * stride;
					stride *= xd[d];
				}
				want[p] = xv[rank ? off : 0];
			}
			th_arg args[2] = {th_make(AIR_F64, x, rank, xd), th_make(idt, idx, rank, id)};
			air_attr at[1] = {th_int("axis", cases[k].axis)};
			air_model *m = th_compile("gather", args, 2, at, 1, 0);
			if (m) {
				int r;
				int64_t got[AIR_MAX_RANK];
				void *y = th_run(m, args, 2, &r, got);
				if (y) {
					char label[64];
					snprintf(label, sizeof label, "gather case %zu %s", k, air_dtype_name(idt));
					check_shape(label, r, got, rank, id);
					th_compare(label, AIR_F64, y, want, NULL, ni, 0, 0);
				}
				free(y);
				air_model_destroy(m);
			}
			free(want);
			free(iv);
			free(idx);
			free(xv);
			free(x);
		}
	}
	/* gather of i64 data (BERT's token_type_ids) */
	int64_t xi[6] = {10, 11, 12, 20, 21, 22}, gi[4] = {2, 0, 1, 1}, want[4] = {12, 10, 21, 21};
	int64_t d23[2] = {2, 3}, d22[2] = {2, 2};
	th_arg args[2] = {th_make(AIR_I64, xi, 2, d23), th_make(AIR_I64, gi, 2, d22)};
	air_attr at[1] = {th_int("axis", 1)};
	air_model *m = th_compile("gather", args, 2, at, 1, 0);
	if (m) {
		int r;
		int64_t got[AIR_MAX_RANK];
		int64_t *y = th_run(m, args, 2, &r, got);
		if (y)
			CHECK(y[0] == want[0] && y[1] == want[1] && y[2] == want[2] && y[3] == want[3]);
		free(y);
		air_model_destroy(m);
	}
	/* out of range and negative indices fail at run time */
	int64_t bad[2][4] = {{0, 1, 3, 0}, {0, -1, 0, 0}};
	for (int k = 0; k < 2; k++) {
		args[1] = th_make(AIR_I64, bad[k], 2, d22);
		m = th_compile("gather", args, 2, at, 1, 0);
		if (!m)
			continue;
		int r;
		int64_t got[AIR_MAX_RANK];
		air_status st;
		void *y = th_run_status(m, args, 2, &r, got, &st);
		CHECK(y == NULL && st == AIR_INVALID_ARGUMENT);
		CHECK(strstr(air_last_error(), k ? "index -1 is out of bounds" : "index 3 is out of bounds") != NULL);
		free(y);
		air_model_destroy(m);
	}
	/* build errors: rank mismatch, index bigger than x off the axis, bad axis,
	 * float index */
	int64_t d3[1] = {3}, d33[2] = {3, 3};
	args[1] = th_make(AIR_I64, gi, 1, d3);
	th_expect_build_error("gather", args, 2, at, 1, AIR_SHAPE_MISMATCH, "gather rank mismatch");
	args[1] = th_make(AIR_I64, gi, 2, d33);
	th_expect_build_error("gather", args, 2, at, 1, AIR_SHAPE_MISMATCH, "gather index too big");
	args[1] = th_make(AIR_I64, gi, 2, d22);
	at[0] = th_int("axis", 2);
	th_expect_build_error("gather", args, 2, at, 1, AIR_INVALID_ARGUMENT, "gather bad axis");
	at[0] = th_int("axis", 1);
	args[1] = th_make(AIR_F32, gi, 2, d22);
	th_expect_build_error("gather", args, 2, at, 1, AIR_UNSUPPORTED, "gather float index");
}

/* ---- index_select --------------------------------------------------------- */

static void test_index_select(void)
{
	static const struct {
		int rank;
		int64_t xd[3];
		int axis;
		int irank;
		int64_t n;
	} cases[] = {
		{2, {4, 5}, 0, 1, 3},   {2, {4, 5}, 1, 1, 7},     {2, {4, 5}, -1, 0, 1}, {3, {2, 3, 5}, 1, 1, 4},
		{2, {4, 5}, 0, 1, 0},   {1, {1}, 0, 1, 5},        {2, {0, 5}, 1, 1, 2},  {2, {300, 200}, 0, 1, 401},
		{3, {3, 301, 70}, 1, 1, 257},
	};
	for (int ti = 0; ti < 2; ti++) {
		air_dtype idt = ti ? AIR_I32 : AIR_I64;
		for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
			int rank = cases[k].rank;
			const int64_t *xd = cases[k].xd;
			int axis = cases[k].axis < 0 ? cases[k].axis + rank : cases[k].axis;
			int64_t nx = numel_of(rank, xd), n = cases[k].n;
			double *xv = th_values(nx, AIR_F32);
			void *x = th_as(xv, nx, AIR_F32);
			int64_t *iv = malloc(sizeof(int64_t) * (size_t)(n + 1));
			void *idx = malloc(8 * (size_t)(n + 1));
			for (int64_t i = 0; i < n; i++) {
				iv[i] = (int64_t)((th_rand() + 1) / 2 * (double)xd[axis]);
				iv[i] = iv[i] >= xd[axis] ? xd[axis] - 1 : iv[i];
				if (idt == AIR_I64)
					((int64_t *)idx)[i] = iv[i];
				else
					((int32_t *)idx)[i] = (int32_t)iv[i];
			}
			int64_t od[3], outer = 1, inner = 1;
			for (int d = 0; d < rank; d++)
				od[d] = d == axis ? n : xd[d];
			for (int d = 0; d < axis; d++)
				outer *= xd[d];
			for (int d = axis + 1; d < rank; d++)
				inner *= xd[d];
			int64_t ny = numel_of(rank, od);
			double *want = malloc(sizeof(double) * (size_t)(ny + 1));
			for (int64_t o = 0; o < outer; o++)
				for (int64_t j = 0; j < n; j++)
					for (int64_t i = 0; i < inner; i++)
						want[(o * n + j) * inner + i] = xv[(o * xd[axis] + iv[j]) * inner + i];
			th_arg args[2] = {th_make(AIR_F32, x, rank, xd), th_make(idt, idx, cases[k].irank, &n)};
			air_attr at[1] = {th_int("axis", cases[k].axis)};
			air_model *m = th_compile("index_select", args, 2, at, 1, 0);
			if (m) {
				int r;
				int64_t got[AIR_MAX_RANK];
				void *y = th_run(m, args, 2, &r, got);
				if (y) {
					char label[64];
					snprintf(label, sizeof label, "index_select case %zu %s", k, air_dtype_name(idt));
					check_shape(label, r, got, rank, od);
					th_compare(label, AIR_F32, y, want, NULL, ny, 0, 0);
				}
				free(y);
				air_model_destroy(m);
			}
			free(want);
			free(iv);
			free(idx);
			free(xv);
			free(x);
		}
	}
	/* out of range, negative (torch does not wrap), and with no rows */
	float x[10] = {0};
	int64_t d25[2] = {2, 5}, d05[2] = {0, 5}, d3[1] = {3};
	int64_t bad[3][3] = {{0, 5, 1}, {-1, 0, 0}, {0, 9, 0}};
	const int64_t *xdims[3] = {d25, d25, d05};
	for (int k = 0; k < 3; k++) {
		th_arg args[2] = {th_make(AIR_F32, x, 2, xdims[k]), th_make(AIR_I64, bad[k], 1, d3)};
		air_attr at[1] = {th_int("axis", 1)};
		air_model *m = th_compile("index_select", args, 2, at, 1, 0);
		if (!m)
			continue;
		int r;
		int64_t got[AIR_MAX_RANK];
		air_status st;
		void *y = th_run_status(m, args, 2, &r, got, &st);
		CHECK(y == NULL && st == AIR_INVALID_ARGUMENT);
		CHECK(strstr(air_last_error(), "index_select") != NULL);
		free(y);
		air_model_destroy(m);
	}
	/* build errors: a matrix of indices, a scalar x, a bad axis */
	int64_t d22[2] = {2, 2};
	th_arg args[2] = {th_make(AIR_F32, x, 2, d25), th_make(AIR_I64, bad[0], 2, d22)};
	air_attr at[1] = {th_int("axis", 0)};
	th_expect_build_error("index_select", args, 2, at, 1, AIR_SHAPE_MISMATCH, "index_select 2-d index");
	args[0] = th_make(AIR_F32, x, 0, d25);
	args[1] = th_make(AIR_I64, bad[0], 1, d3);
	th_expect_build_error("index_select", args, 2, at, 1, AIR_UNSUPPORTED, "index_select scalar x");
	args[0] = th_make(AIR_F32, x, 2, d25);
	at[0] = th_int("axis", -3);
	th_expect_build_error("index_select", args, 2, at, 1, AIR_INVALID_ARGUMENT, "index_select bad axis");
}

/* ---- index (advanced indexing) ------------------------------------------- */

/* x[idx_0, ..., idx_k-1 on axes ax] by the definition: broadcast the index
 * tensors to B; the output is B in place of the indexed axes (adjacent) or
 * in front (not adjacent); negative indices count from the end. */
static void ref_index(const double *x, int rank, const int64_t *xd, int k, const int *ax, const int64_t *const *iv,
		      const int *irank, const int64_t (*idims)[AIR_MAX_RANK], double *want, int *orank, int64_t *od)
{
	int brank = 0;
	int64_t bd[AIR_MAX_RANK];
	for (int j = 0; j < k; j++)
		brank = irank[j] > brank ? irank[j] : brank;
	for (int d = 0; d < brank; d++) {
		bd[d] = 1;
		for (int j = 0; j < k; j++) {
			int dj = d - (brank - irank[j]);
			if (dj >= 0 && idims[j][dj] != 1)
				bd[d] = idims[j][dj];
		}
	}
	bool adjacent = ax[k - 1] - ax[0] == k - 1;
	/* which output dim each x dim / B dim lands on */
	int xpos[AIR_MAX_RANK], bpos0, r = 0;
	if (adjacent) {
		for (int d = 0; d < ax[0]; d++)
			xpos[d] = r++;
		bpos0 = r;
		r += brank;
		for (int d = ax[k - 1] + 1; d < rank; d++)
			xpos[d] = r++;
	} else {
		bpos0 = 0;
		r = brank;
		for (int d = 0, j = 0; d < rank; d++) {
			if (j < k && ax[j] == d) {
				j++;
				continue;
			}
			xpos[d] = r++;
		}
	}
	*orank = r;
	for (int d = 0; d < rank; d++) {
		bool indexed = false;
		for (int j = 0; j < k; j++)
			indexed |= ax[j] == d;
		if (!indexed)
			od[xpos[d]] = xd[d];
	}
	for (int d = 0; d < brank; d++)
		od[bpos0 + d] = bd[d];
	int64_t n = numel_of(r, od);
	for (int64_t p = 0; p < n; p++) {
		int64_t pos[AIR_MAX_RANK], q = p;
		for (int d = r - 1; d >= 0; d--) {
			pos[d] = q % od[d];
			q /= od[d];
		}
		int64_t xi[AIR_MAX_RANK];
		for (int d = 0; d < rank; d++)
			xi[d] = -1;
		for (int j = 0; j < k; j++) {
			int64_t off = 0;
			for (int dj = 0; dj < irank[j]; dj++) {
				int d = dj + (brank - irank[j]);
				off = off * idims[j][dj] + (idims[j][dj] == 1 ? 0 : pos[bpos0 + d]);
			}
			int64_t v = iv[j][off];
			xi[ax[j]] = v < 0 ? v + xd[ax[j]] : v;
		}
		int64_t xoff = 0;
		for (int d = 0; d < rank; d++)
			xoff = xoff * xd[d] + (xi[d] >= 0 ? xi[d] : pos[xpos[d]]);
		want[p] = x[xoff];
	}
}

static void test_index(void)
{
	static const struct {
		int rank;
		int64_t xd[4];
		int k;
		int ax[3];
		int irank[3];
		int64_t idims[3][3];
	} cases[] = {
		{2, {3, 4}, 1, {0}, {1}, {{2}}},
		{2, {3, 4}, 1, {-1}, {0}, {{0}}},
		{3, {3, 4, 5}, 1, {1}, {2}, {{2, 2}}},
		{3, {3, 4, 5}, 2, {0, 1}, {2, 1}, {{2, 1}, {3}}},
		{3, {3, 4, 5}, 2, {0, 2}, {1, 1}, {{2}, {2}}},
		{4, {2, 3, 4, 5}, 2, {1, 3}, {2, 1}, {{1, 2}, {2}}},
		{2, {3, 4}, 2, {0, 1}, {2, 2}, {{2, 1}, {1, 3}}},
		{3, {3, 4, 5}, 3, {0, 1, 2}, {1, 2, 1}, {{7}, {1, 7}, {1}}},
		{2, {3, 4}, 1, {0}, {2}, {{0, 3}}},
		{3, {2, 0, 5}, 1, {0}, {1}, {{3}}},
		{2, {300, 200}, 1, {0}, {1}, {{301}}},
		{3, {50, 60, 70}, 2, {0, 2}, {2, 2}, {{13, 1}, {1, 11}}},
		/* nearest upsample: [OH, 1] and [OW] on the last two axes, one
		 * element per row (the 1-D gather runs of 4-byte elements) */
		{4, {2, 3, 5, 7}, 2, {2, 3}, {2, 1}, {{10, 1}, {14}}},
		{4, {1, 2, 9, 33}, 2, {2, 3}, {2, 1}, {{17, 1}, {65}}},
		{3, {4, 6, 8}, 1, {2}, {1}, {{19}}},
	};
	for (int ti = 0; ti < 4; ti++) {
		air_dtype idt = ti % 2 ? AIR_I32 : AIR_I64, xdt = ti < 2 ? AIR_F64 : AIR_F32;
		for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
			int rank = cases[ci].rank, k = cases[ci].k;
			const int64_t *xd = cases[ci].xd;
			int ax[3];
			int64_t axes[3];
			int64_t dimsj[3][AIR_MAX_RANK];
			for (int j = 0; j < k; j++) {
				axes[j] = cases[ci].ax[j];
				ax[j] = axes[j] < 0 ? (int)axes[j] + rank : (int)axes[j];
				for (int d = 0; d < cases[ci].irank[j]; d++)
					dimsj[j][d] = cases[ci].idims[j][d];
			}
			int64_t nx = numel_of(rank, xd);
			double *xv = th_values(nx, AIR_F64);
			if (xdt == AIR_F32) /* the values f32 holds, so the gather is exact */
				for (int64_t i = 0; i < nx; i++)
					xv[i] = (double)(float)xv[i];
			void *x = th_as(xv, nx, xdt);
			th_arg args[4];
			args[0] = th_make(xdt, x, rank, xd);
			int64_t *iv[3];
			void *idx[3];
			for (int j = 0; j < k; j++) {
				int64_t ni = numel_of(cases[ci].irank[j], dimsj[j]);
				int64_t sz = xd[ax[j]];
				iv[j] = malloc(sizeof(int64_t) * (size_t)(ni + 1));
				idx[j] = malloc(8 * (size_t)(ni + 1));
				for (int64_t i = 0; i < ni; i++) {
					/* in [-sz, sz): negative ones wrap */
					int64_t v = (int64_t)floor(th_rand() * (double)sz);
					v = v >= sz ? sz - 1 : v < -sz ? -sz : v;
					iv[j][i] = v;
					if (idt == AIR_I64)
						((int64_t *)idx[j])[i] = v;
					else
						((int32_t *)idx[j])[i] = (int32_t)v;
				}
				args[1 + j] = th_make(idt, idx[j], cases[ci].irank[j], dimsj[j]);
			}
			int orank;
			int64_t od[AIR_MAX_RANK];
			double *want = malloc(sizeof(double) * 400000);
			ref_index(xv, rank, xd, k, ax, (const int64_t *const *)iv, cases[ci].irank,
				  (const int64_t(*)[AIR_MAX_RANK])dimsj, want, &orank, od);
			air_attr at[1] = {th_ints("axes", axes, k)};
			air_model *m = th_compile("index", args, 1 + k, at, 1, 0);
			if (m) {
				int r;
				int64_t got[AIR_MAX_RANK];
				void *y = th_run(m, args, 1 + k, &r, got);
				if (y) {
					char label[64];
					snprintf(label, sizeof label, "index case %zu %s %s", ci, air_dtype_name(idt),
						 air_dtype_name(xdt));
					check_shape(label, r, got, orank, od);
					th_compare(label, xdt, y, want, NULL, numel_of(orank, od), 0, 0);
				}
				free(y);
				air_model_destroy(m);
			}
			free(want);
			for (int j = 0; j < k; j++) {
				free(iv[j]);
				free(idx[j]);
			}
			free(xv);
			free(x);
		}
	}
}

/* The census pattern: a bool [B, S] mask indexed by two broadcast i64
 * index tensors [B,1,1,1] and [1,1,1,S] -> [B,1,1,S]; plus errors. */
static void test_index_mask_and_errors(void)
{
	uint8_t mask[6] = {1, 1, 0, 1, 0, 0};
	int64_t md[2] = {2, 3}, bi[2] = {0, 1}, si[3] = {0, 1, 2};
	int64_t bd[4] = {2, 1, 1, 1}, sd[4] = {1, 1, 1, 3};
	th_arg args[3] = {th_make(AIR_BOOL, mask, 2, md), th_make(AIR_I64, bi, 4, bd), th_make(AIR_I64, si, 4, sd)};
	int64_t axes[2] = {0, 1};
	air_attr at[1] = {th_ints("axes", axes, 2)};
	air_model *m = th_compile("index", args, 3, at, 1, 0);
	if (m) {
		int r;
		int64_t got[AIR_MAX_RANK], want_dims[4] = {2, 1, 1, 3};
		uint8_t *y = th_run(m, args, 3, &r, got);
		if (y) {
			check_shape("index mask", r, got, 4, want_dims);
			CHECK(memcmp(y, mask, 6) == 0);
		}
		free(y);
		air_model_destroy(m);
	}
	/* out of range: 3 of size 3, and -4 of size 3 (wraps once only) */
	float x[12] = {0};
	int64_t xd[2] = {3, 4}, d2[1] = {2};
	int64_t bad[2][2] = {{0, 3}, {-4, 0}};
	const char *msg[2] = {"index 3 is out of bounds for dimension 0 with size 3",
			      "index -4 is out of bounds for dimension 0 with size 3"};
	int64_t ax0[1] = {0};
	at[0] = th_ints("axes", ax0, 1);
	for (int k = 0; k < 2; k++) {
		th_arg a[2] = {th_make(AIR_F32, x, 2, xd), th_make(AIR_I64, bad[k], 1, d2)};
		m = th_compile("index", a, 2, at, 1, 0);
		if (!m)
			continue;
		int r;
		int64_t got[AIR_MAX_RANK];
		air_status st;
		void *y = th_run_status(m, a, 2, &r, got, &st);
		CHECK(y == NULL && st == AIR_INVALID_ARGUMENT);
		CHECK(strstr(air_last_error(), msg[k]) != NULL);
		if (!strstr(air_last_error(), msg[k]))
			fprintf(stderr, "index error message: %s\n", air_last_error());
		free(y);
		air_model_destroy(m);
	}
	/* out of range inside a 1-D gather run (f32, the last axis moving):
	 * row 1, column 2 holds 4 of size 4 */
	{
		int64_t rows_i[2] = {0, 2}, cols_i[3] = {1, -1, 4}, rd[2] = {2, 1}, cd[1] = {3};
		int64_t ax01[2] = {0, 1};
		at[0] = th_ints("axes", ax01, 2);
		th_arg a[3] = {th_make(AIR_F32, x, 2, xd), th_make(AIR_I64, rows_i, 2, rd),
			       th_make(AIR_I64, cols_i, 1, cd)};
		m = th_compile("index", a, 3, at, 1, 0);
		if (m) {
			int r;
			int64_t got[AIR_MAX_RANK];
			air_status st;
			void *y = th_run_status(m, a, 3, &r, got, &st);
			CHECK(y == NULL && st == AIR_INVALID_ARGUMENT);
			CHECK(strstr(air_last_error(), "index 4 is out of bounds for dimension 1 with size 4") != NULL);
			if (!strstr(air_last_error(), "index 4 is out of bounds"))
				fprintf(stderr, "index error message: %s\n", air_last_error());
			free(y);
			air_model_destroy(m);
		}
	}
	/* build errors: shapes that do not broadcast, axes not increasing,
	 * count mismatch, too many index tensors, float indices, bad axis */
	int64_t d3[1] = {3}, i3[3] = {0, 1, 2};
	th_arg a[4] = {th_make(AIR_F32, x, 2, xd), th_make(AIR_I64, i3, 1, d2), th_make(AIR_I64, i3, 1, d3),
		       th_make(AIR_I64, i3, 1, d3)};
	at[0] = th_ints("axes", axes, 2);
	th_expect_build_error("index", a, 3, at, 1, AIR_SHAPE_MISMATCH, "index no broadcast");
	int64_t rev[2] = {1, 0};
	a[1] = th_make(AIR_I64, i3, 1, d3);
	at[0] = th_ints("axes", rev, 2);
	th_expect_build_error("index", a, 3, at, 1, AIR_INVALID_ARGUMENT, "index axes decreasing");
	at[0] = th_ints("axes", ax0, 1);
	th_expect_build_error("index", a, 3, at, 1, AIR_INVALID_ARGUMENT, "index axes count");
	int64_t three[3] = {0, 1, 2};
	at[0] = th_ints("axes", three, 3);
	th_expect_build_error("index", a, 4, at, 1, AIR_INVALID_ARGUMENT, "index more tensors than dims");
	at[0] = th_ints("axes", ax0, 1);
	a[1] = th_make(AIR_F32, x, 1, d3);
	th_expect_build_error("index", a, 2, at, 1, AIR_UNSUPPORTED, "index float indices");
	int64_t ax5[1] = {5};
	a[1] = th_make(AIR_I64, i3, 1, d3);
	at[0] = th_ints("axes", ax5, 1);
	th_expect_build_error("index", a, 2, at, 1, AIR_INVALID_ARGUMENT, "index axis out of range");
	th_expect_build_error("index", a, 2, NULL, 0, AIR_INVALID_ARGUMENT, "index without axes");
}

/* x [s, 4] indexed on axis 1 by a [t] index (both symbolic): [s, t]; and
 * two symbolic index tensors whose sizes disagree at run time. */
static void test_index_symbolic(void)
{
	air_graph *g;
	CHECK_OK(air_graph_create(&g));
	air_dim s, t, u;
	CHECK_OK(air_graph_symbol(g, "s", &s));
	CHECK_OK(air_graph_symbol(g, "t", &t));
	CHECK_OK(air_graph_symbol(g, "u", &u));
	air_dim xd[2] = {s, 4};
	air_value in[3], y[2];
	CHECK_OK(air_graph_add_input(g, "x", AIR_F32, 2, xd, &in[0]));
	CHECK_OK(air_graph_add_input(g, "i", AIR_I64, 1, &t, &in[1]));
	CHECK_OK(air_graph_add_input(g, "j", AIR_I64, 1, &u, &in[2]));
	int64_t ax1[1] = {1}, ax01[2] = {0, 1};
	air_attr at[1] = {th_ints("axes", ax1, 1)};
	int n;
	air_value ops_in[2] = {in[0], in[1]};
	CHECK_OK(air_graph_add_node(g, "index", ops_in, 2, at, 1, &y[0], 1, &n));
	at[0] = th_ints("axes", ax01, 2);
	CHECK_OK(air_graph_add_node(g, "index", in, 3, at, 1, &y[1], 1, &n));
	air_dtype dt;
	int rank;
	air_dim got[AIR_MAX_RANK];
	CHECK_OK(air_graph_value_info(g, y[0], &dt, &rank, got));
	CHECK(dt == AIR_F32 && rank == 2 && got[0] == s && got[1] == t);
	CHECK_OK(air_graph_value_info(g, y[1], &dt, &rank, got));
	CHECK(rank == 1 && got[0] < 0); /* max(t, u), symbolic */
	CHECK_OK(air_graph_set_outputs(g, y, 2));
	air_model *m;
	CHECK_OK(air_compile(g, NULL, &m));
	air_graph_destroy(g);
	float x[40];
	for (int i = 0; i < 40; i++)
		x[i] = (float)i;
	int64_t iv[5] = {3, -1, 0, 2, 1}, jv[5] = {0, 1, 2, 3, -4};
	for (int run = 0; run < 3; run++) {
		/* runs 0 and 1: i and j of equal size; run 2: sizes 5 and 2 clash */
		int64_t sv = run ? 10 : 4, tv = run == 0 ? 1 : 5, uv = run == 2 ? 2 : tv;
		int64_t cx[2] = {sv, 4};
		air_session *ses;
		CHECK_OK(air_session_create(m, &ses));
		CHECK_OK(air_session_set_input(ses, 0, x, 2, cx));
		CHECK_OK(air_session_set_input(ses, 1, iv, 1, &tv));
		CHECK_OK(air_session_set_input(ses, 2, jv, 1, &uv));
		int64_t od[AIR_MAX_RANK];
		float y0[50], y1[5];
		CHECK_OK(air_session_output_shape(ses, 0, &rank, od));
		CHECK(rank == 2 && od[0] == sv && od[1] == tv);
		CHECK_OK(air_session_set_output(ses, 0, y0, sizeof y0));
		CHECK_OK(air_session_set_output(ses, 1, y1, sizeof y1));
		air_status st = air_session_run(ses);
		if (run < 2) {
			CHECK_OK(st);
			int bad = 0;
			for (int64_t r = 0; r < sv; r++)
				for (int64_t c = 0; c < tv; c++)
					bad += y0[r * tv + c] != x[r * 4 + (iv[c] + 4) % 4];
			for (int64_t c = 0; c < tv; c++) {
				int64_t a = (iv[c] + sv) % sv, b = (jv[c] + 4) % 4;
				bad += y1[c] != x[a * 4 + b];
			}
			CHECK(bad == 0);
		} else {
			CHECK(st == AIR_SHAPE_MISMATCH);
		}
		air_session_destroy(ses);
	}
	air_model_destroy(m);
}

int main(void)
{
	test_arange();
	test_creation_symbolic();
	test_full();
	test_embedding();
	test_embedding_symbolic();
	test_gather();
	test_index_select();
	test_index();
	test_index_mask_and_errors();
	test_index_symbolic();
	return check_report("test_ops_index");
}

/* test_ops_index_copy.c - index_copy through the public API against values
 * computed here: every axis, i32 and i64 indices, repeated indices (the
 * last wins, as eager's serial loop), sizes that split across threads, out
 * of place (x a graph input) and in place (x an activation the plan lets
 * the step overwrite), and the errors: bad index at run time, bad shapes at
 * build time. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "op_harness.h"

static int64_t numel_of(int rank, const int64_t *dims)
{
	int64_t n = 1;
	for (int d = 0; d < rank; d++)
		n *= dims[d];
	return n;
}

/* want = x with src's slices j at idx[j] along axis, j in order */
static double *expected(const double *x, const double *src, const int64_t *idx, int rank, const int64_t *xd,
			int axis, int64_t n)
{
	int64_t nx = numel_of(rank, xd), outer = 1, inner = 1;
	for (int d = 0; d < axis; d++)
		outer *= xd[d];
	for (int d = axis + 1; d < rank; d++)
		inner *= xd[d];
	double *want = malloc(sizeof(double) * (size_t)(nx + 1));
	memcpy(want, x, sizeof(double) * (size_t)nx);
	for (int64_t o = 0; o < outer; o++)
		for (int64_t j = 0; j < n; j++)
			for (int64_t i = 0; i < inner; i++)
				want[(o * xd[axis] + idx[j]) * inner + i] = src[(o * n + j) * inner + i];
	return want;
}

/* x -> neg -> neg -> index_copy(., idx, src): the double negation is x
 * again, and the index_copy may take over its dying buffer. Returns the
 * output (free it) and whether the step ran in place (from the report). */
static float *run_on_activation(const float *x, int rank, const int64_t *xd, const int64_t *idx, int64_t n,
				const float *src, const int64_t *sd, int axis, bool *inplace)
{
	air_graph *g = NULL;
	air_model *m = NULL;
	air_session *s = NULL;
	float *y = NULL;
	air_value in[3], t1, t2, out;
	int no;
	CHECK(air_graph_create(&g) == AIR_OK);
	CHECK(air_graph_add_input(g, "x", AIR_F32, rank, xd, &in[0]) == AIR_OK);
	CHECK(air_graph_add_input(g, "idx", AIR_I64, 1, &n, &in[1]) == AIR_OK);
	CHECK(air_graph_add_input(g, "src", AIR_F32, rank, sd, &in[2]) == AIR_OK);
	CHECK(air_graph_add_node(g, "neg", &in[0], 1, NULL, 0, &t1, 1, &no) == AIR_OK);
	CHECK(air_graph_add_node(g, "neg", &t1, 1, NULL, 0, &t2, 1, &no) == AIR_OK);
	air_value args[3] = {t2, in[1], in[2]};
	air_attr at = th_int("axis", axis);
	CHECK(air_graph_add_node(g, "index_copy", args, 3, &at, 1, &out, 1, &no) == AIR_OK);
	CHECK(air_graph_set_outputs(g, &out, 1) == AIR_OK);
	air_compile_options opt;
	air_compile_options_init(&opt);
	opt.flags = AIR_COMPILE_NO_FUSION; /* keep the negations as steps of their own */
	if (air_compile(g, &opt, &m) != AIR_OK) {
		fprintf(stderr, "compile: %s\n", air_last_error());
		CHECK(false);
		goto done;
	}
	/* the report's step line ends with "in place of input 0" when it did */
	const char *rep = air_model_report(m);
	const char *line = strstr(rep, "index_copy");
	*inplace = line && strstr(line, "in place of input 0") != NULL;
	CHECK(air_session_create(m, &s) == AIR_OK);
	CHECK(air_session_set_input(s, 0, x, rank, xd) == AIR_OK);
	CHECK(air_session_set_input(s, 1, idx, 1, &n) == AIR_OK);
	CHECK(air_session_set_input(s, 2, src, rank, sd) == AIR_OK);
	int64_t nx = numel_of(rank, xd);
	y = malloc(sizeof(float) * (size_t)(nx + 1));
	CHECK(air_session_set_output(s, 0, y, sizeof(float) * (size_t)nx) == AIR_OK);
	if (air_session_run(s) != AIR_OK) {
		fprintf(stderr, "run: %s\n", air_last_error());
		CHECK(false);
	}
done:
	air_session_destroy(s);
	air_model_destroy(m);
	air_graph_destroy(g);
	return y;
}

static void test_values(void)
{
	static const struct {
		int rank;
		int64_t xd[4];
		int axis;
		int64_t n;
		bool repeat;
	} cases[] = {
		{2, {4, 5}, 0, 3, false},        {2, {4, 5}, 1, 2, true},         {2, {4, 5}, -1, 5, false},
		{4, {1, 2, 16, 8}, 2, 1, false}, {4, {2, 4, 64, 32}, 2, 7, true}, {3, {300, 20, 30}, 1, 4, false},
		{1, {9}, 0, 9, true},            {3, {2, 0, 5}, 2, 2, false},     {2, {3, 6}, 1, 0, false},
	};
	for (int ti = 0; ti < 2; ti++) {
		air_dtype idt = ti ? AIR_I32 : AIR_I64;
		for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
			int rank = cases[k].rank, axis = cases[k].axis < 0 ? cases[k].axis + rank : cases[k].axis;
			const int64_t *xd = cases[k].xd;
			int64_t n = cases[k].n, sd[4];
			for (int d = 0; d < rank; d++)
				sd[d] = d == axis ? n : xd[d];
			int64_t nx = numel_of(rank, xd), ns = numel_of(rank, sd);
			double *xv = th_values(nx, AIR_F32), *sv = th_values(ns, AIR_F32);
			float *x = th_as(xv, nx, AIR_F32), *src = th_as(sv, ns, AIR_F32);
			int64_t *iv = malloc(sizeof(int64_t) * (size_t)(n + 1));
			void *idx = malloc(8 * (size_t)(n + 1));
			for (int64_t j = 0; j < n; j++) {
				/* distinct slots, or (repeat) every index twice-ish */
				iv[j] = cases[k].repeat ? (j / 2) % xd[axis] : (j * 7 + 1) % xd[axis];
				if (!cases[k].repeat)
					for (int64_t i = 0; i < j; i++)
						if (iv[i] == iv[j])
							iv[j] = (iv[j] + 1) % xd[axis], i = -1;
				if (idt == AIR_I64)
					((int64_t *)idx)[j] = iv[j];
				else
					((int32_t *)idx)[j] = (int32_t)iv[j];
			}
			double *want = expected(xv, sv, iv, rank, xd, axis, n);
			char label[80];
			th_arg args[3] = {th_make(AIR_F32, x, rank, xd), th_make(idt, idx, 1, &n),
					  th_make(AIR_F32, src, rank, sd)};
			air_attr at[1] = {th_int("axis", cases[k].axis)};
			air_model *m = th_compile("index_copy", args, 3, at, 1, 0);
			if (m) {
				int r;
				int64_t got[AIR_MAX_RANK];
				void *y = th_run(m, args, 3, &r, got);
				if (y) {
					snprintf(label, sizeof label, "index_copy case %zu %s", k, air_dtype_name(idt));
					CHECK(r == rank);
					th_compare(label, AIR_F32, y, want, NULL, nx, 0, 0);
				}
				free(y);
				air_model_destroy(m);
			}
			if (idt == AIR_I64 && nx > 0) {
				bool inplace = false;
				float *y = run_on_activation(x, rank, xd, idx, n, src, sd, cases[k].axis, &inplace);
				snprintf(label, sizeof label, "index_copy in place case %zu", k);
				CHECK(inplace);
				if (y)
					th_compare(label, AIR_F32, y, want, NULL, nx, 0, 0);
				free(y);
			}
			free(want);
			free(iv);
			free(idx);
			free(xv);
			free(sv);
			free(x);
			free(src);
		}
	}
}

static void test_errors(void)
{
	float x[10] = {0}, src[2] = {1, 2};
	int64_t d25[2] = {2, 5}, d21[2] = {2, 1}, d1[1] = {1}, d22[2] = {2, 2};
	/* out of range and negative indices: a run-time error naming the op */
	int64_t bad[2] = {5, -1};
	for (int k = 0; k < 2; k++) {
		th_arg args[3] = {th_make(AIR_F32, x, 2, d25), th_make(AIR_I64, &bad[k], 1, d1),
				  th_make(AIR_F32, src, 2, d21)};
		air_attr at[1] = {th_int("axis", 1)};
		air_model *m = th_compile("index_copy", args, 3, at, 1, 0);
		if (!m)
			continue;
		int r;
		int64_t got[AIR_MAX_RANK];
		air_status st;
		void *y = th_run_status(m, args, 3, &r, got, &st);
		CHECK(y == NULL && st == AIR_INVALID_ARGUMENT);
		CHECK(strstr(air_last_error(), "index_copy") != NULL);
		free(y);
		air_model_destroy(m);
	}
	int64_t ok = 0;
	air_attr at[1] = {th_int("axis", 1)};
	/* source of the wrong length on the axis, of another dtype, of another rank */
	th_arg args[3] = {th_make(AIR_F32, x, 2, d25), th_make(AIR_I64, &ok, 1, d1), th_make(AIR_F32, src, 2, d22)};
	th_expect_build_error("index_copy", args, 3, at, 1, AIR_SHAPE_MISMATCH, "index_copy source length");
	args[2] = th_make(AIR_F64, src, 2, d21);
	th_expect_build_error("index_copy", args, 3, at, 1, AIR_DTYPE_MISMATCH, "index_copy source dtype");
	args[2] = th_make(AIR_F32, src, 1, d1);
	th_expect_build_error("index_copy", args, 3, at, 1, AIR_SHAPE_MISMATCH, "index_copy source rank");
	/* float index, bad axis */
	args[2] = th_make(AIR_F32, src, 2, d21);
	args[1] = th_make(AIR_F32, src, 1, d1);
	th_expect_build_error("index_copy", args, 3, at, 1, AIR_UNSUPPORTED, "index_copy float index");
	args[1] = th_make(AIR_I64, &ok, 1, d1);
	at[0] = th_int("axis", 2);
	th_expect_build_error("index_copy", args, 3, at, 1, AIR_INVALID_ARGUMENT, "index_copy axis");
}

/* size_scalar: a symbolic dim as a 0-d i64 tensor, at two sizes, plus a
 * constant dim */
static void test_size_scalar(void)
{
	air_graph *g = NULL;
	air_model *m = NULL;
	air_dim s, s2;
	air_value x, y[2];
	int no;
	CHECK(air_graph_create(&g) == AIR_OK);
	CHECK(air_graph_symbol(g, "seq", &s) == AIR_OK);
	CHECK(air_graph_dim_expr(g, AIR_DIM_MUL, s, 3, &s2) == AIR_OK);
	CHECK(air_graph_add_input(g, "x", AIR_F32, 1, &s, &x) == AIR_OK);
	air_attr a = {"size", AIR_ATTR_INT, s2, 0, NULL, 0};
	CHECK(air_graph_add_node(g, "size_scalar", NULL, 0, &a, 1, &y[0], 1, &no) == AIR_OK);
	a.i = 11;
	CHECK(air_graph_add_node(g, "size_scalar", NULL, 0, &a, 1, &y[1], 1, &no) == AIR_OK);
	CHECK(air_graph_set_outputs(g, y, 2) == AIR_OK);
	CHECK(air_compile(g, NULL, &m) == AIR_OK);
	for (int64_t n = 1; m && n <= 9; n += 8) {
		air_session *ss = NULL;
		float xs[9] = {0};
		int64_t got[2] = {-1, -1};
		CHECK(air_session_create(m, &ss) == AIR_OK);
		CHECK(air_session_set_input(ss, 0, xs, 1, &n) == AIR_OK);
		CHECK(air_session_set_output(ss, 0, &got[0], 8) == AIR_OK);
		CHECK(air_session_set_output(ss, 1, &got[1], 8) == AIR_OK);
		CHECK(air_session_run(ss) == AIR_OK);
		CHECK(got[0] == 3 * n && got[1] == 11);
		air_session_destroy(ss);
	}
	air_model_destroy(m);
	air_graph_destroy(g);
}

int main(void)
{
	test_values();
	test_errors();
	test_size_scalar();
	return check_report("test_ops_index_copy");
}

/* op_harness.h - building, compiling and running one-op graphs through the
 * public API for the op tests (test_ops_*.c): inputs may be graph inputs
 * (optionally with symbolic dims, to run one model at several sizes) or
 * constants; results are compared with values the test computes in double. */
#ifndef AIR_TESTS_OP_HARNESS_H
#define AIR_TESTS_OP_HARNESS_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "air/air.h"
#include "check.h"

enum { TH_MAX_ARGS = 8 };

/* One input of the op. dims are the concrete sizes of this run. sym[d] > 0
 * makes dim d the symbol numbered sym[d] (shared between args); constant
 * makes the arg a graph constant (its data is then read at compile time). */
typedef struct th_arg {
	air_dtype dtype;
	int rank;
	int64_t dims[AIR_MAX_RANK];
	const void *data;
	int constant;
	int sym[AIR_MAX_RANK];
} th_arg;

static uint64_t th_rng = 0x243f6a8885a308d3ull;

/* uniform in [-1, 1) */
static inline double th_rand(void)
{
	th_rng = th_rng * 6364136223846793005ull + 1442695040888963407ull;
	return (double)((th_rng >> 11) & ((1ull << 53) - 1)) / (double)(1ull << 52) - 1.0;
}

static inline float *th_randf(int64_t n)
{
	float *p = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
	for (int64_t i = 0; i < n; i++)
		p[i] = (float)th_rand();
	return p;
}

static inline double *th_randd(int64_t n)
{
	double *p = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
	for (int64_t i = 0; i < n; i++)
		p[i] = th_rand();
	return p;
}

/* n values in [-1, 1) exactly representable in dt (f32 or f64), so the
 * test's double arithmetic sees the same inputs as the kernel */
static inline double *th_values(int64_t n, air_dtype dt)
{
	double *p = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
	for (int64_t i = 0; i < n; i++)
		p[i] = dt == AIR_F32 ? (double)(float)th_rand() : th_rand();
	return p;
}

/* A copy of v[0..n) as dt (f32, f64, or bool from v != 0). */
static inline void *th_as(const double *v, int64_t n, air_dtype dt)
{
	size_t es = air_dtype_size(dt);
	char *p = malloc(es * (size_t)(n > 0 ? n : 1));
	for (int64_t i = 0; i < n; i++) {
		if (dt == AIR_F32)
			((float *)p)[i] = (float)v[i];
		else if (dt == AIR_F64)
			((double *)p)[i] = v[i];
		else
			((uint8_t *)p)[i] = v[i] != 0;
	}
	return p;
}

static inline th_arg th_make(air_dtype dt, const void *data, int rank, const int64_t *dims)
{
	th_arg a;
	memset(&a, 0, sizeof a);
	a.dtype = dt;
	a.rank = rank;
	for (int i = 0; i < rank; i++)
		a.dims[i] = dims[i];
	a.data = data;
	return a;
}

/* Builds a graph of one node. Returns the node's status; on success *graph
 * holds the graph (outputs set), else NULL. */
static inline air_status th_build(const char *op, const th_arg *args, int n, const air_attr *attrs, int na,
				  air_graph **graph)
{
	air_graph *g = NULL;
	*graph = NULL;
	air_status st = air_graph_create(&g);
	if (st != AIR_OK)
		return st;
	air_dim syms[16];
	int have[16] = {0};
	air_value vals[TH_MAX_ARGS];
	for (int i = 0; i < n && st == AIR_OK; i++) {
		air_dim dims[AIR_MAX_RANK];
		for (int d = 0; d < args[i].rank; d++) {
			int s = args[i].sym[d];
			dims[d] = args[i].dims[d];
			if (s > 0) {
				if (!have[s]) {
					st = air_graph_symbol(g, NULL, &syms[s]);
					have[s] = 1;
				}
				dims[d] = syms[s];
			}
		}
		if (st != AIR_OK)
			break;
		if (args[i].constant)
			st = air_graph_add_constant(g, args[i].dtype, args[i].rank, args[i].dims, args[i].data, 0,
						    &vals[i]);
		else
			st = air_graph_add_input(g, NULL, args[i].dtype, args[i].rank, dims, &vals[i]);
	}
	air_value out[4];
	int nout = 0;
	if (st == AIR_OK)
		st = air_graph_add_node(g, op, vals, n, attrs, na, out, 4, &nout);
	if (st == AIR_OK)
		st = air_graph_set_outputs(g, out, 1);
	if (st != AIR_OK) {
		air_graph_destroy(g);
		return st;
	}
	*graph = g;
	return AIR_OK;
}

/* Builds and compiles; NULL (and a failed check) if either fails. */
static inline air_model *th_compile(const char *op, const th_arg *args, int n, const air_attr *attrs, int na,
				    uint32_t flags)
{
	air_graph *g;
	air_status st = th_build(op, args, n, attrs, na, &g);
	CHECK_OK(st);
	if (st != AIR_OK)
		return NULL;
	air_compile_options o;
	air_compile_options_init(&o);
	o.flags = flags;
	air_model *m = NULL;
	st = air_compile(g, &o, &m);
	CHECK_OK(st);
	air_graph_destroy(g);
	return m;
}

/* Runs a model on the non-constant args (in order) and returns the output
 * in a new buffer (free it), its rank and dims. NULL on failure, with the
 * status in *status if given (failure is then not counted as a failed
 * check, so tests can expect run-time errors). */
static inline void *th_run_status(air_model *m, const th_arg *args, int n, int *rank, int64_t *dims,
				  air_status *status)
{
	air_session *s = NULL;
	air_status st = air_session_create(m, &s);
	int in = 0;
	for (int i = 0; i < n && st == AIR_OK; i++)
		if (!args[i].constant)
			st = air_session_set_input(s, in++, args[i].data, args[i].rank, args[i].dims);
	if (st == AIR_OK)
		st = air_session_output_shape(s, 0, rank, dims);
	void *out = NULL;
	if (st == AIR_OK) {
		air_dtype dt;
		air_model_output_info(m, 0, &dt, NULL, NULL);
		size_t bytes = air_dtype_size(dt);
		for (int d = 0; d < *rank; d++)
			bytes *= (size_t)dims[d];
		out = malloc(bytes ? bytes : 1);
		/* poison, so an element the kernel forgets to write shows */
		memset(out, 0x7f, bytes);
		st = air_session_set_output(s, 0, out, bytes);
		if (st == AIR_OK)
			st = air_session_run(s);
	}
	air_session_destroy(s);
	if (status)
		*status = st;
	else
		CHECK_OK(st);
	if (st != AIR_OK) {
		free(out);
		return NULL;
	}
	return out;
}

static inline void *th_run(air_model *m, const th_arg *args, int n, int *rank, int64_t *dims)
{
	return th_run_status(m, args, n, rank, dims, NULL);
}

/* got[i] against want[i] within tol_abs + tol_rel * mag[i] (mag: the sum of
 * the magnitudes of the terms, so the bound scales with cancellation).
 * Reports the first few mismatches under the given label. */
static inline int th_compare(const char *label, air_dtype dt, const void *got, const double *want, const double *mag,
			     int64_t n, double tol_rel, double tol_abs)
{
	int bad = 0;
	for (int64_t i = 0; i < n; i++) {
		double g = dt == AIR_F32 ? ((const float *)got)[i] : ((const double *)got)[i];
		double tol = tol_abs + tol_rel * (mag ? mag[i] : fabs(want[i]));
		int same_nan = isnan(g) && isnan(want[i]);
		if (!same_nan && !(fabs(g - want[i]) <= tol)) {
			if (bad < 5)
				fprintf(stderr, "%s: element %lld is %.9g, want %.9g (tol %.3g)\n", label, (long long)i, g,
					want[i], tol);
			bad++;
		}
	}
	check_count++;
	if (bad) {
		check_failures++;
		fprintf(stderr, "%s: %d of %lld elements differ\n", label, bad, (long long)n);
	}
	return bad;
}

/* Expects building the node to fail with status want and a message that
 * names the op. */
static inline void th_expect_build_error(const char *op, const th_arg *args, int n, const air_attr *attrs, int na,
					 air_status want, const char *label)
{
	air_graph *g = NULL;
	air_status st = th_build(op, args, n, attrs, na, &g);
	air_graph_destroy(g);
	check_count++;
	if (st != want || !strstr(air_last_error(), op)) {
		check_failures++;
		fprintf(stderr, "%s: want %s, got %s: '%s'\n", label, air_status_string(want), air_status_string(st),
			air_last_error());
	}
}

static inline air_attr th_int(const char *name, int64_t v)
{
	air_attr a = {name, AIR_ATTR_INT, v, 0, NULL, 0};
	return a;
}

static inline air_attr th_float(const char *name, double v)
{
	air_attr a = {name, AIR_ATTR_FLOAT, 0, v, NULL, 0};
	return a;
}

static inline air_attr th_ints(const char *name, const int64_t *v, int n)
{
	air_attr a = {name, AIR_ATTR_INTS, 0, 0, v, n};
	return a;
}

#endif

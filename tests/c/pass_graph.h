/* pass_graph.h - what the pass tests share: random data, graphs built
 * through the public API (inputs, borrowed constants, nodes, attributes),
 * compiling with chosen passes off, the step count from the report, and
 * running a model on given inputs. Included by one test file each. */
#ifndef AIR_TESTS_PASS_GRAPH_H
#define AIR_TESTS_PASS_GRAPH_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "air/air.h"
#include "check.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static inline float frand(void)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (float)((double)(rng >> 11) / (double)(1ull << 53) * 2.0 - 1.0);
}

static float *randv(int64_t n, float lo, float hi)
{
	float *p = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
	for (int64_t i = 0; i < n; i++)
		p[i] = lo + (hi - lo) * 0.5f * (frand() + 1.0f);
	return p;
}

/* Constants added to graphs are kept here and freed at the end. */
static float *keep[1024];
static int nkeep;

static inline air_value constant(air_graph *g, int rank, const int64_t *dims, float lo, float hi)
{
	int64_t n = 1;
	for (int d = 0; d < rank; d++)
		n *= dims[d];
	float *p = randv(n, lo, hi);
	keep[nkeep++] = p;
	air_value v;
	CHECK_OK(air_graph_add_constant(g, AIR_F32, rank, dims, p, AIR_CONSTANT_BORROW, &v));
	return v;
}

/* An f32 scalar constant (0-d), borrowed from memory kept until the end. */
static inline air_value scalar(air_graph *g, float v)
{
	float *p = malloc(sizeof v);
	*p = v;
	keep[nkeep++] = p;
	air_value c;
	CHECK_OK(air_graph_add_constant(g, AIR_F32, 0, NULL, p, AIR_CONSTANT_BORROW, &c));
	return c;
}

static inline air_value input(air_graph *g, const char *name, int rank, const int64_t *dims)
{
	air_value v;
	CHECK_OK(air_graph_add_input(g, name, AIR_F32, rank, dims, &v));
	return v;
}

static inline air_value node(air_graph *g, const char *op, const air_value *in, int n, const air_attr *attrs, int na)
{
	air_value out = 0;
	int nout;
	CHECK_OK(air_graph_add_node(g, op, in, n, attrs, na, &out, 1, &nout));
	return out;
}

static inline air_value binary(air_graph *g, const char *op, air_value a, air_value b)
{
	air_value in[2] = {a, b};
	return node(g, op, in, 2, NULL, 0);
}

static inline air_attr iattr(const char *name, int64_t v)
{
	air_attr a = {name, AIR_ATTR_INT, v, 0, NULL, 0};
	return a;
}

static inline air_attr ints(const char *name, const int64_t *v, int n)
{
	air_attr a = {name, AIR_ATTR_INTS, 0, 0, v, n};
	return a;
}

static air_model *compile(const air_graph *g, uint32_t flags, uint32_t disabled)
{
	air_compile_options o;
	air_compile_options_init(&o);
	o.flags = flags;
	o.disabled_passes = disabled;
	air_model *m = NULL;
	CHECK_OK(air_compile(g, &o, &m));
	return m;
}

static inline int steps(const air_model *m)
{
	const char *p = m ? strstr(air_model_report(m), "steps: ") : NULL;
	return p ? atoi(p + 7) : -1;
}

/* Steps of op ("permute", "rms_norm") in m's report's step list. */
static inline int count_steps(const air_model *m, const char *op)
{
	const char *r = strstr(air_model_report(m), "kernels per step:");
	int c = 0;
	char key[32];
	snprintf(key, sizeof key, " %s ", op);
	for (const char *p = r ? strstr(r, key) : NULL; p; p = strstr(p + 1, key))
		c++;
	return c;
}

/* Runs m on inputs (f32, dims given per input) and returns output 0. */
static float *run(air_model *m, int n_in, float *const *in, const int *rank, int64_t (*dims)[4], int64_t *numel)
{
	air_session *s = NULL;
	CHECK_OK(air_session_create(m, &s));
	for (int i = 0; i < n_in; i++)
		CHECK_OK(air_session_set_input(s, i, in[i], rank[i], dims[i]));
	int r = 0;
	int64_t od[AIR_MAX_RANK];
	CHECK_OK(air_session_output_shape(s, 0, &r, od));
	int64_t n = 1;
	for (int d = 0; d < r; d++)
		n *= od[d];
	float *out = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
	CHECK_OK(air_session_set_output(s, 0, out, sizeof(float) * (size_t)n));
	/* other outputs go to scratch */
	float *extra[4] = {NULL};
	for (int o = 1; o < air_model_output_count(m) && o < 4; o++) {
		int64_t e = 1;
		CHECK_OK(air_session_output_shape(s, o, &r, od));
		for (int d = 0; d < r; d++)
			e *= od[d];
		extra[o] = malloc(sizeof(float) * (size_t)(e > 0 ? e : 1));
		CHECK_OK(air_session_set_output(s, o, extra[o], sizeof(float) * (size_t)e));
	}
	CHECK_OK(air_session_run(s));
	air_session_destroy(s);
	for (int o = 1; o < 4; o++)
		free(extra[o]);
	*numel = n;
	return out;
}

#endif

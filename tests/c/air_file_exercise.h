/* air_file_exercise.h - everything a damaged or hostile .air file can
 * reach, in one call (the damage test, the allocation-failure test and the
 * libFuzzer harness use it): open it; bind every external constant to
 * zeroed memory of its size; read its metadata and names; rebuild the
 * graph; compile it; run it on small inputs. Returns the first failure's
 * status (AIR_OK if the file loaded and ran). */
#ifndef AIR_TESTS_AIR_FILE_EXERCISE_H
#define AIR_TESTS_AIR_FILE_EXERCISE_H

#include <stdlib.h>
#include <string.h>

#include "air/air.h"
#include "air_file_graphs.h"

#define AFX_MAX_EXTERNALS 16
#define AFX_MAX_EXTERNAL_BYTES ((size_t)16 << 20)

/* The outputs of a run, when the caller asks for them. */
typedef struct afx_result {
	int n;
	void *outs[64];
	size_t nbytes[64];
	air_dtype dtype[64];
} afx_result;

static inline void afx_result_free(afx_result *r)
{
	for (int o = 0; o < r->n; o++)
		free(r->outs[o]);
	r->n = 0;
}

/* Keeps the run's outputs in res, or frees them. */
static air_status afx_run(const air_model *m, afx_result *res)
{
	void *outs[64] = {0};
	size_t nbytes[64];
	int n = air_model_output_count(m);
	if (n > 64)
		return AIR_UNSUPPORTED;
	air_status st = agf_run(m, 3, 11, outs, nbytes);
	for (int o = 0; st == AIR_OK && o < n; o++) {
		if (res) {
			res->outs[o] = outs[o];
			res->nbytes[o] = nbytes[o];
			air_model_output_info(m, o, &res->dtype[o], NULL, NULL);
			res->n = o + 1;
		} else {
			free(outs[o]);
		}
	}
	return st;
}

static air_status afx_exercise(const void *data, size_t size, uint32_t load_flags, afx_result *res)
{
	air_load_options lo;
	air_load_options_init(&lo);
	lo.flags = load_flags;
	air_file *f;
	air_status st = air_file_open_buffer(data, size, &lo, &f);
	if (st != AIR_OK)
		return st;
	/* what air info reads */
	for (int i = 0; i < air_file_meta_count(f); i++) {
		const char *k, *v;
		if (air_file_meta_at(f, i, &k, &v) == AIR_OK && (!k || !v || strlen(k) + strlen(v) == (size_t)-1))
			st = AIR_INTERNAL;
	}
	for (int i = 0; i < air_file_node_count(f); i++)
		if (!air_file_node_op(f, i))
			st = AIR_INTERNAL;
	(void)air_file_input_name(f, 0);
	(void)air_file_output_name(f, 0);
	int n_ext = air_file_external_count(f);
	air_external ext[AFX_MAX_EXTERNALS];
	void *mem[AFX_MAX_EXTERNALS] = {0};
	if (n_ext > AFX_MAX_EXTERNALS)
		st = AIR_UNSUPPORTED;
	for (int i = 0; st == AIR_OK && i < n_ext; i++) {
		air_dtype dt;
		int rank;
		int64_t dims[AIR_MAX_RANK];
		st = air_file_external_info(f, i, NULL, &dt, &rank, dims);
		size_t n = air_dtype_size(dt);
		for (int d = 0; st == AIR_OK && d < rank; d++)
			if (__builtin_mul_overflow(n, (size_t)dims[d], &n) || n > AFX_MAX_EXTERNAL_BYTES)
				st = AIR_UNSUPPORTED;
		if (st == AIR_OK && !(mem[i] = calloc(1, n + 1)))
			st = AIR_OUT_OF_MEMORY;
		ext[i] = (air_external){.name = NULL, .index = i, .data = mem[i], .nbytes = n};
	}
	air_file_close(f);
	f = NULL;
	lo.externals = ext;
	lo.n_externals = n_ext;
	if (st == AIR_OK)
		st = air_file_open_buffer(data, size, &lo, &f);
	air_graph *g = NULL;
	if (st == AIR_OK)
		st = air_file_graph(f, &g);
	air_graph_destroy(g);
	air_model *m = NULL;
	if (st == AIR_OK) {
		/* one thread: the damaged graphs' results do not matter, and
		 * this keeps the allocation-failure runs deterministic */
		air_compile_options co;
		air_file_compile_options(f, &co);
		co.num_threads = 1;
		co.flags &= ~(uint32_t)AIR_COMPILE_AUTOTUNE;
		st = air_file_compile(f, &co, &m);
	}
	air_file_close(f);
	if (st == AIR_OK)
		st = afx_run(m, res);
	air_model_destroy(m);
	for (int i = 0; i < AFX_MAX_EXTERNALS; i++)
		free(mem[i]);
	return st;
}

#endif

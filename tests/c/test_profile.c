/* test_profile.c - the per-step profile of a session (runtime/session.c):
 * one row per step with its kernel and op, runs counted per run, times
 * within the runs' wall time, and bad step numbers refused. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "air/air.h"
#include "check.h"

/* x -> exp -> matmul by a constant -> out: two steps, the second much
 * heavier than the first */
static air_model *compile_two_steps(int n)
{
	air_graph *g = NULL;
	air_model *m = NULL;
	CHECK_OK(air_graph_create(&g));
	air_dim d[2] = {n, n};
	air_value x = 0, in[2], out = 0;
	int no = 0;
	CHECK_OK(air_graph_add_input(g, "x", AIR_F32, 2, d, &x));
	CHECK_OK(air_graph_add_node(g, "exp", &x, 1, NULL, 0, &in[0], 1, &no));
	float *w = calloc((size_t)n * (size_t)n, sizeof *w);
	CHECK(w != NULL);
	for (int i = 0; i < n; i++)
		w[(size_t)i * (size_t)n + (size_t)i] = 1.0f;
	int64_t wd[2] = {n, n};
	CHECK_OK(air_graph_add_constant(g, AIR_F32, 2, wd, w, 0, &in[1]));
	free(w);
	CHECK_OK(air_graph_add_node(g, "mm", in, 2, NULL, 0, &out, 1, &no));
	CHECK_OK(air_graph_set_outputs(g, &out, 1));
	air_compile_options o;
	air_compile_options_init(&o);
	o.flags = AIR_COMPILE_NO_FUSION;
	CHECK_OK(air_compile(g, &o, &m));
	air_graph_destroy(g);
	return m;
}

int main(void)
{
	enum { N = 96 };
	air_model *m = compile_two_steps(N);
	air_session *s = NULL;
	CHECK_OK(air_session_create(m, &s));
	CHECK(air_session_profile_steps(s) == 2);
	uint64_t runs = 99;
	CHECK_OK(air_session_profile(s, 0, NULL, NULL, &runs, NULL));
	CHECK(runs == 0);

	float *x = calloc(N * N, sizeof *x), *y = calloc(N * N, sizeof *y);
	CHECK(x && y);
	int64_t dims[2] = {N, N};
	CHECK_OK(air_session_set_input(s, 0, x, 2, dims));
	CHECK_OK(air_session_set_output(s, 0, y, N * N * sizeof *y));
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int r = 0; r < 3; r++)
		CHECK_OK(air_session_run(s));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double wall = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
	CHECK(y[0] == 1.0f && y[N * N - 1] == 1.0f); /* exp(0) @ I: all ones */

	const char *kernel = NULL, *op = NULL;
	double t_exp = -1, t_mm = -1;
	CHECK_OK(air_session_profile(s, 0, &kernel, &op, &runs, &t_exp));
	CHECK(kernel && kernel[0] && op && strcmp(op, "exp") == 0);
	CHECK(runs == 3);
	CHECK_OK(air_session_profile(s, 1, &kernel, &op, &runs, &t_mm));
	CHECK(op && strcmp(op, "mm") == 0 && runs == 3);
	CHECK(t_exp >= 0 && t_mm > 0);
	/* the steps' times are measured inside the runs: they cannot add up to
	 * more than the runs took (a comparison of the two steps with each
	 * other could flake on a busy machine) */
	CHECK(t_exp + t_mm <= wall);

	/* a reset zeroes the counts and times; later runs count from there */
	air_session_profile_reset(s);
	CHECK_OK(air_session_profile(s, 1, NULL, NULL, &runs, &t_mm));
	CHECK(runs == 0 && t_mm == 0.0);
	CHECK_OK(air_session_run(s));
	CHECK_OK(air_session_profile(s, 1, NULL, NULL, &runs, &t_mm));
	CHECK(runs == 1 && t_mm > 0);
	air_session_profile_reset(NULL); /* accepted, does nothing */

	CHECK(air_session_profile(s, 2, NULL, NULL, NULL, NULL) == AIR_INVALID_ARGUMENT);
	CHECK(air_session_profile(s, -1, NULL, NULL, NULL, NULL) == AIR_INVALID_ARGUMENT);
	CHECK(air_session_profile(NULL, 0, NULL, NULL, NULL, NULL) == AIR_INVALID_ARGUMENT);
	CHECK(air_session_profile_steps(NULL) == 0);

	free(x);
	free(y);
	air_session_destroy(s);
	air_model_destroy(m);
	return check_report("test_profile");
}

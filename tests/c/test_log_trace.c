/* test_log_trace.c - libair's log callback and levels (core/log.c), the
 * compile phases of a model and the per-run step events of a traced session
 * (runtime/session.c): levels filter, one event per step per run on the
 * calling thread, events inside the runs' wall time, capacity respected. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "air/air.h"
#include "check.h"

static int n_msgs[4];
static int saw_pass, saw_compiled;

static void on_log(air_log_level level, const char *msg, void *user)
{
	CHECK(user == (void *)&n_msgs);
	CHECK(level >= AIR_LOG_ERROR && level <= AIR_LOG_DEBUG);
	n_msgs[level]++;
	if (strncmp(msg, "pass simplify:", 14) == 0)
		saw_pass = 1;
	if (strncmp(msg, "compiled ", 9) == 0)
		saw_compiled = 1;
}

/* x -> exp -> matmul by I -> out: two steps */
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

static uint64_t now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

int main(void)
{
	enum { N = 33 };
	/* no callback: nothing delivered, the default level is warning */
	CHECK(air_get_log_level() == AIR_LOG_WARNING);
	air_model *m = compile_two_steps(N);
	air_model_destroy(m);

	/* warning: a normal compile says nothing */
	air_set_log_callback(on_log, &n_msgs);
	m = compile_two_steps(N);
	air_model_destroy(m);
	CHECK(n_msgs[0] + n_msgs[1] + n_msgs[2] + n_msgs[3] == 0);

	/* info: the compile summary, no pass lines */
	air_set_log_level(AIR_LOG_INFO);
	m = compile_two_steps(N);
	air_model_destroy(m);
	CHECK(saw_compiled && !saw_pass && n_msgs[AIR_LOG_DEBUG] == 0);

	/* debug: each pass too; out-of-range levels are clamped */
	air_set_log_level((air_log_level)9);
	CHECK(air_get_log_level() == AIR_LOG_DEBUG);
	uint64_t before = now();
	m = compile_two_steps(N);
	uint64_t after = now();
	CHECK(saw_pass && n_msgs[AIR_LOG_DEBUG] > 0);
	air_set_log_callback(NULL, NULL);
	air_set_log_level(AIR_LOG_WARNING);

	/* compile phases: the passes, then kernel selection and the plan, in order, inside the compile */
	int np = air_model_compile_phases(m);
	CHECK(np >= 3);
	const char *name = NULL;
	uint64_t t0 = 0, dt = 0, last = 0;
	for (int i = 0; i < np; i++) {
		CHECK_OK(air_model_compile_phase(m, i, &name, &t0, &dt));
		CHECK(name && name[0] && t0 >= before && t0 + dt <= after && t0 >= last);
		last = t0;
	}
	CHECK_OK(air_model_compile_phase(m, np - 2, &name, NULL, NULL));
	CHECK(strcmp(name, "kernel selection") == 0);
	CHECK(air_model_compile_phase(m, np, NULL, NULL, NULL) == AIR_INVALID_ARGUMENT);

	/* trace: 2 steps x 3 runs, then a capacity of 4 keeps 4 and drops 2 */
	air_session *s = NULL;
	CHECK_OK(air_session_create(m, &s));
	float *x = calloc(N * N, sizeof *x), *y = calloc(N * N, sizeof *y);
	CHECK(x && y);
	int64_t dims[2] = {N, N};
	CHECK_OK(air_session_set_input(s, 0, x, 2, dims));
	CHECK_OK(air_session_set_output(s, 0, y, N * N * sizeof *y));
	CHECK_OK(air_session_run(s));
	CHECK(air_session_trace_count(s) == 0);
	CHECK_OK(air_session_trace_enable(s, 100));
	before = now();
	for (int r = 0; r < 3; r++)
		CHECK_OK(air_session_run(s));
	after = now();
	CHECK(air_session_trace_count(s) == 6 && air_session_trace_dropped(s) == 0);
	uint64_t tid0 = 0;
	for (int i = 0; i < 6; i++) {
		int step = -1;
		uint64_t tid = 0;
		CHECK_OK(air_session_trace_event(s, i, &step, &t0, &dt, &tid));
		CHECK(step == i % 2 && t0 >= before && t0 + dt <= after && tid != 0);
		if (i == 0)
			tid0 = tid;
		CHECK(tid == tid0); /* one thread ran them all */
	}
	CHECK(air_session_trace_event(s, 6, NULL, NULL, NULL, NULL) == AIR_INVALID_ARGUMENT);
	CHECK_OK(air_session_trace_enable(s, 4));
	for (int r = 0; r < 3; r++)
		CHECK_OK(air_session_run(s));
	CHECK(air_session_trace_count(s) == 4 && air_session_trace_dropped(s) == 2);
	CHECK_OK(air_session_trace_enable(s, 0));
	CHECK_OK(air_session_run(s));
	CHECK(air_session_trace_count(s) == 0);
	CHECK(air_session_trace_enable(s, -1) == AIR_INVALID_ARGUMENT);

	/* step tensors: mm reads [N, N] x [N, N], writes [N, N] */
	int is_out = -1, rank = 0;
	air_dtype dt_ = AIR_F64;
	int64_t sd[AIR_MAX_RANK];
	CHECK_OK(air_session_step_tensor(s, 1, 2, &is_out, &dt_, &rank, sd));
	CHECK(is_out == 1 && dt_ == AIR_F32 && rank == 2 && sd[0] == N && sd[1] == N);
	CHECK_OK(air_session_step_tensor(s, 1, 0, &is_out, NULL, NULL, NULL));
	CHECK(is_out == 0);
	CHECK(air_session_step_tensor(s, 1, 3, NULL, NULL, NULL, NULL) == AIR_INVALID_ARGUMENT);
	CHECK(air_session_step_tensor(s, 2, 0, NULL, NULL, NULL, NULL) == AIR_INVALID_ARGUMENT);

	free(x);
	free(y);
	air_session_destroy(s);
	air_model_destroy(m);
	return check_report("test_log_trace");
}

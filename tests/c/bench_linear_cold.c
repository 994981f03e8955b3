/* bench_linear_cold.c - GFLOP/s of one linear (y = x w^T + b, optionally + a
 * residual) through the public API with the weight cold, as in a model
 * whose weights do not fit in cache: MODELS one-node graphs are compiled,
 * each with its own borrowed weight (a module's parameter, as torch.compile
 * passes it), and the runs cycle through them, so every call reads its
 * weight from memory. Default compile flags (memory optimization on), so a
 * weight of 256 x 256 or more with 16 tokens or more runs
 * linear_gemm_weight_rows; the kernel is printed. Not a CTest test; build by
 * hand against the CMake-built library:
 *   cc -O2 -Iinclude -Isrc -Itests/c tests/c/bench_linear_cold.c build/libair.a -lpthread -lm
 *   ./a.out M N K [runs [residual]]
 * e.g. BERT-base's linears at 128 tokens: 128 768 768, 128 3072 768 (the
 * intermediate), 128 768 3072 1 (the output, with its residual). Prints the
 * median over the runs: on a shared machine compare builds by alternating
 * them, not across hours. */
#define _POSIX_C_SOURCE 200112L
#include <time.h>

#include "check.h"
#include "pass_graph.h"

enum { MODELS = 40 };

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: %s M N K [runs [residual]]\n", argv[0]);
		return 2;
	}
	const int64_t M = atoll(argv[1]), N = atoll(argv[2]), K = atoll(argv[3]);
	const int runs = argc > 4 ? atoi(argv[4]) : 1000, residual = argc > 5 ? atoi(argv[5]) : 0;
	if (M <= 0 || N <= 0 || K <= 0 || runs <= 0) {
		fprintf(stderr, "M, N, K and runs must be positive\n");
		return 2;
	}
	const int64_t xd[2] = {M, K}, wd[2] = {N, K}, bd[1] = {N}, yd[2] = {M, N};
	float *x = randv(M * K, -1, 1), *r = randv(M * N, -1, 1), *y = malloc(sizeof(float) * (size_t)(M * N));
	air_model *models[MODELS];
	air_session *sessions[MODELS];
	for (int q = 0; q < MODELS; q++) {
		air_graph *g;
		CHECK_OK(air_graph_create(&g));
		air_value in[4];
		int n = 0;
		in[n++] = input(g, "x", 2, xd);
		in[n++] = constant(g, 2, wd, -0.05f, 0.05f);
		in[n++] = constant(g, 1, bd, -1, 1);
		if (residual)
			in[n++] = input(g, "r", 2, yd);
		air_attr at[3] = {iattr("has_bias", 1), iattr("act", 0), iattr("has_residual", residual)};
		air_value out = node(g, "linear", in, n, at, 3);
		CHECK_OK(air_graph_set_outputs(g, &out, 1));
		models[q] = compile(g, 0, 0);
		air_graph_destroy(g);
		CHECK_OK(air_session_create(models[q], &sessions[q]));
		CHECK_OK(air_session_set_input(sessions[q], 0, x, 2, xd));
		if (residual)
			CHECK_OK(air_session_set_input(sessions[q], 1, r, 2, yd));
		CHECK_OK(air_session_set_output(sessions[q], 0, y, sizeof(float) * (size_t)(M * N)));
	}
	/* the kernel column of the report's per-step list */
	const char *k = strstr(air_model_report(models[0]), "kernels per step:");
	k = k ? strstr(k, "linear ") : NULL;
	char kernel[64] = "?";
	if (k)
		sscanf(k + strlen("linear "), "%63s", kernel);
	double *t = malloc(sizeof(double) * (size_t)runs);
	for (int i = 0; i < MODELS; i++)
		CHECK_OK(air_session_run(sessions[i]));
	for (int i = 0; i < runs; i++) {
		double t0 = now();
		CHECK_OK(air_session_run(sessions[i % MODELS]));
		t[i] = now() - t0;
	}
	qsort(t, (size_t)runs, sizeof(double), by_value);
	(void)run; /* pass_graph.h's helper, unused here */
	const double med = t[runs / 2];
	printf("linear M %lld N %lld K %lld%s, %d weights cycled, %s: median %.3f ms, %.0f GFLOP/s\n", (long long)M,
	       (long long)N, (long long)K, residual ? " + residual" : "", MODELS, kernel, 1e3 * med,
	       2.0 * (double)(M * N * K) / med * 1e-9);
	for (int q = 0; q < MODELS; q++) {
		air_session_destroy(sessions[q]);
		air_model_destroy(models[q]);
	}
	for (int i = 0; i < nkeep; i++)
		free(keep[i]);
	free(t), free(x), free(r), free(y);
	return 0;
}

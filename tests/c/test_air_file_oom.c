/* test_air_file_oom.c - allocation failures while loading and running .air
 * files: the test is linked with --wrap for malloc, calloc, realloc,
 * posix_memalign, aligned_alloc and strdup (CMakeLists.txt), so the Nth
 * allocation of a load can be made to fail. For every N from 0 until a
 * load makes fewer than N allocations: open a saved file (the MLP with an
 * external constant, the CNN; from memory and through mmap), rebuild the
 * graph, compile and run it (air_file_exercise.h) with allocation N
 * failing. Each must return an error (no crash); under ASan (scripts/test.sh)
 * LeakSanitizer checks at exit that no failure path leaked. */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "air/air.h"
#include "air_file_exercise.h"
#include "air_file_graphs.h"
#include "check.h"

static _Atomic long countdown = -1; /* allocations left before the failing one; -1: none fails */
static _Atomic int failed;

/* AIR_OOM_TRACE=1 under ASan: the stack of every failed allocation */
void __sanitizer_print_stack_trace(void) __attribute__((weak));
static int trace = -1;

static int fail_now(void)
{
	long c = atomic_load(&countdown);
	while (c >= 0) {
		if (atomic_compare_exchange_weak(&countdown, &c, c - 1)) {
			if (c == 0) {
				atomic_store(&failed, 1);
				if (trace && __sanitizer_print_stack_trace)
					__sanitizer_print_stack_trace();
				return 1;
			}
			return 0;
		}
	}
	return 0;
}

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
int __real_posix_memalign(void **p, size_t a, size_t n);
void *__real_aligned_alloc(size_t a, size_t n);
char *__real_strdup(const char *s);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t m);
void *__wrap_realloc(void *p, size_t n);
int __wrap_posix_memalign(void **p, size_t a, size_t n);
void *__wrap_aligned_alloc(size_t a, size_t n);
char *__wrap_strdup(const char *s);

void *__wrap_malloc(size_t n)
{
	return fail_now() ? NULL : __real_malloc(n);
}
void *__wrap_calloc(size_t n, size_t m)
{
	return fail_now() ? NULL : __real_calloc(n, m);
}
void *__wrap_realloc(void *p, size_t n)
{
	return fail_now() ? NULL : __real_realloc(p, n);
}
int __wrap_posix_memalign(void **p, size_t a, size_t n)
{
	return fail_now() ? 12 /* ENOMEM */ : __real_posix_memalign(p, a, n);
}
void *__wrap_aligned_alloc(size_t a, size_t n)
{
	return fail_now() ? NULL : __real_aligned_alloc(a, n);
}
char *__wrap_strdup(const char *s)
{
	return fail_now() ? NULL : __real_strdup(s);
}

static const char *path_to_load;

static air_status exercise_path(afx_result *res)
{
	air_compile_options co;
	air_compile_options_init(&co);
	co.num_threads = 1;
	air_model *m;
	air_status st = air_model_load_file(path_to_load, &co, &m);
	if (st != AIR_OK)
		return st;
	st = afx_run(m, res);
	air_model_destroy(m);
	return st;
}

/* Do two runs' outputs agree? A load that survives a failed allocation
 * may only have skipped an optimization (a batch norm left unfolded, a
 * layout change not made, a log line): the same results up to rounding. */
static bool same_results(const afx_result *a, const afx_result *b)
{
	if (a->n != b->n)
		return false;
	for (int o = 0; o < a->n; o++) {
		if (a->nbytes[o] != b->nbytes[o])
			return false;
		if (a->dtype[o] != AIR_F32 && a->dtype[o] != AIR_F64) {
			if (memcmp(a->outs[o], b->outs[o], a->nbytes[o]) != 0)
				return false;
			continue;
		}
		size_t n = a->nbytes[o] / air_dtype_size(a->dtype[o]);
		for (size_t i = 0; i < n; i++) {
			double x = a->dtype[o] == AIR_F32 ? ((float *)a->outs[o])[i] : ((double *)a->outs[o])[i];
			double y = b->dtype[o] == AIR_F32 ? ((float *)b->outs[o])[i] : ((double *)b->outs[o])[i];
			if (!(fabs(x - y) <= 1e-4 * (1 + fabs(x))))
				return false;
		}
	}
	return true;
}

/* Fails allocation N for N = 0, 1, ... until the load needs fewer. */
static void fail_each(const char *what, const void *data, size_t size)
{
	afx_result ref = {0}, got = {0};
	CHECK_OK(data ? afx_exercise(data, size, 0, &ref) : exercise_path(&ref));
	int n, survived = 0;
	for (n = 0; n < 1000000; n++) {
		atomic_store(&failed, 0);
		atomic_store(&countdown, n);
		air_status st = data ? afx_exercise(data, size, 0, &got) : exercise_path(&got);
		atomic_store(&countdown, -1);
		if (!atomic_load(&failed)) {
			CHECK_OK(st);
			afx_result_free(&got);
			break;
		}
		check_count++;
		if (st == AIR_OK) {
			survived++;
			if (!same_results(&ref, &got)) {
				check_failures++;
				fprintf(stderr, "%s: allocation %d failed; the model loaded but gives other results\n",
					what, n);
			}
		}
		afx_result_free(&got);
	}
	afx_result_free(&ref);
	printf("%s: failed each of %d allocations in turn: %d errors, %d loads that skipped an optimization "
	       "and still gave the same results\n", what, n, n - survived, survived);
}

int main(void)
{
	agf_fill();
	trace = getenv("AIR_OOM_TRACE") != NULL;
	air_graph *mlp, *cnn;
	air_value bias;
	CHECK_OK(air_graph_create(&mlp));
	CHECK_OK(agf_mlp(mlp, &bias));
	CHECK_OK(air_graph_create(&cnn));
	CHECK_OK(agf_cnn(cnn));
	const char *en[1] = {"fc.bias"}, *keys[1] = {"k"}, *vals[1] = {"v"};
	air_save_options so;
	air_save_options_init(&so);
	so.externals = &bias;
	so.external_names = en;
	so.n_externals = 1;
	so.meta_keys = keys;
	so.meta_values = vals;
	so.n_meta = 1;
	void *a = NULL, *b = NULL;
	size_t na = 0, nb = 0;
	CHECK_OK(air_graph_save_buffer(mlp, &so, &a, &na));
	CHECK_OK(air_graph_save_buffer(cnn, NULL, &b, &nb));
	char path[64];
	snprintf(path, sizeof path, "/tmp/air_oom_%ld.air", (long)getpid());
	CHECK_OK(air_graph_save_file(cnn, NULL, path));
	path_to_load = path;
	if (a && b) {
		fail_each("mlp (buffer)", a, na);
		fail_each("cnn (buffer)", b, nb);
		fail_each("cnn (mapped file)", NULL, 0);
	}
	unlink(path);
	/* saving, too */
	for (int n = 0; n < 100000; n++) {
		atomic_store(&failed, 0);
		atomic_store(&countdown, n);
		void *buf;
		size_t size;
		air_status st = air_graph_save_buffer(mlp, &so, &buf, &size);
		atomic_store(&countdown, -1);
		if (st == AIR_OK)
			air_free(buf);
		if (!atomic_load(&failed))
			break;
		CHECK(st == AIR_OUT_OF_MEMORY);
	}
	air_free(a);
	air_free(b);
	air_graph_destroy(mlp);
	air_graph_destroy(cnn);
	return check_report("test_air_file_oom");
}

/* host_threads.c - libair's parallel loops on PyTorch's OpenMP team.
 *
 * After an eager op, torch's OpenMP workers keep spinning for a while
 * (GOMP's default wait policy). A loop on libair's own pool then shares the
 * cores with them: on 2 cores a 1024^3 GEMM right after an eager op took
 * 9.2 ms instead of 6.2. Run on the same team, the spinning workers are the
 * ones that pick the loop up. */
#define _GNU_SOURCE
#include "host_threads.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stddef.h>

#include "air/air.h"

typedef void (*gomp_parallel_fn)(void (*fn)(void *), void *data, unsigned nthreads, unsigned flags);
typedef int (*omp_thread_num_fn)(void);

static gomp_parallel_fn gomp_parallel;
static omp_thread_num_fn omp_thread_num;
static atomic_ullong loops;

typedef struct omp_loop {
	air_parallel_body body;
	void *ctx;
} omp_loop;

static void omp_member(void *p)
{
	const omp_loop *l = p;
	l->body(l->ctx, omp_thread_num());
}

static void omp_runner(air_parallel_body body, void *ctx, int nthreads, void *user)
{
	(void)user;
	omp_loop l = {body, ctx};
	atomic_fetch_add_explicit(&loops, 1, memory_order_relaxed);
	gomp_parallel(omp_member, &l, (unsigned)nthreads, 0);
}

int host_threads_use_openmp(const char *path)
{
	air_set_parallel_runner(NULL, NULL);
	if (!path)
		return 0;
	void *lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
	if (!lib)
		return 0;
	gomp_parallel_fn par = (gomp_parallel_fn)dlsym(lib, "GOMP_parallel");
	omp_thread_num_fn num = (omp_thread_num_fn)dlsym(lib, "omp_get_thread_num");
	/* the handle stays open: the runtime is torch's and outlives us */
	if (!par || !num)
		return 0;
	gomp_parallel = par;
	omp_thread_num = num;
	air_set_parallel_runner(omp_runner, NULL);
	return 1;
}

unsigned long long host_threads_openmp_loops(void)
{
	return atomic_load(&loops);
}

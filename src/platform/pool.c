/* pool.c - fork-join thread pool. Workers wait for a new "generation" of
 * work; they spin for a short while first (a parallel loop usually follows
 * another within microseconds), then sleep on a condition variable. */
#define _GNU_SOURCE
#include "platform/pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
/* MXCSR's flush-to-zero and denormals-are-zero bits */
#define FP_MODE_BITS 0x8040u
static unsigned fp_mode_get(void)
{
	return _mm_getcsr() & FP_MODE_BITS;
}
static void fp_mode_set(unsigned mode)
{
	unsigned csr = _mm_getcsr();
	if ((csr & FP_MODE_BITS) != mode)
		_mm_setcsr((csr & ~FP_MODE_BITS) | mode);
}
#else
#define cpu_relax() ((void)0)
static unsigned fp_mode_get(void)
{
	return 0;
}
static void fp_mode_set(unsigned mode)
{
	(void)mode;
}
#endif

/* ~ tens of microseconds of spinning before a worker sleeps */
enum { SPIN_ITERS = 20000 };

struct rt_pool {
	int nthreads;
	pthread_t *threads;
	pthread_mutex_t run_lock; /* one parallel loop at a time */
	pthread_mutex_t sleep_lock;
	pthread_cond_t wake;
	atomic_uint generation;
	atomic_int stop;
	atomic_int sleepers;
	/* the current loop */
	rt_task_fn fn;
	void *ctx;
	int64_t ntasks;
	atomic_llong next;
	atomic_int busy; /* workers still in the current loop */
	/* the caller's subnormal handling (flush to zero, denormals are zero:
	 * torch.set_flush_denormal), which every thread of the loop takes on,
	 * so that a task's results do not depend on the thread it ran on */
	unsigned fp_mode;
};

typedef struct {
	rt_pool *pool;
	int index;
} worker_arg;

static void run_tasks(rt_pool *p, int thread)
{
	for (;;) {
		int64_t t = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
		if (t >= p->ntasks)
			break;
		p->fn(p->ctx, t, thread);
	}
}

/* The host's runner (air_set_parallel_runner), if any: loops go to it
 * instead of the workers, who then stay asleep. */
static _Atomic(air_parallel_runner) host_runner;
static _Atomic(void *) host_user;

void air_set_parallel_runner(air_parallel_runner run, void *user)
{
	atomic_store(&host_user, user);
	atomic_store(&host_runner, run);
}

static void host_body(void *ctx, int thread)
{
	rt_pool *p = ctx;
	/* a slot index past the pool's size would share a workspace slot */
	if (thread >= 0 && thread < p->nthreads) {
		/* the host's thread gets its own mode back */
		const unsigned own = fp_mode_get();
		fp_mode_set(p->fp_mode);
		run_tasks(p, thread);
		fp_mode_set(own);
	}
}

static void *worker_main(void *argp)
{
	worker_arg arg = *(worker_arg *)argp;
	free(argp);
	rt_pool *p = arg.pool;
	/* generation 0 is "no work yet"; reading the live counter here would
	 * miss a loop started before this thread got to run */
	unsigned seen = 0;
	for (;;) {
		unsigned g;
		int spins = 0;
		while ((g = atomic_load_explicit(&p->generation, memory_order_acquire)) == seen &&
		       !atomic_load_explicit(&p->stop, memory_order_acquire)) {
			if (++spins < SPIN_ITERS) {
				cpu_relax();
				continue;
			}
			pthread_mutex_lock(&p->sleep_lock);
			atomic_fetch_add(&p->sleepers, 1);
			while (atomic_load(&p->generation) == seen && !atomic_load(&p->stop))
				pthread_cond_wait(&p->wake, &p->sleep_lock);
			atomic_fetch_sub(&p->sleepers, 1);
			pthread_mutex_unlock(&p->sleep_lock);
			spins = 0;
		}
		if (atomic_load_explicit(&p->stop, memory_order_acquire))
			return NULL;
		seen = g;
		fp_mode_set(p->fp_mode);
		run_tasks(p, arg.index);
		atomic_fetch_sub_explicit(&p->busy, 1, memory_order_release);
	}
}

air_status rt_pool_create(int nthreads, rt_pool **out)
{
	if (!out)
		return air_error(AIR_INVALID_ARGUMENT, "rt_pool_create: out is NULL");
	*out = NULL;
	if (nthreads < 1 || nthreads > 1024)
		return air_error(AIR_INVALID_ARGUMENT, "rt_pool_create: nthreads must be in [1, 1024], got %d",
				 nthreads);
	rt_pool *p = calloc(1, sizeof *p);
	if (!p)
		return air_error(AIR_OUT_OF_MEMORY, "rt_pool_create: no memory");
	p->nthreads = 1;
	pthread_mutex_init(&p->run_lock, NULL);
	pthread_mutex_init(&p->sleep_lock, NULL);
	pthread_cond_init(&p->wake, NULL);
	if (nthreads > 1) {
		p->threads = calloc((size_t)nthreads - 1, sizeof *p->threads);
		if (!p->threads)
			goto oom;
		for (int i = 1; i < nthreads; i++) {
			worker_arg *a = malloc(sizeof *a);
			if (!a)
				goto oom;
			a->pool = p;
			a->index = i;
			if (pthread_create(&p->threads[i - 1], NULL, worker_main, a) != 0) {
				free(a);
				rt_pool_destroy(p);
				return air_error(AIR_INTERNAL, "rt_pool_create: pthread_create failed");
			}
			p->nthreads = i + 1;
		}
	}
	*out = p;
	return AIR_OK;
oom:
	rt_pool_destroy(p);
	return air_error(AIR_OUT_OF_MEMORY, "rt_pool_create: no memory");
}

void rt_pool_destroy(rt_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->sleep_lock);
	atomic_store(&p->stop, 1);
	pthread_cond_broadcast(&p->wake);
	pthread_mutex_unlock(&p->sleep_lock);
	for (int i = 1; i < p->nthreads; i++)
		pthread_join(p->threads[i - 1], NULL);
	free(p->threads);
	pthread_mutex_destroy(&p->run_lock);
	pthread_mutex_destroy(&p->sleep_lock);
	pthread_cond_destroy(&p->wake);
	free(p);
}

int rt_pool_size(const rt_pool *p)
{
	return p ? p->nthreads : 1;
}

void rt_pool_run(rt_pool *p, int64_t ntasks, rt_task_fn fn, void *ctx)
{
	if (ntasks <= 0)
		return;
	if (!p || p->nthreads == 1 || ntasks == 1 || pthread_mutex_trylock(&p->run_lock) != 0) {
		for (int64_t t = 0; t < ntasks; t++)
			fn(ctx, t, 0);
		return;
	}
	p->fn = fn;
	p->ctx = ctx;
	p->ntasks = ntasks;
	p->fp_mode = fp_mode_get();
	atomic_store_explicit(&p->next, 0, memory_order_relaxed);
	air_parallel_runner run = atomic_load(&host_runner);
	if (run) {
		run(host_body, p, p->nthreads, atomic_load(&host_user));
		/* every body has returned; whatever a short team left is ours */
		run_tasks(p, 0);
		pthread_mutex_unlock(&p->run_lock);
		return;
	}
	atomic_store_explicit(&p->busy, p->nthreads - 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&p->generation, 1, memory_order_release);
	if (atomic_load(&p->sleepers) > 0) {
		pthread_mutex_lock(&p->sleep_lock);
		pthread_cond_broadcast(&p->wake);
		pthread_mutex_unlock(&p->sleep_lock);
	}
	run_tasks(p, 0);
	while (atomic_load_explicit(&p->busy, memory_order_acquire) > 0)
		cpu_relax();
	pthread_mutex_unlock(&p->run_lock);
}

static pthread_mutex_t default_lock = PTHREAD_MUTEX_INITIALIZER;
static rt_pool *default_pool;
static int default_tried;

int rt_default_threads(void)
{
	const char *env = getenv("AIR_NUM_THREADS");
	if (env && *env) {
		char *end;
		long n = strtol(env, &end, 10);
		if (*end == '\0' && n >= 1 && n <= 1024)
			return (int)n;
	}
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n >= 1 ? (int)n : 1;
}

rt_pool *rt_pool_default(void)
{
	pthread_mutex_lock(&default_lock);
	if (!default_pool && !default_tried) {
		default_tried = 1;
		if (rt_pool_create(rt_default_threads(), &default_pool) != AIR_OK)
			default_pool = NULL;
	}
	rt_pool *p = default_pool;
	pthread_mutex_unlock(&default_lock);
	return p;
}

air_status rt_pool_set_default_threads(int nthreads)
{
	if (nthreads < 1 || nthreads > 1024)
		return air_error(AIR_INVALID_ARGUMENT, "num_threads must be in [1, 1024], got %d", nthreads);
	pthread_mutex_lock(&default_lock);
	air_status st = AIR_OK;
	if (!default_pool || default_pool->nthreads != nthreads) {
		rt_pool *fresh = NULL;
		st = rt_pool_create(nthreads, &fresh);
		if (st == AIR_OK) {
			rt_pool_destroy(default_pool);
			default_pool = fresh;
			default_tried = 1;
		}
	}
	pthread_mutex_unlock(&default_lock);
	return st;
}

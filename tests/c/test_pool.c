/* test_pool.c - the thread pool: every task runs exactly once, with 1..4
 * threads, for 0, 1, prime and large task counts, and nested/concurrent
 * use runs serially instead of deadlocking. The same through a host's
 * runner (air_set_parallel_runner): a full team, a short one, and one
 * that runs no body at all; no two threads ever hold one slot index.
 * Every thread of a loop flushes subnormals when the caller does (MXCSR's
 * FTZ and DAZ, torch.set_flush_denormal), and only then, workers and a
 * host's threads alike, and a host's thread gets its own mode back. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "platform/pool.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <unistd.h>
#define HAVE_MXCSR 1
#endif

typedef struct {
	atomic_int *hits;
	rt_pool *pool;
	atomic_int inner;
} ctx_t;

static void count_task(void *p, int64_t t, int thread)
{
	ctx_t *c = p;
	atomic_fetch_add(&c->hits[t], 1);
}

static void inner_task(void *p, int64_t t, int thread)
{
	ctx_t *c = p;
	atomic_fetch_add(&c->inner, 1);
}

static void nested_task(void *p, int64_t t, int thread)
{
	ctx_t *c = p;
	/* a loop started from inside a loop must run serially, not deadlock */
	rt_pool_run(c->pool, 3, inner_task, c);
}

static void *concurrent_user(void *p)
{
	rt_pool *pool = p;
	atomic_int hits[257];
	for (int rep = 0; rep < 200; rep++) {
		memset(hits, 0, sizeof hits);
		ctx_t c = {hits, pool, 0};
		rt_pool_run(pool, 257, count_task, &c);
		for (int i = 0; i < 257; i++)
			if (atomic_load(&hits[i]) != 1)
				return (void *)1;
	}
	return NULL;
}

/* ---- a host runner: a team of pthreads, body(ctx, i) on thread i ---- */

typedef struct {
	air_parallel_body body;
	void *ctx;
	int index;
} member_t;

static void *member_main(void *p)
{
	member_t *m = p;
	m->body(m->ctx, m->index);
	return NULL;
}

static atomic_int runner_calls;

/* user: the team size to use (at most nthreads); 0 runs nothing */
static void team_runner(air_parallel_body body, void *ctx, int nthreads, void *user)
{
	atomic_fetch_add(&runner_calls, 1);
	int n = *(int *)user < nthreads ? *(int *)user : nthreads;
	pthread_t th[8];
	member_t m[8];
	for (int i = 1; i < n; i++) {
		m[i] = (member_t){body, ctx, i};
		pthread_create(&th[i], NULL, member_main, &m[i]);
	}
	if (n > 0)
		body(ctx, 0);
	for (int i = 1; i < n; i++)
		pthread_join(th[i], NULL);
}

typedef struct {
	atomic_int *hits;
	atomic_int slot_busy[8];
	atomic_int clashes, bad_index;
	int nthreads;
} slot_ctx;

static void slot_task(void *p, int64_t t, int thread)
{
	slot_ctx *c = p;
	if (thread < 0 || thread >= c->nthreads) {
		atomic_fetch_add(&c->bad_index, 1);
		return;
	}
	if (atomic_exchange(&c->slot_busy[thread], 1))
		atomic_fetch_add(&c->clashes, 1);
	for (volatile int spin = 0; spin < 200; spin++)
		;
	atomic_fetch_add(&c->hits[t], 1);
	atomic_store(&c->slot_busy[thread], 0);
}

static void test_host_runner(atomic_int *hits)
{
	for (int nt = 1; nt <= 4; nt++) {
		rt_pool *pool = NULL;
		CHECK_OK(rt_pool_create(nt, &pool));
		const int teams[] = {nt, 1, 0};
		for (int k = 0; k < 3; k++) {
			int team = teams[k];
			air_set_parallel_runner(team_runner, &team);
			atomic_store(&runner_calls, 0);
			for (int rep = 0; rep < 20; rep++) {
				const int64_t n = 997;
				memset(hits, 0, sizeof(atomic_int) * (size_t)n);
				slot_ctx c = {.hits = hits, .nthreads = nt};
				rt_pool_run(pool, n, slot_task, &c);
				int bad = 0;
				for (int64_t i = 0; i < n; i++)
					bad += atomic_load(&hits[i]) != 1;
				CHECK(bad == 0);
				CHECK(atomic_load(&c.clashes) == 0 && atomic_load(&c.bad_index) == 0);
			}
			/* one thread in all: nothing to hand out */
			CHECK(atomic_load(&runner_calls) == (nt > 1 ? 20 : 0));
		}
		air_set_parallel_runner(NULL, NULL);
		rt_pool_destroy(pool);
	}
}

#ifdef HAVE_MXCSR
typedef struct {
	float out[64];
	atomic_int on_other_thread;
} fp_ctx;

static void subnormal_task(void *p, int64_t t, int thread)
{
	fp_ctx *c = p;
	volatile float a = 1e-20f, b = 1e-20f;
	c->out[t] = a * b; /* 1e-40: a subnormal, or 0 when flushed */
	if (thread != 0)
		atomic_store(&c->on_other_thread, 1);
	/* The caller's slot waits (up to 2 s) until a worker has taken a task:
	 * on a busy machine the workers can be slow to wake, and the caller
	 * alone would then run all 64 tasks (seen once under a loaded CI-like
	 * run), which would test nothing about the workers' FP mode. */
	for (int i = 0; i < 10000 && thread == 0 && !atomic_load(&c->on_other_thread); i++)
		usleep(200);
	usleep(200); /* long enough for every thread to take tasks */
}

/* the tasks' products: all flushed (want_zero) or all subnormal; some
 * tasks ran on a thread other than the caller's slot */
static void check_fp_mode(rt_pool *pool, int want_zero)
{
	fp_ctx c = {{0}, 0};
	rt_pool_run(pool, 64, subnormal_task, &c);
	int zero = 0;
	for (int t = 0; t < 64; t++) { /* bits, not values: under DAZ a subnormal compares equal to 0 */
		uint32_t bits;
		memcpy(&bits, &c.out[t], sizeof bits);
		zero += bits == 0;
	}
	CHECK(zero == (want_zero ? 64 : 0));
	CHECK(atomic_load(&c.on_other_thread));
}

typedef struct {
	void (*body)(void *, int);
	void *ctx;
	int index;
	int mode_kept; /* the thread's flush bits after the body: still off */
} host_arg;

static void *host_thread(void *p)
{
	host_arg *a = p;
	_mm_setcsr(_mm_getcsr() & ~0x8040u); /* this thread: no flushing */
	a->body(a->ctx, a->index);
	a->mode_kept = (_mm_getcsr() & 0x8040u) == 0;
	return NULL;
}

/* a host's runner: a thread of its own per slot */
static void thread_runner(void (*body)(void *, int), void *ctx, int nthreads, void *user)
{
	host_arg *args = user;
	pthread_t th[4];
	for (int i = 0; i < nthreads && i < 4; i++) {
		args[i] = (host_arg){body, ctx, i, 0};
		pthread_create(&th[i], NULL, host_thread, &args[i]);
	}
	for (int i = 0; i < nthreads && i < 4; i++)
		pthread_join(th[i], NULL);
}

static void test_fp_mode(void)
{
	const unsigned saved = _mm_getcsr();
	rt_pool *pool = NULL;
	CHECK_OK(rt_pool_create(3, &pool));
	for (int round = 0; round < 2; round++) { /* workers, then a host's threads */
		host_arg args[4];
		if (round == 1)
			air_set_parallel_runner(thread_runner, args);
		_mm_setcsr(saved | 0x8040u);
		check_fp_mode(pool, 1);
		_mm_setcsr(saved & ~0x8040u);
		check_fp_mode(pool, 0);
		if (round == 1) {
			_mm_setcsr(saved | 0x8040u);
			check_fp_mode(pool, 1);
			for (int i = 0; i < 3; i++)
				CHECK(args[i].mode_kept);
			air_set_parallel_runner(NULL, NULL);
		}
	}
	_mm_setcsr(saved);
	rt_pool_destroy(pool);
}
#endif

int main(void)
{
	static atomic_int hits[100003];
	const int64_t counts[] = {0, 1, 2, 7, 97, 100003};
	for (int nt = 1; nt <= 4; nt++) {
		rt_pool *pool = NULL;
		CHECK_OK(rt_pool_create(nt, &pool));
		CHECK(rt_pool_size(pool) == nt);
		for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
			int64_t n = counts[k];
			for (int rep = 0; rep < 50; rep++) {
				memset(hits, 0, sizeof hits);
				ctx_t c = {hits, pool, 0};
				rt_pool_run(pool, n, count_task, &c);
				int bad = 0;
				for (int64_t i = 0; i < n; i++)
					bad += atomic_load(&hits[i]) != 1;
				CHECK(bad == 0);
			}
		}
		ctx_t c = {hits, pool, 0};
		rt_pool_run(pool, 5, nested_task, &c);
		CHECK(atomic_load(&c.inner) == 15);

		/* two caller threads sharing one pool */
		pthread_t a, b;
		void *ra, *rb;
		pthread_create(&a, NULL, concurrent_user, pool);
		pthread_create(&b, NULL, concurrent_user, pool);
		pthread_join(a, &ra);
		pthread_join(b, &rb);
		CHECK(ra == NULL && rb == NULL);
		rt_pool_destroy(pool);
	}
#ifdef HAVE_MXCSR
	test_fp_mode();
#endif
	rt_pool *pool = NULL;
	CHECK(rt_pool_create(0, &pool) == AIR_INVALID_ARGUMENT);
	CHECK(pool == NULL);
	CHECK(rt_pool_create(1, NULL) == AIR_INVALID_ARGUMENT);
	rt_pool_destroy(NULL);
	/* NULL pool runs serially */
	memset(hits, 0, sizeof hits);
	ctx_t c = {hits, NULL, 0};
	rt_pool_run(NULL, 10, count_task, &c);
	CHECK(atomic_load(&hits[9]) == 1);
	test_host_runner(hits);
	return check_report("test_pool");
}

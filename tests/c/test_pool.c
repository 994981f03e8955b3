/* test_pool.c - the thread pool: every task runs exactly once, with 1..4
 * threads, for 0, 1, prime and large task counts, and nested/concurrent
 * use runs serially instead of deadlocking. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "check.h"
#include "runtime/pool.h"

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
	return check_report("test_pool");
}

/* dropout.c - the fast dropout: the reference's per-range arithmetic over
 * the pool in chunks of K_GRAIN elements (a multiple of the generator's 4
 * words a counter, so no counter is drawn twice); the same bits as the
 * reference for any thread count, since each element's draw depends only
 * on its index. */
#include "core/error.h"
#include "kernels/elementwise/dropout.h"

_Static_assert(K_GRAIN % 4 == 0, "chunks must start on a counter boundary");

static void dropout_task(void *arg, int64_t t, int thread)
{
	(void)thread;
	const k_call *call = arg;
	int64_t n = call->in[0].numel, i0 = t * K_GRAIN, i1 = i0 + K_GRAIN < n ? i0 + K_GRAIN : n;
	kd_dropout_range(call, i0, i1);
}

static air_status dropout_run(const k_call *call)
{
	AIR_TRY(kd_check(call));
	rt_pool_run(call->pool, k_cdiv(call->in[0].numel, K_GRAIN), dropout_task, (void *)call);
	return AIR_OK;
}

const k_kernel kfast_dropout = {"dropout_pool", 0, NULL, NULL, NULL, NULL, dropout_run};

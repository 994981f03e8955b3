/* dropout.c - the fast dropout: chunks of K_GRAIN elements over the pool
 * (a multiple of the generator's 32-element groups, so no counter is drawn
 * twice), each by the AVX2 range kernel for f32 where the CPU has it, else
 * the reference's; the same bits as the reference for any thread count,
 * since each element's draw depends only on its index. */
#include "core/error.h"
#include "kernels/common/cpu.h"
#include "kernels/elementwise/dropout.h"

_Static_assert(K_GRAIN % 32 == 0, "chunks must start on a group boundary");

typedef struct drop_job {
	const k_call *call;
	void (*range)(const k_call *call, int64_t i0, int64_t i1);
} drop_job;

static void dropout_task(void *arg, int64_t t, int thread)
{
	(void)thread;
	const drop_job *j = arg;
	int64_t n = j->call->in[0].numel, i0 = t * K_GRAIN, i1 = i0 + K_GRAIN < n ? i0 + K_GRAIN : n;
	j->range(j->call, i0, i1);
}

static air_status dropout_run(const k_call *call)
{
	AIR_TRY(kd_check(call));
	drop_job j = {call, kd_dropout_range};
#ifdef AIR_HAVE_X86
	if (call->in[0].dtype == AIR_F32 && (kcpu_features() & KCPU_AVX2))
		j.range = kd_dropout_range_avx2;
#endif
	rt_pool_run(call->pool, k_cdiv(call->in[0].numel, K_GRAIN), dropout_task, &j);
	return AIR_OK;
}

const k_kernel kfast_dropout = {"dropout_pool", 0, NULL, NULL, NULL, NULL, dropout_run};

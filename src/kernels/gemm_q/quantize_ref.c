/* quantize_ref.c - the quantize op's reference (quantize.h) and its fast kernel's driver: the
 * ISA loop picked once from CPUID, the tensor cut into runs of whole cache lines for the pool. */
#include <math.h>

#include "kernels/common/cpu.h"
#include "kernels/gemm_q/quantize.h"

void kqz_run_scalar(const kqz_params *p, const float *x, void *q, int64_t n)
{
	for (int64_t i = 0; i < n; i++) {
		float t = nearbyintf(x[i] * p->inv) + p->zp;
		t = t < p->qmin ? p->qmin : (t > p->qmax ? p->qmax : t);
		if (p->is_signed)
			((int8_t *)q)[i] = (int8_t)t;
		else
			((uint8_t *)q)[i] = (uint8_t)t;
	}
}

static kqz_params params_of(const k_call *call)
{
	const k_attr *a = call->attrs;
	kqz_params p = {(float)a[KQZ_ATTR_INV_SCALE].f, (float)a[KQZ_ATTR_ZP].i, (float)a[KQZ_ATTR_QMIN].i,
			(float)a[KQZ_ATTR_QMAX].i, call->out[0].dtype == AIR_I8};
	return p;
}

air_status kref_quantize(const k_call *call)
{
	const kqz_params p = params_of(call);
	kqz_run_scalar(&p, call->in[0].data, call->out[0].data, call->in[0].numel);
	return AIR_OK;
}

typedef void (*kqz_fn)(const kqz_params *p, const float *x, void *q, int64_t n);

static kqz_fn pick(const char **name)
{
#if defined(AIR_HAVE_X86)
	const unsigned f = kcpu_features();
	if ((f & KCPU_AVX512) == KCPU_AVX512) {
		*name = "avx512";
		return kqz_run_avx512;
	}
	if (f & KCPU_AVX2) {
		*name = "avx2";
		return kqz_run_avx2;
	}
#endif
	*name = "scalar";
	return kqz_run_scalar;
}

const char *kqz_kernel_name(void)
{
	const char *name;
	pick(&name);
	return name;
}

/* values a task quantizes: a pass runs at several GB/s, so a BERT activation (128 x 768) takes
 * about 20 us on one thread; handing it to the pool cost more than that on a loaded machine */
enum { RUN = 262144 };

typedef struct {
	kqz_params p;
	kqz_fn fn;
	const float *x;
	char *q;
	int64_t n;
} job;

static void task(void *ctx, int64_t t, int thread)
{
	const job *j = ctx;
	(void)thread;
	const int64_t i0 = t * RUN, len = k_min64(RUN, j->n - i0);
	j->fn(&j->p, j->x + i0, j->q + i0, len);
}

static air_status fast_run(const k_call *call)
{
	const char *name;
	job j = {params_of(call), pick(&name), call->in[0].data, call->out[0].data, call->in[0].numel};
	rt_pool_run(call->pool, k_cdiv(j.n, RUN), task, &j);
	return AIR_OK;
}

const k_kernel kfast_quantize = {"quantize_lanes", 0, NULL, NULL, NULL, NULL, fast_run, 0};

/* rowops_fast.c - the fast kernels of softmax, log_softmax, layer_norm,
 * rms_norm (rowops.h) and of the unary ops vmath computes (vmath.h), for
 * f32 tensors. They take what the reference kernels take in the common
 * case (the reduction over the last dims of a dense row-major tensor, a
 * unary op on a dense tensor) and leave the rest to the reference. */
#include "kernels/norm/rowops_fast.h"

#include <float.h>

#include "core/error.h"
#include "kernels/norm/rowops.h"
#include "kernels/vmath/vmath.h"

/* ---- softmax over the last axis ----------------------------------------- */

static bool softmax_supports(const k_call *call)
{
	const k_tensor *x = &call->in[0];
	if (!k_all_f32(call) || x->rank < 1)
		return false;
	int64_t axis = call->attrs[0].i;
	return axis == -1 || axis == x->rank - 1;
}

static air_status run_softmax(const k_call *call, bool log)
{
	const k_tensor *x = &call->in[0];
	int64_t n = x->dims[x->rank - 1];
	if (x->numel == 0 || n == 0)
		return AIR_OK;
	int64_t rows = x->numel / n;
	if (log)
		kr_log_softmax_f32(x->data, call->out[0].data, rows, n, call->pool);
	else
		kr_softmax_f32(x->data, call->out[0].data, rows, n, call->pool);
	return AIR_OK;
}

static air_status softmax_run(const k_call *call)
{
	return run_softmax(call, false);
}

static air_status log_softmax_run(const k_call *call)
{
	return run_softmax(call, true);
}

const k_kernel kfast_softmax_rows = {"softmax_rows", 0, softmax_supports, NULL, NULL, NULL, softmax_run};
const k_kernel kfast_log_softmax_rows = {"log_softmax_rows", 0, softmax_supports, NULL, NULL, NULL,
					 log_softmax_run};

/* ---- layer_norm and rms_norm over the last nd dims ---------------------- */

/* Rows and row length for a norm over x's last nd dims; checks the affine
 * inputs' concrete dims (symbolic at compile time, so shape inference could
 * not), as the reference kernel does. */
static air_status norm_rows(const char *op, const k_call *call, int nd, int64_t *rows, int64_t *n)
{
	const k_tensor *x = &call->in[0];
	*n = 1;
	for (int d = x->rank - nd; d < x->rank; d++)
		*n *= x->dims[d];
	for (int k = 1; k < call->n_in; k++)
		for (int d = 0; d < nd; d++)
			if (call->in[k].dims[d] != x->dims[x->rank - nd + d])
				return air_error(AIR_SHAPE_MISMATCH, "%s: input %d has size %lld at dim %d where x has %lld",
						 op, k, (long long)call->in[k].dims[d], d,
						 (long long)x->dims[x->rank - nd + d]);
	*rows = *n ? x->numel / *n : 0;
	return AIR_OK;
}

static bool norm_supports(const k_call *call)
{
	const k_tensor *x = &call->in[0];
	int64_t nd = call->attrs[0].i;
	/* an empty row is the reference kernel's (mean 0, rstd NaN) */
	return k_all_f32(call) && nd >= 1 && nd <= x->rank && x->numel != 0;
}

static air_status layer_norm_run(const k_call *call)
{
	int64_t rows, n;
	AIR_TRY(norm_rows("layer_norm", call, (int)call->attrs[0].i, &rows, &n));
	int has_w = (int)call->attrs[2].i, has_b = (int)call->attrs[3].i;
	const float *w = has_w ? call->in[1].data : NULL;
	const float *b = has_b ? call->in[1 + has_w].data : NULL;
	kr_layernorm_f32(call->in[0].data, w, b, call->out[0].data, rows, n, call->attrs[1].f, call->out[1].data,
			 call->out[2].data, call->pool);
	return AIR_OK;
}

static air_status rms_norm_run(const k_call *call)
{
	int64_t rows, n;
	AIR_TRY(norm_rows("rms_norm", call, (int)call->attrs[0].i, &rows, &n));
	double eps = call->attrs[1].f;
	if (eps < 0)
		eps = FLT_EPSILON; /* torch's eps=None for f32 */
	const float *w = call->attrs[2].i ? call->in[1].data : NULL;
	kr_rmsnorm_f32(call->in[0].data, w, call->out[0].data, rows, n, eps, call->pool);
	return AIR_OK;
}

const k_kernel kfast_layer_norm_rows = {"layer_norm_rows", 0, norm_supports, NULL, NULL, NULL, layer_norm_run};
const k_kernel kfast_rms_norm_rows = {"rms_norm_rows", 0, norm_supports, NULL, NULL, NULL, rms_norm_run};

/* ---- unary math --------------------------------------------------------- */

/* Splits a long array over the pool in chunks of K_GRAIN elements. */
typedef struct vmath_job {
	kv_unary_f32 f;
	const float *x;
	float *y;
	int64_t n;
} vmath_job;

static void vmath_task(void *arg, int64_t t, int thread)
{
	const vmath_job *j = arg;
	int64_t i0 = t * K_GRAIN, len = j->n - i0 < K_GRAIN ? j->n - i0 : K_GRAIN;
	j->f(j->x + i0, j->y + i0, len);
}

static air_status run_vmath(const k_call *call, kv_func f)
{
	vmath_job j = {kv_unary(f), call->in[0].data, call->out[0].data, call->out[0].numel};
	if (j.n <= 0)
		return AIR_OK;
	rt_pool_run(call->pool, (j.n + K_GRAIN - 1) / K_GRAIN, vmath_task, &j);
	return AIR_OK;
}

/* one input of the output's size (a unary op never broadcasts) */
static bool vmath_supports(const k_call *call)
{
	return call->n_in == 1 && k_all_f32(call) && call->in[0].numel == call->out[0].numel;
}

/* K_INPLACE_ANY: each task runs kv_<f>_f32 on its own chunk, which vmath.h
 * documents as safe in place (every vector is loaded before its result is
 * stored). */
#define KFAST_VMATH_DEF_(name)                                                                   \
	static air_status name##_vmath_run(const k_call *call)                                   \
	{                                                                                        \
		return run_vmath(call, KV_##name);                                               \
	}                                                                                        \
	const k_kernel kfast_##name##_vmath = {#name "_vmath", 0, vmath_supports, NULL, NULL, NULL, \
					       name##_vmath_run, K_INPLACE_ANY};
KFAST_VMATH_OPS(KFAST_VMATH_DEF_)
#undef KFAST_VMATH_DEF_

/* linear_q.c - linear_q's kernels (linear_q.h): y [..., N] = x [..., K] @ dequant(W)^T + bias,
 * the reference on kgemm_q_reference and the fast one on kgemm_q (gemm_q.h). Shape inference
 * (ops/linear_q.c) has checked dtypes, ranks and sizes. */
#include "kernels/gemm_q/linear_q.h"

kq_weight klinear_q_weight(const k_call *call)
{
	const k_tensor *q = &call->in[1], *s = &call->in[2];
	const k_tensor *x = &call->in[0];
	kq_weight w = {(int)call->attrs[KLINQ_ATTR_BITS].i, q->dims[0], x->dims[x->rank - 1],
		       call->attrs[KLINQ_ATTR_GROUP].i, s->dims[1], q->data, s->data};
	return w;
}

static const float *bias_of(const k_call *call)
{
	return kref_present(call->attrs[KLINQ_ATTR_HAS_BIAS].i, call->n_in, 3) ? call->in[3].data : NULL;
}

static int64_t rows_of(const k_call *call)
{
	return k_numel(call->in[0].rank - 1, call->in[0].dims);
}

air_status kref_linear_q(const k_call *call)
{
	const kq_weight w = klinear_q_weight(call);
	kgemm_q_reference(&w, rows_of(call), call->in[0].data, w.K, bias_of(call), call->out[0].data, w.N);
	return AIR_OK;
}

static size_t fast_ws(const k_call *call, int nthreads)
{
	const kq_weight w = klinear_q_weight(call);
	return kgemm_q_workspace_bytes(&w, rows_of(call), nthreads);
}

static air_status fast_run(const k_call *call)
{
	const kq_weight w = klinear_q_weight(call);
	kgemm_q(&w, rows_of(call), call->in[0].data, w.K, bias_of(call), call->out[0].data, w.N, call->pool,
		call->workspace);
	return AIR_OK;
}

const k_kernel kfast_linear_q = {"linear_q_gemv_or_dequant", 0, NULL, NULL, NULL, fast_ws, fast_run, 0};

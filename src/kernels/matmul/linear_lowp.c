/* linear_lowp.c - linear(x, w[, bias][, residual]) with x f32 and w a 16-bit
 * float weight [N, K] (PyTorch's layout), the weight read in place by the
 * low-precision GEMM (kernels/gemm/lowp_w.h): no packed or f32 copy, so a
 * bf16 model holds its weights once, at half their f32 size, and decode
 * streams half the bytes. The residual may alias the output (the GEMM reads
 * each residual tile before it writes it). */
#include "kernels/matmul/linear_lowp.h"

#include "core/error.h"

bool klinear_is_lowp(const k_call *call)
{
	air_dtype w = call->in[1].dtype;
	if (call->in[0].dtype != AIR_F32 || call->out[0].dtype != AIR_F32 || (w != AIR_BF16 && w != AIR_F16))
		return false;
	for (int i = 2; i < call->n_in; i++)
		if (call->in[i].dtype != AIR_F32)
			return false;
	return true;
}

air_status klinear_lowp_get(const k_call *call, klinear_lowp *out)
{
	const k_tensor *x = &call->in[0], *w = &call->in[1];
	int has_res = call->attrs[2].i != 0;
	int has_bias = kref_present(call->attrs[0].i, call->n_in - has_res, 2);
	out->wt = w->dtype == AIR_BF16 ? KLOWP_BF16 : KLOWP_F16;
	out->N = w->dims[0];
	out->K = w->dims[1];
	if (x->dims[x->rank - 1] != out->K)
		return air_error(AIR_SHAPE_MISMATCH, "linear: x has %lld features but the weight takes %lld",
				 (long long)x->dims[x->rank - 1], (long long)out->K);
	out->M = k_numel(x->rank - 1, x->dims);
	out->ep = k_epilogue_none();
	out->ep.act = (k_act)call->attrs[1].i;
	if (has_bias) {
		if (call->in[2].dims[0] != out->N)
			return air_error(AIR_SHAPE_MISMATCH, "linear: bias has %lld entries for %lld outputs",
					 (long long)call->in[2].dims[0], (long long)out->N);
		out->ep.bias_n = call->in[2].data;
	}
	if (has_res) {
		const k_tensor *res = &call->in[call->n_in - 1];
		AIR_TRY(kref_check_residual("linear", res, &call->out[0]));
		out->ep.residual = res->data;
		out->ep.ld_residual = out->N;
	}
	return AIR_OK;
}

static size_t lowp_ws(const k_call *call, int nthreads)
{
	const k_tensor *x = &call->in[0];
	int64_t K = call->in[1].dims[1];
	return kgemm_lowp_w_workspace_bytes(k_numel(x->rank - 1, x->dims), K, nthreads);
}

static air_status lowp_run(const k_call *call)
{
	klinear_lowp a;
	AIR_TRY(klinear_lowp_get(call, &a));
	kgemm_lowp_w(a.wt, a.M, a.N, a.K, call->in[0].data, a.K, call->in[1].data, a.K, call->out[0].data, a.N, &a.ep,
		     call->pool, call->workspace);
	return AIR_OK;
}

const k_kernel kfast_linear_lowp_w = {"linear_lowp_weight", 0, klinear_is_lowp, NULL, NULL, lowp_ws, lowp_run,
				      K_INPLACE_RESIDUAL};

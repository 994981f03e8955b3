/* linear_lowp.c - linear(x, w[, bias][, residual]) with x f32 and w a 16-bit
 * float weight [N, K] (PyTorch's layout), its result f32 or (out_dtype)
 * narrowed to 16 bits, the weight read in place by the
 * low-precision GEMM (kernels/gemm/lowp_w.h): no packed or f32 copy, so a
 * bf16 model holds its weights once, at half their f32 size, and decode
 * streams half the bytes. The residual may alias the output (the GEMM reads
 * each residual tile before it writes it). */
#include "kernels/matmul/linear_lowp.h"

#include "core/error.h"
#include "kernels/elementwise/cast_half.h"

bool klinear_is_lowp(const k_call *call)
{
	air_dtype w = call->in[1].dtype, y = call->out[0].dtype;
	if (call->in[0].dtype != AIR_F32 || (w != AIR_BF16 && w != AIR_F16))
		return false;
	if (y != AIR_F32 && y != AIR_BF16 && y != AIR_F16)
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

/* A 16-bit output (out_dtype: an LM head's logits, which the graph returns
 * in the model's dtype) is computed CHUNK_BYTES of f32 rows at a time into
 * the workspace and narrowed from there, so no f32 copy of the whole
 * output is held: a 512-token prompt's logits over a 32000-token
 * vocabulary are 65 MB in f32. */
#define CHUNK_BYTES ((int64_t)4 << 20)

static int64_t chunk_rows(int64_t M, int64_t N)
{
	int64_t rows = N > 0 ? CHUNK_BYTES / (N * (int64_t)sizeof(float)) : M;
	return rows < 1 ? 1 : (rows > M ? M : rows);
}

static size_t lowp_ws(const k_call *call, int nthreads)
{
	const k_tensor *x = &call->in[0];
	int64_t M = k_numel(x->rank - 1, x->dims), N = call->in[1].dims[0], K = call->in[1].dims[1];
	if (call->out[0].dtype == AIR_F32)
		return kgemm_lowp_w_workspace_bytes(M, K, nthreads);
	int64_t rows = chunk_rows(M, N);
	return k_align64((size_t)(rows * N) * sizeof(float)) + kgemm_lowp_w_workspace_bytes(rows, K, nthreads);
}

static air_status lowp_run(const k_call *call)
{
	klinear_lowp a;
	AIR_TRY(klinear_lowp_get(call, &a));
	const float *x = call->in[0].data;
	if (call->out[0].dtype == AIR_F32) {
		kgemm_lowp_w(a.wt, a.M, a.N, a.K, x, a.K, call->in[1].data, a.K, call->out[0].data, a.N, &a.ep,
			     call->pool, call->workspace);
		return AIR_OK;
	}
	int64_t rows = chunk_rows(a.M, a.N);
	float *scratch = call->workspace;
	void *ws = (char *)call->workspace + k_align64((size_t)(rows * a.N) * sizeof(float));
	uint16_t *y = call->out[0].data;
	for (int64_t m0 = 0; m0 < a.M; m0 += rows) {
		int64_t m = a.M - m0 < rows ? a.M - m0 : rows;
		kgemm_lowp_w(a.wt, m, a.N, a.K, x + m0 * a.K, a.K, call->in[1].data, a.K, scratch, a.N, &a.ep, call->pool,
			     ws);
		kcast_half(call->pool, AIR_F32, call->out[0].dtype, scratch, y + m0 * a.N, m * a.N);
	}
	return AIR_OK;
}

const k_kernel kfast_linear_lowp_w = {"linear_lowp_weight", 0, klinear_is_lowp, NULL, NULL, lowp_ws, lowp_run,
				      K_INPLACE_RESIDUAL};

/* linear_u8s8.c - linear_u8s8's kernels (linear_u8s8.h): y [..., N] = epilogue(x [..., K] u8 @
 * W [N, K] s8 ^T) as gemm_u8s8.h defines it. The fast kernel packs the constant W once, at
 * compile time (prepare); shape inference (ops/linear_u8s8.c) has checked dtypes and sizes. */
#include "kernels/gemm_q/linear_u8s8.h"

#include "kernels/gemm_q/gemm_u8s8.h"

static ku8_epi epi_of(const k_call *call, const ku8_packed *p)
{
	const k_attr *a = call->attrs;
	const int has_bias = kref_present(a[KLU8_ATTR_HAS_BIAS].i, call->n_in, 3);
	ku8_epi ep = {p ? p->colsum : NULL,
		      p ? p->scale : NULL,
		      has_bias ? call->in[3].data : NULL,
		      (int32_t)a[KLU8_ATTR_X_ZP].i,
		      (int)a[KLU8_ATTR_RELU].i,
		      (int)a[KLU8_ATTR_OUT_U8].i,
		      (float)a[KLU8_ATTR_OUT_INV_SCALE].f,
		      (float)a[KLU8_ATTR_OUT_ZP].i};
	return ep;
}

static int64_t rows_of(const k_call *call)
{
	return k_numel(call->in[0].rank - 1, call->in[0].dims);
}

air_status kref_linear_u8s8(const k_call *call)
{
	const k_tensor *x = &call->in[0], *w = &call->in[1];
	const int64_t N = w->dims[0], K = w->dims[1];
	const ku8_epi ep = epi_of(call, NULL);
	ku8_gemm_reference(rows_of(call), N, K, x->data, K, w->data, K, (float)call->attrs[KLU8_ATTR_X_SCALE].f,
			   call->in[2].data, &ep, call->out[0].data, N);
	return AIR_OK;
}

static bool fast_supports(const k_call *call)
{
	return call->in_const && call->in_const[1] && call->in_const[2];
}

static air_status fast_prepare(const k_call *call, void **prepared)
{
	const k_tensor *w = &call->in[1];
	return ku8_pack(w->dims[0], w->dims[1], w->data, w->dims[1], (float)call->attrs[KLU8_ATTR_X_SCALE].f,
			call->in[2].data, (ku8_packed **)prepared);
}

static void fast_release(void *prepared)
{
	ku8_free(prepared);
}

static air_status fast_run(const k_call *call)
{
	const ku8_packed *p = call->prepared;
	const ku8_epi ep = epi_of(call, p);
	ku8_gemm(p, rows_of(call), call->in[0].data, p->K, &ep, call->out[0].data, p->N, call->pool);
	return AIR_OK;
}

const k_kernel kfast_linear_u8s8 = {"linear_u8s8_packed", 0,	   fast_supports, fast_prepare,
				    fast_release,	  NULL, fast_run,	 0};

/* gemm_ref.c - the oracle of the tests: the naive triple loop, in double,
 * with the same epilogue. */
#include "kernels/gemm/gemm.h"

#include "kernels/common/epilogue.h" /* kref_act_f64: the oracle's activations */
#include "kernels/gemm/gemm_internal.h"

void kgemm_f32_reference(int64_t M, int64_t N, int64_t K, const float *A, int64_t rs_a, int64_t cs_a,
			 const float *B, int64_t rs_b, int64_t cs_b, float *C, int64_t ldc,
			 const k_epilogue *ep)
{
	k_epilogue none;
	ep = kgemm_ep_or_none(ep, &none);
	for (int64_t i = 0; i < M; i++) {
		for (int64_t jj = 0; jj < N; jj++) {
			double s = 0.0;
			for (int64_t p = 0; p < K; p++)
				s += (double)A[i * rs_a + p * cs_a] * (double)B[p * rs_b + jj * cs_b];
			s *= ep->alpha;
			if (ep->bias_n)
				s += ep->bias_n[jj];
			if (ep->bias_m)
				s += ep->bias_m[i];
			/* read before C[i, jj] is written: the residual may alias C */
			if (ep->residual)
				s += ep->residual[i * ep->ld_residual + jj];
			kref_act_f64(&s, 1, ep->act);
			C[i * ldc + jj] = (float)s;
		}
	}
}

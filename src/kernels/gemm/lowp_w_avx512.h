/* lowp_w_avx512.h - inline helpers of the 16-bit-weight GEMM's AVX-512 files
 * (lowp_w.bf16.c, lowp_w_pack.bf16.c): the epilogue's simple activations in
 * registers and a row of finished sums stored through the epilogue. Include
 * only from files compiled for AVX-512. */
#ifndef AIR_KERNELS_GEMM_LOWP_W_AVX512_H
#define AIR_KERNELS_GEMM_LOWP_W_AVX512_H

#include <immintrin.h>

#include "kernels/common/lanes_avx512.h"
#include "kernels/gemm/lowp_w_internal.h"
#include "kernels/gemm/ukernel.h"

/* The simple activations in registers, with kgemm_act_simple_f32's
 * comparisons (so NaN and -0 come out as there); the others go through
 * vmath once the row is stored. Scalar, per element, relu's unpredictable
 * branch took as long as a K = 512 product (ResNet's 1x1 convs). */
static inline int klowp_act_in_registers(k_act act)
{
	return act == K_ACT_RELU || act == K_ACT_RELU6 || act == K_ACT_HARDSWISH;
}

static inline __m512 klowp_simple_act(__m512 x, k_act act)
{
	const __m512 zero = _mm512_setzero_ps(), six = _mm512_set1_ps(6.0f);
	if (act == K_ACT_HARDSWISH) {
		const __m512 t = _mm512_add_ps(x, _mm512_set1_ps(3.0f));
		const __m512 t6 = _mm512_mask_mov_ps(six, _mm512_cmp_ps_mask(t, six, _CMP_LT_OQ), t);
		const __m512 c = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(t, zero, _CMP_GT_OQ), t6);
		return _mm512_mul_ps(_mm512_mul_ps(x, c), _mm512_set1_ps(1.0f / 6.0f));
	}
	x = _mm512_mask_mov_ps(x, _mm512_cmp_ps_mask(x, zero, _CMP_LT_OQ), zero);
	if (act == K_ACT_RELU6)
		x = _mm512_mask_mov_ps(x, _mm512_cmp_ps_mask(x, six, _CMP_GT_OQ), six);
	return x;
}

/* Row i of C, columns [n0, n0 + n) with n <= 16: the whole epilogue on the
 * sums s (klowp_finish's, vectorized: the same operations in the same order). */
static inline void klowp_finish_row16(const klowp_job *j, int64_t i, int64_t n0, int n, const float *s)
{
	const k_epilogue *ep = j->ep;
	const __mmask16 k = k16_lanes(n);
	float *c = j->C + i * j->ldc + n0;
	__m512 x = _mm512_mul_ps(_mm512_set1_ps(ep->alpha), _mm512_maskz_loadu_ps(k, s));
	if (ep->bias_n)
		x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(k, ep->bias_n + n0));
	if (ep->bias_m)
		x = _mm512_add_ps(x, _mm512_set1_ps(ep->bias_m[i]));
	if (ep->residual) /* read before c is written: it may alias C */
		x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(k, ep->residual + i * ep->ld_residual + n0));
	if (klowp_act_in_registers(ep->act))
		x = klowp_simple_act(x, ep->act);
	_mm512_mask_storeu_ps(c, k, x);
	if (kgemm_act_is_transcendental(ep->act))
		kgemm_epilogue_row(c, NULL, n, ep->act); /* vmath: as the f32 GEMM */
}

#endif

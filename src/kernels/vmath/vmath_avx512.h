/* vmath_avx512.h - 16-lane versions of vmath building blocks, for AVX-512
 * kernels. Each one does, lane by lane, exactly the operations of its 8-lane
 * twin in vmath_avx2.h (same constants, same order, same roundings),
 * so it gives bitwise the same results: a GEMM epilogue that uses one must
 * agree with the standalone op, and the standalone op's AVX-512 kernel
 * (vmath_avx512.c) with its AVX2 one (test_vmath checks both). */
#ifndef AIR_KERNELS_VMATH_VMATH_AVX512_H
#define AIR_KERNELS_VMATH_VMATH_AVX512_H

#include <immintrin.h>

#include "kernels/vmath/vmath_consts.h"

#define KV_C16(c) _mm512_set1_ps(c)

static inline __m512 kv_abs16(__m512 x)
{
	return _mm512_castsi512_ps(_mm512_andnot_si512(_mm512_castps_si512(KV_C16(-0.0f)), _mm512_castps_si512(x)));
}

static inline __m512 kv_signbit16(__m512 x)
{
	return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(KV_C16(-0.0f)), _mm512_castps_si512(x)));
}

/* Clamps written with the constant first pass NaN, as in the 8-lane twins:
 * _mm512_min_ps / _mm512_max_ps return the second operand when one is NaN. */

/* kv_exp_reduce8: a = n ln2 + r */
static inline __m512 kv_exp_reduce16(__m512 a, __m512 *r)
{
	__m512 n = _mm512_roundscale_ps(_mm512_mul_ps(a, KV_C16(KV_LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m512 t = _mm512_fnmadd_ps(n, KV_C16(KV_LN2_HI), a); /* exact */
	*r = _mm512_fnmadd_ps(n, KV_C16(KV_LN2_LO), t);
	return n;
}

/* kv_exp_parts8: e^r 2^n = (returned) * (*scale) */
static inline __m512 kv_exp_parts16(__m512 n, __m512 r, __m512 *scale)
{
	__m512 p = KV_C16(KV_EXP_C6);
	p = _mm512_fmadd_ps(p, r, KV_C16(KV_EXP_C5));
	p = _mm512_fmadd_ps(p, r, KV_C16(KV_EXP_C4));
	p = _mm512_fmadd_ps(p, r, KV_C16(KV_EXP_C3));
	p = _mm512_fmadd_ps(p, r, KV_C16(KV_EXP_C2));
	p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r);
	p = _mm512_add_ps(p, KV_C16(1.0f));
	__m512i ni = _mm512_cvtps_epi32(n);
	__mmask16 out = _mm512_cmp_ps_mask(n, KV_C16(-125.0f), _CMP_LT_OQ) |
			_mm512_cmp_ps_mask(n, KV_C16(127.0f), _CMP_GT_OQ);
	if (!out) { /* p in [0.7, 1.5]: adding n to its exponent stays normal */
		*scale = KV_C16(1.0f);
		return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(p), _mm512_slli_epi32(ni, 23)));
	}
	__m512i n1 = _mm512_srai_epi32(ni, 1);
	__m512i n2 = _mm512_sub_epi32(ni, n1);
	__m512i bias = _mm512_set1_epi32(127);
	*scale = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n2, bias), 23));
	return _mm512_mul_ps(p, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n1, bias), 23)));
}

static inline __m512 kv_exp_finish16(__m512 n, __m512 r)
{
	__m512 s, m = kv_exp_parts16(n, r, &s);
	return _mm512_mul_ps(m, s);
}

/* kv_exp_hl8: e^(a + b), a = n ln2 + r */
static inline __m512 kv_exp_hl16(__m512 a, __m512 b)
{
	__m512 r, n = kv_exp_reduce16(a, &r);
	return kv_exp_finish16(n, _mm512_add_ps(r, b));
}

static inline __m512 kv_exp16(__m512 x)
{
	__m512 a = _mm512_max_ps(KV_C16(KV_EXP_LO), x);
	a = _mm512_min_ps(KV_C16(KV_EXP_HI), a);
	__m512 r, n = kv_exp_reduce16(a, &r);
	return kv_exp_finish16(n, r);
}

static inline __m512 kv_tanh16(__m512 x)
{
	__m512 a = kv_abs16(x);
	__mmask16 small = _mm512_cmp_ps_mask(a, KV_C16(KV_TANH_SMALL), _CMP_LT_OQ);
	__m512 ys = _mm512_setzero_ps();
	if (small) {
		__m512 x2 = _mm512_mul_ps(x, x);
		__m512 p = KV_C16(KV_TANH_T6);
		p = _mm512_fmadd_ps(p, x2, KV_C16(KV_TANH_T5));
		p = _mm512_fmadd_ps(p, x2, KV_C16(KV_TANH_T4));
		p = _mm512_fmadd_ps(p, x2, KV_C16(KV_TANH_T3));
		p = _mm512_fmadd_ps(p, x2, KV_C16(KV_TANH_T2));
		p = _mm512_fmadd_ps(p, x2, KV_C16(KV_TANH_T1));
		p = _mm512_fmadd_ps(p, x2, KV_C16(KV_TANH_T0));
		ys = _mm512_fmadd_ps(_mm512_mul_ps(a, x2), p, a);
		ys = _mm512_or_ps(ys, kv_signbit16(x)); /* odd, and -0 stays -0 */
		if (small == 0xffff)
			return ys;
	}
	/* 1 - 2e/(1 + e), e = e^(-2|x|) in (0, 0.18] */
	__m512 na = _mm512_max_ps(KV_C16(KV_EXP_LO), _mm512_mul_ps(a, KV_C16(-2.0f)));
	__m512 r, n = kv_exp_reduce16(na, &r);
	__m512 e = kv_exp_finish16(n, r);
	__m512 q = _mm512_div_ps(_mm512_add_ps(e, e), _mm512_add_ps(e, KV_C16(1.0f)));
	__m512 yb = _mm512_or_ps(_mm512_sub_ps(KV_C16(1.0f), q), kv_signbit16(x));
	return _mm512_mask_blend_ps(small, yb, ys);
}

/* kv_sigmoid_q8: sigmoid(x + xlo) = q * (*scale) with q normal */
static inline __m512 kv_sigmoid_q16(__m512 x, __m512 xlo, int has_lo, __m512 *scale)
{
	__m512 na = _mm512_max_ps(KV_C16(KV_SIGMOID_LO), _mm512_or_ps(x, KV_C16(-0.0f))); /* -|x| */
	__m512 r, s, n = kv_exp_reduce16(na, &r);
	if (has_lo) /* -|x + xlo| = -|x| - sign(x) xlo */
		r = _mm512_add_ps(r, _mm512_xor_ps(xlo, _mm512_andnot_ps(x, KV_C16(-0.0f))));
	__m512 m = kv_exp_parts16(n, r, &s);
	__m512 e = _mm512_mul_ps(m, s);
	/* NaN fails the compare and takes m, which is NaN */
	__mmask16 pos = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GE_OQ);
	__m512 num = _mm512_mask_blend_ps(pos, m, KV_C16(1.0f));
	s = _mm512_mask_blend_ps(pos, s, KV_C16(1.0f));
	*scale = _mm512_maskz_mov_ps(_knot_mask16(_mm512_cmp_ps_mask(x, KV_C16(KV_SIGMOID_LO), _CMP_LT_OQ)), s);
	return _mm512_div_ps(num, _mm512_add_ps(e, KV_C16(1.0f)));
}

static inline __m512 kv_sigmoid16(__m512 x)
{
	__m512 s, q = kv_sigmoid_q16(x, x, 0, &s);
	return _mm512_mul_ps(q, s);
}

static inline __m512 kv_silu16(__m512 x)
{
	__m512 s, q = kv_sigmoid_q16(x, x, 0, &s);
	return _mm512_mul_ps(_mm512_mul_ps(x, q), s);
}

/* kv_gelu_tanh8: x sigmoid(v), v = 2 sqrt(2/pi) (x + 0.044715 x^3) as a
 * float pair */
static inline __m512 kv_gelu_tanh16(__m512 x)
{
	__m512 xc = _mm512_max_ps(KV_C16(-KV_GELU_TANH_CLAMP), _mm512_min_ps(KV_C16(KV_GELU_TANH_CLAMP), x));
	__m512 s = _mm512_mul_ps(xc, xc);
	__m512 slo = _mm512_fmsub_ps(xc, xc, s);
	__m512 ks = _mm512_mul_ps(KV_C16(KV_GELU_K1), s);
	__m512 kslo = _mm512_fmsub_ps(KV_C16(KV_GELU_K1), s, ks);
	__m512 k = _mm512_add_ps(KV_C16(KV_GELU_K0), ks);
	__m512 bv = _mm512_sub_ps(k, KV_C16(KV_GELU_K0));
	__m512 klo = _mm512_add_ps(_mm512_sub_ps(KV_C16(KV_GELU_K0), _mm512_sub_ps(k, bv)), _mm512_sub_ps(ks, bv));
	__m512 small = _mm512_fmadd_ps(KV_C16(KV_GELU_K1_LO), s, _mm512_add_ps(kslo, KV_C16(KV_GELU_K0_LO)));
	klo = _mm512_add_ps(klo, _mm512_fmadd_ps(KV_C16(KV_GELU_K1), slo, small));
	__m512 v = _mm512_mul_ps(xc, k);
	__m512 vlo = _mm512_fmadd_ps(xc, klo, _mm512_fmsub_ps(xc, k, v));
	__m512 sc, q = kv_sigmoid_q16(v, vlo, 1, &sc);
	return _mm512_mul_ps(_mm512_mul_ps(x, q), sc);
}

/* One of kv_gelu_center / kv_gelu_coef's 8-entry rows, per lane's piece. */
static inline __m512 kv_gelu_pick16(const float *row, __m512i idx)
{
	return _mm512_permutexvar_ps(idx, _mm512_zextps256_ps512(_mm256_loadu_ps(row)));
}

/* kv_gelu8, 16 lanes: x Phi(x) */
static inline __m512 kv_gelu16(__m512 x)
{
	__m512 ac = _mm512_min_ps(KV_C16(KV_GELU_CLAMP), kv_abs16(x));
	__mmask16 far = _mm512_cmp_ps_mask(ac, KV_C16(3.0f), _CMP_GE_OQ);
	/* piece: trunc(2a) up to 6, plus 1 from a = 5 on (only the low 3 bits
	 * of a NaN lane's index matter to the 8-entry lookup: 0, as in kv_gelu8) */
	__m512i idx = _mm512_min_epi32(_mm512_cvttps_epi32(_mm512_add_ps(ac, ac)), _mm512_set1_epi32(6));
	idx = _mm512_mask_add_epi32(idx, _mm512_cmp_ps_mask(ac, KV_C16(5.0f), _CMP_GE_OQ), idx, _mm512_set1_epi32(1));
	idx = _mm512_and_si512(idx, _mm512_set1_epi32(7));
	__m512 h = _mm512_mul_ps(ac, ac);
	__m512 l = _mm512_fmsub_ps(ac, ac, h); /* a^2 = h + l exactly */
	__m512 v = ac;
	if (far)
		v = _mm512_mask_blend_ps(far, ac, _mm512_div_ps(KV_C16(1.0f), h));
	__m512 t = _mm512_sub_ps(v, kv_gelu_pick16(kv_gelu_center, idx));
	__m512 p = kv_gelu_pick16(kv_gelu_coef[KV_GELU_DEG], idx);
	for (int k = KV_GELU_DEG - 1; k >= 0; k--)
		p = _mm512_fmadd_ps(p, t, kv_gelu_pick16(kv_gelu_coef[k], idx));
	__m512 one = KV_C16(1.0f);
	__m512 sgn1 = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(kv_signbit16(x)), _mm512_castps_si512(one)));
	__m512 pre = _mm512_mask_blend_ps(far, x, sgn1);
	__m512 a = _mm512_max_ps(KV_C16(KV_EXP_LO), _mm512_mul_ps(h, KV_C16(-0.5f)));
	__m512 e = kv_exp_hl16(a, _mm512_mul_ps(l, KV_C16(-0.5f))); /* e^(-x^2/2) */
	__m512 tt = _mm512_mul_ps(_mm512_mul_ps(pre, p), e);
	__m512 neg = _mm512_add_ps(tt, _mm512_mul_ps(x, _mm512_setzero_ps()));
	return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GT_OQ), neg, _mm512_sub_ps(x, tt));
}

#endif

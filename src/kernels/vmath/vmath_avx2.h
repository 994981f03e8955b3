/* vmath_avx2.h - vmath's building blocks on AVX2+FMA registers, 8 floats at
 * a time, for the array kernels and for GEMM epilogues and fused loops that
 * apply an activation to a tile still in registers. Same algorithms and
 * constants as ../../vmath_scalar.h; each kv_<fn>8 is within the bounds
 * measured in tests/c/test_vmath.c for every input, NaN and inf included.
 * Only for files compiled with -mavx2 -mfma (kernels/<family>/<name>.avx2.c and .avx512.c). */
#ifndef AIR_KERNELS_VMATH_VMATH_AVX2_H
#define AIR_KERNELS_VMATH_VMATH_AVX2_H

#include <immintrin.h>
#include <math.h>

#include "kernels/vmath/vmath_consts.h"

#define KV_C8(c) _mm256_set1_ps(c)

static inline __m256 kv_abs8(__m256 x)
{
	return _mm256_andnot_ps(KV_C8(-0.0f), x);
}

static inline __m256 kv_signbit8(__m256 x)
{
	return _mm256_and_ps(KV_C8(-0.0f), x);
}

/* Note on clamps: _mm256_min_ps(c, x) and _mm256_max_ps(c, x) return x when
 * x is NaN, so NaN passes every clamp written with the constant first. */

static inline __m256 kv_exp_reduce8(__m256 a, __m256 *r)
{
	__m256 n = _mm256_round_ps(_mm256_mul_ps(a, KV_C8(KV_LOG2E)),
				   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m256 t = _mm256_fnmadd_ps(n, KV_C8(KV_LN2_HI), a); /* exact */
	*r = _mm256_fnmadd_ps(n, KV_C8(KV_LN2_LO), t);
	return n;
}

/* e^r 2^n = (returned) * (*scale), for |r| <= ln2/2 (plus a little) and n
 * in [-174, 128]. When every n is in [-125, 127], 2^n goes straight into
 * the exponent bits and scale is 1; otherwise 2^n is split in two normal
 * factors, so that results down to the subnormals come out right (and
 * n = 128 gives inf). A caller that scales the result further applies
 * *scale last, so that it rounds into the subnormals only once. */
static inline __m256 kv_exp_parts8(__m256 n, __m256 r, __m256 *scale)
{
	__m256 p = KV_C8(KV_EXP_C6);
	p = _mm256_fmadd_ps(p, r, KV_C8(KV_EXP_C5));
	p = _mm256_fmadd_ps(p, r, KV_C8(KV_EXP_C4));
	p = _mm256_fmadd_ps(p, r, KV_C8(KV_EXP_C3));
	p = _mm256_fmadd_ps(p, r, KV_C8(KV_EXP_C2));
	p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r);
	p = _mm256_add_ps(p, KV_C8(1.0f));
	__m256i ni = _mm256_cvtps_epi32(n);
	__m256 out = _mm256_or_ps(_mm256_cmp_ps(n, KV_C8(-125.0f), _CMP_LT_OQ),
				  _mm256_cmp_ps(n, KV_C8(127.0f), _CMP_GT_OQ));
	if (!_mm256_movemask_ps(out)) {
		/* p in [0.7, 1.5]: adding n to its exponent stays normal (a NaN
		 * p stays NaN: ni is then 0x80000000, which shifts to 0) */
		*scale = KV_C8(1.0f);
		return _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), _mm256_slli_epi32(ni, 23)));
	}
	__m256i n1 = _mm256_srai_epi32(ni, 1);
	__m256i n2 = _mm256_sub_epi32(ni, n1);
	__m256i bias = _mm256_set1_epi32(127);
	*scale = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
	return _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23)));
}

static inline __m256 kv_exp_finish8(__m256 n, __m256 r)
{
	__m256 s, m = kv_exp_parts8(n, r, &s);
	return _mm256_mul_ps(m, s);
}

/* e^(a + b) for a in [KV_EXP_LO, KV_EXP_HI] or NaN, b a small correction
 * (the low half of a double-float argument) */
static inline __m256 kv_exp_hl8(__m256 a, __m256 b)
{
	__m256 r, n = kv_exp_reduce8(a, &r);
	return kv_exp_finish8(n, _mm256_add_ps(r, b));
}

static inline __m256 kv_exp8(__m256 x)
{
	__m256 a = _mm256_max_ps(KV_C8(KV_EXP_LO), x);
	a = _mm256_min_ps(KV_C8(KV_EXP_HI), a);
	__m256 r, n = kv_exp_reduce8(a, &r);
	return kv_exp_finish8(n, r);
}

static inline __m256 kv_log8(__m256 x)
{
	/* subnormals: scale by 2^23 first */
	__m256 tiny = _mm256_cmp_ps(x, KV_C8(0x1p-126f), _CMP_LT_OQ);
	__m256 xs = _mm256_blendv_ps(x, _mm256_mul_ps(x, KV_C8(0x1p23f)), tiny);
	__m256 kadj = _mm256_and_ps(tiny, KV_C8(-23.0f));
	__m256i u = _mm256_castps_si256(xs);
	__m256i k = _mm256_srai_epi32(_mm256_sub_epi32(u, _mm256_set1_epi32((int)KV_SQRT_HALF_BITS)), 23);
	__m256 m = _mm256_castsi256_ps(_mm256_sub_epi32(u, _mm256_slli_epi32(k, 23)));
	__m256 kf = _mm256_add_ps(_mm256_cvtepi32_ps(k), kadj);
	__m256 f = _mm256_sub_ps(m, KV_C8(1.0f)); /* exact */
	__m256 f2 = _mm256_mul_ps(f, f);
	__m256 p = KV_C8(KV_LOG_L7);
	p = _mm256_fmadd_ps(p, f, KV_C8(KV_LOG_L6));
	p = _mm256_fmadd_ps(p, f, KV_C8(KV_LOG_L5));
	p = _mm256_fmadd_ps(p, f, KV_C8(KV_LOG_L4));
	p = _mm256_fmadd_ps(p, f, KV_C8(KV_LOG_L3));
	p = _mm256_fmadd_ps(p, f, KV_C8(KV_LOG_L2));
	p = _mm256_fmadd_ps(p, f, KV_C8(KV_LOG_L1));
	p = _mm256_fmadd_ps(p, f, KV_C8(KV_LOG_L0));
	__m256 y = _mm256_fmadd_ps(_mm256_mul_ps(f, f2), p, _mm256_mul_ps(kf, KV_C8(KV_LN2_LO)));
	y = _mm256_fnmadd_ps(KV_C8(0.5f), f2, y);
	y = _mm256_add_ps(y, f);
	y = _mm256_fmadd_ps(kf, KV_C8(KV_LN2_HI), y);
	/* x < 0 -> NaN, +-0 -> -inf, +inf and NaN -> x */
	y = _mm256_blendv_ps(y, KV_C8(NAN), _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ));
	y = _mm256_blendv_ps(y, KV_C8(-INFINITY), _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_EQ_OQ));
	__m256 pass = _mm256_or_ps(_mm256_cmp_ps(x, KV_C8(INFINITY), _CMP_EQ_OQ),
				   _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
	return _mm256_blendv_ps(y, x, pass);
}

static inline __m256 kv_tanh8(__m256 x)
{
	__m256 a = kv_abs8(x);
	__m256 small = _mm256_cmp_ps(a, KV_C8(KV_TANH_SMALL), _CMP_LT_OQ);
	int ms = _mm256_movemask_ps(small);
	__m256 ys = _mm256_setzero_ps(), yb = _mm256_setzero_ps();
	if (ms) {
		__m256 x2 = _mm256_mul_ps(x, x);
		__m256 p = KV_C8(KV_TANH_T6);
		p = _mm256_fmadd_ps(p, x2, KV_C8(KV_TANH_T5));
		p = _mm256_fmadd_ps(p, x2, KV_C8(KV_TANH_T4));
		p = _mm256_fmadd_ps(p, x2, KV_C8(KV_TANH_T3));
		p = _mm256_fmadd_ps(p, x2, KV_C8(KV_TANH_T2));
		p = _mm256_fmadd_ps(p, x2, KV_C8(KV_TANH_T1));
		p = _mm256_fmadd_ps(p, x2, KV_C8(KV_TANH_T0));
		ys = _mm256_fmadd_ps(_mm256_mul_ps(a, x2), p, a);
		ys = _mm256_or_ps(ys, kv_signbit8(x)); /* odd, and -0 stays -0 */
		if (ms == 0xff)
			return ys;
	}
	/* 1 - 2e/(1 + e), e = e^(-2|x|) in (0, 0.18] */
	__m256 na = _mm256_max_ps(KV_C8(KV_EXP_LO), _mm256_mul_ps(a, KV_C8(-2.0f)));
	__m256 r, n = kv_exp_reduce8(na, &r);
	__m256 e = kv_exp_finish8(n, r);
	__m256 q = _mm256_div_ps(_mm256_add_ps(e, e), _mm256_add_ps(e, KV_C8(1.0f)));
	yb = _mm256_or_ps(_mm256_sub_ps(KV_C8(1.0f), q), kv_signbit8(x));
	return ms ? _mm256_blendv_ps(yb, ys, small) : yb;
}

/* sigmoid(x + xlo) = q * (*scale) with q normal: for x < 0, e^x's last
 * factor 2^k (see kv_exp_parts8) is kept apart, so that silu and gelu_tanh
 * round x e^x into the subnormals once; below KV_SIGMOID_LO, where e^x was
 * clamped, scale is 0, so that x sigmoid(x) is -0 (and NaN at -inf, like
 * PyTorch). xlo is the low half of a float-pair argument (has_lo 1) or
 * ignored (has_lo 0, folded away when inlined). */
static inline __m256 kv_sigmoid_q8(__m256 x, __m256 xlo, int has_lo, __m256 *scale)
{
	__m256 na = _mm256_max_ps(KV_C8(KV_SIGMOID_LO), _mm256_or_ps(x, KV_C8(-0.0f))); /* -|x| */
	__m256 r, s, n = kv_exp_reduce8(na, &r);
	if (has_lo) /* -|x + xlo| = -|x| - sign(x) xlo */
		r = _mm256_add_ps(r, _mm256_xor_ps(xlo, _mm256_andnot_ps(x, KV_C8(-0.0f))));
	__m256 m = kv_exp_parts8(n, r, &s);
	__m256 e = _mm256_mul_ps(m, s);
	/* NaN fails the compare and takes m, which is NaN */
	__m256 pos = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GE_OQ);
	__m256 num = _mm256_blendv_ps(m, KV_C8(1.0f), pos);
	s = _mm256_blendv_ps(s, KV_C8(1.0f), pos);
	*scale = _mm256_andnot_ps(_mm256_cmp_ps(x, KV_C8(KV_SIGMOID_LO), _CMP_LT_OQ), s);
	return _mm256_div_ps(num, _mm256_add_ps(e, KV_C8(1.0f)));
}

static inline __m256 kv_sigmoid8(__m256 x)
{
	__m256 s, q = kv_sigmoid_q8(x, x, 0, &s);
	return _mm256_mul_ps(q, s);
}

static inline __m256 kv_silu8(__m256 x)
{
	__m256 s, q = kv_sigmoid_q8(x, x, 0, &s);
	return _mm256_mul_ps(_mm256_mul_ps(x, q), s);
}

/* e^(z^2) erfc(z) for z in [0, KV_ERFCX_MAX] (or NaN) */
static inline __m256 kv_erfcx8(__m256 z)
{
	__m256 far = _mm256_cmp_ps(z, KV_C8(KV_ERFCX_SPLIT), _CMP_GE_OQ);
	int mf = _mm256_movemask_ps(far);
	__m256 ra = _mm256_setzero_ps(), rb = _mm256_setzero_ps();
	if (mf != 0xff) {
		__m256 t = _mm256_sub_ps(z, KV_C8(1.0f));
		__m256 p = KV_C8(KV_ERFCX_A12);
		p = _mm256_fmadd_ps(p, t, KV_C8(KV_ERFCX_A11));
		p = _mm256_fmadd_ps(p, t, KV_C8(KV_ERFCX_A10));
		p = _mm256_fmadd_ps(p, t, KV_C8(KV_ERFCX_A9));
		p = _mm256_fmadd_ps(p, t, KV_C8(KV_ERFCX_A8));
		p = _mm256_fmadd_ps(p, t, KV_C8(KV_ERFCX_A7));
		p = _mm256_fmadd_ps(p, t, KV_C8(KV_ERFCX_A6));
		p = _mm256_fmadd_ps(p, t, KV_C8(KV_ERFCX_A5));
		p = _mm256_fmadd_ps(p, t, KV_C8(KV_ERFCX_A4));
		p = _mm256_fmadd_ps(p, t, KV_C8(KV_ERFCX_A3));
		p = _mm256_fmadd_ps(p, t, KV_C8(KV_ERFCX_A2));
		p = _mm256_fmadd_ps(p, t, KV_C8(KV_ERFCX_A1));
		ra = _mm256_fmadd_ps(p, t, KV_C8(KV_ERFCX_A0));
		if (mf == 0)
			return ra;
	}
	__m256 u = _mm256_div_ps(KV_C8(1.0f), z);
	__m256 ulo = _mm256_mul_ps(_mm256_fnmadd_ps(z, u, KV_C8(1.0f)), u); /* 1/z - u */
	__m256 w = _mm256_mul_ps(u, u);
	__m256 q = KV_C8(KV_ERFCX_B8);
	q = _mm256_fmadd_ps(q, w, KV_C8(KV_ERFCX_B7));
	q = _mm256_fmadd_ps(q, w, KV_C8(KV_ERFCX_B6));
	q = _mm256_fmadd_ps(q, w, KV_C8(KV_ERFCX_B5));
	q = _mm256_fmadd_ps(q, w, KV_C8(KV_ERFCX_B4));
	q = _mm256_fmadd_ps(q, w, KV_C8(KV_ERFCX_B3));
	q = _mm256_fmadd_ps(q, w, KV_C8(KV_ERFCX_B2));
	q = _mm256_fmadd_ps(q, w, KV_C8(KV_ERFCX_B1));
	q = _mm256_fmadd_ps(q, w, KV_C8(KV_ERFCX_B0));
	rb = _mm256_fmadd_ps(u, q, _mm256_mul_ps(ulo, q));
	return mf == 0xff ? rb : _mm256_blendv_ps(ra, rb, far);
}

static inline __m256 kv_erf8(__m256 x)
{
	__m256 z = kv_abs8(x);
	__m256 small = _mm256_cmp_ps(z, KV_C8(KV_ERF_SMALL), _CMP_LT_OQ);
	int ms = _mm256_movemask_ps(small);
	__m256 ys = _mm256_setzero_ps(), yb = _mm256_setzero_ps();
	if (ms) {
		__m256 z2 = _mm256_mul_ps(z, z);
		__m256 p = KV_C8(KV_ERF_E5);
		p = _mm256_fmadd_ps(p, z2, KV_C8(KV_ERF_E4));
		p = _mm256_fmadd_ps(p, z2, KV_C8(KV_ERF_E3));
		p = _mm256_fmadd_ps(p, z2, KV_C8(KV_ERF_E2));
		p = _mm256_fmadd_ps(p, z2, KV_C8(KV_ERF_E1));
		p = _mm256_fmadd_ps(p, z2, KV_C8(KV_ERF_E0));
		ys = _mm256_fmadd_ps(x, p, x);
		if (ms == 0xff)
			return ys;
	}
	/* 1 - e^(-z^2) erfcx(z), with z^2 = h + l exactly */
	__m256 zc = _mm256_min_ps(KV_C8(KV_ERF_ONE), z);
	__m256 h = _mm256_mul_ps(zc, zc);
	__m256 l = _mm256_fmsub_ps(zc, zc, h);
	__m256 e = kv_exp_hl8(_mm256_xor_ps(h, KV_C8(-0.0f)), _mm256_xor_ps(l, KV_C8(-0.0f)));
	yb = _mm256_fnmadd_ps(e, kv_erfcx8(zc), KV_C8(1.0f));
	yb = _mm256_or_ps(yb, kv_signbit8(x));
	return ms ? _mm256_blendv_ps(yb, ys, small) : yb;
}

/* x Phi(x), Phi the normal CDF. With t = x Phi(-|x|) = x g(|x|) e^(-x^2/2)
 * (no cancellation), gelu = x - t for x > 0 and t otherwise; g comes from
 * one of 8 polynomials picked per lane (see kv_gelu_coef). Like PyTorch,
 * gelu(-inf) is NaN. */
static inline __m256 kv_gelu8(__m256 x)
{
	__m256 ac = _mm256_min_ps(KV_C8(KV_GELU_CLAMP), kv_abs8(x));
	__m256 far = _mm256_cmp_ps(ac, KV_C8(3.0f), _CMP_GE_OQ);
	/* piece: trunc(2a) up to 6, plus 1 from a = 5 on */
	__m256i idx = _mm256_min_epi32(_mm256_cvttps_epi32(_mm256_add_ps(ac, ac)), _mm256_set1_epi32(6));
	idx = _mm256_sub_epi32(idx, _mm256_castps_si256(_mm256_cmp_ps(ac, KV_C8(5.0f), _CMP_GE_OQ)));
	__m256 h = _mm256_mul_ps(ac, ac);
	__m256 l = _mm256_fmsub_ps(ac, ac, h); /* a^2 = h + l exactly */
	__m256 v = ac;
	if (_mm256_movemask_ps(far)) /* the division only when a lane needs it */
		v = _mm256_blendv_ps(ac, _mm256_div_ps(KV_C8(1.0f), h), far);
	__m256 t = _mm256_sub_ps(v, _mm256_permutevar8x32_ps(_mm256_loadu_ps(kv_gelu_center), idx));
	__m256 p = _mm256_permutevar8x32_ps(_mm256_loadu_ps(kv_gelu_coef[KV_GELU_DEG]), idx);
	for (int k = KV_GELU_DEG - 1; k >= 0; k--)
		p = _mm256_fmadd_ps(p, t, _mm256_permutevar8x32_ps(_mm256_loadu_ps(kv_gelu_coef[k]), idx));
	/* near pieces: x g(a); far pieces: sign(x) a g(a) */
	__m256 pre = _mm256_blendv_ps(x, _mm256_or_ps(kv_signbit8(x), KV_C8(1.0f)), far);
	__m256 a = _mm256_max_ps(KV_C8(KV_EXP_LO), _mm256_mul_ps(h, KV_C8(-0.5f)));
	__m256 e = kv_exp_hl8(a, _mm256_mul_ps(l, KV_C8(-0.5f))); /* e^(-x^2/2) */
	/* scale first: e may be subnormal */
	__m256 tt = _mm256_mul_ps(_mm256_mul_ps(pre, p), e);
	/* x > 0, not >= 0: gelu(-0) is -0. x * 0 is -0 for finite x <= 0 and
	 * NaN at -inf, which is PyTorch's gelu(-inf). */
	__m256 neg = _mm256_add_ps(tt, _mm256_mul_ps(x, _mm256_setzero_ps()));
	return _mm256_blendv_ps(neg, _mm256_sub_ps(x, tt), _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GT_OQ));
}

/* 0.5 x (1 + tanh(v/2)) = x sigmoid(v), v = 2 sqrt(2/pi) (x + 0.044715 x^3),
 * with v as a float pair v + vlo (see KV_GELU_K0_LO) */
static inline __m256 kv_gelu_tanh8(__m256 x)
{
	__m256 xc = _mm256_max_ps(KV_C8(-KV_GELU_TANH_CLAMP), _mm256_min_ps(KV_C8(KV_GELU_TANH_CLAMP), x));
	__m256 s = _mm256_mul_ps(xc, xc);
	__m256 slo = _mm256_fmsub_ps(xc, xc, s);
	__m256 ks = _mm256_mul_ps(KV_C8(KV_GELU_K1), s);
	__m256 kslo = _mm256_fmsub_ps(KV_C8(KV_GELU_K1), s, ks);
	/* k = K0 + ks as a pair (TwoSum: ks may be the larger) */
	__m256 k = _mm256_add_ps(KV_C8(KV_GELU_K0), ks);
	__m256 bv = _mm256_sub_ps(k, KV_C8(KV_GELU_K0));
	__m256 klo = _mm256_add_ps(_mm256_sub_ps(KV_C8(KV_GELU_K0), _mm256_sub_ps(k, bv)), _mm256_sub_ps(ks, bv));
	__m256 small = _mm256_fmadd_ps(KV_C8(KV_GELU_K1_LO), s, _mm256_add_ps(kslo, KV_C8(KV_GELU_K0_LO)));
	klo = _mm256_add_ps(klo, _mm256_fmadd_ps(KV_C8(KV_GELU_K1), slo, small));
	__m256 v = _mm256_mul_ps(xc, k);
	__m256 vlo = _mm256_fmadd_ps(xc, klo, _mm256_fmsub_ps(xc, k, v));
	__m256 sc, q = kv_sigmoid_q8(v, vlo, 1, &sc);
	return _mm256_mul_ps(_mm256_mul_ps(x, q), sc);
}

/* lanes of |x| > KV_TRIG_BIG (and inf): libm's exact reduction, in double */
static inline __m256 kv_trig_big8(__m256 x, __m256 y, int lanes, int cos_shift)
{
	float xs[8], ys[8];
	_mm256_storeu_ps(xs, x);
	_mm256_storeu_ps(ys, y);
	for (int i = 0; i < 8; i++)
		if (lanes & (1 << i))
			ys[i] = (float)(cos_shift ? cos((double)xs[i]) : sin((double)xs[i]));
	return _mm256_loadu_ps(ys);
}

/* sin (cos_shift 0) or cos (cos_shift 1); reduced as |x| = n pi/2 + r */
static inline __m256 kv_trig8(__m256 x, int cos_shift)
{
	__m256 a = kv_abs8(x);
	__m256 n = _mm256_round_ps(_mm256_mul_ps(a, KV_C8(KV_2_PI)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m256 r = _mm256_fnmadd_ps(n, KV_C8(KV_PIO2_P1), a);
	r = _mm256_fnmadd_ps(n, KV_C8(KV_PIO2_P2), r);
	r = _mm256_fnmadd_ps(n, KV_C8(KV_PIO2_P3), r);
	__m256i q = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(cos_shift));
	__m256 r2 = _mm256_mul_ps(r, r);
	__m256 ps = KV_C8(KV_SIN_S3);
	ps = _mm256_fmadd_ps(ps, r2, KV_C8(KV_SIN_S2));
	ps = _mm256_fmadd_ps(ps, r2, KV_C8(KV_SIN_S1));
	ps = _mm256_fmadd_ps(ps, r2, KV_C8(KV_SIN_S0));
	__m256 s = _mm256_fmadd_ps(_mm256_mul_ps(r, r2), ps, r);
	__m256 pc = KV_C8(KV_COS_C3);
	pc = _mm256_fmadd_ps(pc, r2, KV_C8(KV_COS_C2));
	pc = _mm256_fmadd_ps(pc, r2, KV_C8(KV_COS_C1));
	pc = _mm256_fmadd_ps(pc, r2, KV_C8(KV_COS_C0));
	__m256 c = _mm256_fmadd_ps(_mm256_mul_ps(r2, r2), pc, _mm256_fnmadd_ps(KV_C8(0.5f), r2, KV_C8(1.0f)));
	/* odd quadrant: the cosine; quadrants 2 and 3: negated */
	__m256 y = _mm256_blendv_ps(s, c, _mm256_castsi256_ps(_mm256_slli_epi32(q, 31)));
	y = _mm256_xor_ps(y, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_srli_epi32(q, 1), 31)));
	if (!cos_shift)
		y = _mm256_xor_ps(y, kv_signbit8(x)); /* sin is odd */
	int big = _mm256_movemask_ps(_mm256_cmp_ps(a, KV_C8(KV_TRIG_BIG), _CMP_GT_OQ));
	if (big)
		y = kv_trig_big8(x, y, big, cos_shift);
	return y;
}

static inline __m256 kv_sin8(__m256 x)
{
	return kv_trig8(x, 0);
}

static inline __m256 kv_cos8(__m256 x)
{
	return kv_trig8(x, 1);
}

/* The 12-bit estimate cut to 12 bits (so that y^2 is exact and the residual
 * e = 1 - x y^2 has one rounding), then one third-order correction
 * y (1 + e/2 + 3e^2/8): 0.502 ulp. Zero, subnormals (the estimate flushes
 * them), x >= 2^126 (y^2 would be subnormal), negatives, inf and NaN take
 * 1/sqrt(x) in double. */
static inline __m256 kv_rsqrt8(__m256 x)
{
	__m256 y = _mm256_and_ps(_mm256_rsqrt_ps(x), _mm256_castsi256_ps(_mm256_set1_epi32((int)0xfffff000u)));
	__m256 e = _mm256_fnmadd_ps(x, _mm256_mul_ps(y, y), KV_C8(1.0f));
	__m256 c = _mm256_mul_ps(e, _mm256_fmadd_ps(e, KV_C8(0.375f), KV_C8(0.5f)));
	y = _mm256_fmadd_ps(y, c, y);
	__m256 ok = _mm256_and_ps(_mm256_cmp_ps(x, KV_C8(0x1p-126f), _CMP_GE_OQ),
				  _mm256_cmp_ps(x, KV_C8(0x1p126f), _CMP_LT_OQ));
	if (_mm256_movemask_ps(ok) != 0xff) {
		__m256d one = _mm256_set1_pd(1.0);
		__m256d lo = _mm256_div_pd(one, _mm256_sqrt_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(x))));
		__m256d hi = _mm256_div_pd(one, _mm256_sqrt_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(x, 1))));
		__m256 d = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm256_cvtpd_ps(lo)), _mm256_cvtpd_ps(hi), 1);
		y = _mm256_blendv_ps(d, y, ok);
	}
	return y;
}

#endif

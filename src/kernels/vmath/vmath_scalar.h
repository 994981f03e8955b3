/* vmath_scalar.h - vmath's building blocks one float at a time, in portable
 * C: the same algorithms and constants as vmath_avx2.h, for the
 * portable kernels, loop tails and the reference GEMM epilogue.
 * Assumes IEEE binary32/binary64 in round-to-nearest, FLT_EVAL_METHOD 0 or
 * rintf() otherwise. */
#ifndef AIR_KERNELS_VMATH_VMATH_SCALAR_H
#define AIR_KERNELS_VMATH_VMATH_SCALAR_H

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/vmath/vmath_consts.h"

static inline uint32_t kv_bits1(float x)
{
	uint32_t u;
	memcpy(&u, &x, sizeof u);
	return u;
}

static inline float kv_float1(uint32_t u)
{
	float x;
	memcpy(&x, &u, sizeof x);
	return x;
}

/* a * b + c with (nearly) one rounding: the product is exact in double and
 * the double sum rounds once more only in rare halfway cases. Used only
 * where a product's low half matters (x^2 as hi + lo, 1/z's remainder). */
static inline float kv_fma1(float a, float b, float c)
{
#ifdef FP_FAST_FMAF
	return fmaf(a, b, c);
#else
	return (float)((double)a * (double)b + (double)c);
#endif
}

/* x rounded to the nearest integer, |x| < 2^22 */
static inline float kv_round1(float x)
{
#if FLT_EVAL_METHOD == 0
	const float magic = 0x1.8p23f;
	return (x + magic) - magic;
#else
	return rintf(x);
#endif
}

/* e^(a + b) = (returned) * (*scale) for a in [KV_EXP_LO, KV_EXP_HI] (not
 * NaN) and |b| a few ulp of a: b is added after the reduction, so a + b need
 * not be representable. 2^n is split in two normal factors so that results
 * down to the subnormals work; *scale is the second, for callers that
 * multiply further and should round into the subnormals only once. */
static inline float kv_exp_parts1(float a, float b, float *scale)
{
	float n = kv_round1(a * KV_LOG2E);
	float r = a - n * KV_LN2_HI; /* exact */
	r = r - n * KV_LN2_LO;
	r = r + b;
	float p = KV_EXP_C6;
	p = p * r + KV_EXP_C5;
	p = p * r + KV_EXP_C4;
	p = p * r + KV_EXP_C3;
	p = p * r + KV_EXP_C2;
	p = 1.0f + (r + (r * r) * p);
	int32_t ni = (int32_t)n, n1 = ni / 2, n2 = ni - n1;
	*scale = kv_float1((uint32_t)(n2 + 127) << 23);
	return p * kv_float1((uint32_t)(n1 + 127) << 23);
}

static inline float kv_exp_core1(float a, float b)
{
	float s, m = kv_exp_parts1(a, b, &s);
	return m * s;
}

static inline float kv_clamp_exp1(float x)
{
	return x < KV_EXP_LO ? KV_EXP_LO : (x > KV_EXP_HI ? KV_EXP_HI : x);
}

static inline float kv_exp1(float x)
{
	if (x != x)
		return x + x;
	return kv_exp_core1(kv_clamp_exp1(x), 0.0f);
}

static inline float kv_log1(float x)
{
	if (!(x > 0.0f) || x == INFINITY) {
		if (x == 0.0f)
			return -INFINITY;
		return x < 0.0f ? NAN : x + x; /* NaN or +inf */
	}
	float kf = 0.0f;
	if (x < FLT_MIN) { /* subnormal: scale into the normals */
		x *= 0x1p23f;
		kf = -23.0f;
	}
	uint32_t u = kv_bits1(x);
	/* k = exponent of x / sqrt(1/2), so that m = x 2^-k is in [sqrt 1/2, sqrt 2) */
	int32_t k = (int32_t)(u - KV_SQRT_HALF_BITS) >> 23;
	float m = kv_float1(u - ((uint32_t)k << 23));
	kf += (float)k;
	float f = m - 1.0f; /* exact */
	float f2 = f * f;
	float p = KV_LOG_L7;
	p = p * f + KV_LOG_L6;
	p = p * f + KV_LOG_L5;
	p = p * f + KV_LOG_L4;
	p = p * f + KV_LOG_L3;
	p = p * f + KV_LOG_L2;
	p = p * f + KV_LOG_L1;
	p = p * f + KV_LOG_L0;
	float y = (f * f2) * p + kf * KV_LN2_LO;
	y = y - 0.5f * f2;
	y = y + f;
	return y + kf * KV_LN2_HI;
}

static inline float kv_tanh1(float x)
{
	float a = fabsf(x);
	if (a < KV_TANH_SMALL) {
		float x2 = x * x;
		float p = KV_TANH_T6;
		p = p * x2 + KV_TANH_T5;
		p = p * x2 + KV_TANH_T4;
		p = p * x2 + KV_TANH_T3;
		p = p * x2 + KV_TANH_T2;
		p = p * x2 + KV_TANH_T1;
		p = p * x2 + KV_TANH_T0;
		return copysignf(a + (a * x2) * p, x); /* tanh(-0) = -0 */
	}
	if (a != a)
		return x + x;
	float e = kv_exp_core1(kv_clamp_exp1(-2.0f * a), 0.0f);
	float t = 1.0f - (e + e) / (1.0f + e);
	return copysignf(t, x);
}

/* sigmoid(x + xlo) = q * (*scale), from e = e^-|x| <= 1 (no overflow); xlo
 * is the low half of a float-pair argument, or 0. For
 * x < 0 the last factor of e^x stays in scale, so that x sigmoid(x) rounds
 * into the subnormals once; below KV_SIGMOID_LO scale is 0, so that x sigmoid(x)
 * is -0 for huge negative x and NaN at -inf, like PyTorch. */
static inline float kv_sigmoid_q1(float x, float xlo, float *scale)
{
	if (x != x) {
		*scale = 1.0f;
		return x + x;
	}
	float a = -fabsf(x);
	/* -|x + xlo| = -|x| - sign(x) xlo */
	float s, m = kv_exp_parts1(a < KV_SIGMOID_LO ? KV_SIGMOID_LO : a, x < 0.0f ? xlo : -xlo, &s);
	float q, e = m * s;
	if (x >= 0.0f) {
		q = 1.0f / (1.0f + e);
		s = 1.0f;
	} else {
		q = m / (1.0f + e);
	}
	*scale = x < KV_SIGMOID_LO ? 0.0f : s;
	return q;
}

static inline float kv_sigmoid1(float x)
{
	float s, q = kv_sigmoid_q1(x, 0.0f, &s);
	return q * s;
}

static inline float kv_silu1(float x)
{
	float s, q = kv_sigmoid_q1(x, 0.0f, &s);
	return (x * q) * s;
}

/* e^(z^2) erfc(z) for z in [0, KV_ERFCX_MAX] */
static inline float kv_erfcx1(float z)
{
	if (z < KV_ERFCX_SPLIT) {
		float t = z - 1.0f;
		float p = KV_ERFCX_A12;
		p = p * t + KV_ERFCX_A11;
		p = p * t + KV_ERFCX_A10;
		p = p * t + KV_ERFCX_A9;
		p = p * t + KV_ERFCX_A8;
		p = p * t + KV_ERFCX_A7;
		p = p * t + KV_ERFCX_A6;
		p = p * t + KV_ERFCX_A5;
		p = p * t + KV_ERFCX_A4;
		p = p * t + KV_ERFCX_A3;
		p = p * t + KV_ERFCX_A2;
		p = p * t + KV_ERFCX_A1;
		return p * t + KV_ERFCX_A0;
	}
	float u = 1.0f / z;
	float ulo = kv_fma1(-z, u, 1.0f) * u; /* 1/z - u */
	float w = u * u;
	float q = KV_ERFCX_B8;
	q = q * w + KV_ERFCX_B7;
	q = q * w + KV_ERFCX_B6;
	q = q * w + KV_ERFCX_B5;
	q = q * w + KV_ERFCX_B4;
	q = q * w + KV_ERFCX_B3;
	q = q * w + KV_ERFCX_B2;
	q = q * w + KV_ERFCX_B1;
	q = q * w + KV_ERFCX_B0;
	return u * q + ulo * q;
}

static inline float kv_erf1(float x)
{
	float z = fabsf(x);
	if (z < KV_ERF_SMALL) {
		float z2 = z * z;
		float p = KV_ERF_E5;
		p = p * z2 + KV_ERF_E4;
		p = p * z2 + KV_ERF_E3;
		p = p * z2 + KV_ERF_E2;
		p = p * z2 + KV_ERF_E1;
		p = p * z2 + KV_ERF_E0;
		return x + x * p;
	}
	if (z != z)
		return x + x;
	if (z > KV_ERF_ONE)
		z = KV_ERF_ONE;
	float h = z * z, l = kv_fma1(z, z, -h); /* z^2 = h + l exactly */
	float t = 1.0f - kv_exp_core1(-h, -l) * kv_erfcx1(z);
	return copysignf(t, x);
}

/* x Phi(x), Phi the normal CDF. With t = x Phi(-|x|) = x g(|x|) e^(-x^2/2)
 * (no cancellation), gelu = x - t for x > 0 and t otherwise; g from one of
 * 8 polynomials (see kv_gelu_coef). gelu(-inf) is NaN, like PyTorch. */
static inline float kv_gelu1(float x)
{
	if (x != x)
		return x + x;
	float ac = fabsf(x);
	if (ac > KV_GELU_CLAMP)
		ac = KV_GELU_CLAMP;
	int i = (int)(ac + ac);
	i = ac >= 5.0f ? 7 : (i > 6 ? 6 : i);
	float h = ac * ac, l = kv_fma1(ac, ac, -h); /* a^2 = h + l exactly */
	float v = ac, pre = x;
	if (ac >= 3.0f) { /* far pieces: sign(x) a g(a) in 1/a^2 */
		v = 1.0f / h;
		pre = copysignf(1.0f, x);
	}
	float t = v - kv_gelu_center[i];
	float p = kv_gelu_coef[KV_GELU_DEG][i];
	for (int k = KV_GELU_DEG - 1; k >= 0; k--)
		p = p * t + kv_gelu_coef[k][i];
	float a = -0.5f * h;
	float e = kv_exp_core1(a < KV_EXP_LO ? KV_EXP_LO : a, -0.5f * l); /* e^(-x^2/2) */
	float tt = (pre * p) * e; /* e last: it may be subnormal */
	return x > 0.0f ? x - tt : tt + x * 0.0f; /* -0 stays -0; -inf gives NaN */
}

/* 0.5 x (1 + tanh(v/2)) = x sigmoid(v), v = 2 sqrt(2/pi) (x + 0.044715 x^3),
 * with v computed in double and split into a float pair */
static inline float kv_gelu_tanh1(float x)
{
	if (x != x)
		return x + x;
	float xc = x < -KV_GELU_TANH_CLAMP ? -KV_GELU_TANH_CLAMP : (x > KV_GELU_TANH_CLAMP ? KV_GELU_TANH_CLAMP : x);
	double vd = (double)xc * (KV_GELU_K0_D + KV_GELU_K1_D * ((double)xc * xc));
	float v = (float)vd;
	float s, q = kv_sigmoid_q1(v, (float)(vd - v), &s);
	return (x * q) * s;
}

/* sin (cos_shift 0) or cos (cos_shift 1) of x; reduced in double */
static inline float kv_trig1(float x, int cos_shift)
{
	float a = fabsf(x);
	if (!(a <= KV_TRIG_BIG)) /* NaN, inf, huge: libm's exact reduction */
		return cos_shift ? (float)cos((double)x) : (float)sin((double)x);
	const double magic = 0x1.8p52;
	double ad = a;
	double n = (ad * KV_2_PI_D + magic) - magic;
	double r = (ad - n * KV_PIO2_D1) - n * KV_PIO2_D2;
	int q = (int)n + cos_shift;
	double r2 = r * r, y;
	if (q & 1) {
		double p = KV_COS_C3;
		p = p * r2 + KV_COS_C2;
		p = p * r2 + KV_COS_C1;
		p = p * r2 + KV_COS_C0;
		y = (1.0 - 0.5 * r2) + (r2 * r2) * p;
	} else {
		double p = KV_SIN_S3;
		p = p * r2 + KV_SIN_S2;
		p = p * r2 + KV_SIN_S1;
		p = p * r2 + KV_SIN_S0;
		y = r + (r * r2) * p;
	}
	float yf = (float)y;
	if (q & 2)
		yf = -yf;
	/* sin is odd, cos even */
	return cos_shift ? yf : copysignf(1.0f, x) * yf;
}

static inline float kv_sin1(float x)
{
	return kv_trig1(x, 0);
}

static inline float kv_cos1(float x)
{
	return kv_trig1(x, 1);
}

/* in double, then rounded once more: within 0.5 ulp (plus a double
 * rounding in rare halfway cases) */
static inline float kv_rsqrt1(float x)
{
	return (float)(1.0 / sqrt((double)x));
}

#endif

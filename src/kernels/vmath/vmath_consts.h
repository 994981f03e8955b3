/* vmath_consts.h - the constants of vmath's algorithms, shared by the AVX2
 * and the portable building blocks so that both compute the same thing.
 * Polynomials are minimax fits (weighted for relative error, coefficients
 * rounded to float one at a time with the rest refitted); the fitted range
 * and the fit's own error, in units of 2^-24 relative, are noted. */
#ifndef AIR_KERNELS_VMATH_VMATH_CONSTS_H
#define AIR_KERNELS_VMATH_VMATH_CONSTS_H

/* exp: x = n ln2 + r, |r| <= ln2/2. LN2_HI has 15 significant bits, so n *
 * LN2_HI is exact for |n| < 2^9 even without FMA. */
#define KV_LOG2E 0x1.715476p+0f
#define KV_LN2_HI 0x1.62e4p-1f
#define KV_LN2_LO 0x1.7f7d1cp-20f
/* e^x rounds to 0 below about -103.97 and overflows above 88.72; clamping to
 * these keeps n in [-151, 128], where 2^n is the product of two normals. */
#define KV_EXP_LO (-104.5f)
#define KV_EXP_HI 89.0f
/* sigmoid's e^-|x| is clamped lower, since x e^x (silu) is still a
 * subnormal at x = -108; n stays in [-174, 0], still two normal factors */
#define KV_SIGMOID_LO (-120.0f)
/* e^r = 1 + r + r^2 (C2 + C3 r + ... + C6 r^4) on [-ln2/2, ln2/2]; fit 0.05 */
#define KV_EXP_C2 0x1.fffffcp-2f
#define KV_EXP_C3 0x1.555492p-3f
#define KV_EXP_C4 0x1.5558b6p-5f
#define KV_EXP_C5 0x1.1239aap-7f
#define KV_EXP_C6 0x1.6a480ap-10f

/* log: x = 2^k m, m in [sqrt 1/2, sqrt 2), f = m - 1,
 * log1p(f) = f - f^2/2 + f^3 (L0 + L1 f + ... + L7 f^7); fit 0.10 */
#define KV_SQRT_HALF_BITS 0x3f3504f3u
#define KV_LOG_L0 0x1.555554p-2f
#define KV_LOG_L1 -0x1.000226p-2f
#define KV_LOG_L2 0x1.99a01cp-3f
#define KV_LOG_L3 -0x1.54728ap-3f
#define KV_LOG_L4 0x1.22d92cp-3f
#define KV_LOG_L5 -0x1.0d823ep-3f
#define KV_LOG_L6 0x1.055ee0p-3f
#define KV_LOG_L7 -0x1.38ca54p-4f

/* tanh x = x + x^3 (T0 + T1 x^2 + ... + T6 x^12) for |x| < KV_TANH_SMALL;
 * fit 0.013. Above it, tanh |x| = 1 - 2e/(1 + e) with e = e^(-2|x|). */
#define KV_TANH_SMALL 0.875f
#define KV_TANH_T0 -0x1.555550p-2f
#define KV_TANH_T1 0x1.110fa8p-3f
#define KV_TANH_T2 -0x1.b9da52p-5f
#define KV_TANH_T3 0x1.6376eep-6f
#define KV_TANH_T4 -0x1.110232p-7f
#define KV_TANH_T5 0x1.5b6d72p-9f
#define KV_TANH_T6 -0x1.f9b866p-12f

/* erf x = x + x (E0 + E1 x^2 + ... + E5 x^10) for |x| < KV_ERF_SMALL; fit
 * 0.03. E0 = 2/sqrt(pi) - 1, so that the rounding of the leading term
 * costs little. Above it, erf |x| = 1 - e^(-x^2) erfcx(|x|). */
#define KV_ERF_SMALL 0.75f
#define KV_ERF_E0 0x1.06eba8p-3f
#define KV_ERF_E1 -0x1.81273ap-2f
#define KV_ERF_E2 0x1.ce2acep-4f
#define KV_ERF_E3 -0x1.b7a75cp-6f
#define KV_ERF_E4 0x1.4f188ap-8f
#define KV_ERF_E5 -0x1.613e52p-11f
/* erf |x| rounds to 1 above 3.92; the tail is evaluated at min(|x|, 4). */
#define KV_ERF_ONE 4.0f

/* erfcx(z) = e^(z^2) erfc(z), for erf's tail, z in [0, KV_ERFCX_MAX]:
 *   z < 2: A0 + A1 t + ... + A12 t^12, t = z - 1; fit 0.07
 *   z >= 2: u Q(u^2), u = 1/z, Q = B0 + B1 w + ... + B8 w^8; fit 0.15 */
#define KV_ERFCX_SPLIT 2.0f
#define KV_ERFCX_MAX 10.75f
#define KV_ERFCX_A0 0x1.b5d878p-2f
#define KV_ERFCX_A1 -0x1.17c4e4p-2f
#define KV_ERFCX_A2 0x1.3c272ep-3f
#define KV_ERFCX_A3 -0x1.4483bap-4f
#define KV_ERFCX_A4 0x1.33c9f4p-5f
#define KV_ERFCX_A5 -0x1.10f182p-6f
#define KV_ERFCX_A6 0x1.c8e052p-8f
#define KV_ERFCX_A7 -0x1.6c6f70p-9f
#define KV_ERFCX_A8 0x1.1328e6p-10f
#define KV_ERFCX_A9 -0x1.7a9e94p-12f
#define KV_ERFCX_A10 0x1.12beacp-13f
#define KV_ERFCX_A11 -0x1.055d26p-14f
#define KV_ERFCX_A12 0x1.3a4ef2p-16f
#define KV_ERFCX_B0 0x1.20dd74p-1f
#define KV_ERFCX_B1 -0x1.20db7cp-2f
#define KV_ERFCX_B2 0x1.b0b0bep-2f
#define KV_ERFCX_B3 -0x1.092446p+0f
#define KV_ERFCX_B4 0x1.9d1e40p+1f
#define KV_ERFCX_B5 -0x1.416da8p+3f
#define KV_ERFCX_B6 0x1.8da5f6p+4f
#define KV_ERFCX_B7 -0x1.3bb5d8p+5f
#define KV_ERFCX_B8 0x1.cd891ap+4f
/* gelu's tail factor: x Phi(-|x|) = x g(a) e^(-a^2/2), a = |x|, g(a) =
 * erfcx(a/sqrt 2)/2, one degree-7 polynomial per piece, chosen per lane:
 *   pieces 0-5: a in [i/2, i/2 + 1/2), g(a) in t = a - center
 *   pieces 6, 7: a in [3, 5) and [5, 15], a g(a) in t = 1/a^2 - center
 * (the x/a of the far pieces is then just the sign of x). Centers are
 * floats near the middle where the constant term rounds well; fit <= 0.16,
 * float evaluation <= 1.0 (units of 2^-24 relative). */
#define KV_GELU_DEG 7
static const float kv_gelu_center[8] = {0x1.021b3ap-2f, 0x1.820924p-1f, 0x1.406bf0p+0f, 0x1.be1a60p+0f, 0x1.208f10p+1f, 0x1.60578ep+1f, 0x1.35c4e4p-4f, 0x1.6c4b28p-6f};
static const float kv_gelu_coef[KV_GELU_DEG + 1][8] = {
	{0x1.a758eap-2f, 0x1.32bb60p-2f, 0x1.d83986p-3f, 0x1.7c7e12p-3f, 0x1.3a3434p-3f, 0x1.0b8230p-3f, 0x1.7ed81ap-2f, 0x1.8ffb20p-2f},
	{-0x1.2dcf24p-2f, -0x1.627f2cp-3f, -0x1.c3f348p-4f, -0x1.33fba0p-4f, -0x1.b2d010p-5f, -0x1.42ae9cp-5f, -0x1.1eccccp-2f, -0x1.69964cp-2f},
	{0x1.5b462cp-3f, 0x1.5a2e8ep-4f, 0x1.7ac462p-5f, 0x1.c09814p-6f, 0x1.1496b2p-6f, 0x1.6b97aep-7f, 0x1.0f1d84p-1f, 0x1.c863d0p-1f},
	{-0x1.58194ap-4f, -0x1.2aa76ap-5f, -0x1.1e8c6ap-6f, -0x1.2c2222p-7f, -0x1.481e10p-8f, -0x1.8287fcp-9f, -0x1.72b978p+0f, -0x1.c1b2b4p+1f},
	{0x1.2fe722p-5f, 0x1.d328cap-7f, 0x1.8ee25cp-8f, 0x1.7625a4p-9f, 0x1.6ea450p-10f, 0x1.867bcap-11f, 0x1.3b81b2p+2f, 0x1.23daa8p+4f},
	{-0x1.e019f0p-7f, -0x1.50e53ep-8f, -0x1.0201bap-9f, -0x1.bbf9dap-11f, -0x1.884c10p-12f, -0x1.6ab064p-13f, -0x1.43447ep+4f, -0x1.d8b5e0p+6f},
	{0x1.7109c2p-8f, 0x1.cb11d6p-10f, 0x1.3d2598p-11f, 0x1.ecfbacp-13f, 0x1.8b0600p-14f, 0x1.573ffep-15f, 0x1.4b6d3ap+6f, 0x1.bf479cp+9f},
	{-0x1.11113cp-8f, -0x1.25ce06p-11f, -0x1.d744d2p-13f, 0x1.627eacp-16f, 0x1.cf5504p-18f, -0x1.2b4d66p-14f, 0.0f, 0.0f},
};
/* beyond |x| = 15, e^(-x^2/2) is 0 in float */
#define KV_GELU_CLAMP 15.0f

/* gelu_tanh x = x sigmoid(v), v = x (K0 + K1 x^2), K0 = 2 sqrt(2/pi) and
 * K1 = 0.044715 K0 (each a float pair); v is carried as a float pair, since its
 * rounding would cost |v| 2^-24 relative (~20 ulp at x = -2.6). Beyond
 * |x| = 20 the sigmoid has saturated: v is taken at the clamp. */
#define KV_GELU_K0 0x1.988454p+0f
#define KV_GELU_K0_LO -0x1.857936p-25f
#define KV_GELU_K1 0x1.2444f2p-4f
#define KV_GELU_K1_LO 0x1.49b16ap-29f
#define KV_GELU_K0_D 1.5957691216057308
#define KV_GELU_K1_D 0.07135481627260025
#define KV_GELU_TANH_CLAMP 20.0f

/* sin, cos: |x| = n pi/2 + r, |r| <= pi/4, pi/2 = P1 + P2 + P3 (float, for
 * FMA reduction) or PIO2_D1 + PIO2_D2 (double; D1 has 33 bits, so n * D1 is
 * exact for n < 2^20). Beyond KV_TRIG_BIG the reduction goes to libm.
 *   sin r = r + r^3 (S0 + S1 r^2 + S2 r^4 + S3 r^6); fit 0.003
 *   cos r = 1 - r^2/2 + r^4 (K0 + K1 r^2 + K2 r^4 + K3 r^6); fit 0.0001 */
#define KV_2_PI 0x1.45f306p-1f
#define KV_PIO2_P1 0x1.921fb6p+0f
#define KV_PIO2_P2 -0x1.777a5cp-25f
#define KV_PIO2_P3 -0x1.ee59dap-50f
#define KV_2_PI_D 0x1.45f306dc9c883p-1
#define KV_PIO2_D1 0x1.921fb544p+0
#define KV_PIO2_D2 0x1.0b4611a626331p-34
#define KV_TRIG_BIG 65536.0f
#define KV_SIN_S0 -0x1.555556p-3f
#define KV_SIN_S1 0x1.111174p-7f
#define KV_SIN_S2 -0x1.a05956p-13f
#define KV_SIN_S3 0x1.7c2d9ep-19f
#define KV_COS_C0 0x1.555556p-5f
#define KV_COS_C1 -0x1.6c175ep-10f
#define KV_COS_C2 0x1.a071c4p-16f
#define KV_COS_C3 -0x1.361b30p-22f

#endif

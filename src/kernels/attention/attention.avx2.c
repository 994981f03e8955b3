/* attention.avx2.c - the fused attention kernel's inner loops (see
 * kernels/attention/attention_fast.h) on 8-lane AVX2+FMA vectors. Scores and P V are
 * register tiles of up to 6 rows x 2 vectors (12 accumulators; 16 ymm
 * registers in all), instantiated for every row count; packed blocks are
 * padded to 16 floats, so columns come in whole pairs of vectors. */
#include <immintrin.h>
#include <math.h>

#include "kernels/attention/attention_fast.h"
#include "kernels/vmath/vmath_avx2.h"

#define AIR_INLINE static inline __attribute__((always_inline))

/* ---- scores: s = q kt ------------------------------------------------------ */

AIR_INLINE void qk_tile(const float *q, int64_t ldq, int64_t E, const float *kt, int np, float *s, const int MR)
{
	__m256 acc[KATT_MR][2];
#pragma GCC unroll 6
	for (int i = 0; i < MR; i++)
		acc[i][0] = acc[i][1] = _mm256_setzero_ps();
	for (int64_t e = 0; e < E; e++) {
		const float *k = kt + e * np;
		__m256 b0 = _mm256_loadu_ps(k), b1 = _mm256_loadu_ps(k + 8);
#pragma GCC unroll 6
		for (int i = 0; i < MR; i++) {
			__m256 a = _mm256_broadcast_ss(q + i * ldq + e);
			acc[i][0] = _mm256_fmadd_ps(a, b0, acc[i][0]);
			acc[i][1] = _mm256_fmadd_ps(a, b1, acc[i][1]);
		}
	}
#pragma GCC unroll 6
	for (int i = 0; i < MR; i++) {
		_mm256_storeu_ps(s + (size_t)i * np, acc[i][0]);
		_mm256_storeu_ps(s + (size_t)i * np + 8, acc[i][1]);
	}
}

typedef void (*qk_tile_fn)(const float *q, int64_t ldq, int64_t E, const float *kt, int np, float *s);

#define QK_INST(MR)                                                                                   \
	static void qk_##MR(const float *q, int64_t ldq, int64_t E, const float *kt, int np, float *s) \
	{                                                                                             \
		qk_tile(q, ldq, E, kt, np, s, MR);                                                    \
	}
QK_INST(1) QK_INST(2) QK_INST(3) QK_INST(4) QK_INST(5) QK_INST(6)
static const qk_tile_fn qk_fns[KATT_MR] = {qk_1, qk_2, qk_3, qk_4, qk_5, qk_6};

static void qk_avx2(const float *q, int64_t ldq, int rows, int64_t E, const float *kt, int np, float *s)
{
	for (int c = 0; c < np; c += 16)
		for (int i = 0; i < rows; i += KATT_MR) {
			int mr = rows - i < KATT_MR ? rows - i : KATT_MR;
			qk_fns[mr - 1](q + i * ldq, ldq, E, kt + c, np, s + (size_t)i * np + c);
		}
}

/* ---- online softmax -------------------------------------------------------- */

static float hmax8(__m256 v)
{
	__m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	m = _mm_max_ps(m, _mm_movehl_ps(m, m));
	m = _mm_max_ss(m, _mm_movehdup_ps(m));
	return _mm_cvtss_f32(m);
}

static float hsum8(__m256 v)
{
	__m128 m = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	m = _mm_add_ps(m, _mm_movehl_ps(m, m));
	m = _mm_add_ss(m, _mm_movehdup_ps(m));
	return _mm_cvtss_f32(m);
}

static void softmax_avx2(float *s, int np, int n, float scale, const float *madd, const uint8_t *mbool, float *m,
			 float *l, float *alpha)
{
	const __m256 ninf = _mm256_set1_ps(-INFINITY), vscale = _mm256_set1_ps(scale);
	__m256 mx = ninf, any = _mm256_setzero_ps();
	int j = 0;
	for (; j + 8 <= n; j += 8) {
		__m256 x = _mm256_mul_ps(_mm256_loadu_ps(s + j), vscale);
		if (madd)
			x = _mm256_add_ps(x, _mm256_loadu_ps(madd + j));
		if (mbool) {
			__m128i b = _mm_loadl_epi64((const __m128i *)(mbool + j));
			__m256i keep = _mm256_cmpeq_epi32(_mm256_cvtepu8_epi32(b), _mm256_setzero_si256());
			x = _mm256_blendv_ps(x, ninf, _mm256_castsi256_ps(keep));
		}
		_mm256_storeu_ps(s + j, x);
		any = _mm256_or_ps(any, _mm256_cmp_ps(x, ninf, _CMP_NEQ_UQ));
		mx = _mm256_max_ps(mx, x);
	}
	float mxs = hmax8(mx);
	int anys = _mm256_movemask_ps(any) != 0;
	for (; j < n; j++) {
		float x = s[j] * scale;
		if (madd)
			x += madd[j];
		if (mbool && !mbool[j])
			x = -INFINITY;
		s[j] = x;
		anys |= x != -INFINITY;
		mxs = x > mxs ? x : mxs;
	}
	if (!anys) {
		for (j = 0; j < np; j++)
			s[j] = 0.0f;
		*alpha = 1.0f;
		return;
	}
	float mn = *m > mxs ? *m : mxs;
	__m256 vm = _mm256_set1_ps(mn), sum = _mm256_setzero_ps(), floor = _mm256_set1_ps(KATT_EXP_FLOOR);
	for (j = 0; j + 8 <= n; j += 8) {
		__m256 d = _mm256_sub_ps(_mm256_loadu_ps(s + j), vm);
		/* floor first so that no lane goes subnormal; NaN stays (second operand) */
		__m256 p = kv_exp8(_mm256_max_ps(floor, d));
		p = _mm256_andnot_ps(_mm256_cmp_ps(d, floor, _CMP_LT_OQ), p);
		_mm256_storeu_ps(s + j, p);
		sum = _mm256_add_ps(sum, p);
	}
	float sums = hsum8(sum);
	for (; j < n; j++) {
		float p = katt_weight(s[j] - mn);
		s[j] = p;
		sums += p;
	}
	for (; j < np; j++)
		s[j] = 0.0f;
	*alpha = katt_weight(*m - mn);
	*l = *l * *alpha + sums;
	*m = mn;
}

/* ---- o = alpha o + p vp ---------------------------------------------------- */

AIR_INLINE void pv_tile(const float *p, int np, int bk, const float *vp, int64_t ldv, int evp, float *o,
			const float *alpha, const int MR)
{
	__m256 acc[KATT_MR][2];
#pragma GCC unroll 6
	for (int i = 0; i < MR; i++) {
		__m256 a = _mm256_set1_ps(alpha[i]);
		acc[i][0] = _mm256_mul_ps(a, _mm256_loadu_ps(o + (size_t)i * evp));
		acc[i][1] = _mm256_mul_ps(a, _mm256_loadu_ps(o + (size_t)i * evp + 8));
	}
	for (int j = 0; j < bk; j++) {
		const float *v0 = vp + (size_t)j * ldv;
		__m256 b0 = _mm256_loadu_ps(v0), b1 = _mm256_loadu_ps(v0 + 8);
#pragma GCC unroll 6
		for (int i = 0; i < MR; i++) {
			__m256 a = _mm256_broadcast_ss(p + (size_t)i * np + j);
			acc[i][0] = _mm256_fmadd_ps(a, b0, acc[i][0]);
			acc[i][1] = _mm256_fmadd_ps(a, b1, acc[i][1]);
		}
	}
#pragma GCC unroll 6
	for (int i = 0; i < MR; i++) {
		_mm256_storeu_ps(o + (size_t)i * evp, acc[i][0]);
		_mm256_storeu_ps(o + (size_t)i * evp + 8, acc[i][1]);
	}
}

typedef void (*pv_tile_fn)(const float *p, int np, int bk, const float *vp, int64_t ldv, int evp, float *o,
			   const float *alpha);

#define PV_INST(MR)                                                                                             \
	static void pv_##MR(const float *p, int np, int bk, const float *vp, int64_t ldv, int evp, float *o,     \
			    const float *alpha)                                                                 \
	{                                                                                                       \
		pv_tile(p, np, bk, vp, ldv, evp, o, alpha, MR);                                                 \
	}
PV_INST(1) PV_INST(2) PV_INST(3) PV_INST(4) PV_INST(5) PV_INST(6)
static const pv_tile_fn pv_fns[KATT_MR] = {pv_1, pv_2, pv_3, pv_4, pv_5, pv_6};

static void pv_avx2(const float *p, int np, int rows, int bk, const float *vp, int64_t ldv, int evp, float *o,
		    const float *alpha)
{
	for (int c = 0; c < evp; c += 16)
		for (int i = 0; i < rows; i += KATT_MR) {
			int mr = rows - i < KATT_MR ? rows - i : KATT_MR;
			pv_fns[mr - 1](p + (size_t)i * np, np, bk, vp + c, ldv, evp, o + (size_t)i * evp + c, alpha + i);
		}
}

const katt_ops katt_ops_avx2 = {"avx2", qk_avx2, softmax_avx2, NULL, pv_avx2};

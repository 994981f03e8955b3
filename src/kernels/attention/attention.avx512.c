/* attention.avx512.c - the fused attention kernel's inner loops (see
 * kernels/attention/attention_fast.h) on 16-lane AVX-512 vectors. Scores and P V are
 * register tiles of up to 6 rows x 4 vectors (24 accumulators), written once
 * over compile-time shapes and instantiated for every tile a block can have;
 * packed blocks are padded to 16 floats, so no column tail needs a mask. */
#include <immintrin.h>
#include <math.h>

#include "kernels/attention/attention_fast.h"
#include "kernels/common/lanes_avx512.h"
#include "kernels/vmath/vmath_consts.h"

#define AIR_INLINE static inline __attribute__((always_inline))

/* ---- scores: s = q kt ------------------------------------------------------ */

AIR_INLINE void qk_tile(const float *q, int64_t ldq, int64_t E, const float *kt, int np, float *s, const int MR,
			const int NV)
{
	__m512 acc[KATT_MR][4];
#pragma GCC unroll 6
	for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
		for (int v = 0; v < NV; v++)
			acc[i][v] = _mm512_setzero_ps();
	for (int64_t e = 0; e < E; e++) {
		__m512 b[4];
		const float *k = kt + e * np;
#pragma GCC unroll 4
		for (int v = 0; v < NV; v++)
			b[v] = _mm512_loadu_ps(k + 16 * v);
#pragma GCC unroll 6
		for (int i = 0; i < MR; i++) {
			__m512 a = _mm512_set1_ps(q[i * ldq + e]);
#pragma GCC unroll 4
			for (int v = 0; v < NV; v++)
				acc[i][v] = _mm512_fmadd_ps(a, b[v], acc[i][v]);
		}
	}
#pragma GCC unroll 6
	for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
		for (int v = 0; v < NV; v++)
			_mm512_storeu_ps(s + (size_t)i * np + 16 * v, acc[i][v]);
}

typedef void (*qk_tile_fn)(const float *q, int64_t ldq, int64_t E, const float *kt, int np, float *s);

#define QK_INST(MR, NV)                                                                                    \
	static void qk_##MR##x##NV(const float *q, int64_t ldq, int64_t E, const float *kt, int np, float *s) \
	{                                                                                                  \
		qk_tile(q, ldq, E, kt, np, s, MR, NV);                                                     \
	}
#define QK_ROW(MR) QK_INST(MR, 1) QK_INST(MR, 2) QK_INST(MR, 3) QK_INST(MR, 4)
QK_ROW(1) QK_ROW(2) QK_ROW(3) QK_ROW(4) QK_ROW(5) QK_ROW(6)
#define QK_FNS(MR) {qk_##MR##x1, qk_##MR##x2, qk_##MR##x3, qk_##MR##x4}
static const qk_tile_fn qk_fns[KATT_MR][4] = {QK_FNS(1), QK_FNS(2), QK_FNS(3), QK_FNS(4), QK_FNS(5), QK_FNS(6)};

static void qk_avx512(const float *q, int64_t ldq, int rows, int64_t E, const float *kt, int np, float *s)
{
	int nv = np / 16; /* np <= KATT_BK = 64 */
	for (int i = 0; i < rows; i += KATT_MR) {
		int mr = rows - i < KATT_MR ? rows - i : KATT_MR;
		qk_fns[mr - 1][nv - 1](q + i * ldq, ldq, E, kt, np, s + (size_t)i * np);
	}
}

/* ---- online softmax -------------------------------------------------------- */

/* e^x for x <= 0 (and NaN): x = n ln2 + r, e^r by the same polynomial as
 * vmath, then scalef by 2^n, which gives 0 far below and keeps NaN. */
AIR_INLINE __m512 exp_nonpos16(__m512 x)
{
	x = _mm512_max_ps(_mm512_set1_ps(KV_EXP_LO), x); /* -inf -> LO; NaN stays (second operand) */
	__m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(KV_LOG2E)),
					_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(KV_LN2_HI), x);
	r = _mm512_fnmadd_ps(n, _mm512_set1_ps(KV_LN2_LO), r);
	__m512 p = _mm512_set1_ps(KV_EXP_C6);
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(KV_EXP_C5));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(KV_EXP_C4));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(KV_EXP_C3));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(KV_EXP_C2));
	p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r);
	p = _mm512_add_ps(p, _mm512_set1_ps(1.0f));
	return _mm512_scalef_ps(p, n);
}


static void softmax_avx512(float *s, int np, int n, float scale, const float *madd, const uint8_t *mbool, float *m,
			   float *l, float *alpha)
{
	const __m512 ninf = _mm512_set1_ps(-INFINITY), vscale = _mm512_set1_ps(scale);
	__m512 mx = ninf;
	__mmask16 any = 0;
	for (int j = 0; j < np; j += 16) {
		__mmask16 valid = k16_lanes(n - j);
		__m512 x = _mm512_mul_ps(_mm512_loadu_ps(s + j), vscale);
		if (madd)
			x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(valid, madd + j));
		if (mbool) {
			__m128i b = _mm_maskz_loadu_epi8(valid, mbool + j);
			valid &= _mm_test_epi8_mask(b, b);
		}
		x = _mm512_mask_blend_ps(valid, ninf, x);
		_mm512_storeu_ps(s + j, x);
		any |= _mm512_cmp_ps_mask(x, ninf, _CMP_NEQ_UQ);
		mx = _mm512_max_ps(mx, x);
	}
	if (!any) {
		for (int j = 0; j < np; j += 16)
			_mm512_storeu_ps(s + j, _mm512_setzero_ps());
		*alpha = 1.0f;
		return;
	}
	float bm = _mm512_reduce_max_ps(mx);
	float mn = *m > bm ? *m : bm;
	__m512 vm = _mm512_set1_ps(mn), sum = _mm512_setzero_ps(), floor = _mm512_set1_ps(KATT_EXP_FLOOR);
	for (int j = 0; j < np; j += 16) {
		__m512 d = _mm512_sub_ps(_mm512_loadu_ps(s + j), vm);
		/* floor first so that no lane goes subnormal; NaN stays (second operand) */
		__m512 p = exp_nonpos16(_mm512_max_ps(floor, d));
		/* padding lanes (-inf - (-inf) would be NaN) and weights below the floor are 0 */
		p = _mm512_maskz_mov_ps(k16_lanes(n - j) & _mm512_cmp_ps_mask(d, floor, _CMP_NLT_UQ), p);
		_mm512_storeu_ps(s + j, p);
		sum = _mm512_add_ps(sum, p);
	}
	*alpha = katt_weight(*m - mn);
	*l = *l * *alpha + _mm512_reduce_add_ps(sum);
	*m = mn;
}

/* Rows at once (katt_ops.softmax_rows), RG at a time so that one row's
 * reductions (max, then sum: a chain of shuffles each) overlap the next
 * row's work; the weights as softmax_avx512 computes them, alpha for the
 * group in one vector (0 below e^KATT_EXP_FLOOR, as katt_weight). */
enum { RG = 4 };

static void softmax_rows_avx512(float *s, int np, int rows, int n, float scale, const float *madd,
				const uint8_t *mbool, int64_t ml, float *m, float *l, float *alpha)
{
	const __m512 ninf = _mm512_set1_ps(-INFINITY), vscale = _mm512_set1_ps(scale);
	const __m512 floor = _mm512_set1_ps(KATT_EXP_FLOOR);
	for (int i0 = 0; i0 < rows; i0 += RG) {
		const int g = rows - i0 < RG ? rows - i0 : RG;
		__m512 mx[RG], sum[RG];
		__mmask16 any[RG];
		float mn[RG] __attribute__((aligned(64)));
		for (int r = 0; r < g; r++) {
			mx[r] = ninf;
			any[r] = 0;
		}
		for (int j = 0; j < np; j += 16) {
			const __mmask16 lanes = k16_lanes(n - j);
			for (int r = 0; r < g; r++) {
				float *sr = s + (size_t)(i0 + r) * np;
				__mmask16 valid = lanes;
				__m512 x = _mm512_mul_ps(_mm512_loadu_ps(sr + j), vscale);
				if (madd)
					x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(valid, madd + (i0 + r) * ml + j));
				if (mbool) {
					__m128i b = _mm_maskz_loadu_epi8(valid, mbool + (i0 + r) * ml + j);
					valid &= _mm_test_epi8_mask(b, b);
				}
				x = _mm512_mask_blend_ps(valid, ninf, x);
				_mm512_storeu_ps(sr + j, x);
				any[r] |= _mm512_cmp_ps_mask(x, ninf, _CMP_NEQ_UQ);
				mx[r] = _mm512_max_ps(mx[r], x);
			}
		}
		__m512 old = _mm512_set1_ps(-INFINITY), now = _mm512_set1_ps(-INFINITY);
		for (int r = 0; r < g; r++) {
			float bm = _mm512_reduce_max_ps(mx[r]);
			mn[r] = any[r] ? (m[i0 + r] > bm ? m[i0 + r] : bm) : m[i0 + r];
			old = _mm512_mask_mov_ps(old, (__mmask16)(1u << r), _mm512_set1_ps(m[i0 + r]));
			now = _mm512_mask_mov_ps(now, (__mmask16)(1u << r), _mm512_set1_ps(mn[r]));
			sum[r] = _mm512_setzero_ps();
		}
		for (int j = 0; j < np; j += 16) {
			const __mmask16 lanes = k16_lanes(n - j);
			for (int r = 0; r < g; r++) {
				float *sr = s + (size_t)(i0 + r) * np;
				if (!any[r]) {
					_mm512_storeu_ps(sr + j, _mm512_setzero_ps());
					continue;
				}
				__m512 d = _mm512_sub_ps(_mm512_loadu_ps(sr + j), _mm512_set1_ps(mn[r]));
				__m512 p = exp_nonpos16(_mm512_max_ps(floor, d));
				p = _mm512_maskz_mov_ps(lanes & _mm512_cmp_ps_mask(d, floor, _CMP_NLT_UQ), p);
				_mm512_storeu_ps(sr + j, p);
				sum[r] = _mm512_add_ps(sum[r], p);
			}
		}
		/* alpha = e^(m - m'): 1 for a row with no key (m' = m), 0 from
		 * m = -inf, NaN where either is */
		__m512 d = _mm512_sub_ps(old, now);
		__m512 a = exp_nonpos16(_mm512_max_ps(floor, d));
		__mmask16 keep = _mm512_cmp_ps_mask(d, floor, _CMP_NLT_UQ);
		a = _mm512_maskz_mov_ps(keep, a);
		float av[16] __attribute__((aligned(64)));
		_mm512_store_ps(av, a);
		for (int r = 0; r < g; r++) {
			if (!any[r]) {
				alpha[i0 + r] = 1.0f;
				continue;
			}
			alpha[i0 + r] = av[r];
			l[i0 + r] = l[i0 + r] * av[r] + _mm512_reduce_add_ps(sum[r]);
			m[i0 + r] = mn[r];
		}
	}
}

/* ---- o = alpha o + p vp ---------------------------------------------------- */

AIR_INLINE void pv_tile(const float *p, int np, int bk, const float *vp, int64_t ldv, int evp, float *o,
			const float *alpha, const int MR, const int NV)
{
	__m512 acc[KATT_MR][4];
#pragma GCC unroll 6
	for (int i = 0; i < MR; i++) {
		__m512 a = _mm512_set1_ps(alpha[i]);
#pragma GCC unroll 4
		for (int v = 0; v < NV; v++)
			acc[i][v] = _mm512_mul_ps(a, _mm512_loadu_ps(o + (size_t)i * evp + 16 * v));
	}
	for (int j = 0; j < bk; j++) {
		__m512 b[4];
		const float *v0 = vp + (size_t)j * ldv;
#pragma GCC unroll 4
		for (int v = 0; v < NV; v++)
			b[v] = _mm512_loadu_ps(v0 + 16 * v);
#pragma GCC unroll 6
		for (int i = 0; i < MR; i++) {
			__m512 a = _mm512_set1_ps(p[(size_t)i * np + j]);
#pragma GCC unroll 4
			for (int v = 0; v < NV; v++)
				acc[i][v] = _mm512_fmadd_ps(a, b[v], acc[i][v]);
		}
	}
#pragma GCC unroll 6
	for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
		for (int v = 0; v < NV; v++)
			_mm512_storeu_ps(o + (size_t)i * evp + 16 * v, acc[i][v]);
}

typedef void (*pv_tile_fn)(const float *p, int np, int bk, const float *vp, int64_t ldv, int evp, float *o,
			   const float *alpha);

#define PV_INST(MR, NV)                                                                                      \
	static void pv_##MR##x##NV(const float *p, int np, int bk, const float *vp, int64_t ldv, int evp,     \
				   float *o, const float *alpha)                                               \
	{                                                                                                    \
		pv_tile(p, np, bk, vp, ldv, evp, o, alpha, MR, NV);                                          \
	}
#define PV_ROW(MR) PV_INST(MR, 1) PV_INST(MR, 2) PV_INST(MR, 3) PV_INST(MR, 4)
PV_ROW(1) PV_ROW(2) PV_ROW(3) PV_ROW(4) PV_ROW(5) PV_ROW(6)
#define PV_FNS(MR) {pv_##MR##x1, pv_##MR##x2, pv_##MR##x3, pv_##MR##x4}
static const pv_tile_fn pv_fns[KATT_MR][4] = {PV_FNS(1), PV_FNS(2), PV_FNS(3), PV_FNS(4), PV_FNS(5), PV_FNS(6)};

static void pv_avx512(const float *p, int np, int rows, int bk, const float *vp, int64_t ldv, int evp, float *o,
		      const float *alpha)
{
	for (int c = 0; c < evp; c += 64) {
		int nv = (evp - c) / 16 < 4 ? (evp - c) / 16 : 4;
		for (int i = 0; i < rows; i += KATT_MR) {
			int mr = rows - i < KATT_MR ? rows - i : KATT_MR;
			pv_fns[mr - 1][nv - 1](p + (size_t)i * np, np, bk, vp + c, ldv, evp, o + (size_t)i * evp + c,
					       alpha + i);
		}
	}
}

const katt_ops katt_ops_avx512 = {"avx512", qk_avx512, softmax_avx512, softmax_rows_avx512, pv_avx512};

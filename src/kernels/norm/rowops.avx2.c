/* rowops.avx2.c - AVX2+FMA row kernels for softmax, log-softmax, layer norm
 * and RMS norm. Each row is read two or three times (it is in L1/L2 after
 * the first pass); sums run in float over blocks of at most KR_BLOCK
 * elements per lane group and are carried across blocks in double. Tails
 * use masked loads, with lanes past the row neutralised. */
#include <math.h>
#include <stdint.h>

#include "kernels/norm/rowops_impl.h"
#include "kernels/vmath/vmath_avx2.h"

/* floats summed in float before the partial sum moves to double: with two
 * accumulators each float lane adds at most 8 terms. (512, 32 terms per
 * lane, measurably biased the variance of offset rows by ~2 ulp.) */
enum { KR_BLOCK = 128 };

static inline __m256i tail_mask(int64_t left)
{
	const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
	return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)left), lane);
}

static inline double hsum_pd(__m256d v)
{
	__m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
	return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

/* the 8 floats of v added into two double accumulators */
static inline __m256d add_wide(__m256d acc, __m256 v)
{
	__m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
	__m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
	return _mm256_add_pd(acc, _mm256_add_pd(lo, hi));
}

static inline float hmax_ps(__m256 v)
{
	__m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	m = _mm_max_ps(m, _mm_movehl_ps(m, m));
	m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
	return _mm_cvtss_f32(m);
}

static float row_max(const float *x, int64_t n)
{
	__m256 m0 = _mm256_set1_ps(-INFINITY), m1 = m0, m2 = m0, m3 = m0;
	int64_t i = 0;
	/* a NaN may or may not survive max; either way the row's sum is NaN */
	for (; i + 32 <= n; i += 32) {
		m0 = _mm256_max_ps(m0, _mm256_loadu_ps(x + i));
		m1 = _mm256_max_ps(m1, _mm256_loadu_ps(x + i + 8));
		m2 = _mm256_max_ps(m2, _mm256_loadu_ps(x + i + 16));
		m3 = _mm256_max_ps(m3, _mm256_loadu_ps(x + i + 24));
	}
	for (; i + 8 <= n; i += 8)
		m0 = _mm256_max_ps(m0, _mm256_loadu_ps(x + i));
	if (i < n) {
		__m256i m = tail_mask(n - i);
		__m256 v = _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), _mm256_maskload_ps(x + i, m),
					    _mm256_castsi256_ps(m));
		m1 = _mm256_max_ps(m1, v);
	}
	return hmax_ps(_mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3)));
}

/* e^(x - mx), with the rounding error of x - mx passed to the exponential
 * as a low part (TwoSum), so small probabilities keep their relative
 * accuracy; lanes far below the max are 0 */
static inline __m256 exp_diff8(__m256 x, __m256 mx)
{
	__m256 nmx = _mm256_xor_ps(mx, _mm256_set1_ps(-0.0f));
	__m256 s = _mm256_add_ps(x, nmx);
	__m256 bv = _mm256_sub_ps(s, x);
	__m256 av = _mm256_sub_ps(s, bv);
	__m256 err = _mm256_add_ps(_mm256_sub_ps(x, av), _mm256_sub_ps(nmx, bv));
	__m256 in = _mm256_cmp_ps(s, _mm256_set1_ps(KV_EXP_LO), _CMP_GE_OQ);
	err = _mm256_and_ps(err, in); /* inf - inf there, and not needed */
	__m256 a = _mm256_max_ps(_mm256_set1_ps(KV_EXP_LO), s);
	return kv_exp_hl8(a, err);
}

/* sum of e^(x - mx) over the row; stores the terms in y unless y is NULL.
 * With count non-NULL, the terms with x == mx (exactly 1) are left out of
 * the sum and counted instead, so that log-softmax can take log1p of the
 * rest without losing it against the 1. */
static double sum_exp(const float *x, float *y, int64_t n, float mxs, int64_t *count)
{
	__m256 mx = _mm256_set1_ps(mxs);
	__m256 keep = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
	__m256d acc0 = _mm256_setzero_pd(), acc1 = acc0;
	int64_t ones = 0, i = 0;
	for (; i + 16 <= n; i += 16) {
		__m256 x0 = _mm256_loadu_ps(x + i), x1 = _mm256_loadu_ps(x + i + 8);
		__m256 e0 = exp_diff8(x0, mx), e1 = exp_diff8(x1, mx);
		if (y) {
			_mm256_storeu_ps(y + i, e0);
			_mm256_storeu_ps(y + i + 8, e1);
		}
		if (count) {
			__m256 q0 = _mm256_cmp_ps(x0, mx, _CMP_EQ_OQ), q1 = _mm256_cmp_ps(x1, mx, _CMP_EQ_OQ);
			ones += __builtin_popcount((unsigned)_mm256_movemask_ps(q0)) +
				__builtin_popcount((unsigned)_mm256_movemask_ps(q1));
			e0 = _mm256_andnot_ps(q0, e0);
			e1 = _mm256_andnot_ps(q1, e1);
		}
		acc0 = add_wide(acc0, e0);
		acc1 = add_wide(acc1, e1);
	}
	for (; i < n; i += 8) {
		__m256i m = tail_mask(n - i);
		int full = n - i >= 8;
		__m256 xv = full ? _mm256_loadu_ps(x + i) : _mm256_maskload_ps(x + i, m);
		__m256 e = exp_diff8(xv, mx);
		__m256 in = full ? keep : _mm256_castsi256_ps(m);
		if (y) {
			if (full)
				_mm256_storeu_ps(y + i, e);
			else
				_mm256_maskstore_ps(y + i, m, e);
		}
		if (count) {
			__m256 q = _mm256_and_ps(_mm256_cmp_ps(xv, mx, _CMP_EQ_OQ), in);
			ones += __builtin_popcount((unsigned)_mm256_movemask_ps(q));
			in = _mm256_andnot_ps(q, in);
		}
		acc0 = add_wide(acc0, _mm256_and_ps(e, in));
	}
	if (count)
		*count = ones;
	return hsum_pd(_mm256_add_pd(acc0, acc1));
}

static void scale_row(float *y, int64_t n, float s)
{
	__m256 sv = _mm256_set1_ps(s);
	int64_t i = 0;
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), sv));
	for (; i < n; i++)
		y[i] *= s;
}

static void softmax_avx2(const float *x, float *y, int64_t rows, int64_t n)
{
	for (int64_t r = 0; r < rows; r++) {
		const float *xr = x + r * n;
		float *yr = y + r * n;
		float mx = row_max(xr, n);
		double sum = sum_exp(xr, yr, n, mx, NULL);
		scale_row(yr, n, (float)(1.0 / sum));
	}
}

static void log_softmax_avx2(const float *x, float *y, int64_t rows, int64_t n)
{
	for (int64_t r = 0; r < rows; r++) {
		const float *xr = x + r * n;
		float *yr = y + r * n;
		float mx = row_max(xr, n);
		/* (x - mx) - lse, not x - (mx + lse): the terms near -lse keep their
		 * relative accuracy when lse << mx. Both roundings are relative to
		 * the result, whose magnitude is at least |x - mx| and lse. */
		__m256 m = _mm256_set1_ps(mx);
		int64_t ones;
		double rest = sum_exp(xr, NULL, n, mx, &ones);
		double l = ones == 1 ? log1p(rest) : log((double)ones + rest);
		if (mx == INFINITY) /* inf - inf: NaN, like softmax and PyTorch */
			l = NAN;
		__m256 lse = _mm256_set1_ps((float)l);
		int64_t i = 0;
		for (; i + 8 <= n; i += 8) {
			__m256 v = _mm256_sub_ps(_mm256_loadu_ps(xr + i), m);
			_mm256_storeu_ps(yr + i, _mm256_sub_ps(v, lse));
		}
		if (i < n) {
			__m256i k = tail_mask(n - i);
			__m256 v = _mm256_sub_ps(_mm256_maskload_ps(xr + i, k), m);
			_mm256_maskstore_ps(yr + i, k, _mm256_sub_ps(v, lse));
		}
	}
}

/* sum of (x - c) (into *s1) and of (x - c)^2 (into *s2) over the row; a
 * NULL output is not computed (the flags fold away when inlined) */
static inline __attribute__((always_inline)) void sums(const float *x, int64_t n, float cs, double *s1,
						       double *s2)
{
	__m256 c = _mm256_set1_ps(cs);
	__m256d d1 = _mm256_setzero_pd(), d2 = d1;
	int64_t i = 0;
	while (i < n) {
		int64_t end = n - i > KR_BLOCK ? i + KR_BLOCK : n;
		__m256 a0 = _mm256_setzero_ps(), a1 = a0, q0 = a0, q1 = a0;
		for (; i + 16 <= end; i += 16) {
			__m256 v0 = _mm256_sub_ps(_mm256_loadu_ps(x + i), c);
			__m256 v1 = _mm256_sub_ps(_mm256_loadu_ps(x + i + 8), c);
			if (s1) {
				a0 = _mm256_add_ps(a0, v0);
				a1 = _mm256_add_ps(a1, v1);
			}
			if (s2) {
				q0 = _mm256_fmadd_ps(v0, v0, q0);
				q1 = _mm256_fmadd_ps(v1, v1, q1);
			}
		}
		if (i < end) { /* 1 to 15 left in the block */
			for (; i + 8 <= end; i += 8) {
				__m256 v = _mm256_sub_ps(_mm256_loadu_ps(x + i), c);
				a0 = _mm256_add_ps(a0, v);
				q0 = _mm256_fmadd_ps(v, v, q0);
			}
			if (i < end) {
				__m256i m = tail_mask(end - i);
				__m256 v = _mm256_sub_ps(_mm256_maskload_ps(x + i, m), c);
				v = _mm256_and_ps(v, _mm256_castsi256_ps(m));
				a1 = _mm256_add_ps(a1, v);
				q1 = _mm256_fmadd_ps(v, v, q1);
				i = end;
			}
		}
		if (s1)
			d1 = add_wide(d1, _mm256_add_ps(a0, a1));
		if (s2)
			d2 = add_wide(d2, _mm256_add_ps(q0, q1));
	}
	if (s1)
		*s1 = hsum_pd(d1);
	if (s2)
		*s2 = hsum_pd(d2);
}

static void layernorm_avx2(const float *x, const float *gamma, const float *beta, float *y, int64_t rows,
			   int64_t n, double eps, float *mean_out, float *rstd_out)
{
	for (int64_t r = 0; r < rows; r++) {
		const float *xr = x + r * n;
		float *yr = y + r * n;
		double s1, d1, d2;
		sums(xr, n, 0.0f, &s1, NULL);
		/* second pass about the float mean: var = E[d^2] - E[d]^2, where
		 * E[d] is only the rounding of the mean, so nothing cancels */
		float m = (float)(s1 / (double)n);
		sums(xr, n, m, &d1, &d2);
		double dm = d1 / (double)n;
		double var = d2 / (double)n - dm * dm;
		double rstd = 1.0 / sqrt((var > 0.0 ? var : 0.0) + eps);
		if (mean_out)
			mean_out[r] = (float)((double)m + dm);
		if (rstd_out)
			rstd_out[r] = (float)rstd;
		/* y = ((x - m) - dm) * (rstd gamma) + beta */
		__m256 mv = _mm256_set1_ps(m), dmv = _mm256_set1_ps((float)dm);
		__m256 rs = _mm256_set1_ps((float)rstd);
		int64_t i = 0;
		for (; i < n; i += 8) {
			__m256i mask = tail_mask(n - i);
			int full = n - i >= 8;
			__m256 v = full ? _mm256_loadu_ps(xr + i) : _mm256_maskload_ps(xr + i, mask);
			__m256 g = rs, b = _mm256_setzero_ps();
			if (gamma)
				g = _mm256_mul_ps(rs, full ? _mm256_loadu_ps(gamma + i) : _mm256_maskload_ps(gamma + i, mask));
			if (beta)
				b = full ? _mm256_loadu_ps(beta + i) : _mm256_maskload_ps(beta + i, mask);
			v = _mm256_sub_ps(_mm256_sub_ps(v, mv), dmv);
			v = _mm256_fmadd_ps(v, g, b);
			if (full)
				_mm256_storeu_ps(yr + i, v);
			else
				_mm256_maskstore_ps(yr + i, mask, v);
		}
	}
}

static void rmsnorm_avx2(const float *x, const float *gamma, float *y, int64_t rows, int64_t n, double eps)
{
	for (int64_t r = 0; r < rows; r++) {
		const float *xr = x + r * n;
		float *yr = y + r * n;
		double s2;
		sums(xr, n, 0.0f, NULL, &s2);
		__m256 rs = _mm256_set1_ps((float)(1.0 / sqrt(s2 / (double)n + eps)));
		int64_t i = 0;
		for (; i < n; i += 8) {
			__m256i mask = tail_mask(n - i);
			int full = n - i >= 8;
			__m256 v = full ? _mm256_loadu_ps(xr + i) : _mm256_maskload_ps(xr + i, mask);
			__m256 g = rs;
			if (gamma)
				g = _mm256_mul_ps(rs, full ? _mm256_loadu_ps(gamma + i) : _mm256_maskload_ps(gamma + i, mask));
			v = _mm256_mul_ps(v, g);
			if (full)
				_mm256_storeu_ps(yr + i, v);
			else
				_mm256_maskstore_ps(yr + i, mask, v);
		}
	}
}

const kr_rows_impl kr_rows_avx2 = {softmax_avx2, log_softmax_avx2, layernorm_avx2, rmsnorm_avx2};

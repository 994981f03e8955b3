/* layer_norm_backward.avx2.c - the AVX2+FMA pieces of the fast f32
 * layer_norm_backward (layer_norm_backward_impl.h): a row's two sums in
 * float lanes added into double every 256 elements, then its grad_x; and a
 * block of 32 columns' grad_weight and grad_bias in 8 registers, added into
 * double every KN_LNB_FLUSH rows. Tails run the same arithmetic in scalar. */
#include <immintrin.h>

#include "kernels/norm/layer_norm_backward_impl.h"

static double hsum(__m256 v)
{
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	__m128d lo = _mm_cvtps_pd(s), hi = _mm_cvtps_pd(_mm_movehl_ps(s, s));
	__m128d t = _mm_add_pd(lo, hi);
	return _mm_cvtsd_f64(_mm_add_sd(t, _mm_unpackhi_pd(t, t)));
}

static void row_avx2(const float *g, const float *x, const float *w, float mu, float rs, float *gx, int64_t n)
{
	__m256 vmu = _mm256_set1_ps(mu), vrs = _mm256_set1_ps(rs);
	double a = 0, b = 0;
	int64_t i = 0;
	while (i + 8 <= n) {
		__m256 va = _mm256_setzero_ps(), vb = _mm256_setzero_ps();
		int64_t end = i + 256 < n ? i + 256 : n;
		for (; i + 8 <= end; i += 8) {
			__m256 gw = _mm256_loadu_ps(g + i);
			if (w)
				gw = _mm256_mul_ps(gw, _mm256_loadu_ps(w + i));
			__m256 xh = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmu), vrs);
			va = _mm256_add_ps(va, gw);
			vb = _mm256_fmadd_ps(gw, xh, vb);
		}
		a += hsum(va);
		b += hsum(vb);
	}
	for (; i < n; i++) {
		float gw = w ? g[i] * w[i] : g[i];
		a += gw;
		b += (double)gw * ((x[i] - mu) * rs);
	}
	float ma = (float)(a / (double)n), mb = (float)(b / (double)n);
	__m256 vma = _mm256_set1_ps(ma), vmb = _mm256_set1_ps(mb);
	for (i = 0; i + 8 <= n; i += 8) {
		__m256 gw = _mm256_loadu_ps(g + i);
		if (w)
			gw = _mm256_mul_ps(gw, _mm256_loadu_ps(w + i));
		__m256 xh = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmu), vrs);
		/* rs * (gw - ma - xh * mb) */
		__m256 t = _mm256_fnmadd_ps(xh, vmb, _mm256_sub_ps(gw, vma));
		_mm256_storeu_ps(gx + i, _mm256_mul_ps(vrs, t));
	}
	for (; i < n; i++) {
		float gw = w ? g[i] * w[i] : g[i];
		gx[i] = rs * (gw - ma - (x[i] - mu) * rs * mb);
	}
}

static void cols_avx2(const float *g, const float *x, const float *mean, const float *rstd, int64_t rows,
		      int64_t n, int64_t j0, int64_t j1, float *gw, float *gb)
{
	double sw[KN_LNB_COLS] = {0}, sb[KN_LNB_COLS] = {0};
	int64_t m = j1 - j0;
	if (m < KN_LNB_COLS) {
		/* a short last block: the portable loop */
		kn_lnb_scalar.cols(g, x, mean, rstd, rows, n, j0, j1, gw, gb);
		return;
	}
	for (int64_t r0 = 0; r0 < rows; r0 += KN_LNB_FLUSH) {
		__m256 w0 = _mm256_setzero_ps(), w1 = w0, w2 = w0, w3 = w0, b0 = w0, b1 = w0, b2 = w0, b3 = w0;
		int64_t r1 = r0 + KN_LNB_FLUSH < rows ? r0 + KN_LNB_FLUSH : rows;
		for (int64_t r = r0; r < r1; r++) {
			const float *gr = g + r * n + j0, *xr = x + r * n + j0;
			__m256 vmu = _mm256_set1_ps(mean[r]), vrs = _mm256_set1_ps(rstd[r]);
			__m256 g0 = _mm256_loadu_ps(gr), g1 = _mm256_loadu_ps(gr + 8), g2 = _mm256_loadu_ps(gr + 16),
			       g3 = _mm256_loadu_ps(gr + 24);
			w0 = _mm256_fmadd_ps(g0, _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(xr), vmu), vrs), w0);
			w1 = _mm256_fmadd_ps(g1, _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(xr + 8), vmu), vrs), w1);
			w2 = _mm256_fmadd_ps(g2, _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(xr + 16), vmu), vrs), w2);
			w3 = _mm256_fmadd_ps(g3, _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(xr + 24), vmu), vrs), w3);
			b0 = _mm256_add_ps(b0, g0);
			b1 = _mm256_add_ps(b1, g1);
			b2 = _mm256_add_ps(b2, g2);
			b3 = _mm256_add_ps(b3, g3);
		}
		float pw[KN_LNB_COLS], pb[KN_LNB_COLS];
		_mm256_storeu_ps(pw, w0);
		_mm256_storeu_ps(pw + 8, w1);
		_mm256_storeu_ps(pw + 16, w2);
		_mm256_storeu_ps(pw + 24, w3);
		_mm256_storeu_ps(pb, b0);
		_mm256_storeu_ps(pb + 8, b1);
		_mm256_storeu_ps(pb + 16, b2);
		_mm256_storeu_ps(pb + 24, b3);
		for (int j = 0; j < KN_LNB_COLS; j++) {
			sw[j] += pw[j];
			sb[j] += pb[j];
		}
	}
	for (int j = 0; j < KN_LNB_COLS; j++) {
		gw[j0 + j] = (float)sw[j];
		gb[j0 + j] = (float)sb[j];
	}
}

const kn_lnb_impl kn_lnb_avx2 = {row_avx2, cols_avx2};

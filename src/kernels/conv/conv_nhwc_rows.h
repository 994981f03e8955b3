/* conv_nhwc_rows.h - the inner loops of the channels-last kernels that run
 * over contiguous channels (depthwise convolution, max and average pooling
 * windows, and the NCHW max pool's running max), written once in plain C with GNU vectors and compiled per ISA:
 * portable in kernels/conv/conv_nhwc.c, and in conv_nhwc_rows.avx2.c and conv_nhwc_rows.avx512.c
 * (CMake gives those folders their flags). Include it after defining
 * KNHWC_SUFFIX to the ISA suffix of the functions to emit. */
#ifndef AIR_KERNELS_CONV_CONV_NHWC_ROWS_H
#define AIR_KERNELS_CONV_CONV_NHWC_ROWS_H

#include "kernels/common/epilogue.h"
#include "kernels/conv/conv_ref.h"

/* Depthwise output row (n, oh): y_row[ow * C + c] for every ow and c.
 * x is image n ([H, W, C]), wt the weight as [KH * KW][C], res_row the
 * residual's row or NULL. Simple activations are applied here; the caller
 * applies transcendental ones to the row afterwards. */
typedef void (*knhwc_dw_row_fn)(const kconv_geom *g, const float *x, const float *wt, const float *bias,
				const float *res_row, float *y_row, int64_t oh, k_act act);
/* y[c] = max over the window rows [h0, h1) x columns [w0, w1) of image x
 * ([H, W, C]) of channel c (NaN wins); -inf for an empty window. */
typedef void (*knhwc_max_fn)(const float *x, int64_t W, int64_t C, int64_t h0, int64_t h1, int64_t dh,
			     int64_t w0, int64_t w1, int64_t dw, float *y);
/* y[c] = scale * the sum over the window (unit steps) of channel c. */
typedef void (*knhwc_avg_fn)(const float *x, int64_t W, int64_t C, int64_t h0, int64_t h1, int64_t w0,
			     int64_t w1, float scale, float *y);
/* m[i] = max(m[i], v[i]) for i < n, NaN winning and ties keeping m, as in
 * knhwc_max: one window tap of the NCHW max pool (pool_nchw.c). */
typedef void (*knhwc_vmax_fn)(float *m, const float *v, int64_t n);

#define KNHWC_DECLARE(sfx)                                                                                  \
	void knhwc_dw_row__##sfx(const kconv_geom *g, const float *x, const float *wt, const float *bias,    \
				 const float *res_row, float *y_row, int64_t oh, k_act act);                 \
	void knhwc_max__##sfx(const float *x, int64_t W, int64_t C, int64_t h0, int64_t h1, int64_t dh,      \
			      int64_t w0, int64_t w1, int64_t dw, float *y);                                 \
	void knhwc_avg__##sfx(const float *x, int64_t W, int64_t C, int64_t h0, int64_t h1, int64_t w0,      \
			      int64_t w1, float scale, float *y);                                            \
	void knhwc_vmax__##sfx(float *m, const float *v, int64_t n);
KNHWC_DECLARE(portable)
KNHWC_DECLARE(avx2)
KNHWC_DECLARE(avx512)

#endif

#ifdef KNHWC_SUFFIX
#define KNHWC_CAT2(a, b) a##__##b
#define KNHWC_CAT(a, b) KNHWC_CAT2(a, b)
#define KNHWC_FN(name) KNHWC_CAT(name, KNHWC_SUFFIX)

#include <math.h>

/* GCC's -O2 vectorizes only loops that need no remainder; ask for its
 * normal cost model for the channel loops (clang vectorizes them as is). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("vect-cost-model=dynamic")
#endif

/* One register of floats: 16 with AVX-512, 8 with AVX, 4 otherwise (SSE2,
 * NEON). A wider GNU vector than the ISA's registers is not split into
 * registers: GCC kept a 16-float accumulator on the stack under AVX2 and
 * stored and reloaded it at every tap (the depthwise loop ran at 3 GFLOP/s).
 * Unaligned forms for loads and stores at any channel. */
#if defined(__AVX512F__)
#define KNHWC_VL 16
#elif defined(__AVX__)
#define KNHWC_VL 8
#else
#define KNHWC_VL 4
#endif
typedef float knhwc_vf __attribute__((vector_size(KNHWC_VL * 4)));
typedef float knhwc_vfu __attribute__((vector_size(KNHWC_VL * 4), aligned(4)));
typedef int32_t knhwc_vi __attribute__((vector_size(KNHWC_VL * 4)));

/* lanes of a where m is set, else of b (vectors go by pointer or macro) */
#define KNHWC_SEL(m, a, b) ((knhwc_vf)(((knhwc_vi)(a) & (m)) | ((knhwc_vi)(b) & ~(m))))

/* relu / relu6 / hardswish as in the oracle (NaN becomes 0 under relu) */
static inline void KNHWC_FN(knhwc_act_simple)(knhwc_vf *p, k_act act)
{
	const knhwc_vf zero = {0}, six = zero + 6.0f;
	knhwc_vf v = *p, t;
	switch (act) {
	case K_ACT_RELU: *p = KNHWC_SEL(v > zero, v, zero); return;
	case K_ACT_RELU6:
		v = KNHWC_SEL(v > zero, v, zero);
		*p = KNHWC_SEL(v < six, v, six);
		return;
	case K_ACT_HARDSWISH:
		t = v + 3.0f;
		t = KNHWC_SEL(t > zero, t, zero);
		t = KNHWC_SEL(t < six, t, six);
		*p = v * t / 6.0f;
		return;
	default: return;
	}
}

static inline float KNHWC_FN(knhwc_act_simple1)(float v, k_act act)
{
	switch (act) {
	case K_ACT_RELU: return v > 0.0f ? v : 0.0f;
	case K_ACT_RELU6: return v > 0.0f ? (v < 6.0f ? v : 6.0f) : 0.0f;
	case K_ACT_HARDSWISH: {
		float t = v + 3.0f;
		t = t > 0.0f ? (t < 6.0f ? t : 6.0f) : 0.0f;
		return v * t / 6.0f;
	}
	default: return v;
	}
}

/* y[c] = act(acc + res[c]) for one register of channels */
static inline void KNHWC_FN(knhwc_dw_store)(knhwc_vf *acc, const float *res, float *y, k_act simple)
{
	if (res)
		*acc += *(const knhwc_vfu *)res;
	KNHWC_FN(knhwc_act_simple)(acc, simple);
	*(knhwc_vfu *)y = *acc;
}

/* Output pixel (oh, ow) for channels [c, C), one register at a time, then
 * one channel at a time; taps outside the input are skipped. x points at
 * the first valid kernel row k0's input row, rows apart by dh * W * C. */
static void KNHWC_FN(knhwc_dw_pixel)(const kconv_geom *g, const float *x, const float *wt, const float *bias,
				     const float *res, float *y, int64_t ow, int64_t c, int64_t k0, int64_t k1,
				     k_act simple)
{
	const int64_t C = g->C, KW = g->KW, rstep = g->dh * g->W * C;
	int64_t j0, j1, off = ow * g->sw - g->pw;
	kconv_valid_range(KW, g->W, g->dw, off, &j0, &j1);
	for (; c + KNHWC_VL <= C; c += KNHWC_VL) {
		knhwc_vf acc = {0};
		if (bias)
			acc = *(const knhwc_vfu *)(bias + c);
		for (int64_t ki = k0; ki < k1; ki++) {
			const float *xr = x + (ki - k0) * rstep + c, *wr = wt + ki * KW * C + c;
			for (int64_t kj = j0; kj < j1; kj++)
				acc += *(const knhwc_vfu *)(xr + (off + kj * g->dw) * C) * *(const knhwc_vfu *)(wr + kj * C);
		}
		KNHWC_FN(knhwc_dw_store)(&acc, res ? res + c : NULL, y + c, simple);
	}
	for (; c < C; c++) {
		float acc = bias ? bias[c] : 0.0f;
		for (int64_t ki = k0; ki < k1; ki++) {
			const float *xr = x + (ki - k0) * rstep + c, *wr = wt + ki * KW * C + c;
			for (int64_t kj = j0; kj < j1; kj++)
				acc += xr[(off + kj * g->dw) * C] * wr[kj * C];
		}
		if (res)
			acc += res[c];
		y[c] = KNHWC_FN(knhwc_act_simple1)(acc, simple);
	}
}

void KNHWC_FN(knhwc_dw_row)(const kconv_geom *g, const float *x, const float *wt, const float *bias,
			    const float *res_row, float *y_row, int64_t oh, k_act act)
{
	const int64_t C = g->C, KW = g->KW, sw = g->sw, dw = g->dw;
	int64_t k0, k1; /* kernel rows that read real input */
	{
		int64_t lo, hi, off = oh * g->sh - g->ph;
		/* tap ki reads row off + ki * dh: valid ki are [lo, hi) */
		kconv_valid_range(g->KH, g->H, g->dh, off, &lo, &hi);
		k0 = lo, k1 = hi;
	}
	const k_act simple = (act == K_ACT_RELU || act == K_ACT_RELU6 || act == K_ACT_HARDSWISH) ? act : K_ACT_NONE;
	const float *x0 = x + (oh * g->sh - g->ph + k0 * g->dh) * g->W * C;
	const int64_t rstep = g->dh * g->W * C;
	/* columns [in0, in1) read real input at every tap: there, four output
	 * pixels share each weight load and give four independent FMA chains
	 * (one chain was bound by the FMA latency) */
	int64_t in0 = k_cdiv(g->pw, sw), last = g->W - 1 - (KW - 1) * dw + g->pw;
	int64_t in1 = last < 0 ? 0 : k_min64(g->OW, last / sw + 1);
	for (int64_t ow = 0; ow < g->OW;) {
		float *y = y_row + ow * C;
		const float *res = res_row ? res_row + ow * C : NULL;
		if (ow < in0 || ow + 4 > in1) {
			KNHWC_FN(knhwc_dw_pixel)(g, x0, wt, bias, res, y, ow, 0, k0, k1, simple);
			ow++;
			continue;
		}
		const int64_t off = ow * sw - g->pw, ps = sw * C;
		int64_t c = 0;
		for (; c + KNHWC_VL <= C; c += KNHWC_VL) {
			knhwc_vf a0 = {0};
			if (bias)
				a0 = *(const knhwc_vfu *)(bias + c);
			knhwc_vf a1 = a0, a2 = a0, a3 = a0;
			for (int64_t ki = k0; ki < k1; ki++) {
				const float *xr = x0 + (ki - k0) * rstep + off * C + c, *wr = wt + ki * KW * C + c;
				for (int64_t kj = 0; kj < KW; kj++) {
					const knhwc_vf w = *(const knhwc_vfu *)(wr + kj * C);
					const float *xp = xr + kj * dw * C;
					a0 += *(const knhwc_vfu *)xp * w;
					a1 += *(const knhwc_vfu *)(xp + ps) * w;
					a2 += *(const knhwc_vfu *)(xp + 2 * ps) * w;
					a3 += *(const knhwc_vfu *)(xp + 3 * ps) * w;
				}
			}
			KNHWC_FN(knhwc_dw_store)(&a0, res ? res + c : NULL, y + c, simple);
			KNHWC_FN(knhwc_dw_store)(&a1, res ? res + C + c : NULL, y + C + c, simple);
			KNHWC_FN(knhwc_dw_store)(&a2, res ? res + 2 * C + c : NULL, y + 2 * C + c, simple);
			KNHWC_FN(knhwc_dw_store)(&a3, res ? res + 3 * C + c : NULL, y + 3 * C + c, simple);
		}
		if (c < C)
			for (int q = 0; q < 4; q++)
				KNHWC_FN(knhwc_dw_pixel)(g, x0, wt, bias, res ? res + q * C : NULL, y + q * C, ow + q, c, k0,
							 k1, simple);
		ow += 4;
	}
}

void KNHWC_FN(knhwc_vmax)(float *restrict m, const float *restrict v, int64_t n)
{
	for (int64_t i = 0; i < n; i++) {
		float a = v[i], b = m[i];
		m[i] = (a > b || a != a) ? a : b;
	}
}

void KNHWC_FN(knhwc_max)(const float *x, int64_t W, int64_t C, int64_t h0, int64_t h1, int64_t dh, int64_t w0,
			 int64_t w1, int64_t dw, float *restrict y)
{
	for (int64_t c = 0; c < C; c++)
		y[c] = -INFINITY;
	for (int64_t ih = h0; ih < h1; ih += dh)
		for (int64_t iw = w0; iw < w1; iw += dw) {
			const float *restrict xp = x + (ih * W + iw) * C;
			for (int64_t c = 0; c < C; c++) {
				float v = xp[c], m = y[c];
				y[c] = (v > m || v != v) ? v : m;
			}
		}
}

void KNHWC_FN(knhwc_avg)(const float *x, int64_t W, int64_t C, int64_t h0, int64_t h1, int64_t w0, int64_t w1,
			 float scale, float *restrict y)
{
	for (int64_t c = 0; c < C; c++)
		y[c] = 0.0f;
	for (int64_t ih = h0; ih < h1; ih++)
		for (int64_t iw = w0; iw < w1; iw++) {
			const float *restrict xp = x + (ih * W + iw) * C;
			for (int64_t c = 0; c < C; c++)
				y[c] += xp[c];
		}
	for (int64_t c = 0; c < C; c++)
		y[c] *= scale;
}


#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif
#undef KNHWC_FN
#undef KNHWC_SEL
#undef KNHWC_VL
#undef KNHWC_CAT
#undef KNHWC_CAT2
#endif

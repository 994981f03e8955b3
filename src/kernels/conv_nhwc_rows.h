/* conv_nhwc_rows.h - the inner loops of the channels-last kernels that run
 * over contiguous channels (depthwise convolution, max and average pooling
 * windows), written once in plain C with GNU vectors and compiled per ISA:
 * portable in kernels/conv_nhwc.c, and in x86/avx2/ and x86/avx512/
 * (CMake gives those folders their flags). Include it after defining
 * KNHWC_SUFFIX to the ISA suffix of the functions to emit. */
#ifndef AIR_KERNELS_CONV_NHWC_ROWS_H
#define AIR_KERNELS_CONV_NHWC_ROWS_H

#include "kernels/epilogue.h"
#include "kernels/ref/conv.h"

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
/* An 8 x 8 block of 4-byte elements transposed: y[j * ldy + i] =
 * x[i * ldx + j] for i, j < 8 (the layout permutes' inner step). */
typedef void (*knhwc_tr8_fn)(const uint32_t *x, int64_t ldx, uint32_t *y, int64_t ldy);

#define KNHWC_DECLARE(sfx)                                                                                  \
	void knhwc_dw_row__##sfx(const kconv_geom *g, const float *x, const float *wt, const float *bias,    \
				 const float *res_row, float *y_row, int64_t oh, k_act act);                 \
	void knhwc_max__##sfx(const float *x, int64_t W, int64_t C, int64_t h0, int64_t h1, int64_t dh,      \
			      int64_t w0, int64_t w1, int64_t dw, float *y);                                 \
	void knhwc_avg__##sfx(const float *x, int64_t W, int64_t C, int64_t h0, int64_t h1, int64_t w0,      \
			      int64_t w1, float scale, float *y);                                            \
	void knhwc_tr8__##sfx(const uint32_t *x, int64_t ldx, uint32_t *y, int64_t ldy);
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

/* 16 floats: one AVX-512 register, two AVX2 ones; unaligned forms for
 * loads and stores at any channel. */
typedef float knhwc_v16 __attribute__((vector_size(64)));
typedef float knhwc_v16u __attribute__((vector_size(64), aligned(4)));
typedef int32_t knhwc_i16 __attribute__((vector_size(64)));

/* lanes of a where m is set, else of b (vectors go by pointer or macro:
 * passing them by value would cross the ABI without AVX-512 enabled) */
#define KNHWC_SEL(m, a, b) ((knhwc_v16)(((knhwc_i16)(a) & (m)) | ((knhwc_i16)(b) & ~(m))))

/* relu / relu6 / hardswish as in the oracle (NaN becomes 0 under relu) */
static inline void KNHWC_FN(knhwc_act_simple)(knhwc_v16 *p, k_act act)
{
	const knhwc_v16 zero = {0}, six = zero + 6.0f;
	knhwc_v16 v = *p, t;
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

void KNHWC_FN(knhwc_dw_row)(const kconv_geom *g, const float *x, const float *wt, const float *bias,
			    const float *res_row, float *y_row, int64_t oh, k_act act)
{
	const int64_t C = g->C, W = g->W, KW = g->KW;
	int64_t k0, k1; /* kernel rows that read real input */
	{
		int64_t lo, hi, off = oh * g->sh - g->ph;
		/* tap ki reads row off + ki * dh: valid ki are [lo, hi) */
		kconv_valid_range(g->KH, g->H, g->dh, off, &lo, &hi);
		k0 = lo, k1 = hi;
	}
	const k_act simple = (act == K_ACT_RELU || act == K_ACT_RELU6 || act == K_ACT_HARDSWISH) ? act : K_ACT_NONE;
	for (int64_t ow = 0; ow < g->OW; ow++) {
		int64_t j0, j1, off = ow * g->sw - g->pw;
		kconv_valid_range(KW, W, g->dw, off, &j0, &j1);
		float *y = y_row + ow * C;
		const float *res = res_row ? res_row + ow * C : NULL;
		int64_t c = 0;
		for (; c + 16 <= C; c += 16) {
			knhwc_v16 acc = {0};
			if (bias)
				acc = *(const knhwc_v16u *)(bias + c);
			for (int64_t ki = k0; ki < k1; ki++) {
				const float *xr = x + (oh * g->sh - g->ph + ki * g->dh) * W * C + c;
				const float *wr = wt + ki * KW * C + c;
				for (int64_t kj = j0; kj < j1; kj++)
					acc += *(const knhwc_v16u *)(xr + (off + kj * g->dw) * C) *
					       *(const knhwc_v16u *)(wr + kj * C);
			}
			if (res)
				acc += *(const knhwc_v16u *)(res + c);
			KNHWC_FN(knhwc_act_simple)(&acc, simple);
			*(knhwc_v16u *)(y + c) = acc;
		}
		for (; c < C; c++) {
			float acc = bias ? bias[c] : 0.0f;
			for (int64_t ki = k0; ki < k1; ki++) {
				const float *xr = x + (oh * g->sh - g->ph + ki * g->dh) * W * C + c;
				const float *wr = wt + ki * KW * C + c;
				for (int64_t kj = j0; kj < j1; kj++)
					acc += xr[(off + kj * g->dw) * C] * wr[kj * C];
			}
			if (res)
				acc += res[c];
			y[c] = KNHWC_FN(knhwc_act_simple1)(acc, simple);
		}
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

/* Three rounds of two-input shuffles (pairs of rows, then of pairs, then
 * 128-bit halves), which AVX2 does in unpack, shufps and perm2f128. */
typedef uint32_t knhwc_u8 __attribute__((vector_size(32)));
typedef uint32_t knhwc_u8u __attribute__((vector_size(32), aligned(4)));
#if defined(__clang__)
#define KNHWC_SHUF(a, b, i0, i1, i2, i3, i4, i5, i6, i7) __builtin_shufflevector(a, b, i0, i1, i2, i3, i4, i5, i6, i7)
#else
#define KNHWC_SHUF(a, b, i0, i1, i2, i3, i4, i5, i6, i7) \
	__builtin_shuffle(a, b, (knhwc_u8){i0, i1, i2, i3, i4, i5, i6, i7})
#endif

void KNHWC_FN(knhwc_tr8)(const uint32_t *x, int64_t ldx, uint32_t *y, int64_t ldy)
{
	knhwc_u8 r[8], t[8], u[8];
	for (int i = 0; i < 8; i++)
		r[i] = *(const knhwc_u8u *)(x + i * ldx);
	for (int i = 0; i < 8; i += 2) {
		t[i] = KNHWC_SHUF(r[i], r[i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
		t[i + 1] = KNHWC_SHUF(r[i], r[i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
	}
	for (int i = 0; i < 8; i += 4)
		for (int k = 0; k < 2; k++) {
			u[i + 2 * k] = KNHWC_SHUF(t[i + k], t[i + k + 2], 0, 1, 8, 9, 4, 5, 12, 13);
			u[i + 2 * k + 1] = KNHWC_SHUF(t[i + k], t[i + k + 2], 2, 3, 10, 11, 6, 7, 14, 15);
		}
	/* u[k] holds columns k and k + 4 of rows 0-3, u[k + 4] of rows 4-7 */
	for (int k = 0; k < 4; k++) {
		*(knhwc_u8u *)(y + k * ldy) = KNHWC_SHUF(u[k], u[k + 4], 0, 1, 2, 3, 8, 9, 10, 11);
		*(knhwc_u8u *)(y + (k + 4) * ldy) = KNHWC_SHUF(u[k], u[k + 4], 4, 5, 6, 7, 12, 13, 14, 15);
	}
}
#undef KNHWC_SHUF

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif
#undef KNHWC_FN
#undef KNHWC_SEL
#undef KNHWC_CAT
#undef KNHWC_CAT2
#endif

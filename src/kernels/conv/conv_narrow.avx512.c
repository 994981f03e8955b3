/* conv_narrow.avx512.c - the micro-kernel of conv_narrow.h: 8 output
 * channels x up to 48 pixels (3 vectors) of one output row, 24
 * accumulators; per tap, three loads of pixels and eight broadcast weights.
 * A row's last tile masks its stores (the loads past the row read band
 * slack whose lanes are never stored). */
#include <immintrin.h>

#include "kernels/common/epilogue.h"
#include "kernels/common/lanes_avx512.h"
#include "kernels/conv/conv_narrow.h"

#define AIR_INLINE static inline __attribute__((always_inline))

enum { CH = KNARROW_CH, VEC = 16 };


/* NV vectors of pixels from ow; the last one masked to the row's end. */
AIR_INLINE void tile(const int NV, const knarrow_row *p, int64_t ow)
{
	__m512 acc[CH][3];
#pragma GCC unroll 8
	for (int r = 0; r < CH; r++)
#pragma GCC unroll 3
		for (int v = 0; v < NV; v++)
			acc[r][v] = _mm512_setzero_ps();
	const float *band = p->band + ow, *w = p->w;
	const int32_t *off = p->off;
	for (int64_t k = 0; k < p->K; k++, w += CH) {
		const float *b = band + off[k];
		__m512 bv[3];
#pragma GCC unroll 3
		for (int v = 0; v < NV; v++)
			bv[v] = _mm512_loadu_ps(b + VEC * v);
#pragma GCC unroll 8
		for (int r = 0; r < CH; r++) {
			__m512 a = _mm512_set1_ps(w[r]);
#pragma GCC unroll 3
			for (int v = 0; v < NV; v++)
				acc[r][v] = _mm512_fmadd_ps(a, bv[v], acc[r][v]);
		}
	}
	const __m512 zero = _mm512_setzero_ps(), six = _mm512_set1_ps(6.0f);
	__mmask16 m[3];
#pragma GCC unroll 3
	for (int v = 0; v < NV; v++)
		m[v] = k16_lanes(p->OW - ow - VEC * v);
	for (int r = 0; r < p->nch; r++) {
		const __m512 bias = _mm512_set1_ps(p->bias[r]);
		float *y = p->y + r * p->ystride + ow;
#pragma GCC unroll 3
		for (int v = 0; v < NV; v++) {
			__m512 x = _mm512_add_ps(acc[r][v], bias);
			/* (max and min return their second operand when one is
			 * NaN: x second, so a NaN stays NaN as in torch) */
			if (p->act == K_ACT_RELU)
				x = _mm512_max_ps(zero, x);
			else if (p->act == K_ACT_RELU6)
				x = _mm512_min_ps(six, _mm512_max_ps(zero, x));
			_mm512_mask_storeu_ps(y + VEC * v, m[v], x);
		}
	}
}

void knarrow_row__avx512(const knarrow_row *p)
{
	int64_t ow = 0;
	for (; ow + 3 * VEC <= p->OW; ow += 3 * VEC)
		tile(3, p, ow);
	int64_t rest = p->OW - ow;
	if (rest > 2 * VEC)
		tile(3, p, ow);
	else if (rest > VEC)
		tile(2, p, ow);
	else if (rest > 0)
		tile(1, p, ow);
}

void knarrow_deinterleave2__avx512(const float *src, int64_t n, float *even, float *odd)
{
	const __m512i ie = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
	const __m512i io = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
	int64_t i = 0;
	for (; i + VEC <= n; i += VEC) {
		__m512 a = _mm512_loadu_ps(src + 2 * i), b = _mm512_loadu_ps(src + 2 * i + VEC);
		_mm512_storeu_ps(even + i, _mm512_permutex2var_ps(a, ie, b));
		_mm512_storeu_ps(odd + i, _mm512_permutex2var_ps(a, io, b));
	}
	for (; i < n; i++) {
		even[i] = src[2 * i];
		odd[i] = src[2 * i + 1];
	}
}

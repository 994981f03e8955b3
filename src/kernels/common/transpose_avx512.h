/* transpose_avx512.h - a 16 x 16 block of floats transposed in registers,
 * shared by the GEMM's transposed tile store and the layout transposes. */
#ifndef AIR_KERNELS_COMMON_TRANSPOSE_AVX512_H
#define AIR_KERNELS_COMMON_TRANSPOSE_AVX512_H

#include <immintrin.h>

/* r[0..15] transposed in place: lane i of r[j] becomes lane j of r[i].
 * Pairs of floats, then of doubles, within 128-bit lanes, then the lanes
 * themselves: 64 shuffles. */
static inline __attribute__((always_inline)) void k16_transpose(__m512 *r)
{
	__m512 t[16], u[16];
#pragma GCC unroll 8
	for (int i = 0; i < 8; i++) {
		t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
		t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
	}
	/* u[4i + q], 128-bit lane L: column 4L + q of rows 4i..4i+3 */
#pragma GCC unroll 4
	for (int i = 0; i < 4; i++) {
		__m512d t0 = _mm512_castps_pd(t[4 * i]), t1 = _mm512_castps_pd(t[4 * i + 1]);
		__m512d t2 = _mm512_castps_pd(t[4 * i + 2]), t3 = _mm512_castps_pd(t[4 * i + 3]);
		u[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
		u[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
		u[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
		u[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
	}
#pragma GCC unroll 4
	for (int q = 0; q < 4; q++) {
		__m512 lo01 = _mm512_shuffle_f32x4(u[q], u[4 + q], 0x44), lo23 = _mm512_shuffle_f32x4(u[q], u[4 + q], 0xee);
		__m512 hi01 = _mm512_shuffle_f32x4(u[8 + q], u[12 + q], 0x44);
		__m512 hi23 = _mm512_shuffle_f32x4(u[8 + q], u[12 + q], 0xee);
		r[q] = _mm512_shuffle_f32x4(lo01, hi01, 0x88);
		r[4 + q] = _mm512_shuffle_f32x4(lo01, hi01, 0xdd);
		r[8 + q] = _mm512_shuffle_f32x4(lo23, hi23, 0x88);
		r[12 + q] = _mm512_shuffle_f32x4(lo23, hi23, 0xdd);
	}
}

#endif

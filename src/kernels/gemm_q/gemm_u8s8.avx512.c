/* gemm_u8s8.avx512.c - the int8 product's tile on AVX512-VNNI (gemm_u8s8.h): up to 4 rows of A
 * against up to 4 packed blocks (64 channels), 16 s32 accumulators. Each step of 4 k: one load
 * of 64 weight bytes per block (16 channels x 4 k, vpdpbusd's layout), the 4 activation bytes
 * of a row broadcast to every lane, and one vpdpbusd per row and block: 64 multiply-adds of u8
 * by s8 into s32 (no saturation: 4 products of at most 255 * 128 fit easily). The epilogue
 * runs on the tile while it is in registers; its fma and rounding are the reference's. This
 * file's functions need AVX512-VNNI on top of the AVX-512 flags CMake gives it; gemm_u8s8.c
 * calls them only when CPUID has it. */
#include <immintrin.h>
#include <string.h>

#include "kernels/gemm_q/gemm_u8s8.h"

/* VNNI per function, not per file (CMake gives .avx512.c files AVX-512F/BW/VL/DQ only): a
 * target attribute both GCC and clang take; clang ignores GCC's target pragma. */
#define VNNI __attribute__((target("avx512vnni")))
#define AIR_INLINE static inline __attribute__((always_inline)) VNNI
#define UNROLL _Pragma("GCC unroll 8")

AIR_INLINE int32_t load4(const uint8_t *a)
{
	int32_t v;
	memcpy(&v, a, 4);
	return v;
}

/* The last step's activation bytes when K is not a multiple of 4: zeros past K (the packed
 * weight is zero there too; this only keeps the read inside the row). */
AIR_INLINE int32_t load_tail(const uint8_t *a, int64_t n)
{
	uint8_t t[4] = {0, 0, 0, 0};
	for (int64_t i = 0; i < n; i++)
		t[i] = a[i];
	return load4(t);
}

AIR_INLINE void store(const ku8_epi *ep, __m512i acc, __m512i zcs, __m512 s, __m512 bias, __mmask16 mask,
		      char *C, int64_t off)
{
	const __m512 zero = _mm512_setzero_ps();
	__m512 y = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(acc, zcs)), s, bias);
	if (ep->relu)
		y = _mm512_max_ps(y, zero);
	if (ep->out_u8) {
		__m512 t = _mm512_mul_ps(y, _mm512_set1_ps(ep->out_inv));
		t = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
		t = _mm512_add_ps(t, _mm512_set1_ps(ep->out_zp));
		t = _mm512_min_ps(_mm512_max_ps(t, zero), _mm512_set1_ps(255.0f));
		_mm512_mask_cvtepi32_storeu_epi8(C + off, mask, _mm512_cvtps_epi32(t));
	} else {
		_mm512_mask_storeu_ps((float *)C + off, mask, y);
	}
}

AIR_INLINE void tile(const ku8_packed *p, int64_t b0, const int NB, const int MR, const uint8_t *A, int64_t lda,
		     const ku8_epi *ep, char *C, int64_t ldc)
{
	__m512i acc[4][4];
	const int8_t *wb[4];
	UNROLL for (int b = 0; b < NB; b++)
	{
		wb[b] = p->w + (b0 + b) * p->k4 * KU8_NB * 4;
		UNROLL for (int r = 0; r < MR; r++) acc[r][b] = _mm512_setzero_si512();
	}
	const int64_t kf = p->K / 4;
	for (int64_t g = 0; g < kf; g++) {
		__m512i w[4];
		UNROLL for (int b = 0; b < NB; b++) w[b] = _mm512_load_si512((const void *)(wb[b] + g * 64));
		UNROLL for (int r = 0; r < MR; r++)
		{
			const __m512i a = _mm512_set1_epi32(load4(A + r * lda + 4 * g));
			UNROLL for (int b = 0; b < NB; b++) acc[r][b] = _mm512_dpbusd_epi32(acc[r][b], a, w[b]);
		}
	}
	if (kf < p->k4) {
		__m512i w[4];
		UNROLL for (int b = 0; b < NB; b++) w[b] = _mm512_load_si512((const void *)(wb[b] + kf * 64));
		UNROLL for (int r = 0; r < MR; r++)
		{
			const __m512i a = _mm512_set1_epi32(load_tail(A + r * lda + 4 * kf, p->K - 4 * kf));
			UNROLL for (int b = 0; b < NB; b++) acc[r][b] = _mm512_dpbusd_epi32(acc[r][b], a, w[b]);
		}
	}
	const __m512i zp = _mm512_set1_epi32(ep->a_zp);
	UNROLL for (int b = 0; b < NB; b++)
	{
		const int64_t n0 = (b0 + b) * KU8_NB, left = p->N - n0;
		const __mmask16 mask = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
		const __m512i zcs = _mm512_mullo_epi32(zp, _mm512_load_si512((const void *)(ep->colsum + n0)));
		const __m512 s = _mm512_load_ps(ep->scale + n0);
		const __m512 bias = ep->bias ? _mm512_maskz_loadu_ps(mask, ep->bias + n0) : _mm512_setzero_ps();
		UNROLL for (int r = 0; r < MR; r++) store(ep, acc[r][b], zcs, s, bias, mask, C, r * ldc + n0);
	}
}

#define TILE_CASE(mr, nb)                                                                   \
	case (mr) * 8 + (nb):                                                               \
		tile(p, b0, nb, mr, A, lda, ep, (char *)C, ldc);                            \
		return;
#define TILE_ROWS(mr) TILE_CASE(mr, 1) TILE_CASE(mr, 2) TILE_CASE(mr, 3) TILE_CASE(mr, 4)

VNNI void ku8_tile_avx512vnni(const ku8_packed *p, int64_t b0, int nb, int m, const uint8_t *A, int64_t lda,
			 const ku8_epi *ep, void *C, int64_t ldc)
{
	switch (m * 8 + nb) {
		TILE_ROWS(1)
		TILE_ROWS(2)
		TILE_ROWS(3)
		TILE_ROWS(4)
	default: ku8_tile_scalar(p, b0, nb, m, A, lda, ep, C, ldc);
	}
}

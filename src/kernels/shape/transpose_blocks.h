/* transpose_blocks.h - one 8 x 8 block of 4-byte elements transposed in
 * registers, written once with GNU vectors and compiled per ISA: portable
 * in transpose.c, and in transpose_blocks.avx2.c and .avx512.c (CMake gives
 * those files their flags). Include it after defining KTR_SUFFIX to the ISA
 * suffix of the function to emit. */
#ifndef AIR_KERNELS_SHAPE_TRANSPOSE_BLOCKS_H
#define AIR_KERNELS_SHAPE_TRANSPOSE_BLOCKS_H

#include <stdint.h>

/* y[j * ldy + i] = x[i * ldx + j] for i, j < b (b = 8, or 16 for the
 * AVX-512 block); with res (floats only), y[j * ldy + i] = x[i * ldx + j] +
 * res[j * ldr + i]. */
typedef void (*ktr_block_fn)(const uint32_t *x, int64_t ldx, uint32_t *y, int64_t ldy, const float *res,
			     int64_t ldr);
void ktr_block8__portable(const uint32_t *x, int64_t ldx, uint32_t *y, int64_t ldy, const float *res, int64_t ldr);
void ktr_block8__avx2(const uint32_t *x, int64_t ldx, uint32_t *y, int64_t ldy, const float *res, int64_t ldr);
void ktr_block8__avx512(const uint32_t *x, int64_t ldx, uint32_t *y, int64_t ldy, const float *res, int64_t ldr);
void ktr_block16__avx512(const uint32_t *x, int64_t ldx, uint32_t *y, int64_t ldy, const float *res, int64_t ldr);

#endif

#ifdef KTR_SUFFIX
#define KTR_CAT2(a, b) a##__##b
#define KTR_CAT(a, b) KTR_CAT2(a, b)
#define KTR_FN(name) KTR_CAT(name, KTR_SUFFIX)

/* Three rounds of two-input shuffles (pairs of rows, then of pairs, then
 * 128-bit halves), which AVX2 does in unpack, shufps and perm2f128. */
typedef uint32_t ktr_u8 __attribute__((vector_size(32)));
typedef uint32_t ktr_u8u __attribute__((vector_size(32), aligned(4)));
typedef float ktr_f8 __attribute__((vector_size(32)));
typedef float ktr_f8u __attribute__((vector_size(32), aligned(4)));
#if defined(__clang__)
#define KTR_SHUF(a, b, i0, i1, i2, i3, i4, i5, i6, i7) __builtin_shufflevector(a, b, i0, i1, i2, i3, i4, i5, i6, i7)
#else
#define KTR_SHUF(a, b, i0, i1, i2, i3, i4, i5, i6, i7) \
	__builtin_shuffle(a, b, (ktr_u8){i0, i1, i2, i3, i4, i5, i6, i7})
#endif

void KTR_FN(ktr_block8)(const uint32_t *x, int64_t ldx, uint32_t *y, int64_t ldy, const float *res, int64_t ldr)
{
	ktr_u8 r[8], t[8], u[8];
	for (int i = 0; i < 8; i++)
		r[i] = *(const ktr_u8u *)(x + i * ldx);
	for (int i = 0; i < 8; i += 2) {
		t[i] = KTR_SHUF(r[i], r[i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
		t[i + 1] = KTR_SHUF(r[i], r[i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
	}
	for (int i = 0; i < 8; i += 4)
		for (int k = 0; k < 2; k++) {
			u[i + 2 * k] = KTR_SHUF(t[i + k], t[i + k + 2], 0, 1, 8, 9, 4, 5, 12, 13);
			u[i + 2 * k + 1] = KTR_SHUF(t[i + k], t[i + k + 2], 2, 3, 10, 11, 6, 7, 14, 15);
		}
	/* u[k] holds columns k and k + 4 of rows 0-3, u[k + 4] of rows 4-7 */
	if (res) {
		/* (a vector cast between same-sized vectors keeps the bits) */
		for (int k = 0; k < 4; k++) {
			ktr_f8 lo = (ktr_f8)KTR_SHUF(u[k], u[k + 4], 0, 1, 2, 3, 8, 9, 10, 11);
			ktr_f8 hi = (ktr_f8)KTR_SHUF(u[k], u[k + 4], 4, 5, 6, 7, 12, 13, 14, 15);
			*(ktr_f8u *)(y + k * ldy) = lo + *(const ktr_f8u *)(res + k * ldr);
			*(ktr_f8u *)(y + (k + 4) * ldy) = hi + *(const ktr_f8u *)(res + (k + 4) * ldr);
		}
		return;
	}
	for (int k = 0; k < 4; k++) {
		*(ktr_u8u *)(y + k * ldy) = KTR_SHUF(u[k], u[k + 4], 0, 1, 2, 3, 8, 9, 10, 11);
		*(ktr_u8u *)(y + (k + 4) * ldy) = KTR_SHUF(u[k], u[k + 4], 4, 5, 6, 7, 12, 13, 14, 15);
	}
}
#undef KTR_SHUF

#undef KTR_FN
#undef KTR_CAT
#undef KTR_CAT2
#endif

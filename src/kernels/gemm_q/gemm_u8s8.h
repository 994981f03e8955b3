/* gemm_u8s8.h - the int8 product of PT2E static quantization: u8 activations (one scale and
 * zero point per tensor) times s8 weights (one scale per output channel, zero point 0), summed
 * in s32, then dequantized to f32 or requantized to u8 in the epilogue:
 *
 *   acc[m][n] = sum_k A[m][k] * W[n][k] - a_zp * colsum[n]     (= sum_k (A - a_zp) * W, exact)
 *   y[m][n]   = fma((float)acc, scale[n], bias[n])  [max(y, 0) if relu]
 *   f32 out:  y;   u8 out:  clamp(nearbyint(y * out_inv) + out_zp, 0, 255)
 *
 * scale[n] = a_scale * w_scale[n] rounded to f32 once. Every path computes exactly this (the
 * same integers, one fma, the same rounding), so the fast kernels equal the reference bit for
 * bit. Against eager's quantized reference (dequantize to f32, f32 product, quantize) only the
 * f32 product's rounding differs: u8 outputs agree within one step.
 *
 * W is packed once (ku8_pack) into blocks of KU8_NB output channels: [nblk][k4][KU8_NB][4],
 * k4 = ceil(K / 4), four consecutive k of one channel in 4 bytes (vpdpbusd's operand), zero
 * past K and past N. Paths, picked once from kcpu_features() (AIR_ISA forces them): AVX512-VNNI
 * (vpdpbusd, 4 rows x 64 channels), AVX2 (s8/u8 widened to s16, vpmaddwd: exact, where
 * vpmaddubsw would saturate), portable C. */
#ifndef AIR_KERNELS_GEMM_Q_GEMM_U8S8_H
#define AIR_KERNELS_GEMM_Q_GEMM_U8S8_H

#include <stddef.h>
#include <stdint.h>

#include "air/air.h"
#include "platform/pool.h"

enum {
	KU8_NB = 16,            /* output channels per packed block */
	KU8_PANEL_BLOCKS = 4,   /* blocks a task's panel holds (64 channels) */
	KU8_MAX_K = 65536,      /* K * 255 * 128 stays below 2^31 */
};

typedef struct ku8_packed {
	int64_t N, K, k4, nblk;
	int8_t *w;       /* [nblk][k4][KU8_NB][4] */
	int32_t *colsum; /* [nblk * KU8_NB]: sum_k W[n][k], zero past N */
	float *scale;    /* [nblk * KU8_NB]: a_scale * w_scale[n], zero past N */
} ku8_packed;

typedef struct ku8_epi {
	const int32_t *colsum; /* from the packed weight */
	const float *scale;
	const float *bias; /* [N] or NULL */
	int32_t a_zp;
	int relu;
	int out_u8;
	float out_inv; /* 1 / the output's scale, as torch rounds it to f32 */
	float out_zp;
} ku8_epi;

/* Packs W [N x K] (row stride ldw) with its per-channel scales; *out is freed with ku8_free. */
air_status ku8_pack(int64_t N, int64_t K, const int8_t *W, int64_t ldw, float a_scale, const float *w_scale,
		    ku8_packed **out);
void ku8_free(ku8_packed *p);

/* C [M x N] (f32, or u8 when ep->out_u8; row stride ldc) from A [M x K] u8 (row stride lda).
 * pool may be NULL. */
void ku8_gemm(const ku8_packed *p, int64_t M, const uint8_t *A, int64_t lda, const ku8_epi *ep, void *C,
	      int64_t ldc, rt_pool *pool);

/* The oracle, on the unpacked W: integers summed in 64 bits, then the epilogue above. */
void ku8_gemm_reference(int64_t M, int64_t N, int64_t K, const uint8_t *A, int64_t lda, const int8_t *W,
			int64_t ldw, float a_scale, const float *w_scale, const ku8_epi *ep, void *C, int64_t ldc);

/* The kernel ku8_gemm uses: "avx512_vnni", "avx2" or "scalar". */
const char *ku8_kernel_name(void);

/* ---- shared by gemm_u8s8.c and its ISA files ---- */

/* Rows [0, m) of A against blocks [b0, b0 + nb) of p, the epilogue applied, into C (already
 * offset to row 0 and channel 0 of the whole product). m and nb are at most the kernel's. */
typedef void (*ku8_tile_fn)(const ku8_packed *p, int64_t b0, int nb, int m, const uint8_t *A, int64_t lda,
			    const ku8_epi *ep, void *C, int64_t ldc);

void ku8_tile_scalar(const ku8_packed *p, int64_t b0, int nb, int m, const uint8_t *A, int64_t lda,
		     const ku8_epi *ep, void *C, int64_t ldc);
void ku8_tile_avx2(const ku8_packed *p, int64_t b0, int nb, int m, const uint8_t *A, int64_t lda,
		   const ku8_epi *ep, void *C, int64_t ldc);
void ku8_tile_avx512vnni(const ku8_packed *p, int64_t b0, int nb, int m, const uint8_t *A, int64_t lda,
			 const ku8_epi *ep, void *C, int64_t ldc);

/* One output element from its s32 sum, stored at element off of C: the scalar epilogue every
 * path matches (the reference's too). */
void ku8_store_scalar(const ku8_epi *ep, int32_t acc, int64_t n, void *C, int64_t off);

/* y (after the relu) as u8: nearbyint(y * out_inv) + out_zp clamped to [0, 255], torch's
 * quantize (round half to even, then the zero point, then the clamp) */
uint8_t ku8_requant(const ku8_epi *ep, float y);

#endif

/* gemm_q_ref.c - the quantized-weight format's portable pieces (gemm_q.h): the quantizer the C
 * tests use, one row dequantized (the prefill path's and the oracle's), the oracle itself, and
 * the portable decode kernel. */
#include <math.h>
#include <string.h>

#include "kernels/common/half.h"
#include "kernels/gemm_q/gemm_q.h"

/* Value k of row q of an int4 weight: the block of 16 bytes holding it, then the nibble. */
static inline int q4_at(const uint8_t *row, int64_t k)
{
	const uint8_t b = row[(k / KQ_BLOCK) * (KQ_BLOCK / 2) + (k % (KQ_BLOCK / 2))];
	const int nib = (k % KQ_BLOCK) < KQ_BLOCK / 2 ? (b & 15) : (b >> 4);
	return nib - 8;
}

void kq_quantize(int bits, int64_t N, int64_t K, int64_t group, const float *W, int64_t ldw, void *q,
		 uint16_t *scales)
{
	const kq_weight shape = {bits, N, K, group, (K + group - 1) / group, q, scales};
	const int64_t rb = kq_row_bytes(&shape);
	for (int64_t n = 0; n < N; n++) {
		const float *w = W + n * ldw;
		uint8_t *row = (uint8_t *)q + n * rb;
		memset(row, bits == 8 ? 0 : 0x88, (size_t)rb);
		for (int64_t g = 0; g < shape.ngroups; g++) {
			const int64_t k0 = g * group, k1 = k0 + group < K ? k0 + group : K;
			float amax = 0.0f, peak = 0.0f; /* peak: the first value of the largest magnitude */
			for (int64_t k = k0; k < k1; k++)
				if (fabsf(w[k]) > amax)
					amax = fabsf(w[k]), peak = w[k];
			/* int8: s = max|w| / 127, q in [-127, 127]. int4 (ggml's Q4_0): s = peak / -8, so the
			 * peak is q = -8 exactly and the other values use all 16 levels down to it (max|w| / 7
			 * would leave -8 unused: a 4-bit LLaMA's logits lost 0.01 of cosine to it). The scale
			 * is rounded to f16 first and q computed from the rounded one, so s * q is the value
			 * the kernels see. */
			const uint16_t sh = k_f32_to_f16(bits == 8 ? amax / 127.0f : peak / -8.0f);
			scales[n * shape.ngroups + g] = sh;
			const float s = k_f16_to_f32(sh), lo = bits == 8 ? -127.0f : -8.0f, hi = bits == 8 ? 127.0f : 7.0f;
			for (int64_t k = k0; k < k1; k++) {
				float v = s != 0.0f ? nearbyintf(w[k] / s) : 0.0f;
				v = v > hi ? hi : (v < lo ? lo : v);
				if (bits == 8) {
					((int8_t *)row)[k] = (int8_t)v;
				} else {
					uint8_t *b = row + (k / KQ_BLOCK) * (KQ_BLOCK / 2) + (k % (KQ_BLOCK / 2));
					const uint8_t nib = (uint8_t)((int)v + 8);
					*b = (k % KQ_BLOCK) < KQ_BLOCK / 2 ? (uint8_t)((*b & 0xf0) | nib)
									    : (uint8_t)((*b & 0x0f) | (nib << 4));
				}
			}
		}
	}
}

void kq_dequant_row(const kq_weight *w, int64_t n, float *dst)
{
	const int64_t G = w->group;
	const uint16_t *sc = w->scales + n * w->ngroups;
	if (w->bits == 8) {
		const int8_t *q = (const int8_t *)w->q + n * kq_row_bytes(w);
		for (int64_t g = 0; g < w->ngroups; g++) {
			const float s = k_f16_to_f32(sc[g]);
			for (int64_t k = 0; k < G; k++) /* vectorizes */
				dst[g * G + k] = s * (float)q[g * G + k];
		}
		return;
	}
	const uint8_t *q = (const uint8_t *)w->q + n * kq_row_bytes(w);
	for (int64_t g = 0; g < w->ngroups; g++) {
		const float s = k_f16_to_f32(sc[g]);
		for (int64_t b = 0; b < G / KQ_BLOCK; b++) {
			const uint8_t *p = q + (g * G + b * KQ_BLOCK) / 2;
			float *d = dst + g * G + b * KQ_BLOCK;
			for (int i = 0; i < KQ_BLOCK / 2; i++) {
				d[i] = s * (float)((p[i] & 15) - 8);
				d[i + KQ_BLOCK / 2] = s * (float)((p[i] >> 4) - 8);
			}
		}
	}
}

void kgemm_q_reference(const kq_weight *w, int64_t M, const float *A, int64_t lda, const float *bias, float *C,
		       int64_t ldc)
{
	const uint16_t *sc = w->scales;
	for (int64_t n = 0; n < w->N; n++) {
		for (int64_t m = 0; m < M; m++) {
			double acc = bias ? bias[n] : 0.0;
			for (int64_t k = 0; k < w->K; k++) {
				const int qv = w->bits == 8 ? ((const int8_t *)w->q)[n * kq_row_bytes(w) + k]
							    : q4_at((const uint8_t *)w->q + n * kq_row_bytes(w), k);
				const double s = k_f16_to_f32(sc[n * w->ngroups + k / w->group]);
				acc += (double)A[m * lda + k] * s * qv;
			}
			C[m * ldc + n] = (float)acc;
		}
	}
}

/* The portable decode kernel: a group's integer-valued products summed in f32, then scaled. */
void kq_rows_scalar(const kq_weight *w, int m, const float *A, int64_t lda, int64_t n0, int64_t n1,
		    const float *bias, float *C, int64_t ldc)
{
	const int64_t G = w->group, rb = kq_row_bytes(w);
	for (int64_t n = n0; n < n1; n++) {
		const uint8_t *row = (const uint8_t *)w->q + n * rb;
		float acc[4] = {0, 0, 0, 0};
		for (int64_t g = 0; g < w->ngroups; g++) {
			const float s = k_f16_to_f32(w->scales[n * w->ngroups + g]);
			float part[4] = {0, 0, 0, 0};
			for (int64_t k = g * G; k < (g + 1) * G; k++) {
				const float qv = (float)(w->bits == 8 ? ((const int8_t *)row)[k] : q4_at(row, k));
				for (int r = 0; r < m; r++)
					part[r] += qv * A[r * lda + k];
			}
			for (int r = 0; r < m; r++)
				acc[r] += s * part[r];
		}
		for (int r = 0; r < m; r++)
			C[r * ldc + n] = acc[r] + (bias ? bias[n] : 0.0f);
	}
}

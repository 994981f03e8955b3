/* gemm_u8s8_ref.c - the int8 product's portable pieces (gemm_u8s8.h): the packing, the scalar
 * epilogue, the oracle on the unpacked weight, and the portable tile on the packed one. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kernels/gemm_q/gemm_u8s8.h"

static void *alloc64(size_t bytes)
{
	void *p = NULL;
	return posix_memalign(&p, 64, bytes ? bytes : 64) == 0 ? p : NULL;
}

air_status ku8_pack(int64_t N, int64_t K, const int8_t *W, int64_t ldw, float a_scale, const float *w_scale,
		    ku8_packed **out)
{
	*out = NULL;
	if (N < 0 || K < 0 || K > KU8_MAX_K)
		return air_error(AIR_INVALID_ARGUMENT, "ku8_pack: N=%lld K=%lld out of range", (long long)N,
				 (long long)K);
	ku8_packed *p = calloc(1, sizeof *p);
	if (!p)
		return air_error(AIR_OUT_OF_MEMORY, "ku8_pack: no memory");
	p->N = N;
	p->K = K;
	p->k4 = (K + 3) / 4;
	p->nblk = (N + KU8_NB - 1) / KU8_NB;
	const size_t cols = (size_t)(p->nblk * KU8_NB);
	const size_t wbytes = cols * (size_t)p->k4 * 4;
	p->w = alloc64(wbytes);
	p->colsum = alloc64(cols * sizeof(int32_t));
	p->scale = alloc64(cols * sizeof(float));
	if (!p->w || !p->colsum || !p->scale) {
		ku8_free(p);
		return air_error(AIR_OUT_OF_MEMORY, "ku8_pack: no memory for %zu bytes", wbytes);
	}
	memset(p->w, 0, wbytes);
	memset(p->colsum, 0, cols * sizeof(int32_t));
	memset(p->scale, 0, cols * sizeof(float));
	for (int64_t n = 0; n < N; n++) {
		const int8_t *row = W + n * ldw;
		int8_t *dst = p->w + (n / KU8_NB) * p->k4 * KU8_NB * 4 + (n % KU8_NB) * 4;
		int32_t s = 0;
		for (int64_t k = 0; k < K; k++) {
			dst[(k / 4) * KU8_NB * 4 + k % 4] = row[k];
			s += row[k];
		}
		p->colsum[n] = s;
		p->scale[n] = a_scale * w_scale[n];
	}
	*out = p;
	return AIR_OK;
}

void ku8_free(ku8_packed *p)
{
	if (!p)
		return;
	free(p->w);
	free(p->colsum);
	free(p->scale);
	free(p);
}

uint8_t ku8_requant(const ku8_epi *ep, float y)
{
	float q = nearbyintf(y * ep->out_inv) + ep->out_zp;
	q = q < 0.0f ? 0.0f : (q > 255.0f ? 255.0f : q);
	return (uint8_t)q;
}

void ku8_store_scalar(const ku8_epi *ep, int32_t acc, int64_t n, void *C, int64_t off)
{
	float y = fmaf((float)acc, ep->scale[n], ep->bias ? ep->bias[n] : 0.0f);
	if (ep->relu && !(y > 0.0f))
		y = 0.0f; /* max(y, 0) as vmaxps(y, 0) does it (a NaN, from a NaN bias only, becomes 0) */
	if (ep->out_u8)
		((uint8_t *)C)[off] = ku8_requant(ep, y);
	else
		((float *)C)[off] = y;
}

void ku8_gemm_reference(int64_t M, int64_t N, int64_t K, const uint8_t *A, int64_t lda, const int8_t *W,
			int64_t ldw, float a_scale, const float *w_scale, const ku8_epi *ep, void *C, int64_t ldc)
{
	for (int64_t n = 0; n < N; n++) {
		const float s = a_scale * w_scale[n];
		for (int64_t m = 0; m < M; m++) {
			int64_t acc = 0;
			for (int64_t k = 0; k < K; k++)
				acc += ((int64_t)A[m * lda + k] - ep->a_zp) * W[n * ldw + k];
			float y = fmaf((float)(int32_t)acc, s, ep->bias ? ep->bias[n] : 0.0f);
			if (ep->relu && !(y > 0.0f))
				y = 0.0f;
			if (ep->out_u8)
				((uint8_t *)C)[m * ldc + n] = ku8_requant(ep, y);
			else
				((float *)C)[m * ldc + n] = y;
		}
	}
}

void ku8_tile_scalar(const ku8_packed *p, int64_t b0, int nb, int m, const uint8_t *A, int64_t lda,
		     const ku8_epi *ep, void *C, int64_t ldc)
{
	for (int r = 0; r < m; r++) {
		const uint8_t *a = A + r * lda;
		for (int64_t b = b0; b < b0 + nb; b++) {
			const int8_t *wb = p->w + b * p->k4 * KU8_NB * 4;
			int32_t acc[KU8_NB] = {0};
			for (int64_t k = 0; k < p->K; k++) {
				const int8_t *wk = wb + (k / 4) * KU8_NB * 4 + k % 4;
				for (int j = 0; j < KU8_NB; j++)
					acc[j] += (int32_t)a[k] * wk[j * 4];
			}
			for (int j = 0; j < KU8_NB && b * KU8_NB + j < p->N; j++) {
				const int64_t n = b * KU8_NB + j;
				ku8_store_scalar(ep, acc[j] - ep->a_zp * ep->colsum[n], n, C, r * ldc + n);
			}
		}
	}
}

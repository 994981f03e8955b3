/* test_gemm_u8s8.c - PT2E's int8 product (kernels/gemm_q/gemm_u8s8.h) against its reference,
 * on the tile kernel CTest forces with AIR_ISA (avx512 runs the VNNI tile where CPUID has it):
 * K not a multiple of 4 (the packed tail), N not a multiple of the 16-channel block or the
 * 64-channel panel, M not a multiple of the tile's rows, strided A and C, zero points 0, 128
 * and 255, weights at -128 and 127 with activations at 255 (the largest sums), f32 and u8
 * outputs with and without bias and relu, outputs that saturate at 0 and 255, no pool and a
 * 2-thread pool. Every path computes the same integers and one fma, so results must be equal
 * bit for bit; nothing outside the M x N output may be written. */
#define _POSIX_C_SOURCE 200112L
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels/gemm_q/gemm_u8s8.h"

static uint64_t rng_state = 0x243f6a8885a308d3ull;

static uint32_t urand(void)
{
	rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(rng_state >> 33);
}

/* extremes: every 'ext'-th value at the bound */
static void fill_a(uint8_t *a, int64_t n, int ext)
{
	for (int64_t i = 0; i < n; i++)
		a[i] = ext && i % ext == 0 ? 255 : (uint8_t)(urand() & 255);
}

static void fill_w(int8_t *w, int64_t n, int ext)
{
	for (int64_t i = 0; i < n; i++)
		w[i] = ext && i % ext == 0 ? (i % (2 * ext) ? 127 : -128) : (int8_t)(urand() & 255);
}

static void one(rt_pool *pool, int64_t M, int64_t N, int64_t K, int32_t zp, int out_u8, int bias_on, int relu,
		int64_t pad_a, int64_t pad_c, int ext, float out_scale)
{
	const int64_t lda = K + pad_a, ldc = N + pad_c;
	uint8_t *A = malloc((size_t)(M * lda + 1));
	int8_t *W = malloc((size_t)(N * K + 1));
	float *ws = malloc((size_t)N * sizeof(float) + 4), *bias = malloc((size_t)N * sizeof(float) + 4);
	fill_a(A, M * lda, ext);
	fill_w(W, N * K, ext);
	for (int64_t n = 0; n < N; n++) {
		ws[n] = (float)(urand() % 1000 + 1) * 1e-5f;
		bias[n] = ((float)(urand() % 2001) - 1000.0f) * 1e-3f;
	}
	const float a_scale = 0.0173f;
	ku8_packed *p = NULL;
	CHECK_OK(ku8_pack(N, K, W, K, a_scale, ws, &p));
	if (!p)
		return;
	const size_t es = out_u8 ? 1 : sizeof(float);
	const size_t cbytes = (size_t)(M * ldc) * es;
	unsigned char *C = malloc(cbytes + 1), *R = malloc(cbytes + 1);
	memset(C, 0xA5, cbytes);
	memset(R, 0xA5, cbytes);
	ku8_epi ep = {p->colsum, p->scale, bias_on ? bias : NULL, zp, relu, out_u8, 1.0f / out_scale, 3.0f};
	ku8_gemm(p, M, A, lda, &ep, C, ldc, pool);
	ku8_gemm_reference(M, N, K, A, lda, W, K, a_scale, ws, &ep, R, ldc);
	int bad = 0, lo = 0, hi = 0;
	for (int64_t i = 0; i < M * ldc; i++) {
		if (memcmp(C + (size_t)i * es, R + (size_t)i * es, es) != 0)
			bad++;
		if (out_u8 && i % ldc < N) {
			lo += C[i] == 0;
			hi += C[i] == 255;
		}
	}
	CHECK(bad == 0);
	if (bad)
		fprintf(stderr, "  %s M=%lld N=%lld K=%lld zp=%d u8=%d bias=%d relu=%d: %d differ\n",
			ku8_kernel_name(), (long long)M, (long long)N, (long long)K, zp, out_u8, bias_on, relu, bad);
	if (out_u8 && out_scale < 0.05f && K >= 64 && N >= 16) /* a small output scale saturates */
		CHECK(hi > 0 && (relu || lo > 0));
	ku8_free(p);
	free(A), free(W), free(ws), free(bias), free(C), free(R);
}

/* The reference itself against a direct float computation on small numbers. */
static void reference_by_hand(void)
{
	const uint8_t A[3] = {130, 128, 255};
	const int8_t W[6] = {1, -2, 3, -128, 127, 0};
	const float ws[2] = {0.5f, 0.25f};
	float C[2];
	ku8_epi ep = {NULL, NULL, NULL, 128, 0, 0, 1.0f, 0.0f};
	ku8_gemm_reference(1, 2, 3, A, 3, W, 3, 2.0f, ws, &ep, C, 2);
	/* (2*1 + 0*-2 + 127*3) * 2 * 0.5 = 383; (2*-128 + 0 + 127*0) * 2 * 0.25 = -128 */
	CHECK(C[0] == 383.0f && C[1] == -128.0f);
	uint8_t Q[2];
	ku8_epi eq = {NULL, NULL, NULL, 128, 1, 1, 1.0f / 2.0f, 10.0f};
	ku8_gemm_reference(1, 2, 3, A, 3, W, 3, 2.0f, ws, &eq, Q, 2);
	CHECK(Q[0] == 202 && Q[1] == 10); /* 383 / 2 = 191.5 -> 192 (half to even) + 10; relu -> 0 + 10 */
}

int main(void)
{
	rt_pool *pool2 = NULL;
	CHECK(rt_pool_create(2, &pool2) == AIR_OK);
	fprintf(stderr, "kernel: %s\n", ku8_kernel_name());
	reference_by_hand();
	const int64_t sizes[][3] = {{1, 1, 1},   {1, 17, 3},   {3, 16, 4},    {5, 33, 7},    {4, 64, 64},
				    {7, 65, 129}, {13, 100, 37}, {1, 130, 768}, {33, 97, 301}, {64, 200, 1000}};
	const int32_t zps[] = {0, 128, 255};
	for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
		const int64_t M = sizes[s][0], N = sizes[s][1], K = sizes[s][2];
		for (int z = 0; z < 3; z++)
			for (int mode = 0; mode < 8; mode++) {
				const int out_u8 = mode & 1, bias_on = (mode >> 1) & 1, relu = (mode >> 2) & 1;
				one(NULL, M, N, K, zps[z], out_u8, bias_on, relu, s % 3, (s + 1) % 2, (int)(s % 4) * 3,
				    out_u8 && z == 1 ? 0.01f : 5.0f);
				one(pool2, M, N, K, zps[z], out_u8, bias_on, relu, 0, 0, 5, 0.02f);
			}
	}
	/* the largest sums: every activation 255 against a weight of -128 or 127 (K = 4000) */
	one(pool2, 6, 40, 4000, 0, 0, 1, 0, 0, 0, 1, 1.0f);
	rt_pool_destroy(pool2);
	return check_report("test_gemm_u8s8");
}

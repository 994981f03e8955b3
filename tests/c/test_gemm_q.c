/* test_gemm_q.c - the quantized-weight product (kernels/gemm_q/gemm_q.h) against its reference,
 * int8 and int4, on the decode path (M <= KQ_THIN_M: the ISA kernel CTest forces with AIR_ISA)
 * and the prefill path (dequantized panels on the f32 GEMM): K not a multiple of the group
 * (and not of the vector width), N odd and not a multiple of the tile's 2 rows or a task's run,
 * strided A and C, with and without bias, no pool and a 2-thread pool. Also checks that the
 * quantizer's round trip is within half a step of each weight (unless clamped), that nothing outside the M x N
 * output is written, and the workspace asked for is enough (buffers exactly that size).
 *
 * Tolerance: the paths sum the same dequantized products in f32 in other orders, so an element
 * may be off by about 1e-5 of sum_k |a_k w_k|. */
#define _POSIX_C_SOURCE 200112L
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels/common/half.h"
#include "kernels/gemm_q/gemm_q.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static float frand(void)
{
	rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
	return (float)((uint32_t)(rng_state >> 33) & 0xffffff) / (float)0x800000 - 1.0f;
}

static void *alloc_bytes(size_t bytes)
{
	void *p = NULL;
	if (posix_memalign(&p, 64, bytes ? bytes : 1) != 0)
		abort();
	return p;
}

static const float SENTINEL = 12345.0f;

/* One product of every path, checked against the reference. */
static void one(rt_pool *pool, int bits, int64_t M, int64_t N, int64_t K, int64_t group, int bias_on,
		int64_t pad_a, int64_t pad_c)
{
	const int64_t ng = (K + group - 1) / group, kpad = ng * group, lda = K + pad_a, ldc = N + pad_c;
	float *W = alloc_bytes((size_t)(N * K) * sizeof(float));
	for (int64_t i = 0; i < N * K; i++)
		W[i] = frand() * (i % 97 == 0 ? 4.0f : 1.0f); /* outliers: groups of other scales */
	void *q = alloc_bytes((size_t)(N * (bits == 8 ? kpad : kpad / 2)));
	uint16_t *sc = alloc_bytes((size_t)(N * ng) * sizeof(uint16_t));
	kq_quantize(bits, N, K, group, W, K, q, sc);
	const kq_weight w = {bits, N, K, group, ng, q, sc};

	/* round trip: within half a step (plus the f16 scale's rounding) of each weight */
	float *row = alloc_bytes((size_t)kpad * sizeof(float));
	int bad_rt = 0, bad_pad = 0;
	for (int64_t n = 0; n < N; n++) {
		kq_dequant_row(&w, n, row);
		for (int64_t k = 0; k < K; k++) {
			const float s = k_f16_to_f32(sc[n * ng + k / group]);
			/* a value past the last level (the f16 scale rounded, int4's +8) is clamped: more */
			const float t = s != 0.0f ? W[n * K + k] / s : 0.0f;
			const float over = bits == 8 ? fmaxf(0.0f, fabsf(t) - 127.0f) : fmaxf(0.0f, t - 7.0f) + fmaxf(0.0f, -8.0f - t);
			if (fabsf(row[k] - W[n * K + k]) > fabsf(s) * (0.5f * 1.001f + over))
				bad_rt++;
		}
		for (int64_t k = K; k < kpad; k++)
			bad_pad += row[k] != 0.0f;
	}
	CHECK(bad_rt == 0);
	CHECK(bad_pad == 0);

	float *A = alloc_bytes((size_t)(M * lda) * sizeof(float));
	for (int64_t i = 0; i < M * lda; i++)
		A[i] = frand();
	float *bias = NULL;
	if (bias_on) {
		bias = alloc_bytes((size_t)N * sizeof(float));
		for (int64_t n = 0; n < N; n++)
			bias[n] = frand();
	}
	float *ref = alloc_bytes((size_t)(M * ldc) * sizeof(float));
	float *got = alloc_bytes((size_t)(M * ldc) * sizeof(float));
	for (int64_t i = 0; i < M * ldc; i++)
		ref[i] = got[i] = SENTINEL;
	kgemm_q_reference(&w, M, A, lda, bias, ref, ldc);
	const size_t ws_bytes = kgemm_q_workspace_bytes(&w, M, rt_pool_size(pool));
	void *ws = ws_bytes ? malloc(ws_bytes) : NULL; /* malloc: any alignment is accepted */
	kgemm_q(&w, M, A, lda, bias, got, ldc, pool, ws);
	int bad = 0, outside = 0;
	for (int64_t m = 0; m < M; m++) {
		for (int64_t n = 0; n < ldc; n++) {
			if (n >= N) {
				outside += got[m * ldc + n] != SENTINEL;
				continue;
			}
			kq_dequant_row(&w, n, row);
			double mag = bias ? fabs(bias[n]) : 0.0;
			for (int64_t k = 0; k < K; k++)
				mag += fabs((double)A[m * lda + k] * row[k]);
			const double err = fabs((double)got[m * ldc + n] - ref[m * ldc + n]);
			if (!(err <= 1e-5 * mag + 1e-6)) {
				if (bad < 3)
					fprintf(stderr, "bits %d M %lld N %lld K %lld G %lld: [%lld, %lld] %g vs %g\n", bits,
						(long long)M, (long long)N, (long long)K, (long long)group, (long long)m,
						(long long)n, got[m * ldc + n], ref[m * ldc + n]);
				bad++;
			}
		}
	}
	CHECK(bad == 0);
	CHECK(outside == 0);
	free(ws);
	free(W), free(q), free(sc), free(row), free(A), free(bias), free(ref), free(got);
}

static void test_grid(rt_pool *pool)
{
	static const int64_t Ms[] = {1, 2, 3, 4, 5, 8, 9, 37, 130};
	static const int64_t Ns[] = {1, 3, 7, 66, 129};
	static const int64_t Ks[] = {1, 31, 32, 33, 100, 257};
	static const int64_t groups[] = {32, 64, 128};
	for (int bits = 4; bits <= 8; bits += 4)
		for (size_t a = 0; a < sizeof Ms / sizeof *Ms; a++)
			for (size_t b = 0; b < sizeof Ns / sizeof *Ns; b++)
				for (size_t c = 0; c < sizeof Ks / sizeof *Ks; c++)
					for (size_t g = 0; g < sizeof groups / sizeof *groups; g++)
						one(pool, bits, Ms[a], Ns[b], Ks[c], groups[g], (int)((a + b + c) & 1),
						    (int64_t)(c & 1) * 3, (int64_t)(b & 1) * 5);
}

/* A weight of zeros (scale 0) and a whole LLaMA-sized row. */
static void test_special(rt_pool *pool)
{
	const int64_t N = 5, K = 64;
	float W[5 * 64] = {0};
	int8_t q[5 * 64];
	uint16_t sc[5 * 2];
	kq_quantize(8, N, K, 32, W, K, q, sc);
	const kq_weight w = {8, N, K, 32, 2, q, sc};
	float A[64], C[5];
	for (int k = 0; k < 64; k++)
		A[k] = frand();
	char ws[4096];
	CHECK(kgemm_q_workspace_bytes(&w, 1, 2) <= sizeof ws);
	kgemm_q(&w, 1, A, K, NULL, C, N, pool, ws);
	for (int n = 0; n < 5; n++)
		CHECK(C[n] == 0.0f);
	one(pool, 4, 1, 67, 2048, 32, 0, 0, 0);
	one(pool, 8, 3, 67, 2048, 128, 1, 0, 0);
	one(pool, 8, 1, 9, 2080, 2080, 0, 0, 0); /* per-channel: one group of the whole row */
}

int main(void)
{
	rt_pool *pool2 = NULL;
	CHECK(rt_pool_create(2, &pool2) == AIR_OK);
	printf("decode kernel: %s\n", kgemm_q_kernel_name());
	test_grid(NULL);
	test_grid(pool2);
	test_special(pool2);
	rt_pool_destroy(pool2);
	return check_report("test_gemm_q");
}

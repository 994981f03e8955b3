/* bench_gemm_q.c - the quantized-weight product (kernels/gemm_q/gemm_q.h) on LLM-sized linears
 * (N x K of 2048x2048, 5632x2048, 2048x5632, the LM head 32000x2048): decode (M = 1 and 4) as
 * GB/s of weight bytes read (q and scales), the weights cold (copies rotated, together far
 * larger than any cache), beside the 16-bit-weight kernel's bf16 decode on the same shapes;
 * prefill (M = 128) as GFLOP/s. Not a CTest test; build by hand against the CMake-built library:
 *   cc -O2 -Iinclude -Isrc tests/c/bench_gemm_q.c build/libair.a -lpthread -lm
 *   ./a.out [threads [seconds-per-case]]
 * Times are the best of the calls made in seconds-per-case. */
#define _POSIX_C_SOURCE 200112L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/common/half.h"
#include "kernels/gemm/lowp_w.h"
#include "kernels/gemm_q/gemm_q.h"

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void *xalloc(size_t bytes)
{
	void *p = NULL;
	if (posix_memalign(&p, 64, bytes ? bytes : 64) != 0)
		abort();
	memset(p, 0, bytes);
	return p;
}

enum { COPIES_BYTES = 512 << 20 };

static void bench_shape(rt_pool *pool, int64_t N, int64_t K, double secs)
{
	float *W = xalloc((size_t)(N * K) * sizeof(float));
	for (int64_t i = 0; i < N * K; i++)
		W[i] = (float)((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
	const int64_t M_MAX = 128;
	float *A = xalloc((size_t)(M_MAX * K) * sizeof(float)), *C = xalloc((size_t)(M_MAX * N) * sizeof(float));
	for (int64_t i = 0; i < M_MAX * K; i++)
		A[i] = (float)(i % 7) - 3.0f;
	printf("N %5lld K %5lld:", (long long)N, (long long)K);
	for (int bits = 8; bits >= 4; bits -= 4) {
		const int64_t group = bits == 8 ? K : 32, ng = (K + group - 1) / group, kpad = ng * group;
		const size_t qb = (size_t)(N * (bits == 8 ? kpad : kpad / 2)), sb = (size_t)(N * ng) * 2;
		int copies = (int)(COPIES_BYTES / (qb + sb)) + 1;
		void **q = malloc(sizeof(void *) * (size_t)copies);
		uint16_t **s = malloc(sizeof(uint16_t *) * (size_t)copies);
		for (int c = 0; c < copies; c++) {
			q[c] = xalloc(qb), s[c] = xalloc(sb);
			if (c == 0)
				kq_quantize(bits, N, K, group, W, K, q[0], s[0]);
			else
				memcpy(q[c], q[0], qb), memcpy(s[c], s[0], sb);
		}
		void *ws = xalloc(kgemm_q_workspace_bytes(&(kq_weight){bits, N, K, group, ng, q[0], s[0]}, M_MAX, 8));
		for (int mi = 0; mi < 3; mi++) {
			const int64_t M = mi == 0 ? 1 : mi == 1 ? 4 : M_MAX;
			double best = 1e30, t_end = now() + secs;
			int calls = 0;
			for (int c = 0; now() < t_end || calls < 3; c = (c + 1) % copies, calls++) {
				const kq_weight w = {bits, N, K, group, ng, q[c], s[c]};
				double t = now();
				kgemm_q(&w, M, A, K, NULL, C, N, pool, ws);
				t = now() - t;
				best = t < best ? t : best;
			}
			if (M == M_MAX)
				printf("  int%d M128 %6.1f GFLOP/s", bits, 2.0 * (double)(M * N * K) / best * 1e-9);
			else
				printf("  int%d M%lld %5.1f GB/s", bits, (long long)M, (double)(qb + sb) / best * 1e-9);
		}
		for (int c = 0; c < copies; c++)
			free(q[c]), free(s[c]);
		free(q), free(s), free(ws);
	}
	{ /* bf16 decode, the same shape, cold */
		const size_t wb = (size_t)(N * K) * 2;
		int copies = (int)(COPIES_BYTES / wb) + 1;
		uint16_t **w = malloc(sizeof(uint16_t *) * (size_t)copies);
		for (int c = 0; c < copies; c++) {
			w[c] = xalloc(wb);
			for (int64_t i = 0; i < N * K; i++)
				w[c][i] = k_f32_to_bf16(W[i]);
		}
		void *ws = xalloc(kgemm_lowp_w_workspace_bytes(1, K, 8));
		double best = 1e30, t_end = now() + secs;
		int calls = 0;
		for (int c = 0; now() < t_end || calls < 3; c = (c + 1) % copies, calls++) {
			double t = now();
			kgemm_lowp_w(KLOWP_BF16, 1, N, K, A, K, w[c], K, C, N, NULL, pool, ws);
			t = now() - t;
			best = t < best ? t : best;
		}
		printf("  bf16 M1 %5.1f GB/s", (double)wb / best * 1e-9);
		for (int c = 0; c < copies; c++)
			free(w[c]);
		free(w), free(ws);
	}
	printf("\n");
	free(W), free(A), free(C);
}

int main(int argc, char **argv)
{
	const int threads = argc > 1 ? atoi(argv[1]) : 2;
	const double secs = argc > 2 ? atof(argv[2]) : 0.5;
	rt_pool *pool = NULL;
	if (rt_pool_create(threads, &pool) != AIR_OK)
		return 1;
	printf("decode kernel %s, %d threads\n", kgemm_q_kernel_name(), threads);
	static const int64_t shapes[][2] = {{2048, 2048}, {5632, 2048}, {2048, 5632}, {32000, 2048}};
	for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
		bench_shape(pool, shapes[i][0], shapes[i][1], secs);
	rt_pool_destroy(pool);
	return 0;
}

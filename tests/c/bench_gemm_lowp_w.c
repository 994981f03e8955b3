/* bench_gemm_lowp_w.c - GFLOP/s of the 16-bit-weight GEMM (kernels/gemm/lowp_w.h)
 * on LLM-sized linears (N x K of 2048x2048, 5632x2048, 2048x5632, 768x768,
 * 2048x768, 768x2048 and the LM heads 32000x768, 32000x2048) at M = 1 and 8
 * (decode) and 16 to 2048 (prefill), on 1 and 2 threads, beside the f32 GEMM
 * with the same weight packed (kgemm_f32_packed). Decode reads every weight once a
 * token, so for M <= 8 it also gives GB/s of weight read, against the machine's
 * read bandwidth (a probe below), with the weight hot (one copy, which fits in a
 * large L3) and cold (copies rotated, together far larger than any cache). Not a
 * CTest test; build by hand against the CMake-built library and run it:
 *   cc -O2 -Iinclude -Isrc tests/c/bench_gemm_lowp_w.c build/libair.a -lpthread -lm
 *   ./a.out [seconds-per-case [bf16|f16 [M [lowp]]]]
 * M 0 runs every M; "lowp" leaves out the f32 columns (for tuning).
 * Times are the best of the calls made in seconds-per-case (after a first call;
 * at least 3 calls). */
#define _POSIX_C_SOURCE 200112L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/common/cpu.h"
#include "kernels/common/half.h"
#include "kernels/gemm/gemm.h"
#include "kernels/gemm/lowp_w.h"

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
	return p;
}

/* Bytes the cold runs rotate through: well past a 32 MiB L3. */
#define COLD_BYTES ((size_t)256 << 20)

/* ---- read bandwidth probe ------------------------------------------------ */

#define BW_BYTES ((size_t)1 << 30)

typedef struct bw_part {
	const float *p;
	size_t n;
	float sum;
} bw_part;

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
__attribute__((target("avx2"))) static void *bw_sum(void *arg)
{
	bw_part *b = arg;
	__m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
	for (size_t i = 0; i + 32 <= b->n; i += 32) {
		s0 = _mm256_add_ps(s0, _mm256_load_ps(b->p + i));
		s1 = _mm256_add_ps(s1, _mm256_load_ps(b->p + i + 8));
		s2 = _mm256_add_ps(s2, _mm256_load_ps(b->p + i + 16));
		s3 = _mm256_add_ps(s3, _mm256_load_ps(b->p + i + 24));
	}
	float out[8];
	_mm256_storeu_ps(out, _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
	b->sum = out[0] + out[1] + out[2] + out[3] + out[4] + out[5] + out[6] + out[7];
	return NULL;
}
#else
static void *bw_sum(void *arg)
{
	bw_part *b = arg;
	float s = 0;
	for (size_t i = 0; i < b->n; i++)
		s += b->p[i];
	b->sum = s;
	return NULL;
}
#endif

/* GB/s (1e9 bytes) of nthreads threads each summing its share of 1 GiB; best of 3. */
static double read_bandwidth(int nthreads)
{
	float *buf = xalloc(BW_BYTES);
	const size_t n = BW_BYTES / sizeof(float);
	for (size_t i = 0; i < n; i++)
		buf[i] = (float)(i & 7);
	double best = 0;
	for (int rep = 0; rep < 3; rep++) {
		pthread_t th[8];
		bw_part parts[8];
		const size_t share = n / (size_t)nthreads / 32 * 32;
		double t = now();
		for (int i = 0; i < nthreads; i++) {
			parts[i] = (bw_part){buf + (size_t)i * share, share, 0};
			if (i)
				pthread_create(&th[i], NULL, bw_sum, &parts[i]);
		}
		bw_sum(&parts[0]);
		for (int i = 1; i < nthreads; i++)
			pthread_join(th[i], NULL);
		const double gbs = (double)share * nthreads * sizeof(float) / (now() - t) / 1e9;
		best = gbs > best ? gbs : best;
	}
	free(buf);
	return best;
}

/* ---- the cases ----------------------------------------------------------- */

static float *rand_floats(size_t n)
{
	float *p = xalloc(n * sizeof(float));
	for (size_t i = 0; i < n; i++)
		p[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
	return p;
}

typedef struct result {
	double gflops, gbs; /* gbs: of weight bytes read */
} result;

/* Best time of kgemm_lowp_w (lowp) or kgemm_f32_packed (!lowp) over copies
 * of the weight used in turn. */
static result bench(int lowp, klowp_type wt, int64_t M, int64_t N, int64_t K, int copies, rt_pool *pool,
		    double seconds)
{
	float *A = rand_floats((size_t)(M * K)), *C = rand_floats((size_t)(M * N));
	float *bias = rand_floats((size_t)N);
	float *B = rand_floats((size_t)(N * K)); /* [N x K], the Linear layout */
	uint16_t *W[64];
	kgemm_packed_b *P[64];
	for (int c = 0; c < copies; c++) {
		if (lowp) {
			W[c] = xalloc((size_t)(N * K) * 2);
			for (int64_t i = 0; i < N * K; i++)
				W[c][i] = wt == KLOWP_BF16 ? k_f32_to_bf16(B[i]) : k_f32_to_f16(B[i]);
		} else if (kgemm_pack_b(K, N, B, 1, K, &P[c]) != AIR_OK) {
			abort();
		}
	}
	const int nt = rt_pool_size(pool);
	const size_t wsb = lowp ? kgemm_lowp_w_workspace_bytes(M, K, nt) : kgemm_packed_workspace_bytes(M, N, K, nt);
	void *ws = xalloc(wsb);
	k_epilogue ep = k_epilogue_none();
	ep.bias_n = bias;
	double best = 1e30;
	int calls = 0;
	for (double t0 = now(); now() - t0 < seconds || calls < 3; calls++) {
		const int c = calls % copies;
		const double t = now();
		if (lowp)
			kgemm_lowp_w(wt, M, N, K, A, K, W[c], K, C, N, &ep, pool, ws);
		else
			kgemm_f32_packed(M, N, K, A, K, 1, P[c], C, N, &ep, pool, ws);
		const double dt = now() - t;
		if (calls > 0 && dt < best)
			best = dt;
	}
	for (int c = 0; c < copies; c++) {
		if (lowp)
			free(W[c]);
		else
			kgemm_packed_b_free(P[c]);
	}
	free(ws);
	free(A);
	free(B);
	free(C);
	free(bias);
	const double wbytes = (double)N * K * (lowp ? 2 : 4);
	return (result){2.0 * M * N * K / best / 1e9, wbytes / best / 1e9};
}

static int copies_for(size_t weight_bytes, int cold)
{
	if (!cold)
		return 1;
	int c = (int)(COLD_BYTES / weight_bytes) + 1;
	return c < 2 ? 2 : c > 64 ? 64 : c;
}

int main(int argc, char **argv)
{
	const double seconds = argc > 1 ? atof(argv[1]) : 0.3;
	const klowp_type wt = argc > 2 && strcmp(argv[2], "f16") == 0 ? KLOWP_F16 : KLOWP_BF16;
	const int64_t only_m = argc > 3 ? atoll(argv[3]) : 0;
	const int only_lowp = argc > 4 && strcmp(argv[4], "lowp") == 0;
	setvbuf(stdout, NULL, _IOLBF, 0);
	rt_pool *pool2 = NULL;
	if (rt_pool_create(2, &pool2) != AIR_OK)
		return 1;
	const double bw1 = read_bandwidth(1), bw2 = read_bandwidth(2);
	char brand[64];
	kcpu_brand(brand, sizeof brand);
	printf("%s; lowp kernel %s (%s), f32 kernel %s; read bandwidth (probe) %.1f GB/s on 1 thread, %.1f on 2\n",
	       brand, kgemm_lowp_w_kernel_name(wt), wt == KLOWP_BF16 ? "bf16" : "f16", kgemm_kernel_name(), bw1, bw2);
	printf("GFLOP/s; for M <= 8 also GB/s of weight read (%% of the probe's read bandwidth). hot: one weight, "
	       "called again and again; cold: %d MiB of copies in turn\n",
	       (int)(COLD_BYTES >> 20));
	printf("%-5s %4s %5s %5s | %-28s %-28s | %-28s %-28s\n", "", "M", "N", "K", "lowp 1T", "lowp 2T", "f32 packed 1T",
	       "f32 packed 2T");
	static const int64_t shapes[][2] = {{2048, 2048}, {5632, 2048}, {2048, 5632}, {768, 768},
					    {2048, 768},  {768, 2048},	{32000, 768}, {32000, 2048}};
	static const int64_t Ms[] = {1, 8, 16, 32, 64, 128, 512, 2048};
	for (size_t im = 0; im < sizeof Ms / sizeof Ms[0]; im++) {
		const int64_t M = Ms[im];
		if (only_m && M != only_m)
			continue;
		for (int cold = 0; cold < (M <= 8 ? 2 : 1); cold++) {
			for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
				const int64_t N = shapes[s][0], K = shapes[s][1];
				char cell[4][64];
				for (int v = 0; v < 4; v++) {
					const int lowp = v < 2;
					if (!lowp && only_lowp) {
						snprintf(cell[v], sizeof cell[v], "-");
						continue;
					}
					rt_pool *pool = v % 2 ? pool2 : NULL;
					const int copies = copies_for((size_t)(N * K) * (lowp ? 2 : 4), cold);
					const result r = bench(lowp, wt, M, N, K, copies, pool, seconds);
					const double bw = v % 2 ? bw2 : bw1;
					if (M <= 8)
						snprintf(cell[v], sizeof cell[v], "%6.1f %6.1f GB/s %4.0f%%", r.gflops, r.gbs,
							 100 * r.gbs / bw);
					else
						snprintf(cell[v], sizeof cell[v], "%6.1f", r.gflops);
				}
				printf("%-5s %4lld %5lld %5lld | %-28s %-28s | %-28s %-28s\n", M <= 8 ? (cold ? "cold" : "hot") : "",
				       (long long)M, (long long)N, (long long)K, cell[0], cell[1], cell[2], cell[3]);
			}
		}
	}
	rt_pool_destroy(pool2);
	return 0;
}

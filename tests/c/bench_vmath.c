/* bench_vmath.c - throughput of vmath's array functions (AVX-512, AVX2 and
 * portable C) and the row kernels (AVX2 against portable C), on one
 * thread: in cache (4K floats) and from memory (4M floats). Not a test;
 * run by hand:
 *   cc -O2 -Iinclude -Isrc tests/c/bench_vmath.c build/libair.a -lpthread -lm -o bench_vmath
 *   ./bench_vmath [seconds per measurement, default 0.2]
 * On Sapphire Rapids, in cache, Gelem/s AVX-512 / AVX2: exp 4.67 / 3.13,
 * tanh 2.22 / 1.55, sigmoid 2.99 / 2.19, gelu 1.55 / 1.07, gelu_tanh 1.67 /
 * 1.07, silu 2.96 / 2.14 (the others run the AVX2 kernel on both). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/common/cpu.h"
#include "kernels/norm/rowops_impl.h"
#include "kernels/vmath/vmath_impl.h"

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double min_time = 0.2;

/* best of 3 runs of as many calls as fill min_time: seconds per call */
static double time_unary(kv_unary_f32 fn, const float *x, float *y, int64_t n)
{
	double best = INFINITY;
	for (int rep = 0; rep < 3; rep++) {
		long calls = 0;
		double t0 = now(), t;
		do {
			fn(x, y, n);
			calls++;
			t = now() - t0;
		} while (t < min_time / 3);
		if (t / (double)calls < best)
			best = t / (double)calls;
	}
	return best;
}

typedef void (*row_fn)(const kr_rows_impl *im, const float *x, float *y, int64_t rows, int64_t n,
		       const float *g, const float *b);

static void run_softmax(const kr_rows_impl *im, const float *x, float *y, int64_t rows, int64_t n,
			const float *g, const float *b)
{
	(void)g, (void)b;
	im->softmax(x, y, rows, n);
}
static void run_log_softmax(const kr_rows_impl *im, const float *x, float *y, int64_t rows, int64_t n,
			    const float *g, const float *b)
{
	(void)g, (void)b;
	im->log_softmax(x, y, rows, n);
}
static void run_layernorm(const kr_rows_impl *im, const float *x, float *y, int64_t rows, int64_t n,
			  const float *g, const float *b)
{
	im->layernorm(x, g, b, y, rows, n, 1e-5, NULL, NULL);
}
static void run_rmsnorm(const kr_rows_impl *im, const float *x, float *y, int64_t rows, int64_t n,
			const float *g, const float *b)
{
	(void)b;
	im->rmsnorm(x, g, y, rows, n, 1e-6);
}

static double time_rows(row_fn fn, const kr_rows_impl *im, const float *x, float *y, int64_t rows, int64_t n,
			const float *g, const float *b)
{
	double best = INFINITY;
	for (int rep = 0; rep < 3; rep++) {
		long calls = 0;
		double t0 = now(), t;
		do {
			fn(im, x, y, rows, n, g, b);
			calls++;
			t = now() - t0;
		} while (t < min_time / 3);
		if (t / (double)calls < best)
			best = t / (double)calls;
	}
	return best;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		min_time = atof(argv[1]) > 0 ? atof(argv[1]) : min_time;
	int avx2 = (kcpu_features() & KCPU_AVX2) != 0;
	int avx512 = (kcpu_features() & KCPU_AVX512) == KCPU_AVX512;
	printf("vmath throughput, one thread, Gelem/s (GB/s = 8 x Gelem/s: read + write)\n");
	printf("AVX2 %s, AVX-512 %s\n\n", avx2 ? "available" : "NOT available", avx512 ? "available" : "NOT available");
	const int64_t big = 4 << 20, small = 4096;
	float *x = malloc(sizeof(float) * big), *y = malloc(sizeof(float) * big);
	if (!x || !y)
		return 1;
	static const char *const isas[3] = {"avx512", "avx2", "scalar"};
	const int have[3] = {avx512, avx2, 1};
	printf("%-10s %10s %10s %10s   %10s %10s %10s\n", "function", "avx512 4K", "avx2 4K", "scalar 4K", "avx512 4M",
	       "avx2 4M", "scalar 4M");
	for (int f = 0; f < KV_FUNC_COUNT; f++) {
		/* inputs where each function does its real work */
		for (int64_t i = 0; i < big; i++) {
			float u = (float)((i * 2654435761u) % 100000) * 1e-5f; /* [0, 1) */
			x[i] = (f == KV_log || f == KV_rsqrt) ? 1e-3f + 100.0f * u : 10.0f * u - 5.0f;
		}
		double r[3][2] = {{0}};
		for (int isa = 0; isa < 3; isa++) {
			kv_unary_f32 fn = kv_unary_isa((kv_func)f, isas[isa]);
			if (!fn || !have[isa])
				continue;
			r[isa][0] = (double)small / time_unary(fn, x, y, small) * 1e-9;
			r[isa][1] = (double)big / time_unary(fn, x, y, big) * 1e-9;
		}
		printf("%-10s %10.3f %10.3f %10.3f   %10.3f %10.3f %10.3f\n", kv_func_name((kv_func)f), r[0][0],
		       r[1][0], r[2][0], r[0][1], r[1][1], r[2][1]);
	}

	printf("\nrow kernels, one thread, Gelem/s\n");
	printf("%-12s %12s %10s %10s %7s\n", "op", "rows x n", "avx2", "scalar", "x");
	static const struct {
		const char *name;
		row_fn fn;
	} ops[] = {{"softmax", run_softmax}, {"log_softmax", run_log_softmax}, {"layernorm", run_layernorm},
		   {"rmsnorm", run_rmsnorm}};
	static const int64_t shapes[][2] = {{64, 768}, {16, 4099}, {4096, 1024}};
	float *g = malloc(sizeof(float) * 8192), *b = malloc(sizeof(float) * 8192);
	if (!g || !b)
		return 1;
	for (int64_t i = 0; i < big; i++)
		x[i] = (float)((i * 2654435761u) % 100000) * 1e-4f - 5.0f;
	for (int i = 0; i < 8192; i++) {
		g[i] = 1.0f + 0.001f * (float)(i % 7);
		b[i] = 0.01f * (float)(i % 5);
	}
	for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
		for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
			int64_t rows = shapes[s][0], n = shapes[s][1];
			double r[2] = {0};
			for (int isa = 0; isa < 2; isa++) {
				const kr_rows_impl *im = kr_rows_isa(isa ? "scalar" : "avx2");
				if (!im || (isa == 0 && !avx2))
					continue;
				r[isa] = (double)(rows * n) / time_rows(ops[o].fn, im, x, y, rows, n, g, b) * 1e-9;
			}
			char shape[32];
			snprintf(shape, sizeof shape, "%lldx%lld", (long long)rows, (long long)n);
			printf("%-12s %12s %10.3f %10.3f %7.1f\n", ops[o].name, shape, r[0], r[1], r[0] / r[1]);
		}
	}
	free(g);
	free(b);
	free(x);
	free(y);
	return 0;
}

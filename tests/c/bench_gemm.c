/* bench_gemm.c - GFLOP/s of the f32 GEMM on the shapes that matter (square,
 * ResNet-50 convolutions as im2col GEMMs at batch 1, BERT-base linears and
 * attention, a classifier GEMV) with 1 and 2 threads, as a fraction of the
 * FMA peak measured by a probe on this machine. Not a CTest test; build by
 * hand against the CMake-built library and run it:
 *   cc -O2 -Iinclude -Isrc tests/c/bench_gemm.c build/libair.a -lpthread -lm
 *   ./a.out [seconds-per-case [name-filter]]
 * Timings are the best of several runs. On a shared machine other processes
 * steal whole time slices, so besides wall time we report "cpu" rates: time
 * is the largest on-CPU time of any of our threads over the run (each
 * thread's CPU clock, found through /proc/self/task). A thread that finishes its tasks
 * early still spins at the join and counts, so imbalance is still charged,
 * but slices given to other processes are not. */
#define _DEFAULT_SOURCE
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/common/cpu.h"
#include "kernels/gemm/gemm.h"

static double clock_s(clockid_t id)
{
	struct timespec t;
	clock_gettime(id, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double now(void)
{
	return clock_s(CLOCK_MONOTONIC);
}

/* On-CPU ns of each of our threads, by thread id; returns the count. */
enum { MAX_TASKS = 64 };
typedef struct oncpu {
	int n;
	long tid[MAX_TASKS];
	double sec[MAX_TASKS];
} oncpu;

/* Linux: the CPU-time clock of thread tid of this process (what
 * pthread_getcpuclockid returns, for threads we have no pthread_t of). */
static clockid_t thread_clock(long tid)
{
	return (clockid_t)(((unsigned)~tid << 3) | 6);
}

static void oncpu_read(oncpu *o)
{
	o->n = 0;
	DIR *d = opendir("/proc/self/task");
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d)) && o->n < MAX_TASKS) {
		if (e->d_name[0] == '.')
			continue;
		long tid = atol(e->d_name);
		struct timespec t;
		if (clock_gettime(thread_clock(tid), &t) == 0) {
			o->tid[o->n] = tid;
			o->sec[o->n++] = (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
		}
	}
	closedir(d);
}

/* The largest on-CPU time any thread spent between a and b. */
static double oncpu_max(const oncpu *a, const oncpu *b)
{
	double m = 0;
	for (int i = 0; i < b->n; i++) {
		double before = 0;
		for (int k = 0; k < a->n; k++)
			if (a->tid[k] == b->tid[i])
				before = a->sec[k];
		if (b->sec[i] - before > m)
			m = b->sec[i] - before;
	}
	return m;
}

typedef struct rate {
	double wall, cpu; /* GFLOP/s */
} rate;

/* ---- FMA peak probe ------------------------------------------------------ */

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define PROBE_ITERS 50000000L

/* 12 independent FMA chains: enough to cover latency x throughput on any
 * AVX2 core, so this runs at the FMA issue rate. */
__attribute__((target("avx2,fma"))) static void *probe_avx2(void *out)
{
	__m256 b = _mm256_set1_ps(1.0000001f), c = _mm256_set1_ps(1e-7f);
	__m256 a0 = _mm256_set1_ps(0), a1 = _mm256_set1_ps(1), a2 = _mm256_set1_ps(2),
	       a3 = _mm256_set1_ps(3), a4 = _mm256_set1_ps(4), a5 = _mm256_set1_ps(5),
	       a6 = _mm256_set1_ps(6), a7 = _mm256_set1_ps(7), a8 = _mm256_set1_ps(8),
	       a9 = _mm256_set1_ps(9), a10 = _mm256_set1_ps(10), a11 = _mm256_set1_ps(11);
	for (long i = 0; i < PROBE_ITERS; i++) {
#define F(x) x = _mm256_fmadd_ps(x, b, c);
		F(a0) F(a1) F(a2) F(a3) F(a4) F(a5) F(a6) F(a7) F(a8) F(a9) F(a10) F(a11)
#undef F
		__asm__ volatile("" : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3), "+x"(a4), "+x"(a5), "+x"(a6),
				 "+x"(a7), "+x"(a8), "+x"(a9), "+x"(a10), "+x"(a11));
	}
	__m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
				 _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
	s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11)));
	*(float *)out = _mm256_cvtss_f32(s);
	return NULL;
}

/* The same with 12 ZMM chains, for machines with AVX-512 (two 512-bit FMA
 * ports on server cores: twice the AVX2 rate). */
__attribute__((target("avx512f"))) static void *probe_avx512(void *out)
{
	__m512 b = _mm512_set1_ps(1.0000001f), c = _mm512_set1_ps(1e-7f);
	__m512 a0 = _mm512_set1_ps(0), a1 = _mm512_set1_ps(1), a2 = _mm512_set1_ps(2),
	       a3 = _mm512_set1_ps(3), a4 = _mm512_set1_ps(4), a5 = _mm512_set1_ps(5),
	       a6 = _mm512_set1_ps(6), a7 = _mm512_set1_ps(7), a8 = _mm512_set1_ps(8),
	       a9 = _mm512_set1_ps(9), a10 = _mm512_set1_ps(10), a11 = _mm512_set1_ps(11);
	for (long i = 0; i < PROBE_ITERS; i++) {
#define F(x) x = _mm512_fmadd_ps(x, b, c);
		F(a0) F(a1) F(a2) F(a3) F(a4) F(a5) F(a6) F(a7) F(a8) F(a9) F(a10) F(a11)
#undef F
		__asm__ volatile("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5), "+v"(a6),
				 "+v"(a7), "+v"(a8), "+v"(a9), "+v"(a10), "+v"(a11));
	}
	__m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
				 _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
	s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)));
	*(float *)out = _mm512_reduce_add_ps(s);
	return NULL;
}

/* GFLOP/s of nthreads probes at once (of the widest ISA the GEMM uses);
 * best of 3. */
static rate fma_peak(int nthreads)
{
	const int wide = (kcpu_features() & KCPU_AVX512) == KCPU_AVX512;
	void *(*probe)(void *) = wide ? probe_avx512 : probe_avx2;
	rate best = {0, 0};
	for (int rep = 0; rep < 3; rep++) {
		pthread_t th[16];
		float sink[16];
		oncpu o0, o1;
		double t = now();
		for (int i = 1; i < nthreads; i++)
			pthread_create(&th[i], NULL, probe, &sink[i]);
		oncpu_read(&o0);
		probe(&sink[0]);
		for (int i = 1; i < nthreads; i++)
			pthread_join(th[i], NULL);
		/* probe threads are gone by now: time the caller, the slowest to start */
		oncpu_read(&o1);
		double f = nthreads * (double)PROBE_ITERS * 12 * (wide ? 32 : 16) / 1e9;
		double w = f / (now() - t), c = f / oncpu_max(&o0, &o1);
		best.wall = w > best.wall ? w : best.wall;
		best.cpu = c > best.cpu ? c : best.cpu;
	}
	return best;
}
#else
static rate fma_peak(int nthreads)
{
	rate r = {0, 0};
	return r;
}
#endif

/* ---- cases --------------------------------------------------------------- */

typedef struct bcase {
	const char *name;
	int64_t batch, M, N, K;
	int packed; /* B prepacked (a weight); 2: and split for AMX, as a compile with M known does */
	int transb; /* B given as [N x K] (torch Linear weight) */
	int epi;    /* 0 none, 1 bias + act, 2 bias + residual */
	k_act act;
} bcase;

static const bcase cases[] = {
	{"square 256", 1, 256, 256, 256, 1, 0, 0, K_ACT_NONE},
	{"square 512", 1, 512, 512, 512, 1, 0, 0, K_ACT_NONE},
	{"square 1024", 1, 1024, 1024, 1024, 1, 0, 0, K_ACT_NONE},
	{"square 1536", 1, 1536, 1536, 1536, 1, 0, 0, K_ACT_NONE},
	{"square 2048", 1, 2048, 2048, 2048, 1, 0, 0, K_ACT_NONE},
	{"square 512 presplit", 1, 512, 512, 512, 2, 0, 0, K_ACT_NONE},
	{"square 1024 presplit", 1, 1024, 1024, 1024, 2, 0, 0, K_ACT_NONE},
	{"square 2048 presplit", 1, 2048, 2048, 2048, 2, 0, 0, K_ACT_NONE},
	{"square 512 unpacked", 1, 512, 512, 512, 0, 0, 0, K_ACT_NONE},
	{"square 1024 unpacked", 1, 1024, 1024, 1024, 0, 0, 0, K_ACT_NONE},
	{"square 2048 unpacked", 1, 2048, 2048, 2048, 0, 0, 0, K_ACT_NONE},
	/* ResNet-50, batch 1, 224x224: M = H*W, N = Cout, K = Cin*kh*kw */
	{"rn50 conv1 7x7", 1, 12544, 64, 147, 1, 0, 0, K_ACT_NONE},
	{"rn50 l1 1x1 64>64", 1, 3136, 64, 64, 1, 0, 0, K_ACT_NONE},
	{"rn50 l1 3x3 64", 1, 3136, 64, 576, 1, 0, 0, K_ACT_NONE},
	{"rn50 l1 1x1 64>256", 1, 3136, 256, 64, 1, 0, 0, K_ACT_NONE},
	{"rn50 l1 1x1 256>64", 1, 3136, 64, 256, 1, 0, 0, K_ACT_NONE},
	{"rn50 l2 3x3 128", 1, 784, 128, 1152, 1, 0, 0, K_ACT_NONE},
	{"rn50 l2 1x1 128>512", 1, 784, 512, 128, 1, 0, 0, K_ACT_NONE},
	{"rn50 l2 1x1 512>128", 1, 784, 128, 512, 1, 0, 0, K_ACT_NONE},
	{"rn50 l3 3x3 256", 1, 196, 256, 2304, 1, 0, 0, K_ACT_NONE},
	{"rn50 l3 1x1 256>1024", 1, 196, 1024, 256, 1, 0, 0, K_ACT_NONE},
	{"rn50 l3 1x1 1024>256", 1, 196, 256, 1024, 1, 0, 0, K_ACT_NONE},
	{"rn50 l4 3x3 512", 1, 49, 512, 4608, 1, 0, 0, K_ACT_NONE},
	{"rn50 l4 1x1 512>2048", 1, 49, 2048, 512, 1, 0, 0, K_ACT_NONE},
	{"rn50 l4 1x1 2048>512", 1, 49, 512, 2048, 1, 0, 0, K_ACT_NONE},
	{"rn50 fc (GEMV)", 1, 1, 1000, 2048, 1, 1, 0, K_ACT_NONE},
	/* the same layers in NCHW (conv_fast.c): M = Cout, N = H*W */
	{"nchw l1 3x3 64", 1, 64, 3136, 576, 1, 0, 0, K_ACT_NONE},
	{"nchw l1 1x1 64>256", 1, 256, 3136, 64, 1, 0, 0, K_ACT_NONE},
	{"nchw l2 3x3 128", 1, 128, 784, 1152, 1, 0, 0, K_ACT_NONE},
	{"nchw l3 3x3 256", 1, 256, 196, 2304, 1, 0, 0, K_ACT_NONE},
	{"nchw l4 3x3 512", 1, 512, 49, 4608, 1, 0, 0, K_ACT_NONE},
	{"nchw l4 1x1 512>2048", 1, 2048, 49, 512, 1, 0, 0, K_ACT_NONE},
	/* thin products; unpacked = a weight that is a graph input (B read in place) */
	{"fc M=4", 1, 4, 1000, 2048, 1, 1, 0, K_ACT_NONE},
	{"fc M=16", 1, 16, 1000, 2048, 1, 1, 0, K_ACT_NONE},
	{"fc M=1 unpacked", 1, 1, 1000, 2048, 0, 1, 0, K_ACT_NONE},
	{"fc M=4 unpacked", 1, 4, 1000, 2048, 0, 1, 0, K_ACT_NONE},
	{"fc M=16 unpacked", 1, 16, 1000, 2048, 0, 1, 0, K_ACT_NONE},
	{"mv M=1 B[K,N] unpacked", 1, 1, 1000, 2048, 0, 0, 0, K_ACT_NONE},
	{"mm M=16 B[K,N] unpacked", 1, 16, 1000, 2048, 0, 0, 0, K_ACT_NONE},
	/* BERT-base, sequence 128 */
	{"bert qkv/out 768>768", 1, 128, 768, 768, 1, 1, 0, K_ACT_NONE},
	{"bert ffn1 768>3072", 1, 128, 3072, 768, 1, 1, 0, K_ACT_NONE},
	{"bert ffn2 3072>768", 1, 128, 768, 3072, 1, 1, 0, K_ACT_NONE},
	{"bert attn QK^T x12", 12, 128, 128, 64, 0, 1, 0, K_ACT_NONE},
	{"bert attn PV x12", 12, 128, 64, 128, 0, 0, 0, K_ACT_NONE},
	/* fused epilogues: compare with the rows above */
	{"rn50 l3 3x3 +bias+relu", 1, 196, 256, 2304, 1, 0, 1, K_ACT_RELU},
	{"rn50 l1 1x1 +bias+res", 1, 3136, 256, 64, 1, 0, 2, K_ACT_RELU},
	{"bert ffn1 +bias+gelu", 1, 128, 3072, 768, 1, 1, 1, K_ACT_GELU},
	{"bert ffn1 +bias+gelu_tanh", 1, 128, 3072, 768, 1, 1, 1, K_ACT_GELU_TANH},
	{"bert ffn2 +bias+residual", 1, 128, 768, 3072, 1, 1, 2, K_ACT_NONE},
	{"1x1 +bias+silu", 1, 3136, 256, 64, 1, 0, 1, K_ACT_SILU},
};

static float *rand_floats(size_t n)
{
	float *p = NULL;
	if (posix_memalign((void **)&p, 64, n * sizeof(float)) != 0)
		abort();
	for (size_t i = 0; i < n; i++)
		p[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
	return p;
}

static rate bench_case(const bcase *c, rt_pool *pool, double seconds)
{
	const int64_t M = c->M, N = c->N, K = c->K, batch = c->batch;
	float *A = rand_floats((size_t)(batch * M * K)), *B = rand_floats((size_t)(batch * K * N));
	float *C = rand_floats((size_t)(batch * M * N));
	int64_t rs_b = c->transb ? 1 : N, cs_b = c->transb ? K : 1;
	int nt = rt_pool_size(pool);
	kgemm_packed_b *pb = NULL;
	size_t wsb;
	if (batch > 1)
		wsb = kgemm_batched_workspace_bytes(batch, M, N, K, nt);
	else if (c->packed)
		wsb = kgemm_packed_workspace_bytes(M, N, K, nt);
	else
		wsb = kgemm_workspace_bytes(M, N, K, 1, nt);
	void *ws = NULL;
	if (wsb && posix_memalign(&ws, 64, wsb) != 0)
		abort();
	if (c->packed && kgemm_pack_b(K, N, B, rs_b, cs_b, &pb) != AIR_OK)
		abort();
	if (c->packed == 2 && kgemm_packed_b_presplit(pb) != AIR_OK)
		abort();
	k_epilogue ep = k_epilogue_none();
	float *bias = rand_floats((size_t)N), *res = c->epi == 2 ? rand_floats((size_t)(batch * M * N)) : NULL;
	if (c->epi) {
		ep.bias_n = bias;
		ep.act = c->act;
	}
	if (c->epi == 2) {
		ep.residual = res;
		ep.ld_residual = N;
	}
	double flops = 2.0 * (double)batch * M * N * K, best = 1e30, best_cpu = 1e30;
	/* "wall": the fastest single call; "cpu": the on-CPU critical path of
	 * batches of calls lasting >= 20 ms (slow calls cannot dodge preemption) */
	int calls = 0, in_batch = 0;
	oncpu o0, o1;
	oncpu_read(&o0);
	double batch_t0 = now();
	for (double t0 = now(); now() - t0 < seconds || calls < 3;) {
		double t = now();
		if (batch > 1)
			kgemm_f32_batched(batch, M, N, K, A, M * K, K, 1, B, K * N, rs_b, cs_b, C, M * N, N, &ep, pool,
					  ws);
		else if (c->packed)
			kgemm_f32_packed(M, N, K, A, K, 1, pb, C, N, &ep, pool, ws);
		else
			kgemm_f32(M, N, K, A, K, 1, B, rs_b, cs_b, C, N, &ep, pool, ws);
		double end = now();
		if (calls++ > 0) /* the first call warms caches and wakes the pool */
			best = end - t < best ? end - t : best;
		else
			batch_t0 = end, oncpu_read(&o0);
		if (calls > 1 && ++in_batch > 0 && end - batch_t0 >= 0.02) {
			oncpu_read(&o1);
			double dc = oncpu_max(&o0, &o1) / in_batch;
			best_cpu = dc < best_cpu ? dc : best_cpu;
			in_batch = 0;
			o0 = o1;
			batch_t0 = now();
		}
	}
	if (best_cpu == 1e30)
		best_cpu = best;
	kgemm_packed_b_free(pb);
	free(bias);
	free(res);
	free(ws);
	free(A);
	free(B);
	free(C);
	rate r = {flops / best / 1e9, flops / best_cpu / 1e9};
	return r;
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 0.5;
	const char *only = argc > 2 ? argv[2] : NULL;
	setvbuf(stdout, NULL, _IOLBF, 0);
	rate peak1 = {0, 0}, peak2 = {0, 0};
	if (kcpu_features() & KCPU_AVX2) { /* the probes need AVX2 at least */
		peak1 = fma_peak(1);
		peak2 = fma_peak(2);
	}
	printf("kernel %s; FMA peak (probe, wall/cpu) %.1f/%.1f GFLOP/s on 1 thread, %.1f/%.1f on 2\n",
	       kgemm_kernel_name(), peak1.wall, peak1.cpu, peak2.wall, peak2.cpu);
	printf("%% of peak uses the cpu peak: 1T %.1f, 2T %.1f GFLOP/s (2x the 1-thread probe; the 2-thread\n"
	       "probe is %.1f: on this VM the two CPUs may share one core). Run with AIR_ISA=avx2 for AVX2.\n",
	       peak1.cpu, 2 * peak1.cpu, peak2.cpu);
	printf("%-24s %5s %5s %5s %5s | %6s %6s %5s | %6s %6s %5s\n", "case", "batch", "M", "N", "K", "1T wall",
	       "cpu", "%pk", "2T wall", "cpu", "%pk");
	rt_pool *pool2 = NULL;
	if (rt_pool_create(2, &pool2) != AIR_OK)
		return 1;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const bcase *c = &cases[i];
		if (only && !strstr(c->name, only))
			continue;
		rate g1 = bench_case(c, NULL, seconds), g2 = bench_case(c, pool2, seconds);
		double p1 = peak1.cpu, p2 = 2 * peak1.cpu;
		printf("%-24s %5lld %5lld %5lld %5lld | %7.1f %6.1f %4.0f%% | %7.1f %6.1f %4.0f%%\n", c->name,
		       (long long)c->batch, (long long)c->M, (long long)c->N, (long long)c->K, g1.wall, g1.cpu,
		       p1 ? 100 * g1.cpu / p1 : 0, g2.wall, g2.cpu, p2 ? 100 * g2.cpu / p2 : 0);
		fflush(stdout);
	}
	rt_pool_destroy(pool2);
	return 0;
}

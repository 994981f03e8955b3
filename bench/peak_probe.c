/* Measures this machine's fp32 FMA peak (independent FMA chains kept in registers, one
 * copy per thread) and its memory read bandwidth (each thread sums its own share of a
 * 1 GiB buffer, far larger than any cache: what LLM decode, which reads every weight once
 * a token, is bound by). pthreads. Built by bench/peak.py with `cc -O2 -march=native`.
 *
 * usage: peak_probe THREADS SECONDS
 * prints: isa=<name> threads=<n> gflops=<total GFLOP/s> read_gbs=<total GB/s>
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

/* Enough independent chains to cover FMA latency x issue width (e.g. 4-5 cycles x 2 ports). */
#define CHAINS 12
#define INNER 1000

#if defined(__AVX512F__)
#define ISA "avx512f"
#define LANES 16
typedef __m512 vec;
#define VSET(x) _mm512_set1_ps(x)
#define VFMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define VADD(a, b) _mm512_add_ps(a, b)
#define VSUM(a) _mm512_reduce_add_ps(a)
#elif defined(__AVX2__) && defined(__FMA__)
#define ISA "avx2+fma"
#define LANES 8
typedef __m256 vec;
#define VSET(x) _mm256_set1_ps(x)
#define VFMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define VADD(a, b) _mm256_add_ps(a, b)
static float vsum(__m256 a) {
    float t[8];
    _mm256_storeu_ps(t, a);
    return t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
}
#define VSUM(a) vsum(a)
#else
/* Portable fallback: the compiler may or may not fuse and vectorise this. */
#define ISA "scalar"
#define LANES 1
typedef float vec;
#define VSET(x) (x)
#define VFMA(a, b, c) ((a) * (b) + (c))
#define VADD(a, b) ((a) + (b))
#define VSUM(a) (a)
#endif

struct job {
    long outer;     /* outer iterations to run */
    float seed;     /* runtime value so the compiler cannot fold the chains */
    float result;   /* consumed so the chains are not dead code */
};

/* Twelve named accumulators, written out so that they stay in registers (an array
 * indexed in a loop is kept in memory at -O2, which measures store forwarding). */
#define CHAINS_DO(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define DECL(c) vec acc##c = VSET(j->seed + (float)(c));
#define STEP(c) acc##c = VFMA(acc##c, m, a);
#define SUM(c) s = VADD(s, acc##c);

static void *worker(void *arg) {
    struct job *j = arg;
    CHAINS_DO(DECL)
    /* x * (1 - 1e-6) + 1e-7 keeps values finite for any number of iterations. */
    const vec m = VSET(0.999999f), a = VSET(1e-7f);
    for (long o = 0; o < j->outer; o++) {
        for (int i = 0; i < INNER; i++) {
            CHAINS_DO(STEP)
        }
    }
    vec s = VSET(0.0f);
    CHAINS_DO(SUM)
    j->result = VSUM(s);
    return NULL;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Runs `outer` iterations on n threads; returns wall seconds, or -1 on error. */
static double run(int n, long outer, float *sink) {
    pthread_t tid[256];
    struct job jobs[256];
    double t0 = now();
    for (int t = 0; t < n; t++) {
        jobs[t].outer = outer;
        jobs[t].seed = *sink + (float)t;
        if (pthread_create(&tid[t], NULL, worker, &jobs[t]) != 0) return -1.0;
    }
    for (int t = 0; t < n; t++) {
        pthread_join(tid[t], NULL);
        *sink += jobs[t].result;
    }
    return now() - t0;
}

/* ---- read bandwidth ---- */

#define BW_BYTES ((size_t)1 << 30)

struct bw_job {
    const float *p;
    size_t n;      /* floats */
    float result;
};

static void *bw_worker(void *arg) {
    struct bw_job *j = arg;
    vec s0 = VSET(0.0f), s1 = VSET(0.0f), s2 = VSET(0.0f), s3 = VSET(0.0f);
    for (size_t i = 0; i + 4 * LANES <= j->n; i += 4 * LANES) {
#if LANES == 16
        s0 = VADD(s0, _mm512_loadu_ps(j->p + i));
        s1 = VADD(s1, _mm512_loadu_ps(j->p + i + 16));
        s2 = VADD(s2, _mm512_loadu_ps(j->p + i + 32));
        s3 = VADD(s3, _mm512_loadu_ps(j->p + i + 48));
#elif LANES == 8
        s0 = VADD(s0, _mm256_loadu_ps(j->p + i));
        s1 = VADD(s1, _mm256_loadu_ps(j->p + i + 8));
        s2 = VADD(s2, _mm256_loadu_ps(j->p + i + 16));
        s3 = VADD(s3, _mm256_loadu_ps(j->p + i + 24));
#else
        s0 += j->p[i]; s1 += j->p[i + 1]; s2 += j->p[i + 2]; s3 += j->p[i + 3];
#endif
    }
    j->result = VSUM(VADD(VADD(s0, s1), VADD(s2, s3)));
    return NULL;
}

/* Best of `reps` passes over the buffer on n threads, in GB/s (1e9 bytes); -1 on error. */
static double read_bandwidth(int n, int reps, float *sink) {
    float *buf = malloc(BW_BYTES);
    if (!buf) return -1.0;
    size_t total = BW_BYTES / sizeof(float);
    for (size_t i = 0; i < total; i++) buf[i] = (float)(i & 7);  /* also faults every page in */
    pthread_t tid[256];
    struct bw_job jobs[256];
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        for (int t = 0; t < n; t++) {
            jobs[t].p = buf + total / (size_t)n * (size_t)t;
            jobs[t].n = total / (size_t)n;
            if (pthread_create(&tid[t], NULL, bw_worker, &jobs[t]) != 0) { free(buf); return -1.0; }
        }
        for (int t = 0; t < n; t++) {
            pthread_join(tid[t], NULL);
            *sink += jobs[t].result;
        }
        double dt = now() - t0;
        if (dt < best) best = dt;
    }
    free(buf);
    return (double)BW_BYTES / best * 1e-9;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1;
    double seconds = argc > 2 ? atof(argv[2]) : 0.5;
    if (n < 1 || n > 256 || seconds <= 0.0) {
        fprintf(stderr, "usage: peak_probe THREADS(1..256) SECONDS\n");
        return 2;
    }
    float sink = (float)argc * 1e-3f;
    /* Calibrate the iteration count on one short run, then take the best of three. */
    long outer = 100;
    double dt = run(1, outer, &sink);
    while (dt >= 0.0 && dt < 0.02) {
        outer *= 4;
        dt = run(1, outer, &sink);
    }
    if (dt < 0.0) {
        fprintf(stderr, "peak_probe: pthread_create failed\n");
        return 1;
    }
    outer = (long)((double)outer * (seconds / 3.0) / dt) + 1;
    double best = 1e30;
    for (int r = 0; r < 3; r++) {
        dt = run(n, outer, &sink);
        if (dt < 0.0) {
            fprintf(stderr, "peak_probe: pthread_create failed\n");
            return 1;
        }
        if (dt < best) best = dt;
    }
    double flops = 2.0 * LANES * CHAINS * (double)INNER * (double)outer * (double)n;
    double gbs = read_bandwidth(n, 5, &sink);
    printf("isa=%s threads=%d gflops=%.2f read_gbs=%.2f sink=%g\n", ISA, n, flops / best * 1e-9, gbs, (double)sink);
    return 0;
}

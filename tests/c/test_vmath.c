/* test_vmath.c - vmath's array functions against double-precision libm: the
 * worst error over a sweep of float bit patterns (every STRIDE-th pattern of
 * all 2^32, and a denser sweep of the range where the functions bend),
 * asserted against the bounds measured for each ISA; PyTorch's results for
 * NaN, infinities, zeros and the tails; awkward lengths, in place, and
 * lengths that must not write past the end.
 * AIR_VMATH_STRIDE=1 makes the sweep exhaustive (tens of minutes, not for
 * CI); AIR_VMATH_ONLY=name sweeps one function. */
#include <float.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels/vmath/vmath.h"
#include "kernels/vmath/vmath_impl.h" /* kv_unary_isa */

static double ref_exp(double x) { return exp(x); }
static double ref_log(double x) { return log(x); }
static double ref_tanh(double x) { return tanh(x); }
static double ref_erf(double x) { return erf(x); }
static double ref_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
/* written with erfc so that the reference itself is exact in the tail */
static double ref_gelu(double x) { return 0.5 * x * erfc(-x * 0.70710678118654752440); }
/* 0.5 x (1 + tanh(v)) = x / (1 + e^(-2v)), without the cancellation */
static double ref_gelu_tanh(double x)
{
	double v = 0.79788456080286535588 * (x + 0.044715 * x * x * x);
	return x / (1.0 + exp(-2.0 * v));
}
static double ref_silu(double x) { return x / (1.0 + exp(-x)); }
static double ref_sin(double x) { return sin(x); }
static double ref_cos(double x) { return cos(x); }
static double ref_rsqrt(double x) { return 1.0 / sqrt(x); }

/* Worst errors measured over every 37th float (AIR_VMATH_STRIDE=37), in ulp
 * of the float result, recorded with a small margin:
 *            exp   log   tanh  erf   sigm  gelu  gelu_t silu  sin   cos   rsqrt
 *   avx2     1.01  0.85  1.26  1.06  2.40  3.26  (abs)  3.18  1.54  1.55  0.502
 *   scalar   0.98  0.85  1.26  1.32  2.40  3.26  (abs)  3.18  0.503 0.503 0.500
 * A point fails if it is beyond the ulp bound and also beyond abs (0 for
 * pure ulp bounds). The test prints what it measures. */
typedef struct {
	kv_func f;
	double (*ref)(double);
	double ulp_avx2, ulp_scalar; /* asserted bounds */
	double abs;                  /* accepted absolute error, or 0 */
} fn_case;

static const fn_case cases[] = {
	/* f, ref, avx2, scalar, abs */
	{KV_exp, ref_exp, 1.25, 1.25, 0},
	{KV_log, ref_log, 1.0, 1.0, 0},
	{KV_tanh, ref_tanh, 1.5, 1.5, 0},
	{KV_erf, ref_erf, 1.25, 1.5, 0},
	{KV_sigmoid, ref_sigmoid, 2.75, 2.75, 0},
	{KV_gelu, ref_gelu, 3.5, 3.5, 0},
	{KV_gelu_tanh, ref_gelu_tanh, 3.75, 3.75, 0},
	{KV_silu, ref_silu, 3.5, 3.5, 0},
	{KV_sin, ref_sin, 1.75, 0.75, 0},
	{KV_cos, ref_cos, 1.75, 0.75, 0},
	{KV_rsqrt, ref_rsqrt, 0.75, 0.75, 0},
};
enum { NCASES = sizeof cases / sizeof cases[0] };

static float bits_to_float(uint32_t u)
{
	float x;
	memcpy(&x, &u, sizeof x);
	return x;
}

static uint32_t float_bits(float x)
{
	uint32_t u;
	memcpy(&u, &x, sizeof u);
	return u;
}

/* the spacing of floats at |r| (subnormal spacing below FLT_MIN) */
static double ulp_at(double r)
{
	r = fabs(r);
	if (r < FLT_MIN)
		return 0x1p-149;
	int e;
	frexp(r, &e);
	return ldexp(1.0, e - 24);
}

/* Error of y against the exact ref, in ulp; INFINITY for a wrong class
 * (NaN for a number, a finite value for an overflow, ...). */
static double ulp_error(float y, double ref)
{
	if (isnan(ref))
		return isnan(y) ? 0 : INFINITY;
	if (isnan(y))
		return INFINITY;
	if (fabs(ref) > FLT_MAX) {
		/* an overflow: inf, or FLT_MAX right at the edge */
		if ((ref > 0) != (y > 0))
			return INFINITY;
		return fabsf(y) >= FLT_MAX ? 0 : INFINITY;
	}
	if (isinf(y))
		return fabs(ref) > FLT_MAX * (1.0 - 0x1p-25) ? 0 : INFINITY;
	return fabs((double)y - ref) / ulp_at(ref);
}

typedef struct {
	double max_ulp;  /* over all points */
	float worst_x;
	double max_abs;  /* absolute error at points beyond the ulp bound */
	long fails;
	long points;
} stats;

enum { BATCH = 1 << 16 };

static void check_batch(const fn_case *c, double ulp_bound, const float *x, float *y, int64_t n,
			stats *s)
{
	kv_unary_f32 fn = kv_unary(c->f);
	fn(x, y, n);
	for (int64_t i = 0; i < n; i++) {
		double ref = c->ref((double)x[i]);
		double e = ulp_error(y[i], ref);
		s->points++;
		if (e > s->max_ulp) {
			s->max_ulp = e;
			s->worst_x = x[i];
		}
		if (e > ulp_bound) {
			double ae = isfinite(e) ? fabs((double)y[i] - ref) : INFINITY;
			if (ae > s->max_abs)
				s->max_abs = ae;
			if (!(ae <= c->abs)) {
				if (s->fails < 5)
					fprintf(stderr, "  %s(%a) = %a, want %a (%.2f ulp)\n",
						kv_func_name(c->f), x[i], y[i], ref, e);
				s->fails++;
			}
		}
	}
}

/* Sweeps bit patterns [lo, hi] with the given stride, both signs. */
static void sweep(const fn_case *c, double ulp_bound, uint32_t lo, uint32_t hi, uint32_t stride,
		  float *x, float *y, stats *s)
{
	int64_t k = 0;
	for (int sign = 0; sign < 2; sign++) {
		for (uint64_t u = lo; u <= hi; u += stride) {
			x[k++] = bits_to_float((uint32_t)u | (sign ? 0x80000000u : 0));
			if (k == BATCH) {
				check_batch(c, ulp_bound, x, y, k, s);
				k = 0;
			}
		}
	}
	check_batch(c, ulp_bound, x, y, k, s);
}

static void test_accuracy(int avx2)
{
	uint32_t stride = 997;
	const char *env = getenv("AIR_VMATH_STRIDE");
	if (env && atoi(env) > 0)
		stride = (uint32_t)atoi(env);
	const char *only = getenv("AIR_VMATH_ONLY"); /* one function, by name */
	float *x = malloc(sizeof(float) * BATCH), *y = malloc(sizeof(float) * BATCH);
	if (!x || !y) {
		CHECK(!"out of memory");
		free(x);
		free(y);
		return;
	}
	printf("%-10s %10s %8s %12s  %s\n", "function", "max ulp", "bound", "at x", "abs err past bound");
	for (int i = 0; i < NCASES; i++) {
		const fn_case *c = &cases[i];
		if (only && strcmp(only, kv_func_name(c->f)) != 0)
			continue;
		double bound = avx2 ? c->ulp_avx2 : c->ulp_scalar;
		stats s = {0};
		/* every stride-th of all finite and special patterns ... */
		sweep(c, bound, 0, 0x7f800000u, stride, x, y, &s);
		/* ... and a 16x denser sweep of 2^-8 <= |x| < 32 */
		sweep(c, bound, 0x3b800000u, 0x42000000u, stride > 16 ? stride / 16 : 1, x, y, &s);
		/* specials and edges that a stride can step over */
		static const float edges[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, FLT_MIN, -FLT_MIN,
					      0x1p-149f, -0x1p-149f, FLT_MAX, -FLT_MAX, 1.0f, -1.0f,
					      88.72283f, 88.72284f, -87.33654f, -103.97208f, -103.97209f,
					      0.875f, -0.875f, 0.75f, 2.0f, 3.92f, 2.8284271f, -2.8284271f,
					      65536.0f, -65536.0f, 65536.0078125f,
					      1.5707964f, 3.1415927f, 4.712389f, 6.2831855f, 1e30f};
		check_batch(c, bound, edges, y, sizeof edges / sizeof edges[0], &s);
		printf("%-10s %10.3f %8.2f %12a  %s%.3g\n", kv_func_name(c->f), s.max_ulp, bound,
		       s.worst_x, s.max_abs > 0 ? "" : "none ", s.max_abs);
		CHECK(s.fails == 0);
		if (s.fails)
			fprintf(stderr, "%s: %ld of %ld points beyond %.2f ulp\n", kv_func_name(c->f), s.fails,
				s.points, bound);
	}
	free(x);
	free(y);
}

/* What PyTorch (2.x, CPU) returns, where the tails and specials matter. */
typedef struct {
	kv_func f;
	float x, want; /* want NaN: any NaN */
} special;

static void test_specials(void)
{
	const float inf = INFINITY, nan = NAN;
	static special s[64];
	int n = 0;
#define SP(fn, a, b) s[n++] = (special){KV_##fn, (a), (b)}
	SP(exp, -inf, 0.0f), SP(exp, inf, inf), SP(exp, nan, nan), SP(exp, 100.0f, inf);
	SP(exp, -200.0f, 0.0f), SP(exp, -0.0f, 1.0f), SP(exp, -103.0f, 0x1.p-149f);
	SP(log, -1.0f, nan), SP(log, 0.0f, -inf), SP(log, -0.0f, -inf), SP(log, inf, inf);
	SP(log, -inf, nan), SP(log, nan, nan), SP(log, 1.0f, 0.0f);
	SP(tanh, inf, 1.0f), SP(tanh, -inf, -1.0f), SP(tanh, nan, nan), SP(tanh, -0.0f, -0.0f);
	SP(tanh, 1e-40f, 1e-40f), SP(tanh, 20.0f, 1.0f);
	SP(erf, inf, 1.0f), SP(erf, -inf, -1.0f), SP(erf, nan, nan), SP(erf, -0.0f, -0.0f);
	SP(erf, 5.0f, 1.0f), SP(erf, -5.0f, -1.0f);
	SP(sigmoid, -inf, 0.0f), SP(sigmoid, inf, 1.0f), SP(sigmoid, nan, nan);
	SP(sigmoid, 0.0f, 0.5f), SP(sigmoid, -0.0f, 0.5f), SP(sigmoid, -1e30f, 0.0f);
	SP(gelu, inf, inf), SP(gelu, -inf, nan), SP(gelu, nan, nan), SP(gelu, -0.0f, -0.0f);
	SP(gelu, -100.0f, -0.0f), SP(gelu, 1e30f, 1e30f), SP(gelu, -1e30f, -0.0f);
	SP(gelu_tanh, inf, inf), SP(gelu_tanh, -inf, nan), SP(gelu_tanh, nan, nan);
	SP(gelu_tanh, -0.0f, -0.0f), SP(gelu_tanh, 1e30f, 1e30f);
	SP(silu, inf, inf), SP(silu, -inf, nan), SP(silu, nan, nan), SP(silu, -0.0f, -0.0f);
	SP(silu, 1e30f, 1e30f);
	SP(sin, inf, nan), SP(sin, -inf, nan), SP(sin, nan, nan), SP(sin, -0.0f, -0.0f);
	SP(cos, inf, nan), SP(cos, nan, nan), SP(cos, -0.0f, 1.0f);
	SP(rsqrt, -1.0f, nan), SP(rsqrt, 0.0f, inf), SP(rsqrt, -0.0f, -inf), SP(rsqrt, inf, 0.0f);
	SP(rsqrt, nan, nan), SP(rsqrt, 4.0f, 0.5f);
#undef SP
	for (int i = 0; i < n; i++) {
		float y;
		kv_unary(s[i].f)(&s[i].x, &y, 1);
		int ok = isnan(s[i].want) ? isnan(y) : float_bits(y) == float_bits(s[i].want);
		if (!ok)
			fprintf(stderr, "special: %s(%a) = %a, want %a\n", kv_func_name(s[i].f), s[i].x, y,
				s[i].want);
		CHECK(ok);
	}
	/* tails: tiny but right, never NaN */
	float x = -100.0f, y;
	kv_sigmoid_f32(&x, &y, 1);
	CHECK(y >= 0 && y < 1e-40f);
	kv_silu_f32(&x, &y, 1);
	CHECK(y <= 0 && y > -1e-38f);
	x = -10.0f;
	kv_gelu_f32(&x, &y, 1);
	CHECK_NEAR(y / ref_gelu(-10.0), 1.0, 1e-6); /* -7.6e-23: not 0 */
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t next_u32(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 16);
}

/* a mix of ordinary values, large and tiny ones, and specials */
static float random_input(void)
{
	uint32_t r = next_u32();
	switch (r % 16) {
	case 0: return bits_to_float(next_u32());
	case 1: return (float)((int)(next_u32() % 2001) - 1000) * 0.125f;
	case 2: return (r & 256) ? INFINITY : -INFINITY;
	case 3: return (r & 256) ? NAN : -0.0f;
	default: return ((float)(next_u32() % 200001) - 100000.0f) * 1e-4f * (float)(1 + r % 7);
	}
}

static int same_bits(const float *a, const float *b, int64_t n)
{
	return memcmp(a, b, (size_t)n * sizeof(float)) == 0;
}

/* Every element's result is the same at any position, alignment and array
 * length (tails use the same code), in place or not, and nothing outside
 * [0, n) is written. */
static void test_lengths(void)
{
	static const int64_t lens[] = {0, 1, 7, 8, 9, 15, 16, 17, 31, 1000003};
	enum { PAD = 8 };
	const int64_t maxn = 1000003;
	float *x = malloc(sizeof(float) * (maxn + 2 * PAD)), *y = malloc(sizeof(float) * (maxn + 2 * PAD));
	float *one = malloc(sizeof(float) * maxn), *inplace = malloc(sizeof(float) * (maxn + 1));
	if (!x || !y || !one || !inplace) {
		CHECK(!"out of memory");
		goto done;
	}
	for (int64_t i = 0; i < maxn + 2 * PAD; i++)
		x[i] = random_input();
	for (int f = 0; f < KV_FUNC_COUNT; f++) {
		kv_unary_f32 fn = kv_unary((kv_func)f);
		for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
			int64_t n = lens[li];
			for (int off = 0; off < 2; off++) { /* aligned and not */
				const float *xs = x + PAD + off;
				for (int64_t i = 0; i < n + 2 * PAD; i++)
					y[i] = -12345.0f;
				fn(xs, y + PAD, n);
				int guard_ok = 1;
				for (int64_t i = 0; i < PAD; i++)
					guard_ok &= y[i] == -12345.0f && y[PAD + n + i] == -12345.0f;
				CHECK(guard_ok);
				/* one element at a time */
				int64_t m = n < 4099 ? n : 4099;
				for (int64_t i = 0; i < m; i++)
					fn(xs + i, one + i, 1);
				CHECK(same_bits(one, y + PAD, m));
				/* in place, on a copy at another alignment */
				memcpy(inplace + 1 - off, xs, (size_t)n * sizeof(float));
				fn(inplace + 1 - off, inplace + 1 - off, n);
				int ok = same_bits(inplace + 1 - off, y + PAD, n);
				if (!ok)
					fprintf(stderr, "%s: in place differs at n=%lld\n", kv_func_name((kv_func)f),
						(long long)n);
				CHECK(ok);
			}
		}
	}
done:
	free(x);
	free(y);
	free(one);
	free(inplace);
}

static void test_table(void)
{
	for (int f = 0; f < KV_FUNC_COUNT; f++) {
		CHECK(kv_unary((kv_func)f) != NULL);
		CHECK(strcmp(kv_func_name((kv_func)f), "?") != 0);
	}
	CHECK(kv_unary(KV_FUNC_COUNT) == NULL);
	CHECK(strcmp(kv_func_name((kv_func)-1), "?") == 0);
	/* the public wrappers go through the same table */
	float x[3] = {0.5f, -2.0f, 30.0f}, a[3], b[3];
	kv_gelu_f32(x, a, 3);
	kv_unary(KV_gelu)(x, b, 3);
	CHECK(same_bits(a, b, 3));
}

/* Where the AVX-512 table is in use, every function's kernel gives bitwise
 * what the AVX2 kernel gives (the 16-lane twins of vmath_avx512.h are the
 * 8-lane code at twice the width): every 127th float bit pattern, in arrays
 * whose lengths leave tails of every size, so that each value also meets
 * different neighbours in a vector. */
static void test_avx512_matches_avx2(void)
{
	if (strcmp(kv_isa_name(), "avx512") != 0) {
		printf("avx512 kernels: not in use, not compared\n");
		return;
	}
	float *x = malloc(sizeof(float) * BATCH), *a = malloc(sizeof(float) * BATCH), *b = malloc(sizeof(float) * BATCH);
	if (!x || !a || !b) {
		CHECK(!"out of memory");
		free(x), free(a), free(b);
		return;
	}
	for (int f = 0; f < KV_FUNC_COUNT; f++) {
		kv_unary_f32 wide = kv_unary_isa((kv_func)f, "avx512"), narrow = kv_unary_isa((kv_func)f, "avx2");
		CHECK(wide != NULL && narrow != NULL && wide == kv_unary((kv_func)f));
		if (!wide || !narrow || wide == narrow) /* (no AVX-512 kernel: the same one) */
			continue;
		int64_t differ = 0, len = 1;
		uint64_t bits = 0;
		while (bits <= 0xffffffffu) {
			int64_t k = 0;
			for (; k < len && bits <= 0xffffffffu; k++, bits += 127) {
				uint32_t u = (uint32_t)bits;
				memcpy(&x[k], &u, sizeof u);
			}
			wide(x, a, k);
			narrow(x, b, k);
			for (int64_t i = 0; i < k; i++)
				if (memcmp(&a[i], &b[i], sizeof(float)) != 0 && differ++ == 0)
					fprintf(stderr, "%s: avx512 %a, avx2 %a at x = %a\n", kv_func_name((kv_func)f), a[i],
						b[i], x[i]);
			len = len >= 47 ? BATCH : len + 1; /* every tail, then long arrays */
		}
		CHECK(differ == 0);
	}
	printf("avx512 kernels: bitwise the avx2 ones\n");
	free(x), free(a), free(b);
}

int main(void)
{
	const char *isa = kv_isa_name();
	printf("vmath kernels: %s\n", isa);
	test_table();
	test_specials();
	test_lengths();
	test_accuracy(strcmp(isa, "scalar") != 0); /* avx512: the avx2 bounds (same bits) */
	test_avx512_matches_avx2();
	return check_report("test_vmath");
}

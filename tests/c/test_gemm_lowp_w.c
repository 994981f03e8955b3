/* test_gemm_lowp_w.c - the 16-bit-weight GEMM (kernels/gemm/lowp_w.h)
 * against its reference, for bf16 and f16 weights: every tail of M, N and K
 * the kernels have, strided A, W and C, every epilogue field (a residual
 * aliasing C too), no pool and a 2-thread pool, NaN and Inf, subnormal
 * weights, degenerate sizes. Also checks that nothing outside the M x N
 * output is written, that the workspace asked for is enough (buffers are
 * exactly that size: run it under ASan), and which kernel runs on this ISA.
 * CTest runs it under AIR_ISA=avx512, avx2 and scalar as well.
 * test_wide covers the bf16 path for large M on AVX512-BF16 (W packed per
 * call, lowp_w_pack.bf16.c) around its tiles and blocks.
 *
 * Tolerance: the paths sum in f32 in different orders, so an element may be
 * off by about 1e-5 of sum_k |a_k w_k| (with the epilogue's terms). On
 * the vdpbf16ps path a bf16 subnormal weight counts as zero (the
 * instruction's rule), so there those products' sizes are allowed too. */
#define _POSIX_C_SOURCE 200112L
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels/common/cpu.h"
#include "kernels/common/half.h"
#include "kernels/gemm/lowp_w.h"

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static uint32_t urand(void)
{
	rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(rng_state >> 33);
}

static float frand(void)
{
	return (float)(urand() & 0xffffff) / (float)0x800000 - 1.0f; /* [-1, 1) */
}

static void *alloc_bytes(size_t bytes)
{
	void *p = NULL;
	if (posix_memalign(&p, 64, bytes ? bytes : 1) != 0)
		abort();
	return p;
}

static uint16_t to16(klowp_type wt, float x)
{
	return wt == KLOWP_BF16 ? k_f32_to_bf16(x) : k_f32_to_f16(x);
}

static double from16(klowp_type wt, uint16_t h)
{
	return wt == KLOWP_BF16 ? k_bf16_to_f32(h) : k_f16_to_f32(h);
}

static double rounded(klowp_type wt, float x)
{
	return from16(wt, to16(wt, x));
}

static int is_subnormal16(klowp_type wt, uint16_t h)
{
	return (h & (wt == KLOWP_BF16 ? 0x7f80 : 0x7c00)) == 0 && (h & 0x7fff) != 0;
}

/* Whether a bf16 subnormal weight may count as zero here. */
static int flushes_bf16_subnormals(klowp_type wt)
{
	return wt == KLOWP_BF16 && strcmp(kgemm_lowp_w_kernel_name(wt), "avx512bf16_dot") == 0;
}

static const float SENTINEL = -12345.0f;

typedef struct tcase {
	klowp_type wt;
	int64_t M, N, K;
	int64_t lda_pad, ldw_pad, ldc_pad;
	float alpha;
	int bias_n, bias_m;
	int residual; /* 0 none, 1 separate, 2 aliasing C */
	k_act act;
	int null_ep;  /* pass ep = NULL (only with the identity epilogue) */
	int misalign; /* hand the kernel a workspace pointer that is not aligned */
	rt_pool *pool;
	/* special values: 0 none, 1 NaN/Inf in A, 2 NaN/Inf in W, 3 subnormal W */
	int special;
} tcase;

static const char *const type_names[] = {"bf16", "f16"};

static void fill_special(const tcase *t, float *A, int64_t lda, uint16_t *W, int64_t ldw)
{
	const int64_t M = t->M, N = t->N, K = t->K;
	if (t->special == 1) {
		A[0 * lda + (K - 1)] = NAN;
		if (M > 1)
			A[1 * lda + K / 2] = INFINITY;
		if (M > 2) /* 1e6 is finite in f32, infinite once rounded to f16 */
			A[2 * lda + 0] = t->wt == KLOWP_F16 ? -1e6f : -INFINITY;
	} else if (t->special == 2) {
		W[0 * ldw + (K - 1)] = to16(t->wt, INFINITY); /* in the last, masked step */
		if (N > 2)
			W[2 * ldw + 0] = to16(t->wt, NAN);
		if (N > 5)
			W[5 * ldw + K / 2] = to16(t->wt, -INFINITY);
	} else if (t->special == 3) {
		/* a quarter of the weights subnormal, and all of row 1's */
		const uint16_t mant = t->wt == KLOWP_BF16 ? 0x7f : 0x3ff;
		for (int64_t n = 0; n < N; n++)
			for (int64_t k = 0; k < K; k++)
				if (n == 1 || urand() % 4 == 0)
					W[n * ldw + k] = (uint16_t)((urand() & 0x8000) | (1 + urand() % mant));
	}
}

static void run_case(const tcase *t)
{
	const klowp_type wt = t->wt;
	const int64_t M = t->M, N = t->N, K = t->K;
	const int64_t lda = K + t->lda_pad, ldw = K + t->ldw_pad, ldc = N + t->ldc_pad;
	float *A = alloc_bytes(sizeof(float) * (size_t)(M * lda));
	uint16_t *W = alloc_bytes(sizeof(uint16_t) * (size_t)(N * ldw));
	for (int64_t i = 0; i < M * lda; i++)
		A[i] = frand();
	for (int64_t i = 0; i < N * ldw; i++)
		W[i] = to16(wt, frand());
	fill_special(t, A, lda, W, ldw);

	const size_t nc = (size_t)(M * ldc);
	float *C = alloc_bytes(sizeof(float) * nc), *R = alloc_bytes(sizeof(float) * nc);
	float *E = alloc_bytes(sizeof(float) * nc);
	float *bias_n = alloc_bytes(sizeof(float) * (size_t)N), *bias_m = alloc_bytes(sizeof(float) * (size_t)M);
	for (size_t i = 0; i < nc; i++) {
		C[i] = SENTINEL;
		R[i] = frand();
	}
	for (int64_t n = 0; n < N; n++)
		bias_n[n] = frand();
	for (int64_t i = 0; i < M; i++)
		bias_m[i] = frand();
	k_epilogue ep = k_epilogue_none();
	ep.alpha = t->alpha;
	ep.act = t->act;
	ep.bias_n = t->bias_n ? bias_n : NULL;
	ep.bias_m = t->bias_m ? bias_m : NULL;
	if (t->residual) {
		ep.residual = R;
		ep.ld_residual = ldc;
	}
	kgemm_lowp_w_reference(wt, M, N, K, A, lda, W, ldw, E, ldc, &ep);
	if (t->residual == 2) {
		/* the residual is C itself: C starts as R, sentinels past N */
		for (int64_t i = 0; i < M; i++)
			memcpy(C + i * ldc, R + i * ldc, sizeof(float) * (size_t)N);
		ep.residual = C;
	}

	const size_t wsb = kgemm_lowp_w_workspace_bytes(M, K, rt_pool_size(t->pool));
	char *ws_mem = alloc_bytes(wsb + (t->misalign ? 1 : 0));
	kgemm_lowp_w(wt, M, N, K, A, lda, W, ldw, C, ldc, t->null_ep ? NULL : &ep, t->pool,
		     wsb ? ws_mem + (t->misalign ? 1 : 0) : NULL);

	/* the operands as the kernel multiplies them, for the error bound */
	const int flush = flushes_bf16_subnormals(wt);
	double *Ad = alloc_bytes(sizeof(double) * (size_t)(M * K + 1));
	double *Wd = alloc_bytes(sizeof(double) * (size_t)(N * K + 1));
	char *Wsub = alloc_bytes((size_t)(N * K + 1));
	for (int64_t i = 0; i < M; i++)
		for (int64_t k = 0; k < K; k++)
			Ad[i * K + k] = fabs(rounded(wt, A[i * lda + k]));
	for (int64_t n = 0; n < N; n++)
		for (int64_t k = 0; k < K; k++) {
			Wd[n * K + k] = fabs(from16(wt, W[n * ldw + k]));
			Wsub[n * K + k] = (char)(flush && is_subnormal16(wt, W[n * ldw + k]));
		}
	const double slope = t->act == K_ACT_HARDSWISH ? 1.5 : 1.2;
	int bad = 0;
	for (int64_t i = 0; i < M && bad < 3; i++) {
		for (int64_t n = 0; n < ldc && bad < 3; n++) {
			const float got = C[i * ldc + n];
			if (n >= N) {
				if (got != SENTINEL) {
					fprintf(stderr, "wrote C[%lld, %lld] past N\n", (long long)i, (long long)n);
					bad++;
				}
				continue;
			}
			const double want = E[i * ldc + n];
			double sum_abs = 0, flushed = 0;
			for (int64_t k = 0; k < K; k++) {
				const double p = Ad[i * K + k] * Wd[n * K + k];
				sum_abs += p;
				if (Wsub[n * K + k])
					flushed += p;
			}
			double scale = fabs(ep.alpha) * sum_abs;
			scale += ep.bias_n ? fabs(bias_n[n]) : 0;
			scale += ep.bias_m ? fabs(bias_m[i]) : 0;
			scale += t->residual ? fabs(R[i * ldc + n]) : 0;
			const double tol = slope * (1.5e-5 * scale + fabs(ep.alpha) * flushed) + 1e-6 * fabs(want);
			int ok;
			if (isnan(want) || isinf(want))
				ok = isnan(want) ? isnan(got) : got == want;
			else
				ok = isfinite(got) && fabs(got - want) <= tol;
			if (!ok) {
				fprintf(stderr, "C[%lld, %lld] = %.9g, want %.9g (tol %.3g)\n", (long long)i, (long long)n,
					got, want, tol);
				bad++;
			}
		}
	}
	CHECK(bad == 0);
	if (bad)
		fprintf(stderr,
			"  %s M=%lld N=%lld K=%lld pads %lld/%lld/%lld alpha %g bias %d/%d res %d act %d "
			"threads %d special %d kernel %s\n",
			type_names[wt], (long long)M, (long long)N, (long long)K, (long long)t->lda_pad,
			(long long)t->ldw_pad, (long long)t->ldc_pad, t->alpha, t->bias_n, t->bias_m, t->residual,
			(int)t->act, rt_pool_size(t->pool), t->special, kgemm_lowp_w_kernel_name(wt));
	free(A);
	free(W);
	free(C);
	free(R);
	free(E);
	free(bias_n);
	free(bias_m);
	free(ws_mem);
	free(Ad);
	free(Wd);
	free(Wsub);
}

/* Every size of the grid once per type, each with its own mix of strides,
 * epilogue and threads; of the largest products (which repeat the tails of
 * smaller ones) only every fourth, to keep the sanitizer build quick. */
static void test_grid(rt_pool *pool2)
{
	static const int64_t Ms[] = {1, 2, 3, 4, 5, 7, 13, 64, 100};
	static const int64_t Ns[] = {1, 3, 17, 33, 64, 129};
	static const int64_t Ks[] = {1, 2, 3, 31, 32, 33, 63, 65, 200, 1000};
	static const float alphas[] = {1.0f, 0.5f, -2.0f};
	int64_t c = 0;
	for (int wt = 0; wt < 2; wt++)
		for (size_t im = 0; im < sizeof Ms / sizeof Ms[0]; im++)
			for (size_t in = 0; in < sizeof Ns / sizeof Ns[0]; in++)
				for (size_t ik = 0; ik < sizeof Ks / sizeof Ks[0]; ik++, c++) {
					tcase t = {(klowp_type)wt, Ms[im], Ns[in], Ks[ik]};
					if (t.M * t.N * t.K > 500000 && (im + in + ik) % 4 != 0)
						continue;
					t.lda_pad = urand() % 3 ? 0 : 1 + urand() % 40;
					t.ldw_pad = urand() % 3 ? 0 : 1 + urand() % 40;
					t.ldc_pad = urand() % 2 ? 0 : 1 + urand() % 5;
					t.alpha = alphas[urand() % 3];
					t.bias_n = urand() % 2;
					t.bias_m = urand() % 3 == 0;
					t.residual = (int)(urand() % 3);
					t.act = (k_act)(urand() % (K_ACT_HARDSWISH + 1));
					t.misalign = urand() % 4 == 0;
					t.pool = c % 2 ? pool2 : NULL;
					run_case(&t);
				}
}

/* Each epilogue field alone, each activation, ep = NULL; threads both ways. */
static void test_epilogues(rt_pool *pool2)
{
	for (int wt = 0; wt < 2; wt++) {
		for (int p = 0; p < 2; p++) {
			rt_pool *pool = p ? pool2 : NULL;
			tcase base = {(klowp_type)wt, 37, 70, 129, 3, 5, 2, 1.0f};
			base.pool = pool;
			tcase t = base;
			t.null_ep = 1;
			run_case(&t);
			t = base;
			t.alpha = -0.75f;
			run_case(&t);
			t = base;
			t.bias_n = 1;
			run_case(&t);
			t = base;
			t.bias_m = 1;
			run_case(&t);
			for (int r = 1; r <= 2; r++) {
				t = base;
				t.residual = r;
				run_case(&t);
			}
			for (int a = 0; a <= K_ACT_HARDSWISH; a++) {
				t = base;
				t.act = (k_act)a;
				t.bias_n = 1;
				t.residual = 2;
				t.alpha = 2.0f;
				run_case(&t);
			}
		}
	}
}

/* NaN and Inf propagate as in the reference; subnormal weights. */
static void test_special(rt_pool *pool2)
{
	static const int64_t shapes[][3] = {{5, 9, 37}, {1, 17, 65}, {3, 9, 31}, {64, 33, 200}, {8, 40, 1000}};
	for (int wt = 0; wt < 2; wt++)
		for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
			for (int sp = 1; sp <= 3; sp++) {
				tcase t = {(klowp_type)wt, shapes[s][0], shapes[s][1], shapes[s][2], 1, 2, 1, 1.0f};
				t.pool = s % 2 ? pool2 : NULL;
				t.bias_n = 1;
				t.residual = sp == 3 ? 0 : 2;
				run_case(&t);
			}
}

/* Shapes the plan cuts into several row blocks or column blocks, decode
 * shapes that split W's rows between threads, and degenerate ones. */
static void test_plans(rt_pool *pool2)
{
	static const int64_t shapes[][3] = {{1, 1000, 2048}, {2, 515, 700}, {8, 300, 1100}, {9, 200, 999},
					    {300, 24, 1000}, {40, 300, 513}, {20, 700, 130}};
	for (int wt = 0; wt < 2; wt++) {
		for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
			for (int p = s < 2 ? 0 : 1; p < 2; p++) {
				tcase t = {(klowp_type)wt, shapes[s][0], shapes[s][1], shapes[s][2], 0, 0, 0, 1.0f};
				t.pool = p ? pool2 : NULL;
				t.bias_n = 1;
				run_case(&t);
			}
		/* K = 0: C = epilogue(0); M or N = 0: nothing written */
		tcase t = {(klowp_type)wt, 5, 7, 0, 0, 0, 1, 1.0f};
		t.bias_n = t.bias_m = 1;
		t.residual = 2;
		t.act = K_ACT_SIGMOID;
		run_case(&t);
		tcase z = {(klowp_type)wt, 0, 7, 9};
		run_case(&z);
		z.M = 3;
		z.N = 0;
		run_case(&z);
	}
}

/* Sizes from 71 rows (below the wide path: lowp_w_pack.bf16.c starts at 72,
 * at 40 when K <= 1024: those from 39 to 63 rows, K on both sides of 1024)
 * up, around that path's 12-row x 32-column tiles (a last panel of 1-4,
 * 5-8 and 9-11 rows each its own loop), its K blocks (of at
 * most 2048 k: K below, at and past one and several; odd K) and its W
 * blocks (64 columns when K is 2048, wider for smaller K), each size with
 * its own epilogue, strides and threads, then (bf16) on the other thread
 * count too. Shapes whose plans cut A's rows between tasks (few columns, 2
 * threads) are among them. */
static void test_wide(rt_pool *pool2)
{
	static const int64_t shapes[][3] = {
		{72, 32, 32},	{71, 45, 77},	 {73, 1, 5},	  {83, 17, 1},	  {84, 31, 2},	  {85, 33, 3},
		{95, 47, 255},	{96, 64, 256},	 {97, 65, 257},	  {107, 100, 31}, {72, 96, 2048}, {73, 129, 2049},
		{100, 600, 97}, {131, 544, 300}, {200, 100, 300}, {300, 40, 129}, {75, 70, 4097}, {97, 257, 1001},
		{80, 70, 2},	{90, 3, 600},
		{39, 64, 64},	{40, 33, 64},	 {41, 65, 1024},  {49, 96, 512},  {49, 64, 1025}, {52, 40, 200},
		{53, 70, 1000}, {63, 31, 129},	 {45, 130, 2100},
	};
	static const float alphas[] = {1.0f, 0.5f, -2.0f};
	for (int wt = 0; wt < 2; wt++) {
		for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
			tcase t = {(klowp_type)wt, shapes[s][0], shapes[s][1], shapes[s][2]};
			t.lda_pad = urand() % 2 ? 0 : 1 + urand() % 40;
			t.ldw_pad = urand() % 2 ? 0 : 1 + urand() % 40;
			t.ldc_pad = urand() % 2 ? 0 : 1 + urand() % 5;
			t.alpha = alphas[urand() % 3];
			t.bias_n = s % 2 == 0 || urand() % 2;
			t.bias_m = s % 3 == 0 || urand() % 3 == 0;
			t.residual = (int)(s % 3);
			t.act = (k_act)(urand() % (K_ACT_HARDSWISH + 1));
			t.misalign = urand() % 4 == 0;
			/* f16 (no wide path) on one thread count */
			for (int p = 0; p < (wt == KLOWP_BF16 ? 2 : 1); p++) {
				t.pool = (p + (int)s) % 2 ? pool2 : NULL;
				run_case(&t);
			}
		}
		/* NaN and Inf past the first K block and in the last column tile */
		static const int64_t special[][3] = {{80, 70, 2100}, {77, 45, 300}};
		for (size_t s = 0; s < sizeof special / sizeof special[0]; s++)
			for (int sp = 1; sp <= 3; sp++) {
				tcase t = {(klowp_type)wt, special[s][0], special[s][1], special[s][2], 1, 2, 1, 1.0f};
				t.pool = sp % 2 ? pool2 : NULL;
				t.bias_n = 1;
				t.residual = sp == 3 ? 0 : 2;
				run_case(&t);
			}
	}
}

static void test_kernel_names(void)
{
	const unsigned f = kcpu_features();
	const char *bf16 = kgemm_lowp_w_kernel_name(KLOWP_BF16), *f16 = kgemm_lowp_w_kernel_name(KLOWP_F16);
	printf("lowp_w kernels: bf16 %s, f16 %s (ISA %s)\n", bf16, f16, kcpu_isa_name());
	const char *want_bf16 = f & KCPU_AVX2 ? "avx2_cvt_fma" : "scalar";
#if defined(AIR_HAVE_AVX512BF16)
	const unsigned dot = KCPU_AVX512 | KCPU_AVX512BF16;
	if ((f & dot) == dot)
		want_bf16 = "avx512bf16_dot";
	/* unforced or AIR_ISA=avx512 on a CPU with AVX512-BF16: the dot path */
	const char *isa = getenv("AIR_ISA");
	if ((kcpu_detected() & dot) == dot && (!isa || !strcmp(isa, "avx512") || !strcmp(isa, "amx")))
		CHECK(strcmp(bf16, "avx512bf16_dot") == 0);
#endif
	const char *want_f16 = (f & KCPU_AVX2) && (f & KCPU_F16C) ? "avx2_cvt_fma" : "scalar";
	CHECK(strcmp(bf16, want_bf16) == 0);
	CHECK(strcmp(f16, want_f16) == 0);
}

int main(void)
{
	rt_pool *pool2 = NULL;
	CHECK(rt_pool_create(2, &pool2) == AIR_OK);
	test_kernel_names();
	test_grid(pool2);
	test_epilogues(pool2);
	test_special(pool2);
	test_plans(pool2);
	test_wide(pool2);
	rt_pool_destroy(pool2);
	return check_report("test_gemm_lowp_w");
}

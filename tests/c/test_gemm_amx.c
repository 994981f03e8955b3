/* test_gemm_amx.c - the AMX GEMM (kernels/gemm/amx.h) through
 * kgemm_f32_packed: that it runs where it should (kamx_passes), that its
 * error against f64 is no worse than an f32 dot product's, edges of M, N
 * and K blocks with every epilogue, a residual aliasing C over several K
 * blocks, and the operands it must leave to the f32 kernels (values out of
 * its range, NaN and Inf, alpha with a residual) with the rows it already
 * did kept. All of it twice: B split per call, and B split once when
 * packed (kgemm_packed_b_presplit). Under AIR_ISA=avx512 (or on a CPU without AMX) it checks that
 * the path is never taken and the answers are still right. */
#define _POSIX_C_SOURCE 200112L
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels/gemm/amx.h"
#include "kernels/gemm/gemm.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;

static float frand(void)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (float)((rng >> 40) & 0xffffff) / (float)0x800000 - 1.0f;
}

static float *floats(size_t n)
{
	float *p = malloc((n ? n : 1) * sizeof(float));
	if (!p)
		abort();
	for (size_t i = 0; i < n; i++)
		p[i] = frand();
	return p;
}

/* whether packed_gemm splits B for AMX once, when packing */
static int presplit;

/* C = epilogue(A @ B) through kgemm_f32_packed; returns the AMX passes it ran */
static uint64_t packed_gemm(int64_t M, int64_t N, int64_t K, const float *A, const float *B, float *C,
			    const k_epilogue *ep, rt_pool *pool)
{
	kgemm_packed_b *pb = NULL;
	CHECK_OK(kgemm_pack_b(K, N, B, N, 1, &pb));
	if (presplit) {
		/* it holds the split beside the panels exactly when the path
		 * can take B: the AMX split's 6 bytes a value more */
		const size_t before = kgemm_packed_b_bytes(pb);
		CHECK_OK(kgemm_packed_b_presplit(pb));
		const size_t more = kgemm_packed_b_bytes(pb) - before;
		CHECK(kamx_available() && kamx_in_range(B, (size_t)(K * N)) ? more >= (size_t)(K * N) * 6 : more == 0);
	}
	void *ws = malloc(kgemm_packed_workspace_bytes(M, N, K, rt_pool_size(pool)) + 1);
	uint64_t before = kamx_passes();
	kgemm_f32_packed(M, N, K, A, K, 1, pb, C, N, ep, pool, ws);
	free(ws);
	kgemm_packed_b_free(pb);
	return kamx_passes() - before;
}

/* Rows the checks look at (all of them against an f64-bounded reference
 * would take minutes under ASan): every third, those around 32-row panel
 * edges, test_declines' pass edges, and the last. */
static int checked(int64_t i, int64_t M)
{
	return i % 3 == 0 || i % 32 == 31 || (i >= 318 && i <= 322) || (i >= 638 && i <= 642) || i == 500 ||
	       i == M - 1;
}

/* kgemm_f32_reference on the checked rows */
static void reference(int64_t M, int64_t N, int64_t K, const float *A, const float *B, float *E, const k_epilogue *ep)
{
	for (int64_t i = 0; i < M; i++) {
		if (!checked(i, M))
			continue;
		k_epilogue e = *ep;
		if (e.residual)
			e.residual += i * e.ld_residual;
		if (e.bias_m)
			e.bias_m += i;
		kgemm_f32_reference(1, N, K, A + i * K, K, 1, B, N, 1, E + i * N, N, &e);
	}
}

/* the f32 bound of test_gemm.c: a K-term dot product's rounding */
static int64_t count_bad(int64_t M, int64_t N, int64_t K, const float *A, const float *B, const float *got,
			 const float *want, double extra)
{
	int64_t bad = 0;
	for (int64_t i = 0; i < M; i++)
		for (int64_t j = 0; j < N && checked(i, M); j++) {
			double s = 0;
			for (int64_t p = 0; p < K; p++)
				s += fabs((double)A[i * K + p] * B[p * N + j]);
			double tol = (double)(K + 4) * 6e-8 * (s + extra) + 4e-7 * fabs(want[i * N + j]) + 1e-6;
			double e = want[i * N + j], g = got[i * N + j];
			if (!(fabs(g - e) <= tol) && !(isnan(e) && isnan(g)) && !(isinf(e) && g == e))
				bad++;
		}
	return bad;
}

/* RMSE against f64 of the path and of a plain f32 dot product (SPEC.md
 * section 4: at most 2x eager's; a dot product is what eager's kernels do) */
static void test_accuracy(rt_pool *pool, int amx)
{
	const int64_t n = 512;
	float *A = floats((size_t)n * n), *B = floats((size_t)n * n), *C = malloc((size_t)n * n * 4);
	k_epilogue ep = k_epilogue_none();
	uint64_t passes = packed_gemm(n, n, n, A, B, C, &ep, pool);
	CHECK(amx ? passes == 1 : passes == 0);
	double e_path = 0, e_dot = 0;
	for (int64_t i = 0; i < n; i += 7)
		for (int64_t j = 0; j < n; j += 5) {
			double d = 0;
			float f = 0;
			for (int64_t p = 0; p < n; p++) {
				d += (double)A[i * n + p] * B[p * n + j];
				f = fmaf(A[i * n + p], B[p * n + j], f);
			}
			e_path += (C[i * n + j] - d) * (C[i * n + j] - d);
			e_dot += (f - d) * (f - d);
		}
	printf("  512^3 rmse against f64: this path %.3g, an f32 dot product %.3g (%s%s)\n", sqrt(e_path), sqrt(e_dot),
	       amx ? "amx" : "f32 kernels", amx && presplit ? ", B split when packed" : "");
	CHECK(e_path <= 4.0 * e_dot); /* squared: RMSE at most 2x */
	free(A);
	free(B);
	free(C);
}

/* edges of M and N, one to three K blocks, every epilogue, a residual
 * aliasing C, against the reference */
static void test_shapes(rt_pool *pool, int amx)
{
	static const int64_t shapes[][3] = {{512, 128, 64}, {520, 130, 600}, {530, 133, 1100}, {600, 600, 129},
					    {540, 300, 129}, {512, 256, 256}, {700, 170, 513}, {512, 600, 200}};
	static const k_act acts[] = {K_ACT_NONE, K_ACT_RELU, K_ACT_GELU, K_ACT_HARDSWISH};
	for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
		const int64_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
		float *A = floats((size_t)(M * K)), *B = floats((size_t)(K * N)), *R = floats((size_t)(M * N));
		float *bn = floats((size_t)N), *bm = floats((size_t)M);
		float *C = malloc((size_t)(M * N) * 4), *E = malloc((size_t)(M * N) * 4);
		for (int variant = 0; variant < 5; variant++) {
			k_epilogue ep = k_epilogue_none();
			ep.act = acts[variant % 4];
			if (variant == 1)
				ep.bias_n = bn;
			if (variant == 2) {
				ep.bias_m = bm;
				ep.alpha = 0.5f;
			}
			if (variant >= 3) {
				ep.residual = R;
				ep.ld_residual = N;
				ep.bias_n = bn;
			}
			reference(M, N, K, A, B, E, &ep);
			if (variant == 4) { /* the residual is C */
				memcpy(C, R, (size_t)(M * N) * 4);
				ep.residual = C;
			}
			uint64_t passes = packed_gemm(M, N, K, A, B, C, &ep, pool);
			int64_t bad = count_bad(M, N, K, A, B, C, E, 2.0);
			CHECK(bad == 0);
			CHECK(amx ? passes >= 1 : passes == 0);
			if (bad)
				fprintf(stderr, "  %lldx%lldx%lld variant %d threads %d: %lld bad\n", (long long)M,
					(long long)N, (long long)K, variant, rt_pool_size(pool), (long long)bad);
		}
		free(A);
		free(B);
		free(R);
		free(bn);
		free(bm);
		free(C);
		free(E);
	}
}

/* what the path must leave to the f32 kernels */
static void test_declines(rt_pool *pool, int amx)
{
	/* K 4096: passes of 320 rows; a value out of range in the second
	 * pass's rows: the first pass is AMX's, the rest the f32 kernels',
	 * and the residual (C itself) is added once */
	const int64_t M = 700, N = 130, K = 4096;
	float *A = floats((size_t)(M * K)), *B = floats((size_t)(K * N)), *R = floats((size_t)(M * N));
	float *C = malloc((size_t)(M * N) * 4), *E = malloc((size_t)(M * N) * 4);
	A[500 * K + 7] = 1e-20f;
	k_epilogue ep = k_epilogue_none();
	ep.residual = R;
	ep.ld_residual = N;
	reference(M, N, K, A, B, E, &ep);
	memcpy(C, R, (size_t)(M * N) * 4);
	ep.residual = C;
	uint64_t passes = packed_gemm(M, N, K, A, B, C, &ep, pool);
	CHECK(count_bad(M, N, K, A, B, C, E, 2.0) == 0);
	CHECK(amx ? passes == 1 : passes == 0);

	/* NaN and Inf in A (first pass): all of it to the f32 kernels */
	A[500 * K + 7] = 0.5f;
	A[3 * K + 1] = NAN;
	A[9 * K + 2] = INFINITY;
	ep = k_epilogue_none();
	reference(M, N, K, A, B, E, &ep);
	passes = packed_gemm(M, N, K, A, B, C, &ep, pool);
	CHECK(passes == 0);
	CHECK(isnan(C[3 * N]) && isinf(C[9 * N + 1]) == isinf(E[9 * N + 1]));
	CHECK(count_bad(M, N, K, A, B, C, E, 2.0) == 0);
	A[3 * K + 1] = 0.25f;
	A[9 * K + 2] = 0.25f;

	/* a tiny weight: B is left out when packed */
	B[5 * N + 3] = 3e-13f;
	reference(M, N, K, A, B, E, &ep);
	passes = packed_gemm(M, N, K, A, B, C, &ep, pool);
	CHECK(passes == 0);
	CHECK(count_bad(M, N, K, A, B, C, E, 2.0) == 0);
	B[5 * N + 3] = 0.0f; /* zero is in range */
	reference(M, N, K, A, B, E, &ep);
	passes = packed_gemm(M, N, K, A, B, C, &ep, pool);
	CHECK(amx ? passes == 3 : passes == 0);
	CHECK(count_bad(M, N, K, A, B, C, E, 2.0) == 0);

	/* alpha with a residual over several K blocks */
	ep.alpha = 0.75f;
	ep.residual = R;
	ep.ld_residual = N;
	reference(M, N, K, A, B, E, &ep);
	passes = packed_gemm(M, N, K, A, B, C, &ep, pool);
	CHECK(passes == 0);
	CHECK(count_bad(M, N, K, A, B, C, E, 2.0) == 0);
	free(A);
	free(B);
	free(R);
	free(C);
	free(E);
}

/* kamx_gemm_bt: B read transposed, as linear_rows passes a weight */
static void test_transposed_b(rt_pool *pool, int amx)
{
	static const int64_t shapes[][3] = {{512, 130, 600}, {520, 600, 129}, {600, 520, 1100}};
	for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
		const int64_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
		float *A = floats((size_t)(M * K)), *W = floats((size_t)(N * K)), *R = floats((size_t)(M * N));
		float *B = malloc((size_t)(K * N) * 4), *bn = floats((size_t)N);
		float *C = malloc((size_t)(M * N) * 4), *E = malloc((size_t)(M * N) * 4);
		for (int64_t n = 0; n < N; n++)
			for (int64_t k = 0; k < K; k++)
				B[k * N + n] = W[n * K + k];
		k_epilogue ep = k_epilogue_none();
		ep.bias_n = bn;
		ep.residual = R;
		ep.ld_residual = N;
		ep.act = K_ACT_GELU;
		reference(M, N, K, A, B, E, &ep);
		void *ws = malloc(kamx_workspace_bytes(M, N, K, rt_pool_size(pool)) + 1);
		int64_t done = kamx_gemm_bt(M, N, K, A, K, W, K, C, N, &ep, pool, ws);
		CHECK(kamx_wanted(M, N, K));
		CHECK(done == (amx ? M : 0));
		if (done == M)
			CHECK(count_bad(M, N, K, A, B, C, E, 2.0) == 0);
		/* a weight out of range: declined */
		W[(N - 1) * K + K - 1] = 1e30f;
		if (amx)
			CHECK(kamx_gemm_bt(M, N, K, A, K, W, K, C, N, &ep, pool, ws) == 0);
		free(ws);
		free(A);
		free(W);
		free(R);
		free(B);
		free(bn);
		free(C);
		free(E);
	}
}

int main(void)
{
	const int amx = kamx_available();
	printf("test_gemm_amx: AMX path %s\n", amx ? "available" : "not available (checks it is never taken)");
	if (!amx)
		CHECK(kamx_workspace_bytes(1024, 1024, 1024, 2) == 0);
	for (presplit = 0; presplit <= 1; presplit++)
		for (int threads = 1; threads <= 3; threads++) {
			rt_pool *pool = NULL;
			if (threads > 1)
				CHECK_OK(rt_pool_create(threads, &pool));
			test_accuracy(pool, amx);
			test_shapes(pool, amx);
			if (!presplit)
				test_transposed_b(pool, amx);
			if (threads == 2) /* long: once */
				test_declines(pool, amx);
			rt_pool_destroy(pool);
		}
	return check_report("test_gemm_amx");
}

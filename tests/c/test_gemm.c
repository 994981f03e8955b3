/* test_gemm.c - the f32 GEMM (unpacked, prepacked, batched) against the
 * reference: awkward sizes (0, 1, primes, not multiples of the tile, several
 * cache blocks), transposed and strided operands, ldc > N, every epilogue
 * (incl. a residual that aliases C), and 1, 2, 3 threads. Also checks that
 * nothing outside the M x N output is written, that the workspace size
 * asked for is enough (run it under ASan: buffers are allocated exactly),
 * and that a misaligned workspace still works. */
#define _POSIX_C_SOURCE 200112L
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels/common/cpu.h"
#include "kernels/gemm/gemm.h"
#include "kernels/vmath/vmath.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static float frand(void)
{
	rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
	return (float)((rng_state >> 40) & 0xffffff) / (float)0x800000 - 1.0f; /* [-1, 1) */
}

static float *alloc_floats(size_t n)
{
	void *p = NULL;
	if (posix_memalign(&p, 64, (n ? n : 1) * sizeof(float)) != 0)
		abort();
	return p;
}

static void *alloc_ws(size_t bytes)
{
	void *p = NULL;
	/* exactly the bytes asked for, so ASan sees any overrun */
	if (bytes && posix_memalign(&p, 64, bytes) != 0)
		abort();
	return p;
}

static const float SENTINEL = -12345.0f;

enum path { PATH_UNPACKED, PATH_PACKED, PATH_BATCHED, PATH_B_IN_PLACE };
static const char *const path_names[] = {"unpacked", "packed", "batched", "B in place"};

enum layout { ROW_MAJOR, TRANSPOSED, STRIDED };

typedef struct gcase {
	int64_t M, N, K;
	enum layout la, lb;
	int64_t ldc_pad;
	int bias_n, bias_m;
	int residual; /* 0 none, 1 separate, 2 aliasing C */
	float alpha;
	k_act act;
	int64_t batch; /* for PATH_BATCHED */
} gcase;

/* Operand storage with the requested layout: element (i, j) of a rows x cols
 * matrix is at base[i * rs + j * cs]. */
static float *make_operand(int64_t rows, int64_t cols, enum layout l, int64_t *rs, int64_t *cs, size_t *n)
{
	switch (l) {
	case ROW_MAJOR:
		*rs = cols + 3;
		*cs = 1;
		break;
	case TRANSPOSED:
		*rs = 1;
		*cs = rows + 2;
		break;
	case STRIDED:
		/* neither stride is 1: every other column, padded rows */
		*rs = 2 * cols + 1;
		*cs = 2;
		break;
	}
	*n = (size_t)(rows > 0 && cols > 0 ? (rows - 1) * *rs + (cols - 1) * *cs + 1 : 1);
	float *p = alloc_floats(*n);
	for (size_t i = 0; i < *n; i++)
		p[i] = frand();
	return p;
}

static double act_slope(k_act act)
{
	/* a bound of |act'|, to carry the product's error through */
	return act == K_ACT_HARDSWISH ? 1.5 : 1.2;
}

static int64_t failures_reported;

static void run_case(const gcase *g, enum path path, rt_pool *pool)
{
	const int64_t M = g->M, N = g->N, K = g->K;
	const int64_t batch = path == PATH_BATCHED ? g->batch : 1;
	const int64_t ldc = N + g->ldc_pad;
	int64_t rs_a, cs_a, rs_b, cs_b;
	size_t na, nb;
	/* one operand allocation per batch item, laid end to end */
	float *A0 = make_operand(M, K, g->la, &rs_a, &cs_a, &na);
	float *B0 = make_operand(K, N, g->lb, &rs_b, &cs_b, &nb);
	float *A = alloc_floats(na * batch), *B = alloc_floats(nb * batch);
	for (int64_t b = 0; b < batch; b++) {
		for (size_t i = 0; i < na; i++)
			A[b * na + i] = b ? frand() : A0[i];
		for (size_t i = 0; i < nb; i++)
			B[b * nb + i] = b ? frand() : B0[i];
	}
	free(A0);
	free(B0);
	const int64_t bs_c = M * ldc + 5;
	const size_t nc = (size_t)(bs_c * batch + 1);
	float *C = alloc_floats(nc), *R = alloc_floats(nc), *E = alloc_floats(nc);
	for (size_t i = 0; i < nc; i++) {
		C[i] = SENTINEL;
		R[i] = frand();
	}
	float *bias_n = alloc_floats((size_t)N + 1), *bias_m = alloc_floats((size_t)M + 1);
	for (int64_t j = 0; j < N; j++)
		bias_n[j] = frand();
	for (int64_t i = 0; i < M; i++)
		bias_m[i] = frand();

	k_epilogue ep = k_epilogue_none();
	ep.alpha = g->alpha;
	ep.act = g->act;
	ep.bias_n = g->bias_n ? bias_n : NULL;
	ep.bias_m = g->bias_m ? bias_m : NULL;
	if (g->residual) {
		ep.residual = R;
		ep.ld_residual = ldc;
	}
	/* expected values, one item at a time, against a separate residual */
	for (int64_t b = 0; b < batch; b++) {
		k_epilogue e = ep;
		if (e.residual)
			e.residual = R + b * bs_c;
		kgemm_f32_reference(M, N, K, A + b * na, rs_a, cs_a, B + b * nb, rs_b, cs_b, E + b * bs_c, ldc, &e);
	}
	if (g->residual == 2) {
		/* the residual is C itself */
		for (int64_t b = 0; b < batch; b++)
			for (int64_t i = 0; i < M; i++)
				for (int64_t j = 0; j < N; j++)
					C[b * bs_c + i * ldc + j] = R[b * bs_c + i * ldc + j];
		ep.residual = C;
	}

	const int nthreads = rt_pool_size(pool);
	void *ws = NULL;
	if (path == PATH_UNPACKED) {
		/* some calls get a workspace that is not even 8-byte aligned */
		size_t skew = (size_t)((M + N) % 2) * 4;
		ws = alloc_ws(kgemm_workspace_bytes(M, N, K, cs_a, nthreads) + skew);
		kgemm_f32(M, N, K, A, rs_a, cs_a, B, rs_b, cs_b, C, ldc, &ep, pool, ws ? (char *)ws + skew : NULL);
	} else if (path == PATH_PACKED) {
		kgemm_packed_b *pb = NULL;
		CHECK_OK(kgemm_pack_b(K, N, B, rs_b, cs_b, &pb));
		CHECK(kgemm_packed_b_bytes(pb) >= (size_t)(K * N) * sizeof(float));
		ws = alloc_ws(kgemm_packed_workspace_bytes(M, N, K, nthreads));
		CHECK(kgemm_packed_workspace_bytes(M, N, K, nthreads) <= kgemm_workspace_bytes(M, N, K, 1, nthreads));
		if (pb)
			kgemm_f32_packed(M, N, K, A, rs_a, cs_a, pb, C, ldc, &ep, pool, ws);
		kgemm_packed_b_free(pb);
	} else if (path == PATH_B_IN_PLACE) {
		/* row-major A and B (cs 1); a kernel without the path (the
		 * portable one) says so and writes nothing */
		int done = kgemm_f32_b_in_place(M, N, K, A, rs_a, B, rs_b, C, ldc, &ep, pool);
		CHECK(done == kgemm_b_in_place_available());
		if (!done) /* nothing to compare: the expected values in place */
			for (int64_t i = 0; i < M; i++)
				for (int64_t j = 0; j < N; j++)
					C[i * ldc + j] = E[i * ldc + j];
	} else {
		ws = alloc_ws(kgemm_batched_workspace_bytes(batch, M, N, K, nthreads));
		kgemm_f32_batched(batch, M, N, K, A, (int64_t)na, rs_a, cs_a, B, (int64_t)nb, rs_b, cs_b, C, bs_c,
				  ldc, &ep, pool, ws);
	}

	/* compare, with a bound of the float error of a K-term dot product */
	int64_t bad = 0, outside = 0;
	double worst = 0.0;
	for (int64_t b = 0; b < batch; b++) {
		const float *Ab = A + b * na, *Bb = B + b * nb;
		for (int64_t i = 0; i < M; i++) {
			for (int64_t j = 0; j < N; j++) {
				double s = 0.0;
				for (int64_t p = 0; p < K; p++)
					s += fabs((double)Ab[i * rs_a + p * cs_a] * Bb[p * rs_b + j * cs_b]);
				s *= fabs(g->alpha);
				s += (g->bias_n ? fabs(bias_n[j]) : 0) + (g->bias_m ? fabs(bias_m[i]) : 0) +
				     (g->residual ? fabs(R[b * bs_c + i * ldc + j]) : 0);
				double e = E[b * bs_c + i * ldc + j], got = C[b * bs_c + i * ldc + j];
				double tol = act_slope(g->act) * (double)(K + 4) * 6e-8 * s + 4e-7 * fabs(e) + 1e-6;
				double err = fabs(got - e);
				if (!(err <= tol))
					bad++;
				if (err / tol > worst)
					worst = err / tol;
			}
			for (int64_t j = N; j < ldc; j++)
				outside += C[b * bs_c + i * ldc + j] != SENTINEL;
		}
		for (int64_t t = M * ldc; t < bs_c; t++)
			outside += C[b * bs_c + t] != SENTINEL;
	}
	CHECK(bad == 0);
	CHECK(outside == 0);
	if ((bad || outside) && failures_reported++ < 20)
		fprintf(stderr,
			"  %s threads=%d batch=%lld M=%lld N=%lld K=%lld la=%d lb=%d ldc+%lld bias_n=%d bias_m=%d "
			"res=%d alpha=%g act=%d: %lld bad (worst err/tol %.3g), %lld written outside\n",
			path_names[path], nthreads, (long long)batch, (long long)M, (long long)N, (long long)K, g->la,
			g->lb, (long long)g->ldc_pad, g->bias_n, g->bias_m, g->residual, g->alpha, g->act,
			(long long)bad, worst, (long long)outside);
	free(ws);
	free(A);
	free(B);
	free(C);
	free(R);
	free(E);
	free(bias_n);
	free(bias_m);
}

static void run_all_paths(gcase g, rt_pool *pool)
{
	run_case(&g, PATH_UNPACKED, pool);
	run_case(&g, PATH_PACKED, pool);
	run_case(&g, PATH_BATCHED, pool);
	if (g.la == ROW_MAJOR && g.lb == ROW_MAJOR)
		run_case(&g, PATH_B_IN_PLACE, pool);
}

static void test_shapes(rt_pool *pool)
{
	/* sizes around the 6x16 / 4x16 / 14x32 tiles (and the 4x4 dot tile of
	 * thin products), primes, and K around the vector width */
	static const int64_t Ms[] = {0, 1, 2, 3, 4, 5, 6, 7, 11, 13, 14, 15, 16, 17, 24, 29, 37, 61};
	static const int64_t Ns[] = {0, 1, 3, 8, 9, 15, 16, 17, 31, 32, 33, 47, 48, 63, 65};
	static const int64_t Ks[] = {0, 1, 2, 5, 17, 64};
	for (size_t a = 0; a < sizeof Ms / sizeof Ms[0]; a++)
		for (size_t b = 0; b < sizeof Ns / sizeof Ns[0]; b++)
			for (size_t c = 0; c < sizeof Ks / sizeof Ks[0]; c++) {
				gcase g = {Ms[a], Ns[b], Ks[c], ROW_MAJOR, ROW_MAJOR, 0, 0, 0, 0, 1.0f, K_ACT_NONE, 2};
				/* vary the rest deterministically over the grid */
				size_t v = a * 7 + b * 3 + c;
				g.la = (enum layout)(v % 3);
				g.lb = (enum layout)((v / 3) % 3);
				g.ldc_pad = (int64_t)(v % 4) * 5;
				g.bias_n = (v % 2) != 0;
				g.bias_m = (v % 5) == 1;
				g.residual = (int)(v % 3);
				g.alpha = (v % 4) == 3 ? -0.5f : 1.0f;
				g.act = (k_act)(v % 9);
				g.batch = 1 + (int64_t)(v % 3);
				run_all_paths(g, pool);
			}
}

static void test_blocks(rt_pool *pool)
{
	/* several K blocks (with the residual folded in on the first one), several
	 * M and N blocks, and thin/wide extremes */
	static const int64_t shapes[][3] = {
		{1, 1000, 300},  {2, 257, 513}, {145, 33, 257}, {150, 150, 600}, {289, 47, 129},
		{7, 1031, 97},   {300, 18, 40}, {64, 64, 64},   {1, 1, 1000},    {97, 1, 263},
		{128, 96, 768},  {13, 200, 256}, {16, 65, 2049}, {31, 130, 47},  {29, 1100, 33},
		{3, 67, 4099},   {200, 300, 70}, {15, 33, 31},
	};
	for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
		for (int act = 0; act < 9; act += 4) {
			gcase g = {shapes[s][0], shapes[s][1], shapes[s][2], ROW_MAJOR, TRANSPOSED, 3, 1, 0, 2,
				   1.0f, (k_act)act, 2};
			g.la = (enum layout)(s % 3);
			g.lb = (enum layout)((s + act) % 3);
			g.residual = (int)((s + act / 4) % 3);
			run_all_paths(g, pool);
		}
	}
}

/* Tasks at least 256 columns wide pack a row-major A when the kernel has a
 * fast packing (gemm.c, kgemm_reads_a_in_place): rows past the last full
 * panel, K past a multiple of 4 and past a K block, lda = K + 3 (unaligned
 * rows). All of them pack with 1 thread; 13 x 2048 and 61 x 4100 also with
 * 2 and 3 (tasks 352 to 1056 columns wide). */
static void test_packed_a(rt_pool *pool)
{
	static const int64_t shapes[][3] = {{29, 1100, 33}, {13, 2048, 70}, {37, 600, 515}, {61, 4100, 301}};
	for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
		gcase g = {shapes[s][0], shapes[s][1], shapes[s][2], ROW_MAJOR, ROW_MAJOR, 1, (int)(s % 2), 0,
			   (int)(s % 3), 1.0f, s % 2 ? K_ACT_GELU : K_ACT_RELU, 2};
		run_case(&g, PATH_PACKED, pool);
		run_case(&g, PATH_UNPACKED, pool);
		run_case(&g, PATH_B_IN_PLACE, pool); /* no workspace: A stays in place */
	}
}

/* A that is not row-major, shared by several column blocks of tasks, is
 * packed whole before the products (pack.c, kgemm_share_a): weight
 * gradients' g^T @ x, with rows past the last full panel, several K blocks
 * (the last one short) and, for 2 and 3 threads, N split. Also strided A. */
static void test_shared_a(rt_pool *pool)
{
	static const int64_t shapes[][3] = {{193, 770, 600}, {770, 190, 531}, {37, 400, 1100}, {12, 64, 257}};
	for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
		gcase g = {shapes[s][0], shapes[s][1], shapes[s][2], TRANSPOSED, ROW_MAJOR, (int64_t)s, (int)(s % 2),
			   (int)(s == 2), (int)(s % 3), 1.0f, s % 2 ? K_ACT_RELU : K_ACT_NONE, 1};
		run_case(&g, PATH_UNPACKED, pool);
		g.lb = TRANSPOSED; /* B packed beforehand instead of as the tiles go */
		run_case(&g, PATH_UNPACKED, pool);
		g.la = STRIDED;
		run_case(&g, PATH_UNPACKED, pool);
	}
}

static void test_epilogues(rt_pool *pool)
{
	/* every activation with every bias/residual combination on a tile edge */
	for (int act = 0; act < 9; act++)
		for (int mask = 0; mask < 16; mask++) {
			gcase g = {23, 37, 300, ROW_MAJOR, ROW_MAJOR, 4, mask & 1, (mask >> 1) & 1, (mask >> 2) % 3,
				   (mask & 8) ? 0.25f : 1.0f, (k_act)act, 2};
			if ((mask >> 2) == 3)
				g.residual = 2;
			run_case(&g, mask % 3 == 0 ? PATH_UNPACKED : mask % 3 == 1 ? PATH_PACKED : PATH_BATCHED,
				 pool);
			run_case(&g, PATH_B_IN_PLACE, pool);
		}
}

static void test_api(void)
{
	kgemm_packed_b *pb = (kgemm_packed_b *)&pb;
	float b[4] = {1, 2, 3, 4};
	CHECK(kgemm_pack_b(2, 2, b, 2, 1, NULL) == AIR_INVALID_ARGUMENT);
	CHECK(kgemm_pack_b(-1, 2, b, 2, 1, &pb) == AIR_INVALID_ARGUMENT);
	CHECK(pb == NULL);
	CHECK(kgemm_pack_b(2, 2, NULL, 2, 1, &pb) == AIR_INVALID_ARGUMENT);
	CHECK_OK(kgemm_pack_b(0, 5, NULL, 5, 1, &pb));
	kgemm_packed_b_free(pb);
	kgemm_packed_b_free(NULL);
	CHECK(kgemm_packed_b_bytes(NULL) == 0);
	CHECK(kgemm_workspace_bytes(0, 10, 10, 1, 2) == 0);

	/* the dispatch follows kcpu_features() (AIR_ISA) */
	const char *name = kgemm_kernel_name();
	if ((kcpu_features() & KCPU_AVX512) == KCPU_AVX512)
		CHECK(strncmp(name, "avx512", 6) == 0);
	else if (kcpu_features() & KCPU_AVX2)
		CHECK(strncmp(name, "avx2", 4) == 0);
	else
		CHECK(strncmp(name, "scalar", 6) == 0);
	printf("test_gemm: kernel %s (isa %s)\n", name, kcpu_isa_name());

	/* a NULL epilogue is the identity; K == 0 gives the epilogue of zero */
	float a[2] = {1, 2}, c[2] = {0, 0};
	float bb[2] = {3, 4};
	void *ws = alloc_ws(kgemm_workspace_bytes(1, 1, 2, 1, 1));
	kgemm_f32(1, 1, 2, a, 2, 1, bb, 1, 1, c, 1, NULL, NULL, ws);
	CHECK(c[0] == 11.0f);
	free(ws);
	float bias = 2.0f;
	k_epilogue ep = k_epilogue_none();
	ep.bias_n = &bias;
	ep.act = K_ACT_RELU6;
	c[0] = -1;
	kgemm_f32(1, 1, 0, a, 1, 1, bb, 1, 1, c, 1, &ep, NULL, NULL);
	CHECK(c[0] == 2.0f);
}

/* NaN in the product stays NaN through relu, relu6 and hardswish, as in
 * torch (max/min with the NaN as the second operand would give 0 or 6). Tile
 * sizes cover full micro-tiles and the masked edges of every kernel. */
static void test_act_nan(void)
{
	const k_act acts[] = {K_ACT_RELU, K_ACT_RELU6, K_ACT_HARDSWISH};
	enum { M = 29, N = 70, K = 3 };
	float A[M * K], B[K * N], C[M * N];
	for (int i = 0; i < M * K; i++)
		A[i] = (float)(i % 5) - 2.0f;
	for (int i = 0; i < K * N; i++)
		B[i] = (float)(i % 7) - 3.0f;
	A[4 * K + 1] = NAN; /* row 4 is all NaN */
	for (size_t a = 0; a < sizeof acts / sizeof acts[0]; a++) {
		k_epilogue ep = k_epilogue_none();
		ep.act = acts[a];
		void *ws = alloc_ws(kgemm_workspace_bytes(M, N, K, 1, 1));
		kgemm_f32(M, N, K, A, K, 1, B, N, 1, C, N, &ep, NULL, ws);
		free(ws);
		int nan_ok = 1;
		for (int j = 0; j < N; j++)
			nan_ok &= isnan(C[4 * N + j]);
		CHECK(nan_ok);
		CHECK(!isnan(C[5 * N + 3]));
		kgemm_packed_b *pb = NULL;
		CHECK_OK(kgemm_pack_b(K, N, B, N, 1, &pb));
		ws = alloc_ws(kgemm_workspace_bytes(M, N, K, 1, 1));
		kgemm_f32_packed(M, N, K, A, K, 1, pb, C, N, &ep, NULL, ws);
		free(ws);
		kgemm_packed_b_free(pb);
		nan_ok = 1;
		for (int j = 0; j < N; j++)
			nan_ok &= isnan(C[4 * N + j]);
		CHECK(nan_ok);
	}
}

/* A fused transcendental activation gives bitwise what the standalone op
 * (vmath's kernel, run over the plain product) gives, on every ISA: K = 1
 * and power-of-two B make C exactly A's values scaled, from tiny to past
 * GELU's clamp, with signed zeros, infinities and NaN. Tile edges in both
 * dimensions (M 29, N 45). */
static void test_act_matches_standalone(void)
{
	const k_act acts[] = {K_ACT_GELU, K_ACT_GELU_TANH, K_ACT_SILU, K_ACT_SIGMOID, K_ACT_TANH};
	const kv_func funcs[] = {KV_gelu, KV_gelu_tanh, KV_silu, KV_sigmoid, KV_tanh};
	enum { M = 29, N = 45, K = 1 };
	float A[M], B[N], fused[M * N], plain[M * N];
	const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-30f, -1e-30f, 14.9f, -14.9f, 40.0f, -40.0f};
	for (int i = 0; i < M; i++)
		A[i] = i < (int)(sizeof special / sizeof special[0]) ? special[i] : (float)(i - 20) * 0.77f;
	for (int j = 0; j < N; j++)
		B[j] = ldexpf(j % 2 ? -1.0f : 1.0f, j % 9 - 4); /* +-2^-4 .. 2^4: products exact */
	for (size_t a = 0; a < sizeof acts / sizeof acts[0]; a++) {
		k_epilogue ep = k_epilogue_none();
		void *ws = alloc_ws(kgemm_workspace_bytes(M, N, K, 1, 1));
		kgemm_f32(M, N, K, A, K, 1, B, N, 1, plain, N, &ep, NULL, ws);
		ep.act = acts[a];
		kgemm_f32(M, N, K, A, K, 1, B, N, 1, fused, N, &ep, NULL, ws);
		free(ws);
		kv_unary(funcs[a])(plain, plain, M * N);
		int same = 0;
		for (int i = 0; i < M * N; i++)
			same += (isnan(fused[i]) && isnan(plain[i])) || memcmp(&fused[i], &plain[i], sizeof(float)) == 0;
		CHECK(same == M * N);
		if (same != M * N)
			fprintf(stderr, "act %d: %d of %d differ from the standalone op\n", (int)acts[a], M * N - same,
				M * N);
	}
}

/* B packed block by block into caller memory (rows in parts, columns in
 * whole panels), each column scaled on the way, multiplies exactly as B
 * scaled first (in double, rounded once) and packed whole. */
static void test_pack_blocks(void)
{
	const int64_t M = 9, K = 37, N = 3 * kgemm_tile_cols() + 5, nr = kgemm_tile_cols();
	float *A = alloc_floats((size_t)(M * K)), *Bt = alloc_floats((size_t)(N * K));
	float *scaled = alloc_floats((size_t)(N * K)), *c1 = alloc_floats((size_t)(M * N));
	float *c2 = alloc_floats((size_t)(M * N));
	double *scale = malloc(sizeof(double) * (size_t)N);
	for (int64_t i = 0; i < M * K; i++)
		A[i] = frand();
	for (int64_t j = 0; j < N; j++) {
		scale[j] = 0.5 + (double)j / 7.0;
		for (int64_t p = 0; p < K; p++) {
			Bt[j * K + p] = frand(); /* B[p][j], stored transposed like a weight */
			scaled[j * K + p] = (float)((double)Bt[j * K + p] * scale[j]);
		}
	}
	kgemm_packed_b *whole = NULL;
	CHECK_OK(kgemm_pack_b(K, N, scaled, 1, K, &whole));
	void *mem = alloc_ws(kgemm_packed_b_size(K, N));
	kgemm_packed_b *parts = kgemm_packed_b_init(mem, K, N);
	CHECK(kgemm_packed_b_bytes(parts) >= kgemm_packed_b_bytes(whole));
	for (int64_t p0 = 0; p0 < K; p0 += 10)
		for (int64_t j0 = 0; j0 < N; j0 += 2 * nr)
			kgemm_pack_b_block(parts, p0, K - p0 < 10 ? K - p0 : 10, j0, N < j0 + 2 * nr ? N : j0 + 2 * nr,
					   Bt + j0 * K + p0, 1, K, scale + j0);
	void *ws = alloc_ws(kgemm_packed_workspace_bytes(M, N, K, 1));
	kgemm_f32_packed(M, N, K, A, K, 1, whole, c1, N, NULL, NULL, ws);
	kgemm_f32_packed(M, N, K, A, K, 1, parts, c2, N, NULL, NULL, ws);
	CHECK(memcmp(c1, c2, sizeof(float) * (size_t)(M * N)) == 0);
	kgemm_packed_b_free(whole);
	free(A), free(Bt), free(scaled), free(c1), free(c2), free(scale), free(mem), free(ws);
}

int main(void)
{
	test_api();
	test_pack_blocks();
	test_act_nan();
	test_act_matches_standalone();
	for (int nt = 1; nt <= 3; nt++) {
		rt_pool *pool = NULL;
		CHECK_OK(rt_pool_create(nt, &pool));
		test_shapes(pool);
		test_blocks(pool);
		test_packed_a(pool);
		test_shared_a(pool);
		test_epilogues(pool);
		rt_pool_destroy(pool);
	}
	/* no pool at all */
	gcase g = {61, 47, 129, TRANSPOSED, STRIDED, 1, 1, 1, 2, 2.0f, K_ACT_GELU, 3};
	run_all_paths(g, NULL);
	return check_report("test_gemm");
}

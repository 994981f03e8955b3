/* test_ops_linalg.c - mm, bmm, addmm, linear and sdpa through the public
 * API, against values computed here in double: awkward sizes (0, 1,
 * primes), f32 and f64, constant and non-constant weights, symbolic batch
 * sizes run at two sizes, and errors at build and run time. Every graph is
 * compiled twice, with the reference kernels only and with the fast ones,
 * and both are checked (and checked against each other). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels/common/half.h"
#include "op_harness.h"

static double tol_for(air_dtype dt)
{
	return dt == AIR_F32 ? 3e-5 : 1e-12;
}

/* Compiles op on args with the reference kernels and with the default
 * (fast) ones, runs both, checks the output shape and values against
 * want/mag, and the two results against each other. */
static void check_op(const char *label, const char *op, const th_arg *args, int n, const air_attr *attrs, int na,
		     int rank, const int64_t *dims, const double *want, const double *mag, double tol_rel)
{
	void *res[2] = {NULL, NULL};
	air_dtype dt = AIR_F32;
	int64_t numel = 1;
	for (int d = 0; d < rank; d++)
		numel *= dims[d];
	for (int pass = 0; pass < 2; pass++) {
		air_model *m = th_compile(op, args, n, attrs, na, pass == 0 ? AIR_COMPILE_REFERENCE_KERNELS : 0);
		if (!m)
			return;
		air_model_output_info(m, 0, &dt, NULL, NULL);
		if (pass == 1 && dt == AIR_F32) {
			/* make sure the fast kernel is the one under test */
			char ref[64];
			snprintf(ref, sizeof ref, " %s_ref ", op);
			CHECK(strstr(air_model_report(m), ref) == NULL);
		}
		int r;
		int64_t got[AIR_MAX_RANK];
		res[pass] = th_run(m, args, n, &r, got);
		air_model_destroy(m);
		if (!res[pass])
			continue;
		CHECK(r == rank);
		for (int d = 0; d < rank && d < r; d++)
			CHECK(got[d] == dims[d]);
		char buf[256];
		snprintf(buf, sizeof buf, "%s [%s]", label, pass == 0 ? "reference" : "fast");
		th_compare(buf, dt, res[pass], want, mag, numel, tol_rel, tol_rel * 1e-1);
	}
	if (res[0] && res[1]) {
		double *ref = malloc(sizeof(double) * (size_t)(numel ? numel : 1));
		for (int64_t i = 0; i < numel; i++)
			ref[i] = dt == AIR_F32 ? ((float *)res[0])[i] : ((double *)res[0])[i];
		char buf[256];
		snprintf(buf, sizeof buf, "%s [fast vs reference]", label);
		th_compare(buf, dt, res[1], ref, mag, numel, 2 * tol_rel, tol_rel * 1e-1);
		free(ref);
	}
	free(res[0]);
	free(res[1]);
}

/* want(b, i, j) = alpha * sum_k A(b, i, k) B(b, k, j) + beta * bias(i, j),
 * and mag the same sum over magnitudes. B(k, j) = b[k * b_rs + j * b_cs]. */
static void expect_mm(int64_t batch, int64_t M, int64_t N, int64_t K, const double *a, const double *b, int64_t b_rs,
		      int64_t b_cs, double alpha, const double *bias, int64_t bias_rs, int64_t bias_cs, double beta,
		      double *want, double *mag)
{
	for (int64_t bi = 0; bi < batch; bi++)
		for (int64_t i = 0; i < M; i++)
			for (int64_t j = 0; j < N; j++) {
				double s = 0, m = 0;
				for (int64_t k = 0; k < K; k++) {
					double t = a[(bi * M + i) * K + k] * b[bi * K * N + k * b_rs + j * b_cs];
					s += t;
					m += fabs(t);
				}
				s *= alpha;
				m *= fabs(alpha);
				if (bias && beta != 0) {
					s += beta * bias[i * bias_rs + j * bias_cs];
					m += fabs(beta * bias[i * bias_rs + j * bias_cs]);
				}
				want[(bi * M + i) * N + j] = s;
				mag[(bi * M + i) * N + j] = m;
			}
}

static const int64_t mm_sizes[][3] = {
	{1, 1, 1}, {3, 5, 7}, {0, 4, 5}, {4, 0, 3}, {4, 3, 0}, {17, 13, 31}, {6, 16, 16}, {61, 67, 129}, {2, 300, 5},
};

static void test_mm(void)
{
	for (int dti = 0; dti < 2; dti++) {
		air_dtype dt = dti ? AIR_F64 : AIR_F32;
		for (size_t c = 0; c < sizeof mm_sizes / sizeof mm_sizes[0]; c++) {
			int64_t M = mm_sizes[c][0], K = mm_sizes[c][1], N = mm_sizes[c][2];
			double *a = th_values(M * K, dt), *b = th_values(K * N, dt);
			double *want = malloc(sizeof(double) * (size_t)(M * N + 1));
			double *mag = malloc(sizeof(double) * (size_t)(M * N + 1));
			expect_mm(1, M, N, K, a, b, N, 1, 1.0, NULL, 0, 0, 0, want, mag);
			void *ab = th_as(a, M * K, dt), *bb = th_as(b, K * N, dt);
			for (int bconst = 0; bconst < 2; bconst++) {
				th_arg args[2] = {th_make(dt, ab, 2, (int64_t[]){M, K}),
						  th_make(dt, bb, 2, (int64_t[]){K, N})};
				args[1].constant = bconst;
				char label[128];
				snprintf(label, sizeof label, "mm %s %lldx%lldx%lld%s", air_dtype_name(dt), (long long)M,
					 (long long)K, (long long)N, bconst ? " const b" : "");
				check_op(label, "mm", args, 2, NULL, 0, 2, (int64_t[]){M, N}, want, mag, tol_for(dt));
			}
			free(a), free(b), free(want), free(mag), free(ab), free(bb);
		}
	}
}

static void test_bmm(void)
{
	static const int64_t sizes[][4] = {{1, 1, 1, 1}, {0, 3, 4, 5}, {3, 7, 5, 11}, {2, 1, 17, 1}, {5, 13, 37, 19}};
	for (int dti = 0; dti < 2; dti++) {
		air_dtype dt = dti ? AIR_F64 : AIR_F32;
		for (size_t c = 0; c < sizeof sizes / sizeof sizes[0]; c++) {
			int64_t B = sizes[c][0], M = sizes[c][1], K = sizes[c][2], N = sizes[c][3];
			double *a = th_values(B * M * K, dt), *b = th_values(B * K * N, dt);
			double *want = malloc(sizeof(double) * (size_t)(B * M * N + 1));
			double *mag = malloc(sizeof(double) * (size_t)(B * M * N + 1));
			expect_mm(B, M, N, K, a, b, N, 1, 1.0, NULL, 0, 0, 0, want, mag);
			void *ab = th_as(a, B * M * K, dt), *bb = th_as(b, B * K * N, dt);
			th_arg args[2] = {th_make(dt, ab, 3, (int64_t[]){B, M, K}), th_make(dt, bb, 3, (int64_t[]){B, K, N})};
			char label[128];
			snprintf(label, sizeof label, "bmm %s %lldx%lldx%lldx%lld", air_dtype_name(dt), (long long)B,
				 (long long)M, (long long)K, (long long)N);
			check_op(label, "bmm", args, 2, NULL, 0, 3, (int64_t[]){B, M, N}, want, mag, tol_for(dt));
			free(a), free(b), free(want), free(mag), free(ab), free(bb);
		}
	}
}

/* addmm with every bias shape torch takes, alpha/beta, and beta = 0 with a
 * NaN bias (ignored, as torch does). */
static void test_addmm(void)
{
	int64_t M = 13, K = 29, N = 18;
	for (int dti = 0; dti < 2; dti++) {
		air_dtype dt = dti ? AIR_F64 : AIR_F32;
		double *a = th_values(M * K, dt), *b = th_values(K * N, dt);
		double *bias = th_values(M * N, dt);
		double *want = malloc(sizeof(double) * (size_t)(M * N));
		double *mag = malloc(sizeof(double) * (size_t)(M * N));
		void *ab = th_as(a, M * K, dt), *bb = th_as(b, K * N, dt), *biasb = th_as(bias, M * N, dt);
		struct {
			int rank;
			int64_t dims[2], rs, cs;
		} shapes[] = {{1, {N, 0}, 0, 1}, {2, {1, N}, 0, 1}, {2, {M, 1}, 1, 0}, {2, {M, N}, N, 1}, {0, {0, 0}, 0, 0},
			      {1, {1, 0}, 0, 0}};
		double ab_pairs[][2] = {{1.0, 1.0}, {0.5, -2.0}, {-1.5, 0.0}};
		for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
			for (int p = 0; p < 3; p++)
				for (int bconst = 0; bconst < 2; bconst++) {
					double alpha = ab_pairs[p][0], beta = ab_pairs[p][1];
					expect_mm(1, M, N, K, a, b, N, 1, alpha, bias, shapes[s].rs, shapes[s].cs, beta, want,
						  mag);
					th_arg args[3] = {th_make(dt, biasb, shapes[s].rank, shapes[s].dims),
							  th_make(dt, ab, 2, (int64_t[]){M, K}),
							  th_make(dt, bb, 2, (int64_t[]){K, N})};
					args[2].constant = bconst;
					args[0].constant = bconst;
					air_attr attrs[2] = {th_float("alpha", alpha), th_float("beta", beta)};
					char label[128];
					snprintf(label, sizeof label, "addmm %s bias rank %d shape %zu alpha %g beta %g%s",
						 air_dtype_name(dt), shapes[s].rank, s, alpha, beta, bconst ? " const" : "");
					check_op(label, "addmm", args, 3, attrs, 2, 2, (int64_t[]){M, N}, want, mag,
						 tol_for(dt));
				}
		/* beta = 0: a NaN bias must not leak in */
		double *nanb = malloc(sizeof(double) * (size_t)N);
		for (int64_t j = 0; j < N; j++)
			nanb[j] = NAN;
		void *nanbb = th_as(nanb, N, dt);
		expect_mm(1, M, N, K, a, b, N, 1, 2.0, NULL, 0, 0, 0, want, mag);
		th_arg args[3] = {th_make(dt, nanbb, 1, (int64_t[]){N}), th_make(dt, ab, 2, (int64_t[]){M, K}),
				  th_make(dt, bb, 2, (int64_t[]){K, N})};
		args[2].constant = 1;
		air_attr attrs[2] = {th_float("alpha", 2.0), th_float("beta", 0.0)};
		check_op("addmm beta 0 with NaN bias", "addmm", args, 3, attrs, 2, 2, (int64_t[]){M, N}, want, mag,
			 tol_for(dt));
		free(nanb), free(nanbb);
		free(a), free(b), free(bias), free(want), free(mag), free(ab), free(bb), free(biasb);
	}
}

static void expect_linear(int64_t M, int64_t N, int64_t K, const double *x, const double *w, const double *bias,
			  double *want, double *mag)
{
	/* B(k, j) = w[j, k] */
	expect_mm(1, M, N, K, x, w, 1, K, 1.0, bias, 0, 1, 1.0, want, mag);
}

static void test_linear(void)
{
	static const int64_t sizes[][3] = {{1, 1, 1}, {5, 7, 3}, {0, 4, 6}, {33, 65, 17}, {7, 0, 5}, {128, 96, 40}};
	for (int dti = 0; dti < 2; dti++) {
		air_dtype dt = dti ? AIR_F64 : AIR_F32;
		for (size_t c = 0; c < sizeof sizes / sizeof sizes[0]; c++) {
			int64_t M = sizes[c][0], K = sizes[c][1], N = sizes[c][2];
			double *x = th_values(M * K, dt), *w = th_values(N * K, dt), *bias = th_values(N, dt);
			double *want = malloc(sizeof(double) * (size_t)(M * N + 1));
			double *mag = malloc(sizeof(double) * (size_t)(M * N + 1));
			void *xb = th_as(x, M * K, dt), *wb = th_as(w, N * K, dt), *bb = th_as(bias, N, dt);
			for (int has_bias = 0; has_bias < 2; has_bias++)
				for (int wconst = 0; wconst < 2; wconst++)
					for (int rank3 = 0; rank3 < 2; rank3++) {
						if (rank3 && M % 2 != 0 && M != 1)
							continue;
						expect_linear(M, N, K, x, w, has_bias ? bias : NULL, want, mag);
						/* x as [M, K] or [M/2, 2, K] (or [1, 1, K]) */
						int64_t x3[3] = {M == 1 ? 1 : M / 2, M == 1 ? 1 : 2, K};
						th_arg args[3] = {rank3 ? th_make(dt, xb, 3, x3)
									: th_make(dt, xb, 2, (int64_t[]){M, K}),
								  th_make(dt, wb, 2, (int64_t[]){N, K}),
								  th_make(dt, bb, 1, (int64_t[]){N})};
						args[1].constant = wconst;
						args[2].constant = wconst;
						air_attr attrs[1] = {th_int("has_bias", has_bias)};
						char label[128];
						snprintf(label, sizeof label, "linear %s %lldx%lldx%lld bias %d const %d rank3 %d",
							 air_dtype_name(dt), (long long)M, (long long)K, (long long)N,
							 has_bias, wconst, rank3);
						int64_t od3[3] = {x3[0], x3[1], N}, od2[2] = {M, N};
						check_op(label, "linear", args, 2 + has_bias, attrs, 1, rank3 ? 3 : 2,
							 rank3 ? od3 : od2, want, mag, tol_for(dt));
					}
			free(x), free(w), free(bias), free(want), free(mag), free(xb), free(wb), free(bb);
		}
	}
	/* a 1-D x */
	double *x = th_values(9, AIR_F32), *w = th_values(4 * 9, AIR_F32), want[4], mag[4];
	void *xb = th_as(x, 9, AIR_F32), *wb = th_as(w, 36, AIR_F32);
	expect_linear(1, 4, 9, x, w, NULL, want, mag);
	th_arg args[2] = {th_make(AIR_F32, xb, 1, (int64_t[]){9}), th_make(AIR_F32, wb, 2, (int64_t[]){4, 9})};
	args[1].constant = 1;
	check_op("linear 1-D x", "linear", args, 2, NULL, 0, 1, (int64_t[]){4}, want, mag, 3e-5);
	free(x), free(w), free(xb), free(wb);
}

/* linear with a bf16 or f16 weight and an f32 x (kernels/matmul/linear_lowp.h):
 * x's values are made representable in the weight's type, so the kernel's
 * rounding of x changes nothing and the double sum is the exact answer. */
static void test_linear_lowp(void)
{
	static const int64_t sizes[][3] = {{1, 1, 1}, {1, 64, 96}, {5, 33, 7}, {0, 8, 3}, {37, 130, 70}, {6, 0, 4}};
	for (int wti = 0; wti < 2; wti++) {
		air_dtype wt = wti ? AIR_F16 : AIR_BF16;
		for (size_t c = 0; c < sizeof sizes / sizeof sizes[0]; c++) {
			int64_t M = sizes[c][0], K = sizes[c][1], N = sizes[c][2];
			double *x = th_values(M * K, AIR_F32), *w = th_values(N * K, AIR_F32), *bias = th_values(N, AIR_F32);
			float *xf = malloc(sizeof(float) * (size_t)(M * K + 1)), *bf = malloc(sizeof(float) * (size_t)(N + 1));
			uint16_t *wh = malloc(sizeof(uint16_t) * (size_t)(N * K + 1));
			for (int64_t i = 0; i < M * K; i++) {
				uint16_t h = wti ? k_f32_to_f16((float)x[i]) : k_f32_to_bf16((float)x[i]);
				xf[i] = wti ? k_f16_to_f32(h) : k_bf16_to_f32(h);
				x[i] = xf[i];
			}
			for (int64_t i = 0; i < N * K; i++) {
				wh[i] = wti ? k_f32_to_f16((float)w[i]) : k_f32_to_bf16((float)w[i]);
				w[i] = wti ? k_f16_to_f32(wh[i]) : k_bf16_to_f32(wh[i]);
			}
			for (int64_t i = 0; i < N; i++)
				bf[i] = (float)bias[i], bias[i] = bf[i];
			double *want = malloc(sizeof(double) * (size_t)(M * N + 1));
			double *mag = malloc(sizeof(double) * (size_t)(M * N + 1));
			for (int has_bias = 0; has_bias < 2; has_bias++)
				for (int wconst = 0; wconst < 2; wconst++) {
					expect_linear(M, N, K, x, w, has_bias ? bias : NULL, want, mag);
					th_arg args[3] = {th_make(AIR_F32, xf, 2, (int64_t[]){M, K}),
							  th_make(wt, wh, 2, (int64_t[]){N, K}),
							  th_make(AIR_F32, bf, 1, (int64_t[]){N})};
					args[1].constant = wconst;
					args[2].constant = wconst;
					air_attr attrs[1] = {th_int("has_bias", has_bias)};
					char label[128];
					snprintf(label, sizeof label, "linear %s weight %lldx%lldx%lld bias %d const %d",
						 air_dtype_name(wt), (long long)M, (long long)K, (long long)N, has_bias, wconst);
					check_op(label, "linear", args, 2 + has_bias, attrs, 1, 2, (int64_t[]){M, N}, want, mag,
						 3e-5);
				}
			free(x), free(w), free(bias), free(xf), free(bf), free(wh), free(want), free(mag);
		}
	}
	/* out_dtype: the result narrowed to the weight's 16-bit type as stored;
	 * fast and reference kernels give the rounding of the f32 result,
	 * bit for bit (rows past one 4 MiB chunk included) */
	for (int wti = 0; wti < 2; wti++) {
		air_dtype wt = wti ? AIR_F16 : AIR_BF16;
		int64_t M = 300, K = 40, N = 3600; /* 300 x 3600 f32 is past the kernel's chunk */
		float *xf = th_randf(M * K), *bf = th_randf(N);
		uint16_t *wh = malloc(sizeof(uint16_t) * (size_t)(N * K));
		for (int64_t i = 0; i < N * K; i++)
			wh[i] = wti ? k_f32_to_f16(0.25f * (float)th_rand()) : k_f32_to_bf16(0.25f * (float)th_rand());
		th_arg args[3] = {th_make(AIR_F32, xf, 2, (int64_t[]){M, K}), th_make(wt, wh, 2, (int64_t[]){N, K}),
				  th_make(AIR_F32, bf, 1, (int64_t[]){N})};
		args[1].constant = 1;
		air_attr narrow[2] = {th_int("has_bias", 1), th_int("out_dtype", wt)};
		air_attr wide[1] = {th_int("has_bias", 1)};
		/* narrowed and f32, each with the fast and the reference kernels */
		void *out[4] = {NULL, NULL, NULL, NULL};
		for (int pass = 0; pass < 4; pass++) {
			bool narrowed = pass < 2;
			air_model *m = th_compile("linear", args, 3, narrowed ? narrow : wide, narrowed ? 2 : 1,
						  pass % 2 ? AIR_COMPILE_REFERENCE_KERNELS : 0);
			if (!m)
				continue;
			air_dtype dt;
			air_model_output_info(m, 0, &dt, NULL, NULL);
			CHECK(dt == (narrowed ? wt : AIR_F32));
			int r;
			int64_t dims[AIR_MAX_RANK];
			out[pass] = th_run(m, args, 3, &r, dims);
			air_model_destroy(m);
		}
		for (int kind = 0; kind < 2; kind++) {
			const uint16_t *got = out[kind];
			const float *f32 = out[2 + kind];
			int64_t bad = 0;
			for (int64_t i = 0; got && f32 && i < M * N; i++)
				bad += got[i] != (wti ? k_f32_to_f16(f32[i]) : k_f32_to_bf16(f32[i]));
			CHECK(got && f32 && bad == 0);
		}
		free(out[0]), free(out[1]), free(out[2]), free(out[3]), free(xf), free(bf), free(wh);
	}
	{
		float xf[6] = {0}, wf[6] = {0};
		th_arg f32w[2] = {th_make(AIR_F32, xf, 2, (int64_t[]){3, 2}), th_make(AIR_F32, wf, 2, (int64_t[]){3, 2})};
		air_attr to16[1] = {th_int("out_dtype", AIR_BF16)};
		th_expect_build_error("linear", f32w, 2, to16, 1, AIR_UNSUPPORTED, "linear out_dtype with an f32 weight");
	}
	/* with a 16-bit weight everything else must be f32 */
	float xf[6] = {0};
	double bd[3] = {0};
	uint16_t wh[6] = {0};
	th_arg bad[3] = {th_make(AIR_F32, xf, 2, (int64_t[]){3, 2}), th_make(AIR_BF16, wh, 2, (int64_t[]){3, 2}),
			 th_make(AIR_F64, bd, 1, (int64_t[]){3})};
	th_expect_build_error("linear", bad, 3, NULL, 0, AIR_DTYPE_MISMATCH, "linear bf16 weight, f64 bias");
	th_arg both16[2] = {th_make(AIR_BF16, wh, 2, (int64_t[]){3, 2}), th_make(AIR_BF16, wh, 2, (int64_t[]){3, 2})};
	th_expect_build_error("linear", both16, 2, NULL, 0, AIR_UNSUPPORTED, "linear bf16 x and weight");
}

/* One model with a symbolic batch dim, run at several sizes, for each op
 * with a constant weight (the case the fast kernels prepack). */
static void test_symbolic_batch(void)
{
	int64_t K = 23, N = 19, T = 3;
	double *w = th_values(N * K, AIR_F32), *bias = th_values(N, AIR_F32);
	void *wb = th_as(w, N * K, AIR_F32), *bb = th_as(bias, N, AIR_F32);
	for (int pass = 0; pass < 2; pass++) {
		uint32_t flags = pass == 0 ? AIR_COMPILE_REFERENCE_KERNELS : 0;
		/* linear on x [s1, T, K] */
		th_arg args[3] = {th_make(AIR_F32, NULL, 3, (int64_t[]){1, T, K}), th_make(AIR_F32, wb, 2, (int64_t[]){N, K}),
				  th_make(AIR_F32, bb, 1, (int64_t[]){N})};
		args[0].sym[0] = 1;
		args[1].constant = args[2].constant = 1;
		air_model *m = th_compile("linear", args, 3, NULL, 0, flags);
		/* mm on a [s1, K] with b = w^T as a constant [K, N] */
		double *wt = malloc(sizeof(double) * (size_t)(K * N));
		for (int64_t k = 0; k < K; k++)
			for (int64_t j = 0; j < N; j++)
				wt[k * N + j] = w[j * K + k];
		void *wtb = th_as(wt, K * N, AIR_F32);
		th_arg margs[2] = {th_make(AIR_F32, NULL, 2, (int64_t[]){1, K}), th_make(AIR_F32, wtb, 2, (int64_t[]){K, N})};
		margs[0].sym[0] = 1;
		margs[1].constant = 1;
		air_model *mm = th_compile("mm", margs, 2, NULL, 0, flags);
		int64_t batches[] = {3, 0, 1, 11, 3};
		for (size_t bi = 0; bi < sizeof batches / sizeof batches[0] && m && mm; bi++) {
			int64_t B = batches[bi];
			double *x = th_values(B * T * K, AIR_F32);
			void *xb = th_as(x, B * T * K, AIR_F32);
			double *want = malloc(sizeof(double) * (size_t)(B * T * N + 1));
			double *mag = malloc(sizeof(double) * (size_t)(B * T * N + 1));
			expect_linear(B * T, N, K, x, w, bias, want, mag);
			args[0].dims[0] = B;
			args[0].data = xb;
			int r;
			int64_t dims[AIR_MAX_RANK];
			void *out = th_run(m, args, 3, &r, dims);
			CHECK(r == 3 && dims[0] == B && dims[1] == T && dims[2] == N);
			char label[96];
			snprintf(label, sizeof label, "linear symbolic batch %lld pass %d", (long long)B, pass);
			if (out)
				th_compare(label, AIR_F32, out, want, mag, B * T * N, 3e-5, 3e-6);
			free(out);
			expect_linear(B * T, N, K, x, w, NULL, want, mag);
			margs[0].dims[0] = B * T;
			margs[0].data = xb;
			out = th_run(mm, margs, 2, &r, dims);
			CHECK(r == 2 && dims[0] == B * T && dims[1] == N);
			snprintf(label, sizeof label, "mm symbolic rows %lld pass %d", (long long)(B * T), pass);
			if (out)
				th_compare(label, AIR_F32, out, want, mag, B * T * N, 3e-5, 3e-6);
			free(out), free(x), free(xb), free(want), free(mag);
		}
		air_model_destroy(m);
		air_model_destroy(mm);
		free(wt), free(wtb);
	}
	free(w), free(bias), free(wb), free(bb);
}

/* ---- sdpa ------------------------------------------------------------ */

typedef struct sdpa_case {
	int rank;
	int64_t lead[3]; /* q's leading dims (rank - 2 of them) */
	int64_t kv_heads; /* k/v size at dim -3 (0: same as q) */
	int64_t L, S, E, Ev;
	int mask; /* 0 none, 1 bool, 2 float */
	int mask_rank;
	int mask_full_row; /* mask out every position of query row 1 */
	int causal;
	double scale;
} sdpa_case;

static void test_sdpa_case(air_dtype dt, const sdpa_case *c)
{
	int r = c->rank, nl = r - 2;
	int64_t qd[AIR_MAX_RANK], kd[AIR_MAX_RANK], vd[AIR_MAX_RANK], od[AIR_MAX_RANK], md[AIR_MAX_RANK];
	int64_t B = 1;
	for (int d = 0; d < nl; d++) {
		qd[d] = kd[d] = vd[d] = od[d] = c->lead[d];
		B *= c->lead[d];
	}
	if (c->kv_heads && nl >= 1)
		kd[nl - 1] = vd[nl - 1] = c->kv_heads;
	qd[nl] = od[nl] = c->L;
	qd[nl + 1] = kd[nl + 1] = c->E;
	kd[nl] = vd[nl] = c->S;
	vd[nl + 1] = od[nl + 1] = c->Ev;
	int64_t Hq = nl >= 1 ? qd[nl - 1] : 1, Hk = nl >= 1 ? kd[nl - 1] : 1, Bo = B / (Hq ? Hq : 1);
	int64_t nq = B * c->L * c->E, nk = B / (Hq ? Hq : 1) * Hk * c->S * c->E, nv = nk / (c->E ? c->E : 1) * c->Ev;
	if (c->E == 0)
		nv = B / (Hq ? Hq : 1) * Hk * c->S * c->Ev;
	/* mask over the last mask_rank dims of [..., L, S]; leading dims of
	 * the mask are 1 except the outermost batch dim */
	int mr = c->mask_rank;
	int64_t nm = 1;
	for (int i = 0; i < mr; i++) {
		int d = r - mr + i;
		md[i] = d == r - 1 ? c->S : d == r - 2 ? c->L : (d == 0 ? qd[0] : 1);
		nm *= md[i];
	}
	double *q = th_values(nq, dt), *k = th_values(nk, dt), *v = th_values(nv, dt);
	for (int64_t i = 0; i < nq; i++)
		q[i] *= 3; /* peaky softmax rows */
	double *mv = malloc(sizeof(double) * (size_t)(nm + 1));
	for (int64_t i = 0; i < nm; i++) {
		double u = th_rand();
		if (c->mask == 1)
			mv[i] = u > -0.6;
		else
			mv[i] = u > -0.6 ? (dt == AIR_F32 ? (double)(float)u : u) : -INFINITY;
	}
	int64_t Lm = mr >= 2 ? c->L : 1;
	if (c->mask_full_row && c->L > 1 && mr >= 2) {
		int64_t outer = nm / (Lm * c->S);
		for (int64_t o = 0; o < outer; o++)
			for (int64_t s = 0; s < c->S; s++)
				mv[(o * Lm + 1) * c->S + s] = c->mask == 1 ? 0 : -INFINITY;
	}
	double scale = c->scale != 0 ? c->scale : 1.0 / sqrt((double)c->E);
	int64_t no = B * c->L * c->Ev;
	double *want = calloc((size_t)(no + 1), sizeof(double)), *mag = calloc((size_t)(no + 1), sizeof(double));
	double *sc = malloc(sizeof(double) * (size_t)(c->S + 1));
	for (int64_t b = 0; b < B; b++) {
		int64_t h = b % (Hq ? Hq : 1), outer = b / (Hq ? Hq : 1);
		int64_t kb = outer * Hk + h / (Hq / Hk);
		int64_t mb = mr >= r && nl >= 1 ? b / (B / qd[0]) : 0; /* only dim 0 of the mask is not 1 */
		for (int64_t l = 0; l < c->L; l++) {
			double mx = -INFINITY;
			for (int64_t s = 0; s < c->S; s++) {
				double x = 0;
				for (int64_t e = 0; e < c->E; e++)
					x += q[(b * c->L + l) * c->E + e] * k[(kb * c->S + s) * c->E + e];
				x *= scale;
				double mval = c->mask ? mv[(mb * Lm + (mr >= 2 ? l : 0)) * c->S + s] : 1;
				if ((c->causal && s > l) || (c->mask == 1 && mval == 0))
					x = -INFINITY;
				else if (c->mask == 2)
					x += mval;
				sc[s] = x;
				if (x > mx)
					mx = x;
			}
			double sum = 0;
			for (int64_t s = 0; s < c->S; s++)
				sum += mx == -INFINITY ? 0 : exp(sc[s] - mx);
			for (int64_t e = 0; e < c->Ev; e++) {
				double o = 0, m = 0;
				for (int64_t s = 0; s < c->S && sum > 0; s++) {
					double p = exp(sc[s] - mx) / sum;
					o += p * v[(kb * c->S + s) * c->Ev + e];
					m += p * fabs(v[(kb * c->S + s) * c->Ev + e]);
				}
				want[(b * c->L + l) * c->Ev + e] = o;
				mag[(b * c->L + l) * c->Ev + e] = m + 1;
			}
		}
	}
	(void)Bo;
	void *qb = th_as(q, nq, dt), *kbuf = th_as(k, nk, dt), *vb = th_as(v, nv, dt);
	air_dtype mdt = c->mask == 1 ? AIR_BOOL : dt;
	void *mb = th_as(mv, nm, mdt);
	th_arg args[4] = {th_make(dt, qb, r, qd), th_make(dt, kbuf, r, kd), th_make(dt, vb, r, vd),
			  th_make(mdt, mb, mr, md)};
	air_attr attrs[2] = {th_float("scale", c->scale), th_int("is_causal", c->causal)};
	char label[160];
	snprintf(label, sizeof label, "sdpa %s rank %d L %lld S %lld E %lld Ev %lld kvh %lld mask %d/%d causal %d",
		 air_dtype_name(dt), r, (long long)c->L, (long long)c->S, (long long)c->E, (long long)c->Ev,
		 (long long)c->kv_heads, c->mask, mr, c->causal);
	check_op(label, "sdpa", args, c->mask ? 4 : 3, attrs, 2, r, od, want, mag, dt == AIR_F32 ? 2e-6 : 1e-12);
	free(q), free(k), free(v), free(mv), free(want), free(mag), free(sc), free(qb), free(kbuf), free(vb), free(mb);
}

static void test_sdpa(void)
{
	static const sdpa_case cases[] = {
		{4, {1, 3, 0}, 0, 7, 7, 8, 8, 0, 0, 0, 0, 0.0},
		{4, {2, 4, 0}, 2, 5, 9, 16, 6, 0, 0, 0, 0, 0.125},      /* GQA */
		{4, {2, 3, 0}, 0, 6, 11, 5, 7, 2, 4, 1, 0, 0.0},        /* float mask [B, 1, L, S], full row */
		{4, {2, 3, 0}, 0, 6, 11, 5, 7, 1, 2, 1, 0, 0.0},        /* bool mask [L, S] */
		{4, {1, 2, 0}, 0, 5, 3, 4, 4, 0, 0, 0, 1, 0.0},         /* causal, L > S */
		{4, {1, 2, 0}, 0, 3, 8, 4, 4, 0, 0, 0, 1, 0.0},         /* causal, L < S */
		{4, {1, 4, 0}, 1, 4, 6, 3, 5, 1, 1, 0, 1, 0.0},         /* MQA, causal + bool [S] mask */
		{3, {3, 0, 0}, 0, 1, 1, 1, 1, 0, 0, 0, 0, 0.0},
		{3, {2, 0, 0}, 0, 4, 0, 3, 2, 0, 0, 0, 0, 0.0},         /* S = 0: zeros */
		{4, {0, 2, 0}, 0, 4, 5, 3, 2, 2, 4, 0, 0, 0.0},         /* empty batch */
		{5, {2, 2, 3}, 0, 3, 4, 2, 3, 2, 2, 0, 0, 0.0},
		{2, {0, 0, 0}, 0, 9, 13, 7, 5, 1, 2, 1, 0, 0.0},
	};
	for (int dti = 0; dti < 2; dti++)
		for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
			test_sdpa_case(dti ? AIR_F64 : AIR_F32, &cases[i]);
}

/* sdpa with symbolic L = S (a sequence length), run at two lengths. */
static void test_sdpa_symbolic(void)
{
	int64_t H = 2, E = 4;
	th_arg args[4];
	for (int i = 0; i < 3; i++) {
		args[i] = th_make(AIR_F32, NULL, 4, (int64_t[]){1, H, 1, E});
		args[i].sym[2] = 1;
	}
	args[3] = th_make(AIR_F32, NULL, 4, (int64_t[]){1, 1, 1, 1});
	args[3].sym[2] = args[3].sym[3] = 1;
	air_model *m = th_compile("sdpa", args, 4, NULL, 0, 0);
	if (!m)
		return;
	int64_t lens[] = {5, 9, 1};
	for (int li = 0; li < 3; li++) {
		int64_t S = lens[li], n = H * S * E;
		double *q = th_values(n, AIR_F32), *k = th_values(n, AIR_F32), *v = th_values(n, AIR_F32);
		double *mk = malloc(sizeof(double) * (size_t)(S * S));
		for (int64_t i = 0; i < S; i++)
			for (int64_t j = 0; j < S; j++)
				mk[i * S + j] = j <= i ? 0.0 : -INFINITY;
		void *bufs[4] = {th_as(q, n, AIR_F32), th_as(k, n, AIR_F32), th_as(v, n, AIR_F32), th_as(mk, S * S, AIR_F32)};
		for (int i = 0; i < 3; i++) {
			args[i].dims[2] = S;
			args[i].data = bufs[i];
		}
		args[3].dims[2] = args[3].dims[3] = S;
		args[3].data = bufs[3];
		int r;
		int64_t dims[AIR_MAX_RANK];
		float *out = th_run(m, args, 4, &r, dims);
		CHECK(r == 4 && dims[2] == S);
		double *want = malloc(sizeof(double) * (size_t)n);
		for (int64_t h = 0; h < H; h++)
			for (int64_t l = 0; l < S; l++) {
				double sc[16], mx = -INFINITY, sum = 0;
				for (int64_t s = 0; s <= l; s++) {
					double x = 0;
					for (int64_t e = 0; e < E; e++)
						x += q[(h * S + l) * E + e] * k[(h * S + s) * E + e];
					sc[s] = x / 2.0;
					mx = sc[s] > mx ? sc[s] : mx;
				}
				for (int64_t s = 0; s <= l; s++)
					sum += exp(sc[s] - mx);
				for (int64_t e = 0; e < E; e++) {
					double o = 0;
					for (int64_t s = 0; s <= l; s++)
						o += exp(sc[s] - mx) / sum * v[(h * S + s) * E + e];
					want[(h * S + l) * E + e] = o;
				}
			}
		if (out)
			th_compare("sdpa symbolic length", AIR_F32, out, want, NULL, n, 1e-5, 1e-5);
		free(out), free(want), free(q), free(k), free(v), free(mk);
		for (int i = 0; i < 4; i++)
			free(bufs[i]);
	}
	air_model_destroy(m);
}

/* ---- errors ----------------------------------------------------------- */

static void test_errors(void)
{
	float d[64] = {0};
	double dd[8] = {0};
	th_arg a23 = th_make(AIR_F32, d, 2, (int64_t[]){2, 3}), a43 = th_make(AIR_F32, d, 2, (int64_t[]){4, 3});
	th_arg a34 = th_make(AIR_F32, d, 2, (int64_t[]){3, 4}), d34 = th_make(AIR_F64, dd, 2, (int64_t[]){3, 4});
	th_arg i34 = th_make(AIR_I32, d, 2, (int64_t[]){3, 4});
	th_arg args[4];

	args[0] = a23, args[1] = a43;
	th_expect_build_error("mm", args, 2, NULL, 0, AIR_SHAPE_MISMATCH, "mm inner mismatch");
	args[1] = d34;
	th_expect_build_error("mm", args, 2, NULL, 0, AIR_DTYPE_MISMATCH, "mm dtype mismatch");
	args[0] = i34, args[1] = i34;
	th_expect_build_error("mm", args, 2, NULL, 0, AIR_UNSUPPORTED, "mm integer");
	args[0] = th_make(AIR_F32, d, 3, (int64_t[]){1, 2, 3}), args[1] = a34;
	th_expect_build_error("mm", args, 2, NULL, 0, AIR_SHAPE_MISMATCH, "mm rank");

	args[0] = th_make(AIR_F32, d, 3, (int64_t[]){2, 2, 3}), args[1] = th_make(AIR_F32, d, 3, (int64_t[]){3, 3, 4});
	th_expect_build_error("bmm", args, 2, NULL, 0, AIR_SHAPE_MISMATCH, "bmm batch mismatch");
	args[1] = th_make(AIR_F32, d, 3, (int64_t[]){2, 4, 4});
	th_expect_build_error("bmm", args, 2, NULL, 0, AIR_SHAPE_MISMATCH, "bmm inner mismatch");

	args[0] = th_make(AIR_F32, d, 1, (int64_t[]){3}), args[1] = a23, args[2] = a34;
	th_expect_build_error("addmm", args, 3, NULL, 0, AIR_SHAPE_MISMATCH, "addmm bias [3] for N 4");
	args[0] = th_make(AIR_F32, d, 2, (int64_t[]){3, 4});
	th_expect_build_error("addmm", args, 3, NULL, 0, AIR_SHAPE_MISMATCH, "addmm bias [3, 4] for M 2");

	args[0] = a23, args[1] = th_make(AIR_F32, d, 2, (int64_t[]){5, 4});
	th_expect_build_error("linear", args, 2, NULL, 0, AIR_SHAPE_MISMATCH, "linear features");
	args[1] = th_make(AIR_F32, d, 2, (int64_t[]){5, 3}), args[2] = th_make(AIR_F32, d, 1, (int64_t[]){4});
	th_expect_build_error("linear", args, 3, NULL, 0, AIR_SHAPE_MISMATCH, "linear bias size");
	air_attr nob = th_int("has_bias", 0);
	args[2] = th_make(AIR_F32, d, 1, (int64_t[]){5});
	th_expect_build_error("linear", args, 3, &nob, 1, AIR_INVALID_ARGUMENT, "linear has_bias 0 with 3 inputs");

	th_arg q = th_make(AIR_F32, d, 4, (int64_t[]){1, 4, 3, 2});
	args[0] = q, args[1] = th_make(AIR_F32, d, 4, (int64_t[]){1, 4, 5, 3}), args[2] = args[1];
	th_expect_build_error("sdpa", args, 3, NULL, 0, AIR_SHAPE_MISMATCH, "sdpa E mismatch");
	args[1] = args[2] = th_make(AIR_F32, d, 4, (int64_t[]){1, 3, 5, 2});
	th_expect_build_error("sdpa", args, 3, NULL, 0, AIR_SHAPE_MISMATCH, "sdpa heads not a divisor");
	args[1] = th_make(AIR_F32, d, 4, (int64_t[]){1, 4, 5, 2}), args[2] = th_make(AIR_F32, d, 4, (int64_t[]){1, 4, 6, 2});
	th_expect_build_error("sdpa", args, 3, NULL, 0, AIR_SHAPE_MISMATCH, "sdpa S mismatch");
	args[2] = args[1], args[3] = th_make(AIR_F32, d, 2, (int64_t[]){3, 4});
	th_expect_build_error("sdpa", args, 4, NULL, 0, AIR_SHAPE_MISMATCH, "sdpa mask shape");
	args[3] = th_make(AIR_I32, d, 2, (int64_t[]){3, 5});
	th_expect_build_error("sdpa", args, 4, NULL, 0, AIR_DTYPE_MISMATCH, "sdpa mask dtype");

	/* symbolic contraction sizes that disagree only at run time */
	th_arg sa[2] = {th_make(AIR_F32, NULL, 2, (int64_t[]){2, 1}), th_make(AIR_F32, NULL, 2, (int64_t[]){1, 3})};
	sa[0].sym[1] = 1;
	sa[1].sym[0] = 2;
	for (int pass = 0; pass < 2; pass++) {
		air_model *m = th_compile("mm", sa, 2, NULL, 0, pass ? 0 : AIR_COMPILE_REFERENCE_KERNELS);
		if (!m)
			continue;
		sa[0].dims[1] = 4, sa[0].data = d;
		sa[1].dims[0] = 5, sa[1].data = d;
		int r;
		int64_t dims[AIR_MAX_RANK];
		air_status st;
		void *out = th_run_status(m, sa, 2, &r, dims, &st);
		CHECK(out == NULL && st == AIR_SHAPE_MISMATCH);
		CHECK(strstr(air_last_error(), "mm") != NULL);
		free(out);
		air_model_destroy(m);
	}
}

/* ---- linear with a fused epilogue (act, residual) ------------------------ */

/* The activations of kernels/common/epilogue.h, in double. */
static double act_d(double x, int act)
{
	switch (act) {
	case 1: return x < 0 ? 0 : x;
	case 2: return x < 0 ? 0 : x > 6 ? 6 : x;
	case 3: return 0.5 * x * (1 + erf(x / sqrt(2.0)));
	case 4: return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
	case 5: return x / (1 + exp(-x));
	case 6: return 1 / (1 + exp(-x));
	case 7: return tanh(x);
	case 8: return x * (x + 3 < 0 ? 0 : x + 3 > 6 ? 6 : x + 3) / 6;
	default: return x;
	}
}

static void test_linear_epilogue(void)
{
	static const int64_t sizes[][3] = {{1, 1, 1}, {5, 7, 3}, {0, 4, 6}, {33, 65, 17}, {13, 40, 97}, {6, 3, 0}};
	for (int dti = 0; dti < 2; dti++) {
		air_dtype dt = dti ? AIR_F64 : AIR_F32;
		for (size_t c = 0; c < sizeof sizes / sizeof sizes[0]; c++) {
			int64_t M = sizes[c][0], K = sizes[c][1], N = sizes[c][2];
			double *x = th_values(M * K, dt), *w = th_values(N * K, dt), *bias = th_values(N, dt);
			double *res = th_values(M * N, dt);
			for (int64_t i = 0; i < M * N; i++)
				res[i] *= 4; /* reach relu6's and hardswish's upper bends too */
			double *lin = malloc(sizeof(double) * (size_t)(M * N + 1));
			double *want = malloc(sizeof(double) * (size_t)(M * N + 1));
			double *mag = malloc(sizeof(double) * (size_t)(M * N + 1));
			void *xb = th_as(x, M * K, dt), *wb = th_as(w, N * K, dt), *bb = th_as(bias, N, dt);
			void *rb = th_as(res, M * N, dt);
			for (int act = 0; act <= 8; act++)
				for (int has_res = 0; has_res < 2; has_res++) {
					int has_bias = (act + has_res) % 2, wconst = act % 3 == 0, rank3 = M % 2 == 0 && act == 5;
					expect_linear(M, N, K, x, w, has_bias ? bias : NULL, lin, mag);
					for (int64_t i = 0; i < M * N; i++) {
						double v = lin[i] + (has_res ? res[i] : 0);
						want[i] = act_d(v, act);
						/* the activations' slopes are at most ~1.13 */
						mag[i] = 1.2 * (mag[i] + (has_res ? fabs(res[i]) : 0)) + 1e-3 * fabs(want[i]);
					}
					int64_t x3[3] = {M / 2, 2, K}, o3[3] = {M / 2, 2, N}, o2[2] = {M, N};
					th_arg args[4];
					int na = 0;
					args[na++] = rank3 ? th_make(dt, xb, 3, x3) : th_make(dt, xb, 2, (int64_t[]){M, K});
					args[na] = th_make(dt, wb, 2, (int64_t[]){N, K});
					args[na++].constant = wconst;
					if (has_bias) {
						args[na] = th_make(dt, bb, 1, (int64_t[]){N});
						args[na++].constant = wconst;
					}
					if (has_res)
						args[na++] = rank3 ? th_make(dt, rb, 3, o3) : th_make(dt, rb, 2, o2);
					air_attr attrs[3] = {th_int("has_bias", has_bias), th_int("act", act),
							     th_int("has_residual", has_res)};
					char label[160];
					snprintf(label, sizeof label,
						 "linear epilogue %s %lldx%lldx%lld act %d residual %d bias %d const %d rank3 %d",
						 air_dtype_name(dt), (long long)M, (long long)K, (long long)N, act, has_res,
						 has_bias, wconst, rank3);
					check_op(label, "linear", args, na, attrs, 3, rank3 ? 3 : 2, rank3 ? o3 : o2, want,
						 mag, tol_for(dt));
				}
			free(x), free(w), free(bias), free(res), free(lin), free(want), free(mag);
			free(xb), free(wb), free(bb), free(rb);
		}
	}
	/* bad epilogue attributes and residual shapes are build errors */
	float xv[6] = {0}, wv[6] = {0}, rv[4] = {0};
	th_arg args[3] = {th_make(AIR_F32, xv, 2, (int64_t[]){2, 3}), th_make(AIR_F32, wv, 2, (int64_t[]){2, 3}),
			  th_make(AIR_F32, rv, 2, (int64_t[]){2, 2})};
	air_attr bad_act[1] = {th_int("act", 9)};
	th_expect_build_error("linear", args, 2, bad_act, 1, AIR_INVALID_ARGUMENT, "linear act 9");
	air_attr bad_res[1] = {th_int("has_residual", 2)};
	th_expect_build_error("linear", args, 3, bad_res, 1, AIR_INVALID_ARGUMENT, "linear has_residual 2");
	air_attr res1[1] = {th_int("has_residual", 1)};
	th_expect_build_error("linear", args, 2, res1, 1, AIR_INVALID_ARGUMENT, "linear residual missing");
	args[2] = th_make(AIR_F32, rv, 2, (int64_t[]){2, 1});
	th_expect_build_error("linear", args, 3, res1, 1, AIR_SHAPE_MISMATCH, "linear residual shape");
}

int main(void)
{
	test_mm();
	test_bmm();
	test_addmm();
	test_linear();
	test_linear_lowp();
	test_linear_epilogue();
	test_symbolic_batch();
	test_sdpa();
	test_sdpa_symbolic();
	test_errors();
	return check_report("test_ops_linalg");
}

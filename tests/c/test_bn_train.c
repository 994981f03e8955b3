/* test_bn_train.c - the fast training batch norm kernels (forward with the
 * running statistics, backward in train and eval form) and threshold_backward
 * against their reference kernels (kernels/norm/bn_train_ref.c): odd channel
 * counts, planes that are not a multiple of the vector width, weight and
 * bias present or not, a mean far from zero (the variance must not cancel),
 * one thread and a pool. Then the ops through the public API: a graph of
 * batch_norm_train and batch_norm_backward, and the shape function's refusals. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels/norm/bn_train.h"
#include "op_harness.h"

static k_tensor tensor(float *data, int rank, const int64_t *dims)
{
	k_tensor t;
	memset(&t, 0, sizeof t);
	t.data = data;
	t.dtype = AIR_F32;
	t.rank = rank;
	for (int d = 0; d < rank; d++)
		t.dims[d] = dims[d];
	t.numel = k_numel(rank, dims);
	return t;
}

static float *randf(int64_t n, double scale, double offset)
{
	float *p = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
	for (int64_t i = 0; i < n; i++)
		p[i] = (float)(th_rand() * scale + offset);
	return p;
}

/* |got - want| <= tol * (1 + |want|) everywhere */
static void compare(const char *label, const float *got, const float *want, int64_t n, double tol)
{
	int bad = 0;
	for (int64_t i = 0; i < n; i++) {
		double d = fabs((double)got[i] - (double)want[i]);
		if (!(d <= tol * (1 + fabs((double)want[i])))) {
			if (bad < 3)
				fprintf(stderr, "%s: [%lld] %.9g, want %.9g\n", label, (long long)i, got[i], want[i]);
			bad++;
		}
	}
	check_count++;
	if (bad) {
		check_failures++;
		fprintf(stderr, "%s: %d of %lld differ\n", label, bad, (long long)n);
	}
}

static k_call make_call(const k_attr *attrs, const k_tensor *in, int n_in, const k_tensor *out, int n_out,
			rt_pool *pool)
{
	k_call c;
	memset(&c, 0, sizeof c);
	c.attrs = attrs;
	c.in = in;
	c.n_in = n_in;
	c.out = out;
	c.n_out = n_out;
	c.pool = pool;
	return c;
}

static void run_case(int64_t N, int64_t C, int64_t H, int64_t W, int has_w, int has_b, int act, double offset,
		     rt_pool *pool)
{
	char label[160];
	int64_t dims[4] = {N, C, H, W}, cd[1] = {C}, rd[2] = {2, C}, n = N * C * H * W;
	float *x = randf(n, 1.0, offset), *dy = randf(n, 1.0, 0.0);
	float *w = randf(C, 1.0, 1.0), *b = randf(C, 1.0, 0.0), *rm = randf(C, 1.0, 0.0), *rv = randf(C, 0.5, 1.0);
	/* forward: [y, mean, invstd, running] from each kernel */
	float *fo[2][4];
	for (int k = 0; k < 2; k++) {
		fo[k][0] = malloc(sizeof(float) * (size_t)n);
		fo[k][1] = malloc(sizeof(float) * (size_t)C);
		fo[k][2] = malloc(sizeof(float) * (size_t)C);
		fo[k][3] = malloc(sizeof(float) * (size_t)(2 * C));
		k_tensor in[5];
		int ni = 0;
		in[ni++] = tensor(x, 4, dims);
		if (has_w)
			in[ni++] = tensor(w, 1, cd);
		if (has_b)
			in[ni++] = tensor(b, 1, cd);
		in[ni++] = tensor(rm, 1, cd);
		in[ni++] = tensor(rv, 1, cd);
		k_tensor out[4] = {tensor(fo[k][0], 4, dims), tensor(fo[k][1], 1, cd), tensor(fo[k][2], 1, cd),
				   tensor(fo[k][3], 2, rd)};
		k_attr attrs[5] = {{0, 0.1, NULL, 0}, {0, 1e-5, NULL, 0}, {has_w, 0, NULL, 0}, {has_b, 0, NULL, 0},
				   {act, 0, NULL, 0}};
		k_call call = make_call(attrs, in, ni, out, 4, k ? pool : NULL);
		if (k == 0) {
			CHECK_OK(kref_batch_norm_train(&call));
		} else {
			CHECK(kfast_batch_norm_train.supports(&call) == (H * W >= 8));
			CHECK_OK(kfast_batch_norm_train.supports(&call) ? kfast_batch_norm_train.run(&call)
								       : kref_batch_norm_train(&call));
		}
	}
	snprintf(label, sizeof label, "train N%lld C%lld %lldx%lld w%d b%d relu %d off %g", (long long)N, (long long)C,
		 (long long)H, (long long)W, has_w, has_b, act, offset);
	int negative = 0;
	for (int64_t i = 0; i < n; i++)
		negative += fo[1][0][i] < 0;
	CHECK(act ? negative == 0 : negative > 0);
	compare(label, fo[1][0], fo[0][0], n, 2e-5 * (1 + fabs(offset)));
	compare(label, fo[1][1], fo[0][1], C, 1e-6);
	compare(label, fo[1][2], fo[0][2], C, 2e-5 * (1 + fabs(offset)));
	compare(label, fo[1][3], fo[0][3], 2 * C, 2e-5 * (1 + fabs(offset)));
	/* backward from the reference's saved statistics, train and eval, and
	 * with ReLU's backward folded in (mask r: dy where r > 0, else 0), which
	 * must equal the unmasked kernel on the masked dy */
	float *r = randf(n, 1.0, 0.0), *dym = malloc(sizeof(float) * (size_t)n);
	for (int64_t i = 0; i < n; i += 5)
		r[i] = 0.0f; /* at the threshold: masked */
	for (int64_t i = 0; i < n; i++)
		dym[i] = r[i] <= 0.0f ? 0.0f : dy[i];
	for (int mode = 0; mode < 4; mode++) {
		int train = mode & 1, masked = mode >> 1;
		float *bo[3][3];
		for (int k = 0; k < 3; k++) {
			bo[k][0] = malloc(sizeof(float) * (size_t)n);
			bo[k][1] = malloc(sizeof(float) * (size_t)C);
			bo[k][2] = malloc(sizeof(float) * (size_t)C);
			/* k = 0: reference, 1: fast, 2: reference on the masked dy */
			k_tensor in[6];
			int ni = 0;
			in[ni++] = tensor(k == 2 ? dym : dy, 4, dims);
			in[ni++] = tensor(x, 4, dims);
			in[ni++] = tensor(fo[0][1], 1, cd);
			in[ni++] = tensor(fo[0][2], 1, cd);
			if (has_w)
				in[ni++] = tensor(w, 1, cd);
			int m = masked && k < 2;
			if (m)
				in[ni++] = tensor(r, 4, dims);
			k_tensor out[3] = {tensor(bo[k][0], 4, dims), tensor(bo[k][1], 1, cd), tensor(bo[k][2], 1, cd)};
			k_attr attrs[4] = {{has_w, 0, NULL, 0}, {train, 0, NULL, 0}, {m, 0, NULL, 0}, {0, 0.0, NULL, 0}};
			k_call call = make_call(attrs, in, ni, out, 3, k == 1 ? pool : NULL);
			if (k != 1)
				CHECK_OK(kref_batch_norm_backward(&call));
			else
				CHECK_OK(kfast_batch_norm_backward.supports(&call) ? kfast_batch_norm_backward.run(&call)
										   : kref_batch_norm_backward(&call));
		}
		snprintf(label, sizeof label, "backward train %d mask %d N%lld C%lld %lldx%lld w%d off %g", train, masked,
			 (long long)N, (long long)C, (long long)H, (long long)W, has_w, offset);
		/* dx and the sums carry the float sums' rounding over N*H*W terms */
		for (int k = 1; k < (masked ? 3 : 2); k++) {
			compare(label, bo[k][0], bo[0][0], n, 1e-4);
			compare(label, bo[k][1], bo[0][1], C, 1e-4 * sqrt((double)(N * H * W)));
			compare(label, bo[k][2], bo[0][2], C, 1e-4 * sqrt((double)(N * H * W)));
		}
		for (int k = 0; k < 3; k++)
			for (int j = 0; j < 3; j++)
				free(bo[k][j]);
	}
	free(r), free(dym);
	for (int k = 0; k < 2; k++)
		for (int j = 0; j < 4; j++)
			free(fo[k][j]);
	free(x), free(dy), free(w), free(b), free(rm), free(rv);
}

static void test_kernels(rt_pool *pool)
{
	static const int64_t shapes[][4] = {{2, 3, 5, 7}, {1, 17, 9, 9}, {4, 64, 7, 7}, {3, 5, 1, 33},
					    {2, 7, 1, 3},  {1, 1, 16, 16}, {5, 31, 13, 11}};
	for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
		for (int f = 0; f < 8; f++)
			run_case(shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], f & 1, (f >> 1) & 1, f >> 2,
				 s == 2 ? 100.0 : 0.0, pool);
}

static void test_threshold(rt_pool *pool)
{
	int64_t sizes[] = {1, 15, 17, 1000, 300001};
	for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
		int64_t n = sizes[s], dims[1] = {n};
		float *g = randf(n, 1.0, 0.0), *x = randf(n, 1.0, 0.0), *o[2];
		for (int64_t i = 0; i < n; i += 7)
			x[i] = (i % 2) ? 0.0f : NAN; /* at the threshold, and NaN (keeps the gradient) */
		for (int k = 0; k < 2; k++) {
			o[k] = malloc(sizeof(float) * (size_t)n);
			k_tensor in[2] = {tensor(g, 1, dims), tensor(x, 1, dims)}, out[1] = {tensor(o[k], 1, dims)};
			k_attr attrs[1] = {{0, 0.0, NULL, 0}};
			k_call call = make_call(attrs, in, 2, out, 1, pool);
			CHECK_OK(k ? kfast_threshold_backward.run(&call) : kref_threshold_backward(&call));
		}
		check_count++;
		if (memcmp(o[0], o[1], sizeof(float) * (size_t)n) != 0) {
			check_failures++;
			fprintf(stderr, "threshold_backward n=%lld differs from the reference\n", (long long)n);
		}
		CHECK(o[0][0] == g[0]); /* x[0] is NaN */
		free(g), free(x), free(o[0]), free(o[1]);
	}
}

/* the ops through the public API: the shape function's refusals */
static void test_api(void)
{
	int64_t xd[4] = {2, 3, 4, 4}, cd[1] = {3}, bad[1] = {4};
	float x[96] = {0}, c[4] = {0};
	th_arg ok[3] = {th_make(AIR_F32, x, 4, xd), th_make(AIR_F32, c, 1, cd), th_make(AIR_F32, c, 1, cd)};
	air_graph *g = NULL;
	CHECK_OK(th_build("batch_norm_train", ok, 3, NULL, 0, &g));
	air_graph_destroy(g);
	th_arg wrong[3] = {ok[0], ok[1], th_make(AIR_F32, c, 1, bad)};
	th_expect_build_error("batch_norm_train", wrong, 3, NULL, 0, AIR_SHAPE_MISMATCH, "running_var of 4 channels");
	th_arg ints[3] = {th_make(AIR_I64, x, 4, xd), ok[1], ok[2]};
	th_expect_build_error("batch_norm_train", ints, 3, NULL, 0, AIR_UNSUPPORTED, "int64 x");
	air_attr hw = th_int("has_weight", 1);
	th_expect_build_error("batch_norm_train", ok, 3, &hw, 1, AIR_INVALID_ARGUMENT, "has_weight without one");
	th_arg bw[6] = {ok[0], ok[0], ok[1], ok[2], ok[1], ok[0]};
	CHECK_OK(th_build("batch_norm_backward", bw, 4, NULL, 0, &g));
	air_graph_destroy(g);
	air_attr masked[2] = {th_int("has_mask", 1), th_int("has_weight", 1)};
	CHECK_OK(th_build("batch_norm_backward", bw, 6, masked, 2, &g));
	air_graph_destroy(g);
	air_attr no_w[2] = {th_int("has_mask", 1), th_int("has_weight", 0)};
	th_arg bw5[5] = {ok[0], ok[0], ok[1], ok[2], ok[0]};
	CHECK_OK(th_build("batch_norm_backward", bw5, 5, no_w, 2, &g)); /* the mask, no weight */
	air_graph_destroy(g);
	th_expect_build_error("batch_norm_backward", bw, 5, masked, 1, AIR_INVALID_ARGUMENT, "mask or weight?");
	th_expect_build_error("batch_norm_backward", bw, 5, masked, 2, AIR_INVALID_ARGUMENT, "has_mask, no mask");
	th_arg bw_bad[5] = {ok[0], ok[0], ok[1], ok[2], th_make(AIR_F32, x, 1, cd)};
	th_expect_build_error("batch_norm_backward", bw_bad, 5, no_w, 2, AIR_SHAPE_MISMATCH, "a [C] mask");
	th_arg tb[2] = {ok[0], th_make(AIR_F32, x, 1, cd)};
	th_expect_build_error("threshold_backward", tb, 2, NULL, 0, AIR_SHAPE_MISMATCH, "threshold shapes differ");
}

int main(void)
{
	printf("bn_train loops: %s\n", kbn_isa_name());
	test_kernels(NULL);
	rt_pool *pool = NULL;
	CHECK_OK(rt_pool_create(3, &pool));
	test_kernels(pool);
	test_threshold(NULL);
	test_threshold(pool);
	rt_pool_destroy(pool);
	test_api();
	return check_report("test_bn_train");
}

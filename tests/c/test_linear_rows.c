/* test_linear_rows.c - linear with a borrowed constant weight under the
 * default memory optimization runs linear_gemm_weight_rows (no packed
 * copy) from 16 tokens and 2 MiB weights: right on awkward sizes
 * (tokens past one task's block, rows past one tile, K past the AVX-512
 * tile loop's reach), with and without bias, residual and each kind of
 * activation, x of rank 2 and 3, against the reference kernels. A weight
 * the graph owns, or a compile without memory optimization, keeps the
 * packed kernel. A weight that is a graph input is read in place too (from
 * the same sizes on). */
#include <math.h>
#include <stdio.h>

#include "kernels/gemm/amx.h"
#include "pass_graph.h"

typedef struct lin_case {
	int64_t M, K, N;
	int bias, residual, act; /* act: a k_act value (0 none, 1 relu, 3 gelu, 5 silu, 6 sigmoid) */
	int rank3;
} lin_case;

/* borrow: 0 an owned constant weight, 1 a borrowed one, 2 a graph input
 * (then the inputs are x, w and the residual) */
static air_graph *build(const lin_case *c, int borrow)
{
	air_graph *g;
	CHECK_OK(air_graph_create(&g));
	int64_t xd3[3] = {c->M == 1 ? 1 : c->M / 2, c->M == 1 ? 1 : 2, c->K}, xd2[2] = {c->M, c->K};
	int64_t wd[2] = {c->N, c->K}, bd[1] = {c->N}, rd3[3] = {xd3[0], xd3[1], c->N}, rd2[2] = {c->M, c->N};
	air_value in[4];
	int n = 0;
	in[n++] = input(g, "x", c->rank3 ? 3 : 2, c->rank3 ? xd3 : xd2);
	if (borrow == 2) {
		in[n++] = input(g, "w", 2, wd);
	} else if (borrow) {
		in[n++] = constant(g, 2, wd, -0.5f, 0.5f);
	} else {
		float *w = randv(c->N * c->K, -0.5f, 0.5f);
		CHECK_OK(air_graph_add_constant(g, AIR_F32, 2, wd, w, 0, &in[n++])); /* copied: owned */
		free(w);
	}
	if (c->bias)
		in[n++] = constant(g, 1, bd, -1.0f, 1.0f);
	if (c->residual)
		in[n++] = input(g, "r", c->rank3 ? 3 : 2, c->rank3 ? rd3 : rd2);
	air_attr attrs[3] = {iattr("has_bias", c->bias), iattr("act", c->act), iattr("has_residual", c->residual)};
	air_value y = node(g, "linear", in, n, attrs, 3);
	CHECK_OK(air_graph_set_outputs(g, &y, 1));
	return g;
}

static void check_case(const lin_case *c)
{
	air_graph *g = build(c, 1);
	air_model *fast = compile(g, 0, 0), *ref = compile(g, AIR_COMPILE_REFERENCE_KERNELS, 0);
	air_model *packed = compile(g, AIR_COMPILE_NO_MEMORY_REUSE, 0);
	CHECK(strstr(air_model_report(fast), "linear_gemm_weight_rows") != NULL);
	CHECK(strstr(air_model_report(packed), "linear_gemm_packed") != NULL);
	float *x = randv(c->M * c->K, -2.0f, 2.0f), *r = randv(c->M * c->N, -1.0f, 1.0f);
	float *in[2] = {x, r};
	int rank[2] = {c->rank3 ? 3 : 2, c->rank3 ? 3 : 2};
	int64_t dims[2][4] = {{c->M == 1 ? 1 : c->M / 2, c->M == 1 ? 1 : 2, c->K},
			      {c->M == 1 ? 1 : c->M / 2, c->M == 1 ? 1 : 2, c->N}};
	if (!c->rank3) {
		dims[0][0] = c->M, dims[0][1] = c->K;
		dims[1][0] = c->M, dims[1][1] = c->N;
	}
	int n_in = c->residual ? 2 : 1;
	int64_t n[4];
	/* twice: the second run reuses the session's workspace */
	float *out[4] = {run(fast, n_in, in, rank, dims, &n[0]), run(fast, n_in, in, rank, dims, &n[1]),
			 run(packed, n_in, in, rank, dims, &n[2]), run(ref, n_in, in, rank, dims, &n[3])};
	/* fp32 sums of K products in another order than the reference's */
	const double tol = 1e-5 + 2e-6 * sqrt((double)c->K);
	int bad = 0;
	double worst = 0;
	for (int64_t i = 0; i < n[3]; i++) {
		double want = out[3][i], scale = 1.0 + fabs(want);
		for (int k = 0; k < 3; k++) {
			double e = fabs(out[k][i] - want) / scale;
			worst = fmax(worst, e);
			bad += !(e <= tol);
		}
	}
	if (bad || n[0] != n[3])
		fprintf(stderr, "M %lld K %lld N %lld bias %d residual %d act %d rank3 %d: %d differ (worst %.3g)\n",
			(long long)c->M, (long long)c->K, (long long)c->N, c->bias, c->residual, c->act, c->rank3, bad,
			worst);
	CHECK(bad == 0 && n[0] == n[3]);
	for (int k = 0; k < 4; k++)
		free(out[k]);
	free(x), free(r);
	air_model_destroy(fast), air_model_destroy(ref), air_model_destroy(packed);
	air_graph_destroy(g);
}

/* A weight given at run time (a training step's parameter) is read in place
 * too, whatever the memory option: two calls with different weights, each
 * against the reference. Under 16 tokens or 256 rows or columns it keeps
 * linear_gemm (packing the weight on every call). */
static void check_input_weight(const lin_case *c, int rows_expected)
{
	air_graph *g = build(c, 2);
	air_model *fast = compile(g, 0, 0), *ref = compile(g, AIR_COMPILE_REFERENCE_KERNELS, 0);
	air_model *nomem = compile(g, AIR_COMPILE_NO_MEMORY_REUSE, 0);
	const char *want = rows_expected ? "linear_gemm_weight_rows" : "linear_gemm ";
	CHECK(strstr(air_model_report(fast), want) != NULL);
	CHECK(strstr(air_model_report(nomem), want) != NULL);
	int rank[3] = {2, 2, 2};
	int64_t dims[3][4] = {{c->M, c->K}, {c->N, c->K}, {c->M, c->N}};
	const double tol = 1e-5 + 2e-6 * sqrt((double)c->K);
	for (int call = 0; call < 2; call++) {
		float *x = randv(c->M * c->K, -2.0f, 2.0f), *w = randv(c->N * c->K, -0.5f, 0.5f);
		float *r = randv(c->M * c->N, -1.0f, 1.0f);
		float *in[3] = {x, w, r};
		int n_in = c->residual ? 3 : 2;
		int64_t n[3];
		float *out[3] = {run(fast, n_in, in, rank, dims, &n[0]), run(nomem, n_in, in, rank, dims, &n[1]),
				 run(ref, n_in, in, rank, dims, &n[2])};
		int bad = 0;
		for (int64_t i = 0; i < n[2]; i++)
			for (int k = 0; k < 2; k++)
				bad += !(fabs(out[k][i] - out[2][i]) / (1.0 + fabs(out[2][i])) <= tol);
		if (bad)
			fprintf(stderr, "input weight M %lld K %lld N %lld call %d: %d differ\n", (long long)c->M,
				(long long)c->K, (long long)c->N, call, bad);
		CHECK(bad == 0 && n[0] == n[2] && n[1] == n[2]);
		for (int k = 0; k < 3; k++)
			free(out[k]);
		free(x), free(w), free(r);
	}
	air_model_destroy(fast), air_model_destroy(ref), air_model_destroy(nomem);
	air_graph_destroy(g);
}

/* An owned weight (copied into the graph, as passes make them) cannot be
 * borrowed at run time, and under 16 tokens, 256 rows or columns of
 * weight, or 2 MiB of borrowed weight the packed kernel is faster: all
 * keep linear_gemm_packed. */
static void check_packed(const lin_case *c, int borrow)
{
	air_graph *g = build(c, borrow);
	air_model *m = compile(g, 0, 0);
	CHECK(strstr(air_model_report(m), "linear_gemm_packed") != NULL);
	CHECK(strstr(air_model_report(m), "linear_gemm_weight_rows") == NULL);
	air_model_destroy(m);
	air_graph_destroy(g);
}

int main(void)
{
	/* (K 1000: the AVX-512 tile loop over panels that are not all full;
	 * K 4100: past its reach, the blocked GEMM) */
	static const int64_t shapes[][3] = {{16, 768, 768}, {21, 769, 771}, {300, 720, 733},
					     {70, 1030, 515}, {75, 1000, 530}, {40, 4100, 256}};
	static const int acts[] = {0, 1, 3, 5, 6};
	for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
		for (int bias = 0; bias < 2; bias++)
			for (int residual = 0; residual < 2; residual++)
				for (size_t a = 0; a < sizeof acts / sizeof acts[0]; a++) {
					lin_case c = {shapes[s][0], shapes[s][1], shapes[s][2], bias, residual, acts[a],
						      (int)((s + a) % 2) && shapes[s][0] % 2 == 0};
					check_case(&c);
				}
	/* past 512 tokens the blocked GEMM takes every K (three token blocks,
	 * the last of 8) */
	/* (and, from 512 tokens, the AMX GEMM where the CPU has it: both
	 * the borrowed weight's kernel and the packed one take it) */
	lin_case many[] = {{520, 1030, 515, 1, 1, 3, 1}, {520, 1030, 515, 0, 0, 0, 0}};
	const uint64_t amx_before = kamx_passes();
	for (size_t i = 0; i < sizeof many / sizeof many[0]; i++)
		check_case(&many[i]);
	CHECK(kamx_available() ? kamx_passes() >= amx_before + 4 : kamx_passes() == amx_before);
	lin_case owned = {32, 256, 256, 1, 0, 0, 0}, few = {15, 256, 256, 1, 0, 0, 0}, narrow = {32, 192, 768, 1, 0, 0, 0};
	lin_case small = {32, 512, 512, 1, 0, 0, 0}; /* 1 MiB: under the 2 MiB a borrowed weight needs */
	check_packed(&owned, 0);
	check_packed(&few, 1);
	check_packed(&narrow, 1);
	check_packed(&small, 1);
	lin_case inputs[] = {{128, 768, 768, 1, 0, 0, 0}, {21, 257, 259, 0, 1, 1, 0}, {300, 256, 263, 1, 1, 3, 0},
			     {40, 4100, 256, 1, 0, 5, 0}, {600, 700, 520, 1, 1, 3, 0}};
	for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++)
		check_input_weight(&inputs[i], 1);
	check_input_weight(&few, 0);
	check_input_weight(&narrow, 0);
	for (int i = 0; i < nkeep; i++)
		free(keep[i]);
	return check_report("test_linear_rows");
}

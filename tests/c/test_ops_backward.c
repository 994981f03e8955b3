/* test_ops_backward.c - layer_norm_backward, embedding_backward and dropout
 * through the public API: the fast kernels and the reference kernels
 * (AIR_COMPILE_REFERENCE_KERNELS) against values computed here in double, on
 * odd sizes, sizes that run on several threads, and with bad input. Dropout:
 * the generator against published Philox-4x32-10 answers, p = 0 exact, p = 1
 * all zero, the keep fraction within a binomial bound, scale, the same
 * mask for the same seed and any thread count, another for another seed or
 * stream. softmax_backward (softmax and log_softmax, last and inner axes),
 * activation_backward (each kind) and dropout_backward against the
 * formulas in double. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels/elementwise/act_backward.h"
#include "kernels/elementwise/dropout.h"
#include "op_harness.h"

enum { MAX_OUT = 3 };

/* Builds op over args (all graph inputs), with all n_out outputs, compiles
 * with flags and num_threads, runs; outs[k] are new buffers (free them). */
static air_status run_op(const char *op, const th_arg *args, int n, const air_attr *attrs, int na, int n_out,
			 uint32_t flags, int threads, void **outs)
{
	air_graph *g = NULL;
	air_status st = air_graph_create(&g);
	air_value vals[TH_MAX_ARGS], out[MAX_OUT];
	for (int i = 0; i < n && st == AIR_OK; i++)
		st = air_graph_add_input(g, NULL, args[i].dtype, args[i].rank, args[i].dims, &vals[i]);
	int nout = 0;
	if (st == AIR_OK)
		st = air_graph_add_node(g, op, vals, n, attrs, na, out, MAX_OUT, &nout);
	if (st == AIR_OK)
		st = air_graph_set_outputs(g, out, n_out);
	air_model *m = NULL;
	if (st == AIR_OK) {
		air_compile_options o;
		air_compile_options_init(&o);
		o.flags = flags;
		o.num_threads = threads;
		st = air_compile(g, &o, &m);
	}
	air_graph_destroy(g);
	air_session *s = NULL;
	if (st == AIR_OK)
		st = air_session_create(m, &s);
	for (int i = 0; i < n && st == AIR_OK; i++)
		st = air_session_set_input(s, i, args[i].data, args[i].rank, args[i].dims);
	for (int k = 0; k < n_out; k++)
		outs[k] = NULL;
	for (int k = 0; k < n_out && st == AIR_OK; k++) {
		int rank;
		int64_t dims[AIR_MAX_RANK];
		air_dtype dt;
		st = air_session_output_shape(s, k, &rank, dims);
		if (st != AIR_OK)
			break;
		air_model_output_info(m, k, &dt, NULL, NULL);
		size_t bytes = air_dtype_size(dt);
		for (int d = 0; d < rank; d++)
			bytes *= (size_t)dims[d];
		outs[k] = malloc(bytes ? bytes : 1);
		memset(outs[k], 0x7f, bytes); /* poison: an element not written shows */
		st = air_session_set_output(s, k, outs[k], bytes);
	}
	if (st == AIR_OK)
		st = air_session_run(s);
	air_session_destroy(s);
	air_model_destroy(m);
	if (st != AIR_OK)
		for (int k = 0; k < n_out; k++) {
			free(outs[k]);
			outs[k] = NULL;
		}
	return st;
}

/* ---- layer_norm_backward ------------------------------------------------ */

/* x [rows x n] (the normalized dims flattened), nd normalized dims given by
 * xdims[rank-nd..]; weight optional. */
static void check_lnb(air_dtype dt, int rank, const int64_t *xdims, int nd, bool has_w, uint32_t flags)
{
	int64_t n = 1, rows = 1;
	for (int d = 0; d < rank; d++) {
		if (d >= rank - nd)
			n *= xdims[d];
		else
			rows *= xdims[d];
	}
	double *x = th_values(rows * n, dt), *g = th_values(rows * n, dt), *w = th_values(n, dt);
	for (int64_t i = 0; i < rows * n; i++)
		x[i] = dt == AIR_F32 ? (double)(float)(x[i] * 3 + 0.5) : x[i] * 3 + 0.5;
	double *mean = malloc(sizeof(double) * (size_t)rows), *rstd = malloc(sizeof(double) * (size_t)rows);
	for (int64_t r = 0; r < rows; r++) {
		double s = 0, q = 0;
		for (int64_t i = 0; i < n; i++)
			s += x[r * n + i];
		s /= (double)n;
		for (int64_t i = 0; i < n; i++)
			q += (x[r * n + i] - s) * (x[r * n + i] - s);
		mean[r] = dt == AIR_F32 ? (double)(float)s : s;
		double rs = 1.0 / sqrt(q / (double)n + 1e-5);
		rstd[r] = dt == AIR_F32 ? (double)(float)rs : rs;
	}
	/* expected, with magnitudes for the tolerance */
	double *gx = malloc(sizeof(double) * (size_t)(rows * n)), *mx = malloc(sizeof(double) * (size_t)(rows * n));
	double *gw = calloc((size_t)n, sizeof(double)), *gb = calloc((size_t)n, sizeof(double));
	double *mw = calloc((size_t)n, sizeof(double)), *mb = calloc((size_t)n, sizeof(double));
	for (int64_t r = 0; r < rows; r++) {
		double a = 0, b = 0, aa = 0, ab = 0;
		for (int64_t i = 0; i < n; i++) {
			double gwv = g[r * n + i] * (has_w ? w[i] : 1.0), xh = (x[r * n + i] - mean[r]) * rstd[r];
			a += gwv;
			b += gwv * xh;
			aa += fabs(gwv);
			ab += fabs(gwv * xh);
		}
		a /= (double)n, b /= (double)n, aa /= (double)n, ab /= (double)n;
		for (int64_t i = 0; i < n; i++) {
			double gwv = g[r * n + i] * (has_w ? w[i] : 1.0), xh = (x[r * n + i] - mean[r]) * rstd[r];
			gx[r * n + i] = rstd[r] * (gwv - a - xh * b);
			mx[r * n + i] = rstd[r] * (fabs(gwv) + aa + fabs(xh) * ab + fabs(xh * b));
			gw[i] += g[r * n + i] * xh;
			mw[i] += fabs(g[r * n + i] * xh);
			gb[i] += g[r * n + i];
			mb[i] += fabs(g[r * n + i]);
		}
	}
	int64_t sdims[AIR_MAX_RANK];
	for (int d = 0; d < rank; d++)
		sdims[d] = d >= rank - nd ? 1 : xdims[d];
	void *bx = th_as(x, rows * n, dt), *bg = th_as(g, rows * n, dt), *bw = th_as(w, n, dt);
	void *bm = th_as(mean, rows, dt), *br = th_as(rstd, rows, dt);
	th_arg args[5] = {th_make(dt, bg, rank, xdims), th_make(dt, bx, rank, xdims), th_make(dt, bm, rank, sdims),
			  th_make(dt, br, rank, sdims), th_make(dt, bw, nd, xdims + rank - nd)};
	air_attr attrs[2] = {th_int("normalized_ndim", nd), th_int("has_weight", has_w)};
	void *outs[3];
	air_status st = run_op("layer_norm_backward", args, has_w ? 5 : 4, attrs, 2, 3, flags, 0, outs);
	CHECK_OK(st);
	if (st == AIR_OK) {
		double tol = dt == AIR_F32 ? 3e-6 : 1e-13;
		char label[128];
		snprintf(label, sizeof label, "lnb %s rows %lld n %lld w %d flags %u gx", air_dtype_name(dt),
			 (long long)rows, (long long)n, has_w, flags);
		th_compare(label, dt, outs[0], gx, mx, rows * n, tol, 0);
		label[strlen(label) - 2] = 'g', label[strlen(label) - 1] = 'w';
		th_compare(label, dt, outs[1], gw, mw, n, tol, 0);
		label[strlen(label) - 1] = 'b';
		th_compare(label, dt, outs[2], gb, mb, n, tol, 0);
	}
	for (int k = 0; k < 3; k++)
		free(outs[k]);
	free(x), free(g), free(w), free(mean), free(rstd), free(gx), free(mx), free(gw), free(gb), free(mw), free(mb);
	free(bx), free(bg), free(bw), free(bm), free(br);
}

static void test_layer_norm_backward(void)
{
	static const int64_t sizes[][2] = {{1, 1}, {1, 7}, {3, 5}, {7, 33}, {4, 32}, {5, 64}, {65, 100}, {300, 67},
					   {257, 768}, {2, 1031}};
	for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
		for (int has_w = 0; has_w < 2; has_w++) {
			check_lnb(AIR_F32, 2, sizes[k], 1, has_w, 0);
			check_lnb(AIR_F32, 2, sizes[k], 1, has_w, AIR_COMPILE_REFERENCE_KERNELS);
			check_lnb(AIR_F64, 2, sizes[k], 1, has_w, 0);
		}
	static const int64_t d3[3] = {3, 4, 5}, d3b[3] = {2, 37, 9};
	for (int has_w = 0; has_w < 2; has_w++) {
		check_lnb(AIR_F32, 3, d3, 2, has_w, 0);
		check_lnb(AIR_F32, 3, d3b, 2, has_w, AIR_COMPILE_REFERENCE_KERNELS);
		check_lnb(AIR_F32, 3, d3b, 1, has_w, 0);
		check_lnb(AIR_F32, 3, d3b, 3, has_w, 0);
	}
}

static void test_layer_norm_backward_errors(void)
{
	float buf[64] = {0};
	int64_t xd[2] = {4, 8}, sd[2] = {4, 1}, wd[1] = {8}, bad[2] = {4, 7};
	th_arg args[5] = {th_make(AIR_F32, buf, 2, xd), th_make(AIR_F32, buf, 2, xd), th_make(AIR_F32, buf, 2, sd),
			  th_make(AIR_F32, buf, 2, sd), th_make(AIR_F32, buf, 1, wd)};
	air_attr attrs[2] = {th_int("normalized_ndim", 1), th_int("has_weight", 1)};
	th_expect_build_error("layer_norm_backward", args, 4, attrs, 2, AIR_INVALID_ARGUMENT, "lnb: weight missing");
	args[0] = th_make(AIR_F32, buf, 2, bad);
	th_expect_build_error("layer_norm_backward", args, 5, attrs, 2, AIR_SHAPE_MISMATCH, "lnb: grad shape");
	args[0] = th_make(AIR_I64, buf, 2, xd);
	th_expect_build_error("layer_norm_backward", args, 5, attrs, 2, AIR_DTYPE_MISMATCH, "lnb: grad dtype");
	args[0] = th_make(AIR_F32, buf, 2, xd);
	attrs[0] = th_int("normalized_ndim", 3);
	th_expect_build_error("layer_norm_backward", args, 5, attrs, 2, AIR_INVALID_ARGUMENT, "lnb: nd");
	/* mean with the wrong count: a run-time error, not a wrong answer */
	int64_t sd2[2] = {2, 1};
	attrs[0] = th_int("normalized_ndim", 1);
	args[2] = th_make(AIR_F32, buf, 2, sd2);
	void *outs[3];
	check_count++;
	if (run_op("layer_norm_backward", args, 5, attrs, 2, 3, 0, 0, outs) == AIR_OK) {
		check_failures++;
		fprintf(stderr, "lnb: mean of 2 values for 4 rows ran\n");
		for (int k = 0; k < 3; k++)
			free(outs[k]);
	}
}

/* ---- embedding_backward ----------------------------------------------- */

static void check_eb(air_dtype dt, air_dtype it, int64_t nw, int64_t d, int64_t n, int64_t pad, uint32_t flags)
{
	double *g = th_values(n * d, dt);
	int64_t *idx = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
	for (int64_t p = 0; p < n; p++)
		idx[p] = (int64_t)((th_rand() + 1) * 0.5 * (double)nw) % nw;
	if (n > 3)
		idx[1] = idx[2] = idx[3]; /* a repeated index */
	if (n > 4 && pad >= 0)
		idx[4] = pad;
	double *want = calloc((size_t)(nw * d), sizeof(double)), *mag = calloc((size_t)(nw * d), sizeof(double));
	for (int64_t p = 0; p < n; p++)
		if (idx[p] != pad)
			for (int64_t j = 0; j < d; j++) {
				want[idx[p] * d + j] += g[p * d + j];
				mag[idx[p] * d + j] += fabs(g[p * d + j]);
			}
	void *bi = malloc(8 * (size_t)(n ? n : 1));
	for (int64_t p = 0; p < n; p++) {
		if (it == AIR_I64)
			((int64_t *)bi)[p] = idx[p];
		else
			((int32_t *)bi)[p] = (int32_t)idx[p];
	}
	void *bg = th_as(g, n * d, dt);
	int64_t gd[3] = {1, n, d}, id[2] = {1, n};
	th_arg args[2] = {th_make(dt, bg, 3, gd), th_make(it, bi, 2, id)};
	air_attr attrs[2] = {th_int("num_weights", nw), th_int("padding_idx", pad)};
	void *outs[1];
	air_status st = run_op("embedding_backward", args, 2, attrs, 2, 1, flags, 0, outs);
	CHECK_OK(st);
	if (st == AIR_OK) {
		char label[96];
		snprintf(label, sizeof label, "eb %s nw %lld d %lld n %lld pad %lld", air_dtype_name(dt), (long long)nw,
			 (long long)d, (long long)n, (long long)pad);
		th_compare(label, dt, outs[0], want, mag, nw * d, dt == AIR_F32 ? 1e-6 : 1e-15, 0);
		/* one thread gives the same bits */
		void *one[1];
		CHECK_OK(run_op("embedding_backward", args, 2, attrs, 2, 1, flags, 1, one));
		CHECK(one[0] && memcmp(one[0], outs[0], (size_t)(nw * d) * air_dtype_size(dt)) == 0);
		free(one[0]);
	}
	free(outs[0]);
	free(g), free(idx), free(want), free(mag), free(bi), free(bg);
}

static void test_embedding_backward(void)
{
	check_eb(AIR_F32, AIR_I64, 1, 1, 1, -1, 0);
	check_eb(AIR_F32, AIR_I64, 7, 5, 0, -1, 0);
	check_eb(AIR_F32, AIR_I64, 11, 13, 29, 3, 0);
	check_eb(AIR_F32, AIR_I32, 11, 13, 29, -1, 0);
	check_eb(AIR_F64, AIR_I64, 17, 3, 50, 0, 0);
	check_eb(AIR_F32, AIR_I64, 3001, 37, 500, 5, 0);
	check_eb(AIR_F32, AIR_I64, 3001, 37, 500, 5, AIR_COMPILE_REFERENCE_KERNELS);
	check_eb(AIR_F32, AIR_I32, 50, 768, 4000, 1, 0);
	/* an index out of range is a run-time error */
	float g[6] = {0};
	int64_t idx[2] = {0, 9}, gd[2] = {2, 3}, id[1] = {2};
	th_arg args[2] = {th_make(AIR_F32, g, 2, gd), th_make(AIR_I64, idx, 1, id)};
	air_attr attrs[2] = {th_int("num_weights", 4), th_int("padding_idx", -1)};
	void *outs[1];
	check_count++;
	if (run_op("embedding_backward", args, 2, attrs, 2, 1, 0, 0, outs) != AIR_INVALID_ARGUMENT ||
	    !strstr(air_last_error(), "out of range")) {
		check_failures++;
		fprintf(stderr, "eb: index 9 of 4 rows: %s\n", air_last_error());
	}
	th_arg bad[2] = {th_make(AIR_F32, g, 2, gd), th_make(AIR_F32, g, 1, id)};
	th_expect_build_error("embedding_backward", bad, 2, attrs, 2, AIR_UNSUPPORTED, "eb: float indices");
}

/* ---- dropout ------------------------------------------------------------ */

static void test_philox(void)
{
	/* Known answers of Philox-4x32-10 (Random123's kat_vectors). */
	static const uint32_t ctr[3][4] = {{0, 0, 0, 0},
					   {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
					   {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}};
	static const uint32_t key[3][2] = {{0, 0}, {0xffffffffu, 0xffffffffu}, {0xa4093822u, 0x299f31d0u}};
	static const uint32_t want[3][4] = {{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u},
					    {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu},
					    {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}};
	for (int k = 0; k < 3; k++) {
		uint32_t out[4];
		kd_philox(ctr[k], key[k], out);
		check_count++;
		if (memcmp(out, want[k], sizeof out) != 0) {
			check_failures++;
			fprintf(stderr, "philox answer %d: %08x %08x %08x %08x\n", k, out[0], out[1], out[2], out[3]);
		}
	}
}

typedef struct drop_out {
	void *y;
	uint8_t *mask;
} drop_out;

static drop_out run_dropout(air_dtype dt, const void *x, int64_t n, int64_t seed, double p, int64_t stream,
			    uint32_t flags, int threads)
{
	int64_t xd[1] = {n};
	th_arg args[2] = {th_make(dt, x, 1, xd), th_make(AIR_I64, &seed, 0, NULL)};
	air_attr attrs[2] = {th_float("p", p), th_int("stream", stream)};
	void *outs[2];
	CHECK_OK(run_op("dropout", args, 2, attrs, 2, 2, flags, threads, outs));
	drop_out r = {outs[0], outs[1]};
	return r;
}

static void test_dropout(void)
{
	const int64_t n = 200003;
	double *xv = th_values(n, AIR_F32);
	xv[7] = NAN;
	float *x = th_as(xv, n, AIR_F32);
	/* p = 0: x exactly (NaN included), mask all true */
	drop_out d = run_dropout(AIR_F32, x, n, 1, 0.0, 0, 0, 0);
	if (d.y) {
		bool same = true, all = true;
		for (int64_t i = 0; i < n; i++) {
			same &= memcmp(&((float *)d.y)[i], &x[i], 4) == 0;
			all &= d.mask[i] == 1;
		}
		CHECK(same && all);
	}
	free(d.y), free(d.mask);
	/* p = 1: all zero (NaN * 0 aside), mask all false */
	d = run_dropout(AIR_F32, x, n, 1, 1.0, 0, 0, 0);
	if (d.y) {
		bool zero = true, none = true;
		for (int64_t i = 0; i < n; i++) {
			zero &= i == 7 || ((float *)d.y)[i] == 0.0f;
			none &= d.mask[i] == 0;
		}
		CHECK(zero && none);
	}
	free(d.y), free(d.mask);
	static const double ps[] = {0.1, 0.5, 0.9, 0.37};
	for (size_t k = 0; k < sizeof ps / sizeof *ps; k++) {
		double p = ps[k];
		d = run_dropout(AIR_F32, x, n, 12345 + (int64_t)k, p, 3, 0, 0);
		drop_out r = run_dropout(AIR_F32, x, n, 12345 + (int64_t)k, p, 3, AIR_COMPILE_REFERENCE_KERNELS, 1);
		drop_out o = run_dropout(AIR_F32, x, n, 12346 + (int64_t)k, p, 3, 0, 0);
		drop_out s = run_dropout(AIR_F32, x, n, 12345 + (int64_t)k, p, 4, 0, 0);
		if (!d.y || !r.y || !o.y || !s.y)
			continue;
		int64_t kept = 0, same_seed_other = 0, same_stream_other = 0;
		bool scaled = true;
		float scale = (float)(1.0 / (1.0 - p));
		for (int64_t i = 0; i < n; i++) {
			kept += d.mask[i];
			same_seed_other += d.mask[i] == o.mask[i];
			same_stream_other += d.mask[i] == s.mask[i];
			float want = d.mask[i] ? x[i] * scale : 0.0f;
			if (i != 7)
				scaled &= ((float *)d.y)[i] == want;
		}
		double mean = (1 - p) * (double)n, sd = sqrt((double)n * p * (1 - p));
		CHECK(fabs((double)kept - mean) < 5 * sd);
		CHECK(scaled);
		/* the reference on one thread gives the same bits */
		CHECK(memcmp(d.mask, r.mask, (size_t)n) == 0 && memcmp(d.y, r.y, (size_t)n * 4) == 0);
		/* another seed or stream: as often equal as two independent masks */
		double agree = p * p + (1 - p) * (1 - p), asd = sqrt((double)n * agree * (1 - agree));
		CHECK(fabs((double)same_seed_other - agree * (double)n) < 5 * asd);
		CHECK(fabs((double)same_stream_other - agree * (double)n) < 5 * asd);
		free(d.y), free(d.mask), free(r.y), free(r.mask), free(o.y), free(o.mask), free(s.y), free(s.mask);
	}
	/* f64, odd size */
	double *x64 = th_as(xv, 1001, AIR_F64);
	d = run_dropout(AIR_F64, x64, 1001, 99, 0.25, 0, 0, 0);
	if (d.y) {
		bool ok = true;
		for (int64_t i = 0; i < 1001; i++)
			if (i != 7)
				ok &= ((double *)d.y)[i] == (d.mask[i] ? x64[i] * (1.0 / 0.75) : 0.0);
		CHECK(ok);
	}
	free(d.y), free(d.mask), free(x64);
	/* bad input */
	int64_t xd[1] = {4}, sd2[1] = {2};
	th_arg args[2] = {th_make(AIR_F32, x, 1, xd), th_make(AIR_I64, x, 1, sd2)};
	air_attr attrs[1] = {th_float("p", 0.5)};
	th_expect_build_error("dropout", args, 2, attrs, 1, AIR_SHAPE_MISMATCH, "dropout: two seeds");
	args[1] = th_make(AIR_I64, x, 0, NULL);
	attrs[0] = th_float("p", 1.5);
	th_expect_build_error("dropout", args, 2, attrs, 1, AIR_INVALID_ARGUMENT, "dropout: p 1.5");
	attrs[0] = th_float("p", 0.5);
	args[0] = th_make(AIR_I32, x, 1, xd);
	th_expect_build_error("dropout", args, 2, attrs, 1, AIR_UNSUPPORTED, "dropout: i32");
	free(xv), free(x);
}

/* ---- softmax_backward ----------------------------------------------------- */

/* log of a double (the parameter named log shadows the function below) */
static double logf_or_log(double v)
{
	return log(v);
}

/* x [a, len, b] with the axis in the middle (b = 1: the last axis) */
static void check_sb(air_dtype dt, int64_t a, int64_t len, int64_t b, int log, uint32_t flags)
{
	int64_t n = a * len * b;
	double *g = th_values(n, dt), *x = th_values(n, dt), *y = malloc(sizeof(double) * (size_t)(n ? n : 1));
	double *want = malloc(sizeof(double) * (size_t)(n ? n : 1)), *mag = malloc(sizeof(double) * (size_t)(n ? n : 1));
	for (int64_t o = 0; o < a; o++)
		for (int64_t in = 0; in < b; in++) {
			/* y: a real (log_)softmax of 4x along the line, rounded to dt */
			double mx = -INFINITY, se = 0;
			for (int64_t i = 0; i < len; i++)
				mx = fmax(mx, 4 * x[(o * len + i) * b + in]);
			for (int64_t i = 0; i < len; i++)
				se += exp(4 * x[(o * len + i) * b + in] - mx);
			double s = 0, sa = 0, log_se = logf_or_log(se);
			for (int64_t i = 0; i < len; i++) {
				int64_t k = (o * len + i) * b + in;
				double v = log ? 4 * x[k] - mx - log_se : exp(4 * x[k] - mx) / se;
				y[k] = dt == AIR_F32 ? (double)(float)v : v;
				s += log ? g[k] : g[k] * y[k];
				sa += log ? fabs(g[k]) : fabs(g[k] * y[k]);
			}
			for (int64_t i = 0; i < len; i++) {
				int64_t k = (o * len + i) * b + in;
				want[k] = log ? g[k] - exp(y[k]) * s : y[k] * (g[k] - s);
				mag[k] = log ? fabs(g[k]) + exp(y[k]) * sa : fabs(y[k]) * (fabs(g[k]) + sa);
			}
		}
	void *bg = th_as(g, n, dt), *by = th_as(y, n, dt);
	int64_t dims[3] = {a, len, b};
	int rank = b == 1 ? 2 : 3; /* b = 1: [a, len], the axis last */
	th_arg args[2] = {th_make(dt, bg, rank, dims), th_make(dt, by, rank, dims)};
	air_attr attrs[2] = {th_int("axis", b == 1 ? -1 : 1), th_int("log", log)};
	void *out[1];
	air_status st = run_op("softmax_backward", args, 2, attrs, 2, 1, flags, 0, out);
	CHECK_OK(st);
	if (st == AIR_OK) {
		char label[96];
		snprintf(label, sizeof label, "softmax_backward %s [%lld %lld %lld] log %d flags %u", air_dtype_name(dt),
			 (long long)a, (long long)len, (long long)b, log, flags);
		th_compare(label, dt, out[0], want, mag, n, dt == AIR_F32 ? 4e-6 : 1e-14, 0);
	}
	free(out[0]), free(g), free(x), free(y), free(want), free(mag), free(bg), free(by);
}

static void test_softmax_backward(void)
{
	static const int64_t shapes[][3] = {{1, 1, 1}, {3, 5, 1}, {7, 33, 1}, {4, 256, 1}, {2, 1031, 1},
					    {600, 128, 1}, {3, 7, 5}, {2, 1, 9}, {4, 17, 33}};
	for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++)
		for (int log = 0; log < 2; log++) {
			check_sb(AIR_F32, shapes[k][0], shapes[k][1], shapes[k][2], log, 0);
			check_sb(AIR_F32, shapes[k][0], shapes[k][1], shapes[k][2], log, AIR_COMPILE_REFERENCE_KERNELS);
			check_sb(AIR_F64, shapes[k][0], shapes[k][1], shapes[k][2], log, 0);
		}
	float buf[8] = {0};
	int64_t d1[1] = {8}, d2[1] = {7};
	th_arg args[2] = {th_make(AIR_F32, buf, 1, d1), th_make(AIR_F32, buf, 1, d2)};
	air_attr attrs[2] = {th_int("axis", 0), th_int("log", 0)};
	th_expect_build_error("softmax_backward", args, 2, attrs, 2, AIR_SHAPE_MISMATCH, "sb: shapes");
	args[1] = th_make(AIR_F32, buf, 1, d1);
	attrs[0] = th_int("axis", 1);
	th_expect_build_error("softmax_backward", args, 2, attrs, 2, AIR_INVALID_ARGUMENT, "sb: axis");
}

/* ---- activation_backward, dropout_backward -------------------------------- */

static double act_want(int kind, double g, double t, double *mag)
{
	const double b = sqrt(2.0 / M_PI), k = 0.044715;
	switch (kind) {
	case KA_GELU: {
		double cdf = 0.5 * (1 + erf(t / sqrt(2.0))), pdf = exp(-0.5 * t * t) / sqrt(2 * M_PI);
		/* 1 + erf cancels in the left tail (in torch's f32 formula too): the
		 * bound scales with the terms, not their sum */
		*mag = fabs(g) * (0.5 * (1 + fabs(erf(t / sqrt(2.0)))) + fabs(t) * pdf);
		return g * (cdf + t * pdf);
	}
	case KA_GELU_TANH: {
		double th = tanh(b * (t + k * t * t * t)), r = 0.5 * fabs(t) * (1 - th * th) * b * (1 + 3 * k * t * t);
		*mag = fabs(g) * (0.5 * (1 + fabs(th)) + r) * (1 + fabs(t));
		return g * (0.5 * (1 + th) + 0.5 * t * (1 - th * th) * b * (1 + 3 * k * t * t));
	}
	case KA_SILU: {
		double s = 1 / (1 + exp(-t));
		*mag = fabs(g) * s * (1 + fabs(t) * (1 - s));
		return g * s * (1 + t * (1 - s));
	}
	case KA_TANH: *mag = fabs(g) * (1 + t * t); return g * (1 - t * t);
	default: *mag = fabs(g) * (fabs(1 - t) + 1) * fabs(t); return g * (1 - t) * t;
	}
}

static void test_activation_backward(void)
{
	static const int64_t sizes[] = {1, 7, 255, 256, 257, 40001};
	for (int kind = 0; kind < KA_KIND_COUNT; kind++)
		for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
			for (int ref = 0; ref < 2; ref++) {
				int64_t n = sizes[k];
				double *g = th_values(n, AIR_F32), *t = th_values(n, AIR_F32);
				/* x over [-8, 8) for the x kinds (both tails), y in (-1, 1) or (0, 1) for the y kinds */
				for (int64_t i = 0; i < n; i++)
					t[i] = kind <= KA_SILU ? (double)(float)(t[i] * 8)
							       : kind == KA_SIGMOID ? (double)(float)(t[i] * 0.5 + 0.5) : t[i];
				double *want = malloc(sizeof(double) * (size_t)n), *mag = malloc(sizeof(double) * (size_t)n);
				for (int64_t i = 0; i < n; i++)
					want[i] = act_want(kind, g[i], t[i], &mag[i]);
				void *bg = th_as(g, n, AIR_F32), *bt = th_as(t, n, AIR_F32);
				th_arg args[2] = {th_make(AIR_F32, bg, 1, &n), th_make(AIR_F32, bt, 1, &n)};
				air_attr attrs[1] = {th_int("kind", kind)};
				void *out[1];
				air_status st = run_op("activation_backward", args, 2, attrs, 1, 1,
						       ref ? AIR_COMPILE_REFERENCE_KERNELS : 0, 0, out);
				CHECK_OK(st);
				if (st == AIR_OK) {
					char label[64];
					snprintf(label, sizeof label, "activation_backward kind %d n %lld ref %d", kind,
						 (long long)n, ref);
					th_compare(label, AIR_F32, out[0], want, mag, n, 4e-6, 1e-30);
				}
				free(out[0]), free(g), free(t), free(want), free(mag), free(bg), free(bt);
			}
	/* f64 through the reference */
	int64_t n = 33;
	double *g = th_values(n, AIR_F64), *t = th_values(n, AIR_F64), want[33], mag[33];
	for (int64_t i = 0; i < n; i++)
		want[i] = act_want(KA_GELU, g[i], t[i], &mag[i]);
	th_arg args[2] = {th_make(AIR_F64, g, 1, &n), th_make(AIR_F64, t, 1, &n)};
	air_attr attrs[1] = {th_int("kind", KA_GELU)};
	void *out[1];
	CHECK_OK(run_op("activation_backward", args, 2, attrs, 1, 1, 0, 0, out));
	if (out[0])
		th_compare("activation_backward f64", AIR_F64, out[0], want, mag, n, 1e-14, 0);
	free(out[0]);
	/* shapes must match; kind in range */
	int64_t m = 32;
	args[1] = th_make(AIR_F64, t, 1, &m);
	th_expect_build_error("activation_backward", args, 2, attrs, 1, AIR_SHAPE_MISMATCH, "ab: shapes");
	args[1] = th_make(AIR_F64, t, 1, &n);
	attrs[0] = th_int("kind", KA_KIND_COUNT);
	th_expect_build_error("activation_backward", args, 2, attrs, 1, AIR_INVALID_ARGUMENT, "ab: kind");
	free(g), free(t);
}

static void test_dropout_backward(void)
{
	int64_t n = 50001;
	double *g = th_values(n, AIR_F32);
	float *bg = th_as(g, n, AIR_F32);
	uint8_t *mask = malloc((size_t)n);
	for (int64_t i = 0; i < n; i++)
		mask[i] = th_rand() > 0.3;
	const double scale = 1.0 / 0.65;
	for (int ref = 0; ref < 2; ref++) {
		th_arg args[2] = {th_make(AIR_F32, bg, 1, &n), th_make(AIR_BOOL, mask, 1, &n)};
		air_attr attrs[1] = {th_float("scale", scale)};
		void *out[1];
		CHECK_OK(run_op("dropout_backward", args, 2, attrs, 1, 1, ref ? AIR_COMPILE_REFERENCE_KERNELS : 0, 0, out));
		if (!out[0])
			continue;
		bool same = true; /* torch's g * (mask * scale) in f32, exactly */
		for (int64_t i = 0; i < n; i++)
			same &= ((float *)out[0])[i] == bg[i] * ((float)mask[i] * (float)scale);
		CHECK(same);
		free(out[0]);
	}
	th_arg bad[2] = {th_make(AIR_F32, bg, 1, &n), th_make(AIR_F32, bg, 1, &n)};
	air_attr attrs[1] = {th_float("scale", 2.0)};
	th_expect_build_error("dropout_backward", bad, 2, attrs, 1, AIR_UNSUPPORTED, "db: float mask");
	free(g), free(bg), free(mask);
}

int main(void)
{
	test_softmax_backward();
	test_activation_backward();
	test_dropout_backward();
	test_layer_norm_backward();
	test_layer_norm_backward_errors();
	test_embedding_backward();
	test_philox();
	test_dropout();
	return check_report("test_ops_backward");
}

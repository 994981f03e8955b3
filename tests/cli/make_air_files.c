/* make_air_files.c - writes the .air files, inputs and expected outputs
 * that test_cli.sh runs the `air` binary on: graphs built with the C API,
 * saved with air_graph_save_file, and each run here once in-process so the
 * CLI's outputs can be compared byte for byte.
 *   mlp.air    x f32[batch, 4] -> y = relu(x W^T + b), y2 = y + y (named
 *              outputs, metadata)
 *   two.air    a f32[n, 3], b f32[n, 3] -> a + b (a symbol shared by inputs)
 *   bf16.air   h bf16[2, 3] -> bf16(relu(f32(h))) (bf16 in and out: f32 .npy files)
 *   int.air    k i32[5] -> k + k
 *   ext.air    mlp.air with W saved as an external constant
 * usage: make_air_files DIR */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "air/air.h"
#include "npy.h"

static int failed(const char *what, air_status st)
{
	fprintf(stderr, "make_air_files: %s: %s: %s\n", what, air_status_string(st), air_last_error());
	exit(1);
}
#define TRY(call)                                  \
	do {                                       \
		air_status st_ = (call);           \
		if (st_ != AIR_OK)                 \
			failed(#call, st_);        \
	} while (0)

static void save_npy(const char *dir, const char *name, air_dtype dt, int rank, const int64_t *dims, const void *data)
{
	char path[4096], err[NPY_ERR_SIZE];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	if (npy_write_file(path, dt, rank, dims, data, err)) {
		fprintf(stderr, "make_air_files: %s\n", err);
		exit(1);
	}
}

/* Compiles g, runs it on the inputs and writes each output as
 * <prefix>_out<i>.npy (bf16 widened to f32, as the CLI writes it). */
static void run_expected(const char *dir, const char *prefix, const air_graph *g, int n_in, const void *const *data,
			 const int *ranks, const int64_t (*dims)[AIR_MAX_RANK])
{
	air_model *m;
	air_session *s;
	TRY(air_compile(g, NULL, &m));
	TRY(air_session_create(m, &s));
	for (int i = 0; i < n_in; i++)
		TRY(air_session_set_input(s, i, data[i], ranks[i], dims[i]));
	int n_out = air_model_output_count(m);
	void *outs[8];
	int orank[8];
	int64_t odims[8][AIR_MAX_RANK];
	air_dtype odt[8];
	for (int i = 0; i < n_out; i++) {
		int r;
		air_dim md[AIR_MAX_RANK];
		TRY(air_session_output_shape(s, i, &orank[i], odims[i]));
		TRY(air_model_output_info(m, i, &odt[i], &r, md));
		size_t bytes = air_dtype_size(odt[i]);
		for (int d = 0; d < orank[i]; d++)
			bytes *= (size_t)odims[i][d];
		outs[i] = calloc(1, bytes + 4);
		TRY(air_session_set_output(s, i, outs[i], bytes));
	}
	TRY(air_session_run(s));
	for (int i = 0; i < n_out; i++) {
		char name[256];
		snprintf(name, sizeof name, "%s_out%d.npy", prefix, i);
		if (odt[i] == AIR_BF16) {
			size_t count = 1;
			for (int d = 0; d < orank[i]; d++)
				count *= (size_t)odims[i][d];
			float *wide = malloc(count * 4 + 4);
			for (size_t k = 0; k < count; k++) {
				uint32_t u = (uint32_t)((uint16_t *)outs[i])[k] << 16;
				memcpy(&wide[k], &u, 4);
			}
			save_npy(dir, name, AIR_F32, orank[i], odims[i], wide);
			free(wide);
		} else {
			save_npy(dir, name, odt[i], orank[i], odims[i], outs[i]);
		}
		free(outs[i]);
	}
	air_session_destroy(s);
	air_model_destroy(m);
}

static void save(const air_graph *g, const char *dir, const char *name, const air_save_options *opt)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	TRY(air_graph_save_file(g, opt, path));
}

static void make_mlp(const char *dir)
{
	static const float w[3 * 4] = {1, 0, 0, 0, 0, 1, 0, 0, 1, 1, 1, 1};
	static const float b[3] = {0.5f, -10, 0};
	air_graph *g;
	air_dim batch;
	air_value x, wv, bv, lin, y, y2;
	int n;
	TRY(air_graph_create(&g));
	TRY(air_graph_symbol(g, "batch", &batch));
	const air_dim xd[2] = {batch, 4};
	TRY(air_graph_add_input(g, "x", AIR_F32, 2, xd, &x));
	const int64_t wd[2] = {3, 4}, bd[1] = {3};
	TRY(air_graph_add_constant(g, AIR_F32, 2, wd, w, 0, &wv));
	TRY(air_graph_add_constant(g, AIR_F32, 1, bd, b, 0, &bv));
	const air_value li[3] = {x, wv, bv};
	TRY(air_graph_add_node(g, "linear", li, 3, NULL, 0, &lin, 1, &n));
	TRY(air_graph_add_node(g, "relu", &lin, 1, NULL, 0, &y, 1, &n));
	const air_value yy[2] = {y, y};
	TRY(air_graph_add_node(g, "add", yy, 2, NULL, 0, &y2, 1, &n));
	const air_value outs[2] = {y, y2};
	TRY(air_graph_set_outputs(g, outs, 2));
	air_save_options o;
	air_save_options_init(&o);
	const char *keys[2] = {"torchair_version", "note"}, *values[2] = {"0.1.0", "made by make_air_files"};
	const char *out_names[2] = {"y", "y2"};
	o.meta_keys = keys;
	o.meta_values = values;
	o.n_meta = 2;
	o.output_names = out_names;
	o.n_output_names = 2;
	save(g, dir, "mlp.air", &o);
	/* the same graph with its weight saved as external (no bytes): the
	 * CLI cannot bind it and says so */
	const char *ext_names[1] = {"w"};
	o.externals = &wv;
	o.external_names = ext_names;
	o.n_externals = 1;
	save(g, dir, "ext.air", &o);
	for (int rows = 1; rows <= 5; rows += 4) {
		float xv[5 * 4];
		for (int i = 0; i < rows * 4; i++)
			xv[i] = (float)((i * 7) % 11) * 0.25f - 1.0f;
		const void *data[1] = {xv};
		const int ranks[1] = {2};
		const int64_t dims[1][AIR_MAX_RANK] = {{rows, 4}};
		char name[64], prefix[64];
		snprintf(name, sizeof name, "mlp_x%d.npy", rows);
		snprintf(prefix, sizeof prefix, "mlp_x%d", rows);
		save_npy(dir, name, AIR_F32, 2, dims[0], xv);
		run_expected(dir, prefix, g, 1, data, ranks, dims);
	}
	air_graph_destroy(g);
}

static void make_two(const char *dir)
{
	air_graph *g;
	air_dim n;
	air_value a, b, s;
	int no;
	TRY(air_graph_create(&g));
	TRY(air_graph_symbol(g, "n", &n));
	const air_dim d[2] = {n, 3};
	TRY(air_graph_add_input(g, "a", AIR_F32, 2, d, &a));
	TRY(air_graph_add_input(g, "b", AIR_F32, 2, d, &b));
	const air_value ab[2] = {a, b};
	TRY(air_graph_add_node(g, "add", ab, 2, NULL, 0, &s, 1, &no));
	TRY(air_graph_set_outputs(g, &s, 1));
	save(g, dir, "two.air", NULL);
	float av[6] = {1, 2, 3, 4, 5, 6}, bv[6] = {0.5f, 0.25f, -1, 8, 9, 10}, cv[9] = {0};
	const int64_t d2[2] = {2, 3}, d3[2] = {3, 3};
	save_npy(dir, "two_a.npy", AIR_F32, 2, d2, av);
	save_npy(dir, "two_b.npy", AIR_F32, 2, d2, bv);
	save_npy(dir, "two_b3.npy", AIR_F32, 2, d3, cv);
	const void *data[2] = {av, bv};
	const int ranks[2] = {2, 2};
	const int64_t dims[2][AIR_MAX_RANK] = {{2, 3}, {2, 3}};
	run_expected(dir, "two", g, 2, data, ranks, dims);
	air_graph_destroy(g);
}

static void make_bf16(const char *dir)
{
	air_graph *g;
	air_value h, r;
	int no;
	TRY(air_graph_create(&g));
	const air_dim d[2] = {2, 3};
	TRY(air_graph_add_input(g, "h", AIR_BF16, 2, d, &h));
	/* relu has no bf16 kernel: widen, relu, narrow */
	air_value w, rw;
	air_attr to32 = {.name = "dtype", .type = AIR_ATTR_INT, .i = AIR_F32};
	air_attr to16 = {.name = "dtype", .type = AIR_ATTR_INT, .i = AIR_BF16};
	TRY(air_graph_add_node(g, "cast", &h, 1, &to32, 1, &w, 1, &no));
	TRY(air_graph_add_node(g, "relu", &w, 1, NULL, 0, &rw, 1, &no));
	TRY(air_graph_add_node(g, "cast", &rw, 1, &to16, 1, &r, 1, &no));
	TRY(air_graph_set_outputs(g, &r, 1));
	save(g, dir, "bf16.air", NULL);
	/* f32 inputs whose bf16 rounding is visible: 1 + 2^-9 rounds to 1, 1 +
	 * 3*2^-9 to 1 + 2^-7 (nearest even) */
	const float xf[6] = {1.0f + 1.0f / 512, 1.0f + 3.0f / 512, -2.0f, 0.5f, 3.14159f, -0.0f};
	const int64_t d64[2] = {2, 3};
	save_npy(dir, "bf16_h.npy", AIR_F32, 2, d64, xf);
	uint16_t hb[6];
	for (int i = 0; i < 6; i++) {
		uint32_t u;
		memcpy(&u, &xf[i], 4);
		hb[i] = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
	}
	const void *data[1] = {hb};
	const int ranks[1] = {2};
	const int64_t dims[1][AIR_MAX_RANK] = {{2, 3}};
	run_expected(dir, "bf16", g, 1, data, ranks, dims);
	air_graph_destroy(g);
}

static void make_int(const char *dir)
{
	air_graph *g;
	air_value k, s;
	int no;
	TRY(air_graph_create(&g));
	const air_dim d[1] = {5};
	TRY(air_graph_add_input(g, "k", AIR_I32, 1, d, &k));
	const air_value kk[2] = {k, k};
	TRY(air_graph_add_node(g, "add", kk, 2, NULL, 0, &s, 1, &no));
	TRY(air_graph_set_outputs(g, &s, 1));
	save(g, dir, "int.air", NULL);
	const int32_t kv[5] = {1, -2, 3, 1000000, -7};
	const int64_t d64[1] = {5};
	save_npy(dir, "int_k.npy", AIR_I32, 1, d64, kv);
	const float f4[4] = {1, 2, 3, 4};
	const int64_t d4[1] = {4};
	save_npy(dir, "f32_r1.npy", AIR_F32, 1, d4, f4); /* a rank error for mlp's x */
	const void *data[1] = {kv};
	const int ranks[1] = {1};
	const int64_t dims[1][AIR_MAX_RANK] = {{5}};
	run_expected(dir, "int", g, 1, data, ranks, dims);
	air_graph_destroy(g);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: make_air_files DIR\n");
		return 2;
	}
	make_mlp(argv[1]);
	make_two(argv[1]);
	make_bf16(argv[1]);
	make_int(argv[1]);
	return 0;
}

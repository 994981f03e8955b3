/* main.c - the smallest programs that use an installed libair.
 *
 *   air_example make model.air   build a graph with the C API (y = relu(x W^T
 *                                + b), a symbolic batch) and save it
 *   air_example model.air        load any .air file (mapped, weights used in
 *                                place), run it once on inputs of ones (a
 *                                symbolic dim taken as 1), print the outputs
 *
 * Files exported from Python (torchair.export) run the same way. Everything
 * a C user needs is include/air/air.h; see README.md for building this. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <air/air.h>

#define TRY(call)                                                                        \
	do {                                                                             \
		air_status st_ = (call);                                                 \
		if (st_ != AIR_OK) {                                                     \
			fprintf(stderr, "%s: %s: %s\n", #call, air_status_string(st_), air_last_error()); \
			goto done;                                                       \
		}                                                                        \
	} while (0)

static int make(const char *path)
{
	static const float w[3 * 4] = {1, 0, 0, 0, 0, 1, 0, 0, 1, 1, 1, 1};
	static const float b[3] = {0.5f, -10, 0};
	int rc = 1;
	air_graph *g = NULL;
	air_dim batch;
	air_value x, wv, bv, lin, y;
	int n;
	TRY(air_graph_create(&g));
	TRY(air_graph_symbol(g, "batch", &batch));
	const air_dim xdims[2] = {batch, 4};
	TRY(air_graph_add_input(g, "x", AIR_F32, 2, xdims, &x));
	const int64_t wdims[2] = {3, 4}, bdims[1] = {3};
	TRY(air_graph_add_constant(g, AIR_F32, 2, wdims, w, 0, &wv));
	TRY(air_graph_add_constant(g, AIR_F32, 1, bdims, b, 0, &bv));
	const air_value lin_in[3] = {x, wv, bv};
	TRY(air_graph_add_node(g, "linear", lin_in, 3, NULL, 0, &lin, 1, &n));
	TRY(air_graph_add_node(g, "relu", &lin, 1, NULL, 0, &y, 1, &n));
	TRY(air_graph_set_outputs(g, &y, 1));
	TRY(air_graph_save_file(g, NULL, path));
	rc = 0;
done:
	air_graph_destroy(g);
	return rc;
}

/* One element of dtype as a double, for printing. */
static double element(const void *data, air_dtype dt, size_t i)
{
	switch (dt) {
	case AIR_F32: return ((const float *)data)[i];
	case AIR_F64: return ((const double *)data)[i];
	case AIR_I64: return (double)((const int64_t *)data)[i];
	case AIR_I32: return ((const int32_t *)data)[i];
	case AIR_I16: return ((const int16_t *)data)[i];
	case AIR_I8: return ((const int8_t *)data)[i];
	case AIR_U8: case AIR_BOOL: return ((const uint8_t *)data)[i];
	default: return 0; /* f16/bf16: not converted in this small example */
	}
}

/* A buffer of count ones of dtype. */
static void *ones(air_dtype dt, size_t count)
{
	size_t size = air_dtype_size(dt);
	unsigned char *p = calloc(count ? count : 1, size);
	static const float f1 = 1;
	static const double d1 = 1;
	for (size_t i = 0; p && i < count; i++) {
		unsigned char *e = p + i * size;
		switch (dt) {
		case AIR_F32: memcpy(e, &f1, 4); break;
		case AIR_F64: memcpy(e, &d1, 8); break;
		case AIR_F16: e[1] = 0x3c; break;     /* 1.0 in IEEE half, little-endian */
		case AIR_BF16: e[0] = 0x80; e[1] = 0x3f; break;
		default: e[0] = 1; break;             /* little-endian integers and bool */
		}
	}
	return p;
}

static int run(const char *path)
{
	int rc = 1;
	air_model *m = NULL;
	air_session *s = NULL;
	void *bufs[64] = {0};
	int nb = 0;
	TRY(air_model_load_file(path, NULL, &m));
	TRY(air_session_create(m, &s));
	int n_in = air_model_input_count(m), n_out = air_model_output_count(m);
	if (n_in + n_out > 64) {
		fprintf(stderr, "too many inputs and outputs for this example\n");
		goto done;
	}
	for (int i = 0; i < n_in; i++) {
		air_dtype dt;
		int rank;
		air_dim dims[AIR_MAX_RANK];
		int64_t shape[AIR_MAX_RANK];
		size_t count = 1;
		TRY(air_model_input_info(m, i, &dt, &rank, dims));
		for (int d = 0; d < rank; d++) {
			shape[d] = dims[d] >= 0 ? dims[d] : 1; /* symbolic: 1 */
			count *= (size_t)shape[d];
		}
		if (!(bufs[nb] = ones(dt, count)))
			goto done;
		TRY(air_session_set_input(s, i, bufs[nb++], rank, shape));
	}
	int ranks[64];
	int64_t shapes[64][AIR_MAX_RANK];
	air_dtype dts[64];
	for (int i = 0; i < n_out; i++) {
		air_dim dims[AIR_MAX_RANK];
		size_t count = 1;
		TRY(air_session_output_shape(s, i, &ranks[i], shapes[i]));
		TRY(air_model_output_info(m, i, &dts[i], &ranks[i], dims));
		for (int d = 0; d < ranks[i]; d++)
			count *= (size_t)shapes[i][d];
		if (!(bufs[nb] = calloc(count ? count : 1, air_dtype_size(dts[i]))))
			goto done;
		TRY(air_session_set_output(s, i, bufs[nb++], count * air_dtype_size(dts[i])));
	}
	TRY(air_session_run(s));
	for (int i = 0; i < n_out; i++) {
		size_t count = 1;
		printf("output %d %s [", i, air_dtype_name(dts[i]));
		for (int d = 0; d < ranks[i]; d++) {
			printf("%s%lld", d ? ", " : "", (long long)shapes[i][d]);
			count *= (size_t)shapes[i][d];
		}
		printf("]:");
		for (size_t k = 0; k < count && k < 8; k++)
			printf(" %g", element(bufs[n_in + i], dts[i], k));
		printf("%s\n", count > 8 ? " ..." : "");
	}
	rc = 0;
done:
	for (int i = 0; i < nb; i++)
		free(bufs[i]);
	air_session_destroy(s);
	air_model_destroy(m);
	return rc;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "make") == 0)
		return make(argv[2]);
	if (argc == 2)
		return run(argv[1]);
	fprintf(stderr, "usage: air_example make FILE.air | air_example FILE.air\n");
	return 2;
}

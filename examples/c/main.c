/* main.c - the smallest program that uses an installed libair: build a
 * graph (y = relu(x W^T + b) with a symbolic batch), compile it, run it on
 * a batch of 2 and print the result. Everything a C user needs is
 * include/air/air.h; see README.md for building it. */
#include <stdio.h>
#include <stdlib.h>

#include <air/air.h>

#define TRY(call)                                                                        \
	do {                                                                             \
		air_status st_ = (call);                                                 \
		if (st_ != AIR_OK) {                                                     \
			fprintf(stderr, "%s: %s: %s\n", #call, air_status_string(st_), air_last_error()); \
			goto done;                                                       \
		}                                                                        \
	} while (0)

int main(void)
{
	int rc = 1;
	air_graph *g = NULL;
	air_model *m = NULL;
	air_session *s = NULL;

	static const float w[3 * 4] = {1, 0, 0, 0, 0, 1, 0, 0, 1, 1, 1, 1};
	static const float b[3] = {0.5f, -10, 0};
	const float x[2 * 4] = {1, 2, 3, 4, -1, -2, -3, -4};
	float y[2 * 3];

	air_dim batch, xdims[2];
	air_value in, wv, bv, lin, out;
	int n;
	TRY(air_graph_create(&g));
	TRY(air_graph_symbol(g, "batch", &batch));
	xdims[0] = batch;
	xdims[1] = 4;
	TRY(air_graph_add_input(g, "x", AIR_F32, 2, xdims, &in));
	const int64_t wdims[2] = {3, 4}, bdims[1] = {3};
	TRY(air_graph_add_constant(g, AIR_F32, 2, wdims, w, 0, &wv));
	TRY(air_graph_add_constant(g, AIR_F32, 1, bdims, b, 0, &bv));
	const air_value lin_in[3] = {in, wv, bv};
	TRY(air_graph_add_node(g, "linear", lin_in, 3, NULL, 0, &lin, 1, &n));
	TRY(air_graph_add_node(g, "relu", &lin, 1, NULL, 0, &out, 1, &n));
	TRY(air_graph_set_outputs(g, &out, 1));
	TRY(air_compile(g, NULL, &m));

	TRY(air_session_create(m, &s));
	const int64_t xshape[2] = {2, 4};
	TRY(air_session_set_input(s, 0, x, 2, xshape));
	int rank;
	int64_t ydims[AIR_MAX_RANK];
	TRY(air_session_output_shape(s, 0, &rank, ydims));
	TRY(air_session_set_output(s, 0, y, sizeof y));
	TRY(air_session_run(s));
	for (int64_t i = 0; i < ydims[0]; i++)
		printf("%g %g %g\n", y[i * 3], y[i * 3 + 1], y[i * 3 + 2]);
	rc = 0;
done:
	air_session_destroy(s);
	air_model_destroy(m);
	air_graph_destroy(g);
	return rc;
}

/* air_file_graphs.h - graphs the .air tests save and load (test_air_file.c,
 * test_air_file_damage.c, tests/fuzz): a symbolic MLP with every attribute
 * kind and several dtypes (one constant external), a small CNN with
 * batch norm (constants only), and running a model on fixed inputs. */
#ifndef AIR_TESTS_AIR_FILE_GRAPHS_H
#define AIR_TESTS_AIR_FILE_GRAPHS_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "air/air.h"

static float agf_w1[16 * 8], agf_b1[16], agf_bn[4][4], agf_cw[4 * 3 * 3 * 3];
static uint16_t agf_h16[4]; /* f16 */
static int32_t agf_i32[4] = {3, -1, 4, 1};
static double agf_f64[4] = {0.5, -1.25, 2.0, 1e-3};

static void agf_fill(void)
{
	uint32_t s = 12345;
	float *arrays[] = {agf_w1, agf_b1, &agf_bn[0][0], agf_cw};
	size_t ns[] = {16 * 8, 16, 16, 4 * 27};
	for (int a = 0; a < 4; a++)
		for (size_t i = 0; i < ns[a]; i++) {
			s = s * 1664525u + 1013904223u;
			arrays[a][i] = (float)((int32_t)(s >> 8) % 2000) / 1000.0f;
		}
	for (int i = 0; i < 4; i++) {
		agf_bn[3][i] = 0.5f + (float)i; /* running variance > 0 */
		agf_h16[i] = (uint16_t)(0x3c00 + i * 0x100); /* 1.0, 1.25, 1.5, 1.75 */
	}
}

#define AGF_TRY(x)                        \
	do {                              \
		air_status st_ = (x);     \
		if (st_ != AIR_OK)        \
			return st_;       \
	} while (0)

static air_status agf_node(air_graph *g, const char *op, const air_value *in, int n_in, const air_attr *a, int n_a,
			   air_value *out)
{
	air_value outs[4];
	int n;
	AGF_TRY(air_graph_add_node(g, op, in, n_in, a, n_a, outs, 4, &n));
	*out = outs[0];
	return AIR_OK;
}

/* x f32 [s, 8], ids i64 [s]; outputs: y f64 [s] and r f32 [s, 4, 3], the
 * arange f32 [s]. *bias is the constant meant to be saved external. */
static air_status agf_mlp(air_graph *g, air_value *bias)
{
	air_dim s;
	AGF_TRY(air_graph_symbol(g, "batch", &s));
	air_dim xd[2] = {s, 8}, idd[1] = {s};
	air_value x, ids, w, b, c64, ch16, ci32;
	AGF_TRY(air_graph_add_input(g, "x", AIR_F32, 2, xd, &x));
	AGF_TRY(air_graph_add_input(g, "ids", AIR_I64, 1, idd, &ids));
	int64_t wd[2] = {16, 8}, bd[1] = {16}, d4[1] = {4};
	AGF_TRY(air_graph_add_constant(g, AIR_F32, 2, wd, agf_w1, 0, &w));
	AGF_TRY(air_graph_add_constant(g, AIR_F32, 1, bd, agf_b1, AIR_CONSTANT_BORROW, &b));
	AGF_TRY(air_graph_add_constant(g, AIR_F64, 0, NULL, agf_f64, 0, &c64));
	AGF_TRY(air_graph_add_constant(g, AIR_F16, 1, d4, agf_h16, 0, &ch16));
	AGF_TRY(air_graph_add_constant(g, AIR_I32, 1, d4, agf_i32, 0, &ci32));
	*bias = b;
	air_value h, t, r, y, idf, ar, q;
	air_value lin_in[3] = {x, w, b};
	AGF_TRY(agf_node(g, "linear", lin_in, 3, NULL, 0, &h));
	air_attr slope = {.name = "negative_slope", .type = AIR_ATTR_FLOAT, .f = 0.2};
	AGF_TRY(agf_node(g, "leaky_relu", &h, 1, &slope, 1, &h));
	air_dim s2;
	AGF_TRY(air_graph_dim_expr(g, AIR_DIM_MUL, s, 2, &s2));
	int64_t shape[3] = {s2, 2, 4}; /* [2s, 2, 4]: a dim expression in DIMS */
	air_attr rs = {.name = "shape", .type = AIR_ATTR_INTS, .ints = shape, .n = 3};
	AGF_TRY(agf_node(g, "reshape", &h, 1, &rs, 1, &t));
	int64_t back[3] = {s, 4, 4};
	air_attr rs2 = {.name = "shape", .type = AIR_ATTR_INTS, .ints = back, .n = 3};
	AGF_TRY(agf_node(g, "reshape", &t, 1, &rs2, 1, &t));
	int64_t perm[3] = {0, 2, 1};
	air_attr pa = {.name = "perm", .type = AIR_ATTR_INTS, .ints = perm, .n = 3};
	AGF_TRY(agf_node(g, "permute", &t, 1, &pa, 1, &t));
	air_attr sl[3] = {{.name = "axis", .type = AIR_ATTR_INT, .i = 2},
			  {.name = "start", .type = AIR_ATTR_INT, .i = 1},
			  {.name = "end", .type = AIR_ATTR_INT, .i = 4}};
	AGF_TRY(agf_node(g, "slice", &t, 1, sl, 3, &r)); /* [s, 4, 3] */
	air_value mul_in[2] = {r, r};
	AGF_TRY(agf_node(g, "mul", mul_in, 2, NULL, 0, &r));
	int64_t axes[2] = {1, 2};
	air_attr sa = {.name = "axes", .type = AIR_ATTR_INTS, .ints = axes, .n = 2};
	AGF_TRY(agf_node(g, "sum", &r, 1, &sa, 1, &y)); /* [s] */
	air_attr c = {.name = "dtype", .type = AIR_ATTR_INT, .i = AIR_F64};
	AGF_TRY(agf_node(g, "cast", &y, 1, &c, 1, &y));
	air_value m64[2] = {y, c64};
	AGF_TRY(agf_node(g, "mul", m64, 2, NULL, 0, &y));
	air_attr cf = {.name = "dtype", .type = AIR_ATTR_INT, .i = AIR_F32};
	AGF_TRY(agf_node(g, "cast", &ids, 1, &cf, 1, &idf));
	air_attr ara[4] = {{.name = "start", .type = AIR_ATTR_FLOAT, .f = 0.5},
			   {.name = "step", .type = AIR_ATTR_FLOAT, .f = 0.25},
			   {.name = "length", .type = AIR_ATTR_INT, .i = s},
			   {.name = "dtype", .type = AIR_ATTR_INT, .i = AIR_F32}};
	AGF_TRY(agf_node(g, "arange", NULL, 0, ara, 4, &ar)); /* a symbolic DIM attribute */
	air_value add_in[2] = {ar, idf};
	AGF_TRY(agf_node(g, "add", add_in, 2, NULL, 0, &ar));
	/* f16 and i32 constants, cast and combined: [4] */
	air_value q16, q32;
	AGF_TRY(agf_node(g, "cast", &ch16, 1, &cf, 1, &q16));
	AGF_TRY(agf_node(g, "cast", &ci32, 1, &cf, 1, &q32));
	air_value qa[2] = {q16, q32};
	AGF_TRY(agf_node(g, "sub", qa, 2, NULL, 0, &q));
	air_value outs[4] = {y, r, ar, q};
	return air_graph_set_outputs(g, outs, 4);
}

/* x f32 [n, 3, 6, 6] -> conv 3x3 pad 1, batch norm, relu, max pool 2 */
static air_status agf_cnn(air_graph *g)
{
	air_dim n;
	AGF_TRY(air_graph_symbol(g, "n", &n));
	air_dim xd[4] = {n, 3, 6, 6};
	air_value x, cw, bn[4], y;
	AGF_TRY(air_graph_add_input(g, "image", AIR_F32, 4, xd, &x));
	int64_t wd[4] = {4, 3, 3, 3}, d4[1] = {4};
	AGF_TRY(air_graph_add_constant(g, AIR_F32, 4, wd, agf_cw, 0, &cw));
	for (int i = 0; i < 4; i++)
		AGF_TRY(air_graph_add_constant(g, AIR_F32, 1, d4, agf_bn[i], 0, &bn[i]));
	int64_t pad[2] = {1, 1}, k2[2] = {2, 2};
	air_attr ca[2] = {{.name = "padding", .type = AIR_ATTR_INTS, .ints = pad, .n = 2},
			  {.name = "has_bias", .type = AIR_ATTR_INT, .i = 0}};
	air_value cin[2] = {x, cw};
	AGF_TRY(agf_node(g, "conv2d", cin, 2, ca, 2, &y));
	air_attr eps = {.name = "eps", .type = AIR_ATTR_FLOAT, .f = 1e-3};
	air_value bin[5] = {y, bn[0], bn[1], bn[2], bn[3]};
	AGF_TRY(agf_node(g, "batch_norm", bin, 5, &eps, 1, &y));
	AGF_TRY(agf_node(g, "relu", &y, 1, NULL, 0, &y));
	air_attr pk = {.name = "kernel", .type = AIR_ATTR_INTS, .ints = k2, .n = 2};
	AGF_TRY(agf_node(g, "max_pool2d", &y, 1, &pk, 1, &y));
	return air_graph_set_outputs(g, &y, 1);
}

/* agf_run refuses (AIR_OUT_OF_MEMORY, nothing run) an input, output or
 * arena larger than this: the damage tests run graphs whose sizes a
 * mutation may have made enormous. */
static size_t agf_max_bytes = (size_t)-1;

/* Runs m on inputs made from seed with symbol size `size` (every symbolic
 * input dim becomes size); *outs gets malloc'ed outputs (n_out of them),
 * sizes in nbytes. The caller frees. */
static air_status agf_run(const air_model *m, int64_t size, uint32_t seed, void **outs, size_t *nbytes)
{
	air_session *s = NULL;
	void *ins[8] = {0};
	int n_in = air_model_input_count(m), n_out = air_model_output_count(m);
	for (int o = 0; o < n_out; o++)
		outs[o] = NULL;
	air_status st = air_session_create(m, &s);
	for (int i = 0; st == AIR_OK && i < n_in && i < 8; i++) {
		air_dtype dt;
		int rank;
		air_dim dims[AIR_MAX_RANK];
		int64_t cd[AIR_MAX_RANK];
		st = air_model_input_info(m, i, &dt, &rank, dims);
		size_t numel = 1, es = air_dtype_size(dt);
		for (int d = 0; st == AIR_OK && d < rank; d++) {
			cd[d] = dims[d] >= 0 ? dims[d] : size;
			if (__builtin_mul_overflow(numel, (size_t)cd[d], &numel) || numel > agf_max_bytes / (es + 1))
				st = AIR_OUT_OF_MEMORY;
		}
		if (st != AIR_OK)
			break;
		ins[i] = malloc(numel * es + 1);
		if (!ins[i]) {
			st = AIR_OUT_OF_MEMORY;
			break;
		}
		for (size_t k = 0; k < numel; k++) {
			seed = seed * 1664525u + 1013904223u;
			if (dt == AIR_F32) {
				float v = (float)((int32_t)(seed >> 8) % 4000) / 997.0f;
				memcpy((char *)ins[i] + k * es, &v, es);
			} else {
				int64_t v = (int64_t)(seed >> 20) % 50;
				memcpy((char *)ins[i] + k * es, &v, es); /* little-endian: low bytes */
			}
		}
		if (st == AIR_OK)
			st = air_session_set_input(s, i, ins[i], rank, cd);
	}
	for (int o = 0; st == AIR_OK && o < n_out; o++) {
		int rank;
		int64_t dims[AIR_MAX_RANK];
		air_dtype dt;
		st = air_session_output_shape(s, o, &rank, dims);
		if (st == AIR_OK)
			st = air_model_output_info(m, o, &dt, NULL, NULL);
		if (st != AIR_OK)
			break;
		size_t n = air_dtype_size(dt);
		for (int d = 0; st == AIR_OK && d < rank; d++)
			if (__builtin_mul_overflow(n, (size_t)dims[d], &n) || n > agf_max_bytes)
				st = AIR_OUT_OF_MEMORY;
		air_memory_info mi = {.size = sizeof mi};
		if (st == AIR_OK && agf_max_bytes != (size_t)-1 && air_session_memory_info(s, &mi) == AIR_OK &&
		    mi.arena_bytes + mi.workspace_bytes > agf_max_bytes)
			st = AIR_OUT_OF_MEMORY;
		if (st != AIR_OK)
			break;
		nbytes[o] = n;
		outs[o] = calloc(1, n + 1);
		if (!outs[o]) {
			st = AIR_OUT_OF_MEMORY;
			break;
		}
		st = air_session_set_output(s, o, outs[o], n);
	}
	if (st == AIR_OK)
		st = air_session_run(s);
	air_session_destroy(s);
	for (int i = 0; i < 8; i++)
		free(ins[i]);
	if (st != AIR_OK)
		for (int o = 0; o < n_out; o++) {
			free(outs[o]);
			outs[o] = NULL;
		}
	return st;
}

#endif

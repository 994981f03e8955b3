/* test_graph.c - graph building, verification, symbolic dims and sessions
 * through the public API (air.h):
 *   - inputs, constants, nodes, outputs, value info, the op table;
 *   - every error path of graph building returns the right air_status with
 *     a message and changes nothing (a good node added afterwards compiles
 *     and runs);
 *   - air_graph_verify on good graphs and on one without outputs;
 *   - symbolic dims: symbols, folding of expressions, sharing of identical
 *     ones, dim strings, shape inference through broadcast, reshape, slice,
 *     cat, permute and expand, unbound symbols;
 *   - sessions: one symbolic model run at several sizes, contradicting
 *     sizes, calls out of order, too-small outputs, outputs that are inputs,
 *     constants or repeated, constant ownership, two threads sharing one
 *     model, and the compile report. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "air/air.h"
#include "check.h"
#include "core/error.h"
#include "core/graph.h"

/* ---- helpers ----------------------------------------------------------- */

static bool mentions(const char *msg, const char *needle)
{
	return !needle || strstr(msg, needle) != NULL;
}

/* Expects status want with a non-empty message (cleared before the call,
 * so the message is the call's own) mentioning needle if given. */
#define EXPECT_ERR(expr, want, needle)                                                                 \
	do {                                                                                           \
		air_error_clear();                                                                     \
		air_status st_ = (expr);                                                               \
		const char *msg_ = air_last_error();                                                   \
		const char *needle_ = (needle);                                                        \
		check_count++;                                                                         \
		if (st_ != (want) || msg_[0] == '\0' || !mentions(msg_, needle_)) {                    \
			check_failures++;                                                              \
			fprintf(stderr, "%s:%d: %s -> %s '%s', want %s mentioning '%s'\n", __FILE__,    \
				__LINE__, #expr, air_status_string(st_), msg_, air_status_string(want),    \
				needle_ ? needle_ : "");                                               \
		}                                                                                      \
	} while (0)

/* What a failed call must leave as it was. */
typedef struct snap {
	int n_values, n_nodes, n_consts, n_inputs, n_outputs, n_symbols;
} snap;

static snap take(const air_graph *g)
{
	snap s = {g->n_values, g->n_nodes, g->n_consts, g->n_inputs, g->n_outputs, g->n_symbols};
	return s;
}

static bool same(snap a, snap b)
{
	return a.n_values == b.n_values && a.n_nodes == b.n_nodes && a.n_consts == b.n_consts &&
	       a.n_inputs == b.n_inputs && a.n_outputs == b.n_outputs && a.n_symbols == b.n_symbols;
}

static air_attr attr_int(const char *name, int64_t v)
{
	air_attr a = {name, AIR_ATTR_INT, v, 0, NULL, 0};
	return a;
}

static air_attr attr_float(const char *name, double v)
{
	air_attr a = {name, AIR_ATTR_FLOAT, 0, v, NULL, 0};
	return a;
}

static air_attr attr_ints(const char *name, const int64_t *v, int n)
{
	air_attr a = {name, AIR_ATTR_INTS, 0, 0, v, n};
	return a;
}

/* Adds a one-output node; returns its value (0 and a failed check on error). */
static air_value node(air_graph *g, const char *op, const air_value *in, int n_in, const air_attr *attrs, int na)
{
	air_value out[4] = {0};
	int n_out = -1;
	CHECK_OK(air_graph_add_node(g, op, in, n_in, attrs, na, out, 4, &n_out));
	return out[0];
}

static air_value node1(air_graph *g, const char *op, air_value a)
{
	return node(g, op, &a, 1, NULL, 0);
}

static air_value node2(air_graph *g, const char *op, air_value a, air_value b)
{
	air_value in[2] = {a, b};
	return node(g, op, in, 2, NULL, 0);
}

/* value_info's dims equal want[0..rank)? */
static bool has_dims(const air_graph *g, air_value v, int rank, const air_dim *want)
{
	air_dtype dt;
	int r = -1;
	air_dim d[AIR_MAX_RANK];
	if (air_graph_value_info(g, v, &dt, &r, d) != AIR_OK || r != rank)
		return false;
	for (int i = 0; i < rank; i++)
		if (d[i] != want[i]) {
			fprintf(stderr, "  dim %d is %lld, want %lld\n", i, (long long)d[i], (long long)want[i]);
			return false;
		}
	return true;
}

static air_model *compile(const air_graph *g, uint32_t flags)
{
	air_compile_options o;
	air_compile_options_init(&o);
	o.flags = flags;
	air_model *m = NULL;
	CHECK_OK(air_compile(g, &o, &m));
	return m;
}

/* One input binding. */
typedef struct bind {
	const void *data;
	int rank;
	int64_t dims[AIR_MAX_RANK];
} bind;

/* Runs m on the bindings; output k goes to out[k] (of cap[k] bytes). */
static air_status run(air_model *m, const bind *in, int n_in, void **out, const size_t *cap)
{
	air_session *s = NULL;
	air_status st = air_session_create(m, &s);
	for (int i = 0; i < n_in && st == AIR_OK; i++)
		st = air_session_set_input(s, i, in[i].data, in[i].rank, in[i].dims);
	for (int k = 0; k < air_model_output_count(m) && st == AIR_OK; k++)
		st = air_session_set_output(s, k, out[k], cap[k]);
	if (st == AIR_OK)
		st = air_session_run(s);
	air_session_destroy(s);
	return st;
}

/* ---- building ---------------------------------------------------------- */

static void test_basics(void)
{
	CHECK(air_version() == AIR_VERSION_MAJOR * 10000 + AIR_VERSION_MINOR * 100 + AIR_VERSION_PATCH);
	CHECK(strcmp(air_status_string(AIR_OK), "ok") == 0);
	for (int s = 1; s <= AIR_INTERNAL; s++)
		CHECK(strlen(air_status_string((air_status)s)) > 0 && strcmp(air_status_string((air_status)s), "ok"));
	CHECK(air_status_string((air_status)1000) != NULL);
	CHECK(air_dtype_size(AIR_F32) == 4 && air_dtype_size(AIR_F64) == 8 && air_dtype_size(AIR_F16) == 2 &&
	      air_dtype_size(AIR_BF16) == 2 && air_dtype_size(AIR_I64) == 8 && air_dtype_size(AIR_I32) == 4 &&
	      air_dtype_size(AIR_I16) == 2 && air_dtype_size(AIR_I8) == 1 && air_dtype_size(AIR_U8) == 1 &&
	      air_dtype_size(AIR_BOOL) == 1);
	CHECK(air_dtype_size(AIR_DTYPE_COUNT) == 0 && air_dtype_size((air_dtype)-1) == 0);
	CHECK(strcmp(air_dtype_name(AIR_F32), "f32") == 0 && strcmp(air_dtype_name(AIR_I64), "i64") == 0);
	CHECK(strcmp(air_dtype_name(AIR_DTYPE_COUNT), "?") == 0);
	CHECK(air_last_error() != NULL);

	/* the op table: names are unique and found again by name */
	int n = air_op_count();
	CHECK(n > 50);
	CHECK(air_op_name(-1) == NULL && air_op_name(n) == NULL);
	int dup = 0;
	for (int i = 0; i < n; i++)
		for (int j = i + 1; j < n; j++)
			dup += strcmp(air_op_name(i), air_op_name(j)) == 0;
	CHECK(dup == 0);

	EXPECT_ERR(air_graph_create(NULL), AIR_INVALID_ARGUMENT, NULL);
	air_graph_destroy(NULL);
	air_model_destroy(NULL);
	air_session_destroy(NULL);

	/* a small graph: y = relu(x + c) * x, outputs y and x + c */
	air_graph *g = NULL;
	CHECK_OK(air_graph_create(&g));
	CHECK(g != NULL);
	air_dim xd[2] = {2, 3};
	air_value x = 99, c = 99;
	CHECK_OK(air_graph_add_input(g, "x", AIR_F32, 2, xd, &x));
	const float cdata[3] = {-1.0f, 0.5f, 2.0f};
	int64_t cd[1] = {3};
	CHECK_OK(air_graph_add_constant(g, AIR_F32, 1, cd, cdata, 0, &c));
	CHECK(x != c);
	air_value sum = node2(g, "add", x, c);
	air_value r = node1(g, "relu", sum);
	air_value y = node2(g, "mul", r, x);
	CHECK(has_dims(g, sum, 2, xd) && has_dims(g, y, 2, xd));
	air_dtype dt = AIR_I8;
	int rank = -1;
	CHECK_OK(air_graph_value_info(g, y, &dt, &rank, NULL));
	CHECK(dt == AIR_F32 && rank == 2);
	CHECK_OK(air_graph_value_info(g, c, NULL, NULL, NULL));
	air_value outs[2] = {y, sum};
	CHECK_OK(air_graph_set_outputs(g, outs, 2));
	CHECK_OK(air_graph_verify(g));
	/* a failed call keeps the outputs there were */
	air_value bad_outs[2] = {y, 4242};
	EXPECT_ERR(air_graph_set_outputs(g, bad_outs, 2), AIR_INVALID_ARGUMENT, NULL);
	CHECK(g->n_outputs == 2 && g->outputs[0] == y && g->outputs[1] == sum);
	/* setting the outputs again replaces them */
	CHECK_OK(air_graph_set_outputs(g, outs, 1));
	CHECK(g->n_outputs == 1);
	CHECK_OK(air_graph_set_outputs(g, outs, 2));

	air_model *m = compile(g, 0);
	/* the graph may go before the model */
	air_graph_destroy(g);
	CHECK(air_model_input_count(m) == 1 && air_model_output_count(m) == 2);
	CHECK(air_model_input_count(NULL) == 0 && air_model_output_count(NULL) == 0);
	air_dim d[AIR_MAX_RANK];
	CHECK_OK(air_model_input_info(m, 0, &dt, &rank, d));
	CHECK(dt == AIR_F32 && rank == 2 && d[0] == 2 && d[1] == 3);
	CHECK_OK(air_model_output_info(m, 1, &dt, &rank, NULL));
	CHECK(dt == AIR_F32 && rank == 2);
	EXPECT_ERR(air_model_input_info(m, 1, &dt, &rank, d), AIR_INVALID_ARGUMENT, NULL);
	EXPECT_ERR(air_model_input_info(m, -1, &dt, &rank, d), AIR_INVALID_ARGUMENT, NULL);
	EXPECT_ERR(air_model_output_info(m, 2, &dt, &rank, d), AIR_INVALID_ARGUMENT, NULL);
	EXPECT_ERR(air_model_output_info(NULL, 0, &dt, &rank, d), AIR_INVALID_ARGUMENT, NULL);
	const char *report = air_model_report(m);
	CHECK(report && strlen(report) > 0);
	CHECK(strstr(report, "add") && strstr(report, "mul"));
	CHECK(air_model_report(NULL) != NULL);

	const float xv[6] = {1, -2, 3, -4, 5, 0.25f};
	float yv[6], sv[6];
	bind b = {xv, 2, {2, 3}};
	void *o[2] = {yv, sv};
	size_t cap[2] = {sizeof yv, sizeof sv};
	CHECK_OK(run(m, &b, 1, o, cap));
	int bad = 0;
	for (int i = 0; i < 6; i++) {
		float s = xv[i] + cdata[i % 3];
		bad += sv[i] != s;
		bad += yv[i] != (s > 0 ? s : 0) * xv[i];
	}
	CHECK(bad == 0);
	air_model_destroy(m);
}

/* Every way a graph-building call can fail: the right status, a message,
 * and the graph unchanged; then a good node still compiles and runs. */
static void test_errors(void)
{
	air_graph *g = NULL;
	CHECK_OK(air_graph_create(&g));
	air_dim s0;
	CHECK_OK(air_graph_symbol(g, "n", &s0));
	air_dim xd[2] = {s0, 4};
	air_value x, fx, ix, bx, v4;
	CHECK_OK(air_graph_add_input(g, "x", AIR_F32, 2, xd, &x));
	air_dim id[1] = {4};
	CHECK_OK(air_graph_add_input(g, "i", AIR_I64, 1, id, &ix));
	CHECK_OK(air_graph_add_input(g, "b", AIR_BOOL, 2, xd, &bx));
	air_dim d3[1] = {3};
	CHECK_OK(air_graph_add_input(g, "f3", AIR_F32, 1, d3, &fx));
	air_dim d5[1] = {5};
	CHECK_OK(air_graph_add_input(g, "f5", AIR_F32, 1, d5, &v4));
	snap before = take(g);
	air_value out[4];
	int n_out = 7;
	air_value in2[2] = {x, x};

	/* NULL arguments */
	EXPECT_ERR(air_graph_add_node(NULL, "add", in2, 2, NULL, 0, out, 4, &n_out), AIR_INVALID_ARGUMENT, NULL);
	CHECK(n_out == 0);
	EXPECT_ERR(air_graph_add_node(g, NULL, in2, 2, NULL, 0, out, 4, &n_out), AIR_INVALID_ARGUMENT, NULL);
	EXPECT_ERR(air_graph_add_node(g, "add", NULL, 2, NULL, 0, out, 4, &n_out), AIR_INVALID_ARGUMENT, NULL);
	EXPECT_ERR(air_graph_add_node(g, "add", in2, 2, NULL, 0, NULL, 4, &n_out), AIR_INVALID_ARGUMENT, NULL);
	EXPECT_ERR(air_graph_add_node(g, "add", in2, 2, NULL, 0, out, 4, NULL), AIR_INVALID_ARGUMENT, NULL);
	EXPECT_ERR(air_graph_add_node(g, "clamp", in2, 1, NULL, 2, out, 4, &n_out), AIR_INVALID_ARGUMENT, NULL);
	/* unknown op */
	EXPECT_ERR(air_graph_add_node(g, "no_such_op", in2, 2, NULL, 0, out, 4, &n_out), AIR_UNSUPPORTED,
		   "no_such_op");
	EXPECT_ERR(air_graph_add_node(g, "", in2, 2, NULL, 0, out, 4, &n_out), AIR_UNSUPPORTED, NULL);
	/* too many / too few inputs */
	air_value in3[3] = {x, x, x};
	EXPECT_ERR(air_graph_add_node(g, "add", in3, 3, NULL, 0, out, 4, &n_out), AIR_INVALID_ARGUMENT, "add");
	EXPECT_ERR(air_graph_add_node(g, "add", in2, 1, NULL, 0, out, 4, &n_out), AIR_INVALID_ARGUMENT, "add");
	EXPECT_ERR(air_graph_add_node(g, "relu", in2, 0, NULL, 0, out, 4, &n_out), AIR_INVALID_ARGUMENT, "relu");
	EXPECT_ERR(air_graph_add_node(g, "relu", in2, -1, NULL, 0, out, 4, &n_out), AIR_INVALID_ARGUMENT, "relu");
	EXPECT_ERR(air_graph_add_node(g, "where", in2, 2, NULL, 0, out, 4, &n_out), AIR_INVALID_ARGUMENT, "where");
	/* no room for the outputs */
	EXPECT_ERR(air_graph_add_node(g, "add", in2, 2, NULL, 0, out, 0, &n_out), AIR_INVALID_ARGUMENT, "add");
	/* value ids out of range */
	air_value bad_in[2] = {x, 999};
	EXPECT_ERR(air_graph_add_node(g, "add", bad_in, 2, NULL, 0, out, 4, &n_out), AIR_INVALID_ARGUMENT, "add");
	bad_in[1] = (air_value)g->n_values;
	EXPECT_ERR(air_graph_add_node(g, "add", bad_in, 2, NULL, 0, out, 4, &n_out), AIR_INVALID_ARGUMENT, "add");
	bad_in[1] = UINT32_MAX;
	EXPECT_ERR(air_graph_add_node(g, "add", bad_in, 2, NULL, 0, out, 4, &n_out), AIR_INVALID_ARGUMENT, "add");
	/* dtype mismatch, broadcast mismatch, a dtype the op does not take */
	air_value xi[2] = {fx, ix};
	EXPECT_ERR(air_graph_add_node(g, "add", xi, 2, NULL, 0, out, 4, &n_out), AIR_DTYPE_MISMATCH, "add");
	air_value w3[3] = {x, x, x};
	EXPECT_ERR(air_graph_add_node(g, "where", w3, 3, NULL, 0, out, 4, &n_out), AIR_DTYPE_MISMATCH, "where");
	air_value w3b[3] = {bx, x, ix};
	EXPECT_ERR(air_graph_add_node(g, "where", w3b, 3, NULL, 0, out, 4, &n_out), AIR_DTYPE_MISMATCH, "where");
	air_value f35[2] = {fx, v4};
	EXPECT_ERR(air_graph_add_node(g, "add", f35, 2, NULL, 0, out, 4, &n_out), AIR_SHAPE_MISMATCH, "add");
	air_value x3[2] = {x, fx}; /* [n, 4] with [3] */
	EXPECT_ERR(air_graph_add_node(g, "mul", x3, 2, NULL, 0, out, 4, &n_out), AIR_SHAPE_MISMATCH, "mul");
	EXPECT_ERR(air_graph_add_node(g, "exp", &ix, 1, NULL, 0, out, 4, &n_out), AIR_UNSUPPORTED, "exp");
	EXPECT_ERR(air_graph_add_node(g, "bitwise_and", in2, 2, NULL, 0, out, 4, &n_out), AIR_UNSUPPORTED,
		   "bitwise_and");
	/* attributes: unknown, wrong type, missing, twice, no name, bad lists */
	air_attr a_unknown = attr_int("bogus", 1);
	EXPECT_ERR(air_graph_add_node(g, "relu", &x, 1, &a_unknown, 1, out, 4, &n_out), AIR_INVALID_ARGUMENT,
		   "bogus");
	air_attr a_cast_f = attr_float("dtype", 1.0);
	EXPECT_ERR(air_graph_add_node(g, "cast", &x, 1, &a_cast_f, 1, out, 4, &n_out), AIR_INVALID_ARGUMENT,
		   "dtype");
	int64_t perm[2] = {1, 0};
	air_attr a_cast_l = attr_ints("dtype", perm, 2);
	EXPECT_ERR(air_graph_add_node(g, "cast", &x, 1, &a_cast_l, 1, out, 4, &n_out), AIR_INVALID_ARGUMENT,
		   "dtype");
	air_attr a_perm_i = attr_int("perm", 1);
	EXPECT_ERR(air_graph_add_node(g, "permute", &x, 1, &a_perm_i, 1, out, 4, &n_out), AIR_INVALID_ARGUMENT,
		   "perm");
	air_attr a_slope_l = attr_ints("negative_slope", perm, 2);
	EXPECT_ERR(air_graph_add_node(g, "leaky_relu", &x, 1, &a_slope_l, 1, out, 4, &n_out),
		   AIR_INVALID_ARGUMENT, "negative_slope");
	EXPECT_ERR(air_graph_add_node(g, "cast", &x, 1, NULL, 0, out, 4, &n_out), AIR_INVALID_ARGUMENT, "dtype");
	EXPECT_ERR(air_graph_add_node(g, "permute", &x, 1, NULL, 0, out, 4, &n_out), AIR_INVALID_ARGUMENT, "perm");
	air_attr slice_no_end[2] = {attr_int("axis", 0), attr_int("start", 0)};
	EXPECT_ERR(air_graph_add_node(g, "slice", &x, 1, slice_no_end, 2, out, 4, &n_out), AIR_INVALID_ARGUMENT,
		   "end");
	air_attr twice[2] = {attr_int("dtype", AIR_F64), attr_int("dtype", AIR_F64)};
	EXPECT_ERR(air_graph_add_node(g, "cast", &x, 1, twice, 2, out, 4, &n_out), AIR_INVALID_ARGUMENT, "twice");
	air_attr noname = attr_int(NULL, 1);
	EXPECT_ERR(air_graph_add_node(g, "cast", &x, 1, &noname, 1, out, 4, &n_out), AIR_INVALID_ARGUMENT, "cast");
	air_attr badlist = attr_ints("perm", NULL, 2);
	EXPECT_ERR(air_graph_add_node(g, "permute", &x, 1, &badlist, 1, out, 4, &n_out), AIR_INVALID_ARGUMENT,
		   "perm");
	badlist = attr_ints("perm", perm, -1);
	EXPECT_ERR(air_graph_add_node(g, "permute", &x, 1, &badlist, 1, out, 4, &n_out), AIR_INVALID_ARGUMENT,
		   "perm");
	air_attr bad_dtype = attr_int("dtype", AIR_DTYPE_COUNT);
	EXPECT_ERR(air_graph_add_node(g, "cast", &x, 1, &bad_dtype, 1, out, 4, &n_out), AIR_INVALID_ARGUMENT,
		   "cast");
	/* a DIMS attribute naming no expression, a DIM one likewise */
	int64_t shape_bad[2] = {-1000, 4};
	air_attr a_shape_bad = attr_ints("shape", shape_bad, 2);
	EXPECT_ERR(air_graph_add_node(g, "reshape", &x, 1, &a_shape_bad, 1, out, 4, &n_out), AIR_INVALID_ARGUMENT,
		   "reshape");
	shape_bad[0] = INT64_MIN;
	EXPECT_ERR(air_graph_add_node(g, "reshape", &x, 1, &a_shape_bad, 1, out, 4, &n_out), AIR_INVALID_ARGUMENT,
		   "reshape");
	air_attr slice_bad_end[3] = {attr_int("axis", 1), attr_int("start", 0), attr_int("end", -77)};
	EXPECT_ERR(air_graph_add_node(g, "slice", &x, 1, slice_bad_end, 3, out, 4, &n_out), AIR_INVALID_ARGUMENT,
		   "slice");
	slice_bad_end[2] = attr_int("end", INT64_MIN);
	EXPECT_ERR(air_graph_add_node(g, "slice", &x, 1, slice_bad_end, 3, out, 4, &n_out), AIR_INVALID_ARGUMENT,
		   "slice");
	/* op-specific attribute values */
	int64_t perm_bad[2] = {0, 0};
	air_attr a_perm_bad = attr_ints("perm", perm_bad, 2);
	EXPECT_ERR(air_graph_add_node(g, "permute", &x, 1, &a_perm_bad, 1, out, 4, &n_out), AIR_INVALID_ARGUMENT,
		   "permute");
	int64_t shape5[1] = {5};
	air_attr a_shape5 = attr_ints("shape", shape5, 1);
	EXPECT_ERR(air_graph_add_node(g, "reshape", &fx, 1, &a_shape5, 1, out, 4, &n_out), AIR_SHAPE_MISMATCH,
		   "reshape");
	CHECK(same(before, take(g)));
	CHECK(n_out == 0);

	/* other building calls */
	air_value v = 77;
	air_dim okd[1] = {2};
	EXPECT_ERR(air_graph_add_input(NULL, "x", AIR_F32, 1, okd, &v), AIR_INVALID_ARGUMENT, NULL);
	EXPECT_ERR(air_graph_add_input(g, "x", AIR_F32, 1, okd, NULL), AIR_INVALID_ARGUMENT, NULL);
	EXPECT_ERR(air_graph_add_input(g, "x", AIR_DTYPE_COUNT, 1, okd, &v), AIR_INVALID_ARGUMENT, NULL);
	EXPECT_ERR(air_graph_add_input(g, "x", (air_dtype)-3, 1, okd, &v), AIR_INVALID_ARGUMENT, NULL);
	CHECK(v == 0); /* out-parameters are zeroed on failure */
	air_dim nined[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
	EXPECT_ERR(air_graph_add_input(g, "x", AIR_F32, 9, nined, &v), AIR_UNSUPPORTED, NULL);
	EXPECT_ERR(air_graph_add_input(g, "x", AIR_F32, -1, okd, &v), AIR_UNSUPPORTED, NULL);
	EXPECT_ERR(air_graph_add_input(g, "x", AIR_F32, 1, NULL, &v), AIR_INVALID_ARGUMENT, NULL);
	air_dim badd[1] = {-1000};
	EXPECT_ERR(air_graph_add_input(g, "x", AIR_F32, 1, badd, &v), AIR_INVALID_ARGUMENT, NULL);
	badd[0] = INT64_MIN;
	EXPECT_ERR(air_graph_add_input(g, "x", AIR_F32, 1, badd, &v), AIR_INVALID_ARGUMENT, NULL);
	const float data[4] = {1, 2, 3, 4};
	int64_t cd[1] = {4};
	EXPECT_ERR(air_graph_add_constant(NULL, AIR_F32, 1, cd, data, 0, &v), AIR_INVALID_ARGUMENT, NULL);
	EXPECT_ERR(air_graph_add_constant(g, AIR_F32, 1, cd, data, 0, NULL), AIR_INVALID_ARGUMENT, NULL);
	EXPECT_ERR(air_graph_add_constant(g, AIR_F32, 1, cd, NULL, 0, &v), AIR_INVALID_ARGUMENT, NULL);
	EXPECT_ERR(air_graph_add_constant(g, AIR_F32, 1, cd, data, 0x80, &v), AIR_INVALID_ARGUMENT, NULL);
	EXPECT_ERR(air_graph_add_constant(g, AIR_DTYPE_COUNT, 1, cd, data, 0, &v), AIR_INVALID_ARGUMENT, NULL);
	int64_t symd[1] = {s0};
	EXPECT_ERR(air_graph_add_constant(g, AIR_F32, 1, symd, data, 0, &v), AIR_INVALID_ARGUMENT, NULL);
	air_value bad_out[2] = {x, 12345};
	EXPECT_ERR(air_graph_set_outputs(NULL, &x, 1), AIR_INVALID_ARGUMENT, NULL);
	EXPECT_ERR(air_graph_set_outputs(g, bad_out, 2), AIR_INVALID_ARGUMENT, NULL);
	EXPECT_ERR(air_graph_set_outputs(g, NULL, 1), AIR_INVALID_ARGUMENT, NULL);
	EXPECT_ERR(air_graph_set_outputs(g, &x, -1), AIR_INVALID_ARGUMENT, NULL);
	EXPECT_ERR(air_graph_value_info(g, 12345, NULL, NULL, NULL), AIR_INVALID_ARGUMENT, NULL);
	EXPECT_ERR(air_graph_value_info(NULL, 0, NULL, NULL, NULL), AIR_INVALID_ARGUMENT, NULL);
	air_dim sym_out;
	EXPECT_ERR(air_graph_symbol(NULL, "s", &sym_out), AIR_INVALID_ARGUMENT, NULL);
	EXPECT_ERR(air_graph_symbol(g, "s", NULL), AIR_INVALID_ARGUMENT, NULL);
	EXPECT_ERR(air_graph_verify(NULL), AIR_INVALID_ARGUMENT, NULL);
	CHECK(same(before, take(g)));
	/* the graph has no outputs yet */
	EXPECT_ERR(air_graph_verify(g), AIR_INVALID_GRAPH, "output");
	air_model *m = (air_model *)1;
	EXPECT_ERR(air_compile(g, NULL, &m), AIR_INVALID_GRAPH, "output");
	CHECK(m == NULL);

	/* a good node after all that: y = x * 2 + cast(b), compiled and run */
	const float two = 2.0f;
	air_value c2;
	CHECK_OK(air_graph_add_constant(g, AIR_F32, 0, NULL, &two, 0, &c2));
	air_value y = node2(g, "mul", x, c2);
	air_attr to_f32 = attr_int("dtype", AIR_F32);
	air_value bf = node(g, "cast", &bx, 1, &to_f32, 1);
	y = node2(g, "add", y, bf);
	CHECK(g->n_nodes == before.n_nodes + 3);
	CHECK_OK(air_graph_set_outputs(g, &y, 1));
	CHECK_OK(air_graph_verify(g));

	/* compile options */
	air_compile_options o;
	air_compile_options_init(&o);
	air_compile_options_init(NULL);
	CHECK(o.size == sizeof o && o.flags == 0 && o.num_threads == 0);
	EXPECT_ERR(air_compile(g, &o, NULL), AIR_INVALID_ARGUMENT, NULL);
	EXPECT_ERR(air_compile(NULL, &o, &m), AIR_INVALID_ARGUMENT, NULL);
	o.size = 3;
	EXPECT_ERR(air_compile(g, &o, &m), AIR_INVALID_ARGUMENT, "size");
	air_compile_options_init(&o);
	o.num_threads = -1;
	EXPECT_ERR(air_compile(g, &o, &m), AIR_INVALID_ARGUMENT, "num_threads");
	air_compile_options_init(&o);
	o.fusion_threshold = -1;
	EXPECT_ERR(air_compile(g, &o, &m), AIR_INVALID_ARGUMENT, "fusion_threshold");
	air_compile_options_init(&o);
	o.num_threads = 2;
	CHECK_OK(air_compile(g, &o, &m));
	air_graph_destroy(g);

	const float xv[8] = {1, 2, 3, 4, 5, 6, 7, 8};
	const uint8_t bv[8] = {1, 0, 0, 1, 1, 1, 0, 0};
	float yv[8];
	bind b[4] = {{xv, 2, {2, 4}}, {NULL, 1, {4}}, {bv, 2, {2, 4}}, {NULL, 1, {3}}};
	const int64_t unused_i[4] = {0};
	const float unused_f[5] = {0};
	b[1].data = unused_i;
	b[3].data = unused_f;
	bind b5 = {unused_f, 1, {5}};
	air_session *s = NULL;
	CHECK_OK(air_session_create(m, &s));
	for (int i = 0; i < 4; i++)
		CHECK_OK(air_session_set_input(s, i, b[i].data, b[i].rank, b[i].dims));
	CHECK_OK(air_session_set_input(s, 4, b5.data, b5.rank, b5.dims));
	CHECK_OK(air_session_set_output(s, 0, yv, sizeof yv));
	CHECK_OK(air_session_run(s));
	int bad = 0;
	for (int i = 0; i < 8; i++)
		bad += yv[i] != xv[i] * 2 + bv[i];
	CHECK(bad == 0);
	air_session_destroy(s);
	air_model_destroy(m);
}

/* ---- verifier ---------------------------------------------------------- */

static void test_verify(void)
{
	air_graph *g = NULL;
	CHECK_OK(air_graph_create(&g));
	air_dim s0, s1;
	CHECK_OK(air_graph_symbol(g, NULL, &s0));
	CHECK_OK(air_graph_symbol(g, NULL, &s1));
	air_dim xd[2] = {s0, 8};
	air_value x;
	CHECK_OK(air_graph_add_input(g, "x", AIR_F32, 2, xd, &x));
	air_value y = node1(g, "tanh", x);
	CHECK_OK(air_graph_set_outputs(g, &y, 1));
	/* s1 is not a dim of any input: the graph cannot be run */
	EXPECT_ERR(air_graph_verify(g), AIR_INVALID_GRAPH, "s1");
	air_model *m = NULL;
	EXPECT_ERR(air_compile(g, NULL, &m), AIR_INVALID_GRAPH, "s1");
	CHECK(m == NULL);
	/* once an input binds s1 (even one no node reads), it verifies */
	air_dim zd[1] = {s1};
	air_value z;
	CHECK_OK(air_graph_add_input(g, "z", AIR_F32, 1, zd, &z));
	CHECK_OK(air_graph_verify(g));
	/* a symbol that only appears inside an expression does not count */
	air_dim s2, e;
	CHECK_OK(air_graph_symbol(g, "hidden", &s2));
	CHECK_OK(air_graph_dim_expr(g, AIR_DIM_MUL, s2, 2, &e));
	air_dim wd[1] = {e};
	air_value w;
	CHECK_OK(air_graph_add_input(g, "w", AIR_F32, 1, wd, &w));
	EXPECT_ERR(air_graph_verify(g), AIR_INVALID_GRAPH, "hidden");
	air_graph_destroy(g);

	/* outputs set to nothing */
	CHECK_OK(air_graph_create(&g));
	air_dim d1[1] = {3};
	CHECK_OK(air_graph_add_input(g, "x", AIR_F32, 1, d1, &x));
	CHECK_OK(air_graph_set_outputs(g, NULL, 0));
	EXPECT_ERR(air_graph_verify(g), AIR_INVALID_GRAPH, NULL);
	/* a graph whose only output is its input is fine */
	CHECK_OK(air_graph_set_outputs(g, &x, 1));
	CHECK_OK(air_graph_verify(g));
	/* verification of a good graph leaves it as it was */
	snap before = take(g);
	CHECK_OK(air_graph_verify(g));
	CHECK(same(before, take(g)));
	air_graph_destroy(g);

	/* an empty graph: no outputs */
	CHECK_OK(air_graph_create(&g));
	EXPECT_ERR(air_graph_verify(g), AIR_INVALID_GRAPH, NULL);
	air_graph_destroy(g);
}

/* ---- symbolic dims ----------------------------------------------------- */

static air_dim expr(air_graph *g, air_dim_op op, air_dim a, air_dim b)
{
	air_dim out = 12345;
	CHECK_OK(air_graph_dim_expr(g, op, a, b, &out));
	return out;
}

static bool dim_str_is(const air_graph *g, air_dim d, const char *want)
{
	char buf[128];
	if (air_graph_dim_string(g, d, buf, sizeof buf) != AIR_OK)
		return false;
	if (strcmp(buf, want) != 0) {
		fprintf(stderr, "  dim string '%s', want '%s'\n", buf, want);
		return false;
	}
	return true;
}

static void test_dims(void)
{
	air_graph *g = NULL;
	CHECK_OK(air_graph_create(&g));
	air_dim s0, s1, anon;
	CHECK_OK(air_graph_symbol(g, "batch", &s0));
	CHECK_OK(air_graph_symbol(g, "seq", &s1));
	CHECK_OK(air_graph_symbol(g, NULL, &anon));
	CHECK(s0 < 0 && s1 < 0 && anon < 0 && s0 != s1 && s1 != anon);
	/* symbols are never shared, even with the same name */
	air_dim s0b;
	CHECK_OK(air_graph_symbol(g, "batch", &s0b));
	CHECK(s0b != s0);
	CHECK(dim_str_is(g, s0, "batch") && dim_str_is(g, s1, "seq") && dim_str_is(g, anon, "s2"));
	CHECK(dim_str_is(g, 42, "42") && dim_str_is(g, 0, "0"));

	/* constants fold */
	CHECK(expr(g, AIR_DIM_ADD, 2, 3) == 5);
	CHECK(expr(g, AIR_DIM_SUB, 7, 3) == 4);
	CHECK(expr(g, AIR_DIM_MUL, 6, 7) == 42);
	CHECK(expr(g, AIR_DIM_FLOORDIV, 7, 2) == 3);
	CHECK(expr(g, AIR_DIM_CEILDIV, 7, 2) == 4);
	CHECK(expr(g, AIR_DIM_CEILDIV, 8, 2) == 4);
	CHECK(expr(g, AIR_DIM_CEILDIV, 0, 5) == 0);
	CHECK(expr(g, AIR_DIM_MOD, 7, 3) == 1);
	CHECK(expr(g, AIR_DIM_MIN, 7, 3) == 3);
	CHECK(expr(g, AIR_DIM_MAX, 7, 3) == 7);
	int n_exprs = g->n_exprs;
	/* identities keep expressions small and create nothing */
	CHECK(expr(g, AIR_DIM_ADD, s0, 0) == s0);
	CHECK(expr(g, AIR_DIM_ADD, 0, s0) == s0);
	CHECK(expr(g, AIR_DIM_SUB, s0, 0) == s0);
	CHECK(expr(g, AIR_DIM_MUL, s0, 1) == s0);
	CHECK(expr(g, AIR_DIM_MUL, 1, s0) == s0);
	CHECK(expr(g, AIR_DIM_MUL, s0, 0) == 0);
	CHECK(expr(g, AIR_DIM_MUL, 0, s1) == 0);
	CHECK(expr(g, AIR_DIM_FLOORDIV, s0, 1) == s0);
	CHECK(expr(g, AIR_DIM_CEILDIV, s0, 1) == s0);
	CHECK(expr(g, AIR_DIM_FLOORDIV, s0, s0) == 1);
	CHECK(expr(g, AIR_DIM_MOD, s0, 1) == 0);
	CHECK(expr(g, AIR_DIM_MOD, s0, s0) == 0);
	CHECK(expr(g, AIR_DIM_MIN, s1, s1) == s1);
	CHECK(expr(g, AIR_DIM_MAX, s1, s1) == s1);
	CHECK(g->n_exprs == n_exprs);
	/* identical expressions share one id; different ones do not */
	air_dim a = expr(g, AIR_DIM_MUL, s0, 2);
	air_dim b = expr(g, AIR_DIM_MUL, s0, 2);
	air_dim c = expr(g, AIR_DIM_MUL, s0, 3);
	air_dim d = expr(g, AIR_DIM_MUL, s1, 2);
	CHECK(a < 0 && a == b && a != c && a != d && c != d);
	air_dim a1 = expr(g, AIR_DIM_ADD, a, 1);
	CHECK(a1 == expr(g, AIR_DIM_ADD, expr(g, AIR_DIM_MUL, s0, 2), 1));
	CHECK(g->n_exprs == n_exprs + 4);
	/* readable strings */
	char buf[128];
	CHECK_OK(air_graph_dim_string(g, a1, buf, sizeof buf));
	CHECK(strcmp(buf, "batch*2+1") == 0 || strcmp(buf, "(batch*2)+1") == 0);
	CHECK_OK(air_graph_dim_string(g, expr(g, AIR_DIM_MAX, s0, s1), buf, sizeof buf));
	CHECK(strstr(buf, "max") && strstr(buf, "batch") && strstr(buf, "seq"));
	CHECK_OK(air_graph_dim_string(g, expr(g, AIR_DIM_FLOORDIV, s1, 4), buf, sizeof buf));
	CHECK(strcmp(buf, "seq//4") == 0);
	/* constant offsets fold into one: the stem's (H + 6 - 7) // 2 + 1 and
	 * a 1x1 stride-2 conv's (H - 1) // 2 + 1 are one expression, so a pass
	 * can tell that a residual has a conv's output shape */
	air_dim stem = expr(g, AIR_DIM_ADD,
			    expr(g, AIR_DIM_FLOORDIV, expr(g, AIR_DIM_SUB, expr(g, AIR_DIM_ADD, s1, 6), 7), 2), 1);
	air_dim down = expr(g, AIR_DIM_ADD, expr(g, AIR_DIM_FLOORDIV, expr(g, AIR_DIM_SUB, s1, 1), 2), 1);
	CHECK(stem == down && stem < 0);
	/* the next 3x3 conv (+ 2 - 3, // 1, + 1) gives the same dim back */
	air_dim same = expr(g, AIR_DIM_ADD,
			    expr(g, AIR_DIM_FLOORDIV, expr(g, AIR_DIM_SUB, expr(g, AIR_DIM_ADD, stem, 2), 3), 1), 1);
	CHECK(same == stem);
	CHECK(expr(g, AIR_DIM_SUB, expr(g, AIR_DIM_ADD, s0, 5), 5) == s0);
	CHECK(expr(g, AIR_DIM_ADD, 3, expr(g, AIR_DIM_SUB, s0, 3)) == s0);
	CHECK(expr(g, AIR_DIM_ADD, expr(g, AIR_DIM_ADD, s0, 2), 3) == expr(g, AIR_DIM_ADD, s0, 5));
	CHECK(expr(g, AIR_DIM_SUB, expr(g, AIR_DIM_SUB, s0, 2), 3) == expr(g, AIR_DIM_SUB, s0, 5));
	CHECK(expr(g, AIR_DIM_ADD, expr(g, AIR_DIM_SUB, s0, 2), 5) == expr(g, AIR_DIM_ADD, s0, 3));
	/* (e + 4) // 2 is e // 2 + 2; with an offset 2 does not divide, not */
	CHECK(expr(g, AIR_DIM_FLOORDIV, expr(g, AIR_DIM_ADD, s0, 4), 2) ==
	      expr(g, AIR_DIM_ADD, expr(g, AIR_DIM_FLOORDIV, s0, 2), 2));
	CHECK(expr(g, AIR_DIM_FLOORDIV, expr(g, AIR_DIM_ADD, s0, 3), 2) !=
	      expr(g, AIR_DIM_ADD, expr(g, AIR_DIM_FLOORDIV, s0, 2), 1));
	/* the values are the unfolded formulas' wherever those evaluate */
	air_dim odd = expr(g, AIR_DIM_FLOORDIV, expr(g, AIR_DIM_SUB, expr(g, AIR_DIM_ADD, s0, 3), 7), 2);
	for (int64_t v = 0; v < 40; v++) {
		int64_t sym[4] = {v, v, v, v}, got = -1;
		if (v < 1) {
			CHECK(ir_dim_eval(g, stem, sym, &got) != AIR_OK);
		} else {
			CHECK(ir_dim_eval(g, stem, sym, &got) == AIR_OK && got == (v + 6 - 7) / 2 + 1);
		}
		CHECK((ir_dim_eval(g, odd, sym, &got) == AIR_OK) == (v >= 4));
		if (v >= 4)
			CHECK(got == (v + 3 - 7) / 2);
	}
	/* a tiny buffer still gets a terminated string */
	char tiny[4];
	memset(tiny, 'x', sizeof tiny);
	CHECK_OK(air_graph_dim_string(g, a1, tiny, sizeof tiny));
	CHECK(tiny[3] == '\0' && strlen(tiny) == 3);
	CHECK_OK(air_graph_dim_string(g, 1234567, tiny, sizeof tiny));
	CHECK(strcmp(tiny, "123") == 0);
	/* deep expressions: long strings are cut, not overflowed */
	air_dim deep = s0;
	for (int i = 0; i < 60; i++)
		deep = expr(g, AIR_DIM_ADD, expr(g, AIR_DIM_MUL, deep, 3), s1);
	char big[64];
	CHECK_OK(air_graph_dim_string(g, deep, big, sizeof big));
	CHECK(strlen(big) < sizeof big);

	/* errors */
	air_dim out = 7;
	EXPECT_ERR(air_graph_dim_expr(g, AIR_DIM_FLOORDIV, 7, 0, &out), AIR_INVALID_ARGUMENT, "zero");
	CHECK(out == 0);
	EXPECT_ERR(air_graph_dim_expr(g, AIR_DIM_CEILDIV, 7, 0, &out), AIR_INVALID_ARGUMENT, "zero");
	EXPECT_ERR(air_graph_dim_expr(g, AIR_DIM_MOD, 7, 0, &out), AIR_INVALID_ARGUMENT, "zero");
	EXPECT_ERR(air_graph_dim_expr(g, AIR_DIM_FLOORDIV, s0, 0, &out), AIR_INVALID_ARGUMENT, "zero");
	EXPECT_ERR(air_graph_dim_expr(g, AIR_DIM_MOD, s0, 0, &out), AIR_INVALID_ARGUMENT, "zero");
	EXPECT_ERR(air_graph_dim_expr(g, AIR_DIM_SUB, 3, 5, &out), AIR_SHAPE_MISMATCH, "negative");
	EXPECT_ERR(air_graph_dim_expr(g, (air_dim_op)99, s0, 1, &out), AIR_INVALID_ARGUMENT, NULL);
	EXPECT_ERR(air_graph_dim_expr(g, (air_dim_op)-1, 2, 1, &out), AIR_INVALID_ARGUMENT, NULL);
	EXPECT_ERR(air_graph_dim_expr(g, AIR_DIM_ADD, -100000, 1, &out), AIR_INVALID_ARGUMENT, NULL);
	EXPECT_ERR(air_graph_dim_expr(g, AIR_DIM_ADD, 1, INT64_MIN, &out), AIR_INVALID_ARGUMENT, NULL);
	EXPECT_ERR(air_graph_dim_expr(g, AIR_DIM_MUL, INT64_MIN, s0, &out), AIR_INVALID_ARGUMENT, NULL);
	/* constant folding must not overflow */
	EXPECT_ERR(air_graph_dim_expr(g, AIR_DIM_MUL, INT64_MAX / 2, 3, &out), AIR_SHAPE_MISMATCH, NULL);
	EXPECT_ERR(air_graph_dim_expr(g, AIR_DIM_ADD, INT64_MAX, 1, &out), AIR_SHAPE_MISMATCH, NULL);
	EXPECT_ERR(air_graph_dim_expr(NULL, AIR_DIM_ADD, 1, 1, &out), AIR_INVALID_ARGUMENT, NULL);
	EXPECT_ERR(air_graph_dim_expr(g, AIR_DIM_ADD, 1, 1, NULL), AIR_INVALID_ARGUMENT, NULL);
	EXPECT_ERR(air_graph_dim_string(g, -100000, buf, sizeof buf), AIR_INVALID_ARGUMENT, NULL);
	EXPECT_ERR(air_graph_dim_string(g, INT64_MIN, buf, sizeof buf), AIR_INVALID_ARGUMENT, NULL);
	EXPECT_ERR(air_graph_dim_string(g, s0, NULL, 8), AIR_INVALID_ARGUMENT, NULL);
	EXPECT_ERR(air_graph_dim_string(g, s0, buf, 0), AIR_INVALID_ARGUMENT, NULL);
	EXPECT_ERR(air_graph_dim_string(NULL, s0, buf, sizeof buf), AIR_INVALID_ARGUMENT, NULL);
	air_graph_destroy(g);
}

/* Shape inference with symbols through every shape-moving op. */
static void test_symbolic_inference(void)
{
	air_graph *g = NULL;
	CHECK_OK(air_graph_create(&g));
	air_dim s0, s1;
	CHECK_OK(air_graph_symbol(g, "n", &s0)); /* the first expression: id -1 */
	CHECK_OK(air_graph_symbol(g, "m", &s1));
	CHECK(s0 == -1);
	air_dim xd[3] = {s0, 3, 1}, yd[2] = {1, 4}, zd[1] = {s1}, ud[1] = {s0};
	air_value x, y, z, u;
	CHECK_OK(air_graph_add_input(g, "x", AIR_F32, 3, xd, &x));
	CHECK_OK(air_graph_add_input(g, "y", AIR_F32, 2, yd, &y));
	CHECK_OK(air_graph_add_input(g, "z", AIR_F32, 1, zd, &z));
	CHECK_OK(air_graph_add_input(g, "u", AIR_F32, 1, ud, &u));

	/* broadcast: [n,3,1] with [1,4] -> [n,3,4]; [m] with [n] -> max(m, n) */
	air_value xy = node2(g, "add", x, y);
	air_dim want[4] = {s0, 3, 4};
	CHECK(has_dims(g, xy, 3, want));
	air_value zu = node2(g, "mul", z, u);
	air_dim mx = expr(g, AIR_DIM_MAX, s1, s0);
	CHECK(has_dims(g, zu, 1, &mx));
	air_value uu = node2(g, "sub", u, u);
	CHECK(has_dims(g, uu, 1, &s0));
	/* [n] with [1, 4]: rank grows */
	air_dim u1d[2] = {s0, 1};
	int64_t u1shape[2] = {s0, 1};
	air_attr u1a = attr_ints("shape", u1shape, 2);
	air_value u1 = node(g, "reshape", &u, 1, &u1a, 1);
	CHECK(has_dims(g, u1, 2, u1d));
	air_value u1y = node2(g, "add", u1, y);
	air_dim u1yd[2] = {s0, 4};
	CHECK(has_dims(g, u1y, 2, u1yd));

	/* reshape [n,3,4] -> [n, 12] and [n*12] */
	int64_t sh1[2] = {s0, 12};
	air_attr r1a = attr_ints("shape", sh1, 2);
	air_value r1 = node(g, "reshape", &xy, 1, &r1a, 1);
	CHECK(has_dims(g, r1, 2, sh1));
	air_dim n12 = expr(g, AIR_DIM_MUL, s0, 12);
	int64_t sh2[1] = {n12};
	air_attr r2a = attr_ints("shape", sh2, 1);
	air_value r2 = node(g, "reshape", &xy, 1, &r2a, 1);
	CHECK(has_dims(g, r2, 1, &n12));

	/* slice: constant bounds on a constant dim; symbolic bounds */
	air_attr sl1[4] = {attr_int("axis", 1), attr_int("start", 1), attr_int("end", 12), attr_int("step", 3)};
	air_value q1 = node(g, "slice", &r1, 1, sl1, 4);
	air_dim q1d[2] = {s0, 4}; /* ceil(11 / 3) */
	CHECK(has_dims(g, q1, 2, q1d));
	air_attr sl2[4] = {attr_int("axis", 0), attr_int("start", 0), attr_int("end", s0), attr_int("step", 2)};
	air_value q2 = node(g, "slice", &r1, 1, sl2, 4);
	air_dim q2d[2] = {expr(g, AIR_DIM_CEILDIV, s0, 2), 12};
	CHECK(has_dims(g, q2, 2, q2d));
	air_attr sl3[3] = {attr_int("axis", -2), attr_int("start", 1), attr_int("end", s0)};
	air_value q3 = node(g, "slice", &r1, 1, sl3, 3);
	air_dim q3d[2] = {expr(g, AIR_DIM_SUB, s0, 1), 12};
	CHECK(has_dims(g, q3, 2, q3d));

	/* cat along a symbolic axis and along a constant one */
	air_value c1in[2] = {z, u};
	air_attr cat0 = attr_int("axis", 0);
	air_value c1 = node(g, "cat", c1in, 2, &cat0, 1);
	air_dim c1d = expr(g, AIR_DIM_ADD, s1, s0);
	CHECK(has_dims(g, c1, 1, &c1d));
	air_value c2in[3] = {r1, q1, r1};
	air_attr cat1 = attr_int("axis", -1);
	air_value c2 = node(g, "cat", c2in, 3, &cat1, 1);
	air_dim c2d[2] = {s0, 28};
	CHECK(has_dims(g, c2, 2, c2d));
	/* cat along dim 0 of [n,12] and [n,4]: a constant mismatch elsewhere */
	air_value bad_cat[2] = {r1, q1};
	air_value out[4];
	int n_out;
	EXPECT_ERR(air_graph_add_node(g, "cat", bad_cat, 2, &cat0, 1, out, 4, &n_out), AIR_SHAPE_MISMATCH, "cat");

	/* permute [n,3,4] by (2, 0, 1) -> [4, n, 3] */
	int64_t perm[3] = {2, 0, -2};
	air_attr pa = attr_ints("perm", perm, 3);
	air_value p = node(g, "permute", &xy, 1, &pa, 1);
	air_dim pd[3] = {4, s0, 3};
	CHECK(has_dims(g, p, 3, pd));

	/* expand [1, 4] -> [n, 4] (n is expression id -1) and -> [m, n, 4] */
	int64_t ex1[2] = {s0, 4};
	air_attr ea1 = attr_ints("shape", ex1, 2);
	air_value e1 = node(g, "expand", &y, 1, &ea1, 1);
	CHECK(has_dims(g, e1, 2, ex1));
	int64_t ex2[3] = {s1, s0, 4};
	air_attr ea2 = attr_ints("shape", ex2, 3);
	air_value e2 = node(g, "expand", &y, 1, &ea2, 1);
	CHECK(has_dims(g, e2, 3, ex2));
	/* expanding [n,3,1] to [n,3,5] keeps n */
	int64_t ex3[3] = {s0, 3, 5};
	air_attr ea3 = attr_ints("shape", ex3, 3);
	air_value e3 = node(g, "expand", &x, 1, &ea3, 1);
	CHECK(has_dims(g, e3, 3, ex3));
	int64_t ex_bad[2] = {3, 5};
	air_attr eab = attr_ints("shape", ex_bad, 2);
	EXPECT_ERR(air_graph_add_node(g, "expand", &y, 1, &eab, 1, out, 4, &n_out), AIR_SHAPE_MISMATCH, "expand");

	/* elementwise unary keeps symbolic dims, cast too */
	air_attr to_i64 = attr_int("dtype", AIR_I64);
	air_value ci = node(g, "cast", &xy, 1, &to_i64, 1);
	CHECK(has_dims(g, ci, 3, want));
	air_dtype dt;
	CHECK_OK(air_graph_value_info(g, ci, &dt, NULL, NULL));
	CHECK(dt == AIR_I64);
	air_value cmp = node2(g, "lt", z, u);
	CHECK_OK(air_graph_value_info(g, cmp, &dt, NULL, NULL));
	CHECK(dt == AIR_BOOL);

	air_value outs[3] = {q2, c2, e2};
	CHECK_OK(air_graph_set_outputs(g, outs, 3));
	CHECK_OK(air_graph_verify(g));
	air_model *m = compile(g, 0);
	air_dim od[AIR_MAX_RANK];
	int rank;
	CHECK_OK(air_model_output_info(m, 2, &dt, &rank, od));
	CHECK(rank == 3 && od[0] == s1 && od[1] == s0 && od[2] == 4);
	air_model_destroy(m);
	air_graph_destroy(g);
}

/* ---- sessions ---------------------------------------------------------- */

/* One symbolic model: x [n, 4], y [4] ->
 *   out0 = slice(reshape(x + y, [n*4]), 1 : n*4 : 3)
 *   out1 = cat(x, x * 2) along 0            [2n, 4]
 *   out2 = expand(y, [n, 4])
 *   out3 = permute(x, (1, 0))                [4, n] */
static air_model *symbolic_model(void)
{
	air_graph *g = NULL;
	CHECK_OK(air_graph_create(&g));
	air_dim n;
	CHECK_OK(air_graph_symbol(g, "n", &n));
	air_dim xd[2] = {n, 4}, yd[1] = {4};
	air_value x, y;
	CHECK_OK(air_graph_add_input(g, "x", AIR_F32, 2, xd, &x));
	CHECK_OK(air_graph_add_input(g, "y", AIR_F32, 1, yd, &y));
	air_value xy = node2(g, "add", x, y);
	air_dim n4 = expr(g, AIR_DIM_MUL, n, 4);
	int64_t sh[1] = {n4};
	air_attr ra = attr_ints("shape", sh, 1);
	air_value r = node(g, "reshape", &xy, 1, &ra, 1);
	air_attr sa[4] = {attr_int("axis", 0), attr_int("start", 1), attr_int("end", n4), attr_int("step", 3)};
	air_value out0 = node(g, "slice", &r, 1, sa, 4);
	const float two = 2.0f;
	air_value c2;
	int64_t one[1] = {1};
	CHECK_OK(air_graph_add_constant(g, AIR_F32, 1, one, &two, 0, &c2));
	air_value x2 = node2(g, "mul", x, c2);
	air_value cin[2] = {x, x2};
	air_attr ca = attr_int("axis", 0);
	air_value out1 = node(g, "cat", cin, 2, &ca, 1);
	int64_t esh[2] = {n, 4};
	air_attr ea = attr_ints("shape", esh, 2);
	air_value out2 = node(g, "expand", &y, 1, &ea, 1);
	int64_t perm[2] = {1, 0};
	air_attr pa = attr_ints("perm", perm, 2);
	air_value out3 = node(g, "permute", &x, 1, &pa, 1);
	air_value outs[4] = {out0, out1, out2, out3};
	CHECK_OK(air_graph_set_outputs(g, outs, 4));
	air_model *m = compile(g, 0);
	air_graph_destroy(g);
	return m;
}

/* Runs the symbolic model in session s for size n and checks everything;
 * returns the number of wrong values (or -1 on an error). */
static int run_symbolic(air_session *s, int64_t n, float seed)
{
	float *x = malloc(sizeof(float) * (size_t)(n * 4 + 1));
	float y[4];
	for (int64_t i = 0; i < n * 4; i++)
		x[i] = seed + (float)i;
	for (int j = 0; j < 4; j++)
		y[j] = 100.0f * (float)(j + 1) + seed;
	int64_t xd[2] = {n, 4}, yd[1] = {4};
	int bad = 0;
	if (air_session_set_input(s, 0, x, 2, xd) != AIR_OK || air_session_set_input(s, 1, y, 1, yd) != AIR_OK) {
		free(x);
		return -1;
	}
	int64_t len0 = (n * 4 - 1 + 2) / 3;
	int64_t want_dims[4][2] = {{len0, 0}, {2 * n, 4}, {n, 4}, {4, n}};
	int want_rank[4] = {1, 2, 2, 2};
	float *out[4];
	for (int k = 0; k < 4; k++) {
		int rank;
		int64_t dims[AIR_MAX_RANK];
		if (air_session_output_shape(s, k, &rank, dims) != AIR_OK)
			bad = -1000;
		if (rank != want_rank[k] || dims[0] != want_dims[k][0] || (rank == 2 && dims[1] != want_dims[k][1]))
			bad++;
		int64_t numel = k == 0 ? len0 : want_dims[k][0] * want_dims[k][1];
		out[k] = malloc(sizeof(float) * (size_t)(numel + 1));
		if (air_session_set_output(s, k, out[k], sizeof(float) * (size_t)numel) != AIR_OK)
			bad = -1000;
	}
	if (bad == 0 && air_session_run(s) != AIR_OK) {
		fprintf(stderr, "run at n=%lld: %s\n", (long long)n, air_last_error());
		bad = -1;
	}
	if (bad == 0) {
		for (int64_t i = 0; i < len0; i++) {
			int64_t f = 1 + 3 * i;
			bad += out[0][i] != x[f] + y[f % 4];
		}
		for (int64_t i = 0; i < n * 4; i++) {
			bad += out[1][i] != x[i];
			bad += out[1][n * 4 + i] != x[i] * 2;
			bad += out[2][i] != y[i % 4];
		}
		for (int j = 0; j < 4; j++)
			for (int64_t i = 0; i < n; i++)
				bad += out[3][j * n + i] != x[i * 4 + j];
	}
	for (int k = 0; k < 4; k++)
		free(out[k]);
	free(x);
	return bad;
}

static void test_sessions(void)
{
	air_model *m = symbolic_model();
	air_session *s = NULL;
	EXPECT_ERR(air_session_create(m, NULL), AIR_INVALID_ARGUMENT, NULL);
	EXPECT_ERR(air_session_create(NULL, &s), AIR_INVALID_ARGUMENT, NULL);
	CHECK_OK(air_session_create(m, &s));
	CHECK(air_session_arena_bytes(NULL) == 0);

	/* out of order: nothing bound yet */
	int rank;
	int64_t dims[AIR_MAX_RANK];
	EXPECT_ERR(air_session_run(s), AIR_INVALID_STATE, NULL);
	EXPECT_ERR(air_session_output_shape(s, 0, &rank, dims), AIR_INVALID_STATE, NULL);
	EXPECT_ERR(air_session_run(NULL), AIR_INVALID_ARGUMENT, NULL);
	EXPECT_ERR(air_session_output_shape(s, 4, &rank, dims), AIR_INVALID_ARGUMENT, NULL);
	EXPECT_ERR(air_session_output_shape(s, 0, NULL, dims), AIR_INVALID_ARGUMENT, NULL);
	EXPECT_ERR(air_session_set_input(s, 2, dims, 1, dims), AIR_INVALID_ARGUMENT, NULL);
	EXPECT_ERR(air_session_set_input(s, -1, dims, 1, dims), AIR_INVALID_ARGUMENT, NULL);
	EXPECT_ERR(air_session_set_input(NULL, 0, dims, 1, dims), AIR_INVALID_ARGUMENT, NULL);
	EXPECT_ERR(air_session_set_output(s, 4, dims, 8), AIR_INVALID_ARGUMENT, NULL);
	EXPECT_ERR(air_session_set_output(NULL, 0, dims, 8), AIR_INVALID_ARGUMENT, NULL);

	/* the same session at several sizes, back and forth */
	const int64_t sizes[] = {2, 5, 1, 5, 7, 2};
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		int bad = run_symbolic(s, sizes[i], (float)i);
		CHECK(bad == 0);
		if (bad)
			fprintf(stderr, "  at n=%lld: %d wrong\n", (long long)sizes[i], bad);
	}
	/* a fresh session on the same model */
	air_session *s0 = NULL;
	CHECK_OK(air_session_create(m, &s0));
	CHECK(run_symbolic(s0, 3, 1.0f) == 0);
	air_session_destroy(s0);

	/* contradicting sizes: x [n, 4] bound with 5 columns */
	float buf[64] = {0};
	int64_t xd_bad[2] = {2, 5}, yd[1] = {4};
	CHECK_OK(air_session_set_input(s, 0, buf, 2, xd_bad));
	CHECK_OK(air_session_set_input(s, 1, buf, 1, yd));
	EXPECT_ERR(air_session_output_shape(s, 0, &rank, dims), AIR_SHAPE_MISMATCH, "input 0");
	EXPECT_ERR(air_session_run(s), AIR_SHAPE_MISMATCH, "input 0");
	/* wrong rank and negative sizes are refused at binding */
	int64_t d3[3] = {2, 4, 1};
	EXPECT_ERR(air_session_set_input(s, 0, buf, 3, d3), AIR_SHAPE_MISMATCH, NULL);
	int64_t dneg[2] = {-2, 4};
	EXPECT_ERR(air_session_set_input(s, 0, buf, 2, dneg), AIR_SHAPE_MISMATCH, NULL);
	EXPECT_ERR(air_session_set_input(s, 0, buf, 2, NULL), AIR_INVALID_ARGUMENT, NULL);
	int64_t dhuge[2] = {INT64_MAX / 2, 4};
	EXPECT_ERR(air_session_set_input(s, 0, buf, 2, dhuge), AIR_SHAPE_MISMATCH, NULL);
	int64_t dok[2] = {2, 4};
	EXPECT_ERR(air_session_set_input(s, 0, NULL, 2, dok), AIR_INVALID_ARGUMENT, NULL);
	/* the session recovers once the sizes agree */
	CHECK(run_symbolic(s, 3, 0.5f) == 0);

	/* too-small output buffer */
	CHECK_OK(air_session_set_output(s, 1, buf, sizeof(float) * 23)); /* needs 24 */
	EXPECT_ERR(air_session_run(s), AIR_INVALID_ARGUMENT, "output 1");
	CHECK_OK(air_session_set_output(s, 1, NULL, sizeof(float) * 24));
	EXPECT_ERR(air_session_run(s), AIR_INVALID_ARGUMENT, "output 1");
	air_session_destroy(s);

	/* outputs unbound */
	CHECK_OK(air_session_create(m, &s));
	float x[8] = {0}, y[4] = {0};
	int64_t xd[2] = {2, 4};
	CHECK_OK(air_session_set_input(s, 0, x, 2, xd));
	CHECK_OK(air_session_set_input(s, 1, y, 1, yd));
	EXPECT_ERR(air_session_run(s), AIR_INVALID_STATE, "output");
	air_session_destroy(s);
	air_model_destroy(m);

	/* one symbol bound by two inputs that disagree: x [s0], y [s0] */
	air_graph *g = NULL;
	CHECK_OK(air_graph_create(&g));
	air_dim sym;
	CHECK_OK(air_graph_symbol(g, "s0", &sym));
	air_value xa, ya;
	CHECK_OK(air_graph_add_input(g, "x", AIR_F32, 1, &sym, &xa));
	CHECK_OK(air_graph_add_input(g, "y", AIR_F32, 1, &sym, &ya));
	air_value sum = node2(g, "add", xa, ya);
	CHECK_OK(air_graph_set_outputs(g, &sum, 1));
	m = compile(g, 0);
	air_graph_destroy(g);
	CHECK_OK(air_session_create(m, &s));
	float a3[3] = {1, 2, 3}, b4[4] = {1, 2, 3, 4}, o4[4];
	int64_t three = 3, four = 4;
	CHECK_OK(air_session_set_input(s, 0, a3, 1, &three));
	CHECK_OK(air_session_set_input(s, 1, b4, 1, &four));
	CHECK_OK(air_session_set_output(s, 0, o4, sizeof o4));
	EXPECT_ERR(air_session_run(s), AIR_SHAPE_MISMATCH, "s0");
	EXPECT_ERR(air_session_output_shape(s, 0, &rank, dims), AIR_SHAPE_MISMATCH, "s0");
	CHECK_OK(air_session_set_input(s, 0, b4, 1, &four));
	CHECK_OK(air_session_run(s));
	CHECK(o4[0] == 2 && o4[3] == 8);
	air_session_destroy(s);
	air_model_destroy(m);
}

/* Outputs that are graph inputs, constants, or the same value twice, and
 * an output that another node also reads. Also: 0-d inputs bound with NULL
 * dims, empty inputs bound with NULL data. */
static void test_output_kinds(void)
{
	air_graph *g = NULL;
	CHECK_OK(air_graph_create(&g));
	air_dim xd[1] = {5};
	air_value x, c, sc;
	CHECK_OK(air_graph_add_input(g, "x", AIR_F32, 1, xd, &x));
	float cdata[5] = {10, 20, 30, 40, 50};
	int64_t cd[1] = {5};
	CHECK_OK(air_graph_add_constant(g, AIR_F32, 1, cd, cdata, 0, &c));
	/* copied: changing the caller's array later changes nothing */
	air_value s;
	CHECK_OK(air_graph_add_input(g, "s", AIR_F64, 0, NULL, &s));
	const double sdata = 0.5;
	CHECK_OK(air_graph_add_constant(g, AIR_F64, 0, NULL, &sdata, AIR_CONSTANT_BORROW, &sc));
	air_value xc = node2(g, "add", x, c);
	air_value neg = node1(g, "neg", xc);
	air_value ssum = node2(g, "add", s, sc);
	air_value outs[8] = {xc, x, c, xc, neg, x, ssum, sc};
	CHECK_OK(air_graph_set_outputs(g, outs, 8));
	for (int flags = 0; flags < 2; flags++) {
		air_model *m = compile(g, flags ? AIR_COMPILE_NO_FUSION | AIR_COMPILE_NO_MEMORY_REUSE : 0);
		cdata[0] = -999; /* the model kept its own copy */
		air_session *se = NULL;
		CHECK_OK(air_session_create(m, &se));
		float xv[5] = {1, 2, 3, 4, 5};
		double sv = 1.25;
		CHECK_OK(air_session_set_input(se, 0, xv, 1, xd));
		CHECK_OK(air_session_set_input(se, 1, &sv, 0, NULL));
		float o[6][5];
		double d0 = 0, d1 = 0;
		memset(o, 0, sizeof o);
		for (int k = 0; k < 6; k++)
			CHECK_OK(air_session_set_output(se, k, o[k], sizeof o[k]));
		CHECK_OK(air_session_set_output(se, 6, &d0, sizeof d0));
		CHECK_OK(air_session_set_output(se, 7, &d1, sizeof d1));
		int rank = -1;
		int64_t dims[AIR_MAX_RANK];
		CHECK_OK(air_session_output_shape(se, 6, &rank, dims));
		CHECK(rank == 0);
		for (int rep = 0; rep < 2; rep++) {
			CHECK_OK(air_session_run(se));
			int bad = 0;
			for (int i = 0; i < 5; i++) {
				float want_c = 10.0f * (float)(i + 1);
				bad += o[0][i] != xv[i] + want_c;
				bad += o[1][i] != xv[i];
				bad += o[2][i] != want_c;
				bad += o[3][i] != xv[i] + want_c;
				bad += o[4][i] != -(xv[i] + want_c);
				bad += o[5][i] != xv[i];
			}
			CHECK(bad == 0);
			CHECK(d0 == 1.75 && d1 == 0.5);
			memset(o, 0, sizeof o);
			xv[2] = 100; /* inputs are read at run time */
		}
		air_session_destroy(se);
		air_model_destroy(m);
		cdata[0] = 10;
	}
	air_graph_destroy(g);

	/* empty tensors: a [0, 3] input bound with NULL data, NULL output */
	CHECK_OK(air_graph_create(&g));
	air_dim n;
	CHECK_OK(air_graph_symbol(g, "n", &n));
	air_dim ed[2] = {n, 3};
	air_value e;
	CHECK_OK(air_graph_add_input(g, "e", AIR_F32, 2, ed, &e));
	air_value ee = node1(g, "exp", e);
	ee = node2(g, "mul", ee, e);
	CHECK_OK(air_graph_set_outputs(g, &ee, 1));
	air_model *m = compile(g, 0);
	air_graph_destroy(g);
	air_session *se = NULL;
	CHECK_OK(air_session_create(m, &se));
	int64_t zero[2] = {0, 3};
	CHECK_OK(air_session_set_input(se, 0, NULL, 2, zero));
	CHECK_OK(air_session_set_output(se, 0, NULL, 0));
	CHECK_OK(air_session_run(se));
	int rank;
	int64_t dims[AIR_MAX_RANK];
	CHECK_OK(air_session_output_shape(se, 0, &rank, dims));
	CHECK(rank == 2 && dims[0] == 0 && dims[1] == 3);
	/* then a non-empty size in the same session */
	float v[6] = {0, 1, -1, 2, 0.5f, 3}, o[6];
	int64_t two[2] = {2, 3};
	CHECK_OK(air_session_set_input(se, 0, v, 2, two));
	CHECK_OK(air_session_set_output(se, 0, o, sizeof o));
	CHECK_OK(air_session_run(se));
	int bad = 0;
	for (int i = 0; i < 6; i++)
		bad += !(fabsf(o[i] - expf(v[i]) * v[i]) <= 1e-5f * (1 + fabsf(o[i])));
	CHECK(bad == 0);
	air_session_destroy(se);
	air_model_destroy(m);
}

/* ---- threads ----------------------------------------------------------- */

typedef struct worker {
	air_model *m;
	int id;
	int bad;
} worker;

static void *worker_main(void *p)
{
	worker *w = p;
	air_session *s = NULL;
	if (air_session_create(w->m, &s) != AIR_OK) {
		w->bad = -1;
		return NULL;
	}
	for (int it = 0; it < 60; it++) {
		int64_t n = 1 + (it * 7 + w->id * 13) % 300;
		int r = run_symbolic(s, n, (float)(w->id * 1000 + it));
		if (r != 0)
			w->bad += r < 0 ? 1000 : r;
	}
	air_session_destroy(s);
	return NULL;
}

static void test_threads(void)
{
	air_model *m = symbolic_model();
	enum { T = 3 };
	pthread_t th[T];
	worker w[T];
	for (int i = 0; i < T; i++) {
		w[i].m = m;
		w[i].id = i;
		w[i].bad = 0;
		CHECK(pthread_create(&th[i], NULL, worker_main, &w[i]) == 0);
	}
	for (int i = 0; i < T; i++) {
		pthread_join(th[i], NULL);
		CHECK(w[i].bad == 0);
	}
	air_model_destroy(m);

	/* errors are per thread: a failure here does not touch another
	 * thread's message */
	air_error_clear();
	CHECK(air_last_error()[0] == '\0');
}

int main(void)
{
	test_basics();
	test_errors();
	test_verify();
	test_dims();
	test_symbolic_inference();
	test_sessions();
	test_output_kinds();
	test_threads();
	return check_report("test_graph");
}

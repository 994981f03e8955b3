/* test_pass_fuse_attention.c - the attention fusion pass on decomposed
 * attention built with the C API, shaped like the ATen graphs of BERT and
 * GPT-2 eager attention (head split by permute, K^T by a second permute or
 * one composed permute, reshapes around the bmms, an identity expand, a
 * clone after softmax, a scale by mul or div, an additive float mask,
 * grouped-query k/v repeated by reshape/expand/reshape as LLaMA does): each
 * becomes one sdpa node with the same result as the unfused graph (run with
 * the pass switched off), -inf rows included. Negative cases (an
 * intermediate with a second use or that is a graph output, softmax over
 * another axis, a tensor scale, an add after softmax) stay as they are. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "air/air.h"
#include "check.h"

typedef struct shape {
	int64_t H, L, S, E, Ev;
} shape;

static air_value node(air_graph *g, const char *op, const air_value *in, int n, const air_attr *attrs, int na)
{
	air_value out = 0;
	int nout;
	CHECK_OK(air_graph_add_node(g, op, in, n, attrs, na, &out, 1, &nout));
	return out;
}

static air_value dims_op(air_graph *g, const char *op, const char *attr, air_value x, int rank, const int64_t *d)
{
	air_attr a = {attr, AIR_ATTR_INTS, 0, 0, d, rank};
	return node(g, op, &x, 1, &a, 1);
}

static air_value permute(air_graph *g, air_value x, int rank, const int64_t *perm)
{
	return dims_op(g, "permute", "perm", x, rank, perm);
}

static air_value reshape(air_graph *g, air_value x, int rank, const int64_t *d)
{
	return dims_op(g, "reshape", "shape", x, rank, d);
}

static air_value scalar(air_graph *g, float v)
{
	air_value c;
	CHECK_OK(air_graph_add_constant(g, AIR_F32, 0, NULL, &v, 0, &c));
	return c;
}

enum {
	V_COMPOSED_K = 1,  /* K^T by one permute of [1, S, H, E] (as after simplify) */
	V_DIV = 2,         /* scores / 8 instead of * 0.125 */
	V_NO_MASK = 4,
	V_3D_OUT = 8,      /* the second bmm's [H, L, Ev] is the graph output */
	V_TWO = 16,        /* two attention blocks in a row */
	V_GQA = 1024,      /* k, v with H/2 heads, repeated as repeat_kv does */
	/* negative cases */
	N_SOFTMAX_OUT = 32,  /* softmax's output is also a graph output */
	N_AXIS = 64,         /* softmax over L, not S */
	N_TENSOR_SCALE = 128, /* scores * a [1, H, L, S] tensor */
	N_ADD_AFTER = 256,   /* the mask is added after softmax */
	N_SCORES_TWICE = 512, /* the scores feed a second output */
};

/* One attention block on inputs x_q [1, L, H, E], x_k [1, S, H, E],
 * x_v [1, S, H, Ev], mask [1, 1, 1, S]; returns the value after the usual
 * permute back to [1, L, H, Ev] (or the bmm output with V_3D_OUT). */
static air_value block(air_graph *g, const shape *sh, int flags, air_value xq, air_value xk, air_value xv,
		       air_value mask, air_value *extra)
{
	int64_t H = sh->H, L = sh->L, S = sh->S, E = sh->E, Ev = sh->Ev;
	static const int64_t p0213[4] = {0, 2, 1, 3}, p0132[4] = {0, 1, 3, 2}, p0231[4] = {0, 2, 3, 1};
	air_value q = permute(g, xq, 4, p0213);
	air_value kt;
	if (flags & V_COMPOSED_K) {
		kt = permute(g, xk, 4, p0231);
	} else {
		air_value k = permute(g, xk, 4, p0213);
		kt = permute(g, k, 4, p0132);
	}
	air_value v = permute(g, xv, 4, p0213);
	if (flags & V_GQA) {
		/* [1, H/2, S, D] -> [1, H/2, 1, S, D] -> expand [1, H/2, 2, S, D] -> [1, H, S, D] */
		int64_t u5[5] = {1, H / 2, 1, S, E}, e5[5] = {1, H / 2, 2, S, E}, r4[4] = {1, H, S, E};
		air_value k = permute(g, xk, 4, p0213);
		k = reshape(g, dims_op(g, "expand", "shape", reshape(g, k, 5, u5), 5, e5), 4, r4);
		kt = permute(g, k, 4, p0132);
		u5[4] = e5[4] = r4[3] = Ev;
		v = reshape(g, dims_op(g, "expand", "shape", reshape(g, v, 5, u5), 5, e5), 4, r4);
	}
	int64_t q4[4] = {1, H, L, E}, q3[3] = {H, L, E}, kt3[3] = {H, E, S}, s4[4] = {1, H, L, S}, s3[3] = {H, L, S};
	int64_t v3[3] = {H, S, Ev}, v4[4] = {1, H, S, Ev}, o4[4] = {1, H, L, Ev};
	air_value qe = dims_op(g, "expand", "shape", q, 4, q4);
	air_value in[2] = {reshape(g, qe, 3, q3), reshape(g, kt, 3, kt3)};
	air_value sc = node(g, "bmm", in, 2, NULL, 0);
	sc = reshape(g, sc, 4, s4);
	if (flags & N_SCORES_TWICE)
		*extra = sc;
	air_value t[2];
	if (flags & N_TENSOR_SCALE) {
		t[0] = sc;
		t[1] = scalar(g, 0.125f);
		air_value sc2 = node(g, "mul", t, 2, NULL, 0);
		t[0] = sc;
		t[1] = sc2;
		sc = node(g, "mul", t, 2, NULL, 0);
	} else {
		t[0] = sc;
		t[1] = scalar(g, (flags & V_DIV) ? 8.0f : 0.125f);
		sc = node(g, (flags & V_DIV) ? "div" : "mul", t, 2, NULL, 0);
	}
	if (!(flags & V_NO_MASK) && !(flags & N_ADD_AFTER)) {
		t[0] = mask; /* mask first: the add may come either way round */
		t[1] = sc;
		sc = node(g, "add", t, 2, NULL, 0);
	}
	air_attr ax = {"axis", AIR_ATTR_INT, (flags & N_AXIS) ? 2 : 3, 0, NULL, 0};
	air_value p = node(g, "softmax", &sc, 1, &ax, 1);
	if (flags & N_SOFTMAX_OUT)
		*extra = p;
	if (flags & N_ADD_AFTER) {
		t[0] = p;
		t[1] = mask;
		p = node(g, "add", t, 2, NULL, 0);
	}
	p = node(g, "copy", &p, 1, NULL, 0); /* dropout in eval */
	in[0] = reshape(g, p, 3, s3);
	in[1] = reshape(g, dims_op(g, "expand", "shape", v, 4, v4), 3, v3);
	air_value o = node(g, "bmm", in, 2, NULL, 0);
	if (flags & V_3D_OUT)
		return o;
	o = reshape(g, o, 4, o4);
	return permute(g, o, 4, p0213);
}

static int64_t kv_heads(const shape *sh, int flags)
{
	return (flags & V_GQA) ? sh->H / 2 : sh->H;
}

static air_graph *build(const shape *sh, int flags, int *n_out)
{
	air_graph *g;
	CHECK_OK(air_graph_create(&g));
	int64_t hk = kv_heads(sh, flags);
	int64_t dq[4] = {1, sh->L, sh->H, sh->E}, dk[4] = {1, sh->S, hk, sh->E}, dv[4] = {1, sh->S, hk, sh->Ev};
	int64_t dm[4] = {1, 1, 1, sh->S};
	air_value xq, xk, xv, mask, outs[3];
	CHECK_OK(air_graph_add_input(g, "q", AIR_F32, 4, dq, &xq));
	CHECK_OK(air_graph_add_input(g, "k", AIR_F32, 4, dk, &xk));
	CHECK_OK(air_graph_add_input(g, "v", AIR_F32, 4, dv, &xv));
	CHECK_OK(air_graph_add_input(g, "mask", AIR_F32, 4, dm, &mask));
	int n = 0;
	air_value extra = 0;
	outs[n++] = block(g, sh, flags, xq, xk, xv, mask, &extra);
	if (flags & V_TWO) {
		/* the second block reads the first's output as its queries (Ev == E) */
		outs[0] = block(g, sh, flags & ~V_TWO, outs[0], xk, xv, mask, &extra);
	}
	if (flags & (N_SOFTMAX_OUT | N_SCORES_TWICE))
		outs[n++] = extra;
	CHECK_OK(air_graph_set_outputs(g, outs, n));
	*n_out = n;
	return g;
}

static int count_op(const char *report, const char *op)
{
	/* "  sdpa(q ..." lines of the pass log, one per fused block */
	int c = 0;
	char key[64];
	snprintf(key, sizeof key, " %s(q ", op);
	for (const char *p = strstr(report, key); p; p = strstr(p + 1, key))
		c++;
	return c;
}

static float *run(air_model *m, const float *const *in, const int64_t dims[4][4], int64_t *numel)
{
	air_session *s;
	CHECK_OK(air_session_create(m, &s));
	for (int i = 0; i < 4; i++)
		CHECK_OK(air_session_set_input(s, i, in[i], 4, dims[i]));
	int rank;
	int64_t od[AIR_MAX_RANK];
	CHECK_OK(air_session_output_shape(s, 0, &rank, od));
	int64_t n = 1;
	for (int d = 0; d < rank; d++)
		n *= od[d];
	float *out = malloc(sizeof(float) * (size_t)(n + 1));
	CHECK_OK(air_session_set_output(s, 0, out, sizeof(float) * (size_t)n));
	if (air_model_output_count(m) > 1) {
		CHECK_OK(air_session_output_shape(s, 1, &rank, od));
		int64_t n1 = 1;
		for (int d = 0; d < rank; d++)
			n1 *= od[d];
		float *o1 = malloc(sizeof(float) * (size_t)(n1 + 1));
		CHECK_OK(air_session_set_output(s, 1, o1, sizeof(float) * (size_t)n1));
		CHECK_OK(air_session_run(s));
		free(o1);
	} else {
		CHECK_OK(air_session_run(s));
	}
	air_session_destroy(s);
	*numel = n;
	return out;
}

static uint64_t rng = 0x2545f4914f6cdd1dull;
static float urand(void)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (float)((double)(rng >> 40) / (double)(1u << 23) - 1.0);
}

/* Compiles with and without the pass; checks how many blocks fused and
 * that both give the same values (NaN where the other has NaN). */
static void check(const shape *sh, int flags, int want_fused, int minus_inf_mask)
{
	int n_out;
	air_graph *g = build(sh, flags, &n_out);
	air_compile_options on, off;
	air_compile_options_init(&on);
	air_compile_options_init(&off);
	off.disabled_passes = AIR_PASS_FUSE_ATTENTION;
	air_model *mf = NULL, *mp = NULL;
	CHECK_OK(air_compile(g, &on, &mf));
	CHECK_OK(air_compile(g, &off, &mp));
	if (!mf || !mp) {
		air_model_destroy(mf);
		air_model_destroy(mp);
		air_graph_destroy(g);
		return;
	}
	const char *rep = air_model_report(mf);
	int fused = count_op(rep, "sdpa");
	CHECK(fused == want_fused);
	if (fused != want_fused)
		fprintf(stderr, "flags %#x: %d fused, want %d\n%s\n", flags, fused, want_fused, rep);
	CHECK(count_op(air_model_report(mp), "sdpa") == 0);
	int64_t hk = kv_heads(sh, flags);
	int64_t dims[4][4] = {{1, sh->L, sh->H, sh->E}, {1, sh->S, hk, sh->E}, {1, sh->S, hk, sh->Ev}, {1, 1, 1, sh->S}};
	float *in[4];
	for (int i = 0; i < 4; i++) {
		int64_t n = dims[i][0] * dims[i][1] * dims[i][2] * dims[i][3];
		in[i] = malloc(sizeof(float) * (size_t)n);
		for (int64_t j = 0; j < n; j++)
			in[i][j] = i == 3 ? (urand() < -0.5f ? -1e30f : 0.0f) : 2.0f * urand();
	}
	if (minus_inf_mask)
		for (int64_t j = 0; j < sh->S; j++)
			in[3][j] = -INFINITY; /* every row empty: NaN unfused, and fused */
	int64_t na, nb;
	float *a = run(mf, (const float *const *)in, dims, &na), *b = run(mp, (const float *const *)in, dims, &nb);
	CHECK(na == nb);
	int same = 1, nans = 0;
	for (int64_t i = 0; i < na && i < nb; i++) {
		if (isnan(a[i]) || isnan(b[i])) {
			same &= isnan(a[i]) && isnan(b[i]);
			nans++;
			continue;
		}
		same &= fabsf(a[i] - b[i]) <= 1e-5f * (1.0f + fabsf(b[i]));
	}
	CHECK(same);
	CHECK(minus_inf_mask ? nans == na : nans == 0);
	if (!same)
		fprintf(stderr, "flags %#x: fused and unfused differ\n", flags);
	for (int i = 0; i < 4; i++)
		free(in[i]);
	free(a);
	free(b);
	air_model_destroy(mf);
	air_model_destroy(mp);
	air_graph_destroy(g);
}

int main(void)
{
	static const shape shapes[] = {{12, 128, 128, 64, 64}, {3, 7, 129, 16, 16}, {2, 1, 1, 5, 5}, {4, 33, 20, 64, 80}};
	for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
		const shape *sh = &shapes[i];
		check(sh, 0, 1, 0);
		check(sh, V_COMPOSED_K, 1, 0);
		check(sh, V_DIV | V_NO_MASK, 1, 0);
		check(sh, V_3D_OUT, 1, 0);
		check(sh, V_COMPOSED_K | V_3D_OUT | V_DIV, 1, 0);
		if (sh->E == sh->Ev)
			check(sh, V_TWO, 2, 0);
		if (sh->H % 2 == 0) {
			check(sh, V_GQA, 1, 0);
			check(sh, V_GQA | V_3D_OUT | V_NO_MASK, 1, 0);
		}
		check(sh, 0, 1, 1);
		check(sh, N_SOFTMAX_OUT, 0, 0);
		check(sh, N_AXIS, 0, 0);
		check(sh, N_TENSOR_SCALE, 0, 0);
		check(sh, N_ADD_AFTER, 0, 0);
		check(sh, N_SCORES_TWICE, 0, 0);
	}
	return check_report("test_pass_fuse_attention");
}

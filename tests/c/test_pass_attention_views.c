/* test_pass_attention_views.c - passes/attention_views.c on the attention
 * blocks models make, built through the public API: BERT's (a projection
 * per operand, reshape, permute), GPT-2's (one projection sliced in
 * three), ViT's (one projection reshaped to [B, L, 3, H, E], permuted,
 * sliced), LLaMA's (k and v one head, repeated by reshape -> expand ->
 * reshape) and the head merge after sdpa; and chains it must leave alone
 * (a reshape that is no view, a permute that is also a graph output, an
 * output permute other than (0, 2, 1, 3)). Each graph compiled with every
 * pass and with this one off gives the same values, and the report says
 * which permutes, slices and expands are left. */
#include <math.h>
#include <stdio.h>

#include "pass_graph.h"

enum { B = 2, L = 37, H = 3, E = 16, D = H * E };

enum {
	HEADS_EACH,  /* BERT: q, k, v each their own projection */
	HEADS_SLICED, /* GPT-2: one projection, sliced along its last dim */
	HEADS_QKV,   /* ViT: [B, L, 3, H, E] permuted to [3, B, H, L, E], sliced */
	HEADS_GQA,   /* LLaMA: one k/v head repeated (repeat_kv) for H query heads; k scaled first (RoPE's place) */
	HEADS_ROPE,  /* LLaMA: q and k rotated (rotate_half, cos/sin [1, 1, L, E]) after the split */
};

enum {
	N_NOT_A_VIEW = 1,  /* q's head split is followed by a reshape that is no view */
	N_Q_OUTPUT = 2,    /* q's permuted heads are also a graph output */
	N_OTHER_MERGE = 4, /* the output is permuted (0, 2, 3, 1), not (0, 2, 1, 3) */
};

static air_value linear(air_graph *g, air_value x, int64_t n, int64_t k)
{
	int64_t wd[2] = {n, k}, bd[1] = {n};
	air_value in[3] = {x, constant(g, 2, wd, -0.3f, 0.3f), constant(g, 1, bd, -0.1f, 0.1f)};
	air_attr a[1] = {iattr("has_bias", 1)};
	return node(g, "linear", in, 3, a, 1);
}

static air_value reshape(air_graph *g, air_value x, int rank, const int64_t *dims)
{
	air_attr a[1] = {ints("shape", dims, rank)};
	return node(g, "reshape", &x, 1, a, 1);
}

static air_value permute(air_graph *g, air_value x, int rank, const int64_t *perm)
{
	air_attr a[1] = {ints("perm", perm, rank)};
	return node(g, "permute", &x, 1, a, 1);
}

static air_value slice(air_graph *g, air_value x, int64_t axis, int64_t start, int64_t end)
{
	air_attr a[3] = {iattr("axis", axis), iattr("start", start), iattr("end", end)};
	return node(g, "slice", &x, 1, a, 3);
}

static const int64_t swap12[4] = {0, 2, 1, 3};

/* [B, L, D] -> [B, H, L, E] */
static air_value split_heads(air_graph *g, air_value x)
{
	const int64_t d[4] = {B, L, H, E};
	return permute(g, reshape(g, x, 4, d), 4, swap12);
}

/* [B, L, E] -> one head [B, 1, L, E] -> repeated for H heads [B, H, L, E]
 * (HF LLaMA's repeat_kv: reshape, expand, reshape); scaled on the way if
 * `scaled`, as RoPE leaves k */
static air_value one_head_repeated(air_graph *g, air_value x, int scaled)
{
	const int64_t d[4] = {B, L, 1, E}, d5[5] = {B, 1, 1, L, E}, e5[5] = {B, 1, H, L, E}, dh[4] = {B, H, L, E};
	air_value h = permute(g, reshape(g, x, 4, d), 4, swap12);
	if (scaled) {
		const int64_t one[1] = {1};
		h = binary(g, "mul", h, constant(g, 1, one, 0.5f, 0.5f));
	}
	air_attr a[1] = {ints("shape", e5, 5)};
	air_value r = reshape(g, h, 5, d5);
	air_value e = node(g, "expand", &r, 1, a, 1);
	return reshape(g, e, 4, dh);
}

/* x * cos + cat(-x[..., E/2:], x[..., :E/2]) * sin, as LLaMA writes it */
static air_value rotated(air_graph *g, air_value x, air_value cos, air_value sin)
{
	air_value hi = slice(g, x, -1, E / 2, E), lo = slice(g, x, -1, 0, E / 2);
	air_value parts[2] = {node(g, "neg", &hi, 1, NULL, 0), lo};
	air_attr ca[1] = {iattr("axis", -1)};
	air_value rot = node(g, "cat", parts, 2, ca, 1);
	return binary(g, "add", binary(g, "mul", x, cos), binary(g, "mul", rot, sin));
}

static air_graph *build(int heads, int flags, int causal)
{
	air_graph *g;
	CHECK_OK(air_graph_create(&g));
	const int64_t xd[3] = {B, L, D}, md[4] = {B, 1, 1, L};
	air_value x = input(g, "x", 3, xd), mask = input(g, "mask", 4, md);
	air_value q, k, v;
	if (heads == HEADS_EACH) {
		q = split_heads(g, linear(g, x, D, D));
		k = split_heads(g, linear(g, x, D, D));
		v = split_heads(g, linear(g, x, D, D));
	} else if (heads == HEADS_SLICED) {
		air_value p = linear(g, x, 3 * D, D);
		q = split_heads(g, slice(g, p, 2, 0, D));
		k = split_heads(g, slice(g, p, 2, D, 2 * D));
		v = split_heads(g, slice(g, p, -1, 2 * D, 3 * D));
	} else if (heads == HEADS_ROPE) {
		const int64_t td[4] = {1, 1, L, E};
		air_value cos = constant(g, 4, td, -1, 1), sin = constant(g, 4, td, -1, 1);
		q = rotated(g, split_heads(g, linear(g, x, D, D)), cos, sin);
		k = rotated(g, split_heads(g, linear(g, x, D, D)), cos, sin);
		v = split_heads(g, linear(g, x, D, D));
	} else if (heads == HEADS_GQA) {
		q = split_heads(g, linear(g, x, D, D));
		k = one_head_repeated(g, linear(g, x, E, D), 1);
		v = one_head_repeated(g, linear(g, x, E, D), 0);
	} else {
		const int64_t d5[5] = {B, L, 3, H, E}, perm[5] = {2, 0, 3, 1, 4}, d4[4] = {B, H, L, E};
		air_value p = permute(g, reshape(g, linear(g, x, 3 * D, D), 5, d5), 5, perm);
		q = reshape(g, slice(g, p, 0, 0, 1), 4, d4);
		k = reshape(g, slice(g, p, 0, 1, 2), 4, d4);
		v = reshape(g, slice(g, p, 0, 2, 3), 4, d4);
	}
	air_value q_heads = q;
	if (flags & N_NOT_A_VIEW) {
		/* the heads [B, H, L, E] reshaped (not permuted) to [B, L, H, E]:
		 * no strides give that from the projection, so q reads the first
		 * permute's copy, through a view of the second */
		const int64_t d[4] = {B, L, H, E};
		q = reshape(g, q, 4, d);
		q = permute(g, q, 4, swap12); /* back to [B, H, L, E], other values */
	}
	air_value in[4] = {q, k, v, mask};
	air_attr sa[3] = {iattr("is_causal", causal), iattr("has_mask", causal ? 0 : 1), iattr("empty_nan", 1)};
	air_value o = node(g, "sdpa", in, causal ? 3 : 4, sa, 3);
	air_value y;
	if (flags & N_OTHER_MERGE) {
		const int64_t perm[4] = {0, 2, 3, 1}, d[3] = {B, L, D};
		y = reshape(g, permute(g, o, 4, perm), 3, d); /* [B, L, E, H]: heads interleaved */
	} else {
		const int64_t d[3] = {B, L, D};
		y = reshape(g, permute(g, o, 4, swap12), 3, d);
	}
	y = linear(g, y, D, D);
	air_value outs[2] = {y, q_heads};
	CHECK_OK(air_graph_set_outputs(g, outs, flags & N_Q_OUTPUT ? 2 : 1));
	return g;
}

static void check(int heads, int flags, int causal, int want_permutes, int want_slices)
{
	air_graph *g = build(heads, flags, causal);
	air_model *on = compile(g, 0, 0), *off = compile(g, 0, AIR_PASS_ATTENTION_VIEWS);
	air_graph_destroy(g);
	const int64_t n_x = B * L * D, n_m = B * L;
	float *x = randv(n_x, -1, 1), *mask = randv(n_m, -2, 0);
	mask[3] = -INFINITY;
	float *in[2] = {x, mask};
	int rank[2] = {3, 4};
	int64_t dims[2][4] = {{B, L, D, 0}, {B, 1, 1, L}};
	int64_t n_on, n_off;
	float *y_on = run(on, 2, in, rank, dims, &n_on), *y_off = run(off, 2, in, rank, dims, &n_off);
	CHECK(n_on == n_off && n_on == B * L * D);
	double worst = 0;
	for (int64_t i = 0; i < n_on; i++) {
		double e = fabs((double)y_on[i] - (double)y_off[i]);
		worst = e > worst || isnan(e) ? (isnan(e) ? INFINITY : e) : worst;
	}
	int permutes = count_steps(on, "permute"), slices = count_steps(on, "slice");
	int expands = count_steps(on, "expand");
	if (worst > 1e-5 || permutes != want_permutes || slices != want_slices || expands != 0)
		fprintf(stderr, "heads %d flags %d causal %d: worst %g, %d permutes (want %d), %d slices (want %d), "
				"%d expands\n%s\n",
			heads, flags, causal, worst, permutes, want_permutes, slices, want_slices, expands,
			air_model_report(on));
	CHECK(worst <= 1e-5);
	CHECK(permutes == want_permutes);
	CHECK(slices == want_slices);
	CHECK(expands == 0);
	/* with the pass off, every permute, slice and expand runs */
	int base_permutes = heads == HEADS_QKV ? 2 : 4;
	int base_slices = heads == HEADS_EACH || heads == HEADS_GQA || heads == HEADS_ROPE ? 0 : 3; /* (rope: fuse_rope) */
	CHECK(count_steps(off, "expand") == (heads == HEADS_GQA ? 2 : 0));
	if (flags & N_NOT_A_VIEW)
		base_permutes++;
	CHECK(count_steps(off, "permute") == base_permutes);
	CHECK(count_steps(off, "slice") == base_slices);
	free(x);
	free(mask);
	free(y_on);
	free(y_off);
	air_model_destroy(on);
	air_model_destroy(off);
}

int main(void)
{
	for (int causal = 0; causal < 2; causal++) {
		/* everything folds */
		check(HEADS_EACH, 0, causal, 0, 0);
		check(HEADS_SLICED, 0, causal, 0, 0);
		check(HEADS_QKV, 0, causal, 0, 0);
		/* the repeats go; k's permute stays (the scaling reads its copy) */
		check(HEADS_GQA, 0, causal, 1, 0);
		/* q's and k's splits move after their rope (fuse_rope) and fold */
		check(HEADS_ROPE, 0, causal, 0, 0);
		/* q keeps its first permute (a reshape of its copy is no view of
		 * the projection); the second folds */
		check(HEADS_EACH, N_NOT_A_VIEW, causal, 1, 0);
		/* q's heads are also an output: their permute stays (1) */
		check(HEADS_EACH, N_Q_OUTPUT, causal, 1, 0);
		check(HEADS_SLICED, N_Q_OUTPUT, causal, 1, 1);
		/* a merge that is not the (0, 2, 1, 3) swap stays */
		check(HEADS_EACH, N_OTHER_MERGE, causal, 1, 0);
		check(HEADS_QKV, N_OTHER_MERGE, causal, 1, 0);
	}
	return check_report("test_pass_attention_views");
}

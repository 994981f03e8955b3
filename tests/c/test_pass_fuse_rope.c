/* test_pass_fuse_rope.c - the rotary embedding written out in ops (LLaMA's
 * apply_rotary_pos_emb with rotate_half) becomes one rope op, and rope's
 * kernels agree with the ops it replaced: head dims 2 to 130 (AVX2 tails),
 * cos and sin broadcast over batch and heads ([1, 1, S, E]) or not, every
 * operand order; on a head split (permute(0, 2, 1, 3)) the rope runs on
 * the unsplit tensor and the permute after it. Near misses stay: halves split elsewhere, an intermediate
 * that is also an output, cos with another last dim. Against the graph
 * with the pass off, within 1e-6 (an FMA may round once less). */
#include <math.h>
#include <stdio.h>

#include "pass_graph.h"

enum { B = 2, H = 3, S = 19 };

enum {
	F_SWAP = 1,        /* every product and the sum with operands the other way */
	F_FULL_TABLE = 2,  /* cos and sin [B, H, S, E], not [1, 1, S, E] */
	N_OFF_CENTRE = 4,  /* the halves split at h - 1 (not a rotate_half) */
	N_EXTRA_USE = 8,   /* the cat is also a graph output */
	F_SPLIT = 16,      /* x is a head split: permute(0, 2, 1, 3) of an input [B, S, H, E] */
};

static air_value slice(air_graph *g, air_value x, int64_t start, int64_t end)
{
	air_attr a[3] = {iattr("axis", -1), iattr("start", start), iattr("end", end)};
	return node(g, "slice", &x, 1, a, 3);
}

static air_value ordered(air_graph *g, const char *op, air_value a, air_value b, int swap)
{
	return swap ? binary(g, op, b, a) : binary(g, op, a, b);
}

static air_graph *build(int64_t E, int flags)
{
	air_graph *g;
	CHECK_OK(air_graph_create(&g));
	const int64_t xd[4] = {B, H, S, E}, td1[4] = {1, 1, S, E};
	const int64_t *td = flags & F_FULL_TABLE ? xd : td1;
	const int64_t sd[4] = {B, S, H, E}, swap12[4] = {0, 2, 1, 3};
	air_value x = input(g, "x", 4, flags & F_SPLIT ? sd : xd), cos = input(g, "cos", 4, td), sin = input(g, "sin", 4, td);
	if (flags & F_SPLIT) {
		air_attr pa[1] = {ints("perm", swap12, 4)};
		x = node(g, "permute", &x, 1, pa, 1);
	}
	int64_t h = E / 2 - (flags & N_OFF_CENTRE ? 1 : 0);
	air_value hi = slice(g, x, h, E), lo = slice(g, x, 0, h);
	air_value neg = node(g, "neg", &hi, 1, NULL, 0);
	air_value parts[2] = {neg, lo};
	air_attr ca[1] = {iattr("axis", -1)};
	air_value rot = node(g, "cat", parts, 2, ca, 1);
	int s = flags & F_SWAP;
	air_value y = ordered(g, "add", ordered(g, "mul", x, cos, s), ordered(g, "mul", rot, sin, s), s);
	air_value outs[2] = {y, rot};
	CHECK_OK(air_graph_set_outputs(g, outs, flags & N_EXTRA_USE ? 2 : 1));
	return g;
}

static void check(int64_t E, int flags, int want)
{
	air_graph *g = build(E, flags);
	air_model *on = compile(g, 0, 0), *off = compile(g, 0, AIR_PASS_FUSE_ROPE);
	air_graph_destroy(g);
	const int64_t nx = B * H * S * E, nt = flags & F_FULL_TABLE ? nx : S * E;
	float *x = randv(nx, -2, 2), *c = randv(nt, -1, 1), *sn = randv(nt, -1, 1);
	float *in[3] = {x, c, sn};
	int rank[3] = {4, 4, 4};
	int64_t dims[3][4] = {{B, H, S, E}, {1, 1, S, E}, {1, 1, S, E}};
	if (flags & F_FULL_TABLE)
		for (int i = 1; i < 3; i++)
			memcpy(dims[i], dims[0], sizeof dims[0]);
	if (flags & F_SPLIT) {
		dims[0][1] = S;
		dims[0][2] = H;
	}
	int64_t n_on, n_off;
	float *y_on = run(on, 3, in, rank, dims, &n_on), *y_off = run(off, 3, in, rank, dims, &n_off);
	CHECK(n_on == nx && n_off == nx);
	double worst = 0;
	for (int64_t i = 0; i < nx; i++) {
		double e = fabs((double)y_on[i] - (double)y_off[i]);
		worst = e > worst || e != e ? (e != e ? INFINITY : e) : worst;
	}
	int ropes = count_steps(on, "rope");
	if (worst > 1e-6 || ropes != want)
		fprintf(stderr, "E %lld flags %d: worst %g, %d rope (want %d)\n%s\n", (long long)E, flags, worst, ropes,
			want, air_model_report(on));
	CHECK(worst <= 1e-6);
	CHECK(ropes == want);
	CHECK(count_steps(off, "rope") == 0);
	if (want) /* nothing of the written-out form is left */
		CHECK(count_steps(on, "slice") + count_steps(on, "cat") + count_steps(on, "neg") == 0);
	/* a head split moves after the rope (one permute either way here: the
	 * graph's output is the permuted one) */
	CHECK(count_steps(on, "permute") == (flags & F_SPLIT ? 1 : 0));
	if (want && (flags & F_SPLIT) && !(flags & F_FULL_TABLE)) {
		const char *r = strstr(air_model_report(on), "kernels per step:");
		const char *rope = r ? strstr(r, " rope ") : NULL, *perm = r ? strstr(r, " permute ") : NULL;
		CHECK(rope && perm && rope < perm);
	}
	free(x);
	free(c);
	free(sn);
	free(y_on);
	free(y_off);
	air_model_destroy(on);
	air_model_destroy(off);
}

/* A rope node whose cos has another last dim, or whose x's last dim is
 * odd, is refused at compile time (shape inference), not run. */
static void bad_shapes(void)
{
	for (int bad = 0; bad < 2; bad++) {
		air_graph *g;
		CHECK_OK(air_graph_create(&g));
		const int64_t xd[2] = {4, bad ? 7 : 8}, td[2] = {4, bad ? 7 : 6};
		air_value in[3] = {input(g, "x", 2, xd), input(g, "cos", 2, td), input(g, "sin", 2, td)};
		air_value out = 0;
		int nout = 0;
		CHECK(air_graph_add_node(g, "rope", in, 3, NULL, 0, &out, 1, &nout) != AIR_OK);
		air_graph_destroy(g);
	}
}

int main(void)
{
	static const int64_t dims[] = {2, 6, 16, 18, 64, 128, 130};
	for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
		check(dims[i], 0, 1);
		check(dims[i], F_SWAP, 1);
		check(dims[i], F_FULL_TABLE, 1);
		check(dims[i], F_SWAP | F_FULL_TABLE, 1);
		check(dims[i], F_SPLIT, 1);
		check(dims[i], F_SPLIT | F_SWAP, 1);
		check(dims[i], F_SPLIT | F_FULL_TABLE, 1); /* [B, H, S, E] tables: no move */
	}
	check(64, N_OFF_CENTRE, 0);
	check(64, N_EXTRA_USE, 0);
	bad_shapes();
	return check_report("test_pass_fuse_rope");
}

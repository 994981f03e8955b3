/* test_memplan.c - the static memory plan (plan/memplan.c) on hand-made
 * lifetimes: buffers alive at the same time never overlap (every pair is
 * checked), offsets are MP_ALIGN-aligned, reuse=false packs every buffer
 * back to back, reuse=true never needs more and finds the obvious optimum
 * on simple cases (a chain needs two buffers), zero-size buffers, and a
 * seeded stress test of 1000 buffers. Then through a real graph: a long
 * elementwise chain compiled with and without AIR_COMPILE_NO_MEMORY_REUSE
 * shows the saving in air_session_arena_bytes and gives identical outputs. */
#include <stdint.h>
#include <string.h>

#include "air/air.h"
#include "check.h"
#include "plan/memplan.h"

static size_t align_up(size_t n)
{
	return (n + MP_ALIGN - 1) / MP_ALIGN * MP_ALIGN;
}

/* Checks the plan's invariants; returns the number of violations. */
static int plan_violations(const mp_buffer *b, int n, size_t total, const char *label)
{
	int bad = 0;
	for (int i = 0; i < n; i++) {
		if (b[i].offset % MP_ALIGN != 0) {
			if (bad++ < 5)
				fprintf(stderr, "%s: buffer %d offset %zu is not aligned\n", label, i, b[i].offset);
		}
		if (b[i].offset + b[i].size > total) {
			if (bad++ < 5)
				fprintf(stderr, "%s: buffer %d [%zu, +%zu) ends past the total %zu\n", label, i,
					b[i].offset, b[i].size, total);
		}
	}
	for (int i = 0; i < n; i++)
		for (int j = i + 1; j < n; j++) {
			if (b[i].size == 0 || b[j].size == 0)
				continue;
			bool live = !(b[i].last < b[j].first || b[j].last < b[i].first);
			bool mem = b[i].offset < b[j].offset + b[j].size && b[j].offset < b[i].offset + b[i].size;
			if (live && mem) {
				if (bad++ < 5)
					fprintf(stderr,
						"%s: buffers %d [%d,%d]@%zu+%zu and %d [%d,%d]@%zu+%zu overlap\n",
						label, i, b[i].first, b[i].last, b[i].offset, b[i].size, j,
						b[j].first, b[j].last, b[j].offset, b[j].size);
			}
		}
	return bad;
}

static size_t sum_aligned(const mp_buffer *b, int n)
{
	size_t s = 0;
	for (int i = 0; i < n; i++)
		s += align_up(b[i].size);
	return s;
}

/* Plans b both ways and checks the common invariants; returns the reuse total. */
static size_t plan_both(mp_buffer *b, int n, const char *label)
{
	size_t total_noreuse = 0, total_reuse = 0;
	CHECK_OK(mp_plan(b, n, false, &total_noreuse));
	CHECK(plan_violations(b, n, total_noreuse, label) == 0);
	CHECK(total_noreuse == sum_aligned(b, n));
	/* without reuse, buffers never share memory at all */
	int shared = 0;
	for (int i = 0; i < n; i++)
		for (int j = i + 1; j < n; j++)
			if (b[i].size && b[j].size && b[i].offset < b[j].offset + b[j].size &&
			    b[j].offset < b[i].offset + b[i].size)
				shared++;
	CHECK(shared == 0);
	CHECK_OK(mp_plan(b, n, true, &total_reuse));
	CHECK(plan_violations(b, n, total_reuse, label) == 0);
	CHECK(total_reuse <= total_noreuse);
	return total_reuse;
}

static void set(mp_buffer *b, size_t size, int first, int last)
{
	b->size = size;
	b->first = first;
	b->last = last;
	b->offset = (size_t)-1;
}

static void hand_made_cases(void)
{
	size_t total = 12345;
	/* nothing to plan */
	CHECK_OK(mp_plan(NULL, 0, true, &total));
	CHECK(total == 0);
	total = 12345;
	CHECK_OK(mp_plan(NULL, 0, false, &total));
	CHECK(total == 0);

	/* one buffer */
	mp_buffer one[1];
	set(&one[0], 100, 0, 0);
	CHECK(plan_both(one, 1, "one") == 128);
	CHECK(one[0].offset == 0);

	/* a chain a -> b -> c -> d of equal sizes: two buffers suffice */
	mp_buffer chain[4];
	for (int i = 0; i < 4; i++)
		set(&chain[i], 1000, i, i + 1 < 4 ? i + 1 : i);
	CHECK(plan_both(chain, 4, "chain") == 2 * align_up(1000));
	CHECK_OK(mp_plan(chain, 4, false, &total));
	CHECK(total == 4 * align_up(1000));

	/* a long chain of 50: still two */
	mp_buffer longchain[50];
	for (int i = 0; i < 50; i++)
		set(&longchain[i], 4096, i, i + 1);
	CHECK(plan_both(longchain, 50, "long chain") == 2 * 4096);

	/* all alive at once: no reuse possible, the sum */
	mp_buffer all[5];
	for (int i = 0; i < 5; i++)
		set(&all[i], (size_t)(i + 1) * 100, 0, 4);
	CHECK(plan_both(all, 5, "all alive") == sum_aligned(all, 5));

	/* disjoint lifetimes: the largest alone */
	mp_buffer disjoint[4];
	for (int i = 0; i < 4; i++)
		set(&disjoint[i], (size_t)(i + 1) * 1000, 2 * i, 2 * i + 1);
	CHECK(plan_both(disjoint, 4, "disjoint") == align_up(4000));
	for (int i = 0; i < 4; i++)
		CHECK(disjoint[i].offset == 0);

	/* lifetimes are inclusive: [0,1] and [1,2] share step 1 */
	mp_buffer touch[2];
	set(&touch[0], 64, 0, 1);
	set(&touch[1], 64, 1, 2);
	CHECK(plan_both(touch, 2, "touching") == 128);
	CHECK(touch[0].offset != touch[1].offset);

	/* a diamond: x feeds y and z, both feed w; y and z are alive together */
	mp_buffer diamond[4];
	set(&diamond[0], 256, 0, 2); /* x read by steps 1 and 2 */
	set(&diamond[1], 256, 1, 3); /* y */
	set(&diamond[2], 256, 2, 3); /* z */
	set(&diamond[3], 256, 3, 3); /* w */
	CHECK(plan_both(diamond, 4, "diamond") == 3 * 256);

	/* a small buffer fits in a hole left by a large one */
	mp_buffer hole[3];
	set(&hole[0], 1024, 0, 1);
	set(&hole[1], 1024, 1, 3);
	set(&hole[2], 512, 2, 3); /* hole[0] is dead by step 2 */
	CHECK(plan_both(hole, 3, "hole") == 2048);

	/* zero-size buffers take no space and do not disturb the rest */
	mp_buffer zeros[6];
	set(&zeros[0], 0, 0, 5);
	set(&zeros[1], 300, 0, 1);
	set(&zeros[2], 0, 1, 2);
	set(&zeros[3], 300, 1, 2);
	set(&zeros[4], 0, 2, 3);
	set(&zeros[5], 300, 2, 3);
	CHECK(plan_both(zeros, 6, "zeros") == 2 * align_up(300));
	CHECK_OK(mp_plan(zeros, 6, false, &total));
	CHECK(total == 3 * align_up(300));
	mp_buffer only_zeros[3];
	for (int i = 0; i < 3; i++)
		set(&only_zeros[i], 0, 0, 2);
	CHECK(plan_both(only_zeros, 3, "only zeros") == 0);

	/* sizes that are already multiples of the alignment and ones just past */
	mp_buffer odd[4];
	set(&odd[0], MP_ALIGN, 0, 3);
	set(&odd[1], MP_ALIGN + 1, 0, 3);
	set(&odd[2], 1, 0, 3);
	set(&odd[3], 2 * MP_ALIGN - 1, 0, 3);
	CHECK(plan_both(odd, 4, "odd sizes") == 6 * MP_ALIGN);
}

static uint64_t rng = 0x853c49e6748fea9bull;
static uint32_t rnd(uint32_t n)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(rng >> 33) % n;
}

static void stress(void)
{
	enum { N = 1000 };
	static mp_buffer b[N];
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < N; i++) {
			int first = (int)rnd(400);
			int len = round == 0 ? (int)rnd(5) : (int)rnd(60);
			size_t size = rnd(8) == 0 ? 0 : (size_t)rnd(round == 2 ? 100000 : 5000);
			set(&b[i], size, first, first + len);
		}
		char label[32];
		snprintf(label, sizeof label, "stress %d", round);
		size_t total = plan_both(b, N, label);
		/* a lower bound: the bytes alive at the busiest step */
		size_t peak = 0;
		for (int step = 0; step < 460; step++) {
			size_t live = 0;
			for (int i = 0; i < N; i++)
				if (b[i].first <= step && step <= b[i].last)
					live += align_up(b[i].size);
			if (live > peak)
				peak = live;
		}
		CHECK(total >= peak);
		CHECK(total < sum_aligned(b, N));
	}
}

/* A chain x -> relu -> neg -> abs -> ... of n ops over [rows, cols] f32,
 * compiled with flags; returns the output and the session's arena bytes. */
static float *run_chain(int n_ops, uint32_t flags, const float *x, int64_t rows, int64_t cols, size_t *arena)
{
	static const char *const ops[] = {"relu", "neg", "abs", "sigmoid", "tanh", "exp", "sqrt"};
	air_graph *g = NULL;
	air_model *m = NULL;
	air_session *s = NULL;
	float *out = NULL;
	*arena = 0;
	CHECK_OK(air_graph_create(&g));
	air_dim dims[2] = {rows, cols};
	air_value v;
	CHECK_OK(air_graph_add_input(g, "x", AIR_F32, 2, dims, &v));
	for (int k = 0; k < n_ops; k++) {
		int no = 0;
		air_value nv;
		CHECK_OK(air_graph_add_node(g, ops[k % 7], &v, 1, NULL, 0, &nv, 1, &no));
		v = nv;
	}
	CHECK_OK(air_graph_set_outputs(g, &v, 1));
	air_compile_options o;
	air_compile_options_init(&o);
	o.flags = flags;
	CHECK_OK(air_compile(g, &o, &m));
	air_graph_destroy(g);
	if (!m)
		return NULL;
	CHECK_OK(air_session_create(m, &s));
	int64_t d[2] = {rows, cols};
	size_t bytes = (size_t)(rows * cols) * sizeof(float);
	out = malloc(bytes);
	CHECK_OK(air_session_set_input(s, 0, x, 2, d));
	CHECK_OK(air_session_set_output(s, 0, out, bytes));
	CHECK_OK(air_session_run(s));
	*arena = air_session_arena_bytes(s);
	/* a second run with the same sizes keeps the same plan */
	CHECK_OK(air_session_run(s));
	CHECK(air_session_arena_bytes(s) == *arena);
	air_session_destroy(s);
	air_model_destroy(m);
	return out;
}

static void through_a_graph(void)
{
	const int64_t rows = 33, cols = 257;
	const int n_ops = 24;
	size_t value_bytes = (size_t)(rows * cols) * sizeof(float);
	float *x = malloc(value_bytes);
	for (int64_t i = 0; i < rows * cols; i++)
		x[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
	size_t reuse = 0, noreuse = 0, fused = 0;
	/* fusion would remove the intermediates, so keep one kernel per op */
	float *a = run_chain(n_ops, AIR_COMPILE_NO_FUSION, x, rows, cols, &reuse);
	float *b = run_chain(n_ops, AIR_COMPILE_NO_FUSION | AIR_COMPILE_NO_MEMORY_REUSE, x, rows, cols, &noreuse);
	float *c = run_chain(n_ops, AIR_COMPILE_NO_FUSION | AIR_COMPILE_REFERENCE_KERNELS, x, rows, cols, &reuse);
	float *d = run_chain(n_ops, 0, x, rows, cols, &fused);
	CHECK(a && b && c && d);
	if (a && b && c && d) {
		/* n_ops-1 intermediates (the last value is the graph output) */
		CHECK(noreuse >= (size_t)(n_ops - 1) * value_bytes);
		/* a chain needs two intermediate buffers at a time */
		CHECK(reuse >= 2 * value_bytes);
		CHECK(reuse < 3 * value_bytes);
		CHECK(reuse < noreuse);
		CHECK(memcmp(a, b, value_bytes) == 0);
		CHECK(memcmp(a, c, value_bytes) == 0);
		/* the fused chain is one kernel with no intermediates at all */
		CHECK(fused < value_bytes);
		int bad = 0;
		for (int64_t i = 0; i < rows * cols; i++)
			bad += !(fabsf(a[i] - d[i]) <= 1e-5f * (1.0f + fabsf(a[i])));
		CHECK(bad == 0);
	}
	free(a);
	free(b);
	free(c);
	free(d);
	free(x);
}

int main(void)
{
	hand_made_cases();
	stress();
	through_a_graph();
	return check_report("test_memplan");
}

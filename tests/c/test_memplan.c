/* test_memplan.c - the static memory plan. The planner (plan/memplan.c) on
 * hand-made lifetimes: buffers alive at the same time never overlap (every
 * pair is checked), offsets are MP_ALIGN-aligned, reuse=false packs every
 * buffer back to back, reuse=true never needs more, finds the obvious
 * optimum on simple cases and takes the best-fitting gap, zero-size
 * buffers, and a seeded stress test of 1000 buffers. Then the model plan
 * (plan/arena.c) on real graphs: in-place chains, the cases that must not
 * run in place (broadcast, read again later, graph inputs/outputs,
 * constants, other dtypes, non-elementwise ops), every elementwise op run
 * in place against the same op out of place, AIR_COMPILE_NO_MEMORY_REUSE,
 * and ResNet- and BERT-like blocks giving identical outputs either way
 * with a planned peak below the no-reuse total. */
#include <stdint.h>
#include <string.h>

#include "air/air.h"
#include "check.h"
#include "kernels/elementwise/fused_ref.h"
#include "ops/op.h"
#include "plan/memplan.h"
#include "runtime/model.h"

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

	/* best fit: when t is placed, the buffers alive with it leave a gap
	 * of 1024 at 2048 and one of 256 at 4608; t takes the smaller */
	mp_buffer fit[7];
	set(&fit[0], 2048, 0, 9); /* [0, 2048) */
	set(&fit[1], 1024, 0, 3); /* [2048, 3072), dead by step 5 */
	set(&fit[2], 1024, 0, 9); /* [3072, 4096) */
	set(&fit[3], 512, 0, 9);  /* [4096, 4608) */
	set(&fit[4], 256, 0, 3);  /* [4608, 4864), dead by step 5 */
	set(&fit[5], 256, 0, 9);  /* [4864, 5120) */
	set(&fit[6], 256, 5, 9);  /* t */
	CHECK(plan_both(fit, 7, "best fit") == 5120);
	CHECK(fit[1].offset == 2048 && fit[4].offset == 4608);
	CHECK(fit[6].offset == 4608);
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


/* ---- model plans on real graphs ---------------------------------------- */

typedef void (*build_fn)(air_graph *g);

/* A node; returns its first output. */
static air_value node(air_graph *g, const char *op, const air_value *in, int n, const air_attr *attrs, int na)
{
	air_value out[OP_MAX_OUT] = {0};
	int no = 0;
	air_status st = air_graph_add_node(g, op, in, n, attrs, na, out, OP_MAX_OUT, &no);
	if (st != AIR_OK)
		fprintf(stderr, "node %s: %s\n", op, air_last_error());
	CHECK(st == AIR_OK);
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

static uint32_t hash(uint32_t seed, int64_t i)
{
	uint32_t h = seed * 0x9e3779b1u ^ (uint32_t)i * 0x85ebca6bu;
	h ^= h >> 15;
	h *= 0x2c1b3c6du;
	h ^= h >> 12;
	return h;
}

/* Deterministic data: floats in [-2, 2), integers in 1..6 (safe divisors
 * and exponents), bools 0/1. */
static void fill(void *p, air_dtype dt, int64_t n, uint32_t seed)
{
	for (int64_t i = 0; i < n; i++) {
		uint32_t h = hash(seed, i);
		double f = (double)(h % 4000) / 1000.0 - 2.0;
		int64_t v = 1 + (int64_t)(h % 6);
		switch (dt) {
		case AIR_F32: ((float *)p)[i] = (float)f; break;
		case AIR_F64: ((double *)p)[i] = f; break;
		case AIR_I64: ((int64_t *)p)[i] = v; break;
		case AIR_I32: ((int32_t *)p)[i] = (int32_t)v; break;
		case AIR_I16: ((int16_t *)p)[i] = (int16_t)v; break;
		case AIR_I8: ((int8_t *)p)[i] = (int8_t)v; break;
		case AIR_U8: ((uint8_t *)p)[i] = (uint8_t)v; break;
		case AIR_BOOL: ((uint8_t *)p)[i] = (uint8_t)(h & 1); break;
		default: break;
		}
	}
}

static air_value constant(air_graph *g, int rank, const int64_t *dims, uint32_t seed, float scale)
{
	int64_t n = 1;
	for (int d = 0; d < rank; d++)
		n *= dims[d];
	float *data = malloc(sizeof *data * (size_t)(n ? n : 1));
	fill(data, AIR_F32, n, seed);
	for (int64_t i = 0; i < n; i++)
		data[i] *= scale;
	air_value v = 0;
	CHECK_OK(air_graph_add_constant(g, AIR_F32, rank, dims, data, 0, &v));
	free(data);
	return v;
}

typedef struct run_result {
	unsigned char *out; /* every output, back to back */
	size_t bytes;
	air_memory_info info; /* the model's, planned at compile time */
	int inplace[256];     /* per step (the first 256) */
	int n_steps;
	size_t arena;         /* the session's arena bytes */
	bool ok;              /* built, compiled and ran */
} run_result;

/* Builds a graph with build (or takes g), compiles it with flags, runs it
 * once on deterministic inputs, and checks that the session planned what
 * the model says. quiet: a failure to build or run is not a test failure
 * (used to probe which dtypes an op takes). */
static run_result run_graph(air_graph *g, uint32_t flags, bool quiet)
{
	run_result r;
	memset(&r, 0, sizeof r);
	air_model *m = NULL;
	air_session *s = NULL;
	air_compile_options o;
	air_compile_options_init(&o);
	o.flags = flags;
	air_status st = air_compile(g, &o, &m);
	if (st != AIR_OK) {
		if (!quiet)
			CHECK_OK(st);
		return r;
	}
	r.n_steps = m->n_steps;
	r.info.size = sizeof r.info;
	CHECK_OK(air_model_memory_info(m, &r.info));
	CHECK(r.info.known == 1);
	air_memory_info again = {.size = sizeof again};
	int *inplace = malloc(sizeof *inplace * (size_t)(m->n_steps + 1));
	CHECK_OK(rt_static_memory(m, &again, inplace));
	for (int k = 0; k < m->n_steps && k < 256; k++)
		r.inplace[k] = inplace[k];
	free(inplace);
	CHECK(again.arena_bytes == r.info.arena_bytes && again.inplace == r.info.inplace);
	CHECK_OK(air_session_create(m, &s));
	int n_in = air_model_input_count(m), n_out = air_model_output_count(m);
	void *in[16] = {0};
	for (int i = 0; i < n_in && i < 16; i++) {
		air_dtype dt;
		int rank;
		air_dim dims[AIR_MAX_RANK];
		CHECK_OK(air_model_input_info(m, i, &dt, &rank, dims));
		int64_t n = 1;
		for (int d = 0; d < rank; d++)
			n *= dims[d];
		in[i] = malloc(air_dtype_size(dt) * (size_t)(n ? n : 1));
		fill(in[i], dt, n, 1000u + (uint32_t)i);
		CHECK_OK(air_session_set_input(s, i, in[i], rank, dims));
	}
	size_t sizes[16] = {0};
	for (int i = 0; i < n_out && i < 16; i++) {
		air_dtype dt;
		int rank;
		int64_t dims[AIR_MAX_RANK];
		CHECK_OK(air_model_output_info(m, i, &dt, &rank, NULL));
		CHECK_OK(air_session_output_shape(s, i, &rank, dims));
		sizes[i] = air_dtype_size(dt);
		for (int d = 0; d < rank; d++)
			sizes[i] *= (size_t)dims[d];
		r.bytes += sizes[i];
	}
	r.out = calloc(r.bytes + 1, 1);
	size_t at = 0;
	for (int i = 0; i < n_out && i < 16; i++) {
		CHECK_OK(air_session_set_output(s, i, r.out + at, sizes[i]));
		at += sizes[i];
	}
	st = air_session_run(s);
	if (st == AIR_OK) {
		r.ok = true;
		r.arena = air_session_arena_bytes(s);
		air_memory_info si = {.size = sizeof si};
		CHECK_OK(air_session_memory_info(s, &si));
		CHECK(si.arena_bytes == r.info.arena_bytes && si.no_reuse_bytes == r.info.no_reuse_bytes);
		CHECK(si.inplace == r.info.inplace && si.buffers == r.info.buffers);
		CHECK(r.arena == mp_align(si.arena_bytes) + si.workspace_bytes);
	} else if (!quiet) {
		CHECK_OK(st);
	}
	for (int i = 0; i < n_in && i < 16; i++)
		free(in[i]);
	air_session_destroy(s);
	air_model_destroy(m);
	return r;
}

static run_result run_build(build_fn build, uint32_t flags)
{
	air_graph *g = NULL;
	CHECK_OK(air_graph_create(&g));
	build(g);
	run_result r = run_graph(g, flags, false);
	air_graph_destroy(g);
	return r;
}

/* Runs build with and without memory reuse: same bytes out, the plans'
 * invariants; returns the run with reuse (caller frees .out). */
static run_result same_both_ways(build_fn build, uint32_t flags, const char *label)
{
	run_result a = run_build(build, flags);
	run_result b = run_build(build, flags | AIR_COMPILE_NO_MEMORY_REUSE);
	CHECK(a.ok && b.ok);
	if (a.ok && b.ok) {
		CHECK(a.bytes == b.bytes);
		bool same = a.bytes == b.bytes && memcmp(a.out, b.out, a.bytes) == 0;
		if (!same)
			fprintf(stderr, "%s: outputs differ with and without memory reuse\n", label);
		CHECK(same);
		/* no reuse: nothing in place, every activation its own buffer */
		CHECK(b.info.inplace == 0);
		CHECK(b.info.arena_bytes == b.info.no_reuse_bytes);
		for (int k = 0; k < b.n_steps && k < 256; k++)
			CHECK(b.inplace[k] == -1);
		CHECK(a.info.no_reuse_bytes == b.info.no_reuse_bytes);
		CHECK(a.info.arena_bytes <= a.info.no_reuse_bytes);
		CHECK(a.info.buffers == b.info.buffers);
	}
	free(b.out);
	return a;
}

/* Checks the in-place input of each step against want (n entries). */
static void expect_inplace(const run_result *r, const int *want, int n, const char *label)
{
	CHECK(r->n_steps == n);
	int count = 0;
	for (int k = 0; k < n && k < r->n_steps; k++) {
		if (r->inplace[k] != want[k])
			fprintf(stderr, "%s: step %d runs in place of input %d, expected %d\n", label, k, r->inplace[k],
				want[k]);
		CHECK(r->inplace[k] == want[k]);
		count += want[k] >= 0;
	}
	CHECK(r->info.inplace == count);
}

static const air_dim D2[2] = {3, 11};

static air_value x_input(air_graph *g)
{
	air_value x = 0;
	CHECK_OK(air_graph_add_input(g, "x", AIR_F32, 2, D2, &x));
	return x;
}

static void out1(air_graph *g, air_value v)
{
	CHECK_OK(air_graph_set_outputs(g, &v, 1));
}

/* neg(x) is a graph input's consumer; relu and abs take over its buffer;
 * sigmoid writes the caller's output */
static void build_chain(air_graph *g)
{
	air_value a = node1(g, "neg", x_input(g));
	air_value b = node1(g, "relu", a);
	air_value c = node1(g, "abs", b);
	out1(g, node1(g, "sigmoid", c));
}

/* a broadcast input is never taken over; the full-size one is */
static void build_broadcast(air_graph *g)
{
	air_value x = x_input(g), y = 0;
	air_dim d1[1] = {11};
	CHECK_OK(air_graph_add_input(g, "y", AIR_F32, 1, d1, &y));
	air_value a = node1(g, "neg", x);
	air_value v = node1(g, "neg", y);
	out1(g, node1(g, "relu", node2(g, "add", v, a)));
}

/* a value read again later is not taken over */
static void build_read_later(air_graph *g)
{
	air_value a = node1(g, "neg", x_input(g));
	air_value b = node1(g, "relu", a);
	air_value c = node2(g, "add", b, a);
	out1(g, node1(g, "abs", c));
}

/* a graph output is the caller's memory: not taken over */
static void build_output_input(air_graph *g)
{
	air_value a = node1(g, "neg", x_input(g));
	air_value b = node1(g, "relu", a);
	air_value outs[2] = {a, b};
	CHECK_OK(air_graph_set_outputs(g, outs, 2));
}

/* constants are never written */
static void build_constant(air_graph *g)
{
	air_value x = x_input(g);
	int64_t d[2] = {3, 11};
	air_value k = constant(g, 2, d, 7, 1.0f);
	air_value a = node1(g, "neg", k);
	air_value b = node2(g, "add", a, k);
	air_value c = node2(g, "mul", x, b);
	out1(g, node1(g, "relu", c));
}

/* other dtypes (bool from a comparison, cast) are not taken over */
static void build_dtypes(air_graph *g)
{
	air_value x = x_input(g);
	air_value a = node1(g, "neg", x);
	air_value b = node2(g, "gt", a, x);
	air_attr to_f32 = {"dtype", AIR_ATTR_INT, AIR_F32, 0, NULL, 0};
	air_value c = node(g, "cast", &b, 1, &to_f32, 1);
	air_value w[3] = {b, a, c};
	air_value d = node(g, "where", w, 3, NULL, 0);
	out1(g, node1(g, "relu", d));
}

/* only elementwise ops run in place */
static void build_softmax(air_graph *g)
{
	air_value a = node1(g, "neg", x_input(g));
	air_attr axis = {"axis", AIR_ATTR_INT, 1, 0, NULL, 0};
	air_value b = node(g, "softmax", &a, 1, &axis, 1);
	air_value c = node1(g, "neg", b);
	out1(g, node1(g, "relu", c));
}

/* through an alias: relu takes over the buffer that the reshape views */
static void build_alias(air_graph *g)
{
	air_value a = node1(g, "neg", x_input(g));
	int64_t shape[1] = {33};
	air_attr sh = {"shape", AIR_ATTR_INTS, 0, 0, shape, 1};
	air_value r = node(g, "reshape", &a, 1, &sh, 1);
	air_value b = node1(g, "relu", r);
	out1(g, node1(g, "abs", b));
}

/* the same value twice */
static void build_twice(air_graph *g)
{
	air_value a = node1(g, "neg", x_input(g));
	air_value b = node2(g, "add", a, a);
	out1(g, node1(g, "relu", b));
}

static void inplace_cases(void)
{
	static const struct {
		build_fn build;
		const char *label;
		int want[8];
		int n;
	} cases[] = {
		{build_chain, "chain", {-1, 0, 0, -1}, 4},
		{build_broadcast, "broadcast", {-1, -1, 1, -1}, 4},
		{build_read_later, "read later", {-1, -1, 0, -1}, 4},
		{build_output_input, "graph output", {-1, -1}, 2},
		{build_constant, "constant", {-1, 0, 1, -1}, 4},
		{build_dtypes, "dtypes", {-1, -1, -1, 1, -1}, 5},
		{build_softmax, "softmax", {-1, -1, 0, -1}, 4},
		{build_alias, "alias", {-1, -1, 0, -1}, 4},
		{build_twice, "same value twice", {-1, 0, -1}, 3},
	};
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		/* no passes: the steps are the nodes as built */
		run_result r = same_both_ways(cases[c].build, AIR_COMPILE_OP_BY_OP, cases[c].label);
		expect_inplace(&r, cases[c].want, cases[c].n, cases[c].label);
		free(r.out);
	}
	/* the chain's three activations share one buffer */
	run_result r = run_build(build_chain, AIR_COMPILE_OP_BY_OP);
	CHECK(r.info.buffers == 3);
	CHECK(r.info.arena_bytes == mp_align(33 * sizeof(float)));
	CHECK(r.info.no_reuse_bytes == 3 * mp_align(33 * sizeof(float)));
	free(r.out);
}

/* Graph outputs that are reshapes of computed values: the first is computed
 * straight into the output's buffer (the reshape step is an alias, and the
 * value takes no arena buffer), so no later step may run in place of it
 * (relu reads a last and would otherwise take its buffer); a second view
 * of the same value, and a view of a graph input, are copies. Values
 * checked exactly, twice (the second run reuses the session). */
static void output_views(void)
{
	air_graph *g = NULL;
	CHECK_OK(air_graph_create(&g));
	air_value x = x_input(g);
	air_value a = node1(g, "neg", x);
	int64_t shape[1] = {33};
	air_attr sh = {"shape", AIR_ATTR_INTS, 0, 0, shape, 1};
	air_value v1 = node(g, "reshape", &a, 1, &sh, 1), v2 = node(g, "reshape", &a, 1, &sh, 1);
	air_value vx = node(g, "reshape", &x, 1, &sh, 1);
	air_value b = node1(g, "abs", node1(g, "relu", a));
	air_value outs[4] = {v1, b, v2, vx};
	CHECK_OK(air_graph_set_outputs(g, outs, 4));
	air_compile_options o;
	air_compile_options_init(&o);
	o.flags = AIR_COMPILE_OP_BY_OP;
	air_model *m = NULL;
	CHECK_OK(air_compile(g, &o, &m));
	air_graph_destroy(g);
	const char *rep = air_model_report(m);
	/* steps: neg, reshape (alias), reshape (copy), reshape of x (copy), relu, abs */
	CHECK(strstr(rep, "(alias)") != NULL && strstr(strstr(rep, "(alias)") + 1, "(alias)") == NULL);
	air_session *s = NULL;
	CHECK_OK(air_session_create(m, &s));
	float xin[33], out[4][33];
	for (int i = 0; i < 33; i++)
		xin[i] = (float)(i % 7) - 3.5f;
	int64_t d[2] = {3, 11};
	CHECK_OK(air_session_set_input(s, 0, xin, 2, d));
	for (int i = 0; i < 4; i++)
		CHECK_OK(air_session_set_output(s, i, out[i], sizeof out[i]));
	for (int run = 0; run < 2; run++) {
		memset(out, 0, sizeof out);
		CHECK_OK(air_session_run(s));
		int bad = 0;
		for (int i = 0; i < 33; i++) {
			float a_i = -xin[i], b_i = a_i > 0 ? a_i : 0.0f;
			bad += out[0][i] != a_i || out[1][i] != b_i || out[2][i] != a_i || out[3][i] != xin[i];
		}
		CHECK(bad == 0);
	}
	air_memory_info info = {.size = sizeof info};
	CHECK_OK(air_session_memory_info(s, &info));
	/* one activation, relu's (abs writes output 1): a is output 0's memory */
	CHECK(info.buffers == 1 && info.inplace == 0);
	air_session_destroy(s);
	air_model_destroy(m);
}

/* op over inputs of dtype dt and size n (where's condition: bool), input i
 * from a copy (an activation dying at op), the rest graph inputs: run with
 * and without reuse; 1 if it ran (0: the op does not take dt, or its result
 * has another dtype, so nothing could run in place). */
static int elementwise_case(const op_def *def, air_dtype dt, int64_t n, int i)
{
	air_graph *g = NULL;
	CHECK_OK(air_graph_create(&g));
	air_value in[4];
	air_dim dims[1] = {n};
	int n_in = def->min_in;
	for (int j = 0; j < n_in; j++) {
		air_dtype jt = !strcmp(def->name, "where") && j == 0 ? AIR_BOOL : dt;
		CHECK_OK(air_graph_add_input(g, NULL, jt, 1, dims, &in[j]));
	}
	int no = 0, rank = 0;
	air_value y = 0, res = 0;
	air_dtype ydt = AIR_DTYPE_COUNT;
	bool built = air_graph_add_node(g, "copy", &in[i], 1, NULL, 0, &in[i], 1, &no) == AIR_OK &&
		     air_graph_add_node(g, def->name, in, n_in, NULL, 0, &y, 1, &no) == AIR_OK &&
		     air_graph_add_node(g, "copy", &y, 1, NULL, 0, &res, 1, &no) == AIR_OK &&
		     air_graph_set_outputs(g, &res, 1) == AIR_OK &&
		     air_graph_value_info(g, y, &ydt, &rank, NULL) == AIR_OK;
	if (!built || ydt != dt) {
		air_graph_destroy(g);
		return 0;
	}
	run_result a = run_graph(g, AIR_COMPILE_OP_BY_OP, true);
	run_result b = run_graph(g, AIR_COMPILE_OP_BY_OP | AIR_COMPILE_NO_MEMORY_REUSE, true);
	air_graph_destroy(g);
	if (b.ok) {
		CHECK(a.ok);
		CHECK(a.n_steps == 3 && a.inplace[1] == i);
		bool same = a.ok && a.bytes == b.bytes && !memcmp(a.out, b.out, a.bytes);
		if (!same)
			fprintf(stderr, "%s %s n=%lld: in place of input %d differs\n", def->name, air_dtype_name(dt),
				(long long)n, i);
		CHECK(same);
	}
	free(a.out);
	free(b.out);
	return b.ok;
}

/* Every elementwise op's kernel, run with its output over input i, gives
 * the bytes it gives out of place: for each dtype the op takes, sizes 1, 7
 * and 24033 (more than one parallel task), and each input in turn as the
 * one taken over (the others are graph inputs, so not candidates). */
static int every_elementwise_op(void)
{
	static const air_dtype dtypes[] = {AIR_F32, AIR_F64, AIR_I64, AIR_I32, AIR_I8, AIR_U8, AIR_BOOL};
	static const int64_t sizes[] = {1, 7, 24033};
	int tried = 0;
	for (int op = 0; op < OP_COUNT; op++) {
		const op_def *def = op_get(op);
		if (!(def->flags & OPF_ELEMENTWISE) || op == OP_cast || op == OP_fused_elementwise)
			continue;
		int ran = 0;
		for (size_t t = 0; t < sizeof dtypes / sizeof dtypes[0]; t++)
			for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++)
				/* where's condition is bool and its output not */
				for (int i = op == OP_where ? 1 : 0; i < def->min_in; i++)
					ran += elementwise_case(def, dtypes[t], sizes[z], i);
		if (!ran)
			fprintf(stderr, "%s: no dtype ran in place\n", def->name);
		CHECK(ran > 0);
		tried += ran > 0;
	}
	return tried;
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

static void long_chain(void)
{
	const int64_t rows = 33, cols = 257;
	const int n_ops = 24;
	size_t value_bytes = (size_t)(rows * cols) * sizeof(float);
	float *x = malloc(value_bytes);
	for (int64_t i = 0; i < rows * cols; i++)
		x[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
	size_t reuse = 0, noreuse = 0, ref = 0, fused = 0;
	/* fusion would remove the intermediates, so keep one kernel per op */
	float *a = run_chain(n_ops, AIR_COMPILE_NO_FUSION, x, rows, cols, &reuse);
	float *b = run_chain(n_ops, AIR_COMPILE_NO_FUSION | AIR_COMPILE_NO_MEMORY_REUSE, x, rows, cols, &noreuse);
	float *c = run_chain(n_ops, AIR_COMPILE_NO_FUSION | AIR_COMPILE_REFERENCE_KERNELS, x, rows, cols, &ref);
	float *d = run_chain(n_ops, 0, x, rows, cols, &fused);
	CHECK(a && b && c && d);
	if (a && b && c && d) {
		/* n_ops-1 intermediates (the last value is the graph output) */
		CHECK(noreuse >= (size_t)(n_ops - 1) * value_bytes);
		/* every op after the first runs in place: one buffer in all */
		CHECK(reuse == mp_align(value_bytes));
		CHECK(ref == reuse);
		CHECK(memcmp(a, b, value_bytes) == 0);
		/* the fused chain is one kernel with no intermediates at all */
		CHECK(fused < value_bytes);
		/* the reference kernels and the fused program compute the same
		 * functions as the fast (vmath) kernels, to a few ulp */
		int bad = 0;
		for (int64_t i = 0; i < rows * cols; i++) {
			bad += !(fabsf(a[i] - c[i]) <= 1e-5f * (1.0f + fabsf(a[i])));
			bad += !(fabsf(a[i] - d[i]) <= 1e-5f * (1.0f + fabsf(a[i])));
		}
		CHECK(bad == 0);
	}
	free(a);
	free(b);
	free(c);
	free(d);
	free(x);
}

/* A fused chain whose input is an activation runs in place of it. */
static void build_fused(air_graph *g)
{
	air_value x = x_input(g);
	air_attr axis = {"axis", AIR_ATTR_INT, 1, 0, NULL, 0};
	air_value a = node(g, "softmax", &x, 1, &axis, 1); /* not elementwise */
	air_value b = node1(g, "relu", a);
	air_value c = node1(g, "tanh", b);
	air_value d = node1(g, "exp", c);
	air_value e = node2(g, "add", d, x);
	air_value f = node1(g, "neg", e);
	out1(g, node(g, "softmax", &f, 1, &axis, 1)); /* the group's result is no graph output */
}

static void fused_in_place(void)
{
	run_result r = same_both_ways(build_fused, 0, "fused");
	/* softmax, then one fused_dag (relu tanh exp, add x, neg) in place of
	 * softmax's output, its input 0, then softmax */
	CHECK(r.n_steps == 3);
	CHECK(r.inplace[1] == 0);
	CHECK(r.info.inplace >= 1);
	free(r.out);
}

/* ---- a fused residual taken over by the GEMM epilogue --------------------- */

/* Runs g with and without reuse; checks step k's in-place input is want
 * and the outputs are the same bytes. */
static void residual_case(air_graph *g, uint32_t flags, int k, int want, const char *label)
{
	run_result a = run_graph(g, flags, false);
	run_result b = run_graph(g, flags | AIR_COMPILE_NO_MEMORY_REUSE, false);
	CHECK(a.ok && b.ok);
	if (a.inplace[k] != want)
		fprintf(stderr, "%s: step %d in place of %d, expected %d\n", label, k, a.inplace[k], want);
	CHECK(a.inplace[k] == want);
	bool same = a.ok && b.ok && a.bytes == b.bytes && !memcmp(a.out, b.out, a.bytes);
	if (!same)
		fprintf(stderr, "%s: outputs differ with the residual in place\n", label);
	CHECK(same);
	free(a.out);
	free(b.out);
}

/* linear(x, w, bias, r) with r = neg(r_in) dying there; w constant (packed
 * kernel) or an input (unpacked); sizes with one and several K blocks. */
static int linear_residual(void)
{
	static const int64_t shapes[][3] = {{1, 1, 1}, {7, 17, 5}, {37, 33, 300}, {13, 130, 1031}};
	int ran = 0;
	for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++)
		for (int packed = 0; packed < 2; packed++) {
			int64_t M = shapes[t][0], N = shapes[t][1], K = shapes[t][2];
			air_graph *g = NULL;
			CHECK_OK(air_graph_create(&g));
			air_dim xd[2] = {M, K}, rd[2] = {M, N}, wd[2] = {N, K}, bd[1] = {N};
			air_value x = 0, rin = 0, w = 0;
			CHECK_OK(air_graph_add_input(g, "x", AIR_F32, 2, xd, &x));
			CHECK_OK(air_graph_add_input(g, "r", AIR_F32, 2, rd, &rin));
			if (packed)
				w = constant(g, 2, wd, 11, 0.1f);
			else
				CHECK_OK(air_graph_add_input(g, "w", AIR_F32, 2, wd, &w));
			air_value r = node1(g, "neg", rin);
			air_value in[4] = {x, w, constant(g, 1, bd, 12, 0.1f), r};
			air_attr has_res = {"has_residual", AIR_ATTR_INT, 1, 0, NULL, 0};
			air_value y = 0;
			int no = 0;
			if (air_graph_add_node(g, "linear", in, 4, &has_res, 1, &y, 1, &no) != AIR_OK) {
				air_graph_destroy(g); /* an op schema without fused residuals */
				return 0;
			}
			out1(g, node1(g, "neg", y));
			char label[64];
			snprintf(label, sizeof label, "linear %lldx%lldx%lld%s", (long long)M, (long long)N,
				 (long long)K, packed ? " packed" : "");
			residual_case(g, AIR_COMPILE_OP_BY_OP, 1, 3, label);
			/* the reference kernel reads the residual after writing y */
			residual_case(g, AIR_COMPILE_OP_BY_OP | AIR_COMPILE_REFERENCE_KERNELS, 1, -1, label);
			air_graph_destroy(g);
			ran++;
		}
	return ran;
}

/* conv2d and conv2d_nhwc (x, w, bias, r) with has_residual: 1x1 and 3x3
 * (GEMM epilogue, in place) and depthwise (not in place). */
static int conv_residual(void)
{
	static const struct {
		int k, groups, cin, cout;
	} cases[] = {{1, 1, 5, 6}, {3, 1, 5, 6}, {3, 1, 3, 17}, {1, 1, 40, 33}, {3, 5, 5, 5}};
	int ran = 0;
	for (int nhwc = 0; nhwc < 2; nhwc++)
		for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
			int k = cases[t].k, G = cases[t].groups, C = cases[t].cin, O = cases[t].cout;
			air_graph *g = NULL;
			CHECK_OK(air_graph_create(&g));
			air_dim xd[4] = {2, C, 7, 9}, rd[4] = {2, O, 7, 9};
			if (nhwc) {
				air_dim xn[4] = {2, 7, 9, C}, rn[4] = {2, 7, 9, O};
				memcpy(xd, xn, sizeof xd);
				memcpy(rd, rn, sizeof rd);
			}
			int64_t wd[4] = {O, C / G, k, k}, bd[1] = {O}, pad[2] = {k / 2, k / 2};
			air_value x = 0, rin = 0;
			CHECK_OK(air_graph_add_input(g, "x", AIR_F32, 4, xd, &x));
			CHECK_OK(air_graph_add_input(g, "r", AIR_F32, 4, rd, &rin));
			air_value r = node1(g, "neg", rin);
			air_value in[4] = {x, constant(g, 4, wd, 21, 0.2f), constant(g, 1, bd, 22, 0.1f), r};
			air_attr at[3] = {{"padding", AIR_ATTR_INTS, 0, 0, pad, 2},
					  {"groups", AIR_ATTR_INT, G, 0, NULL, 0},
					  {"has_residual", AIR_ATTR_INT, 1, 0, NULL, 0}};
			air_value y = 0;
			int no = 0;
			const char *op = nhwc ? "conv2d_nhwc" : "conv2d";
			if (air_graph_add_node(g, op, in, 4, at, 3, &y, 1, &no) != AIR_OK) {
				air_graph_destroy(g); /* no such op or no fused residual yet */
				continue;
			}
			out1(g, node1(g, "neg", y));
			char label[64];
			snprintf(label, sizeof label, "%s k%d groups %d %d->%d", op, k, G, C, O);
			residual_case(g, AIR_COMPILE_OP_BY_OP, 1, G == 1 ? 3 : -1, label);
			residual_case(g, AIR_COMPILE_OP_BY_OP | AIR_COMPILE_REFERENCE_KERNELS, 1, -1, label);
			air_graph_destroy(g);
			ran++;
		}
	return ran;
}

/* ---- ResNet- and BERT-like blocks -------------------------------------- */

enum { RC = 8, RH = 9 };

static air_value conv_bn(air_graph *g, air_value x, int cin, int cout, int k, uint32_t seed)
{
	int64_t wd[4] = {cout, cin, k, k}, cd[1] = {cout};
	int64_t pad[2] = {k / 2, k / 2};
	air_value in[3] = {x, constant(g, 4, wd, seed, 0.3f), constant(g, 1, cd, seed + 1, 0.1f)};
	air_attr padding = {"padding", AIR_ATTR_INTS, 0, 0, pad, 2};
	air_value y = node(g, "conv2d", in, 3, &padding, 1);
	air_value bn[5] = {y, constant(g, 1, cd, seed + 2, 0.1f), 0, constant(g, 1, cd, seed + 4, 0.5f),
			   constant(g, 1, cd, seed + 5, 0.1f)};
	/* a positive variance */
	float var[RC * 4];
	for (int i = 0; i < cout; i++)
		var[i] = 0.5f + (float)(i % 5) * 0.1f;
	CHECK_OK(air_graph_add_constant(g, AIR_F32, 1, cd, var, 0, &bn[2]));
	return node(g, "batch_norm", bn, 5, NULL, 0);
}

static air_value basic_block(air_graph *g, air_value x, uint32_t seed)
{
	air_value y = node1(g, "relu", conv_bn(g, x, RC, RC, 3, seed));
	air_value z = conv_bn(g, y, RC, RC, 3, seed + 10);
	return node1(g, "relu", node2(g, "add", z, x));
}

static void build_resnet(air_graph *g)
{
	air_dim d[4] = {2, 3, RH, RH};
	air_value x = 0;
	CHECK_OK(air_graph_add_input(g, "x", AIR_F32, 4, d, &x));
	air_value s = node1(g, "relu", conv_bn(g, x, 3, RC, 3, 100));
	s = basic_block(g, s, 200);
	s = basic_block(g, s, 300);
	int64_t one[2] = {1, 1};
	air_attr os = {"output_size", AIR_ATTR_INTS, 0, 0, one, 2};
	air_value p = node(g, "adaptive_avg_pool2d", &s, 1, &os, 1);
	int64_t flat[2] = {2, RC};
	air_attr sh = {"shape", AIR_ATTR_INTS, 0, 0, flat, 2};
	air_value f = node(g, "reshape", &p, 1, &sh, 1);
	int64_t wd[2] = {5, RC}, bd[1] = {5};
	air_value lin[3] = {f, constant(g, 2, wd, 400, 0.3f), constant(g, 1, bd, 401, 0.1f)};
	out1(g, node(g, "linear", lin, 3, NULL, 0));
}

enum { BS = 7, BH = 32, BHEADS = 4, BFF = 64 };

static air_value dense(air_graph *g, air_value x, int in_f, int out_f, uint32_t seed)
{
	int64_t wd[2] = {out_f, in_f}, bd[1] = {out_f};
	air_value in[3] = {x, constant(g, 2, wd, seed, 0.2f), constant(g, 1, bd, seed + 1, 0.1f)};
	return node(g, "linear", in, 3, NULL, 0);
}

static air_value layer_norm(air_graph *g, air_value x, uint32_t seed)
{
	int64_t d[1] = {BH};
	air_value in[3] = {x, constant(g, 1, d, seed, 0.5f), constant(g, 1, d, seed + 1, 0.1f)};
	air_attr at[3] = {{"normalized_ndim", AIR_ATTR_INT, 1, 0, NULL, 0},
			  {"has_weight", AIR_ATTR_INT, 1, 0, NULL, 0},
			  {"has_bias", AIR_ATTR_INT, 1, 0, NULL, 0}};
	return node(g, "layer_norm", in, 3, at, 3);
}

static air_value heads(air_graph *g, air_value x)
{
	int64_t shape[4] = {1, BS, BHEADS, BH / BHEADS}, perm[4] = {0, 2, 1, 3};
	air_attr sh = {"shape", AIR_ATTR_INTS, 0, 0, shape, 4};
	air_attr pe = {"perm", AIR_ATTR_INTS, 0, 0, perm, 4};
	air_value r = node(g, "reshape", &x, 1, &sh, 1);
	return node(g, "permute", &r, 1, &pe, 1);
}

static air_value bert_layer(air_graph *g, air_value x, uint32_t seed)
{
	air_value qkv[3] = {heads(g, dense(g, x, BH, BH, seed)), heads(g, dense(g, x, BH, BH, seed + 2)),
			    heads(g, dense(g, x, BH, BH, seed + 4))};
	air_value a = node(g, "sdpa", qkv, 3, NULL, 0);
	int64_t perm[4] = {0, 2, 1, 3}, shape[3] = {1, BS, BH};
	air_attr pe = {"perm", AIR_ATTR_INTS, 0, 0, perm, 4};
	air_attr sh = {"shape", AIR_ATTR_INTS, 0, 0, shape, 3};
	a = node(g, "permute", &a, 1, &pe, 1);
	a = node(g, "reshape", &a, 1, &sh, 1);
	a = dense(g, a, BH, BH, seed + 6);
	air_value h = layer_norm(g, node2(g, "add", a, x), seed + 8);
	air_value f = node1(g, "gelu", dense(g, h, BH, BFF, seed + 10));
	f = dense(g, f, BFF, BH, seed + 12);
	return layer_norm(g, node2(g, "add", f, h), seed + 14);
}

static void build_bert(air_graph *g)
{
	air_dim d[3] = {1, BS, BH};
	air_value x = 0;
	CHECK_OK(air_graph_add_input(g, "x", AIR_F32, 3, d, &x));
	x = bert_layer(g, x, 500);
	out1(g, bert_layer(g, x, 600));
}

static void blocks(void)
{
	static const uint32_t flag_sets[] = {0, AIR_COMPILE_NO_FUSION, AIR_COMPILE_OP_BY_OP};
	for (size_t f = 0; f < sizeof flag_sets / sizeof flag_sets[0]; f++) {
		run_result r = same_both_ways(build_resnet, flag_sets[f], "resnet block");
		CHECK(r.info.arena_bytes < r.info.no_reuse_bytes);
		if (flag_sets[f] == AIR_COMPILE_OP_BY_OP)
			CHECK(r.info.inplace >= 5); /* relu, add, relu per block */
		free(r.out);
		r = same_both_ways(build_bert, flag_sets[f], "bert block");
		CHECK(r.info.arena_bytes < r.info.no_reuse_bytes);
		if (flag_sets[f] == AIR_COMPILE_OP_BY_OP)
			CHECK(r.info.inplace >= 2); /* the residual adds */
		free(r.out);
	}
}

int main(void)
{
	hand_made_cases();
	stress();
	inplace_cases();
	output_views();
	int ops = every_elementwise_op();
	printf("test_memplan: %d elementwise ops checked in place\n", ops);
	long_chain();
	fused_in_place();
	int lin = linear_residual(), conv = conv_residual();
	/* 0 where the op schema has no fused residual (has_residual) yet */
	printf("test_memplan: %d linear and %d conv2d residual cases\n", lin, conv);
	blocks();
	return check_report("test_memplan");
}

/* autotune.c - kernel choice by measurement (AIR_COMPILE_AUTOTUNE, torch.compile's
 * mode='max-autotune'): for a step whose sizes are all known, every kernel that can run it
 * (the op's fast kernels whose ISA is present and whose supports() accepts, and the
 * reference when no fast kernel does) is prepared and timed on this CPU with the step's
 * real constants and synthetic activations, and the fastest is kept. The default choice
 * (the first kernel that accepts, an order set by hand from measurements on a few CPUs)
 * is a candidate like the others, so tuning can only pick something measured faster.
 *
 * Choices are remembered in a text file when the compile names one (air_compile_options.
 * autotune_cache): one line per tuned step, "key<TAB>kernel", the key being the CPU's
 * brand and ISA, the op, its input dtypes, shapes and constness, its attributes and the
 * candidates' names. A second compile of the same shapes reads its choices instead of
 * timing again; a line that names no current candidate is ignored. A cache that cannot be
 * read or written changes nothing but the time the compile takes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "kernels/common/cpu.h"
#include "ops/op.h"
#include "platform/bigmem.h"
#include "platform/pool.h"
#include "runtime/model.h"

enum { AT_MAX_CANDIDATES = RT_TUNE_MAX, AT_KEY_MAX = 4096, AT_RUNS = 7 };
/* A step's timing stops after AT_RUNS rounds or this long per candidate, whichever comes first. */
#define AT_BUDGET_NS 30000000.0

static uint64_t at_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int at_cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* The cache key of a step: everything that can change which kernel wins. */
static void at_key(const ir_node *n, const k_call *call, const k_kernel *const *cand, int ncand, char *key)
{
	char brand[64];
	kcpu_brand(brand, sizeof brand);
	size_t at = 0;
#define AT_PUT(...) at += (size_t)snprintf(key + at, at < AT_KEY_MAX ? AT_KEY_MAX - at : 0, __VA_ARGS__)
	AT_PUT("%s|%s|%s|", brand, kcpu_isa_name(), op_get(n->op)->name);
	for (int i = 0; i < call->n_in; i++) {
		AT_PUT("%d%s[", (int)call->in[i].dtype, call->in_const[i] ? "c" : "");
		for (int d = 0; d < call->in[i].rank; d++)
			AT_PUT("%lld,", (long long)call->in[i].dims[d]);
		AT_PUT("]");
	}
	AT_PUT("|");
	const op_def *def = op_get(n->op);
	for (int a = 0; a < def->n_attrs; a++) {
		AT_PUT("%lld/%g", (long long)call->attrs[a].i, call->attrs[a].f);
		for (int j = 0; j < call->attrs[a].n && call->attrs[a].ints; j++)
			AT_PUT(",%lld", (long long)call->attrs[a].ints[j]);
		AT_PUT(";");
	}
	AT_PUT("|");
	for (int c = 0; c < ncand; c++)
		AT_PUT("%s,", cand[c]->name);
#undef AT_PUT
	if (at >= AT_KEY_MAX)
		key[AT_KEY_MAX - 1] = 0;
	for (char *p = key; *p; p++)
		if (*p == '\t' || *p == '\n')
			*p = ' ';
}

/* The kernel the cache file names for key, among the candidates, or -1. */
static int at_cache_lookup(const char *path, const char *key, const k_kernel *const *cand, int ncand)
{
	if (!path)
		return -1;
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	int found = -1;
	size_t klen = strlen(key);
	char *line = malloc(AT_KEY_MAX + 256);
	while (line && fgets(line, AT_KEY_MAX + 256, f)) {
		if (strncmp(line, key, klen) != 0 || line[klen] != '\t')
			continue;
		char *name = line + klen + 1;
		name[strcspn(name, "\r\n")] = 0;
		for (int c = 0; c < ncand; c++)
			if (!strcmp(cand[c]->name, name))
				found = c; /* the last line for a key wins */
	}
	free(line);
	fclose(f);
	return found;
}

static void at_cache_store(const char *path, const char *key, const char *kernel)
{
	if (!path)
		return;
	FILE *f = fopen(path, "a");
	if (!f)
		return;
	fprintf(f, "%s\t%s\n", key, kernel);
	fclose(f);
}

/* Activations to time with: values in [-1, 1) from a fixed generator, so every candidate
 * sees the same ones and no kernel meets subnormals or NaN by chance. */
static void at_fill(k_tensor *t)
{
	uint32_t x = 2463534242u;
	size_t n = (size_t)t->numel;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13, x ^= x >> 17, x ^= x << 5;
		float v = (float)(x >> 8) * (1.0f / 8388608.0f) - 1.0f;
		if (t->dtype == AIR_F32)
			((float *)t->data)[i] = v;
		else
			((double *)t->data)[i] = v;
	}
}

/* Spins every thread of the pool for a few milliseconds. Right after a pool's threads are
 * made, or after they slept, the scheduler may still have two of them on one CPU: a kernel
 * that uses the pool then runs 10-30x slower than it will in the model (measured: a Winograd
 * conv at 0.6 ms in a process's first tuned compile, 0.02 ms in the next), which would make
 * the tuner prefer whatever runs on one thread. Busy threads get spread out. */
static void at_spin_task(void *ctx, int64_t t, int thread)
{
	(void)t, (void)thread;
	uint64_t until = *(const uint64_t *)ctx;
	while (at_now_ns() < until)
		;
}

static void at_warm_pool(rt_pool *pool)
{
	int n = rt_pool_size(pool);
	for (int round = 0; round < 10 && n > 1; round++) {
		uint64_t until = at_now_ns() + 1000000; /* 1 ms */
		rt_pool_run(pool, n, at_spin_task, &until);
	}
}

/* One timed run of a candidate; UINT64_MAX if it fails. */
static uint64_t at_run_once(const k_kernel *k, k_call *call, void *prepared, void *workspace)
{
	call->prepared = prepared;
	call->workspace = workspace;
	uint64_t t0 = at_now_ns();
	air_status st = k->run(call);
	uint64_t t = at_now_ns() - t0;
	call->prepared = NULL;
	call->workspace = NULL;
	if (st != AIR_OK) {
		air_error_clear();
		return UINT64_MAX;
	}
	return t;
}

/* Times the candidates in rounds, each candidate once per round, so that a change in the
 * machine's state (another process, the frequency, where the threads run) falls on all of
 * them alike; ns[c] is candidate c's median. prepared[c] == FAILED marks one that could not
 * be prepared. */
static void *const AT_FAILED = (void *)&AT_FAILED;

static void at_time_all(const k_kernel *const *cand, int ncand, k_call *call, void **prepared, void *workspace,
			uint64_t *ns)
{
	uint64_t t[AT_MAX_CANDIDATES][AT_RUNS];
	bool live[AT_MAX_CANDIDATES];
	for (int c = 0; c < ncand; c++) {
		live[c] = prepared[c] != AT_FAILED;
		/* warm-up: caches, pages of the workspace and output */
		if (live[c] && at_run_once(cand[c], call, prepared[c], workspace) == UINT64_MAX)
			live[c] = false;
		ns[c] = UINT64_MAX;
	}
	uint64_t start = at_now_ns();
	int runs = 0;
	while (runs < AT_RUNS) {
		for (int c = 0; c < ncand; c++)
			if (live[c] && (t[c][runs] = at_run_once(cand[c], call, prepared[c], workspace)) == UINT64_MAX)
				live[c] = false;
		runs++;
		if ((double)(at_now_ns() - start) > AT_BUDGET_NS * ncand && runs >= 3)
			break;
	}
	for (int c = 0; c < ncand; c++) {
		if (!live[c])
			continue;
		qsort(t[c], (size_t)runs, sizeof t[c][0], at_cmp_u64);
		ns[c] = t[c][runs / 2];
	}
}

/* Can this step be timed? Every size known, every non-constant input a float tensor (an
 * index tensor filled with noise would not be a valid call), something to choose from. */
static bool at_tunable(const k_call *call)
{
	for (int i = 0; i < call->n_in; i++) {
		if (call->in[i].numel < 0)
			return false;
		if (!call->in_const[i] && call->in[i].dtype != AIR_F32 && call->in[i].dtype != AIR_F64)
			return false;
	}
	for (int o = 0; o < call->n_out; o++)
		if (call->out[o].numel < 0)
			return false;
	return true;
}

air_status rt_autotune_step(air_model *m, int s, k_call *call, const k_kernel *const *cand, int ncand,
			    rt_tune_result *res)
{
	const ir_node *n = &m->g->nodes[m->steps[s].node];
	memset(res, 0, sizeof *res);
	if (ncand > AT_MAX_CANDIDATES)
		ncand = AT_MAX_CANDIDATES;
	res->n = ncand;
	for (int c = 0; c < ncand; c++)
		res->names[c] = cand[c]->name;
	if (ncand < 2 || !at_tunable(call))
		return AIR_OK;
	char *key = malloc(AT_KEY_MAX);
	if (!key)
		return air_error(AIR_OUT_OF_MEMORY, "autotune: no memory");
	at_key(n, call, cand, ncand, key);
	int cached = at_cache_lookup(m->autotune_cache, key, cand, ncand);
	if (cached >= 0) {
		res->chosen = cached;
		res->from_cache = true;
		res->tuned = true;
		free(key);
		return AIR_OK;
	}
	/* bind synthetic activations and outputs; constants keep their data */
	void *bufs[OP_MAX_IN + OP_MAX_OUT] = {0};
	k_tensor *in = (k_tensor *)call->in, *out = (k_tensor *)call->out;
	air_status st = AIR_OK;
	for (int i = 0; i < call->n_in && st == AIR_OK; i++) {
		if (call->in_const[i])
			continue;
		size_t bytes = (size_t)in[i].numel * air_dtype_size(in[i].dtype);
		in[i].data = bufs[i] = rt_big_alloc(bytes ? bytes : 64, 64);
		if (!in[i].data)
			st = air_error(AIR_OUT_OF_MEMORY, "autotune: no memory for input %d", i);
		else
			at_fill(&in[i]);
	}
	for (int o = 0; o < call->n_out && st == AIR_OK; o++) {
		size_t bytes = (size_t)out[o].numel * air_dtype_size(out[o].dtype);
		out[o].data = bufs[OP_MAX_IN + o] = rt_big_alloc(bytes ? bytes : 64, 64);
		if (!out[o].data)
			st = air_error(AIR_OUT_OF_MEMORY, "autotune: no memory for output %d", o);
	}
	int nthreads = rt_pool_size(m->pool);
	call->pool = m->pool;
	uint64_t t0 = at_now_ns();
	void *prepared[AT_MAX_CANDIDATES];
	size_t ws = 0;
	for (int c = 0; c < ncand; c++) {
		prepared[c] = NULL;
		if (st != AIR_OK)
			continue;
		if (cand[c]->prepare) {
			/* prepare sees only the constants, as at compile time */
			for (int i = 0; i < call->n_in; i++)
				if (!call->in_const[i])
					in[i].data = NULL;
			air_status r = cand[c]->prepare(call, &prepared[c]);
			for (int i = 0; i < call->n_in; i++)
				if (!call->in_const[i])
					in[i].data = bufs[i];
			if (r != AIR_OK) {
				air_error_clear();
				prepared[c] = AT_FAILED;
				continue;
			}
		}
		call->prepared = prepared[c]; /* workspace() reads it */
		size_t w = cand[c]->workspace ? cand[c]->workspace(call, nthreads) : 0;
		call->prepared = NULL;
		ws = w > ws ? w : ws;
	}
	void *wsp = ws ? rt_big_alloc(ws, 64) : NULL;
	if (st == AIR_OK && ws && !wsp)
		st = air_error(AIR_OUT_OF_MEMORY, "autotune: no memory for a workspace of %zu bytes", ws);
	if (st == AIR_OK) {
		at_warm_pool(m->pool);
		at_time_all(cand, ncand, call, prepared, wsp, res->ns);
		for (int c = 1; c < ncand; c++)
			if (res->ns[c] < res->ns[res->chosen])
				res->chosen = c;
	}
	free(wsp);
	for (int c = 0; c < ncand; c++)
		if (prepared[c] && prepared[c] != AT_FAILED && cand[c]->release)
			cand[c]->release(prepared[c]);
	res->tuning_ns = at_now_ns() - t0;
	for (int i = 0; i < call->n_in; i++)
		if (!call->in_const[i])
			in[i].data = NULL;
	for (int o = 0; o < call->n_out; o++)
		out[o].data = NULL;
	for (int b = 0; b < OP_MAX_IN + OP_MAX_OUT; b++)
		free(bufs[b]);
	call->prepared = NULL;
	if (st == AIR_OK) {
		res->tuned = res->ns[res->chosen] != UINT64_MAX;
		if (res->tuned)
			at_cache_store(m->autotune_cache, key, cand[res->chosen]->name);
	}
	free(key);
	return st;
}

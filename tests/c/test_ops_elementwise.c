/* test_ops_elementwise.c - every elementwise op (the elementwise section of
 * ops/optable.h) through the public API against values computed here, in
 * double for floats (with a tolerance for f32 transcendentals) and exactly
 * for integers and bools:
 *   - unary float ops on f32/f64 at awkward sizes (0-d, 1, 7, 17, empty,
 *     1000003 for a few) with NaN/Inf/±0 and large magnitudes;
 *   - integer unary ops on every integer dtype at the edges (min, max);
 *   - binary ops on every dtype they claim, with broadcasting ([3,1,5] with
 *     [1,4,1], 0-d with [n], [n] with [m,n], empty), constant operands and
 *     symbolic sizes; NaN rules as PyTorch (maximum/minimum propagate NaN,
 *     comparisons with NaN false), Python semantics of floor_divide and
 *     remainder with negative operands, integer division by zero and
 *     negative integer powers as AIR_INVALID_ARGUMENT at run time;
 *   - clamp (NaN kept, min > max gives max), leaky_relu, elu, where on 1-, 2-, 4-
 *     and 8-byte dtypes;
 *   - cast between all dtype pairs, f16/bf16 rounding and exhaustive
 *     round trips, float -> int out of range without UB;
 *   - build errors (dtypes an op does not take).
 * Each model is compiled with the default kernels and with the reference
 * kernels only, and both are checked. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "op_harness.h"

/* ---- values of any dtype ------------------------------------------------ */

static bool is_fp(air_dtype dt)
{
	return dt == AIR_F32 || dt == AIR_F64;
}

/* v wrapped into an integer dtype (two's complement), or 0/1 for bool */
static int64_t wrap_to(air_dtype dt, uint64_t u)
{
	switch (dt) {
	case AIR_I64: return (int64_t)u;
	case AIR_I32: return (int32_t)(uint32_t)u;
	case AIR_I16: return (int16_t)(uint16_t)u;
	case AIR_I8: return (int8_t)(uint8_t)u;
	case AIR_U8: return (uint8_t)u;
	case AIR_BOOL: return u != 0;
	default: return 0;
	}
}

/* Test-side f16/bf16 decoding (independent of kernels/common/half.h). */
static double f16_value(uint16_t h)
{
	int sign = h >> 15, e = (h >> 10) & 31, m = h & 1023;
	double v;
	if (e == 31)
		v = m ? NAN : INFINITY;
	else if (e == 0)
		v = ldexp(m, -24);
	else
		v = ldexp(1024 + m, e - 25);
	return sign ? -v : v;
}

static double bf16_value(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, 4);
	return f;
}

/* Encodes a value exactly representable in f16 (the tests only use such). */
static uint16_t f16_exact(double v)
{
	uint16_t sign = signbit(v) ? 0x8000 : 0;
	v = fabs(v);
	if (isnan(v))
		return 0x7e00;
	if (isinf(v))
		return sign | 0x7c00;
	if (v == 0)
		return sign;
	int e;
	double f = frexp(v, &e); /* v = f * 2^e, f in [0.5, 1) */
	if (e - 1 < -14)
		return sign | (uint16_t)ldexp(v, 24);
	return sign | (uint16_t)((e - 1 + 15) << 10) | (uint16_t)(ldexp(f, 11) - 1024);
}

static uint16_t bf16_exact(double v)
{
	float f = (float)v;
	uint32_t u;
	memcpy(&u, &f, 4);
	return (uint16_t)(u >> 16);
}

/* A buffer of n values of dt: floats from fv, integers and bools from iv.
 * NULL when n is 0: empty tensors may be bound without data. */
static void *pack(air_dtype dt, const double *fv, const int64_t *iv, int64_t n)
{
	if (n == 0)
		return NULL;
	size_t es = air_dtype_size(dt);
	char *p = malloc(es * (size_t)(n > 0 ? n : 1));
	for (int64_t i = 0; i < n; i++) {
		switch (dt) {
		case AIR_F32: ((float *)p)[i] = (float)fv[i]; break;
		case AIR_F64: ((double *)p)[i] = fv[i]; break;
		case AIR_F16: ((uint16_t *)p)[i] = f16_exact(fv[i]); break;
		case AIR_BF16: ((uint16_t *)p)[i] = bf16_exact(fv[i]); break;
		case AIR_I64: ((int64_t *)p)[i] = iv[i]; break;
		case AIR_I32: ((int32_t *)p)[i] = (int32_t)wrap_to(dt, (uint64_t)iv[i]); break;
		case AIR_I16: ((int16_t *)p)[i] = (int16_t)wrap_to(dt, (uint64_t)iv[i]); break;
		case AIR_I8: ((int8_t *)p)[i] = (int8_t)wrap_to(dt, (uint64_t)iv[i]); break;
		case AIR_U8: ((uint8_t *)p)[i] = (uint8_t)wrap_to(dt, (uint64_t)iv[i]); break;
		case AIR_BOOL: ((uint8_t *)p)[i] = iv[i] != 0; break;
		default: break;
		}
	}
	return p;
}

static double get_f(const void *p, air_dtype dt, int64_t i)
{
	switch (dt) {
	case AIR_F32: return ((const float *)p)[i];
	case AIR_F64: return ((const double *)p)[i];
	case AIR_F16: return f16_value(((const uint16_t *)p)[i]);
	case AIR_BF16: return bf16_value(((const uint16_t *)p)[i]);
	case AIR_I64: return (double)((const int64_t *)p)[i];
	case AIR_I32: return ((const int32_t *)p)[i];
	case AIR_I16: return ((const int16_t *)p)[i];
	case AIR_I8: return ((const int8_t *)p)[i];
	case AIR_U8: case AIR_BOOL: return ((const uint8_t *)p)[i];
	default: return 0;
	}
}

static int64_t get_i(const void *p, air_dtype dt, int64_t i)
{
	switch (dt) {
	case AIR_I64: return ((const int64_t *)p)[i];
	case AIR_I32: return ((const int32_t *)p)[i];
	case AIR_I16: return ((const int16_t *)p)[i];
	case AIR_I8: return ((const int8_t *)p)[i];
	case AIR_U8: case AIR_BOOL: return ((const uint8_t *)p)[i];
	case AIR_F16: case AIR_BF16: return ((const uint16_t *)p)[i];
	default: return 0;
	}
}

static int64_t int_min(air_dtype dt)
{
	switch (dt) {
	case AIR_I64: return INT64_MIN;
	case AIR_I32: return INT32_MIN;
	case AIR_I16: return INT16_MIN;
	case AIR_I8: return INT8_MIN;
	default: return 0;
	}
}

static int64_t int_max(air_dtype dt)
{
	switch (dt) {
	case AIR_I64: return INT64_MAX;
	case AIR_I32: return INT32_MAX;
	case AIR_I16: return INT16_MAX;
	case AIR_I8: return INT8_MAX;
	case AIR_U8: return 255;
	case AIR_BOOL: return 1;
	default: return 0;
	}
}

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint64_t next_u64(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static double uniform(double lo, double hi)
{
	return lo + (hi - lo) * (double)(next_u64() >> 11) / 9007199254740992.0;
}

/* a random integer of dt: mostly small, sometimes the type's edges */
static int64_t rand_int(air_dtype dt)
{
	uint64_t r = next_u64();
	switch (r % 8) {
	case 0: return int_min(dt);
	case 1: return int_max(dt);
	case 2: return 0;
	case 3: return dt == AIR_U8 ? 1 : -1;
	case 4: return wrap_to(dt, next_u64());
	default: return wrap_to(dt, (uint64_t)((int64_t)(next_u64() % 41) - 20));
	}
}

static int64_t numel_of(int rank, const int64_t *dims)
{
	int64_t n = 1;
	for (int i = 0; i < rank; i++)
		n *= dims[i];
	return n;
}

/* the element of an input of (rank, dims) that output element lin reads
 * when broadcast to (orank, odims) */
static int64_t bcast_index(int orank, const int64_t *odims, int64_t lin, int rank, const int64_t *dims)
{
	int64_t idx = 0, stride = 1;
	for (int d = orank - 1; d >= 0; d--) {
		int64_t i = lin % odims[d];
		lin /= odims[d];
		int id = d - (orank - rank);
		if (id >= 0) {
			if (dims[id] != 1)
				idx += i * stride;
			stride *= dims[id];
		}
	}
	return idx;
}

/* ---- running one op ------------------------------------------------------ */

static const uint32_t FLAG_SETS[2] = {0, AIR_COMPILE_REFERENCE_KERNELS};

/* Runs op on args with both flag sets; calls check(result, ctx) for each.
 * Returns false (with a failed check) if anything fails to build or run. */
typedef void (*check_fn)(const void *got, int rank, const int64_t *dims, void *ctx);

static bool run_both(const char *op, const th_arg *args, int n, const air_attr *attrs, int na, check_fn check,
		     void *ctx, int n_flag_sets)
{
	bool ok = true;
	for (int f = 0; f < n_flag_sets; f++) {
		air_model *m = th_compile(op, args, n, attrs, na, FLAG_SETS[f]);
		if (!m) {
			fprintf(stderr, "  (op %s)\n", op);
			return false;
		}
		int rank;
		int64_t dims[AIR_MAX_RANK];
		void *got = th_run(m, args, n, &rank, dims);
		if (got)
			check(got, rank, dims, ctx);
		else
			ok = false;
		free(got);
		air_model_destroy(m);
	}
	return ok;
}

/* Output expected as doubles (floats) or int64s (integers, bools). */
typedef struct expect {
	const char *label;
	air_dtype dt;
	int rank;
	int64_t dims[AIR_MAX_RANK];
	int64_t n;
	const double *fv;
	const int64_t *iv;
	double tol_rel, tol_abs;
} expect;

static void check_expect(const void *got, int rank, const int64_t *dims, void *p)
{
	const expect *e = p;
	check_count++;
	bool shape_ok = rank == e->rank;
	for (int d = 0; shape_ok && d < rank; d++)
		shape_ok = dims[d] == e->dims[d];
	if (!shape_ok) {
		check_failures++;
		fprintf(stderr, "%s: output rank %d, want %d (or dims differ)\n", e->label, rank, e->rank);
		return;
	}
	int bad = 0;
	for (int64_t i = 0; i < e->n; i++) {
		bool ok;
		if (is_fp(e->dt) || e->dt == AIR_F16 || e->dt == AIR_BF16) {
			double g = get_f(got, e->dt, i), w = e->fv[i];
			if (isnan(w) || isinf(w))
				ok = isnan(w) ? isnan(g) : g == w;
			else
				ok = fabs(g - w) <= e->tol_abs + e->tol_rel * fabs(w);
			if (!ok && bad < 5)
				fprintf(stderr, "%s: element %lld is %.9g, want %.9g\n", e->label, (long long)i, g, w);
		} else {
			int64_t g = get_i(got, e->dt, i), w = e->iv[i];
			ok = g == w;
			if (!ok && bad < 5)
				fprintf(stderr, "%s: element %lld is %lld, want %lld\n", e->label, (long long)i,
					(long long)g, (long long)w);
		}
		bad += !ok;
	}
	if (bad) {
		check_failures++;
		fprintf(stderr, "%s: %d of %lld elements differ\n", e->label, bad, (long long)e->n);
	}
}

/* Expects running op on args to fail at run time with want (both flag sets). */
static void expect_run_error(const char *op, const th_arg *args, int n, air_status want, const char *needle,
			     const char *label)
{
	for (int f = 0; f < 2; f++) {
		air_model *m = th_compile(op, args, n, NULL, 0, FLAG_SETS[f]);
		if (!m)
			return;
		int rank;
		int64_t dims[AIR_MAX_RANK];
		air_status st = AIR_OK;
		void *got = th_run_status(m, args, n, &rank, dims, &st);
		free(got);
		check_count++;
		if (st != want || !strstr(air_last_error(), needle)) {
			check_failures++;
			fprintf(stderr, "%s: want %s mentioning '%s', got %s: '%s'\n", label, air_status_string(want),
				needle, air_status_string(st), air_last_error());
		}
		air_model_destroy(m);
	}
}

/* ---- unary float ops ---------------------------------------------------- */

static double relu6(double x)
{
	return x < 0 ? 0 : (x > 6 ? 6 : x);
}
static double r_neg(double x) { return -x; }
static double r_rsqrt(double x) { return 1.0 / sqrt(x); }
static double r_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
static double r_relu(double x) { return x < 0 ? 0 : x; }
static double r_gelu(double x) { return 0.5 * x * (1.0 + erf(x / sqrt(2.0))); }
static double r_gelu_tanh(double x)
{
	return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}
static double r_silu(double x) { return x * r_sigmoid(x); }
static double r_hardswish(double x) { return x * relu6(x + 3.0) / 6.0; }
static double r_hardsigmoid(double x) { return relu6(x + 3.0) / 6.0; }
static double r_reciprocal(double x) { return 1.0 / x; }
/* torch.sign: 0 for NaN (and for ±0) */
static double r_sign(double x) { return (double)((x > 0) - (x < 0)); }
static double r_round(double x) { return nearbyint(x); }

typedef struct unary_op {
	const char *name;
	double (*f)(double);
	double lo, hi; /* random inputs in [lo, hi] */
} unary_op;

static const unary_op unary_ops[] = {
	{"neg", r_neg, -5, 5},
	{"abs", fabs, -5, 5},
	{"exp", exp, -20, 20},
	{"log", log, 1e-3, 10},
	{"log1p", log1p, -0.99, 10},
	{"expm1", expm1, -5, 5},
	{"sqrt", sqrt, 0, 10},
	{"rsqrt", r_rsqrt, 1e-3, 10},
	{"sin", sin, -7, 7},
	{"cos", cos, -7, 7},
	{"tanh", tanh, -5, 5},
	{"sigmoid", r_sigmoid, -10, 10},
	{"erf", erf, -4, 4},
	{"relu", r_relu, -5, 5},
	{"gelu", r_gelu, -6, 6},
	{"gelu_tanh", r_gelu_tanh, -6, 6},
	{"silu", r_silu, -8, 8},
	{"hardswish", r_hardswish, -5, 5},
	{"hardsigmoid", r_hardsigmoid, -5, 5},
	{"reciprocal", r_reciprocal, -10, 10},
	{"floor", floor, -10, 10},
	{"ceil", ceil, -10, 10},
	{"round", r_round, -10, 10},
	{"trunc", trunc, -10, 10},
	{"sign", r_sign, -3, 3},
};

/* NaN, infinities, zeros, halves, values where f32 overflows/underflows */
static const double specials[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, -1.5, 2.5,
				  -2.5, 1e30, -1e30, 88.8, -88.8, 100.0, -100.0, 3.0, -3.0, 1e-3};
enum { N_SPECIALS = sizeof specials / sizeof specials[0] };

static void test_unary_float(void)
{
	static const struct {
		int rank;
		int64_t dims[3];
	} shapes[] = {{0, {0}}, {1, {1}}, {1, {7}}, {1, {17}}, {2, {3, 0}}, {3, {2, 3, 5}}, {1, {N_SPECIALS}}};
	for (size_t k = 0; k < sizeof unary_ops / sizeof unary_ops[0]; k++) {
		const unary_op *u = &unary_ops[k];
		for (int di = 0; di < 2; di++) {
			air_dtype dt = di ? AIR_F64 : AIR_F32;
			for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
				int rank = shapes[s].rank;
				int64_t n = numel_of(rank, shapes[s].dims);
				bool special = s == sizeof shapes / sizeof shapes[0] - 1;
				double *x = malloc(sizeof(double) * (size_t)(n + 1));
				double *w = malloc(sizeof(double) * (size_t)(n + 1));
				for (int64_t i = 0; i < n; i++) {
					x[i] = special ? specials[i] : uniform(u->lo, u->hi);
					if (dt == AIR_F32)
						x[i] = (float)x[i];
					w[i] = u->f(x[i]);
					if (dt == AIR_F32)
						w[i] = (float)w[i];
				}
				void *xd = pack(dt, x, NULL, n);
				th_arg a = th_make(dt, xd, rank, shapes[s].dims);
				char label[96];
				snprintf(label, sizeof label, "%s %s shape#%zu", u->name, air_dtype_name(dt), s);
				expect e = {label, dt, rank, {0}, n, w, NULL, dt == AIR_F32 ? 4e-6 : 1e-13,
					    dt == AIR_F32 ? 2e-6 : 1e-15};
				memcpy(e.dims, shapes[s].dims, sizeof shapes[s].dims);
				run_both(u->name, &a, 1, NULL, 0, check_expect, &e, 2);
				free(xd);
				free(x);
				free(w);
			}
		}
	}
	/* exact values where rounding rules matter (from torch) */
	const double rx[] = {0.5, 1.5, 2.5, -0.5, -2.5, 3.5, 0.49999997, -1.5, 1e30, -7.0};
	const double round_w[] = {0, 2, 2, -0.0, -2, 4, 0, -2, 1e30, -7};
	const double floor_w[] = {0, 1, 2, -1, -3, 3, 0, -2, 1e30, -7};
	const double ceil_w[] = {1, 2, 3, -0.0, -2, 4, 1, -1, 1e30, -7};
	const double trunc_w[] = {0, 1, 2, -0.0, -2, 3, 0, -1, 1e30, -7};
	const struct {
		const char *op;
		const double *w;
	} rounding[] = {{"round", round_w}, {"floor", floor_w}, {"ceil", ceil_w}, {"trunc", trunc_w}};
	for (int di = 0; di < 2; di++) {
		air_dtype dt = di ? AIR_F64 : AIR_F32;
		void *xd = pack(dt, rx, NULL, 10);
		int64_t dims[1] = {10};
		th_arg a = th_make(dt, xd, 1, dims);
		for (int r = 0; r < 4; r++) {
			double w[10];
			for (int i = 0; i < 10; i++)
				w[i] = dt == AIR_F32 ? (float)rounding[r].w[i] : rounding[r].w[i];
			expect e = {rounding[r].op, dt, 1, {10}, 10, w, NULL, 0, 0};
			run_both(rounding[r].op, &a, 1, NULL, 0, check_expect, &e, 2);
		}
		free(xd);
	}
	/* a few ops on a large tensor: every thread's part is written */
	const char *big_ops[] = {"relu", "exp", "sigmoid"};
	int64_t n = 1000003;
	double *x = malloc(sizeof(double) * (size_t)n), *w = malloc(sizeof(double) * (size_t)n);
	for (int k = 0; k < 3; k++) {
		const unary_op *u = NULL;
		for (size_t j = 0; j < sizeof unary_ops / sizeof unary_ops[0]; j++)
			if (!strcmp(unary_ops[j].name, big_ops[k]))
				u = &unary_ops[j];
		for (int64_t i = 0; i < n; i++) {
			x[i] = (float)uniform(-5, 5);
			w[i] = (float)u->f(x[i]);
		}
		void *xd = pack(AIR_F32, x, NULL, n);
		th_arg a = th_make(AIR_F32, xd, 1, &n);
		expect e = {big_ops[k], AIR_F32, 1, {n}, n, w, NULL, 4e-6, 2e-6};
		run_both(u->name, &a, 1, NULL, 0, check_expect, &e, 1);
		free(xd);
	}
	free(x);
	free(w);
}

/* ---- unary ops on integers and bools ------------------------------------ */

static const air_dtype INT_TYPES[] = {AIR_I64, AIR_I32, AIR_I16, AIR_I8, AIR_U8};

static void test_unary_int(void)
{
	enum { N = 40 };
	for (size_t t = 0; t < sizeof INT_TYPES / sizeof INT_TYPES[0]; t++) {
		air_dtype dt = INT_TYPES[t];
		int64_t x[N], w[N];
		for (int i = 0; i < N; i++)
			x[i] = i < 6 ? (int64_t[]){int_min(dt), int_max(dt), 0, 1, wrap_to(dt, (uint64_t)-1), 2}[i]
				     : rand_int(dt);
		void *xd = pack(dt, NULL, x, N);
		int64_t dims[2] = {5, 8};
		th_arg a = th_make(dt, xd, 2, dims);
		char label[64];
		const char *ops[] = {"neg", "abs", "relu", "sign", "bitwise_not"};
		for (int k = 0; k < 5; k++) {
			for (int i = 0; i < N; i++) {
				uint64_t u = (uint64_t)x[i];
				switch (k) {
				case 0: w[i] = wrap_to(dt, -u); break;
				case 1: w[i] = wrap_to(dt, x[i] < 0 ? -u : u); break;
				case 2: w[i] = x[i] < 0 ? 0 : x[i]; break;
				case 3: w[i] = (x[i] > 0) - (x[i] < 0); break;
				case 4: w[i] = wrap_to(dt, ~u); break;
				}
			}
			snprintf(label, sizeof label, "%s %s", ops[k], air_dtype_name(dt));
			expect e = {label, dt, 2, {5, 8}, N, NULL, w, 0, 0};
			run_both(ops[k], &a, 1, NULL, 0, check_expect, &e, 2);
		}
		/* to bool */
		for (int i = 0; i < N; i++)
			w[i] = x[i] == 0;
		snprintf(label, sizeof label, "logical_not %s", air_dtype_name(dt));
		expect e = {label, AIR_BOOL, 2, {5, 8}, N, NULL, w, 0, 0};
		run_both("logical_not", &a, 1, NULL, 0, check_expect, &e, 2);
		for (int i = 0; i < N; i++)
			w[i] = 0;
		snprintf(label, sizeof label, "isnan %s", air_dtype_name(dt));
		e.label = label;
		run_both("isnan", &a, 1, NULL, 0, check_expect, &e, 2);
		/* clamp with integer-valued bounds */
		air_attr ca[4] = {th_float("min", -3), th_float("max", 7), th_int("has_min", 1), th_int("has_max", 1)};
		for (int i = 0; i < N; i++)
			w[i] = x[i] < -3 ? -3 : x[i] > 7 ? 7 : x[i];
		snprintf(label, sizeof label, "clamp %s", air_dtype_name(dt));
		expect ce = {label, dt, 2, {5, 8}, N, NULL, w, 0, 0};
		run_both("clamp", &a, 1, ca, 4, check_expect, &ce, 2);
		free(xd);
		/* empty, without data */
		int64_t empty[2] = {0, 4};
		th_arg ae = th_make(dt, NULL, 2, empty);
		const char *all[] = {"neg", "abs", "relu", "sign", "bitwise_not", "logical_not", "isnan"};
		for (int k = 0; k < 7; k++) {
			expect ee = {all[k], k < 5 ? dt : AIR_BOOL, 2, {0, 4}, 0, NULL, w, 0, 0};
			run_both(all[k], &ae, 1, NULL, 0, check_expect, &ee, 2);
		}
	}
	/* bool: logical_not, bitwise_not, isnan */
	enum { NB = 23 };
	int64_t b[NB], w[NB];
	for (int i = 0; i < NB; i++)
		b[i] = (i * 7 + i / 3) % 2;
	void *bd = pack(AIR_BOOL, NULL, b, NB);
	int64_t nb = NB;
	th_arg a = th_make(AIR_BOOL, bd, 1, &nb);
	for (int i = 0; i < NB; i++)
		w[i] = !b[i];
	expect e = {"logical_not bool", AIR_BOOL, 1, {NB}, NB, NULL, w, 0, 0};
	run_both("logical_not", &a, 1, NULL, 0, check_expect, &e, 2);
	e.label = "bitwise_not bool";
	run_both("bitwise_not", &a, 1, NULL, 0, check_expect, &e, 2);
	for (int i = 0; i < NB; i++)
		w[i] = 0;
	e.label = "isnan bool";
	run_both("isnan", &a, 1, NULL, 0, check_expect, &e, 2);
	free(bd);

	/* floats to bool */
	for (int di = 0; di < 2; di++) {
		air_dtype dt = di ? AIR_F64 : AIR_F32;
		void *xd = pack(dt, specials, NULL, N_SPECIALS);
		int64_t n = N_SPECIALS;
		th_arg fa = th_make(dt, xd, 1, &n);
		int64_t wn[N_SPECIALS], wz[N_SPECIALS];
		for (int i = 0; i < N_SPECIALS; i++) {
			wn[i] = isnan(specials[i]);
			wz[i] = specials[i] == 0; /* NaN is not zero */
		}
		expect en = {"isnan float", AIR_BOOL, 1, {n}, n, NULL, wn, 0, 0};
		run_both("isnan", &fa, 1, NULL, 0, check_expect, &en, 2);
		expect ez = {"logical_not float", AIR_BOOL, 1, {n}, n, NULL, wz, 0, 0};
		run_both("logical_not", &fa, 1, NULL, 0, check_expect, &ez, 2);
		free(xd);
	}
}

/* ---- clamp and leaky_relu ------------------------------------------------ */

static void test_clamp(void)
{
	for (int di = 0; di < 2; di++) {
		air_dtype dt = di ? AIR_F64 : AIR_F32;
		int64_t n = N_SPECIALS;
		void *xd = pack(dt, specials, NULL, n);
		th_arg a = th_make(dt, xd, 1, &n);
		double w[N_SPECIALS];
		const struct {
			double lo, hi;
			int has_lo, has_hi;
		} cases[] = {{-1, 2, 1, 1}, {0.5, 0, 1, 0}, {0, -0.5, 0, 1}, {0, 0, 0, 0}, {3, 1, 1, 1}, {2, 2, 1, 1}};
		for (int c = 0; c < 6; c++) {
			for (int i = 0; i < n; i++) {
				double x = specials[i], lo = cases[c].lo, hi = cases[c].hi;
				/* torch: min(max(x, lo), hi) with NaN kept, so hi wins when lo > hi */
				double y = x;
				if (!isnan(y) && cases[c].has_lo && y < lo)
					y = lo;
				if (!isnan(y) && cases[c].has_hi && y > hi)
					y = hi;
				w[i] = dt == AIR_F32 ? (float)y : y;
			}
			air_attr ca[4] = {th_float("min", cases[c].lo), th_float("max", cases[c].hi),
					  th_int("has_min", cases[c].has_lo), th_int("has_max", cases[c].has_hi)};
			char label[64];
			snprintf(label, sizeof label, "clamp %s case %d", air_dtype_name(dt), c);
			expect e = {label, dt, 1, {n}, n, w, NULL, 0, 0};
			run_both("clamp", &a, 1, ca, 4, check_expect, &e, 2);
		}
		/* leaky_relu: default slope 0.01 and a given one; NaN kept */
		for (int c = 0; c < 2; c++) {
			double slope = c ? 0.2 : 0.01;
			for (int i = 0; i < n; i++) {
				double x = dt == AIR_F32 ? (float)specials[i] : specials[i];
				double y = x < 0 ? x * (dt == AIR_F32 ? (double)(float)slope : slope) : x;
				w[i] = dt == AIR_F32 ? (float)y : y;
			}
			air_attr la = th_float("negative_slope", slope);
			expect e = {"leaky_relu", dt, 1, {n}, n, w, NULL, dt == AIR_F32 ? 1e-6 : 1e-15, 0};
			run_both("leaky_relu", &a, 1, &la, c, check_expect, &e, 2);
		}
		/* elu: defaults (alpha = scale = input_scale = 1) and SELU's constants */
		for (int c = 0; c < 2; c++) {
			double al = c ? 1.6732632423543772 : 1.0, sc = c ? 1.0507009873554805 : 1.0, is = c ? 0.5 : 1.0;
			for (int i = 0; i < n; i++) {
				double x = dt == AIR_F32 ? (float)specials[i] : specials[i];
				double y = x > 0 ? x * sc : expm1(x * is) * al * sc;
				w[i] = dt == AIR_F32 ? (float)y : y;
			}
			air_attr ea[3] = {th_float("alpha", al), th_float("scale", sc), th_float("input_scale", is)};
			expect e = {"elu", dt, 1, {n}, n, w, NULL, dt == AIR_F32 ? 1e-6 : 1e-15, 0};
			run_both("elu", &a, 1, ea, c ? 3 : 0, check_expect, &e, 2);
		}
		/* elu near 0, where expm1 is not exp - 1 (the fast kernel switches
		 * at |t| = 0.35), and across the switch: relative error per element */
		enum { NE = 1201 };
		double xs[NE], we[NE];
		for (int i = 0; i < NE; i++) {
			xs[i] = i < 600 ? -4.0 + i * (4.0 / 600) : (i < 1200 ? -pow(10.0, -1.0 - (i - 600) * (7.0 / 600)) : 0.5);
			if (dt == AIR_F32)
				xs[i] = (float)xs[i];
			double y = xs[i] > 0 ? xs[i] : expm1(xs[i]);
			we[i] = dt == AIR_F32 ? (float)y : y;
		}
		void *ed = pack(dt, xs, NULL, NE);
		int64_t ne = NE;
		th_arg ea1 = th_make(dt, ed, 1, &ne);
		expect e2 = {"elu near 0", dt, 1, {NE}, NE, we, NULL, dt == AIR_F32 ? 4e-7 : 1e-15, 0};
		run_both("elu", &ea1, 1, NULL, 0, check_expect, &e2, 2);
		free(ed);
		free(xd);
	}
	/* integer clamp with min > max: all max */
	int64_t x[5] = {1, 5, 10, -100, 100}, w[5] = {3, 3, 3, 3, 3};
	for (size_t t = 0; t < sizeof INT_TYPES / sizeof INT_TYPES[0]; t++) {
		void *xd = pack(INT_TYPES[t], NULL, x, 5);
		int64_t n = 5;
		th_arg a = th_make(INT_TYPES[t], xd, 1, &n);
		air_attr ca[4] = {th_float("min", 7), th_float("max", 3), th_int("has_min", 1), th_int("has_max", 1)};
		expect e = {"clamp int min > max", INT_TYPES[t], 1, {5}, 5, NULL, w, 0, 0};
		run_both("clamp", &a, 1, ca, 4, check_expect, &e, 2);
		free(xd);
	}
}

/* ---- binary ops --------------------------------------------------------- */

enum { K_NUM = 1, K_FLOAT_ONLY = 2, K_BOOL_OUT = 4, K_BITWISE = 8, K_DIVLIKE = 16, K_POW = 32 };

static double f_add(double a, double b) { return a + b; }
static double f_sub(double a, double b) { return a - b; }
static double f_mul(double a, double b) { return a * b; }
static double f_div(double a, double b) { return a / b; }
/* torch's floor division for floats (Python semantics, computed from fmod
 * so that e.g. 1 // 0.1 is 9 like Python, not floor(1 / 0.1) = 10) */
static double f_floordiv(double a, double b)
{
	if (b == 0)
		return a / b;
	double mod = fmod(a, b), div = (a - mod) / b;
	if (mod != 0 && (b < 0) != (mod < 0))
		div -= 1;
	if (div == 0)
		return copysign(0.0, a / b);
	double fl = floor(div);
	if (div - fl > 0.5)
		fl += 1;
	return fl;
}
static double f_remainder(double a, double b)
{
	double r = fmod(a, b);
	if (r != 0 && (r < 0) != (b < 0))
		r += b;
	return r;
}
static double f_fmod(double a, double b) { return fmod(a, b); }
static double f_pow(double a, double b) { return pow(a, b); }
static double f_max(double a, double b) { return isnan(a) || isnan(b) ? NAN : a > b ? a : b; }
static double f_min(double a, double b) { return isnan(a) || isnan(b) ? NAN : a < b ? a : b; }
static double f_eq(double a, double b) { return a == b; }
static double f_ne(double a, double b) { return a != b; }
static double f_lt(double a, double b) { return a < b; }
static double f_le(double a, double b) { return a <= b; }
static double f_gt(double a, double b) { return a > b; }
static double f_ge(double a, double b) { return a >= b; }
static double f_land(double a, double b) { return a != 0 && b != 0; }
static double f_lor(double a, double b) { return a != 0 || b != 0; }
static double f_lxor(double a, double b) { return (a != 0) != (b != 0); }

/* integer versions: a and b are values of dt, the result is wrapped */
static int64_t i_floordiv(int64_t a, int64_t b)
{
	if (b == -1)
		return (int64_t)(-(uint64_t)a);
	int64_t q = a / b;
	if (a % b != 0 && ((a < 0) != (b < 0)))
		q--;
	return q;
}
static int64_t i_remainder(int64_t a, int64_t b)
{
	if (b == -1)
		return 0;
	int64_t r = a % b;
	if (r != 0 && ((r < 0) != (b < 0)))
		r += b;
	return r;
}
static int64_t i_op(const char *op, int64_t a, int64_t b, air_dtype dt)
{
	uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
	if (!strcmp(op, "add")) return wrap_to(dt, ua + ub);
	if (!strcmp(op, "sub")) return wrap_to(dt, ua - ub);
	if (!strcmp(op, "mul")) return wrap_to(dt, ua * ub);
	if (!strcmp(op, "maximum")) return a > b ? a : b;
	if (!strcmp(op, "minimum")) return a < b ? a : b;
	if (!strcmp(op, "floor_divide")) return wrap_to(dt, (uint64_t)i_floordiv(a, b));
	if (!strcmp(op, "remainder")) return wrap_to(dt, (uint64_t)i_remainder(a, b));
	if (!strcmp(op, "fmod")) return b == -1 ? 0 : a % b; /* the dividend's sign */
	if (!strcmp(op, "pow")) {
		uint64_t r = 1;
		for (int64_t k = 0; k < b; k++)
			r *= ua;
		return wrap_to(dt, r);
	}
	if (!strcmp(op, "eq")) return a == b;
	if (!strcmp(op, "ne")) return a != b;
	if (!strcmp(op, "lt")) return a < b;
	if (!strcmp(op, "le")) return a <= b;
	if (!strcmp(op, "gt")) return a > b;
	if (!strcmp(op, "ge")) return a >= b;
	if (!strcmp(op, "logical_and")) return a != 0 && b != 0;
	if (!strcmp(op, "logical_or")) return a != 0 || b != 0;
	if (!strcmp(op, "logical_xor")) return (a != 0) != (b != 0);
	if (!strcmp(op, "bitwise_and")) return wrap_to(dt, ua & ub);
	if (!strcmp(op, "bitwise_or")) return wrap_to(dt, ua | ub);
	if (!strcmp(op, "bitwise_xor")) return wrap_to(dt, ua ^ ub);
	return 0x5eed;
}

typedef struct binary_op {
	const char *name;
	unsigned kind;
	double (*f)(double, double);
} binary_op;

static const binary_op binary_ops[] = {
	{"add", K_NUM, f_add},
	{"sub", K_NUM, f_sub},
	{"mul", K_NUM, f_mul},
	{"div", K_FLOAT_ONLY, f_div},
	{"floor_divide", K_NUM | K_DIVLIKE, f_floordiv},
	{"remainder", K_NUM | K_DIVLIKE, f_remainder},
	{"fmod", K_NUM | K_DIVLIKE, f_fmod},
	{"pow", K_NUM | K_POW, f_pow},
	{"maximum", K_NUM, f_max},
	{"minimum", K_NUM, f_min},
	{"eq", K_BOOL_OUT, f_eq},
	{"ne", K_BOOL_OUT, f_ne},
	{"lt", K_BOOL_OUT, f_lt},
	{"le", K_BOOL_OUT, f_le},
	{"gt", K_BOOL_OUT, f_gt},
	{"ge", K_BOOL_OUT, f_ge},
	{"logical_and", K_BOOL_OUT, f_land},
	{"logical_or", K_BOOL_OUT, f_lor},
	{"logical_xor", K_BOOL_OUT, f_lxor},
	{"bitwise_and", K_BITWISE, NULL},
	{"bitwise_or", K_BITWISE, NULL},
	{"bitwise_xor", K_BITWISE, NULL},
};

typedef struct pattern {
	int ra;
	int64_t da[3];
	int rb;
	int64_t db[3];
} pattern;

static const pattern patterns[] = {
	{3, {3, 1, 5}, 3, {1, 4, 1}}, /* both broadcast */
	{0, {0}, 1, {7}},             /* 0-d with [n] */
	{1, {17}, 0, {0}},            /* [n] with 0-d */
	{1, {5}, 2, {3, 5}},          /* [n] with [m, n] */
	{2, {4, 1}, 2, {4, 6}},       /* a column */
	{3, {2, 3, 7}, 3, {2, 3, 7}}, /* same shape */
	{1, {1}, 1, {1}},             /* one element */
	{2, {0, 3}, 2, {1, 3}},       /* empty */
	{2, {2, 1}, 2, {2, 0}},       /* empty by broadcasting */
	{3, {2, 1, 3}, 2, {5, 1}},    /* rank grows, both broadcast */
};
enum { N_PATTERNS = sizeof patterns / sizeof patterns[0] };

static bool op_takes(const binary_op *op, air_dtype dt)
{
	if (op->kind & K_FLOAT_ONLY)
		return is_fp(dt);
	if (op->kind & K_NUM)
		return dt != AIR_BOOL;
	if (op->kind & K_BITWISE)
		return !is_fp(dt);
	return true;
}

/* Fills inputs for op on dt: floats in a range with NaN/Inf/0 sprinkled in,
 * integers at the edges; b avoids 0 for division-like ops, pow gets small
 * exponents. */
static void fill(const binary_op *op, air_dtype dt, int which, int64_t n, double *fv, int64_t *iv)
{
	for (int64_t i = 0; i < n; i++) {
		if (is_fp(dt)) {
			double v = uniform(-4, 4);
			if (op->kind & K_POW)
				v = which ? uniform(-3, 3) : uniform(0.1, 3);
			uint64_t r = next_u64() % 16;
			if (r == 0)
				v = NAN;
			else if (r == 1)
				v = which ? INFINITY : -INFINITY;
			else if (r == 2)
				v = 0;
			else if (r == 3)
				v = round(v); /* equal values and integer exponents */
			if ((op->kind & K_POW) && r == 3 && which == 0)
				v = -2; /* a negative base with an integer exponent */
			fv[i] = dt == AIR_F32 ? (double)(float)v : v;
		} else if (dt == AIR_BOOL) {
			iv[i] = (int64_t)(next_u64() % 2);
		} else {
			int64_t v = rand_int(dt);
			if ((op->kind & K_DIVLIKE) && which == 1 && v == 0)
				v = 3;
			if (op->kind & K_POW) {
				if (which == 1)
					v = (int64_t)(next_u64() % 9);
				else if (next_u64() % 2)
					v = wrap_to(dt, (uint64_t)((int64_t)(next_u64() % 7) - 3));
			}
			iv[i] = v;
		}
	}
}

static const air_dtype ALL_TYPES[] = {AIR_F32, AIR_F64, AIR_I64, AIR_I32, AIR_I16, AIR_I8, AIR_U8, AIR_BOOL};

/* Runs one binary case and checks it against the test's own computation.
 * const_b makes b a graph constant. */
static void binary_case(const binary_op *op, air_dtype dt, const pattern *p, bool const_b, int n_flag_sets)
{
	int64_t na = numel_of(p->ra, p->da), nb = numel_of(p->rb, p->db);
	int orank = p->ra > p->rb ? p->ra : p->rb;
	int64_t odims[AIR_MAX_RANK];
	for (int d = 0; d < orank; d++) {
		int ia = d - (orank - p->ra), ib = d - (orank - p->rb);
		int64_t x = ia >= 0 ? p->da[ia] : 1, y = ib >= 0 ? p->db[ib] : 1;
		odims[d] = x == 1 ? y : x;
	}
	int64_t no = numel_of(orank, odims);
	double *fa = calloc((size_t)na + 1, sizeof *fa), *fb = calloc((size_t)nb + 1, sizeof *fb);
	int64_t *ia = calloc((size_t)na + 1, sizeof *ia), *ib = calloc((size_t)nb + 1, sizeof *ib);
	fill(op, dt, 0, na, fa, ia);
	fill(op, dt, 1, nb, fb, ib);
	air_dtype odt = (op->kind & K_BOOL_OUT) ? AIR_BOOL : dt;
	double *wf = calloc((size_t)no + 1, sizeof *wf);
	int64_t *wi = calloc((size_t)no + 1, sizeof *wi);
	for (int64_t i = 0; i < no; i++) {
		int64_t xa = bcast_index(orank, odims, i, p->ra, p->da), xb = bcast_index(orank, odims, i, p->rb, p->db);
		if (is_fp(dt)) {
			double r = op->f(fa[xa], fb[xb]);
			if (odt == AIR_BOOL)
				wi[i] = r != 0;
			else
				wf[i] = dt == AIR_F32 ? (double)(float)r : r;
		} else {
			wi[i] = i_op(op->name, ia[xa], ib[xb], dt);
		}
	}
	void *da = pack(dt, fa, ia, na), *db = pack(dt, fb, ib, nb);
	th_arg args[2] = {th_make(dt, da, p->ra, p->da), th_make(dt, db, p->rb, p->db)};
	args[1].constant = const_b;
	char label[128];
	snprintf(label, sizeof label, "%s %s [%lld..]x[%lld..] rank %d%s", op->name, air_dtype_name(dt),
		 (long long)(p->ra ? p->da[0] : -1), (long long)(p->rb ? p->db[0] : -1), orank,
		 const_b ? " const" : "");
	/* f32 pow goes through powf: a few ulps */
	double tol = dt == AIR_F32 ? ((op->kind & K_POW) ? 4e-6 : 1e-6) : 1e-14;
	expect e = {label, odt, orank, {0}, no, wf, wi, tol, dt == AIR_F32 ? 1e-30 : 1e-300};
	memcpy(e.dims, odims, sizeof(int64_t) * (size_t)orank);
	run_both(op->name, args, 2, NULL, 0, check_expect, &e, n_flag_sets);
	free(da);
	free(db);
	free(fa);
	free(fb);
	free(ia);
	free(ib);
	free(wf);
	free(wi);
}

static void test_binary(void)
{
	for (size_t k = 0; k < sizeof binary_ops / sizeof binary_ops[0]; k++) {
		const binary_op *op = &binary_ops[k];
		for (size_t t = 0; t < sizeof ALL_TYPES / sizeof ALL_TYPES[0]; t++) {
			air_dtype dt = ALL_TYPES[t];
			if (!op_takes(op, dt)) {
				/* the op refuses the dtype when the node is built */
				int64_t d1[1] = {3};
				uint8_t buf[24] = {0};
				th_arg a[2] = {th_make(dt, buf, 1, d1), th_make(dt, buf, 1, d1)};
				char label[64];
				snprintf(label, sizeof label, "%s refuses %s", op->name, air_dtype_name(dt));
				th_expect_build_error(op->name, a, 2, NULL, 0, AIR_UNSUPPORTED, label);
				continue;
			}
			for (int p = 0; p < N_PATTERNS; p++)
				binary_case(op, dt, &patterns[p], false, 2);
			/* b as a constant, for one broadcasting and one scalar pattern */
			binary_case(op, dt, &patterns[0], true, 2);
			binary_case(op, dt, &patterns[2], true, 2);
		}
	}
	/* large tensors, split across threads */
	pattern big_same = {1, {1000003}, 1, {1000003}}, big_scalar = {1, {1000003}, 0, {0}};
	binary_case(&binary_ops[0], AIR_F32, &big_same, false, 1);  /* add */
	binary_case(&binary_ops[2], AIR_F32, &big_scalar, false, 1); /* mul */
	binary_case(&binary_ops[7], AIR_I32, &big_same, false, 1);   /* maximum */
	pattern big_rows = {2, {1000, 1003}, 1, {1003}};
	binary_case(&binary_ops[9], AIR_F64, &big_rows, false, 1); /* eq */

	/* mixed dtypes are refused */
	int64_t d1[1] = {3};
	float fbuf[3] = {0};
	int32_t ibuf[3] = {0};
	th_arg mixed[2] = {th_make(AIR_F32, fbuf, 1, d1), th_make(AIR_I32, ibuf, 1, d1)};
	th_expect_build_error("add", mixed, 2, NULL, 0, AIR_DTYPE_MISMATCH, "add f32 + i32");
	th_expect_build_error("eq", mixed, 2, NULL, 0, AIR_DTYPE_MISMATCH, "eq f32 == i32");
	int64_t d4[1] = {4};
	th_arg mis[2] = {th_make(AIR_F32, fbuf, 1, d1), th_make(AIR_F32, fbuf, 1, d4)};
	th_expect_build_error("add", mis, 2, NULL, 0, AIR_SHAPE_MISMATCH, "add [3] + [4]");
}

/* Exact PyTorch results where semantics matter. */
static void test_binary_semantics(void)
{
	/* float floor_divide / remainder with negative operands, 0, inf, and
	 * where floor(a / b) would be wrong */
	const double a[] = {-7, 7, -7, 7, -5.5, 5.5, 1, -1, 0, 5, -5, 1, 1, -0.0, 7.5, NAN};
	const double b[] = {2, -2, -2, 2, 2, -2, 0, 0, 0, INFINITY, INFINITY, 0.1, -0.1, 3, 0.5, 2};
	const double fd[] = {-4, -4, 3, 3, -3, -3, INFINITY, -INFINITY, NAN, 0, -1, 9, -10, -0.0, 15, NAN};
	enum { N = sizeof a / sizeof a[0] };
	int64_t n = N;
	for (int di = 0; di < 2; di++) {
		air_dtype dt = di ? AIR_F64 : AIR_F32;
		void *da = pack(dt, a, NULL, N), *db = pack(dt, b, NULL, N);
		th_arg args[2] = {th_make(dt, da, 1, &n), th_make(dt, db, 1, &n)};
		expect e = {"floor_divide exact", dt, 1, {N}, N, fd, NULL, 0, 0};
		run_both("floor_divide", args, 2, NULL, 0, check_expect, &e, 2);
		/* remainder: fmod then the divisor's sign (checked below for the
		 * cases that matter; 1 % 0.1 is whatever fmod says exactly) */
		double rmw[N];
		for (int i = 0; i < N; i++)
			rmw[i] = dt == AIR_F32 ? (float)f_remainder((float)a[i], (float)b[i]) : f_remainder(a[i], b[i]);
		expect r = {"remainder exact", dt, 1, {N}, N, rmw, NULL, 0, 0};
		run_both("remainder", args, 2, NULL, 0, check_expect, &r, 2);
		/* Python's %: the sign of the divisor */
		CHECK(rmw[0] == 1 && rmw[1] == -1 && rmw[2] == -1 && rmw[3] == 1 && rmw[4] == 0.5 && rmw[5] == -0.5);
		CHECK(isnan(rmw[6]) && rmw[9] == 5 && rmw[10] == INFINITY && rmw[11] > 0 && rmw[12] < 0);
		/* maximum / minimum propagate NaN from either side */
		const double ma[4] = {NAN, 1, NAN, -INFINITY}, mb[4] = {1, NAN, NAN, 3};
		const double mx[4] = {NAN, NAN, NAN, 3}, mn[4] = {NAN, NAN, NAN, -INFINITY};
		int64_t four = 4;
		void *xa = pack(dt, ma, NULL, 4), *xb = pack(dt, mb, NULL, 4);
		th_arg margs[2] = {th_make(dt, xa, 1, &four), th_make(dt, xb, 1, &four)};
		expect emx = {"maximum NaN", dt, 1, {4}, 4, mx, NULL, 0, 0};
		run_both("maximum", margs, 2, NULL, 0, check_expect, &emx, 2);
		expect emn = {"minimum NaN", dt, 1, {4}, 4, mn, NULL, 0, 0};
		run_both("minimum", margs, 2, NULL, 0, check_expect, &emn, 2);
		/* comparisons with NaN are false, except ne */
		const int64_t eqw[4] = {0, 0, 0, 0}, new[4] = {1, 1, 1, 1}, ltw[4] = {0, 0, 0, 1};
		expect ceq = {"eq NaN", AIR_BOOL, 1, {4}, 4, NULL, eqw, 0, 0};
		run_both("eq", margs, 2, NULL, 0, check_expect, &ceq, 2);
		expect cne = {"ne NaN", AIR_BOOL, 1, {4}, 4, NULL, new, 0, 0};
		run_both("ne", margs, 2, NULL, 0, check_expect, &cne, 2);
		expect clt = {"lt NaN", AIR_BOOL, 1, {4}, 4, NULL, ltw, 0, 0};
		run_both("lt", margs, 2, NULL, 0, check_expect, &clt, 2);
		run_both("le", margs, 2, NULL, 0, check_expect, &clt, 2);
		const int64_t gtw[4] = {0, 0, 0, 0};
		expect cgt = {"gt NaN", AIR_BOOL, 1, {4}, 4, NULL, gtw, 0, 0};
		run_both("gt", margs, 2, NULL, 0, check_expect, &cgt, 2);
		run_both("ge", margs, 2, NULL, 0, check_expect, &cgt, 2);
		/* NaN is true for logical ops */
		const int64_t andw[4] = {1, 1, 1, 1};
		expect cand = {"logical_and NaN", AIR_BOOL, 1, {4}, 4, NULL, andw, 0, 0};
		run_both("logical_and", margs, 2, NULL, 0, check_expect, &cand, 2);
		/* pow: special cases as C and torch */
		const double pa[5] = {0, -2, 2, NAN, 1}, pb[5] = {0, 0.5, -1, 0, NAN}, pw[5] = {1, NAN, 0.5, 1, 1};
		int64_t five = 5;
		void *qa = pack(dt, pa, NULL, 5), *qb = pack(dt, pb, NULL, 5);
		th_arg pargs[2] = {th_make(dt, qa, 1, &five), th_make(dt, qb, 1, &five)};
		expect ep = {"pow specials", dt, 1, {5}, 5, pw, NULL, 0, 0};
		run_both("pow", pargs, 2, NULL, 0, check_expect, &ep, 2);
		/* float division by zero is IEEE, not an error */
		const double za[3] = {1, -1, 0}, zb[3] = {0, 0, 0}, zw[3] = {INFINITY, -INFINITY, NAN};
		int64_t three = 3;
		void *ya = pack(dt, za, NULL, 3), *yb = pack(dt, zb, NULL, 3);
		th_arg zargs[2] = {th_make(dt, ya, 1, &three), th_make(dt, yb, 1, &three)};
		expect ez = {"div by zero", dt, 1, {3}, 3, zw, NULL, 0, 0};
		run_both("div", zargs, 2, NULL, 0, check_expect, &ez, 2);
		free(qa), free(qb), free(ya), free(yb), free(xa), free(xb), free(da), free(db);
	}
	/* integer floor_divide / remainder: Python semantics, wrap at the edge */
	const int64_t ia[] = {-7, 7, -7, 7, -5, 5, 0, -128, 127, 3};
	const int64_t ib[] = {2, -2, -2, 2, 3, -3, 5, -1, -1, 7};
	const int64_t ifd[] = {-4, -4, 3, 3, -2, -2, 0, -128, -127, 0};
	const int64_t irm[] = {1, -1, -1, 1, 1, -1, 0, 0, 0, 3};
	enum { NI = sizeof ia / sizeof ia[0] };
	int64_t ni = NI;
	const air_dtype signed_types[] = {AIR_I64, AIR_I32, AIR_I16, AIR_I8};
	for (int t = 0; t < 4; t++) {
		void *da = pack(signed_types[t], NULL, ia, NI), *db = pack(signed_types[t], NULL, ib, NI);
		th_arg args[2] = {th_make(signed_types[t], da, 1, &ni), th_make(signed_types[t], db, 1, &ni)};
		int64_t fdw[NI];
		memcpy(fdw, ifd, sizeof fdw);
		if (signed_types[t] != AIR_I8)
			fdw[7] = 128; /* -128 // -1 only wraps in i8 */
		expect e = {"floor_divide int exact", signed_types[t], 1, {NI}, NI, NULL, fdw, 0, 0};
		run_both("floor_divide", args, 2, NULL, 0, check_expect, &e, 2);
		expect r = {"remainder int exact", signed_types[t], 1, {NI}, NI, NULL, irm, 0, 0};
		run_both("remainder", args, 2, NULL, 0, check_expect, &r, 2);
		free(da);
		free(db);
	}
	/* INT64_MIN // -1 wraps (no trap) */
	int64_t mina[2] = {INT64_MIN, INT64_MIN}, minb[2] = {-1, -1}, minw[2] = {INT64_MIN, INT64_MIN};
	int64_t two = 2;
	th_arg margs[2] = {th_make(AIR_I64, mina, 1, &two), th_make(AIR_I64, minb, 1, &two)};
	expect em = {"INT64_MIN // -1", AIR_I64, 1, {2}, 2, NULL, minw, 0, 0};
	run_both("floor_divide", margs, 2, NULL, 0, check_expect, &em, 2);
	int64_t zerow[2] = {0, 0};
	expect er = {"INT64_MIN % -1", AIR_I64, 1, {2}, 2, NULL, zerow, 0, 0};
	run_both("remainder", margs, 2, NULL, 0, check_expect, &er, 2);

	/* integer division by zero: an error at run time, not a crash */
	for (size_t t = 0; t < sizeof INT_TYPES / sizeof INT_TYPES[0]; t++) {
		air_dtype dt = INT_TYPES[t];
		int64_t va[20], vb[20];
		for (int i = 0; i < 20; i++) {
			va[i] = i + 1;
			vb[i] = i == 13 ? 0 : 2;
		}
		void *da = pack(dt, NULL, va, 20), *db = pack(dt, NULL, vb, 20);
		int64_t n20 = 20;
		th_arg args[2] = {th_make(dt, da, 1, &n20), th_make(dt, db, 1, &n20)};
		expect_run_error("floor_divide", args, 2, AIR_INVALID_ARGUMENT, "division by zero", "int // 0");
		expect_run_error("remainder", args, 2, AIR_INVALID_ARGUMENT, "division by zero", "int % 0");
		/* by a broadcast zero, and a zero constant */
		int64_t zero = 0;
		void *dz = pack(dt, NULL, &zero, 1);
		th_arg zargs[2] = {th_make(dt, da, 1, &n20), th_make(dt, dz, 0, NULL)};
		expect_run_error("floor_divide", zargs, 2, AIR_INVALID_ARGUMENT, "division by zero", "int // 0-d 0");
		zargs[1].constant = 1;
		expect_run_error("remainder", zargs, 2, AIR_INVALID_ARGUMENT, "division by zero", "int % const 0");
		free(dz);
		/* a negative exponent on integers (other than bases ±1) */
		if (dt != AIR_U8) {
			int64_t pa[3] = {1, -1, 2}, pb[3] = {-3, -3, -1};
			void *qa = pack(dt, NULL, pa, 3), *qb = pack(dt, NULL, pb, 3);
			int64_t n3 = 3;
			th_arg pargs[2] = {th_make(dt, qa, 1, &n3), th_make(dt, qb, 1, &n3)};
			expect_run_error("pow", pargs, 2, AIR_INVALID_ARGUMENT, "negative", "int ** -1");
			pa[2] = -1; /* only ±1 bases: fine */
			free(qa);
			qa = pack(dt, NULL, pa, 3);
			pargs[0].data = qa;
			int64_t pw[3] = {1, -1, -1};
			expect ep = {"pow ±1 ** negative", dt, 1, {3}, 3, NULL, pw, 0, 0};
			run_both("pow", pargs, 2, NULL, 0, check_expect, &ep, 2);
			free(qa);
			free(qb);
		}
		free(da);
		free(db);
	}
	/* the error leaves the model usable: run again with a good divisor */
	int32_t a32[4] = {7, -7, 9, 1}, b32[4] = {2, 2, 0, 1}, w32[4];
	int64_t n4 = 4;
	th_arg args[2] = {th_make(AIR_I32, a32, 1, &n4), th_make(AIR_I32, b32, 1, &n4)};
	air_model *m = th_compile("floor_divide", args, 2, NULL, 0, 0);
	if (m) {
		int rank;
		int64_t dims[AIR_MAX_RANK];
		air_status st;
		void *got = th_run_status(m, args, 2, &rank, dims, &st);
		CHECK(st == AIR_INVALID_ARGUMENT && got == NULL);
		b32[2] = -4;
		got = th_run(m, args, 2, &rank, dims);
		if (got) {
			memcpy(w32, got, sizeof w32);
			CHECK(w32[0] == 3 && w32[1] == -4 && w32[2] == -3 && w32[3] == 1);
		}
		free(got);
		air_model_destroy(m);
	}
}

/* The same model at two sizes of a shared symbol. */
static void test_symbolic(void)
{
	for (int64_t n = 1; n <= 1000; n = n * 7 + 3) {
		double *fa = malloc(sizeof(double) * (size_t)n), *fb = malloc(sizeof(double) * (size_t)n);
		double *w = malloc(sizeof(double) * (size_t)n);
		for (int64_t i = 0; i < n; i++) {
			fa[i] = (float)uniform(-3, 3);
			fb[i] = (float)uniform(-3, 3);
			w[i] = (float)(fa[i] * fb[i]);
		}
		void *da = pack(AIR_F32, fa, NULL, n), *db = pack(AIR_F32, fb, NULL, n);
		th_arg args[2] = {th_make(AIR_F32, da, 1, &n), th_make(AIR_F32, db, 1, &n)};
		args[0].sym[0] = 1;
		args[1].sym[0] = 1;
		expect e = {"mul symbolic", AIR_F32, 1, {n}, n, w, NULL, 0, 0};
		run_both("mul", args, 2, NULL, 0, check_expect, &e, 2);
		/* [s1] with [s2]: broadcasting decided at run time */
		args[1].sym[0] = 2;
		run_both("mul", args, 2, NULL, 0, check_expect, &e, 1);
		free(da), free(db), free(fa), free(fb), free(w);
	}
	/* [s1] with [s2] bound to 3 and 4: a shape error at run time */
	float buf[4] = {0};
	int64_t d3 = 3, d4 = 4;
	th_arg args[2] = {th_make(AIR_F32, buf, 1, &d3), th_make(AIR_F32, buf, 1, &d4)};
	args[0].sym[0] = 1;
	args[1].sym[0] = 2;
	expect_run_error("add", args, 2, AIR_SHAPE_MISMATCH, "broadcast", "add [s1]+[s2] 3 vs 4");
	/* and [s1] with [1]: broadcasts when s1 = 1, too */
	float one[1] = {5}, x1[1] = {2};
	int64_t d1 = 1;
	th_arg args1[2] = {th_make(AIR_F32, x1, 1, &d1), th_make(AIR_F32, one, 1, &d1)};
	args1[0].sym[0] = 1;
	double w1[1] = {7};
	expect e1 = {"add [s1]+[1] at 1", AIR_F32, 1, {1}, 1, w1, NULL, 0, 0};
	run_both("add", args1, 2, NULL, 0, check_expect, &e1, 2);
}

/* ---- where --------------------------------------------------------------- */

static void test_where(void)
{
	const air_dtype types[] = {AIR_U8, AIR_BOOL, AIR_I8, AIR_F16, AIR_BF16, AIR_I16, AIR_F32, AIR_I32, AIR_F64, AIR_I64};
	for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
		air_dtype dt = types[t];
		bool fl = is_fp(dt) || dt == AIR_F16 || dt == AIR_BF16;
		/* a [1,4,1] against b [5] (or [1]) under cond [3,1,5] (or 0-d) */
		for (int variant = 0; variant < 3; variant++) {
			int rc = variant == 1 ? 0 : 3, ra = 3, rb = 1;
			int64_t dc[3] = {3, 1, 5}, da[3] = {1, 4, 1}, db[1] = {variant == 2 ? 1 : 5};
			int orank = 3;
			int64_t od[3] = {variant == 1 ? 1 : 3, 4, 5};
			int64_t nc = numel_of(rc, dc), na = numel_of(ra, da), nb = numel_of(rb, db);
			int64_t no = numel_of(orank, od);
			int64_t ci[15], ai[4], bi[5], wi[60];
			double af[4], bf[5], wf[60];
			for (int i = 0; i < nc; i++)
				ci[i] = (int64_t)(next_u64() % 2);
			for (int i = 0; i < na; i++) {
				ai[i] = dt == AIR_BOOL ? 1 : wrap_to(dt, (uint64_t)(10 + i));
				af[i] = 1.5 + i;
			}
			for (int i = 0; i < nb; i++) {
				bi[i] = dt == AIR_BOOL ? 0 : wrap_to(dt, (uint64_t)(-20 - i));
				bf[i] = -0.25 - i;
			}
			for (int64_t i = 0; i < no; i++) {
				int64_t xc = bcast_index(orank, od, i, rc, dc), xa = bcast_index(orank, od, i, ra, da);
				int64_t xb = bcast_index(orank, od, i, rb, db);
				bool c = ci[xc] != 0;
				wi[i] = c ? ai[xa] : bi[xb];
				wf[i] = c ? af[xa] : bf[xb];
			}
			void *cd = pack(AIR_BOOL, NULL, ci, nc);
			void *ad = pack(dt, af, ai, na), *bd = pack(dt, bf, bi, nb);
			th_arg args[3] = {th_make(AIR_BOOL, cd, rc, dc), th_make(dt, ad, ra, da), th_make(dt, bd, rb, db)};
			char label[64];
			snprintf(label, sizeof label, "where %s variant %d", air_dtype_name(dt), variant);
			expect e = {label, dt, orank, {od[0], od[1], od[2]}, no, fl ? wf : NULL, fl ? NULL : wi, 0, 0};
			run_both("where", args, 3, NULL, 0, check_expect, &e, 2);
			free(cd), free(ad), free(bd);
		}
	}
	/* empty */
	int64_t d0[2] = {0, 3};
	uint8_t c[1] = {0};
	float a[1] = {0};
	th_arg args[3] = {th_make(AIR_BOOL, c, 2, d0), th_make(AIR_F32, a, 2, d0), th_make(AIR_F32, a, 0, NULL)};
	expect e = {"where empty", AIR_F32, 2, {0, 3}, 0, NULL, NULL, 0, 0};
	run_both("where", args, 3, NULL, 0, check_expect, &e, 2);
	/* a condition that is not bool */
	args[0].dtype = AIR_U8;
	th_expect_build_error("where", args, 3, NULL, 0, AIR_DTYPE_MISMATCH, "where u8 condition");
}

/* ---- cast ---------------------------------------------------------------- */

static const air_dtype CAST_TYPES[] = {AIR_F32, AIR_F64, AIR_F16, AIR_BF16, AIR_I64,
				       AIR_I32, AIR_I16, AIR_I8,  AIR_U8,   AIR_BOOL};

static bool is_floatish(air_dtype dt)
{
	return dt == AIR_F32 || dt == AIR_F64 || dt == AIR_F16 || dt == AIR_BF16;
}

/* Values exactly representable in f16 and bf16 (and so in every float type),
 * including ones that wrap or truncate in the integer types. */
static const double cast_values[] = {0, -0.0, 1, -1, 0.5, -2.25, 3, 100, -128, 255, 256, 0.25, 1.5, -7.5,
				     127, -129, 2.75, -0.75, 64, 1024, -3, 200};
enum { N_CAST = sizeof cast_values / sizeof cast_values[0] };

static void test_cast(void)
{
	int64_t n = N_CAST;
	for (size_t s = 0; s < sizeof CAST_TYPES / sizeof CAST_TYPES[0]; s++) {
		air_dtype from = CAST_TYPES[s];
		/* the source values as that dtype holds them */
		int64_t iv[N_CAST];
		for (int i = 0; i < N_CAST; i++)
			iv[i] = wrap_to(from == AIR_BOOL ? AIR_BOOL : from, (uint64_t)(int64_t)cast_values[i]);
		void *src = pack(from, cast_values, iv, n);
		for (size_t d = 0; d < sizeof CAST_TYPES / sizeof CAST_TYPES[0]; d++) {
			air_dtype to = CAST_TYPES[d];
			double wf[N_CAST];
			int64_t wi[N_CAST];
			for (int i = 0; i < N_CAST; i++) {
				double v = get_f(src, from, i); /* exact */
				if (is_floatish(to))
					wf[i] = v;
				else if (to == AIR_BOOL)
					wi[i] = v != 0;
				else if (is_floatish(from))
					wi[i] = wrap_to(to, (uint64_t)(int64_t)trunc(v));
				else
					wi[i] = wrap_to(to, (uint64_t)get_i(src, from, i));
			}
			th_arg a = th_make(from, src, 1, &n);
			air_attr at = th_int("dtype", to);
			char label[64];
			snprintf(label, sizeof label, "cast %s -> %s", air_dtype_name(from), air_dtype_name(to));
			expect e = {label, to, 1, {N_CAST}, N_CAST, wf, wi, 0, 0};
			run_both("cast", &a, 1, &at, 1, check_expect, &e, 2);
			/* 0-d and empty */
			th_arg a0 = th_make(from, src, 0, NULL);
			expect e0 = {label, to, 0, {0}, 1, wf, wi, 0, 0};
			run_both("cast", &a0, 1, &at, 1, check_expect, &e0, 1);
			int64_t empty[2] = {4, 0};
			th_arg ae = th_make(from, NULL, 2, empty);
			expect ee = {label, to, 2, {4, 0}, 0, wf, wi, 0, 0};
			run_both("cast", &ae, 1, &at, 1, check_expect, &ee, 1);
		}
		free(src);
	}

	/* floats that do not fit: no UB (the sanitizer build checks), and
	 * the results torch gives on x86 where they are well defined */
	const double big[] = {NAN, INFINITY, -INFINITY, 1e30, -1e30, 3e9, -3e9, 300.7, -1.5, 1e10, 2.9, -2.9};
	enum { NB = sizeof big / sizeof big[0] };
	int64_t nb = NB;
	for (int fi = 0; fi < 2; fi++) {
		air_dtype from = fi ? AIR_F64 : AIR_F32;
		void *src = pack(from, big, NULL, NB);
		th_arg a = th_make(from, src, 1, &nb);
		for (size_t d = 4; d < sizeof CAST_TYPES / sizeof CAST_TYPES[0]; d++) {
			air_dtype to = CAST_TYPES[d];
			air_attr at = th_int("dtype", to);
			air_model *m = th_compile("cast", &a, 1, &at, 1, 0);
			if (!m)
				continue;
			int rank;
			int64_t dims[AIR_MAX_RANK];
			void *got = th_run(m, &a, 1, &rank, dims);
			if (got) {
				int64_t v[NB];
				for (int i = 0; i < NB; i++)
					v[i] = get_i(got, to, i);
				if (to == AIR_BOOL) {
					int bad = 0;
					for (int i = 0; i < NB; i++)
						bad += v[i] != 1; /* NaN and inf are true */
					CHECK(bad == 0);
				} else {
					/* in range: truncation toward zero, wrapped */
					CHECK(v[10] == 2 && v[11] == wrap_to(to, (uint64_t)-2));
					CHECK(v[8] == wrap_to(to, (uint64_t)-1));
					CHECK(v[7] == wrap_to(to, 300));
					if (to == AIR_I64) {
						CHECK(v[0] == INT64_MIN && v[1] == INT64_MIN && v[3] == INT64_MIN);
						CHECK(v[5] == 3000000000 && v[9] == 10000000000);
					}
					if (to == AIR_I32)
						CHECK(v[0] == INT32_MIN && v[5] == INT32_MIN && v[9] == INT32_MIN);
					if (to == AIR_U8)
						CHECK(v[9] == 0 && v[0] == 0);
				}
			}
			free(got);
			air_model_destroy(m);
		}
		free(src);
	}

	/* f32 -> f16 / bf16 rounding (bit patterns from torch) */
	const float r16[] = {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 65504.0f, 65519.0f, 65520.0f, 1e-8f,
			     0x1p-24f,        3 * 0x1p-25f,        0x1p-25f, 0x1p-14f - 0x1p-25f, -0.0f, INFINITY,
			     -INFINITY,       0x1p-14f,            -65504.0f, 0.1f};
	const int64_t w16[] = {0x3c00, 0x3c02, 0x7bff, 0x7bff, 0x7c00, 0,      1,      2,
			       0,      0x0400, 0x8000, 0x7c00, 0xfc00, 0x0400, 0xfbff, 0x2e66};
	int64_t n16 = sizeof r16 / sizeof r16[0];
	th_arg a16 = th_make(AIR_F32, r16, 1, &n16);
	air_attr to_f16 = th_int("dtype", AIR_F16), to_bf16 = th_int("dtype", AIR_BF16);
	{
		air_model *m = th_compile("cast", &a16, 1, &to_f16, 1, 0);
		int rank;
		int64_t dims[AIR_MAX_RANK];
		uint16_t *got = m ? th_run(m, &a16, 1, &rank, dims) : NULL;
		if (got) {
			int bad = 0;
			for (int i = 0; i < n16; i++)
				if (got[i] != w16[i]) {
					fprintf(stderr, "f32 -> f16 %a: 0x%04x, want 0x%04llx\n", r16[i], got[i],
						(long long)w16[i]);
					bad++;
				}
			CHECK(bad == 0);
		}
		free(got);
		air_model_destroy(m);
	}
	const float rb[] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 1.0f + 0x1p-8f + 0x1p-20f, 3.4028234663852886e38f,
			    -0.0f,          INFINITY,           1.0f,                      -2.5f};
	const int64_t wb[] = {0x3f80, 0x3f82, 0x3f81, 0x7f80, 0x8000, 0x7f80, 0x3f80, 0xc020};
	int64_t nbf = sizeof rb / sizeof rb[0];
	th_arg abf = th_make(AIR_F32, rb, 1, &nbf);
	{
		air_model *m = th_compile("cast", &abf, 1, &to_bf16, 1, 0);
		int rank;
		int64_t dims[AIR_MAX_RANK];
		uint16_t *got = m ? th_run(m, &abf, 1, &rank, dims) : NULL;
		if (got) {
			int bad = 0;
			for (int i = 0; i < nbf; i++)
				bad += got[i] != wb[i];
			CHECK(bad == 0);
		}
		free(got);
		air_model_destroy(m);
	}
	/* NaN stays NaN both ways */
	const float nan1[1] = {NAN};
	int64_t one = 1;
	th_arg an = th_make(AIR_F32, nan1, 1, &one);
	for (int k = 0; k < 2; k++) {
		air_model *m = th_compile("cast", &an, 1, k ? &to_bf16 : &to_f16, 1, 0);
		int rank;
		int64_t dims[AIR_MAX_RANK];
		uint16_t *got = m ? th_run(m, &an, 1, &rank, dims) : NULL;
		if (got)
			CHECK(isnan(k ? bf16_value(got[0]) : f16_value(got[0])));
		free(got);
		air_model_destroy(m);
	}

	/* exhaustive: every f16 and bf16 pattern -> f32 is exact, and back
	 * again gives the same bits (NaNs stay NaN) */
	for (int k = 0; k < 2; k++) {
		air_dtype h = k ? AIR_BF16 : AIR_F16;
		uint16_t *bits = malloc(sizeof(uint16_t) * 65536);
		for (int i = 0; i < 65536; i++)
			bits[i] = (uint16_t)i;
		air_graph *g = NULL;
		air_dim dims[1] = {65536};
		air_value x, y, z;
		int no;
		CHECK_OK(air_graph_create(&g));
		CHECK_OK(air_graph_add_input(g, "x", h, 1, dims, &x));
		air_attr tf = th_int("dtype", AIR_F32), th = th_int("dtype", h);
		CHECK_OK(air_graph_add_node(g, "cast", &x, 1, &tf, 1, &y, 1, &no));
		CHECK_OK(air_graph_add_node(g, "cast", &y, 1, &th, 1, &z, 1, &no));
		air_value outs[2] = {y, z};
		CHECK_OK(air_graph_set_outputs(g, outs, 2));
		air_model *m = NULL;
		CHECK_OK(air_compile(g, NULL, &m));
		air_graph_destroy(g);
		air_session *s = NULL;
		float *f = malloc(sizeof(float) * 65536);
		uint16_t *back = malloc(sizeof(uint16_t) * 65536);
		CHECK_OK(air_session_create(m, &s));
		int64_t d[1] = {65536};
		CHECK_OK(air_session_set_input(s, 0, bits, 1, d));
		CHECK_OK(air_session_set_output(s, 0, f, sizeof(float) * 65536));
		CHECK_OK(air_session_set_output(s, 1, back, sizeof(uint16_t) * 65536));
		CHECK_OK(air_session_run(s));
		int bad_value = 0, bad_trip = 0;
		for (int i = 0; i < 65536; i++) {
			double want = k ? bf16_value((uint16_t)i) : f16_value((uint16_t)i);
			if (isnan(want)) {
				bad_value += !isnan(f[i]);
				bad_trip += !isnan(k ? bf16_value(back[i]) : f16_value(back[i]));
			} else {
				bad_value += (double)f[i] != want || !signbit(f[i]) != !signbit(want);
				bad_trip += back[i] != i;
			}
		}
		if (bad_value || bad_trip)
			fprintf(stderr, "%s: %d values and %d round trips wrong\n", air_dtype_name(h), bad_value,
				bad_trip);
		CHECK(bad_value == 0 && bad_trip == 0);
		air_session_destroy(s);
		air_model_destroy(m);
		free(bits);
		free(f);
		free(back);
	}
	/* an unknown target dtype */
	air_attr bad = th_int("dtype", 99);
	th_expect_build_error("cast", &a16, 1, &bad, 1, AIR_INVALID_ARGUMENT, "cast to dtype 99");
	bad = th_int("dtype", -1);
	th_expect_build_error("cast", &a16, 1, &bad, 1, AIR_INVALID_ARGUMENT, "cast to dtype -1");
}

/* Dtypes the unary ops do not take are refused when the node is built. */
static void test_refused(void)
{
	int64_t d[1] = {2};
	uint8_t buf[16] = {0};
	const struct {
		const char *op;
		air_dtype dt;
	} cases[] = {{"exp", AIR_I32},  {"sqrt", AIR_BOOL}, {"exp", AIR_F16},         {"neg", AIR_BOOL},
		     {"relu", AIR_BF16}, {"bitwise_not", AIR_F32}, {"leaky_relu", AIR_I64}, {"round", AIR_I8},
		     {"floor", AIR_I64}, {"clamp", AIR_BOOL}, {"isnan", AIR_F16},     {"logical_not", AIR_BF16}};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		th_arg a = th_make(cases[i].dt, buf, 1, d);
		char label[64];
		snprintf(label, sizeof label, "%s refuses %s", cases[i].op, air_dtype_name(cases[i].dt));
		th_expect_build_error(cases[i].op, &a, 1, NULL, 0, AIR_UNSUPPORTED, label);
	}
}

/* ---- the lanes kernels: standalone relu, same-size add/sub/mul/div ------- */

/* f32 relu, clamp, and add, sub, mul, div of two inputs of the output's size run
 * elementwise_fast.c's kernels (the name is checked), split over the pool:
 * sizes around the 8-lane step and past two tasks of K_GRAIN, an input
 * with a leading 1 ([1, n] with [n]), NaN, infinities and signed zeros.
 * Their values are the float operation's own, so they must match exactly
 * (relu and clamp: NaN stays NaN, -0.0 stays -0.0; clamp with min > max
 * gives max). */
/* bool, u8 and i8 to f32 run cast_bytes_f32 (elementwise_fast.c), split over
 * the pool: every byte value, over more than two tasks' worth. */
static void test_cast_bytes(void)
{
	static const air_dtype froms[] = {AIR_BOOL, AIR_U8, AIR_I8};
	const int64_t n = 2 * 16384 + 5;
	uint8_t *x = malloc((size_t)n);
	for (size_t f = 0; f < sizeof froms / sizeof froms[0]; f++) {
		for (int64_t i = 0; i < n; i++)
			x[i] = froms[f] == AIR_BOOL ? (uint8_t)((i * 7) % 3 == 0) : (uint8_t)(i * 37);
		th_arg a = th_make(froms[f], x, 1, &n);
		air_attr at = th_int("dtype", AIR_F32);
		air_model *m = th_compile("cast", &a, 1, &at, 1, 0);
		if (!m)
			continue;
		CHECK(strstr(air_model_report(m), " cast_bytes_f32 ") != NULL);
		int rank;
		int64_t dims[AIR_MAX_RANK];
		float *y = th_run(m, &a, 1, &rank, dims);
		air_model_destroy(m);
		int64_t bad = 0;
		for (int64_t i = 0; y && i < n; i++) {
			float w = froms[f] == AIR_I8 ? (float)(int8_t)x[i] : (float)x[i];
			bad += y[i] != w;
		}
		CHECK(y && bad == 0);
		free(y);
	}
	free(x);
}

/* f32 <-> bf16/f16 on whole tensors (kernels/elementwise/cast_half.c, vector
 * loops and F16C) give the reference kernel's bits for any f32 pattern
 * (NaN, Inf, subnormals, rounding ties), over several tasks and tails. */
static void run_cast(const th_arg *a, air_dtype to, unsigned flags, const char *want_kernel, void **out)
{
	air_attr at = th_int("dtype", to);
	air_model *m = th_compile("cast", a, 1, &at, 1, flags);
	*out = NULL;
	if (!m)
		return;
	if (want_kernel)
		CHECK(strstr(air_model_report(m), want_kernel) != NULL);
	int rank;
	int64_t dims[AIR_MAX_RANK];
	*out = th_run(m, a, 1, &rank, dims);
	air_model_destroy(m);
}

static void test_cast_half(void)
{
	const int64_t n = 2 * 16384 + 13;
	uint32_t *bits = malloc(sizeof(uint32_t) * (size_t)n);
	uint16_t *half = malloc(sizeof(uint16_t) * (size_t)n);
	uint64_t r = 0x9e3779b97f4a7c15ull;
	for (int64_t i = 0; i < n; i++) {
		r = r * 6364136223846793005ull + 1442695040888963407ull;
		uint32_t u = (uint32_t)(r >> 32);
		/* every few a special: ties, NaN, Inf, subnormal, max */
		static const uint32_t special[] = {0x3f808000u, 0x3f818000u, 0x7fc00001u, 0xff800001u, 0x7f800000u,
						   0x00000001u, 0x807fffffu, 0x7f7fffffu, 0x477fe000u, 0x33800000u};
		bits[i] = i % 7 == 0 ? special[(i / 7) % 10] : (i % 3 == 0 ? (u & 0x8fffffffu) | 0x38000000u : u);
		half[i] = (uint16_t)(r >> 16);
	}
	for (int h = 0; h < 2; h++) {
		air_dtype hd = h ? AIR_F16 : AIR_BF16;
		th_arg a32 = th_make(AIR_F32, bits, 1, &n), a16 = th_make(hd, half, 1, &n);
		void *got, *want;
		run_cast(&a32, hd, 0, " cast_half ", &got);
		run_cast(&a32, hd, AIR_COMPILE_REFERENCE_KERNELS, NULL, &want);
		CHECK(got && want && memcmp(got, want, sizeof(uint16_t) * (size_t)n) == 0);
		free(got), free(want);
		run_cast(&a16, AIR_F32, 0, " cast_half ", &got);
		run_cast(&a16, AIR_F32, AIR_COMPILE_REFERENCE_KERNELS, NULL, &want);
		/* NaN payloads may differ (F16C quiets them its own way): compare NaN-ness there */
		int64_t bad = 0;
		for (int64_t i = 0; got && want && i < n; i++) {
			float g = ((float *)got)[i], w = ((float *)want)[i];
			bad += isnan(w) ? !isnan(g) : memcmp(&g, &w, 4) != 0;
		}
		CHECK(got && want && bad == 0);
		free(got), free(want);
	}
	free(bits), free(half);
}

/* add, sub, mul and div with one input repeating over the output's leading
 * dims (a scalar, a bias, a [1, 1, T, T] mask over the heads; either side,
 * for sub and div) run the lanes kernels too, bit for bit the float op;
 * other broadcasts ([3, 1, 7] against [3, 5, 7]) keep the reference. */
static void test_lanes_broadcast(void)
{
	static const char *const ops[] = {"add", "sub", "mul", "div"};
	static const struct {
		int ra;
		int64_t da[4];
		int rb;
		int64_t db[4];
		int fast;
	} cases[] = {
		{3, {3, 5, 7}, 1, {7}, 1},           {3, {3, 5, 7}, 0, {0}, 1},
		{4, {2, 12, 33, 33}, 4, {1, 1, 33, 33}, 1}, {1, {7}, 3, {3, 5, 7}, 1},
		{2, {300, 1000}, 2, {1, 1000}, 1},  {3, {3, 5, 7}, 3, {3, 1, 7}, 0},
	};
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		int64_t na = 1, nb = 1;
		for (int d = 0; d < cases[c].ra; d++)
			na *= cases[c].da[d];
		for (int d = 0; d < cases[c].rb; d++)
			nb *= cases[c].db[d];
		float *a = malloc(sizeof(float) * (size_t)na), *b = malloc(sizeof(float) * (size_t)nb);
		for (int64_t i = 0; i < na; i++)
			a[i] = (float)uniform(-4, 4);
		for (int64_t i = 0; i < nb; i++)
			b[i] = (float)uniform(-4, 4);
		a[0] = NAN, b[nb - 1] = -0.0f;
		th_arg args[2] = {th_make(AIR_F32, a, cases[c].ra, cases[c].da), th_make(AIR_F32, b, cases[c].rb, cases[c].db)};
		for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
			air_model *m = th_compile(ops[k], args, 2, NULL, 0, 0);
			if (!m)
				continue;
			char name[32];
			snprintf(name, sizeof name, cases[c].fast ? " %s_lanes " : " %s_ref ", ops[k]);
			CHECK(strstr(air_model_report(m), name) != NULL);
			int rank;
			int64_t dims[AIR_MAX_RANK];
			float *y = th_run(m, args, 2, &rank, dims);
			air_model_destroy(m);
			if (!y)
				continue;
			int64_t n = 1;
			for (int d = 0; d < rank; d++)
				n *= dims[d];
			int64_t bad = 0;
			for (int64_t i = 0; i < n; i++) {
				/* operands by broadcasting from the right (both cases' shapes) */
				int64_t ia = 0, ib = 0, q = i, sa = 1, sb = 1;
				for (int d = rank - 1; d >= 0; d--) {
					int64_t p = q % dims[d];
					q /= dims[d];
					int dA = d - (rank - cases[c].ra), dB = d - (rank - cases[c].rb);
					if (dA >= 0) {
						ia += (cases[c].da[dA] == 1 ? 0 : p) * sa;
						sa *= cases[c].da[dA];
					}
					if (dB >= 0) {
						ib += (cases[c].db[dB] == 1 ? 0 : p) * sb;
						sb *= cases[c].db[dB];
					}
				}
				float x = a[ia], z = b[ib];
				float w = k == 0 ? x + z : k == 1 ? x - z : k == 2 ? x * z : x / z;
				bool same = isnan(w) ? isnan(y[i]) : memcmp(&w, &y[i], sizeof w) == 0;
				if (!same && bad++ < 3)
					fprintf(stderr, "%s case %zu [%lld]: got %g want %g\n", ops[k], c, (long long)i,
						(double)y[i], (double)w);
			}
			check_count++;
			if (bad)
				check_failures++;
			free(y);
		}
		free(a);
		free(b);
	}
}

static void test_lanes(void)
{
	static const char *const ops[] = {"relu", "add", "sub", "mul", "div"};
	static const int64_t sizes[] = {1, 7, 8, 9, 2 * 16384 + 5};
	for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
		int64_t n = sizes[si];
		float *a = malloc(sizeof(float) * (size_t)n), *b = malloc(sizeof(float) * (size_t)n);
		for (int64_t i = 0; i < n; i++) {
			a[i] = (float)uniform(-4, 4);
			b[i] = (float)uniform(-4, 4);
		}
		static const float specials[] = {NAN, INFINITY, -INFINITY, -0.0f, 0.0f, 3.0f, -2.5f};
		for (int64_t i = 0; i < n && i < 7; i++) {
			a[i] = specials[i];
			b[i] = specials[(i + 3) % 7];
		}
		for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
			int nin = k == 0 ? 1 : 2;
			int64_t lead[2] = {1, n};
			th_arg args[2] = {th_make(AIR_F32, a, 1, &n), th_make(AIR_F32, b, 2, lead)};
			air_model *m = th_compile(ops[k], args, nin, NULL, 0, 0);
			if (!m)
				continue;
			char name[32];
			snprintf(name, sizeof name, " %s_lanes ", ops[k]);
			CHECK(strstr(air_model_report(m), name) != NULL);
			int rank;
			int64_t dims[AIR_MAX_RANK];
			float *y = th_run(m, args, nin, &rank, dims);
			air_model_destroy(m);
			if (!y)
				continue;
			int64_t bad = 0;
			for (int64_t i = 0; i < n; i++) {
				float w = k == 0 ? (a[i] < 0.0f ? 0.0f : a[i])
				          : k == 1 ? a[i] + b[i] : k == 2 ? a[i] - b[i] : k == 3 ? a[i] * b[i] : a[i] / b[i];
				bool same = isnan(w) ? isnan(y[i]) : memcmp(&w, &y[i], sizeof w) == 0;
				if (!same && bad++ < 3)
					fprintf(stderr, "%s n=%lld [%lld]: got %g want %g\n", ops[k], (long long)n, (long long)i,
						(double)y[i], (double)w);
			}
			check_count++;
			if (bad)
				check_failures++;
			free(y);
		}
		/* clamp: both bounds (relu6), one of them, min > max (gives max) */
		static const double bounds[][4] = {{0, 6, 1, 1}, {-1.5, 0, 1, 0}, {0, 2.25, 0, 1}, {5, 3, 1, 1}};
		for (size_t q = 0; q < sizeof bounds / sizeof bounds[0]; q++) {
			air_attr at[4] = {th_float("min", bounds[q][0]), th_float("max", bounds[q][1]),
					  th_int("has_min", (int64_t)bounds[q][2]), th_int("has_max", (int64_t)bounds[q][3])};
			th_arg x = th_make(AIR_F32, a, 1, &n);
			air_model *m = th_compile("clamp", &x, 1, at, 4, 0);
			if (!m)
				continue;
			CHECK(strstr(air_model_report(m), " clamp_lanes ") != NULL);
			int rank;
			int64_t dims[AIR_MAX_RANK];
			float *y = th_run(m, &x, 1, &rank, dims);
			air_model_destroy(m);
			if (!y)
				continue;
			float lo = bounds[q][2] ? (float)bounds[q][0] : -INFINITY, hi = bounds[q][3] ? (float)bounds[q][1] : INFINITY;
			int64_t bad = 0;
			for (int64_t i = 0; i < n; i++) {
				float l = a[i] < lo ? lo : a[i], w = l > hi ? hi : l;
				bool same = isnan(w) ? isnan(y[i]) : memcmp(&w, &y[i], sizeof w) == 0;
				if (!same && bad++ < 3)
					fprintf(stderr, "clamp %zu n=%lld [%lld]: got %g want %g\n", q, (long long)n, (long long)i,
						(double)y[i], (double)w);
			}
			check_count++;
			if (bad)
				check_failures++;
			free(y);
		}
		free(a), free(b);
	}
}

int main(void)
{
	test_unary_float();
	test_unary_int();
	test_clamp();
	test_binary();
	test_binary_semantics();
	test_symbolic();
	test_where();
	test_cast();
	test_refused();
	test_lanes();
	test_lanes_broadcast();
	test_cast_bytes();
	test_cast_half();
	return check_report("test_ops_elementwise");
}

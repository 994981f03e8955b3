/* cmd_bench.c - `air bench FILE [--iters N] [--warmup W] [--threads T]
 * [--input A.npy ...] [--dim NAME=VALUE ...]`: the latency of one run, as
 * the median of N timed runs after W untimed ones, with the spread (min,
 * 10th and 90th percentile, max). Without --input, inputs are random of the
 * declared shapes; a symbolic dim then needs its value from --dim. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "cli_args.h"

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint32_t rnd32(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 32);
}

/* Random values of dtype: floats in [-1, 1), integers in [0, 8) (small so
 * that an index input stays in range for most tables), bools 0/1. */
static void fill_random(npy_array *a)
{
	for (size_t i = 0; i < a->count; i++) {
		uint32_t r = rnd32();
		float f = (float)(r >> 8) / 8388608.0f - 1.0f;
		switch (a->dtype) {
		case AIR_F32: ((float *)a->data)[i] = f; break;
		case AIR_F64: ((double *)a->data)[i] = f; break;
		case AIR_F16: ((uint16_t *)a->data)[i] = (uint16_t)(0x3800 | (r & 0x3ff) | (r >> 16 & 0x8000)); break;
		case AIR_BF16: ((uint16_t *)a->data)[i] = (uint16_t)(0x3f00 | (r & 0x7f) | (r >> 16 & 0x8000)); break;
		case AIR_I64: ((int64_t *)a->data)[i] = r % 8; break;
		case AIR_I32: ((int32_t *)a->data)[i] = (int32_t)(r % 8); break;
		case AIR_I16: ((int16_t *)a->data)[i] = (int16_t)(r % 8); break;
		case AIR_I8: ((int8_t *)a->data)[i] = (int8_t)(r % 8); break;
		case AIR_U8: ((uint8_t *)a->data)[i] = (uint8_t)(r % 8); break;
		case AIR_BOOL: ((uint8_t *)a->data)[i] = (uint8_t)(r & 1); break;
		default: break;
		}
	}
}

/* A random input i of the model's declared shape, symbols from dims. */
static int make_input(const air_model *m, int i, cli_dim *dims, int n_dims, npy_array *a)
{
	char name[160], want[512];
	cli_input_name(m, i, name, sizeof name);
	cli_value_string(m, 0, i, want, sizeof want);
	air_dim md[AIR_MAX_RANK];
	air_status st = air_model_input_info(m, i, &a->dtype, &a->rank, md);
	if (st != AIR_OK)
		return cli_air_error(name, st);
	a->count = 1;
	for (int d = 0; d < a->rank; d++) {
		if (md[d] >= 0) {
			a->dims[d] = md[d];
		} else {
			char sym[128];
			air_model_dim_string(m, md[d], sym, sizeof sym);
			int k = 0;
			while (k < n_dims && !(strlen(sym) == dims[k].len && strncmp(sym, dims[k].name, dims[k].len) == 0))
				k++;
			if (k == n_dims)
				return cli_error("input %s (%s): dim %d is symbolic: give its value with --dim %s=VALUE, or "
						 "give the inputs with --input", name, want, d, sym);
			dims[k].used = 1;
			a->dims[d] = dims[k].value;
		}
		if (__builtin_mul_overflow(a->count, (size_t)a->dims[d], &a->count))
			return cli_error("input %s: too large", name);
	}
	if (__builtin_mul_overflow(a->count, air_dtype_size(a->dtype), &a->nbytes))
		return cli_error("input %s: too large", name);
	a->data = malloc(a->nbytes ? a->nbytes : 1);
	if (!a->data)
		return cli_error("input %s: out of memory (%zu bytes)", name, a->nbytes);
	fill_random(a);
	return CLI_OK;
}

static double now_seconds(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int cmd_bench(int argc, char **argv)
{
	cli_args args = {.iters = 50, .warmup = 3};
	int rc = cli_parse_args("bench", CLI_OPT_INPUT | CLI_OPT_DIM | CLI_OPT_THREADS | CLI_OPT_ITERS | CLI_OPT_WARMUP,
				argc, argv, &args);
	if (rc)
		return rc;
	const char *path = args.path;
	cli_dim *dims = args.dims;
	int n_in = args.n_in, n_dims = args.n_dims;
	long iters = args.iters, warmup = args.warmup, threads = args.threads;
	if (n_in && n_dims)
		return cli_usage_error("bench", "--dim is for random inputs; with --input the inputs give the sizes");

	air_model *m = NULL;
	air_session *s = NULL;
	npy_array arrays[CLI_MAX_INPUTS];
	void **outs = NULL;
	double *times = NULL;
	memset(arrays, 0, sizeof arrays);
	rc = cli_load(path, (int)threads, 0, NULL, &m);
	if (rc)
		return rc;
	int n_model = air_model_input_count(m), n_out = air_model_output_count(m);
	if (n_in && n_in != n_model) {
		rc = cli_error("%s takes %d input%s, %d given", path, n_model, n_model == 1 ? "" : "s", n_in);
		goto done;
	}
	if (n_model > CLI_MAX_INPUTS) {
		rc = cli_error("%s has %d inputs; air bench takes at most %d", path, n_model, CLI_MAX_INPUTS);
		goto done;
	}
	if ((rc = cli_session(m, &s)))
		goto done;
	cli_symbols syms = {0};
	for (int i = 0; i < n_model; i++) {
		if (n_in)
			rc = cli_read_input(s, m, i, args.inputs[i], &arrays[i], &syms);
		else if (!(rc = make_input(m, i, dims, n_dims, &arrays[i])))
			rc = cli_bind_input(s, m, i, &arrays[i], &syms);
		if (rc)
			goto done;
	}
	for (int k = 0; k < n_dims; k++)
		if (!dims[k].used) {
			rc = cli_error("--dim %.*s: the model's inputs have no such symbolic dim", (int)dims[k].len,
				       dims[k].name);
			goto done;
		}
	outs = calloc((size_t)(n_out > 0 ? n_out : 1), sizeof *outs);
	times = malloc((size_t)iters * sizeof *times);
	if (!outs || !times) {
		rc = cli_error("out of memory");
		goto done;
	}
	if ((rc = cli_set_outputs(s, m, n_out, outs, NULL, NULL)))
		goto done;
	for (long k = 0; k < warmup + iters; k++) {
		double t0 = now_seconds();
		air_status st = air_session_run(s);
		double t1 = now_seconds();
		if (st != AIR_OK) {
			rc = cli_air_error("run", st);
			goto done;
		}
		if (k >= warmup)
			times[k - warmup] = t1 - t0;
	}
	qsort(times, (size_t)iters, sizeof *times, by_value);
	double sum = 0;
	for (long k = 0; k < iters; k++)
		sum += times[k];
	if (threads)
		printf("%s: %ld runs after %ld warm-up, threads %ld\n", path, iters, warmup, threads);
	else
		printf("%s: %ld runs after %ld warm-up, threads as the file says (process default %d)\n", path, iters,
		       warmup, air_get_num_threads());
	printf("median %.4f ms  min %.4f  p10 %.4f  p90 %.4f  max %.4f  mean %.4f  (spread p90/p10 %.2fx)\n",
	       times[iters / 2] * 1e3, times[0] * 1e3, times[iters / 10] * 1e3, times[iters * 9 / 10] * 1e3,
	       times[iters - 1] * 1e3, sum / (double)iters * 1e3,
	       times[iters / 10] > 0 ? times[iters * 9 / 10] / times[iters / 10] : 0.0);
	rc = CLI_OK;
done:
	cli_free_outputs(outs, n_out);
	free(times);
	for (int i = 0; i < CLI_MAX_INPUTS; i++)
		npy_free(&arrays[i]);
	air_session_destroy(s);
	air_model_destroy(m);
	return rc;
}

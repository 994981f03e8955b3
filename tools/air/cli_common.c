/* cli_common.c - what the `air` commands share: messages and exit codes,
 * loading a file, shapes as text, and binding .npy inputs with checks that
 * name the input at fault. */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int cli_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("air: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	return CLI_ERROR;
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "air %s: ", cmd);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	cli_print_usage(stderr, cmd);
	return CLI_USAGE;
}

int cli_air_error(const char *what, air_status status)
{
	return cli_error("%s: %s: %s", what, air_status_string(status), air_last_error());
}

int cli_parse_int(const char *text, long max, long *out)
{
	if (!text || !isdigit((unsigned char)text[0]))
		return -1;
	errno = 0;
	char *end;
	long v = strtol(text, &end, 10);
	if (errno || *end || v > max)
		return -1;
	*out = v;
	return 0;
}

int cli_load(const char *path, int threads, uint32_t extra_flags, air_file **file, air_model **model)
{
	air_file *f = NULL;
	*model = NULL;
	if (file)
		*file = NULL;
	air_status st = air_file_open(path, NULL, &f);
	if (st != AIR_OK)
		return cli_air_error(path, st);
	if (air_file_external_count(f) > 0) {
		/* the compile cache's entries keep the weights out of the file */
		int n = air_file_external_count(f);
		cli_error("%s: %d external constant%s (not stored in the file), which only the program that saved "
			  "it can bind", path, n, n == 1 ? "" : "s");
		air_file_close(f);
		return CLI_ERROR;
	}
	air_compile_options o;
	air_compile_options_init(&o);
	st = air_file_compile_options(f, &o);
	if (st == AIR_OK) {
		if (threads > 0)
			o.num_threads = threads;
		o.flags |= extra_flags;
		st = air_file_compile(f, &o, model);
	}
	if (st != AIR_OK) {
		air_file_close(f);
		return cli_air_error(path, st);
	}
	if (file)
		*file = f;
	else
		air_file_close(f);
	return CLI_OK;
}

const char *cli_input_name(const air_model *m, int i, char *buf, size_t size)
{
	const char *name = air_model_input_name(m, i);
	if (name && name[0])
		snprintf(buf, size, "'%s'", name);
	else
		snprintf(buf, size, "input %d", i);
	return buf;
}

const char *cli_output_name(const air_model *m, int i, char *buf, size_t size)
{
	const char *name = air_model_output_name(m, i);
	if (name && name[0])
		snprintf(buf, size, "'%s'", name);
	else
		snprintf(buf, size, "output %d", i);
	return buf;
}

void cli_value_string(const air_model *m, int is_output, int i, char *buf, size_t size)
{
	air_dtype dt = AIR_F32;
	int rank = 0;
	air_dim dims[AIR_MAX_RANK];
	air_status st = is_output ? air_model_output_info(m, i, &dt, &rank, dims)
				  : air_model_input_info(m, i, &dt, &rank, dims);
	if (st != AIR_OK) {
		snprintf(buf, size, "?");
		return;
	}
	size_t len = (size_t)snprintf(buf, size, "%s[", air_dtype_name(dt));
	for (int d = 0; d < rank && len < size; d++) {
		char text[128];
		if (air_model_dim_string(m, dims[d], text, sizeof text) != AIR_OK)
			snprintf(text, sizeof text, "?");
		len += (size_t)snprintf(buf + len, size - len, "%s%s", d ? ", " : "", text);
	}
	if (len < size)
		snprintf(buf + len, size - len, "]");
}

/* A symbolic dim that is a bare symbol (its text an identifier) is bound
 * by the input that has it; other symbolic dims are expressions, which the
 * session evaluates and checks. */
static int is_bare_symbol(const air_model *m, air_dim d)
{
	char text[128];
	if (d >= 0 || air_model_dim_string(m, d, text, sizeof text) != AIR_OK)
		return 0;
	for (const char *p = text; *p; p++)
		if (!isalnum((unsigned char)*p) && *p != '_')
			return 0;
	return text[0] != 0;
}

/* f32 -> bf16, round to nearest even (NaN stays NaN), in place: element i
 * is written at byte 2i after it was read from byte 4i. */
static void f32_to_bf16_in_place(void *data, size_t count)
{
	const uint32_t *src = data;
	uint16_t *dst = data;
	for (size_t i = 0; i < count; i++) {
		uint32_t u = src[i];
		uint16_t h;
		if ((u & 0x7fffffffu) > 0x7f800000u)
			h = (uint16_t)((u >> 16) | 0x40);
		else
			h = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
		dst[i] = h;
	}
}

int cli_bind_input(air_session *s, const air_model *m, int i, npy_array *a, cli_symbols *syms)
{
	char name[160], want[512];
	cli_input_name(m, i, name, sizeof name);
	cli_value_string(m, 0, i, want, sizeof want);
	air_dtype dt;
	int rank;
	air_dim dims[AIR_MAX_RANK];
	air_status st = air_model_input_info(m, i, &dt, &rank, dims);
	if (st != AIR_OK)
		return cli_air_error(name, st);
	if (a->dtype != dt && !(dt == AIR_BF16 && a->dtype == AIR_F32))
		return cli_error("input %s: dtype %s given, the model takes %s%s", name, air_dtype_name(a->dtype), want,
				 dt == AIR_BF16 ? " (give bf16 inputs as float32)" : "");
	if (a->rank != rank)
		return cli_error("input %s: rank %d given, the model takes %s", name, a->rank, want);
	for (int d = 0; d < rank; d++) {
		if (dims[d] >= 0) {
			if (a->dims[d] != dims[d])
				return cli_error("input %s: dim %d is %lld, the model takes %s", name, d,
						 (long long)a->dims[d], want);
			continue;
		}
		if (!is_bare_symbol(m, dims[d]))
			continue;
		int k = 0;
		while (k < syms->n && syms->s[k].dim != dims[d])
			k++;
		if (k == syms->n) {
			if (syms->n == (int)(sizeof syms->s / sizeof syms->s[0]))
				continue; /* the session still checks it */
			syms->s[k].dim = dims[d];
			syms->s[k].value = a->dims[d];
			syms->s[k].input = i;
			syms->n++;
		} else if (syms->s[k].value != a->dims[d]) {
			char sym[128], other[160] = "--dim";
			air_model_dim_string(m, dims[d], sym, sizeof sym);
			if (syms->s[k].input >= 0)
				cli_input_name(m, syms->s[k].input, other, sizeof other);
			return cli_error("input %s: dim %d (%s) is %lld, but %s set %s = %lld", name, d, sym,
					 (long long)a->dims[d], other, sym, (long long)syms->s[k].value);
		}
	}
	if (dt == AIR_BF16 && a->dtype == AIR_F32) {
		f32_to_bf16_in_place(a->data, a->count);
		a->dtype = AIR_BF16;
		a->nbytes = a->count * 2;
	}
	st = air_session_set_input(s, i, a->data, a->rank, a->dims);
	if (st != AIR_OK)
		return cli_error("input %s: %s: %s", name, air_status_string(st), air_last_error());
	return CLI_OK;
}

int cli_read_input(air_session *s, const air_model *m, int i, const char *path, npy_array *array, cli_symbols *syms)
{
	char err[NPY_ERR_SIZE], name[160];
	if (npy_read_file(path, array, err))
		return cli_error("input %s: %s", cli_input_name(m, i, name, sizeof name), err);
	return cli_bind_input(s, m, i, array, syms);
}

int cli_session(const air_model *m, air_session **s)
{
	air_status st = air_session_create(m, s);
	return st == AIR_OK ? CLI_OK : cli_air_error("session", st);
}

int cli_set_outputs(air_session *s, const air_model *m, int n_out, void **outs, int *ranks,
		    int64_t (*dims)[AIR_MAX_RANK])
{
	for (int i = 0; i < n_out; i++) {
		int rank, mrank;
		int64_t od[AIR_MAX_RANK];
		air_dtype dt;
		air_dim md[AIR_MAX_RANK];
		air_status st = air_session_output_shape(s, i, &rank, od);
		if (st == AIR_OK)
			st = air_model_output_info(m, i, &dt, &mrank, md);
		if (st != AIR_OK)
			return cli_air_error("inputs", st);
		size_t bytes = air_dtype_size(dt);
		for (int d = 0; d < rank; d++)
			bytes *= (size_t)od[d];
		outs[i] = malloc(bytes ? bytes : 1);
		if (!outs[i])
			return cli_error("out of memory (output %d: %zu bytes)", i, bytes);
		st = air_session_set_output(s, i, outs[i], bytes);
		if (st != AIR_OK)
			return cli_air_error("output", st);
		if (ranks)
			ranks[i] = rank;
		if (dims)
			memcpy(dims[i], od, sizeof od);
	}
	return CLI_OK;
}

void cli_free_outputs(void **outs, int n_out)
{
	for (int i = 0; i < n_out && outs; i++)
		free(outs[i]);
	free(outs);
}

int cli_write_output(const char *path, air_dtype dtype, int rank, const int64_t *dims, const void *data)
{
	char err[NPY_ERR_SIZE];
	int rc;
	if (dtype == AIR_BF16) {
		/* numpy has no bf16: widen to f32, which is exact */
		size_t count = 1;
		for (int d = 0; d < rank; d++)
			count *= (size_t)dims[d];
		uint32_t *wide = malloc(count ? count * 4 : 4);
		if (!wide)
			return cli_error("%s: out of memory", path);
		const uint16_t *h = data;
		for (size_t i = 0; i < count; i++)
			wide[i] = (uint32_t)h[i] << 16;
		rc = npy_write_file(path, AIR_F32, rank, dims, wide, err);
		free(wide);
	} else {
		rc = npy_write_file(path, dtype, rank, dims, data, err);
	}
	return rc ? cli_error("%s", err) : CLI_OK;
}

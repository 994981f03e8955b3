/* npy.c - numpy .npy files in and out for the `air` CLI (see npy.h for what
 * is accepted). The header is a Python dict literal; this is a strict parser
 * of the one form numpy writes ({'descr': .., 'fortran_order': .., 'shape':
 * (..)}, keys in any order, each once), not a Python parser. */
#define _POSIX_C_SOURCE 200809L
#include "npy.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const unsigned char npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

static int fail(char *err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, NPY_ERR_SIZE, fmt, ap);
	va_end(ap);
	return -1;
}

/* numpy's descr strings for air's dtypes; bf16 has none. The byte-order
 * character is checked apart so that '>f4' gets its own message. */
static const struct {
	const char *code; /* without the byte-order character */
	air_dtype dtype;
} npy_codes[] = {
	{"f4", AIR_F32}, {"f8", AIR_F64}, {"f2", AIR_F16}, {"i8", AIR_I64}, {"i4", AIR_I32},
	{"i2", AIR_I16}, {"i1", AIR_I8},  {"u1", AIR_U8},  {"b1", AIR_BOOL},
};

static int parse_descr(const char *s, size_t n, air_dtype *dtype, char *err)
{
	if (n == 3 && (s[0] == '<' || s[0] == '|' || s[0] == '=' || s[0] == '>')) {
		for (size_t i = 0; i < sizeof npy_codes / sizeof npy_codes[0]; i++) {
			if (memcmp(s + 1, npy_codes[i].code, 2) != 0)
				continue;
			int one_byte = air_dtype_size(npy_codes[i].dtype) == 1;
			/* '=' (native) never appears in files numpy writes; '|'
			 * is numpy's mark for one-byte types */
			if (s[0] == '>' && !one_byte)
				return fail(err, "big-endian dtype '%.3s' is not supported (use a little-endian array: "
						 "a.astype(a.dtype.newbyteorder('<')))", s);
			if (s[0] == '=' || (s[0] == '|' && !one_byte))
				return fail(err, "dtype '%.3s' has no explicit byte order", s);
			*dtype = npy_codes[i].dtype;
			return 0;
		}
		if (memcmp(s + 1, "V2", 2) == 0)
			return fail(err, "dtype '%.3s' (opaque 2-byte, e.g. ml_dtypes bfloat16) is not read: "
					 "save bf16 inputs as float32, air rounds them", s);
	}
	return fail(err, "dtype '%.*s' is not one air has (f4 f8 f2 i8 i4 i2 i1 u1 b1, little-endian)",
		    (int)(n < 32 ? n : 32), s);
}

/* A cursor over the header text. */
typedef struct hdr_cursor {
	const char *s;
	size_t n, i;
} hdr_cursor;

static void skip_ws(hdr_cursor *c)
{
	while (c->i < c->n && (c->s[c->i] == ' ' || c->s[c->i] == '\t' || c->s[c->i] == '\n' || c->s[c->i] == '\r'))
		c->i++;
}

static int expect(hdr_cursor *c, char ch, char *err)
{
	skip_ws(c);
	if (c->i >= c->n || c->s[c->i] != ch)
		return fail(err, "header: expected '%c' at byte %zu", ch, c->i);
	c->i++;
	return 0;
}

static int peek(hdr_cursor *c, char ch)
{
	skip_ws(c);
	return c->i < c->n && c->s[c->i] == ch;
}

/* A quoted string without escapes (numpy's keys and simple descrs have
 * none): its bytes are s[*start .. *start + *len). */
static int parse_string(hdr_cursor *c, size_t *start, size_t *len, char *err)
{
	skip_ws(c);
	if (c->i >= c->n || (c->s[c->i] != '\'' && c->s[c->i] != '"'))
		return fail(err, "header: expected a quoted string at byte %zu", c->i);
	char q = c->s[c->i++];
	*start = c->i;
	while (c->i < c->n && c->s[c->i] != q) {
		if (c->s[c->i] == '\\')
			return fail(err, "header: escapes in strings are not supported (byte %zu)", c->i);
		c->i++;
	}
	if (c->i >= c->n)
		return fail(err, "header: unterminated string");
	*len = c->i - *start;
	c->i++;
	return 0;
}

static int parse_bool(hdr_cursor *c, int *value, char *err)
{
	skip_ws(c);
	if (c->n - c->i >= 4 && memcmp(c->s + c->i, "True", 4) == 0) {
		c->i += 4;
		*value = 1;
		return 0;
	}
	if (c->n - c->i >= 5 && memcmp(c->s + c->i, "False", 5) == 0) {
		c->i += 5;
		*value = 0;
		return 0;
	}
	return fail(err, "header: 'fortran_order' must be True or False (byte %zu)", c->i);
}

/* A non-negative decimal integer that fits in int64. */
static int parse_dim(hdr_cursor *c, int64_t *value, char *err)
{
	skip_ws(c);
	if (c->i >= c->n || c->s[c->i] < '0' || c->s[c->i] > '9')
		return fail(err, "header: expected a non-negative size in 'shape' at byte %zu", c->i);
	int64_t v = 0;
	while (c->i < c->n && c->s[c->i] >= '0' && c->s[c->i] <= '9') {
		int d = c->s[c->i++] - '0';
		if (v > (INT64_MAX - d) / 10)
			return fail(err, "header: a size in 'shape' overflows");
		v = v * 10 + d;
	}
	/* numpy never writes 'L' suffixes any more, but Python 2 files had them */
	if (c->i < c->n && c->s[c->i] == 'L')
		c->i++;
	*value = v;
	return 0;
}

/* '(' [dim {',' dim} [',']] ')' */
static int parse_shape(hdr_cursor *c, npy_array *a, char *err)
{
	if (expect(c, '(', err))
		return -1;
	a->rank = 0;
	while (!peek(c, ')')) {
		if (a->rank == AIR_MAX_RANK)
			return fail(err, "shape has more than %d dims (air's largest rank)", AIR_MAX_RANK);
		if (parse_dim(c, &a->dims[a->rank], err))
			return -1;
		a->rank++;
		if (peek(c, ','))
			c->i++;
		else if (!peek(c, ')'))
			return fail(err, "header: expected ',' or ')' in 'shape' at byte %zu", c->i);
	}
	c->i++;
	/* "(3)" is the int 3 in Python, not a tuple */
	return 0;
}

/* Fills a->dtype, rank, dims, count and nbytes from the header text. */
static int parse_dict(const char *s, size_t n, npy_array *a, char *err)
{
	hdr_cursor c = {s, n, 0};
	int have_descr = 0, have_order = 0, have_shape = 0, fortran = 0;
	if (expect(&c, '{', err))
		return -1;
	while (!peek(&c, '}')) {
		size_t ks, kl;
		if (parse_string(&c, &ks, &kl, err) || expect(&c, ':', err))
			return -1;
		const char *key = s + ks;
		if (kl == 5 && memcmp(key, "descr", 5) == 0) {
			size_t vs, vl;
			if (have_descr++)
				return fail(err, "header: 'descr' given twice");
			skip_ws(&c);
			if (c.i < c.n && (c.s[c.i] == '[' || c.s[c.i] == '{'))
				return fail(err, "structured dtypes are not supported");
			if (parse_string(&c, &vs, &vl, err) || parse_descr(s + vs, vl, &a->dtype, err))
				return -1;
		} else if (kl == 13 && memcmp(key, "fortran_order", 13) == 0) {
			if (have_order++)
				return fail(err, "header: 'fortran_order' given twice");
			if (parse_bool(&c, &fortran, err))
				return -1;
		} else if (kl == 5 && memcmp(key, "shape", 5) == 0) {
			if (have_shape++)
				return fail(err, "header: 'shape' given twice");
			if (parse_shape(&c, a, err))
				return -1;
		} else {
			return fail(err, "header: unknown key '%.*s'", (int)(kl < 32 ? kl : 32), key);
		}
		if (peek(&c, ','))
			c.i++;
		else if (!peek(&c, '}'))
			return fail(err, "header: expected ',' or '}' at byte %zu", c.i);
	}
	c.i++;
	skip_ws(&c);
	if (c.i != c.n)
		return fail(err, "header: junk after the dict at byte %zu", c.i);
	if (!have_descr || !have_order || !have_shape)
		return fail(err, "header: missing '%s'", !have_descr ? "descr" : !have_order ? "fortran_order" : "shape");
	if (fortran)
		return fail(err, "fortran_order arrays are not supported: save a C-order array "
				 "(numpy.ascontiguousarray(a))");
	size_t count = 1;
	for (int d = 0; d < a->rank; d++) {
		if ((uint64_t)a->dims[d] > SIZE_MAX || __builtin_mul_overflow(count, (size_t)a->dims[d], &count))
			return fail(err, "shape: the element count overflows");
	}
	size_t bytes;
	if (__builtin_mul_overflow(count, air_dtype_size(a->dtype), &bytes))
		return fail(err, "shape: the byte size overflows");
	a->count = count;
	a->nbytes = bytes;
	return 0;
}

/* The magic, version and header length at the start of a file of file_size
 * bytes; pre holds its first min(12, file_size) bytes. Sets where the header
 * text starts and how long it is, checked to lie inside the file. */
static int parse_preamble(const unsigned char *pre, size_t avail, uint64_t file_size, size_t *hdr_off,
			  size_t *hdr_len, char *err)
{
	if (avail < 10 || memcmp(pre, npy_magic, 6) != 0)
		return fail(err, "not a .npy file (no \\x93NUMPY magic)");
	int major = pre[6], minor = pre[7];
	if ((major != 1 && major != 2 && major != 3) || minor != 0)
		return fail(err, ".npy format version %d.%d is not supported (1.0, 2.0, 3.0 are)", major, minor);
	if (major == 1) {
		*hdr_off = 10;
		*hdr_len = (size_t)pre[8] | (size_t)pre[9] << 8;
	} else {
		if (avail < 12)
			return fail(err, "truncated .npy header");
		*hdr_off = 12;
		*hdr_len = (size_t)pre[8] | (size_t)pre[9] << 8 | (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
	}
	if (*hdr_len > file_size - *hdr_off)
		return fail(err, "truncated .npy header (%zu bytes claimed, %llu in the file)", *hdr_len,
			    (unsigned long long)(file_size - *hdr_off));
	return 0;
}

static void *alloc_data(size_t nbytes)
{
	void *p = NULL;
	/* at least one block so that a zero-size array still has a pointer */
	if (posix_memalign(&p, 64, nbytes ? nbytes : 64) != 0)
		return NULL;
	return p;
}

/* bool bytes other than 0 and 1 would break air's kernels, which rely on
 * them; numpy treats any nonzero byte as True, so do the same. */
static void normalize_bool(npy_array *a)
{
	if (a->dtype != AIR_BOOL)
		return;
	unsigned char *p = a->data;
	for (size_t i = 0; i < a->count; i++)
		p[i] = p[i] != 0;
}

static int check_data_size(const npy_array *a, uint64_t have, char *err)
{
	if (have < a->nbytes)
		return fail(err, "truncated data: the shape needs %zu bytes, the file has %llu", a->nbytes,
			    (unsigned long long)have);
	if (have > a->nbytes)
		return fail(err, "%llu bytes after the data the shape describes", (unsigned long long)(have - a->nbytes));
	return 0;
}

int npy_read_buffer(const void *buf, size_t size, npy_array *out, char *err)
{
	npy_array a;
	memset(&a, 0, sizeof a);
	memset(out, 0, sizeof *out);
	if (!buf && size)
		return fail(err, "no buffer");
	const unsigned char *b = buf;
	size_t off, len;
	if (parse_preamble(b, size, size, &off, &len, err) || parse_dict((const char *)b + off, len, &a, err) ||
	    check_data_size(&a, size - off - len, err))
		return -1;
	a.data = alloc_data(a.nbytes);
	if (!a.data)
		return fail(err, "out of memory (%zu bytes)", a.nbytes);
	if (a.nbytes)
		memcpy(a.data, b + off + len, a.nbytes);
	normalize_bool(&a);
	*out = a;
	return 0;
}

int npy_read_file(const char *path, npy_array *out, char *err)
{
	npy_array a;
	memset(&a, 0, sizeof a);
	memset(out, 0, sizeof *out);
	char *hdr = NULL;
	FILE *f = fopen(path, "rb");
	if (!f)
		return fail(err, "%s: %s", path, strerror(errno));
	struct stat st;
	unsigned char pre[12];
	size_t off, len;
	if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
		fail(err, "%s: not a regular file", path);
		goto error;
	}
	uint64_t file_size = (uint64_t)st.st_size;
	size_t got = fread(pre, 1, sizeof pre, f);
	if (parse_preamble(pre, got, file_size, &off, &len, err))
		goto error;
	/* len <= file_size: the allocation is bounded by the file */
	hdr = malloc(len ? len : 1);
	if (!hdr) {
		fail(err, "out of memory");
		goto error;
	}
	if (fseek(f, (long)off, SEEK_SET) != 0 || fread(hdr, 1, len, f) != len) {
		fail(err, "%s: read error", path);
		goto error;
	}
	if (parse_dict(hdr, len, &a, err) || check_data_size(&a, file_size - off - len, err))
		goto error;
	a.data = alloc_data(a.nbytes);
	if (!a.data) {
		fail(err, "out of memory (%zu bytes)", a.nbytes);
		goto error;
	}
	if (fread(a.data, 1, a.nbytes, f) != a.nbytes) {
		fail(err, "%s: read error", path);
		goto error;
	}
	normalize_bool(&a);
	free(hdr);
	fclose(f);
	*out = a;
	return 0;
error:
	if (err[0] && strncmp(err, path, strlen(path)) != 0) {
		char msg[NPY_ERR_SIZE];
		snprintf(msg, sizeof msg, "%s: %s", path, err);
		memcpy(err, msg, sizeof msg);
	}
	free(a.data);
	free(hdr);
	fclose(f);
	return -1;
}

int npy_write_buffer(air_dtype dtype, int rank, const int64_t *dims, const void *data, void **out, size_t *size,
		     char *err)
{
	*out = NULL;
	*size = 0;
	const char *code = NULL;
	for (size_t i = 0; i < sizeof npy_codes / sizeof npy_codes[0]; i++)
		if (npy_codes[i].dtype == dtype)
			code = npy_codes[i].code;
	if (!code)
		return fail(err, "dtype %s has no .npy form", air_dtype_name(dtype));
	if (rank < 0 || rank > AIR_MAX_RANK)
		return fail(err, "rank %d out of range", rank);
	char text[256];
	int n = snprintf(text, sizeof text, "{'descr': '%c%s', 'fortran_order': False, 'shape': (",
			 air_dtype_size(dtype) == 1 ? '|' : '<', code);
	size_t count = 1;
	for (int d = 0; d < rank; d++) {
		if (dims[d] < 0 || __builtin_mul_overflow(count, (size_t)dims[d], &count))
			return fail(err, "bad shape");
		n += snprintf(text + n, sizeof text - (size_t)n, "%s%lld", d ? ", " : "", (long long)dims[d]);
	}
	n += snprintf(text + n, sizeof text - (size_t)n, "%s), }", rank == 1 ? "," : "");
	size_t nbytes;
	if (__builtin_mul_overflow(count, air_dtype_size(dtype), &nbytes))
		return fail(err, "bad shape");
	/* magic(6) version(2) length(2) text spaces '\n', padded to 64 so that
	 * the data is aligned when the file is mapped */
	size_t hdr = 10 + (size_t)n + 1;
	size_t padded = (hdr + 63) / 64 * 64;
	size_t total;
	if (__builtin_add_overflow(padded, nbytes, &total))
		return fail(err, "bad shape");
	unsigned char *b = malloc(total);
	if (!b)
		return fail(err, "out of memory");
	memcpy(b, npy_magic, 6);
	b[6] = 1;
	b[7] = 0;
	b[8] = (unsigned char)((padded - 10) & 0xff);
	b[9] = (unsigned char)((padded - 10) >> 8);
	memcpy(b + 10, text, (size_t)n);
	memset(b + 10 + n, ' ', padded - 10 - (size_t)n - 1);
	b[padded - 1] = '\n';
	if (nbytes)
		memcpy(b + padded, data, nbytes);
	*out = b;
	*size = total;
	return 0;
}

int npy_write_file(const char *path, air_dtype dtype, int rank, const int64_t *dims, const void *data, char *err)
{
	void *buf;
	size_t size;
	if (npy_write_buffer(dtype, rank, dims, data, &buf, &size, err))
		return -1;
	FILE *f = fopen(path, "wb");
	if (!f) {
		free(buf);
		return fail(err, "%s: %s", path, strerror(errno));
	}
	size_t put = fwrite(buf, 1, size, f);
	int closed = fclose(f);
	free(buf);
	if (put != size || closed != 0)
		return fail(err, "%s: write error", path);
	return 0;
}

void npy_free(npy_array *array)
{
	if (!array)
		return;
	free(array->data);
	memset(array, 0, sizeof *array);
}

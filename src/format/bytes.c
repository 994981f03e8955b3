/* bytes.c - little-endian encoding for the .air format: a bounds-checked
 * reader over a byte range and a growing writer. Values are assembled byte
 * by byte, so neither the host's byte order nor alignment matters. */
#include <stdlib.h>
#include <string.h>

#include "format/format.h"

uint32_t af_load_u32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

uint64_t af_load_u64(const uint8_t *p)
{
	return (uint64_t)af_load_u32(p) | (uint64_t)af_load_u32(p + 4) << 32;
}

void af_store_u32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

void af_store_u64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static bool need(af_reader *r, size_t n)
{
	if (r->bad || af_left(r) < n) {
		r->bad = true;
		return false;
	}
	return true;
}

bool af_get_u8(af_reader *r, uint8_t *v)
{
	if (!need(r, 1))
		return false;
	*v = *r->p++;
	return true;
}

bool af_get_u32(af_reader *r, uint32_t *v)
{
	if (!need(r, 4))
		return false;
	*v = af_load_u32(r->p);
	r->p += 4;
	return true;
}

bool af_get_u64(af_reader *r, uint64_t *v)
{
	if (!need(r, 8))
		return false;
	*v = af_load_u64(r->p);
	r->p += 8;
	return true;
}

bool af_get_i64(af_reader *r, int64_t *v)
{
	uint64_t u;
	if (!af_get_u64(r, &u))
		return false;
	memcpy(v, &u, sizeof u);
	return true;
}

bool af_get_f64(af_reader *r, double *v)
{
	uint64_t u;
	if (!af_get_u64(r, &u))
		return false;
	memcpy(v, &u, sizeof u);
	return true;
}

bool af_get_str(af_reader *r, const char **s)
{
	uint32_t n;
	*s = NULL;
	if (!af_get_u32(r, &n))
		return false;
	if (n == AF_NO_STRING)
		return true;
	/* n + 1 cannot wrap: n < AF_NO_STRING */
	if (!need(r, (size_t)n + 1) || r->p[n] != 0 || memchr(r->p, 0, n)) {
		r->bad = true;
		return false;
	}
	*s = (const char *)r->p;
	r->p += (size_t)n + 1;
	return true;
}

void af_put_bytes(af_writer *w, const void *p, size_t n)
{
	if (w->oom)
		return;
	if (n > w->cap - w->len) {
		size_t cap = w->cap ? w->cap : 256;
		while (cap - w->len < n) {
			if (cap > SIZE_MAX / 2) {
				w->oom = true;
				return;
			}
			cap *= 2;
		}
		uint8_t *b = realloc(w->buf, cap);
		if (!b) {
			w->oom = true;
			return;
		}
		w->buf = b;
		w->cap = cap;
	}
	if (n)
		memcpy(w->buf + w->len, p, n);
	w->len += n;
}

void af_put_u8(af_writer *w, uint8_t v)
{
	af_put_bytes(w, &v, 1);
}

void af_put_u32(af_writer *w, uint32_t v)
{
	uint8_t b[4];
	af_store_u32(b, v);
	af_put_bytes(w, b, 4);
}

void af_put_u64(af_writer *w, uint64_t v)
{
	uint8_t b[8];
	af_store_u64(b, v);
	af_put_bytes(w, b, 8);
}

void af_put_f64(af_writer *w, double v)
{
	uint64_t u;
	memcpy(&u, &v, sizeof u);
	af_put_u64(w, u);
}

void af_put_str(af_writer *w, const char *s)
{
	if (!s) {
		af_put_u32(w, AF_NO_STRING);
		return;
	}
	size_t n = strlen(s);
	if (n >= AF_NO_STRING) {
		w->oom = true; /* cannot be encoded; reported as no memory */
		return;
	}
	af_put_u32(w, (uint32_t)n);
	af_put_bytes(w, s, n + 1);
}

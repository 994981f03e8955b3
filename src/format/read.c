/* read.c - decoding and checking a .air file: header, section table,
 * checksums, then the META, COMPILE and GRAPH sections into struct
 * air_file. Nothing is trusted: every offset, length, count, index, dtype,
 * rank and dim is checked before use; an array is allocated only after its
 * count was checked against the bytes left (each element needs at least one
 * byte there), so no allocation exceeds a small multiple of the file's own
 * size; nothing recurses on the data (expressions only refer backwards). */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "format/format.h"

#define BAD(...) air_error(AIR_BAD_FILE, "air file: " __VA_ARGS__)

void af_free_parsed(struct air_file *f)
{
	for (int i = 0; f->records && i < f->n_records; i++) {
		af_record *r = &f->records[i];
		free(r->in);
		for (int k = 0; r->attrs && k < r->n_attrs; k++)
			free(r->attrs[k].ints);
		free(r->attrs);
	}
	free(f->records);
	free(f->exprs);
	free(f->meta);
	free(f->input_rec);
	free(f->node_rec);
	free(f->outputs);
	free(f->output_names);
	free(f->ext_rec);
	free(f->ext_data);
	f->records = NULL;
	f->exprs = NULL;
	f->meta = NULL;
	f->input_rec = f->node_rec = f->ext_rec = NULL;
	f->outputs = NULL;
	f->output_names = NULL;
	f->ext_data = NULL;
}

/* calloc of count elements, after checking count against what the bytes
 * left could hold at min_bytes each */
static void *alloc_counted(const af_reader *r, uint32_t count, size_t min_bytes, size_t elem, air_status *st,
			   const char *what)
{
	if ((uint64_t)count * min_bytes > af_left(r)) {
		*st = BAD("%u %s cannot fit in the %zu bytes left", count, what, af_left(r));
		return NULL;
	}
	void *p = calloc((size_t)count + 1, elem);
	if (!p)
		*st = air_error(AIR_OUT_OF_MEMORY, "air file: no memory for %u %s", count, what);
	return p;
}

static air_status parse_meta(struct air_file *f, af_reader *r)
{
	uint32_t n;
	air_status st = AIR_OK;
	if (!af_get_u32(r, &n))
		return BAD("metadata truncated");
	if (n > INT32_MAX / 2)
		return BAD("metadata count %u", n);
	f->meta = alloc_counted(r, n, 10, 2 * sizeof(char *), &st, "metadata pairs");
	if (!f->meta)
		return st;
	for (uint32_t i = 0; i < n; i++) {
		const char *k, *v;
		if (!af_get_str(r, &k) || !af_get_str(r, &v) || !k || !v)
			return BAD("metadata pair %u is damaged", i);
		f->meta[2 * i] = k;
		f->meta[2 * i + 1] = v;
	}
	f->n_meta = (int)n;
	return AIR_OK;
}

static air_status parse_compile(struct air_file *f, af_reader *r)
{
	uint32_t flags, threads, fusion, disabled;
	if (!af_get_u32(r, &flags) || !af_get_u32(r, &threads) || !af_get_u32(r, &fusion) ||
	    !af_get_u32(r, &disabled))
		return BAD("compile options truncated");
	/* more bytes after these: fields of a later version, ignored */
	if ((int32_t)threads < 0 || (int32_t)threads > 1024 || (int32_t)fusion < 0)
		return BAD("compile options out of range");
	f->compile.flags = flags;
	f->compile.num_threads = (int32_t)threads;
	f->compile.fusion_threshold = (int32_t)fusion;
	f->compile.disabled_passes = disabled;
	return AIR_OK;
}

/* dtype, rank and dims of an input or constant record */
static air_status parse_type(struct air_file *f, af_reader *r, af_record *rec, int at)
{
	uint8_t dt, rank;
	if (!af_get_u8(r, &dt) || !af_get_u8(r, &rank))
		return BAD("record %d truncated", at);
	if (dt >= AIR_DTYPE_COUNT)
		return BAD("record %d: dtype %u", at, dt);
	if (rank > AIR_MAX_RANK)
		return BAD("record %d: rank %u", at, rank);
	rec->dtype = (air_dtype)dt;
	rec->rank = rank;
	for (int d = 0; d < rank; d++) {
		if (!af_get_i64(r, &rec->dims[d]))
			return BAD("record %d truncated", at);
		if (rec->dims[d] < 0 && -(rec->dims[d] + 1) >= f->n_exprs)
			return BAD("record %d: dim %d names no expression", at, d);
	}
	return AIR_OK;
}

static air_status parse_constant(struct air_file *f, af_reader *r, af_record *rec, int at)
{
	AIR_TRY(parse_type(f, r, rec, at));
	uint8_t flags;
	if (!af_get_u8(r, &flags) || !af_get_str(r, &rec->name) || !af_get_u64(r, &rec->offset) ||
	    !af_get_u64(r, &rec->nbytes))
		return BAD("constant record %d truncated", at);
	if (flags & ~AF_CONST_EXTERNAL)
		return BAD("constant record %d: unknown flags 0x%x", at, flags);
	rec->flags = flags;
	uint64_t n = air_dtype_size(rec->dtype);
	for (int d = 0; d < rec->rank; d++) {
		if (rec->dims[d] < 0)
			return BAD("constant record %d: dim %d is symbolic", at, d);
		if (__builtin_mul_overflow(n, (uint64_t)rec->dims[d], &n))
			return BAD("constant record %d: size overflows", at);
	}
	if (n != rec->nbytes)
		return BAD("constant record %d: %llu bytes for a %llu-byte tensor", at,
			   (unsigned long long)rec->nbytes, (unsigned long long)n);
	rec->external = -1;
	if (flags & AF_CONST_EXTERNAL) {
		if (!rec->name)
			return BAD("external constant record %d has no name", at);
		return AIR_OK;
	}
	if (rec->offset % AF_ALIGN)
		return BAD("constant record %d: offset %llu not %u-aligned", at, (unsigned long long)rec->offset,
			   AF_ALIGN);
	if (rec->offset > f->weights_len || rec->nbytes > f->weights_len - rec->offset)
		return BAD("constant record %d lies outside the weights section", at);
	f->weight_bytes += (size_t)rec->nbytes;
	return AIR_OK;
}

static air_status parse_node(struct air_file *f, af_reader *r, af_record *rec, int at)
{
	uint32_t n_in, n_out, n_attrs;
	air_status st = AIR_OK;
	if (!af_get_str(r, &rec->name) || !rec->name || !af_get_u32(r, &n_in))
		return BAD("node record %d truncated", at);
	if (n_in > AF_MAX_NODE_IN)
		return BAD("node record %d: %u inputs", at, n_in);
	if (!(rec->in = alloc_counted(r, n_in, 4, sizeof *rec->in, &st, "node inputs")))
		return st;
	rec->n_in = (int)n_in;
	for (uint32_t i = 0; i < n_in; i++) {
		if (!af_get_u32(r, &rec->in[i]))
			return BAD("node record %d truncated", at);
		if (rec->in[i] >= f->n_values)
			return BAD("node record %d: input %u is value %u, not defined before", at, i, rec->in[i]);
	}
	if (!af_get_u32(r, &n_out) || !af_get_u32(r, &n_attrs))
		return BAD("node record %d truncated", at);
	if (n_out < 1 || n_out > AF_MAX_NODE_OUT)
		return BAD("node record %d: %u outputs", at, n_out);
	if (n_attrs > AF_MAX_ATTRS)
		return BAD("node record %d: %u attributes", at, n_attrs);
	rec->n_out = (int)n_out;
	if (!(rec->attrs = alloc_counted(r, n_attrs, 13, sizeof *rec->attrs, &st, "attributes")))
		return st;
	for (uint32_t k = 0; k < n_attrs; k++) {
		af_attr *a = &rec->attrs[k];
		rec->n_attrs = (int)k + 1; /* so af_free_parsed frees what was made */
		if (!af_get_str(r, &a->name) || !a->name || !af_get_u8(r, &a->type))
			return BAD("node record %d: attribute %u truncated", at, k);
		switch (a->type) {
		case AF_ATTR_INT:
		case AF_ATTR_DIM:
			if (!af_get_i64(r, &a->i))
				return BAD("node record %d: attribute %u truncated", at, k);
			if (a->type == AF_ATTR_DIM && a->i < 0 && -(a->i + 1) >= f->n_exprs)
				return BAD("node record %d: attribute %s names no expression", at, a->name);
			break;
		case AF_ATTR_FLOAT:
			if (!af_get_f64(r, &a->f))
				return BAD("node record %d: attribute %u truncated", at, k);
			break;
		case AF_ATTR_INTS:
		case AF_ATTR_DIMS: {
			uint32_t n;
			if (!af_get_u32(r, &n))
				return BAD("node record %d: attribute %u truncated", at, k);
			if (n > AF_MAX_LIST)
				return BAD("node record %d: attribute %s has %u entries", at, a->name, n);
			if (!(a->ints = alloc_counted(r, n, 8, sizeof *a->ints, &st, "list entries")))
				return st;
			a->n = (int)n;
			for (uint32_t j = 0; j < n; j++) {
				af_get_i64(r, &a->ints[j]); /* cannot fail: counted above */
				if (a->type == AF_ATTR_DIMS && a->ints[j] < 0 && -(a->ints[j] + 1) >= f->n_exprs)
					return BAD("node record %d: attribute %s names no expression", at, a->name);
			}
			break;
		}
		default: return BAD("node record %d: attribute %s has type %u", at, a->name, a->type);
		}
	}
	return AIR_OK;
}

static air_status parse_graph(struct air_file *f, af_reader *r)
{
	air_status st = AIR_OK;
	uint32_t n;
	if (!af_get_u32(r, &n))
		return BAD("graph truncated");
	if (n > INT32_MAX)
		return BAD("%u expressions", n);
	if (!(f->exprs = alloc_counted(r, n, 5, sizeof *f->exprs, &st, "expressions")))
		return st;
	for (uint32_t i = 0; i < n; i++) {
		af_expr *e = &f->exprs[i];
		if (!af_get_u8(r, &e->kind))
			return BAD("expression %u truncated", i);
		if (e->kind == AF_EXPR_SYMBOL) {
			if (!af_get_str(r, &e->name))
				return BAD("expression %u truncated", i);
		} else if (e->kind == AF_EXPR_BINARY) {
			if (!af_get_u8(r, &e->op) || !af_get_i64(r, &e->a) || !af_get_i64(r, &e->b))
				return BAD("expression %u truncated", i);
			if (e->op > AIR_DIM_MAX)
				return BAD("expression %u: operation %u", i, e->op);
			/* operands refer backwards only: no cycles, no recursion */
			if ((e->a < 0 && -(e->a + 1) >= (int64_t)i) || (e->b < 0 && -(e->b + 1) >= (int64_t)i))
				return BAD("expression %u refers forward", i);
		} else {
			return BAD("expression %u has kind %u", i, e->kind);
		}
		f->n_exprs = (int)i + 1;
	}
	if (!af_get_u32(r, &n))
		return BAD("graph truncated");
	if (n > INT32_MAX)
		return BAD("%u records", n);
	if (!(f->records = alloc_counted(r, n, 8, sizeof *f->records, &st, "records")) ||
	    !(f->input_rec = alloc_counted(r, n, 8, sizeof(int), &st, "records")) ||
	    !(f->node_rec = alloc_counted(r, n, 8, sizeof(int), &st, "records")) ||
	    !(f->ext_rec = alloc_counted(r, n, 8, sizeof(int), &st, "records")))
		return st;
	for (uint32_t i = 0; i < n; i++) {
		af_record *rec = &f->records[i];
		f->n_records = (int)i + 1;
		rec->first_value = f->n_values;
		if (!af_get_u8(r, &rec->kind))
			return BAD("record %u truncated", i);
		if (rec->kind == AF_REC_INPUT) {
			if (!af_get_str(r, &rec->name))
				return BAD("record %u truncated", i);
			AIR_TRY(parse_type(f, r, rec, (int)i));
			f->input_rec[f->n_inputs++] = (int)i;
			f->n_values++;
		} else if (rec->kind == AF_REC_CONSTANT) {
			AIR_TRY(parse_constant(f, r, rec, (int)i));
			if (rec->flags & AF_CONST_EXTERNAL) {
				rec->external = f->n_externals;
				for (int k = 0; k < f->n_externals; k++)
					if (strcmp(f->records[f->ext_rec[k]].name, rec->name) == 0)
						return BAD("external constant '%s' twice", rec->name);
				f->ext_rec[f->n_externals++] = (int)i;
			}
			f->n_consts++;
			f->n_values++;
		} else if (rec->kind == AF_REC_NODE) {
			AIR_TRY(parse_node(f, r, rec, (int)i));
			if (f->n_values > (uint32_t)INT32_MAX - AF_MAX_NODE_OUT)
				return BAD("too many values");
			f->node_rec[f->n_nodes++] = (int)i;
			f->n_values += (uint32_t)rec->n_out;
		} else {
			return BAD("record %u has kind %u", i, rec->kind);
		}
	}
	if (!af_get_u32(r, &n))
		return BAD("graph truncated");
	if (!(f->outputs = alloc_counted(r, n, 8, sizeof *f->outputs, &st, "outputs")) ||
	    !(f->output_names = alloc_counted(r, n, 8, sizeof *f->output_names, &st, "outputs")))
		return st;
	for (uint32_t i = 0; i < n; i++) {
		if (!af_get_u32(r, &f->outputs[i]) || !af_get_str(r, &f->output_names[i]))
			return BAD("output %u truncated", i);
		if (f->outputs[i] >= f->n_values)
			return BAD("output %u is value %u of %u", i, f->outputs[i], f->n_values);
	}
	f->n_outputs = (int)n;
	/* bytes after the outputs: fields of a later version, ignored */
	if (!(f->ext_data = calloc((size_t)f->n_externals + 1, sizeof *f->ext_data)))
		return air_error(AIR_OUT_OF_MEMORY, "air file: no memory");
	return AIR_OK;
}

typedef struct sec_entry {
	uint32_t kind, flags, crc;
	uint64_t offset, len;
} sec_entry;

/* Every byte outside the header, the table and the sections (alignment
 * padding) must be zero, so that no byte of a file escapes the checks. */
static air_status check_gaps(const uint8_t *d, size_t size, uint64_t header_size, uint64_t table, uint32_t n_sec,
			     const sec_entry *sec)
{
	/* the covered ranges, sorted by start (insertion sort: at most
	 * AF_MAX_SECTIONS + 1 of them) */
	uint64_t start[AF_MAX_SECTIONS + 1], end[AF_MAX_SECTIONS + 1];
	int n = 0;
	for (uint32_t i = 0; i <= n_sec; i++) {
		uint64_t s = i < n_sec ? sec[i].offset : table;
		uint64_t e = i < n_sec ? sec[i].offset + sec[i].len : table + (uint64_t)n_sec * AF_ENTRY_SIZE;
		int k = n++;
		while (k > 0 && start[k - 1] > s) {
			start[k] = start[k - 1];
			end[k] = end[k - 1];
			k--;
		}
		start[k] = s;
		end[k] = e;
	}
	uint64_t pos = header_size;
	for (int i = 0; i <= n; i++) {
		uint64_t next = i < n ? start[i] : size;
		for (uint64_t p = pos; p < next; p++)
			if (d[p])
				return BAD("non-zero byte at %llu outside every section", (unsigned long long)p);
		if (i < n && end[i] > pos)
			pos = end[i];
	}
	return AIR_OK;
}

air_status af_parse(struct air_file *f, uint32_t flags)
{
	const uint8_t *d = f->data;
	size_t size = f->size;
	if (size < AF_HEADER_SIZE || memcmp(d, AF_MAGIC, AF_MAGIC_LEN) != 0)
		return BAD("not a .air file (no magic)");
	uint32_t version = af_load_u32(d + AF_H_VERSION);
	if (version == 0)
		return BAD("format version 0");
	if (version > AF_VERSION)
		return air_error(AIR_UNSUPPORTED, "air file: format version %u; this libair reads up to %u", version,
				 AF_VERSION);
	f->version = version;
	uint8_t h[AF_HEADER_SIZE];
	memcpy(h, d, sizeof h);
	uint32_t hcrc = af_load_u32(h + AF_H_HEADER_CRC);
	af_store_u32(h + AF_H_HEADER_CRC, 0);
	if (af_crc32(0, h, sizeof h) != hcrc)
		return BAD("header checksum mismatch");
	uint32_t header_size = af_load_u32(d + AF_H_HEADER_SIZE);
	uint64_t file_size = af_load_u64(d + AF_H_FILE_SIZE);
	uint64_t table = af_load_u64(d + AF_H_TABLE_OFFSET);
	uint32_t n_sec = af_load_u32(d + AF_H_SECTION_COUNT);
	if (header_size != AF_HEADER_SIZE) /* version 1's; a larger header is a new version */
		return BAD("header size %u", header_size);
	if (file_size != size)
		return BAD("the header says %llu bytes, the file has %zu (truncated?)", (unsigned long long)file_size,
			   size);
	if (af_load_u32(d + AF_H_FLAGS) != 0)
		return BAD("unknown header flags");
	if (n_sec > AF_MAX_SECTIONS)
		return BAD("%u sections", n_sec);
	if (table < header_size || table > size || (uint64_t)n_sec * AF_ENTRY_SIZE > size - table)
		return BAD("section table outside the file");
	if (af_crc32(0, d + table, (size_t)n_sec * AF_ENTRY_SIZE) != af_load_u32(d + AF_H_TABLE_CRC))
		return BAD("section table checksum mismatch");
	sec_entry sec[AF_MAX_SECTIONS];
	int graph = -1, meta = -1, weights = -1, compile = -1;
	for (uint32_t i = 0; i < n_sec; i++) {
		const uint8_t *t = d + table + (size_t)i * AF_ENTRY_SIZE;
		sec_entry *s = &sec[i];
		s->kind = af_load_u32(t);
		s->flags = af_load_u32(t + 4);
		s->offset = af_load_u64(t + 8);
		s->len = af_load_u64(t + 16);
		s->crc = af_load_u32(t + 24);
		if (s->offset < header_size || s->offset > size || s->len > size - s->offset)
			return BAD("section %u outside the file", i);
		/* no section may overlap the table or another section */
		uint64_t tend = table + (uint64_t)n_sec * AF_ENTRY_SIZE;
		if (s->len && s->offset < tend && table < s->offset + s->len)
			return BAD("section %u overlaps the section table", i);
		for (uint32_t j = 0; j < i; j++)
			if (s->len && sec[j].len && s->offset < sec[j].offset + sec[j].len &&
			    sec[j].offset < s->offset + s->len)
				return BAD("sections %u and %u overlap", j, i);
		int *slot = s->kind == AF_SEC_GRAPH ? &graph : s->kind == AF_SEC_META ? &meta
			  : s->kind == AF_SEC_WEIGHTS ? &weights : s->kind == AF_SEC_COMPILE ? &compile : NULL;
		if (!slot) {
			if (s->flags & AF_SECTION_REQUIRED)
				return air_error(AIR_UNSUPPORTED, "air file: required section of unknown kind %u",
						 s->kind);
			continue; /* unknown and optional: skipped unread */
		}
		if (*slot >= 0)
			return BAD("section kind %u twice", s->kind);
		*slot = (int)i;
		if (s->kind == AF_SEC_WEIGHTS && (flags & AIR_LOAD_NO_WEIGHT_CHECKSUM))
			continue;
		if (af_crc32(0, d + s->offset, (size_t)s->len) != s->crc)
			return BAD("section %u (kind %u) checksum mismatch", i, s->kind);
	}
	if (graph < 0)
		return BAD("no graph section");
	AIR_TRY(check_gaps(d, size, header_size, table, n_sec, sec));
	if (weights >= 0) {
		if (sec[weights].offset % AF_ALIGN)
			return BAD("weights section not %u-aligned", AF_ALIGN);
		f->weights = d + sec[weights].offset;
		f->weights_len = sec[weights].len;
	}
	air_compile_options_init(&f->compile);
	af_reader r;
	if (meta >= 0) {
		r = (af_reader){d + sec[meta].offset, d + sec[meta].offset + sec[meta].len, false};
		AIR_TRY(parse_meta(f, &r));
	}
	if (compile >= 0) {
		r = (af_reader){d + sec[compile].offset, d + sec[compile].offset + sec[compile].len, false};
		AIR_TRY(parse_compile(f, &r));
	}
	r = (af_reader){d + sec[graph].offset, d + sec[graph].offset + sec[graph].len, false};
	return parse_graph(f, &r);
}

air_status af_bind_externals(struct air_file *f, const air_external *ext, int n)
{
	if (n < 0 || (n > 0 && !ext))
		return air_error(AIR_INVALID_ARGUMENT, "air file: bad externals array");
	for (int i = 0; i < n; i++) {
		int k = -1;
		if (ext[i].name) {
			for (int j = 0; j < f->n_externals && k < 0; j++)
				if (strcmp(f->records[f->ext_rec[j]].name, ext[i].name) == 0)
					k = j;
			if (k < 0)
				return air_error(AIR_INVALID_ARGUMENT, "air file: no external constant named '%s'",
						 ext[i].name);
		} else {
			if (ext[i].index < 0 || ext[i].index >= f->n_externals)
				return air_error(AIR_INVALID_ARGUMENT, "air file: no external constant %d (of %d)",
						 ext[i].index, f->n_externals);
			k = ext[i].index;
		}
		const af_record *rec = &f->records[f->ext_rec[k]];
		if (ext[i].nbytes != rec->nbytes)
			return air_error(AIR_INVALID_ARGUMENT, "air file: external '%s' is %llu bytes, given %zu",
					 rec->name, (unsigned long long)rec->nbytes, ext[i].nbytes);
		if (rec->nbytes && !ext[i].data)
			return air_error(AIR_INVALID_ARGUMENT, "air file: external '%s' given no data", rec->name);
		if (f->ext_data[k])
			return air_error(AIR_INVALID_ARGUMENT, "air file: external '%s' bound twice", rec->name);
		f->ext_data[k] = ext[i].data ? ext[i].data : (const void *)f; /* any non-NULL for 0 bytes */
	}
	return AIR_OK;
}

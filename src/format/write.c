/* write.c - saving a graph as a .air file: air_graph_save_buffer builds the
 * sections (META, COMPILE, GRAPH, WEIGHTS) and lays them out behind the
 * header and section table with their CRCs; air_graph_save_file writes that
 * to a temporary file beside the target and renames it (atomic). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/graph.h"
#include "format/format.h"
#include "ops/op.h"

void air_free(void *p)
{
	free(p);
}

void air_save_options_init(air_save_options *o)
{
	if (!o)
		return;
	memset(o, 0, sizeof *o);
	o->size = sizeof *o;
}

static air_status check_options(const air_graph *g, const air_save_options *o)
{
	if (o->n_meta < 0 || (o->n_meta && (!o->meta_keys || !o->meta_values)))
		return air_error(AIR_INVALID_ARGUMENT, "air_graph_save: bad metadata arrays");
	for (int i = 0; i < o->n_meta; i++) {
		if (!o->meta_keys[i] || !o->meta_keys[i][0] || !o->meta_values[i])
			return air_error(AIR_INVALID_ARGUMENT, "air_graph_save: metadata %d has no key or value", i);
		for (int j = 0; j < i; j++)
			if (strcmp(o->meta_keys[i], o->meta_keys[j]) == 0)
				return air_error(AIR_INVALID_ARGUMENT, "air_graph_save: metadata key '%s' twice",
						 o->meta_keys[i]);
	}
	if (o->output_names && o->n_output_names != g->n_outputs)
		return air_error(AIR_INVALID_ARGUMENT, "air_graph_save: %d output names for %d outputs",
				 o->n_output_names, g->n_outputs);
	if (o->n_externals < 0 || (o->n_externals && (!o->externals || !o->external_names)))
		return air_error(AIR_INVALID_ARGUMENT, "air_graph_save: bad external arrays");
	for (int i = 0; i < o->n_externals; i++) {
		air_value v = o->externals[i];
		if (v >= (air_value)g->n_values || g->values[v].kind != IR_CONSTANT)
			return air_error(AIR_INVALID_ARGUMENT, "air_graph_save: external %d is not a constant", i);
		if (!o->external_names[i])
			return air_error(AIR_INVALID_ARGUMENT, "air_graph_save: external %d has no name", i);
		for (int j = 0; j < i; j++)
			if (o->externals[j] == v || strcmp(o->external_names[i], o->external_names[j]) == 0)
				return air_error(AIR_INVALID_ARGUMENT, "air_graph_save: external %d repeats %d", i,
						 j);
	}
	return AIR_OK;
}

static int external_of(const air_save_options *o, air_value v)
{
	for (int i = 0; i < o->n_externals; i++)
		if (o->externals[i] == v)
			return i;
	return -1;
}

static size_t align_up(size_t n)
{
	return (n + AF_ALIGN - 1) & ~(size_t)(AF_ALIGN - 1);
}

static void put_dims(af_writer *w, const ir_value *v)
{
	af_put_u8(w, (uint8_t)v->dtype);
	af_put_u8(w, (uint8_t)v->rank);
	for (int d = 0; d < v->rank; d++)
		af_put_u64(w, (uint64_t)v->dims[d]);
}

static void put_node(af_writer *w, const ir_node *n)
{
	const op_def *def = op_get(n->op);
	af_put_str(w, def->name);
	af_put_u32(w, (uint32_t)n->n_in);
	for (int i = 0; i < n->n_in; i++)
		af_put_u32(w, n->in[i]);
	af_put_u32(w, (uint32_t)n->n_out);
	uint32_t n_attrs = 0;
	for (int s = 0; s < def->n_attrs; s++)
		n_attrs += n->attrs[s].set;
	af_put_u32(w, n_attrs);
	/* only the attributes that were given: defaults are the reading
	 * library's, as they are for a graph built in memory */
	for (int s = 0; s < def->n_attrs; s++) {
		const ir_attr *a = &n->attrs[s];
		if (!a->set)
			continue;
		af_put_str(w, def->attrs[s].name);
		switch (def->attrs[s].type) {
		case OPA_INT: af_put_u8(w, AF_ATTR_INT); af_put_u64(w, (uint64_t)a->i); break;
		case OPA_DIM: af_put_u8(w, AF_ATTR_DIM); af_put_u64(w, (uint64_t)a->i); break;
		case OPA_FLOAT: af_put_u8(w, AF_ATTR_FLOAT); af_put_f64(w, a->f); break;
		case OPA_INTS:
		case OPA_DIMS:
			af_put_u8(w, def->attrs[s].type == OPA_INTS ? AF_ATTR_INTS : AF_ATTR_DIMS);
			af_put_u32(w, (uint32_t)a->n);
			for (int j = 0; j < a->n; j++)
				af_put_u64(w, (uint64_t)a->ints[j]);
			break;
		}
	}
}

/* The GRAPH section; *offsets gets each constant's offset in WEIGHTS and
 * *weights_len the section's length. */
static air_status put_graph(af_writer *w, const air_graph *g, const air_save_options *o, uint64_t *offsets,
			    uint64_t *weights_len)
{
	af_put_u32(w, (uint32_t)g->n_exprs);
	for (int i = 0; i < g->n_exprs; i++) {
		const ir_expr *e = &g->exprs[i];
		if (e->kind == IR_EXPR_SYMBOL) {
			af_put_u8(w, AF_EXPR_SYMBOL);
			af_put_str(w, g->symbol_names[e->symbol]);
			continue;
		}
		/* operands always come earlier: the reader relies on it */
		if ((e->a < 0 && -(e->a + 1) >= i) || (e->b < 0 && -(e->b + 1) >= i))
			return air_error(AIR_INTERNAL, "air_graph_save: expression %d refers forward", i);
		af_put_u8(w, AF_EXPR_BINARY);
		af_put_u8(w, (uint8_t)e->op);
		af_put_u64(w, (uint64_t)e->a);
		af_put_u64(w, (uint64_t)e->b);
	}
	/* records in value order: the reader numbers values the same way */
	uint32_t n_records = 0;
	for (int v = 0; v < g->n_values; v++) {
		const ir_value *x = &g->values[v];
		if (x->kind == IR_DEAD)
			return air_error(AIR_INVALID_ARGUMENT, "air_graph_save: value %d is dead (a compiled graph?)", v);
		if (x->kind != IR_NODE_OUTPUT || g->nodes[x->index].out[0] == (air_value)v)
			n_records++;
	}
	af_put_u32(w, n_records);
	uint64_t wpos = 0;
	for (int v = 0; v < g->n_values; v++) {
		const ir_value *x = &g->values[v];
		if (x->kind == IR_INPUT) {
			af_put_u8(w, AF_REC_INPUT);
			af_put_str(w, g->input_names[x->index]);
			put_dims(w, x);
		} else if (x->kind == IR_CONSTANT) {
			const ir_constant *c = &g->consts[x->index];
			int ext = external_of(o, (air_value)v);
			if (ext < 0 && c->nbytes && !c->data)
				return air_error(AIR_INVALID_ARGUMENT, "air_graph_save: constant %d has no data", v);
			af_put_u8(w, AF_REC_CONSTANT);
			put_dims(w, x);
			af_put_u8(w, ext >= 0 ? AF_CONST_EXTERNAL : 0);
			af_put_str(w, ext >= 0 ? o->external_names[ext] : NULL);
			uint64_t off = 0;
			if (ext < 0) {
				off = wpos;
				wpos = align_up(wpos + c->nbytes);
			}
			offsets[x->index] = off;
			af_put_u64(w, off);
			af_put_u64(w, c->nbytes);
		} else {
			const ir_node *n = &g->nodes[x->index];
			if (n->out[0] != (air_value)v)
				continue;
			for (int k = 1; k < n->n_out; k++)
				if (n->out[k] != n->out[0] + (air_value)k)
					return air_error(AIR_INTERNAL, "air_graph_save: node outputs not in a row");
			af_put_u8(w, AF_REC_NODE);
			put_node(w, n);
		}
	}
	af_put_u32(w, (uint32_t)g->n_outputs);
	for (int i = 0; i < g->n_outputs; i++) {
		af_put_u32(w, g->outputs[i]);
		af_put_str(w, o->output_names ? o->output_names[i] : NULL);
	}
	*weights_len = wpos;
	return AIR_OK;
}

static void put_meta(af_writer *w, const air_save_options *o)
{
	af_put_u32(w, (uint32_t)o->n_meta);
	for (int i = 0; i < o->n_meta; i++) {
		af_put_str(w, o->meta_keys[i]);
		af_put_str(w, o->meta_values[i]);
	}
}

static void put_compile(af_writer *w, const air_compile_options *c)
{
	air_compile_options d;
	air_compile_options_init(&d);
	if (!c)
		c = &d;
	af_put_u32(w, c->flags);
	af_put_u32(w, (uint32_t)c->num_threads);
	af_put_u32(w, (uint32_t)c->fusion_threshold);
	af_put_u32(w, c->disabled_passes);
}

typedef struct section {
	uint32_t kind, flags;
	const uint8_t *bytes; /* NULL for weights: copied from the constants */
	uint64_t len, offset;
} section;

air_status air_graph_save_buffer(const air_graph *g, const air_save_options *options, void **out, size_t *size)
{
	if (out)
		*out = NULL;
	if (size)
		*size = 0;
	if (!g || !out || !size)
		return air_error(AIR_INVALID_ARGUMENT, "air_graph_save_buffer: NULL argument");
	air_save_options o;
	air_save_options_init(&o);
	if (options) {
		if (options->size < sizeof(size_t) || options->size > 4096)
			return air_error(AIR_INVALID_ARGUMENT, "air_graph_save: options.size is %zu; call "
							       "air_save_options_init", options->size);
		memcpy(&o, options, sizeof o < options->size ? sizeof o : options->size);
	}
	AIR_TRY(air_graph_verify(g));
	AIR_TRY(check_options(g, &o));
	if (o.compile && (o.compile->size < offsetof(air_compile_options, disabled_passes) + sizeof(uint32_t)))
		return air_error(AIR_INVALID_ARGUMENT, "air_graph_save: compile options too old");

	uint64_t *offsets = calloc((size_t)g->n_consts + 1, sizeof *offsets);
	af_writer meta = {0}, comp = {0}, graph = {0};
	uint8_t *buf = NULL;
	air_status st = AIR_OK;
	if (!offsets) {
		st = air_error(AIR_OUT_OF_MEMORY, "air_graph_save: no memory");
		goto done;
	}
	uint64_t weights_len = 0;
	put_meta(&meta, &o);
	put_compile(&comp, o.compile);
	if ((st = put_graph(&graph, g, &o, offsets, &weights_len)) != AIR_OK)
		goto done;
	if (meta.oom || comp.oom || graph.oom) {
		st = air_error(AIR_OUT_OF_MEMORY, "air_graph_save: no memory");
		goto done;
	}
	section sec[4] = {
		{AF_SEC_META, 0, meta.buf, meta.len, 0},
		{AF_SEC_COMPILE, 0, comp.buf, comp.len, 0},
		{AF_SEC_GRAPH, AF_SECTION_REQUIRED, graph.buf, graph.len, 0},
		{AF_SEC_WEIGHTS, AF_SECTION_REQUIRED, NULL, weights_len, 0},
	};
	int n_sec = 4;
	/* layout: header, table, small sections 8-aligned, weights 64-aligned */
	uint64_t pos = AF_HEADER_SIZE + (uint64_t)n_sec * AF_ENTRY_SIZE;
	for (int i = 0; i < n_sec; i++) {
		pos = i == 3 ? align_up(pos) : (pos + 7) & ~(uint64_t)7;
		sec[i].offset = pos;
		pos += sec[i].len;
	}
	if (pos > SIZE_MAX) {
		st = air_error(AIR_OUT_OF_MEMORY, "air_graph_save: %llu bytes", (unsigned long long)pos);
		goto done;
	}
	buf = calloc(1, (size_t)pos);
	if (!buf) {
		st = air_error(AIR_OUT_OF_MEMORY, "air_graph_save: no memory for %llu bytes", (unsigned long long)pos);
		goto done;
	}
	for (int i = 0; i < 3; i++)
		if (sec[i].len)
			memcpy(buf + sec[i].offset, sec[i].bytes, sec[i].len);
	for (int i = 0; i < g->n_consts; i++) {
		const ir_constant *c = &g->consts[i];
		if (external_of(&o, c->value) < 0 && c->nbytes)
			memcpy(buf + sec[3].offset + offsets[i], c->data, c->nbytes);
	}
	uint8_t *t = buf + AF_HEADER_SIZE;
	for (int i = 0; i < n_sec; i++, t += AF_ENTRY_SIZE) {
		af_store_u32(t, sec[i].kind);
		af_store_u32(t + 4, sec[i].flags);
		af_store_u64(t + 8, sec[i].offset);
		af_store_u64(t + 16, sec[i].len);
		af_store_u32(t + 24, af_crc32(0, buf + sec[i].offset, (size_t)sec[i].len));
	}
	memcpy(buf, AF_MAGIC, AF_MAGIC_LEN);
	af_store_u32(buf + AF_H_VERSION, AF_VERSION);
	af_store_u32(buf + AF_H_HEADER_SIZE, AF_HEADER_SIZE);
	af_store_u64(buf + AF_H_FILE_SIZE, pos);
	af_store_u64(buf + AF_H_TABLE_OFFSET, AF_HEADER_SIZE);
	af_store_u32(buf + AF_H_SECTION_COUNT, (uint32_t)n_sec);
	af_store_u32(buf + AF_H_TABLE_CRC, af_crc32(0, buf + AF_HEADER_SIZE, (size_t)n_sec * AF_ENTRY_SIZE));
	af_store_u32(buf + AF_H_HEADER_CRC, af_crc32(0, buf, AF_HEADER_SIZE));
	*out = buf;
	*size = (size_t)pos;
	buf = NULL;
done:
	free(buf);
	free(offsets);
	free(meta.buf);
	free(comp.buf);
	free(graph.buf);
	return st;
}

air_status air_graph_save_file(const air_graph *g, const air_save_options *options, const char *path)
{
	if (!path)
		return air_error(AIR_INVALID_ARGUMENT, "air_graph_save_file: path is NULL");
	void *data;
	size_t size;
	AIR_TRY(air_graph_save_buffer(g, options, &data, &size));
	size_t plen = strlen(path);
	char *tmp = malloc(plen + 32);
	if (!tmp) {
		free(data);
		return air_error(AIR_OUT_OF_MEMORY, "air_graph_save_file: no memory");
	}
	/* beside the target, so rename stays in one filesystem (atomic) */
	snprintf(tmp, plen + 32, "%s.tmp.%ld.XXXXXX", path, (long)getpid());
	air_status st = AIR_OK;
	int fd = mkstemp(tmp);
	if (fd < 0) {
		st = air_error(AIR_INVALID_ARGUMENT, "air_graph_save_file: cannot create %s: %s", tmp, strerror(errno));
		goto done;
	}
	const uint8_t *p = data;
	size_t left = size;
	while (left) {
		ssize_t k = write(fd, p, left);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			st = air_error(AIR_INVALID_ARGUMENT, "air_graph_save_file: writing %s: %s", tmp,
				       strerror(errno));
			break;
		}
		p += k;
		left -= (size_t)k;
	}
	if (st == AIR_OK && fsync(fd) != 0)
		st = air_error(AIR_INVALID_ARGUMENT, "air_graph_save_file: fsync %s: %s", tmp, strerror(errno));
	/* mkstemp makes the file 0600; a saved model is an ordinary file */
	if (st == AIR_OK)
		(void)fchmod(fd, 0644);
	if (close(fd) != 0 && st == AIR_OK)
		st = air_error(AIR_INVALID_ARGUMENT, "air_graph_save_file: closing %s: %s", tmp, strerror(errno));
	if (st == AIR_OK && rename(tmp, path) != 0)
		st = air_error(AIR_INVALID_ARGUMENT, "air_graph_save_file: renaming to %s: %s", path,
			       strerror(errno));
	if (st != AIR_OK)
		unlink(tmp);
done:
	free(tmp);
	free(data);
	return st;
}

/* file.c - air_file's life and what it tells without building the graph:
 * opening from memory (copied or borrowed) or from disk (mapped), the
 * reference count a model takes, and the getters (metadata, names, ops,
 * externals, compile options). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "format/format.h"

void air_load_options_init(air_load_options *o)
{
	if (!o)
		return;
	memset(o, 0, sizeof *o);
	o->size = sizeof *o;
}

static void file_free(air_file *f)
{
	af_free_parsed(f);
	free(f->owned);
	if (f->map)
		munmap(f->map, f->map_len);
	free(f);
}

void air_file_close(air_file *f)
{
	if (f && --f->refs == 0)
		file_free(f);
}

static air_status copy_options(const air_load_options *options, air_load_options *o)
{
	air_load_options_init(o);
	if (!options)
		return AIR_OK;
	if (options->size < sizeof(size_t) || options->size > 4096)
		return air_error(AIR_INVALID_ARGUMENT, "air_file_open: options.size is %zu; call air_load_options_init",
				 options->size);
	memcpy(o, options, sizeof *o < options->size ? sizeof *o : options->size);
	if (o->flags & ~(uint32_t)(AIR_LOAD_BORROW | AIR_LOAD_NO_WEIGHT_CHECKSUM))
		return air_error(AIR_INVALID_ARGUMENT, "air_file_open: unknown flags 0x%x", o->flags);
	return AIR_OK;
}

/* parse f (its data set) and bind externals; frees f on failure */
static air_status finish_open(air_file *f, const air_load_options *o, air_file **out)
{
	air_status st = af_parse(f, o->flags);
	if (st == AIR_OK)
		st = af_bind_externals(f, o->externals, o->n_externals);
	if (st != AIR_OK) {
		file_free(f);
		return st;
	}
	*out = f;
	return AIR_OK;
}

air_status air_file_open_buffer(const void *data, size_t size, const air_load_options *options, air_file **out)
{
	if (!out)
		return air_error(AIR_INVALID_ARGUMENT, "air_file_open_buffer: out is NULL");
	*out = NULL;
	if (!data && size)
		return air_error(AIR_INVALID_ARGUMENT, "air_file_open_buffer: data is NULL");
	air_load_options o;
	AIR_TRY(copy_options(options, &o));
	air_file *f = calloc(1, sizeof *f);
	if (!f)
		return air_error(AIR_OUT_OF_MEMORY, "air_file_open_buffer: no memory");
	f->refs = 1;
	f->size = size;
	if (o.flags & AIR_LOAD_BORROW) {
		f->data = data;
	} else {
		/* 64-byte aligned, so a model can use the weights in place */
		if (posix_memalign(&f->owned, AF_ALIGN, size ? size : 1) != 0) {
			f->owned = NULL;
			file_free(f);
			return air_error(AIR_OUT_OF_MEMORY, "air_file_open_buffer: no memory for %zu bytes", size);
		}
		if (size)
			memcpy(f->owned, data, size);
		f->data = f->owned;
	}
	return finish_open(f, &o, out);
}

air_status air_file_open(const char *path, const air_load_options *options, air_file **out)
{
	if (!out)
		return air_error(AIR_INVALID_ARGUMENT, "air_file_open: out is NULL");
	*out = NULL;
	if (!path)
		return air_error(AIR_INVALID_ARGUMENT, "air_file_open: path is NULL");
	air_load_options o;
	AIR_TRY(copy_options(options, &o));
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return air_error(AIR_INVALID_ARGUMENT, "air_file_open: cannot open %s: %s", path, strerror(errno));
	struct stat sb;
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
		close(fd);
		return air_error(AIR_BAD_FILE, "air_file_open: %s is not a regular file", path);
	}
	if (sb.st_size < (off_t)AF_HEADER_SIZE || (uint64_t)sb.st_size > SIZE_MAX) {
		close(fd);
		return air_error(AIR_BAD_FILE, "air file: %s has %lld bytes", path, (long long)sb.st_size);
	}
	size_t size = (size_t)sb.st_size;
	void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return air_error(AIR_OUT_OF_MEMORY, "air_file_open: cannot map %s: %s", path, strerror(errno));
	air_file *f = calloc(1, sizeof *f);
	if (!f) {
		munmap(map, size);
		return air_error(AIR_OUT_OF_MEMORY, "air_file_open: no memory");
	}
	f->refs = 1;
	f->map = map;
	f->map_len = size;
	f->data = map;
	f->size = size;
	air_status st = finish_open(f, &o, out);
	if (st != AIR_OK)
		air_error_context(st, "%s", path);
	return st;
}

int air_file_version(const air_file *f)
{
	return f ? (int)f->version : 0;
}

int air_file_meta_count(const air_file *f)
{
	return f ? f->n_meta : 0;
}

air_status air_file_meta_at(const air_file *f, int i, const char **key, const char **value)
{
	if (!f || i < 0 || i >= f->n_meta)
		return air_error(AIR_INVALID_ARGUMENT, "air_file_meta_at: no pair %d", i);
	if (key)
		*key = f->meta[2 * i];
	if (value)
		*value = f->meta[2 * i + 1];
	return AIR_OK;
}

const char *air_file_meta(const air_file *f, const char *key)
{
	if (!f || !key)
		return NULL;
	/* the last of repeated keys wins (a writer never repeats them) */
	for (int i = f->n_meta - 1; i >= 0; i--)
		if (strcmp(f->meta[2 * i], key) == 0)
			return f->meta[2 * i + 1];
	return NULL;
}

int air_file_input_count(const air_file *f)
{
	return f ? f->n_inputs : 0;
}

int air_file_output_count(const air_file *f)
{
	return f ? f->n_outputs : 0;
}

const char *air_file_input_name(const air_file *f, int i)
{
	return f && i >= 0 && i < f->n_inputs ? f->records[f->input_rec[i]].name : NULL;
}

const char *air_file_output_name(const air_file *f, int i)
{
	return f && i >= 0 && i < f->n_outputs ? f->output_names[i] : NULL;
}

int air_file_node_count(const air_file *f)
{
	return f ? f->n_nodes : 0;
}

const char *air_file_node_op(const air_file *f, int i)
{
	return f && i >= 0 && i < f->n_nodes ? f->records[f->node_rec[i]].name : NULL;
}

int air_file_constant_count(const air_file *f)
{
	return f ? f->n_consts : 0;
}

size_t air_file_weight_bytes(const air_file *f)
{
	return f ? f->weight_bytes : 0;
}

int air_file_external_count(const air_file *f)
{
	return f ? f->n_externals : 0;
}

air_status air_file_external_info(const air_file *f, int i, const char **name, air_dtype *dtype, int *rank,
				  int64_t *dims)
{
	if (!f || i < 0 || i >= f->n_externals)
		return air_error(AIR_INVALID_ARGUMENT, "air_file_external_info: no external %d", i);
	const af_record *r = &f->records[f->ext_rec[i]];
	if (name)
		*name = r->name;
	if (dtype)
		*dtype = r->dtype;
	if (rank)
		*rank = r->rank;
	if (dims)
		for (int d = 0; d < r->rank; d++)
			dims[d] = r->dims[d];
	return AIR_OK;
}

air_status air_file_compile_options(const air_file *f, air_compile_options *o)
{
	if (!f || !o)
		return air_error(AIR_INVALID_ARGUMENT, "air_file_compile_options: NULL argument");
	*o = f->compile;
	return AIR_OK;
}

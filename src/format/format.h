/* format.h - the .air file layout (docs/air-format.md is its description,
 * byte by byte) and what the parts of src/format share: the decoded form of
 * a file (struct air_file), the little-endian byte reader and writer, and
 * CRC32. Internal to libair. */
#ifndef AIR_FORMAT_FORMAT_H
#define AIR_FORMAT_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "air/air.h"

/* ---- layout ------------------------------------------------------------ */

/* "\x89AIR\r\n\x1a\n": a non-ASCII first byte and the CR LF / ^Z / LF of
 * PNG's signature catch a file mangled by text-mode transfers. */
#define AF_MAGIC "\x89" "AIR\r\n\x1a\n"
#define AF_MAGIC_LEN 8
#define AF_VERSION 1u       /* the format version this library writes and reads */
#define AF_HEADER_SIZE 64u  /* header bytes (v1) */
#define AF_ENTRY_SIZE 32u   /* bytes of one section-table entry */
#define AF_MAX_SECTIONS 64u /* a reader refuses more */
#define AF_ALIGN 64u        /* weights section and every constant in it */

/* header field offsets */
enum {
	AF_H_VERSION = 8,
	AF_H_HEADER_SIZE = 12,
	AF_H_FILE_SIZE = 16,
	AF_H_TABLE_OFFSET = 24,
	AF_H_SECTION_COUNT = 32,
	AF_H_FLAGS = 36,
	AF_H_TABLE_CRC = 40,
	AF_H_HEADER_CRC = 44,
};

/* section kinds */
enum {
	AF_SEC_META = 1,    /* key/value strings */
	AF_SEC_GRAPH = 2,   /* expressions, records (inputs, constants, nodes), outputs */
	AF_SEC_WEIGHTS = 3, /* constant bytes, each AF_ALIGN-aligned */
	AF_SEC_COMPILE = 4, /* default compile options */
};
#define AF_SECTION_REQUIRED 1u /* section flag: a reader that does not know the kind refuses the file */

/* GRAPH section: expression kinds, record kinds, constant flags, attribute types */
enum { AF_EXPR_SYMBOL = 0, AF_EXPR_BINARY = 1 };
enum { AF_REC_INPUT = 1, AF_REC_CONSTANT = 2, AF_REC_NODE = 3 };
enum { AF_CONST_EXTERNAL = 1u };
enum { AF_ATTR_INT = 0, AF_ATTR_FLOAT = 1, AF_ATTR_INTS = 2, AF_ATTR_DIM = 3, AF_ATTR_DIMS = 4 };
#define AF_NO_STRING 0xffffffffu /* string length meaning "no string" (NULL) */

/* bounds a reader enforces beyond the file's size */
#define AF_MAX_NODE_IN 64
#define AF_MAX_NODE_OUT 16
#define AF_MAX_ATTRS 32
#define AF_MAX_LIST 64

/* ---- the decoded file ---------------------------------------------------- */

typedef struct af_expr {
	uint8_t kind;
	uint8_t op;
	int64_t a, b;
	const char *name; /* symbol */
} af_expr;

typedef struct af_attr {
	const char *name;
	uint8_t type;
	int64_t i;
	double f;
	int64_t *ints; /* owned */
	int n;
} af_attr;

typedef struct af_record {
	uint8_t kind;
	const char *name; /* input name, constant's external name, node's op */
	/* input and constant */
	air_dtype dtype;
	int rank;
	int64_t dims[AIR_MAX_RANK];
	/* constant */
	uint32_t flags;
	uint64_t offset, nbytes; /* within the weights section */
	int external;            /* index among externals, or -1 */
	/* node */
	int n_in, n_out, n_attrs;
	uint32_t *in;   /* owned */
	af_attr *attrs; /* owned */
	uint32_t first_value; /* id of its (first) value in the file's numbering */
} af_record;

struct air_file {
	_Atomic int refs; /* the caller's and each model's */
	const uint8_t *data;
	size_t size;
	void *owned;           /* a copy of the caller's bytes */
	void *map;             /* a mapped file */
	size_t map_len;
	uint32_t version;
	const uint8_t *weights; /* the weights section (NULL if none) */
	uint64_t weights_len;
	int n_meta;
	const char **meta; /* 2 * n_meta: key, value, ... */
	air_compile_options compile;
	int n_exprs;
	af_expr *exprs;
	int n_records;
	af_record *records;
	uint32_t n_values;
	int n_inputs, n_consts, n_nodes;
	int *input_rec, *node_rec; /* record of input i / node i */
	int n_outputs;
	uint32_t *outputs;
	const char **output_names;
	int n_externals;
	int *ext_rec;           /* record of external i */
	const void **ext_data;  /* bound by air_load_options; NULL: unbound */
	size_t weight_bytes;
};

/* ---- little-endian bytes ------------------------------------------------- */

/* A reader over [p, end): every get fails (returns false, and stays
 * failed) rather than read past end. */
typedef struct af_reader {
	const uint8_t *p, *end;
	bool bad;
} af_reader;

bool af_get_u8(af_reader *r, uint8_t *v);
bool af_get_u32(af_reader *r, uint32_t *v);
bool af_get_u64(af_reader *r, uint64_t *v);
bool af_get_i64(af_reader *r, int64_t *v);
bool af_get_f64(af_reader *r, double *v);
/* A string in place: u32 length, the bytes, a NUL; no NUL inside. *s is NULL
 * for AF_NO_STRING. */
bool af_get_str(af_reader *r, const char **s);
static inline size_t af_left(const af_reader *r)
{
	return (size_t)(r->end - r->p);
}

uint32_t af_load_u32(const uint8_t *p);
uint64_t af_load_u64(const uint8_t *p);
void af_store_u32(uint8_t *p, uint32_t v);
void af_store_u64(uint8_t *p, uint64_t v);

/* A growing buffer for the writer; oom sticks. */
typedef struct af_writer {
	uint8_t *buf;
	size_t len, cap;
	bool oom;
} af_writer;

void af_put_bytes(af_writer *w, const void *p, size_t n);
void af_put_u8(af_writer *w, uint8_t v);
void af_put_u32(af_writer *w, uint32_t v);
void af_put_u64(af_writer *w, uint64_t v);
void af_put_f64(af_writer *w, double v);
void af_put_str(af_writer *w, const char *s); /* NULL: AF_NO_STRING */

/* ---- checksum ------------------------------------------------------------ */

/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78, initial and final
 * XOR 0xFFFFFFFF): crc = af_crc32(0, p, n) for a whole buffer, or chained. */
uint32_t af_crc32(uint32_t crc, const void *p, size_t n);

/* ---- between the parts --------------------------------------------------- */

/* Decodes and checks f->data[0..f->size) into f (read.c). */
air_status af_parse(struct air_file *f, uint32_t flags);
/* Binds externals to f (read.c). */
air_status af_bind_externals(struct air_file *f, const air_external *ext, int n);
/* Frees what af_parse allocated (read.c). */
void af_free_parsed(struct air_file *f);
/* Rebuilds the graph; constants in place from the file when borrow (build.c). */
air_status af_build_graph(const struct air_file *f, bool borrow, air_graph **out);

#endif

/* npy.h - reading and writing numpy's .npy files for the `air` CLI: the
 * inputs users make with numpy.save and the outputs they read with numpy.load.
 *
 * What is read: format versions 1.0, 2.0 and 3.0, C order only, the
 * little-endian dtypes air has (<f4 <f8 <f2 <i8 <i4 <i2 |i1 |u1 |b1), rank
 * at most AIR_MAX_RANK. Everything else is an error with a message, never a
 * crash: the header is parsed field by field, every number is checked for
 * overflow, and the data size the header claims must be exactly what the file
 * holds, so a damaged header cannot ask for more memory than the file's size.
 *
 * bf16 has no numpy dtype (ml_dtypes saves it as the opaque '<V2'), so this
 * layer neither reads nor writes it; the CLI converts: a bf16 input is read
 * from an f32 file (rounded to nearest even), a bf16 output written as f32
 * (exact). '<V2' is refused with a message that says so. */
#ifndef AIR_TOOLS_NPY_H
#define AIR_TOOLS_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "air/air.h"

typedef struct npy_array {
	air_dtype dtype;
	int rank;
	int64_t dims[AIR_MAX_RANK];
	size_t count;  /* elements: the product of dims (1 for rank 0) */
	size_t nbytes; /* count * air_dtype_size(dtype) */
	void *data;    /* 64-byte aligned, owned; never NULL after a successful read */
} npy_array;

/* Size of the message buffers the functions below fill on failure. */
#define NPY_ERR_SIZE 256

/* Parses a whole .npy file held in buf[0..size) into *out (the data is
 * copied). Returns 0, or -1 with a message in err and *out zeroed. */
int npy_read_buffer(const void *buf, size_t size, npy_array *out, char *err);

/* Reads the .npy file at path into *out. Returns 0, or -1 with a message. */
int npy_read_file(const char *path, npy_array *out, char *err);

/* A .npy file (version 1.0, C order, header padded to 64 bytes) for the
 * array dtype/rank/dims/data, in a malloc'd buffer *out of *size bytes.
 * Returns 0, or -1 with a message (bf16 and invalid dtypes are refused). */
int npy_write_buffer(air_dtype dtype, int rank, const int64_t *dims, const void *data, void **out, size_t *size,
		     char *err);

/* Writes the same bytes to path. Returns 0, or -1 with a message. */
int npy_write_file(const char *path, air_dtype dtype, int rank, const int64_t *dims, const void *data, char *err);

/* Frees an array's data and zeroes it; accepts a zeroed array. */
void npy_free(npy_array *array);

#endif

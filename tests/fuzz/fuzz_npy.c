/* fuzz_npy.c - libFuzzer harness over the CLI's .npy reader: any bytes give
 * an error or an array that describes exactly the bytes given, never a
 * crash, an overread or a leak. Built with -DAIR_FUZZ=ON (clang). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	npy_array a;
	char err[NPY_ERR_SIZE];
	if (npy_read_buffer(data, size, &a, err) != 0)
		return 0;
	size_t count = 1;
	for (int d = 0; d < a.rank; d++)
		count *= (size_t)a.dims[d];
	if (a.count != count || a.nbytes > size || !a.data)
		abort();
	/* what was read writes back and reads again to the same array */
	void *buf;
	size_t n;
	if (npy_write_buffer(a.dtype, a.rank, a.dims, a.data, &buf, &n, err) != 0)
		abort();
	npy_array b;
	if (npy_read_buffer(buf, n, &b, err) != 0 || b.nbytes != a.nbytes || b.dtype != a.dtype ||
	    memcmp(b.data, a.data, a.nbytes) != 0)
		abort();
	npy_free(&b);
	free(buf);
	npy_free(&a);
	return 0;
}

/* checksum.avx2.c - CRC-32C with the CPU's crc32 instruction (SSE4.2, which
 * every AVX2 CPU has; compiled with the AVX2 flags, called only when
 * kcpu_features() has AVX2): 8 bytes per instruction, several GB/s, so a
 * mapped file's weights are checked at close to the speed of reading them.
 * The portable version is checksum.c's. */
#include <nmmintrin.h>
#include <string.h>

#include "format/format.h"

uint32_t af_crc32c_hw(uint32_t crc, const void *data, size_t n)
{
	const uint8_t *p = data;
	uint64_t c = ~crc;
	while (n && ((uintptr_t)p & 7)) {
		c = _mm_crc32_u8((uint32_t)c, *p++);
		n--;
	}
	/* four independent loads per step keep the loads ahead of the chain
	 * of crc32 instructions (3 cycles each) */
	while (n >= 32) {
		uint64_t v[4];
		memcpy(v, p, 32); /* x86 is little-endian, as the format */
		c = _mm_crc32_u64(c, v[0]);
		c = _mm_crc32_u64(c, v[1]);
		c = _mm_crc32_u64(c, v[2]);
		c = _mm_crc32_u64(c, v[3]);
		p += 32;
		n -= 32;
	}
	while (n >= 8) {
		uint64_t v;
		memcpy(&v, p, 8);
		c = _mm_crc32_u64(c, v);
		p += 8;
		n -= 8;
	}
	while (n--)
		c = _mm_crc32_u8((uint32_t)c, *p++);
	return ~(uint32_t)c;
}

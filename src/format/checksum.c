/* checksum.c - CRC-32C (Castagnoli polynomial, reflected 0x82F63B78: the
 * CRC of iSCSI and ext4, and the one x86's crc32 instruction computes) of
 * the .air sections. Where the CPU has it (checksum.avx2.c) the instruction
 * does the work at several GB/s, so checking a large mapped weights
 * section costs little next to reading it; elsewhere, and with
 * AIR_ISA=scalar, this file's portable slicing-by-8: eight tables, 8 bytes
 * per step. The tables are built once, on first use. */
#include <pthread.h>
#include <string.h>

#include "format/format.h"
#include "kernels/common/cpu.h"

static uint32_t table[8][256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void build_tables(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? 0x82F63B78u ^ (c >> 1) : c >> 1;
		table[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xff];
}

uint32_t af_crc32c_hw(uint32_t crc, const void *data, size_t n);

uint32_t af_crc32(uint32_t crc, const void *data, size_t n)
{
#if defined(AIR_HAVE_X86)
	if (kcpu_features() & KCPU_AVX2)
		return af_crc32c_hw(crc, data, n);
#endif
	pthread_once(&table_once, build_tables);
	const uint8_t *p = data;
	crc = ~crc;
	while (n && ((uintptr_t)p & 7)) {
		crc = table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
		n--;
	}
	while (n >= 8) {
		/* bytes assembled little-endian by hand: no alignment or
		 * host-order assumption */
		uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
		uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
		crc = table[7][lo & 0xff] ^ table[6][(lo >> 8) & 0xff] ^ table[5][(lo >> 16) & 0xff] ^
		      table[4][lo >> 24] ^ table[3][hi & 0xff] ^ table[2][(hi >> 8) & 0xff] ^
		      table[1][(hi >> 16) & 0xff] ^ table[0][hi >> 24];
		p += 8;
		n -= 8;
	}
	while (n--)
		crc = table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return ~crc;
}

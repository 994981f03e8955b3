/* air_file_mutate.h - for the .air damage tests and the fuzz corpus:
 * recomputes a damaged file's checksums (every section's that lies inside
 * the file, the table's and the header's) so a mutation reaches the
 * decoder instead of stopping at a checksum, and a small PRNG. */
#ifndef AIR_TESTS_AIR_FILE_MUTATE_H
#define AIR_TESTS_AIR_FILE_MUTATE_H

#include <stdint.h>

#include "format/format.h"

static uint32_t afm_seed = 1;

static inline uint32_t afm_rand(void)
{
	afm_seed ^= afm_seed << 13;
	afm_seed ^= afm_seed >> 17;
	afm_seed ^= afm_seed << 5;
	return afm_seed;
}

static inline void afm_repair(uint8_t *b, size_t size)
{
	if (size < AF_HEADER_SIZE)
		return;
	uint64_t table = af_load_u64(b + AF_H_TABLE_OFFSET);
	uint32_t n = af_load_u32(b + AF_H_SECTION_COUNT);
	if (n <= AF_MAX_SECTIONS && table <= size && (uint64_t)n * AF_ENTRY_SIZE <= size - table) {
		for (uint32_t i = 0; i < n; i++) {
			uint8_t *e = b + table + (size_t)i * AF_ENTRY_SIZE;
			uint64_t off = af_load_u64(e + 8), len = af_load_u64(e + 16);
			if (off <= size && len <= size - off)
				af_store_u32(e + 24, af_crc32(0, b + off, (size_t)len));
		}
		af_store_u32(b + AF_H_TABLE_CRC, af_crc32(0, b + table, (size_t)n * AF_ENTRY_SIZE));
	}
	af_store_u32(b + AF_H_HEADER_CRC, 0);
	af_store_u32(b + AF_H_HEADER_CRC, af_crc32(0, b, AF_HEADER_SIZE));
}

/* offset and length of the first section of kind, or 0 */
static inline size_t afm_section(const uint8_t *b, size_t size, uint32_t kind, size_t *len)
{
	uint64_t table = af_load_u64(b + AF_H_TABLE_OFFSET);
	uint32_t n = af_load_u32(b + AF_H_SECTION_COUNT);
	for (uint32_t i = 0; i < n && table + (uint64_t)(i + 1) * AF_ENTRY_SIZE <= size; i++) {
		const uint8_t *e = b + table + (size_t)i * AF_ENTRY_SIZE;
		if (af_load_u32(e) == kind) {
			*len = (size_t)af_load_u64(e + 16);
			return (size_t)af_load_u64(e + 8);
		}
	}
	*len = 0;
	return 0;
}

#endif

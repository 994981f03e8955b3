/* test_air_file_damage.c - damaged .air files never crash, hang or leak
 * (run under ASan+UBSan by scripts/test.sh). From real saved graphs (the
 * MLP with an external constant, the CNN), thousands of damaged copies:
 *   - random bit flips and byte changes as they are: every one must be an
 *     error (checksums, zero padding);
 *   - the same with the checksums recomputed, so they reach the decoder
 *     and the graph builder: an error or a graph that compiles and runs;
 *   - every u32 and u64 of the header, table and GRAPH section set to huge
 *     values, 0, and +-1 (wrong counts), checksums recomputed;
 *   - truncations (every length for the first 512 bytes, then strided),
 *     junk after a good header, pure junk.
 * Each damaged file goes through air_file_exercise.h (open, bind externals,
 * names, graph, compile, run). With a directory argument it writes the
 * undamaged files there instead (the fuzz seed corpus, scripts/fuzz.sh). */
#include <stdio.h>
#include <string.h>

#include "air/air.h"
#include "air_file_exercise.h"
#include "air_file_graphs.h"
#include "air_file_mutate.h"
#include "check.h"

/* a hostile size must fail as an error, not abort in the sanitizer's allocator */
/* (visible: the tests build with -fvisibility=hidden, and the sanitizer
 * runtime looks the function up by name) */
__attribute__((visibility("default"), used)) const char *__asan_default_options(void);
__attribute__((visibility("default"), used)) const char *__asan_default_options(void)
{
	return "allocator_may_return_null=1:max_allocation_size_mb=1024";
}

static int n_files, n_loaded;

static void try_file(const uint8_t *b, size_t size, bool must_fail)
{
	air_status st = afx_exercise(b, size, 0, NULL);
	n_files++;
	n_loaded += st == AIR_OK;
	if (must_fail)
		CHECK(st != AIR_OK);
	/* a status from the set, and a message with every error */
	CHECK((unsigned)st <= AIR_INTERNAL && st != AIR_INTERNAL);
	if (st != AIR_OK && st != AIR_OUT_OF_MEMORY)
		CHECK(air_last_error()[0] != '\0');
}

static void damage(const uint8_t *orig, size_t size)
{
	uint8_t *b = malloc(size + 4096);
	/* bit flips and byte values, as they are and repaired */
	for (int k = 0; k < 600; k++) {
		memcpy(b, orig, size);
		size_t at = afm_rand() % size;
		bool repair = k % 2;
		if (k % 3 == 0)
			b[at] ^= (uint8_t)(1u << (afm_rand() % 8));
		else
			b[at] = (uint8_t)afm_rand();
		if (b[at] == orig[at])
			continue;
		if (repair)
			afm_repair(b, size);
		try_file(b, size, !repair);
	}
	/* every u32/u64 position of header, table and graph: huge, zero, +-1 */
	size_t glen, goff = afm_section(orig, size, AF_SEC_GRAPH, &glen);
	static const uint64_t values[] = {0xffffffffu, 0x7fffffffu, 0x80000000u, 0xfffffffeu, 0};
	for (size_t at = 0; at + 8 <= size; at++) {
		bool in_graph = at >= goff && at < goff + glen;
		if (at >= AF_HEADER_SIZE + 4 * AF_ENTRY_SIZE && !in_graph)
			continue;
		for (int v = 0; v < 9; v++) {
			memcpy(b, orig, size);
			if (v < 5) {
				af_store_u32(b + at, (uint32_t)values[v]);
			} else if (v < 7) {
				af_store_u32(b + at, af_load_u32(orig + at) + (v == 5 ? 1u : -1u));
			} else {
				af_store_u64(b + at, v == 7 ? UINT64_MAX : (uint64_t)1 << 62);
			}
			if (memcmp(b, orig, size) == 0)
				continue;
			afm_repair(b, size);
			try_file(b, size, false);
		}
	}
	/* truncations: any shorter file fails */
	for (size_t n = 0; n < size; n += n < 512 ? 1 : 1 + size / 64) {
		memcpy(b, orig, n);
		try_file(b, n, true);
		afm_repair(b, n); /* even with a header that agrees with itself */
		try_file(b, n, true);
	}
	/* junk after a good header, and pure junk */
	for (int k = 0; k < 100; k++) {
		size_t n = k < 50 ? size : AF_HEADER_SIZE + afm_rand() % 4096;
		memcpy(b, orig, AF_HEADER_SIZE);
		for (size_t i = AF_HEADER_SIZE; i < n; i++)
			b[i] = (uint8_t)afm_rand();
		if (k >= 50)
			af_store_u64(b + AF_H_FILE_SIZE, n);
		afm_repair(b, n);
		try_file(b, n, false);
		for (size_t i = 0; i < n; i++)
			b[i] = (uint8_t)afm_rand();
		try_file(b, n, true);
	}
	free(b);
}

static void *save(air_graph *g, const air_save_options *so, size_t *size)
{
	void *buf = NULL;
	CHECK_OK(air_graph_save_buffer(g, so, &buf, size));
	return buf;
}

int main(int argc, char **argv)
{
	agf_fill();
	agf_max_bytes = (size_t)64 << 20;
	air_graph *mlp, *cnn;
	air_value bias;
	CHECK_OK(air_graph_create(&mlp));
	CHECK_OK(agf_mlp(mlp, &bias));
	CHECK_OK(air_graph_create(&cnn));
	CHECK_OK(agf_cnn(cnn));
	const char *keys[1] = {"torchair.version"}, *vals[1] = {"0.1.0"}, *en[1] = {"fc.bias"};
	const char *on[4] = {"y", "r", "a", "q"};
	air_save_options so;
	air_save_options_init(&so);
	so.meta_keys = keys;
	so.meta_values = vals;
	so.n_meta = 1;
	so.output_names = on;
	so.n_output_names = 4;
	so.externals = &bias;
	so.external_names = en;
	so.n_externals = 1;
	size_t sizes[3];
	void *files[3] = {save(mlp, &so, &sizes[0]), save(cnn, NULL, &sizes[1]), save(mlp, NULL, &sizes[2])};
	if (argc > 1) {
		const char *names[3] = {"mlp_external.air", "cnn.air", "mlp.air"};
		for (int i = 0; i < 3; i++) {
			char path[4096];
			snprintf(path, sizeof path, "%s/%s", argv[1], names[i]);
			FILE *fp = fopen(path, "wb");
			CHECK(fp && fwrite(files[i], 1, sizes[i], fp) == sizes[i]);
			if (fp)
				fclose(fp);
		}
	} else {
		for (int i = 0; i < 3; i++) {
			CHECK(afx_exercise(files[i], sizes[i], 0, NULL) == AIR_OK); /* undamaged: loads and runs */
			damage(files[i], sizes[i]);
		}
		printf("damaged files: %d, of which %d loaded and ran\n", n_files, n_loaded);
	}
	for (int i = 0; i < 3; i++)
		air_free(files[i]);
	air_graph_destroy(mlp);
	air_graph_destroy(cnn);
	return check_report("test_air_file_damage");
}

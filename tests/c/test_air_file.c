/* test_air_file.c - the .air format round trip (src/format):
 *   - a symbolic MLP (every attribute kind: int, float, ints, dim, dims with
 *     a dim expression; f32, f64, f16, i32, i64 values; one external
 *     constant) and a CNN saved, opened, rebuilt and compiled: the loaded
 *     model's outputs equal the original's BIT FOR BIT at two sizes;
 *   - metadata, input/output names, externals info, compile options, node
 *     ops, weight bytes; saving a loaded graph again gives the same bytes;
 *   - air_model_load_file (mmap, weights in place, 64-byte aligned) and
 *     air_model_load_buffer; air_graph_save_file is atomic (no temp left);
 *   - the errors a caller can make: unbound or mis-sized externals, bad
 *     options, a newer format version, an unknown required section (and an
 *     unknown optional one skipped). */
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "air/air.h"
#include "air_file_graphs.h"
#include "air_file_mutate.h"
#include "check.h"
#include "format/format.h"

/* outputs of a and b on the same inputs are the same bytes */
static void check_same_outputs(const air_model *a, const air_model *b, int64_t size)
{
	void *oa[8], *ob[8];
	size_t na[8], nb[8];
	int n = air_model_output_count(a);
	CHECK(n == air_model_output_count(b));
	CHECK_OK(agf_run(a, size, 7, oa, na));
	CHECK_OK(agf_run(b, size, 7, ob, nb));
	for (int o = 0; o < n; o++) {
		CHECK(oa[o] && ob[o] && na[o] == nb[o]);
		if (oa[o] && ob[o] && na[o] == nb[o])
			CHECK(memcmp(oa[o], ob[o], na[o]) == 0);
		free(oa[o]);
		free(ob[o]);
	}
}

static void test_mlp_round_trip(void)
{
	air_graph *g;
	air_value bias;
	CHECK_OK(air_graph_create(&g));
	CHECK_OK(agf_mlp(g, &bias));
	air_compile_options co;
	air_compile_options_init(&co);
	co.num_threads = 2;
	co.disabled_passes = AIR_PASS_FUSE_ROPE;
	air_model *orig;
	CHECK_OK(air_compile(g, &co, &orig));

	const char *keys[2] = {"torchair.version", "options"}, *vals[2] = {"0.1.0", "{\"a\": 1}"};
	const char *onames[4] = {"y", "r", NULL, "q"};
	const char *enames[1] = {"fc.bias"};
	air_save_options so;
	air_save_options_init(&so);
	so.meta_keys = keys;
	so.meta_values = vals;
	so.n_meta = 2;
	so.output_names = onames;
	so.n_output_names = 4;
	so.compile = &co;
	so.externals = &bias;
	so.external_names = enames;
	so.n_externals = 1;
	void *buf;
	size_t size;
	CHECK_OK(air_graph_save_buffer(g, &so, &buf, &size));
	CHECK(size > AF_HEADER_SIZE && memcmp(buf, AF_MAGIC, AF_MAGIC_LEN) == 0);

	/* the external is not in the file: its bytes must be given */
	air_file *f;
	CHECK_OK(air_file_open_buffer(buf, size, NULL, &f));
	CHECK(air_file_version(f) == 1);
	CHECK(air_file_meta_count(f) == 2);
	CHECK(air_file_meta(f, "options") && strcmp(air_file_meta(f, "options"), "{\"a\": 1}") == 0);
	CHECK(!air_file_meta(f, "nope"));
	const char *k, *v;
	CHECK_OK(air_file_meta_at(f, 0, &k, &v));
	CHECK(strcmp(k, "torchair.version") == 0 && strcmp(v, "0.1.0") == 0);
	CHECK(air_file_input_count(f) == 2 && strcmp(air_file_input_name(f, 1), "ids") == 0);
	CHECK(air_file_output_count(f) == 4 && strcmp(air_file_output_name(f, 3), "q") == 0 &&
	      !air_file_output_name(f, 2) && !air_file_output_name(f, 4));
	CHECK(air_file_node_count(f) == 16 && strcmp(air_file_node_op(f, 0), "linear") == 0);
	CHECK(air_file_constant_count(f) == 5);
	CHECK(air_file_weight_bytes(f) == sizeof agf_w1 + 8 + 8 + 16);
	CHECK(air_file_external_count(f) == 1);
	const char *en;
	air_dtype edt;
	int erank;
	int64_t edims[AIR_MAX_RANK];
	CHECK_OK(air_file_external_info(f, 0, &en, &edt, &erank, edims));
	CHECK(strcmp(en, "fc.bias") == 0 && edt == AIR_F32 && erank == 1 && edims[0] == 16);
	air_compile_options fco;
	CHECK_OK(air_file_compile_options(f, &fco));
	CHECK(fco.num_threads == 2 && fco.disabled_passes == AIR_PASS_FUSE_ROPE && fco.flags == 0);
	air_model *m = NULL;
	CHECK(air_file_compile(f, NULL, &m) == AIR_INVALID_ARGUMENT && !m);
	CHECK(strstr(air_last_error(), "fc.bias") != NULL);
	air_file_close(f);

	/* bound by name: the loaded model equals the original bit for bit */
	air_external ext = {.name = "fc.bias", .data = agf_b1, .nbytes = sizeof agf_b1};
	air_load_options lo;
	air_load_options_init(&lo);
	lo.externals = &ext;
	lo.n_externals = 1;
	CHECK_OK(air_file_open_buffer(buf, size, &lo, &f));
	CHECK_OK(air_file_compile(f, NULL, &m));
	air_file_close(f); /* the model keeps what it needs */
	if (m) {
		CHECK(strcmp(air_model_input_name(m, 0), "x") == 0 && !air_model_input_name(m, 2));
		CHECK(strcmp(air_model_output_name(m, 0), "y") == 0 && !air_model_output_name(m, 2));
		CHECK(strcmp(air_model_metadata(m, "torchair.version"), "0.1.0") == 0);
		check_same_outputs(orig, m, 3);
		check_same_outputs(orig, m, 5);
		air_model_destroy(m);
	}
	CHECK(!air_model_output_name(orig, 0) && !air_model_metadata(orig, "options"));

	/* by index, borrowing the caller's bytes; the graph only */
	ext.name = NULL;
	ext.index = 0;
	lo.flags = AIR_LOAD_BORROW;
	air_graph *g2;
	CHECK_OK(air_graph_load_buffer(buf, size, &lo, &g2));
	if (g2) {
		/* the same graph: saved again, the same bytes */
		void *buf2;
		size_t size2;
		CHECK_OK(air_graph_save_buffer(g2, &so, &buf2, &size2));
		CHECK(size2 == size && memcmp(buf, buf2, size) == 0);
		air_free(buf2);
		air_model *m2;
		CHECK_OK(air_compile(g2, &co, &m2));
		air_graph_destroy(g2);
		if (m2)
			check_same_outputs(orig, m2, 4);
		air_model_destroy(m2);
	}

	/* caller errors */
	ext.nbytes = 4;
	CHECK(air_graph_load_buffer(buf, size, &lo, &g2) == AIR_INVALID_ARGUMENT && !g2);
	ext.nbytes = sizeof agf_b1;
	ext.name = "nope";
	CHECK(air_file_open_buffer(buf, size, &lo, &f) == AIR_INVALID_ARGUMENT && !f);
	ext.name = NULL;
	ext.index = 1;
	CHECK(air_file_open_buffer(buf, size, &lo, &f) == AIR_INVALID_ARGUMENT && !f);
	lo.flags = 1u << 7;
	CHECK(air_file_open_buffer(buf, size, &lo, &f) == AIR_INVALID_ARGUMENT && !f);
	lo.size = 0;
	CHECK(air_file_open_buffer(buf, size, &lo, &f) == AIR_INVALID_ARGUMENT && !f);
	CHECK(air_model_load_buffer(buf, size, NULL, &m) == AIR_INVALID_ARGUMENT && !m);
	air_save_options bad = so;
	bad.n_output_names = 3;
	void *bb;
	size_t bs;
	CHECK(air_graph_save_buffer(g, &bad, &bb, &bs) == AIR_INVALID_ARGUMENT && !bb && bs == 0);
	bad = so;
	air_value notconst = 0;
	bad.externals = &notconst;
	CHECK(air_graph_save_buffer(g, &bad, &bb, &bs) == AIR_INVALID_ARGUMENT);
	bad = so;
	const char *dupk[2] = {"a", "a"};
	bad.meta_keys = dupk;
	CHECK(air_graph_save_buffer(g, &bad, &bb, &bs) == AIR_INVALID_ARGUMENT);
	CHECK(air_graph_save_buffer(NULL, &so, &bb, &bs) == AIR_INVALID_ARGUMENT);

	air_free(buf);
	air_model_destroy(orig);
	air_graph_destroy(g);
}

/* A copy of the saved buffer with a new section appended to the table
 * (kind, flags), header and table checksums fixed. */
static void *with_extra_section(const void *buf, size_t size, uint32_t kind, uint32_t flags, size_t *out_size)
{
	const uint8_t *b = buf;
	uint32_t n = af_load_u32(b + AF_H_SECTION_COUNT);
	uint64_t table = af_load_u64(b + AF_H_TABLE_OFFSET);
	/* new table at the end, followed by the section's 8 bytes */
	size_t tpos = (size + 7) & ~(size_t)7;
	size_t total = tpos + (n + 1) * AF_ENTRY_SIZE + 8;
	uint8_t *c = calloc(1, total);
	memcpy(c, b, size);
	memcpy(c + tpos, b + table, n * AF_ENTRY_SIZE);
	memset(c + table, 0, n * AF_ENTRY_SIZE); /* the old table: now padding, which must be zero */
	uint8_t *e = c + tpos + n * AF_ENTRY_SIZE;
	uint8_t payload[8] = "payload";
	memcpy(c + total - 8, payload, 8);
	af_store_u32(e, kind);
	af_store_u32(e + 4, flags);
	af_store_u64(e + 8, total - 8);
	af_store_u64(e + 16, 8);
	af_store_u32(e + 24, af_crc32(0, payload, 8));
	af_store_u32(c + AF_H_SECTION_COUNT, n + 1);
	af_store_u64(c + AF_H_TABLE_OFFSET, tpos);
	af_store_u64(c + AF_H_FILE_SIZE, total);
	af_store_u32(c + AF_H_TABLE_CRC, af_crc32(0, c + tpos, (n + 1) * AF_ENTRY_SIZE));
	af_store_u32(c + AF_H_HEADER_CRC, 0);
	af_store_u32(c + AF_H_HEADER_CRC, af_crc32(0, c, AF_HEADER_SIZE));
	*out_size = total;
	return c;
}

static int count_temp_files(const char *dir)
{
	DIR *d = opendir(dir);
	int n = 0;
	struct dirent *e;
	while (d && (e = readdir(d)))
		n += strstr(e->d_name, ".tmp.") != NULL;
	if (d)
		closedir(d);
	return n;
}

static void test_cnn_file(void)
{
	air_graph *g;
	CHECK_OK(air_graph_create(&g));
	CHECK_OK(agf_cnn(g));
	air_model *orig;
	CHECK_OK(air_compile(g, NULL, &orig));
	char dir[] = "/tmp/air_file_testXXXXXX";
	CHECK(mkdtemp(dir) != NULL);
	char path[128];
	snprintf(path, sizeof path, "%s/cnn.air", dir);
	CHECK_OK(air_graph_save_file(g, NULL, path));
	CHECK_OK(air_graph_save_file(g, NULL, path)); /* over an existing file */
	CHECK(count_temp_files(dir) == 0);
	air_model *m;
	CHECK_OK(air_model_load_file(path, NULL, &m));
	if (m) {
		/* the weights are used in place from the mapping */
		air_memory_info mi = {.size = sizeof mi};
		CHECK_OK(air_model_memory_info(m, &mi));
		CHECK(strcmp(air_model_input_name(m, 0), "image") == 0);
		check_same_outputs(orig, m, 2);
		check_same_outputs(orig, m, 3);
		air_model_destroy(m);
	}
	void *buf;
	size_t size;
	CHECK_OK(air_graph_save_buffer(g, NULL, &buf, &size));
	CHECK_OK(air_model_load_buffer(buf, size, NULL, &m));
	if (m)
		check_same_outputs(orig, m, 2);
	air_model_destroy(m);
	air_graph *g2;
	CHECK_OK(air_graph_load_file(path, NULL, &g2));
	air_graph_destroy(g2);

	/* forward compatibility */
	size_t s2;
	uint8_t *c = with_extra_section(buf, size, 99, 0, &s2);
	CHECK_OK(air_model_load_buffer(c, s2, NULL, &m)); /* optional: skipped */
	if (m)
		check_same_outputs(orig, m, 2);
	air_model_destroy(m);
	free(c);
	c = with_extra_section(buf, size, 99, AF_SECTION_REQUIRED, &s2);
	CHECK(air_model_load_buffer(c, s2, NULL, &m) == AIR_UNSUPPORTED && !m);
	free(c);
	c = malloc(size);
	memcpy(c, buf, size);
	af_store_u32(c + AF_H_VERSION, AF_VERSION + 1);
	af_store_u32(c + AF_H_HEADER_CRC, 0);
	af_store_u32(c + AF_H_HEADER_CRC, af_crc32(0, c, AF_HEADER_SIZE));
	CHECK(air_model_load_buffer(c, size, NULL, &m) == AIR_UNSUPPORTED && !m);
	CHECK(strstr(air_last_error(), "version") != NULL);
	free(c);
	/* an op this libair does not know (a newer file): unsupported, by name */
	c = malloc(size);
	memcpy(c, buf, size);
	for (size_t i = 0; i + 5 < size; i++)
		if (memcmp(c + i, "relu", 5) == 0)
			memcpy(c + i, "rel_", 5);
	afm_repair(c, size);
	CHECK(air_model_load_buffer(c, size, NULL, &m) == AIR_UNSUPPORTED && !m);
	CHECK(strstr(air_last_error(), "rel_") != NULL);
	free(c);
	/* the weights checksum can be skipped, not the others */
	air_load_options lo;
	air_load_options_init(&lo);
	lo.flags = AIR_LOAD_NO_WEIGHT_CHECKSUM;
	c = malloc(size);
	memcpy(c, buf, size);
	c[size - 1] ^= 1; /* the last weight byte */
	air_file *f;
	CHECK(air_file_open_buffer(c, size, NULL, &f) == AIR_BAD_FILE && !f);
	CHECK_OK(air_file_open_buffer(c, size, &lo, &f));
	air_file_close(f);
	free(c);

	CHECK(air_model_load_file("/nonexistent/x.air", NULL, &m) != AIR_OK && !m);
	CHECK(air_graph_save_file(g, NULL, "/nonexistent/x.air") != AIR_OK);
	unlink(path);
	rmdir(dir);
	air_free(buf);
	air_model_destroy(orig);
	air_graph_destroy(g);
}

static void test_crc(void)
{
	/* the standard check value of CRC-32C, and a longer known one (32
	 * zero bytes, RFC 3720's example) on both paths (AIR_ISA=scalar runs
	 * the portable one) */
	CHECK(af_crc32(0, "123456789", 9) == 0xE3069283u);
	uint8_t zeros[32] = {0};
	CHECK(af_crc32(0, zeros, 32) == 0x8A9136AAu);
	uint8_t big[1000];
	for (int i = 0; i < 1000; i++)
		big[i] = (uint8_t)(i * 7);
	uint32_t whole = af_crc32(0, big, 1000);
	CHECK(af_crc32(af_crc32(0, big, 333), big + 333, 667) == whole);
	CHECK(af_crc32(af_crc32(0, big, 1), big + 1, 999) == whole);
}

int main(void)
{
	agf_fill();
	test_crc();
	test_mlp_round_trip();
	test_cnn_file();
	return check_report("test_air_file");
}

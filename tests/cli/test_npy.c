/* test_npy.c - the CLI's .npy reader and writer: round trips of every dtype,
 * the header forms numpy writes (versions 1.0/2.0/3.0, key orders, spacing),
 * each refusal with its message, and a mutation run: hundreds of damaged
 * files (bit flips, truncations, junk, huge sizes) give an error or a
 * consistent array, never a crash (the ASan build checks reads and leaks). */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "air/air.h"
#include "check.h"
#include "npy.h"

/* A .npy file with the given version and header text (padded like numpy)
 * followed by nbytes of data. */
static unsigned char *make_npy(int major, const char *text, const void *data, size_t nbytes, size_t *size)
{
	size_t pre = major == 1 ? 10 : 12, n = strlen(text);
	size_t hdr = (pre + n + 1 + 63) / 64 * 64;
	unsigned char *b = malloc(hdr + nbytes + 1);
	memcpy(b, "\x93NUMPY", 6);
	b[6] = (unsigned char)major;
	b[7] = 0;
	size_t len = hdr - pre;
	for (size_t i = 0; i < pre - 8; i++)
		b[8 + i] = (unsigned char)(len >> (8 * i));
	memcpy(b + pre, text, n);
	memset(b + pre + n, ' ', hdr - pre - n - 1);
	b[hdr - 1] = '\n';
	if (nbytes)
		memcpy(b + hdr, data, nbytes);
	*size = hdr + nbytes;
	return b;
}

static int read_text(int major, const char *text, const void *data, size_t nbytes, npy_array *a, char *err)
{
	size_t size;
	unsigned char *b = make_npy(major, text, data, nbytes, &size);
	int r = npy_read_buffer(b, size, a, err);
	free(b);
	return r;
}

static void expect_error(const char *text, size_t nbytes, const char *needle)
{
	static unsigned char zeros[4096];
	npy_array a;
	char err[NPY_ERR_SIZE] = "";
	int r = read_text(1, text, zeros, nbytes, &a, err);
	CHECK(r == -1);
	CHECK(a.data == NULL);
	if (!strstr(err, needle)) {
		fprintf(stderr, "header %s: message '%s' lacks '%s'\n", text, err, needle);
		CHECK(0);
	}
}

static void test_round_trip(void)
{
	const air_dtype dts[] = {AIR_F32, AIR_F64, AIR_F16, AIR_I64, AIR_I32, AIR_I16, AIR_I8, AIR_U8, AIR_BOOL};
	const int64_t shapes[][4] = {{0}, {7}, {3, 5}, {2, 0, 3}, {1, 2, 3, 5}};
	const int ranks[] = {0, 1, 2, 3, 4};
	unsigned char src[1024];
	for (size_t i = 0; i < sizeof src; i++)
		src[i] = (unsigned char)(i * 37 + 11);
	for (size_t t = 0; t < sizeof dts / sizeof dts[0]; t++) {
		if (dts[t] == AIR_BOOL)
			for (size_t i = 0; i < sizeof src; i++)
				src[i] &= 1;
		for (size_t s = 0; s < 5; s++) {
			char err[NPY_ERR_SIZE];
			void *buf;
			size_t size;
			CHECK(npy_write_buffer(dts[t], ranks[s], shapes[s], src, &buf, &size, err) == 0);
			npy_array a;
			CHECK(npy_read_buffer(buf, size, &a, err) == 0);
			CHECK(a.dtype == dts[t] && a.rank == ranks[s]);
			size_t count = 1;
			for (int d = 0; d < ranks[s]; d++) {
				CHECK(a.dims[d] == shapes[s][d]);
				count *= (size_t)shapes[s][d];
			}
			CHECK(a.count == count && a.nbytes == count * air_dtype_size(dts[t]));
			CHECK(a.data && ((uintptr_t)a.data & 63) == 0);
			CHECK(memcmp(a.data, src, a.nbytes) == 0);
			/* the data starts 64-byte aligned in the file, as numpy's does */
			CHECK((size - a.nbytes) % 64 == 0);
			npy_free(&a);
			free(buf);
		}
	}
	/* and through a file */
	char path[] = "/tmp/air_test_npy_XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	if (fd >= 0) {
		close(fd);
		char err[NPY_ERR_SIZE];
		const int64_t dims[2] = {4, 3};
		float x[12];
		for (int i = 0; i < 12; i++)
			x[i] = (float)i * 0.5f - 1;
		CHECK(npy_write_file(path, AIR_F32, 2, dims, x, err) == 0);
		npy_array a;
		CHECK(npy_read_file(path, &a, err) == 0);
		CHECK(a.dtype == AIR_F32 && a.rank == 2 && a.dims[0] == 4 && a.dims[1] == 3);
		CHECK(a.data && memcmp(a.data, x, sizeof x) == 0);
		npy_free(&a);
		CHECK(npy_read_file("/tmp/air_test_npy_does_not_exist", &a, err) == -1);
		CHECK(strstr(err, "does_not_exist") != NULL);
		CHECK(npy_read_file("/tmp", &a, err) == -1);
		remove(path);
	}
	char err[NPY_ERR_SIZE];
	void *buf;
	size_t size;
	const int64_t d1 = 2;
	CHECK(npy_write_buffer(AIR_BF16, 1, &d1, src, &buf, &size, err) == -1 && buf == NULL);
	CHECK(npy_write_buffer(AIR_F32, 9, &d1, src, &buf, &size, err) == -1);
}

static void test_header_forms(void)
{
	float x[6] = {1, 2, 3, 4, 5, 6};
	const char *ok[] = {
		"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
		"{'shape': (2, 3), 'fortran_order': False, 'descr': '<f4'}",
		"{\"descr\":\"<f4\",\"fortran_order\":False,\"shape\":(2,3)}",
		"  { 'descr' : '<f4' ,\n 'fortran_order' : False , 'shape' : ( 2 , 3 , ) , }  ",
		"{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), }",
	};
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		for (int major = 1; major <= 3; major++) {
			npy_array a;
			char err[NPY_ERR_SIZE] = "";
			int r = read_text(major, ok[i], x, sizeof x, &a, err);
			if (r)
				fprintf(stderr, "v%d %s: %s\n", major, ok[i], err);
			CHECK(r == 0 && a.rank == 2 && a.dims[0] == 2 && a.dims[1] == 3 && a.dtype == AIR_F32);
			CHECK(r || memcmp(a.data, x, sizeof x) == 0);
			npy_free(&a);
		}
	}
	/* scalars, one-byte descrs, bool normalization */
	npy_array a;
	char err[NPY_ERR_SIZE];
	CHECK(read_text(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (), }", x, 8, &a, err) == 0);
	CHECK(a.rank == 0 && a.count == 1 && a.dtype == AIR_F64);
	npy_free(&a);
	unsigned char bools[3] = {0, 1, 7};
	CHECK(read_text(1, "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", bools, 3, &a, err) == 0);
	CHECK(a.dtype == AIR_BOOL && ((unsigned char *)a.data)[2] == 1);
	npy_free(&a);
	CHECK(read_text(1, "{'descr': '|i1', 'fortran_order': False, 'shape': (3,), }", bools, 3, &a, err) == 0);
	CHECK(a.dtype == AIR_I8);
	npy_free(&a);
	CHECK(read_text(1, "{'descr': '<u1', 'fortran_order': False, 'shape': (3,), }", bools, 3, &a, err) == 0);
	CHECK(a.dtype == AIR_U8);
	npy_free(&a);
}

static void test_refusals(void)
{
	expect_error("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", 24, "fortran_order");
	expect_error("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", 8, "big-endian");
	expect_error("{'descr': '<V2', 'fortran_order': False, 'shape': (2,), }", 4, "bf16");
	expect_error("{'descr': '<u4', 'fortran_order': False, 'shape': (2,), }", 8, "not one air has");
	expect_error("{'descr': '|f4', 'fortran_order': False, 'shape': (2,), }", 8, "byte order");
	expect_error("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", 16, "not one air has");
	expect_error("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", 8, "structured");
	expect_error("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", 8, "non-negative");
	expect_error("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 20, "truncated data");
	expect_error("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 28, "after the data");
	expect_error("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", 8, "overflows");
	expect_error("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", 8, "overflows");
	expect_error("{'descr': '<f8', 'fortran_order': False, 'shape': (1152921504606846976, 8), }", 8, "overflows");
	expect_error("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000000,), }", 8, "truncated data");
	expect_error("{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }", 4, "more than");
	expect_error("{'descr': '<f4', 'fortran_order': False, }", 4, "missing 'shape'");
	expect_error("{'fortran_order': False, 'shape': (1,), }", 4, "missing 'descr'");
	expect_error("{'descr': '<f4', 'shape': (1,), }", 4, "missing 'fortran_order'");
	expect_error("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", 4, "twice");
	expect_error("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", 4, "unknown key");
	expect_error("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (1,), }", 4, "True or False");
	expect_error("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), } x", 4, "junk");
	expect_error("{'descr': '<f4' 'fortran_order': False, 'shape': (1,)}", 4, "expected ','");
	expect_error("{'descr': '<f4', 'fortran_order': False, 'shape': (1 2)}", 4, "expected ','");
	expect_error("{'descr': '<f4', 'fortran_order': False, 'shape': 1}", 4, "expected '('");
	expect_error("{'descr': '<f\\4', 'fortran_order': False, 'shape': (1,)}", 4, "escapes");
	expect_error("{'descr': '<f4, 'fortran_order': False, 'shape': (1,)", 4, "not one air has");
	expect_error("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)", 4, "expected");
	expect_error("", 4, "expected '{'");

	npy_array a;
	char err[NPY_ERR_SIZE];
	size_t size;
	unsigned char *b = make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", "abcd", 4, &size);
	CHECK(npy_read_buffer(b, 5, &a, err) == -1 && strstr(err, "magic"));
	CHECK(npy_read_buffer(b, 40, &a, err) == -1 && strstr(err, "truncated .npy header"));
	CHECK(npy_read_buffer(NULL, 0, &a, err) == -1);
	b[6] = 4;
	CHECK(npy_read_buffer(b, size, &a, err) == -1 && strstr(err, "version 4.0"));
	b[6] = 1;
	b[7] = 1;
	CHECK(npy_read_buffer(b, size, &a, err) == -1 && strstr(err, "version 1.1"));
	b[7] = 0;
	b[0] = 'x';
	CHECK(npy_read_buffer(b, size, &a, err) == -1 && strstr(err, "magic"));
	free(b);
	/* a version 2.0 header length of 4 GB in a tiny file */
	b = make_npy(2, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", "abcd", 4, &size);
	b[8] = b[9] = b[10] = b[11] = 0xff;
	CHECK(npy_read_buffer(b, size, &a, err) == -1 && strstr(err, "truncated .npy header"));
	CHECK(npy_read_buffer(b, 11, &a, err) == -1);
	free(b);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* A read that succeeds must describe exactly the bytes it was given. */
static void check_consistent(const unsigned char *b, size_t size)
{
	npy_array a;
	char err[NPY_ERR_SIZE];
	if (npy_read_buffer(b, size, &a, err) != 0) {
		CHECK(a.data == NULL && err[0] != 0);
		return;
	}
	size_t count = 1;
	for (int d = 0; d < a.rank; d++)
		count *= (size_t)a.dims[d];
	CHECK(a.rank >= 0 && a.rank <= AIR_MAX_RANK && a.count == count);
	CHECK(a.nbytes == count * air_dtype_size(a.dtype) && a.nbytes <= size && a.data != NULL);
	CHECK(a.nbytes == 0 || memcmp((const unsigned char *)a.data + a.nbytes - 1, b + size - 1, 1) == 0 ||
	      a.dtype == AIR_BOOL);
	npy_free(&a);
}

static void test_mutations(void)
{
	const char *headers[] = {
		"{'descr': '<f4', 'fortran_order': False, 'shape': (3, 5), }",
		"{'descr': '<i8', 'fortran_order': False, 'shape': (2, 1, 4), }",
		"{'descr': '|b1', 'fortran_order': False, 'shape': (), }",
		"{'descr': '<f2', 'fortran_order': False, 'shape': (0, 9), }",
	};
	const size_t nbytes[] = {60, 64, 1, 0};
	unsigned char data[64];
	for (int i = 0; i < 64; i++)
		data[i] = (unsigned char)(i + 1);
	int cases = 0;
	for (int h = 0; h < 4; h++) {
		for (int major = 1; major <= 2; major++) {
			size_t size;
			unsigned char *orig = make_npy(major, headers[h], data, nbytes[h], &size);
			unsigned char *m = malloc(size + 64);
			/* every truncation */
			for (size_t cut = 0; cut < size; cut++) {
				unsigned char *t = malloc(cut ? cut : 1);
				memcpy(t, orig, cut);
				check_consistent(t, cut);
				free(t);
				cases++;
			}
			/* every single bit flip in the header */
			size_t hdr = size - nbytes[h];
			for (size_t bit = 0; bit < hdr * 8; bit++) {
				memcpy(m, orig, size);
				m[bit / 8] ^= (unsigned char)(1u << (bit % 8));
				check_consistent(m, size);
				cases++;
			}
			/* random bytes replaced by random or meaningful ones */
			const char junk[] = "0123456789(),:'\"{} \n-TrueFalse<>|";
			for (int k = 0; k < 400; k++) {
				memcpy(m, orig, size);
				int edits = 1 + (int)(rnd() % 6);
				for (int e = 0; e < edits; e++) {
					size_t at = rnd() % hdr;
					m[at] = rnd() & 1 ? (unsigned char)rnd() : (unsigned char)junk[rnd() % (sizeof junk - 1)];
				}
				check_consistent(m, size);
				cases++;
			}
			/* huge header lengths and extra bytes at the end */
			for (int k = 0; k < 8; k++) {
				memcpy(m, orig, size);
				m[8 + k % (major == 1 ? 2 : 4)] = 0xff;
				check_consistent(m, size);
				memcpy(m, orig, size);
				memset(m + size, 0xab, 64);
				check_consistent(m, size + 1 + (size_t)k * 7);
				cases += 2;
			}
			free(m);
			free(orig);
		}
	}
	/* plain junk */
	unsigned char j[300];
	for (int k = 0; k < 200; k++) {
		size_t n = rnd() % sizeof j;
		for (size_t i = 0; i < n; i++)
			j[i] = (unsigned char)rnd();
		if (n >= 6 && k % 2)
			memcpy(j, "\x93NUMPY\x01\x00", n < 8 ? n : 8);
		check_consistent(j, n);
		cases++;
	}
	printf("mutation cases: %d\n", cases);
	CHECK(cases > 500);
}

int main(void)
{
	test_round_trip();
	test_header_forms();
	test_refusals();
	test_mutations();
	return check_report("test_npy");
}

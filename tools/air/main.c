/* main.c - the `air` command-line tool. For now it reports the library
 * version, the op table and the CPU features; running .air files comes with
 * the file format. */
#include <stdio.h>
#include <string.h>

#include "air/air.h"
#include "kernels/common/cpu.h"

static int usage(void)
{
	fprintf(stderr, "usage: air version | air ops\n");
	return 2;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return usage();
	if (strcmp(argv[1], "version") == 0) {
		int v = air_version();
		printf("libair %d.%d.%d\nisa %s\nthreads %d\nops %d\n", v / 10000, v / 100 % 100, v % 100,
		       kcpu_isa_name(), air_get_num_threads(), air_op_count());
		return 0;
	}
	if (strcmp(argv[1], "ops") == 0) {
		for (int i = 0; i < air_op_count(); i++)
			printf("%s\n", air_op_name(i));
		return 0;
	}
	return usage();
}

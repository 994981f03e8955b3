/* main.c - the `air` command-line tool: runs .air files without Python.
 * This file only dispatches to the commands (cmd_*.c) and prints usage.
 * Exit codes: 0 ok, 1 an error (message on stderr), 2 a usage error. */
#include <stdio.h>
#include <string.h>

#include "air/air.h"
#include "cli.h"
#include "kernels/common/cpu.h"

static const struct {
	const char *name, *args, *help;
} commands[] = {
	{"info", "FILE", "inputs, outputs, ops, weight bytes, metadata of a .air file"},
	{"run", "FILE --input A.npy [--input B.npy ...] --output-dir DIR [--threads T]",
	 "run once; writes DIR/out0.npy, out1.npy, ..."},
	{"bench", "FILE [--iters N] [--warmup W] [--threads T] [--input A.npy ...] [--dim NAME=VALUE ...]",
	 "median latency and spread (random inputs when none is given)"},
	{"dump", "FILE [--dot] [--before] [--after]",
	 "the graph before and after the passes as text; --dot: Graphviz DOT of one (after, or --before)"},
	{"version", "", "library version, ISA chosen, threads, op count"},
	{"ops", "", "the op table"},
};

void cli_print_usage(FILE *out, const char *cmd)
{
	if (!cmd)
		fprintf(out, "usage: air COMMAND [ARGS]\n");
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
		if (cmd && strcmp(cmd, commands[i].name) != 0)
			continue;
		if (cmd)
			fprintf(out, "usage: air %s %s\n", commands[i].name, commands[i].args);
		else
			fprintf(out, "  air %s %s\n      %s\n", commands[i].name, commands[i].args, commands[i].help);
	}
}

static int cmd_version(int argc, char **argv)
{
	if (argc > 0)
		return cli_usage_error("version", "unexpected argument '%s'", argv[0]);
	int v = air_version();
	printf("libair %d.%d.%d\nisa %s\nthreads %d\nops %d\n", v / 10000, v / 100 % 100, v % 100, kcpu_isa_name(),
	       air_get_num_threads(), air_op_count());
	return CLI_OK;
}

static int cmd_ops(int argc, char **argv)
{
	if (argc > 0)
		return cli_usage_error("ops", "unexpected argument '%s'", argv[0]);
	for (int i = 0; i < air_op_count(); i++)
		printf("%s\n", air_op_name(i));
	return CLI_OK;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		cli_print_usage(stderr, NULL);
		return CLI_USAGE;
	}
	const char *cmd = argv[1];
	if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
		cli_print_usage(stdout, NULL);
		return CLI_OK;
	}
	static int (*const run[])(int, char **) = {cmd_info, cmd_run, cmd_bench, cmd_dump, cmd_version, cmd_ops};
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
		if (strcmp(cmd, commands[i].name) != 0)
			continue;
		for (int a = 2; a < argc; a++) {
			if (strcmp(argv[a], "-h") == 0 || strcmp(argv[a], "--help") == 0) {
				cli_print_usage(stdout, cmd);
				return CLI_OK;
			}
		}
		return run[i](argc - 2, argv + 2);
	}
	fprintf(stderr, "air: unknown command '%s'\n", cmd);
	cli_print_usage(stderr, NULL);
	return CLI_USAGE;
}

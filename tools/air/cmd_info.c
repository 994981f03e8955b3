/* cmd_info.c - `air info FILE`: what a .air file holds and what it takes:
 * inputs and outputs (names, dtypes, shapes with named symbolic dims), the
 * saved graph's ops by count, weight bytes, the saved compile options and
 * the metadata (torchair version, options, ...). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

typedef struct op_count {
	const char *op;
	int n;
} op_count;

static int by_count(const void *a, const void *b)
{
	const op_count *x = a, *y = b;
	if (x->n != y->n)
		return y->n - x->n;
	return strcmp(x->op, y->op);
}

static void print_ops(const air_file *f)
{
	int n = air_file_node_count(f);
	op_count *counts = calloc(n > 0 ? (size_t)n : 1, sizeof *counts);
	int distinct = 0;
	if (!counts)
		return;
	for (int i = 0; i < n; i++) {
		const char *op = air_file_node_op(f, i);
		if (!op)
			op = "?";
		int k = 0;
		while (k < distinct && strcmp(counts[k].op, op) != 0)
			k++;
		if (k == distinct)
			counts[distinct++].op = op;
		counts[k].n++;
	}
	qsort(counts, (size_t)distinct, sizeof *counts, by_count);
	printf("ops: %d nodes, %d distinct\n", n, distinct);
	for (int k = 0; k < distinct; k++)
		printf("  %-28s %d\n", counts[k].op, counts[k].n);
	free(counts);
}

static void print_options(const air_file *f)
{
	air_compile_options o;
	air_compile_options_init(&o);
	if (air_file_compile_options(f, &o) != AIR_OK)
		return;
	static const struct {
		uint32_t bit;
		const char *name;
	} flags[] = {
		{AIR_COMPILE_NO_FUSION, "no_fusion"},
		{AIR_COMPILE_NO_MEMORY_REUSE, "no_memory_reuse"},
		{AIR_COMPILE_REFERENCE_KERNELS, "reference_kernels"},
		{AIR_COMPILE_OP_BY_OP, "op_by_op"},
		{AIR_COMPILE_AUTOTUNE, "autotune"},
		{AIR_COMPILE_WEIGHTS_IN_PLACE, "weights_in_place"},
	};
	printf("compile options: threads %d%s", o.num_threads, o.num_threads ? "" : " (the machine's)");
	for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
		if (o.flags & flags[i].bit)
			printf(", %s", flags[i].name);
	if (o.fusion_threshold)
		printf(", fusion_threshold %d", o.fusion_threshold);
	for (int b = 0; b < 32; b++) {
		const char *pass = (o.disabled_passes >> b & 1) ? air_pass_name(1u << b) : NULL;
		if (pass)
			printf(", no %s", pass);
	}
	printf("\n");
}

int cmd_info(int argc, char **argv)
{
	if (argc < 1)
		return cli_usage_error("info", "missing FILE");
	if (argc > 1)
		return cli_usage_error("info", "unexpected argument '%s'", argv[1]);
	const char *path = argv[0];
	air_file *f;
	air_model *m;
	/* the inputs' and outputs' types do not depend on the passes: compile
	 * the quickest way (no passes, no weight packing) */
	int rc = cli_load(path, 1, AIR_COMPILE_OP_BY_OP | AIR_COMPILE_REFERENCE_KERNELS, &f, &m);
	if (rc)
		return rc;
	printf("file: %s (.air format version %d)\n", path, air_file_version(f));
	char name[160], type[512];
	printf("inputs: %d\n", air_model_input_count(m));
	for (int i = 0; i < air_model_input_count(m); i++) {
		cli_value_string(m, 0, i, type, sizeof type);
		printf("  %d %-20s %s\n", i, cli_input_name(m, i, name, sizeof name), type);
	}
	printf("outputs: %d\n", air_model_output_count(m));
	for (int i = 0; i < air_model_output_count(m); i++) {
		cli_value_string(m, 1, i, type, sizeof type);
		printf("  %d %-20s %s\n", i, cli_output_name(m, i, name, sizeof name), type);
	}
	print_ops(f);
	printf("weights: %zu bytes in %d constants\n", air_file_weight_bytes(f), air_file_constant_count(f));
	print_options(f);
	int nm = air_file_meta_count(f);
	printf("metadata: %d\n", nm);
	for (int i = 0; i < nm; i++) {
		const char *k, *v;
		if (air_file_meta_at(f, i, &k, &v) == AIR_OK)
			printf("  %s: %s\n", k, v);
	}
	air_model_destroy(m);
	air_file_close(f);
	return CLI_OK;
}

/* cmd_dump.c - `air dump FILE [--dot] [--before] [--after]`: the graph of a
 * .air file as the CPU running it compiles it, as text (air_model_text) or
 * Graphviz DOT (air_model_dot): before the passes (as saved), after them
 * (each step's kernel, fused groups). Text shows both unless one is asked
 * for; DOT shows the graph after the passes unless --before is given (one
 * digraph per output is what `dot -Tsvg` expects). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static int print_form(const air_model *m, int dot, int which)
{
	air_status (*form)(const air_model *, int, char *, size_t, size_t *) = dot ? air_model_dot : air_model_text;
	size_t len = 0;
	char *text = NULL;
	air_status st = form(m, which, NULL, 0, &len);
	if (st == AIR_OK) {
		text = malloc(len + 1);
		st = text ? form(m, which, text, len + 1, &len) : AIR_OUT_OF_MEMORY;
	}
	if (st == AIR_OK)
		fputs(text, stdout);
	free(text);
	return st == AIR_OK ? CLI_OK : cli_air_error("dump", st);
}

int cmd_dump(int argc, char **argv)
{
	const char *path = NULL;
	int dot = 0, before = 0, after = 0;
	for (int a = 0; a < argc; a++) {
		if (strcmp(argv[a], "--dot") == 0)
			dot = 1;
		else if (strcmp(argv[a], "--before") == 0)
			before = 1;
		else if (strcmp(argv[a], "--after") == 0)
			after = 1;
		else if (argv[a][0] == '-' && argv[a][1])
			return cli_usage_error("dump", "unknown option '%s'", argv[a]);
		else if (path)
			return cli_usage_error("dump", "unexpected argument '%s'", argv[a]);
		else
			path = argv[a];
	}
	if (!path)
		return cli_usage_error("dump", "missing FILE");
	if (dot && before && after)
		return cli_usage_error("dump", "--dot prints one graph: --before or --after, not both");
	if (!before && !after) {
		before = !dot;
		after = 1;
	}
	air_model *m;
	int rc = cli_load(path, 0, 0, NULL, &m);
	if (rc)
		return rc;
	if (before)
		rc = print_form(m, dot, AIR_DOT_BEFORE_PASSES);
	if (!rc && after) {
		if (before)
			printf("\n");
		rc = print_form(m, dot, AIR_DOT_AFTER_PASSES);
	}
	air_model_destroy(m);
	return rc;
}

/* cli_args.c - parses the command line of `air run` and `air bench`: FILE
 * and the options they share, each checked with the message a user sees for
 * a value out of range, a missing value or an option the command does not
 * take (see cli_args.h). */
#include <string.h>

#include "cli.h"
#include "cli_args.h"

/* The options with a value, the bit that enables each, and its range. */
static const struct {
	const char *name;
	unsigned bit;
	long min, max;
} OPTIONS[] = {
	{"--input", CLI_OPT_INPUT, 0, 0},
	{"--dim", CLI_OPT_DIM, 0, 0},
	{"--threads", CLI_OPT_THREADS, 1, 4096},
	{"--iters", CLI_OPT_ITERS, 1, 1000000},
	{"--warmup", CLI_OPT_WARMUP, 0, 1000000},
	{"--output-dir", CLI_OPT_OUTPUT_DIR, 0, 0},
};

/* A number option's value into *out, in [min, max]. */
static int number(const char *cmd, const char *opt, const char *v, long min, long max, long *out)
{
	if (cli_parse_int(v, max, out) || *out < min)
		return cli_usage_error(cmd, "%s takes a number from %ld to %ld, not '%s'", opt, min, max, v);
	return CLI_OK;
}

/* One option's value (bit says which option) into args. */
static int take(const char *cmd, unsigned bit, const char *opt, const char *v, long min, long max, cli_args *args)
{
	switch (bit) {
	case CLI_OPT_INPUT:
		if (args->n_in == CLI_MAX_INPUTS)
			return cli_usage_error(cmd, "more than %d inputs", CLI_MAX_INPUTS);
		args->inputs[args->n_in++] = v;
		return CLI_OK;
	case CLI_OPT_DIM: {
		const char *eq = strchr(v, '=');
		long value;
		if (!eq || eq == v || cli_parse_int(eq + 1, INT32_MAX, &value))
			return cli_usage_error(cmd, "--dim takes NAME=VALUE (VALUE >= 0), not '%s'", v);
		if (args->n_dims == CLI_MAX_DIMS)
			return cli_usage_error(cmd, "more than %d --dim", CLI_MAX_DIMS);
		args->dims[args->n_dims++] = (cli_dim){v, (size_t)(eq - v), value, 0};
		return CLI_OK;
	}
	case CLI_OPT_THREADS:
		return number(cmd, opt, v, min, max, &args->threads);
	case CLI_OPT_ITERS:
		return number(cmd, opt, v, min, max, &args->iters);
	case CLI_OPT_WARMUP:
		return number(cmd, opt, v, min, max, &args->warmup);
	default: /* CLI_OPT_OUTPUT_DIR */
		if (args->outdir)
			return cli_usage_error(cmd, "--output-dir given twice");
		args->outdir = v;
		return CLI_OK;
	}
}

int cli_parse_args(const char *cmd, unsigned takes, int argc, char **argv, cli_args *args)
{
	long iters = args->iters, warmup = args->warmup;
	memset(args, 0, sizeof *args);
	args->iters = iters;
	args->warmup = warmup;
	for (int a = 0; a < argc; a++) {
		const char *arg = argv[a];
		size_t k = 0, n = sizeof OPTIONS / sizeof OPTIONS[0];
		while (k < n && !((takes & OPTIONS[k].bit) && strcmp(arg, OPTIONS[k].name) == 0))
			k++;
		if (k < n) {
			if (a + 1 >= argc)
				return cli_usage_error(cmd, "%s needs a value", arg);
			int rc = take(cmd, OPTIONS[k].bit, arg, argv[++a], OPTIONS[k].min, OPTIONS[k].max, args);
			if (rc)
				return rc;
		} else if (arg[0] == '-' && arg[1]) {
			return cli_usage_error(cmd, "unknown option '%s'", arg);
		} else if (args->path) {
			return cli_usage_error(cmd, "unexpected argument '%s'", arg);
		} else {
			args->path = arg;
		}
	}
	if (!args->path)
		return cli_usage_error(cmd, "missing FILE");
	return CLI_OK;
}

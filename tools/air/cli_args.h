/* cli_args.h - the command line of the `air` commands that run a model
 * (run, bench): FILE and the options they share (--input, --dim,
 * --threads, --iters, --warmup, --output-dir), parsed in one place so the
 * commands give the same usage errors for the same mistakes. */
#ifndef AIR_TOOLS_CLI_ARGS_H
#define AIR_TOOLS_CLI_ARGS_H

#include <stddef.h>
#include <stdint.h>

/* The options a command takes (a mask); any other is "unknown option". */
enum {
	CLI_OPT_INPUT = 1u << 0,      /* --input A.npy, repeated, in the model's input order */
	CLI_OPT_DIM = 1u << 1,        /* --dim NAME=VALUE, repeated */
	CLI_OPT_THREADS = 1u << 2,    /* --threads T, 1..4096 */
	CLI_OPT_ITERS = 1u << 3,      /* --iters N, 1..1000000 */
	CLI_OPT_WARMUP = 1u << 4,     /* --warmup W, 0..1000000 */
	CLI_OPT_OUTPUT_DIR = 1u << 5, /* --output-dir DIR, once */
};

enum { CLI_MAX_INPUTS = 256, CLI_MAX_DIMS = 64 };

/* A --dim NAME=VALUE: name points into argv (len bytes, no NUL at len);
 * used is set by whoever binds it, to report the ones nothing used. */
typedef struct cli_dim {
	const char *name;
	size_t len;
	int64_t value;
	int used;
} cli_dim;

typedef struct cli_args {
	const char *path;   /* FILE (required) */
	const char *outdir; /* NULL if not given */
	const char *inputs[CLI_MAX_INPUTS];
	int n_in;
	cli_dim dims[CLI_MAX_DIMS];
	int n_dims;
	long threads; /* 0: not given */
	long iters;   /* left as the caller set it if not given */
	long warmup;  /* left as the caller set it if not given */
} cli_args;

/* Parses argv (after the command's name) into *args, taking the options in
 * `takes`. The caller sets the defaults of iters and warmup first; the rest
 * is cleared here. FILE is required. Returns CLI_OK or, having printed the
 * message and cmd's usage, CLI_USAGE. */
int cli_parse_args(const char *cmd, unsigned takes, int argc, char **argv, cli_args *args);

#endif

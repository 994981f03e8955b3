/* cli.h - what the `air` commands share: loading a .air file, errors and
 * exit codes, shapes as text, and binding .npy inputs to a session. Each
 * command lives in its own cmd_<name>.c; main.c dispatches. */
#ifndef AIR_TOOLS_CLI_H
#define AIR_TOOLS_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "air/air.h"
#include "npy.h"

/* Exit codes: 0 ok, 1 an error (message on stderr), 2 a usage error. */
enum { CLI_OK = 0, CLI_ERROR = 1, CLI_USAGE = 2 };

/* Prints "air: <message>" on stderr; returns CLI_ERROR. */
int cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints "air <cmd>: <message>" and the command's usage line; returns CLI_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The usage text of one command, or of all when cmd is NULL. */
void cli_print_usage(FILE *out, const char *cmd);
/* CLI_ERROR with the library's message for status, after what. */
int cli_air_error(const char *what, air_status status);

/* A non-negative int from text (the whole text, at most max); 0, or -1. */
int cli_parse_int(const char *text, long max, long *out);

/* Opens and compiles path. threads > 0 overrides the file's thread count;
 * extra_flags (AIR_COMPILE_*) are added to the file's flags. *file may be
 * NULL if the caller does not want the opened file (else it closes it). */
int cli_load(const char *path, int threads, uint32_t extra_flags, air_file **file, air_model **model);

/* "x" (the input's name) or "input 2" when it has none. */
const char *cli_input_name(const air_model *m, int i, char *buf, size_t size);
const char *cli_output_name(const air_model *m, int i, char *buf, size_t size);

/* "f32[batch, 3, 224, 224]" for a model's input (is_output 0) or output. */
void cli_value_string(const air_model *m, int is_output, int i, char *buf, size_t size);

/* Values of the model's symbols, as the inputs bind them: name and value
 * per symbol seen, with the input that bound it for messages. */
typedef struct cli_symbols {
	int n;
	struct {
		air_dim dim;
		int64_t value;
		int input; /* -1: given on the command line (--dim) */
	} s[64];
} cli_symbols;

/* Checks array against input i's dtype, rank and dims (symbols bound in
 * syms, consistently across inputs) and binds it. A bf16 input takes an f32
 * array, rounded in place into array's own buffer (see npy.h). On failure a
 * message naming the input; returns CLI_ERROR. */
int cli_bind_input(air_session *s, const air_model *m, int i, npy_array *array, cli_symbols *syms);

/* Reads the .npy at path into *array and binds it as input i (as
 * cli_bind_input); a file that does not read is an error naming the input. */
int cli_read_input(air_session *s, const air_model *m, int i, const char *path, npy_array *array, cli_symbols *syms);

/* A session on m; an error message if it cannot be made. */
int cli_session(const air_model *m, air_session **s);

/* Once every input is bound: a buffer per output, of the shape the inputs
 * give, set on the session. outs has n_out entries, cleared by the caller
 * and freed by it (each, even on error); ranks and dims (n_out entries)
 * receive each output's shape unless NULL. */
int cli_set_outputs(air_session *s, const air_model *m, int n_out, void **outs, int *ranks,
		    int64_t (*dims)[AIR_MAX_RANK]);

/* Frees what cli_set_outputs allocated, and outs (NULL is fine). */
void cli_free_outputs(void **outs, int n_out);

/* Output i's data as .npy at path (bf16 written as f32). */
int cli_write_output(const char *path, air_dtype dtype, int rank, const int64_t *dims, const void *data);

/* Commands: argc/argv start after the command's name. */
int cmd_info(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_dump(int argc, char **argv);

#endif

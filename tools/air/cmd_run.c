/* cmd_run.c - `air run FILE --input A.npy ... --output-dir DIR`: one run of
 * a .air file on numpy inputs, in the model's input order, writing
 * DIR/out0.npy, out1.npy, ... A wrong input count, dtype or shape is an
 * error that names the input. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

enum { RUN_MAX_INPUTS = 256 };

int cmd_run(int argc, char **argv)
{
	const char *path = NULL, *outdir = NULL;
	const char *inputs[RUN_MAX_INPUTS];
	int n_in = 0;
	long threads = 0;
	for (int a = 0; a < argc; a++) {
		const char *arg = argv[a];
		int has_value = a + 1 < argc;
		if (strcmp(arg, "--input") == 0 || strcmp(arg, "--output-dir") == 0 || strcmp(arg, "--threads") == 0) {
			if (!has_value)
				return cli_usage_error("run", "%s needs a value", arg);
			const char *v = argv[++a];
			if (arg[2] == 'i') {
				if (n_in == RUN_MAX_INPUTS)
					return cli_usage_error("run", "more than %d inputs", RUN_MAX_INPUTS);
				inputs[n_in++] = v;
			} else if (arg[2] == 'o') {
				if (outdir)
					return cli_usage_error("run", "--output-dir given twice");
				outdir = v;
			} else if (cli_parse_int(v, 4096, &threads) || threads < 1) {
				return cli_usage_error("run", "--threads takes a number from 1 to 4096, not '%s'", v);
			}
		} else if (arg[0] == '-' && arg[1]) {
			return cli_usage_error("run", "unknown option '%s'", arg);
		} else if (path) {
			return cli_usage_error("run", "unexpected argument '%s'", arg);
		} else {
			path = arg;
		}
	}
	if (!path)
		return cli_usage_error("run", "missing FILE");
	if (!outdir)
		return cli_usage_error("run", "missing --output-dir");

	/* the output folder first: a typo there should not cost a model load */
	struct stat st_dir;
	if (mkdir(outdir, 0777) != 0 && errno != EEXIST)
		return cli_error("%s: %s", outdir, strerror(errno));
	if (stat(outdir, &st_dir) != 0 || !S_ISDIR(st_dir.st_mode))
		return cli_error("%s: Not a directory", outdir);

	air_model *m = NULL;
	air_session *s = NULL;
	npy_array arrays[RUN_MAX_INPUTS];
	void **outs = NULL;
	memset(arrays, 0, sizeof arrays);
	int rc = cli_load(path, (int)threads, 0, NULL, &m);
	if (rc)
		return rc;
	int n_model = air_model_input_count(m), n_out = air_model_output_count(m);
	if (n_in != n_model) {
		char names[1024] = "";
		size_t len = 0;
		for (int i = 0; i < n_model && len < sizeof names; i++) {
			char name[160];
			len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", i ? ", " : "",
						cli_input_name(m, i, name, sizeof name));
		}
		rc = cli_error("%s takes %d input%s (%s), %d given", path, n_model, n_model == 1 ? "" : "s", names, n_in);
		goto done;
	}
	air_status st = air_session_create(m, &s);
	if (st != AIR_OK) {
		rc = cli_air_error("session", st);
		goto done;
	}
	cli_symbols syms = {0};
	for (int i = 0; i < n_in; i++) {
		char err[NPY_ERR_SIZE], name[160];
		if (npy_read_file(inputs[i], &arrays[i], err)) {
			rc = cli_error("input %s: %s", cli_input_name(m, i, name, sizeof name), err);
			goto done;
		}
		if ((rc = cli_bind_input(s, m, i, &arrays[i], &syms)))
			goto done;
	}
	outs = calloc((size_t)(n_out > 0 ? n_out : 1), sizeof *outs);
	if (!outs) {
		rc = cli_error("out of memory");
		goto done;
	}
	int ranks[64];
	int64_t dims[64][AIR_MAX_RANK];
	if (n_out > 64) {
		rc = cli_error("%s has %d outputs; air run writes at most 64", path, n_out);
		goto done;
	}
	for (int i = 0; i < n_out; i++) {
		air_dtype dt;
		int mrank;
		air_dim mdims[AIR_MAX_RANK];
		st = air_session_output_shape(s, i, &ranks[i], dims[i]);
		if (st == AIR_OK)
			st = air_model_output_info(m, i, &dt, &mrank, mdims);
		if (st != AIR_OK) {
			rc = cli_air_error("inputs", st);
			goto done;
		}
		size_t bytes = air_dtype_size(dt);
		for (int d = 0; d < ranks[i]; d++)
			bytes *= (size_t)dims[i][d];
		outs[i] = malloc(bytes ? bytes : 1);
		if (!outs[i]) {
			rc = cli_error("out of memory (output %d: %zu bytes)", i, bytes);
			goto done;
		}
		st = air_session_set_output(s, i, outs[i], bytes);
		if (st != AIR_OK) {
			rc = cli_air_error("output", st);
			goto done;
		}
	}
	st = air_session_run(s);
	if (st != AIR_OK) {
		rc = cli_air_error("run", st);
		goto done;
	}
	for (int i = 0; i < n_out; i++) {
		char out_path[4096];
		air_dtype dt;
		int mrank;
		air_dim mdims[AIR_MAX_RANK];
		air_model_output_info(m, i, &dt, &mrank, mdims);
		snprintf(out_path, sizeof out_path, "%s/out%d.npy", outdir, i);
		if ((rc = cli_write_output(out_path, dt, ranks[i], dims[i], outs[i])))
			goto done;
	}
	rc = CLI_OK;
done:
	for (int i = 0; i < n_out && outs; i++)
		free(outs[i]);
	free(outs);
	for (int i = 0; i < n_in; i++)
		npy_free(&arrays[i]);
	air_session_destroy(s);
	air_model_destroy(m);
	return rc;
}

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
#include "cli_args.h"

int cmd_run(int argc, char **argv)
{
	cli_args args = {0};
	int rc = cli_parse_args("run", CLI_OPT_INPUT | CLI_OPT_OUTPUT_DIR | CLI_OPT_THREADS, argc, argv, &args);
	if (rc)
		return rc;
	const char *path = args.path, *outdir = args.outdir;
	int n_in = args.n_in;
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
	npy_array arrays[CLI_MAX_INPUTS];
	void **outs = NULL;
	memset(arrays, 0, sizeof arrays);
	rc = cli_load(path, (int)args.threads, 0, NULL, &m);
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
	if ((rc = cli_session(m, &s)))
		goto done;
	cli_symbols syms = {0};
	for (int i = 0; i < n_in; i++)
		if ((rc = cli_read_input(s, m, i, args.inputs[i], &arrays[i], &syms)))
			goto done;
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
	if ((rc = cli_set_outputs(s, m, n_out, outs, ranks, dims)))
		goto done;
	air_status st = air_session_run(s);
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
	cli_free_outputs(outs, n_out);
	for (int i = 0; i < n_in; i++)
		npy_free(&arrays[i]);
	air_session_destroy(s);
	air_model_destroy(m);
	return rc;
}

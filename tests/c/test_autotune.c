/* test_autotune.c - AIR_COMPILE_AUTOTUNE (mode='max-autotune') through the public API:
 * a step with several kernels that can run it is timed and the report names what was
 * measured; the tuned model computes what the default one does; the choice goes to the cache
 * file and a second compile reads it back instead of timing again; a cache line naming a
 * kernel that is not a candidate, a garbled file and a path that cannot be opened change
 * nothing but the time spent; without the flag nothing is tuned. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "op_harness.h"

enum { N = 1, C = 32, H = 14, W = 14, O = 48 };

static float *x, *w, *b;

static air_model *compile_conv(uint32_t flags, const char *cache)
{
	int64_t s[2] = {1, 1}, p[2] = {1, 1}, d[2] = {1, 1};
	air_attr attrs[7] = {th_ints("stride", s, 2), th_ints("padding", p, 2), th_ints("dilation", d, 2),
			     th_int("groups", 1), th_int("has_bias", 1), th_int("act", 1), th_int("has_residual", 0)};
	int64_t xd[4] = {N, H, W, C}, wd[4] = {O, C, 3, 3}, bd[1] = {O};
	th_arg a[3] = {th_make(AIR_F32, x, 4, xd), th_make(AIR_F32, w, 4, wd), th_make(AIR_F32, b, 1, bd)};
	a[1].constant = 1;
	a[2].constant = 1;
	air_graph *g = NULL;
	air_status st = th_build("conv2d_nhwc", a, 3, attrs, 7, &g);
	CHECK_OK(st);
	if (st != AIR_OK)
		return NULL;
	air_compile_options o;
	air_compile_options_init(&o);
	o.flags = flags;
	o.autotune_cache = cache;
	air_model *m = NULL;
	st = air_compile(g, &o, &m);
	air_graph_destroy(g);
	CHECK_OK(st);
	return st == AIR_OK ? m : NULL;
}

static float *run(air_model *m)
{
	int64_t xd[4] = {N, H, W, C};
	th_arg a[1] = {th_make(AIR_F32, x, 4, xd)};
	int rank;
	int64_t dims[AIR_MAX_RANK];
	return th_run(m, a, 1, &rank, dims);
}

/* The kernel named on the file's last line (what the last timed compile chose). */
static void last_choice(const char *path, char *name, size_t size)
{
	name[0] = 0;
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	char line[8192];
	while (fgets(line, sizeof line, f)) {
		char *tab = strrchr(line, '\t');
		if (tab) {
			tab[strcspn(tab, "\r\n")] = 0;
			snprintf(name, size, "%s", tab + 1);
		}
	}
	fclose(f);
}

static int count_lines(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	int n = 0, c;
	while ((c = fgetc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

static void check_same(const float *got, const float *want, const char *label)
{
	if (!got || !want) {
		CHECK(0);
		return;
	}
	double worst = 0;
	for (int i = 0; i < N * H * W * O; i++) {
		double e = fabs((double)got[i] - (double)want[i]);
		worst = e > worst ? e : worst;
	}
	/* different kernels sum C*9 products in different orders */
	if (worst > 1e-4)
		fprintf(stderr, "%s: differs from the default model by %g\n", label, worst);
	CHECK(worst <= 1e-4);
}

int main(void)
{
	x = th_randf(N * H * W * C), w = th_randf(O * C * 9), b = th_randf(O);
	char path[] = "/tmp/air_autotune_XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);

	/* the default rule: no tuning, no autotune line in the report */
	air_model *m0 = compile_conv(0, path);
	float *want = m0 ? run(m0) : NULL;
	CHECK(m0 && !strstr(air_model_report(m0), "autotune:"));
	CHECK(count_lines(path) == 0);

	/* tuned: the conv has several candidates (Winograd, im2col; on every ISA, as the portable
	 * kernels run on the GEMM's scalar path) */
	air_model *m1 = compile_conv(AIR_COMPILE_AUTOTUNE, path);
	const char *r1 = m1 ? air_model_report(m1) : "";
	CHECK(strstr(r1, "autotune: 1 steps timed, 0 from the cache"));
	char chosen[256];
	last_choice(path, chosen, sizeof chosen);
	CHECK(count_lines(path) == 1);
	CHECK(chosen[0] && strstr(r1, chosen)); /* the report names the kernel the file keeps */
	float *got1 = m1 ? run(m1) : NULL;
	check_same(got1, want, "tuned");

	/* again: the choice comes from the file, nothing is timed, nothing appended */
	air_model *m2 = compile_conv(AIR_COMPILE_AUTOTUNE, path);
	const char *r2 = m2 ? air_model_report(m2) : "";
	CHECK(strstr(r2, "autotune: 0 steps timed, 1 from the cache"));
	CHECK(chosen[0] && strstr(r2, chosen));
	CHECK(count_lines(path) == 1);
	float *got2 = m2 ? run(m2) : NULL;
	check_same(got2, want, "from the cache");

	/* a line naming no candidate, and garbage: ignored, the step is timed again */
	FILE *f = fopen(path, "w");
	if (f) {
		fputs("garbage without a tab\n\t\n", f);
		fclose(f);
	}
	air_model *m3 = compile_conv(AIR_COMPILE_AUTOTUNE, path);
	CHECK(m3 && strstr(air_model_report(m3), "autotune: 1 steps timed, 0 from the cache"));
	CHECK(count_lines(path) == 3);
	char key_and_kernel[8192] = "";
	f = fopen(path, "r");
	if (f) {
		while (fgets(key_and_kernel, sizeof key_and_kernel, f))
			;
		fclose(f);
	}
	char *tab = strrchr(key_and_kernel, '\t');
	if (tab) {
		f = fopen(path, "w");
		if (f) {
			fprintf(f, "%.*s\tno_such_kernel\n", (int)(tab - key_and_kernel), key_and_kernel);
			fclose(f);
		}
	}
	air_model *m4 = compile_conv(AIR_COMPILE_AUTOTUNE, path);
	CHECK(tab && m4 && strstr(air_model_report(m4), "autotune: 1 steps timed, 0 from the cache"));

	/* a cache that cannot be opened: tuned all the same */
	air_model *m5 = compile_conv(AIR_COMPILE_AUTOTUNE, "/nonexistent-dir/autotune.tsv");
	CHECK(m5 && strstr(air_model_report(m5), "autotune: 1 steps timed"));
	float *got5 = m5 ? run(m5) : NULL;
	check_same(got5, want, "unwritable cache");

	/* no file at all */
	air_model *m6 = compile_conv(AIR_COMPILE_AUTOTUNE, NULL);
	CHECK(m6 && strstr(air_model_report(m6), "autotune: 1 steps timed"));

	/* the reference kernels have nothing to choose between */
	air_model *m7 = compile_conv(AIR_COMPILE_AUTOTUNE | AIR_COMPILE_REFERENCE_KERNELS, path);
	CHECK(m7 && !strstr(air_model_report(m7), "autotune:"));

	air_model *ms[] = {m0, m1, m2, m3, m4, m5, m6, m7};
	for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
		air_model_destroy(ms[i]);
	free(want), free(got1), free(got2), free(got5);
	free(x), free(w), free(b);
	unlink(path);
	return check_report("test_autotune");
}

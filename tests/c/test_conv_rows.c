/* test_conv_rows.c - channels-last convolutions that read their weight in
 * place (kernels/conv/conv_rows.c): fewer than 512 output pixels, one
 * group, at least 256 output channels and a product of at least 256. A
 * conv2d (+ batch_norm, whose scale the kernel applies after the product)
 * with a borrowed weight, through the layout pass, must take that kernel,
 * hold none of the weight's bytes (against the packed copy that the same
 * model makes under AIR_COMPILE_NO_MEMORY_REUSE), and agree with the
 * reference kernels: channels off the vector widths, 1x1 (x read as it
 * stands), 1x1 and 3x3 with stride 2, padding, a product longer than the
 * tile loop's reach (K past 4096), pixels off the panel width, a residual
 * and relu, batch 3. The CMake file runs it on every ISA. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "air/air.h"
#include "check.h"
#include "pass_graph.h"

typedef struct rows_case {
	int64_t N, C, H, W, O, K, stride;
	int batch_norm, residual_relu;
} rows_case;

static const char *ROWS = "conv2d_nhwc_weight_rows";

static air_value conv(air_graph *g, air_value x, const rows_case *c, int bn)
{
	int64_t wd[4] = {c->O, c->C, c->K, c->K}, cd[1] = {c->O};
	int64_t pad[2] = {c->K / 2, c->K / 2}, st[2] = {c->stride, c->stride};
	air_value in[2] = {x, constant(g, 4, wd, -0.5f, 0.5f)};
	air_attr attrs[3] = {iattr("has_bias", 0), ints("padding", pad, 2), ints("stride", st, 2)};
	air_value y = node(g, "conv2d", in, 2, attrs, 3);
	if (!bn)
		return y;
	air_value b[5] = {y, constant(g, 1, cd, 0.5f, 2.0f), constant(g, 1, cd, -1, 1), constant(g, 1, cd, -0.5f, 0.5f),
			  constant(g, 1, cd, 0.25f, 1.5f)};
	air_attr ba[3] = {{"eps", AIR_ATTR_FLOAT, 0, 1e-5, NULL, 0}, iattr("has_weight", 1), iattr("has_bias", 1)};
	return node(g, "batch_norm", b, 5, ba, 3);
}

/* An owned 3x3 conv C -> C (packed once: no weight source) in front, so
 * the layout pass makes the region channels-last even for a 1x1 under
 * test. */
static air_value entry_conv(air_graph *g, air_value x, int64_t C)
{
	int64_t wd[4] = {C, C, 3, 3}, pad[2] = {1, 1};
	float *w = randv(C * C * 9, -0.5f, 0.5f);
	air_value in[2] = {x, 0};
	CHECK_OK(air_graph_add_constant(g, AIR_F32, 4, wd, w, 0, &in[1]));
	free(w);
	air_attr attrs[2] = {iattr("has_bias", 0), ints("padding", pad, 2)};
	return node(g, "conv2d", in, 2, attrs, 2);
}

static air_memory_info memory_info(const air_model *m)
{
	air_memory_info info;
	memset(&info, 0, sizeof info);
	info.size = sizeof info;
	CHECK_OK(air_model_memory_info(m, &info));
	return info;
}

static void test_case(const rows_case *c)
{
	char label[160];
	snprintf(label, sizeof label, "N%lld C%lld %lldx%lld O%lld k%lld s%lld bn %d res %d", (long long)c->N,
		 (long long)c->C, (long long)c->H, (long long)c->W, (long long)c->O, (long long)c->K,
		 (long long)c->stride, c->batch_norm, c->residual_relu);
	air_graph *g;
	CHECK_OK(air_graph_create(&g));
	int64_t xd[4] = {c->N, c->C, c->H, c->W};
	air_value x = entry_conv(g, input(g, "x", 4, xd), c->C);
	air_value y = conv(g, x, c, c->batch_norm);
	int nconv = 1;
	if (c->residual_relu) {
		/* a second conv (no batch norm) joins the first: the residual
		 * and the relu in the epilogue, after the scale */
		y = node(g, "relu", (air_value[]){binary(g, "add", y, conv(g, x, c, 0))}, 1, NULL, 0);
		nconv = 2;
	}
	CHECK_OK(air_graph_set_outputs(g, &y, 1));
	air_model *low = compile(g, AIR_COMPILE_WEIGHTS_IN_PLACE, 0), *packed = compile(g, AIR_COMPILE_NO_MEMORY_REUSE, 0);
	air_model *dflt = compile(g, 0, 0); /* opt-in: the default keeps the packed copy */
	air_model *ref = compile(g, AIR_COMPILE_REFERENCE_KERNELS, 0);
	if (!low || !packed || !ref)
		goto done;
	const char *r = air_model_report(low);
	int chosen = count_steps(low, "conv2d_nhwc") > 0 && strstr(r, ROWS) != NULL;
	if (!chosen)
		fprintf(stderr, "%s: %s not chosen:\n%s\n", label, ROWS, r);
	CHECK(chosen);
	CHECK(strstr(air_model_report(packed), ROWS) == NULL);
	CHECK(dflt && strstr(air_model_report(dflt), ROWS) == NULL);
	/* the packed model holds a copy of each weight; this one none (the
	 * entry conv's packed copy and the folded biases are in both) */
	size_t wbytes = sizeof(float) * (size_t)(c->O * c->C * c->K * c->K) * (size_t)nconv;
	air_memory_info lo = memory_info(low), pk = memory_info(packed);
	int ok = pk.weight_bytes >= lo.weight_bytes + wbytes - sizeof(float) * (size_t)c->O * 4;
	/* a folded weight's source, read on every call, counts as borrowed */
	ok = ok && lo.borrowed_bytes == pk.borrowed_bytes + (c->batch_norm ? wbytes / (size_t)nconv : 0);
	if (!ok)
		fprintf(stderr, "%s: weight bytes %zu (in place), %zu (packed), weights %zu; borrowed %zu, %zu\n", label,
			lo.weight_bytes, pk.weight_bytes, wbytes, lo.borrowed_bytes, pk.borrowed_bytes);
	CHECK(ok);
	float *xv = randv(c->N * c->C * c->H * c->W, -1, 1);
	int rank[1] = {4};
	int64_t dims[1][4] = {{c->N, c->C, c->H, c->W}};
	int64_t n1, n2, n3;
	/* twice: the second call reuses the workspace the first dirtied */
	float *a0 = run(low, 1, &xv, rank, dims, &n1);
	free(a0);
	float *a = run(low, 1, &xv, rank, dims, &n1);
	float *b = run(packed, 1, &xv, rank, dims, &n2);
	float *e = run(ref, 1, &xv, rank, dims, &n3);
	CHECK(a && b && e && n1 == n2 && n2 == n3);
	/* f32 sums of C * K * K terms (after the entry conv's C * 9), in
	 * another order than the reference's, and the scale applied after
	 * the sum rather than to each weight */
	double tol = 4e-6 * (double)(c->C * c->K * c->K + c->C * 9 + 16);
	int far = 0, far_packed = 0;
	for (int64_t i = 0; a && b && e && n1 == n2 && n2 == n3 && i < n1; i++) {
		far += !(fabs((double)a[i] - e[i]) <= tol * (1.0 + fabs((double)e[i])));
		far_packed += !(fabs((double)b[i] - e[i]) <= tol * (1.0 + fabs((double)e[i])));
	}
	if (far || far_packed)
		fprintf(stderr, "%s: %d (in place), %d (packed) of %lld far from the reference\n", label, far, far_packed,
			(long long)n1);
	CHECK(far == 0 && far_packed == 0);
	free(a), free(b), free(e), free(xv);
done:
	air_model_destroy(low), air_model_destroy(packed), air_model_destroy(ref), air_model_destroy(dflt);
	air_graph_destroy(g);
}

static const rows_case cases[] = {
	/* N  C    H   W   O    K  s  bn res */
	{1, 260, 9, 9, 270, 3, 1, 1, 0},   /* 3x3 pad 1: 81 pixels, K 2340 */
	{1, 33, 15, 15, 257, 3, 2, 1, 1},  /* stride 2: 64 pixels, K 297; residual + relu */
	{3, 300, 7, 7, 260, 1, 1, 1, 1},   /* 1x1: x read as it stands, 147 pixels */
	{1, 259, 13, 13, 300, 1, 2, 1, 0}, /* 1x1 stride 2: 49 pixels */
	{1, 460, 4, 4, 256, 3, 1, 1, 1},   /* K 4140 (past the tile loop), 16 pixels */
	{1, 280, 17, 1, 262, 3, 1, 0, 0},  /* no batch norm: the weight itself; 17 pixels */
	{2, 256, 11, 23, 512, 1, 1, 1, 1}, /* 506 pixels, just under the re-packing's 512 */
};

int main(void)
{
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		test_case(&cases[i]);
	for (int i = 0; i < nkeep; i++)
		free(keep[i]);
	return check_report("test_conv_rows");
}

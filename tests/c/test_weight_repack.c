/* test_weight_repack.c - channels-last convolutions that re-pack their
 * weight on every call instead of holding a packed copy (low memory, the
 * default, and at least 512 output pixels: kernels/conv/conv_nhwc.c; the 3x3
 * stride-1 ones go through Winograd, whose transformed weight is then made
 * per call too when it is 4 MiB or more: kernels/conv/conv_winograd.c). A conv2d
 * (+ batch_norm, whose scale then is applied while packing) with a borrowed
 * weight, through the layout pass, must give bit for bit what the same
 * model with a packed copy gives (AIR_COMPILE_NO_MEMORY_REUSE), hold the
 * weight's bytes fewer, and agree with the reference kernels. Small products
 * (under 512 pixels) and owned weights keep the packed copy. A re-packed
 * weight is taken by the AMX GEMM where the CPU has it, as a packed one is. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "air/air.h"
#include "check.h"
#include "kernels/common/cpu.h"
#include "kernels/gemm/amx.h"
#include "pass_graph.h"

typedef struct repack_case {
	int64_t N, C, H, O, K, stride, groups;
	int batch_norm, residual_relu;
	int repacks; /* expected: the weight is made per call */
	int amx;     /* expected: the AMX GEMM runs (where it is available) */
} repack_case;

static air_value conv_bn(air_graph *g, air_value x, const repack_case *c)
{
	int64_t wd[4] = {c->O, c->C / c->groups, c->K, c->K}, cd[1] = {c->O};
	int64_t pad[2] = {c->K / 2, c->K / 2}, st[2] = {c->stride, c->stride};
	air_value in[2] = {x, constant(g, 4, wd, -0.5f, 0.5f)};
	air_attr attrs[4] = {iattr("groups", c->groups), iattr("has_bias", 0), ints("padding", pad, 2),
			     ints("stride", st, 2)};
	air_value y = node(g, "conv2d", in, 2, attrs, 4);
	if (!c->batch_norm)
		return y;
	air_value bn[5] = {y, constant(g, 1, cd, 0.5f, 2.0f), constant(g, 1, cd, -1, 1), constant(g, 1, cd, -0.5f, 0.5f),
			   constant(g, 1, cd, 0.25f, 1.5f)};
	air_attr ba[3] = {{"eps", AIR_ATTR_FLOAT, 0, 1e-5, NULL, 0}, iattr("has_weight", 1), iattr("has_bias", 1)};
	return node(g, "batch_norm", bn, 5, ba, 3);
}

/* A 3x3 conv C -> C with an owned weight (so always packed once) in front
 * of the conv under test: the layout pass converts only regions with a
 * conv that is not 1x1. */
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

static void test_case(const repack_case *c)
{
	air_graph *g;
	CHECK_OK(air_graph_create(&g));
	int64_t xd[4] = {c->N, c->C, c->H, c->H};
	air_value x = entry_conv(g, input(g, "x", 4, xd), c->C);
	air_value y = conv_bn(g, x, c);
	if (c->residual_relu) {
		/* a second conv whose output joins the first: the epilogue's
		 * residual and activation run on the re-packed product too */
		repack_case d = *c;
		d.batch_norm = 0;
		y = node(g, "relu", (air_value[]){binary(g, "add", y, conv_bn(g, x, &d))}, 1, NULL, 0);
	}
	CHECK_OK(air_graph_set_outputs(g, &y, 1));
	air_model *low = compile(g, 0, 0), *packed = compile(g, AIR_COMPILE_NO_MEMORY_REUSE, 0);
	air_model *ref = compile(g, AIR_COMPILE_REFERENCE_KERNELS, 0);
	char label[160];
	int repacks = c->repacks;
	snprintf(label, sizeof label, "N%lld C%lld %lldx%lld O%lld k%lld s%lld g%lld bn %d res %d",
		 (long long)c->N, (long long)c->C, (long long)c->H, (long long)c->H, (long long)c->O, (long long)c->K,
		 (long long)c->stride, (long long)c->groups, c->batch_norm, c->residual_relu);
	if (!low || !packed || !ref)
		goto done;
	/* the same steps either way, the convs in GEMM kernels (channels-last
	 * but for a narrow input's, which stays NCHW) */
	CHECK(steps(low) == steps(packed));
	const char *r = air_model_report(low);
	CHECK(strstr(r, "conv2d_nhwc_gemm_1x1") || strstr(r, "conv2d_nhwc_im2col_gemm") ||
	      strstr(r, "conv2d_nhwc_winograd_f2x3") || strstr(r, "conv2d_implicit_gemm_nchw") ||
	      strstr(r, "conv2d_narrow_nchw"));
	/* a narrow input's conv with AVX-512 (conv_narrow.c) packs its small
	 * weight into the workspace on every call: no packed copy either way */
	if (strstr(r, "conv2d_narrow_nchw"))
		repacks = 0;
	/* re-packing saves the packed copy of the weight (at least its bytes)
	 * but for a scale per channel; the entry conv is packed either way */
	size_t wbytes = sizeof(float) * (size_t)(c->O * (c->C / c->groups) * c->K * c->K);
	air_memory_info lo = memory_info(low), pk = memory_info(packed);
	size_t low_b = lo.weight_bytes, packed_b = pk.weight_bytes, keep = sizeof(double) * (size_t)c->O + 64;
	int ok = repacks ? packed_b >= low_b + wbytes - keep : packed_b == low_b;
	/* the module's weight read on every call counts as borrowed, read */
	ok = ok && lo.borrowed_bytes == pk.borrowed_bytes + (repacks && c->batch_norm ? wbytes : 0);
	if (!ok)
		fprintf(stderr, "%s: weight bytes %zu (low memory), %zu (packed), weight %zu; borrowed %zu, %zu\n",
			label, low_b, packed_b, wbytes, lo.borrowed_bytes, pk.borrowed_bytes);
	CHECK(ok);
	float *xv = randv(c->N * c->C * c->H * c->H, -1, 1);
	int rank[1] = {4};
	int64_t dims[1][4] = {{c->N, c->C, c->H, c->H}};
	int64_t n1, n2, n3;
	const uint64_t passes = kamx_passes();
	float *a = run(low, 1, &xv, rank, dims, &n1);
	const int amx = kamx_passes() > passes;
	if (amx != (c->amx && kamx_available()))
		fprintf(stderr, "%s: the AMX GEMM %s\n", label, amx ? "ran" : "did not run");
	CHECK(amx == (c->amx && kamx_available()));
	float *b = run(packed, 1, &xv, rank, dims, &n2);
	float *e = run(ref, 1, &xv, rank, dims, &n3);
	CHECK(a && b && e && n1 == n2 && n2 == n3);
	/* f32 sums of C * K * K terms, in another order (and for Winograd
	 * through its transforms) than the reference's */
	double tol = 2e-6 * (double)(c->C / c->groups * c->K * c->K + 16);
	int differ = 0, far = 0;
	for (int64_t i = 0; a && b && e && n1 == n2 && n2 == n3 && i < n1; i++) {
		differ += memcmp(&a[i], &b[i], sizeof a[i]) != 0;
		far += !(fabs((double)a[i] - e[i]) <= tol * (1.0 + fabs((double)e[i])));
	}
	if (differ || far)
		fprintf(stderr, "%s: %d differ from the packed copy's, %d from the reference\n", label, differ, far);
	CHECK(differ == 0 && far == 0);
	free(a), free(b), free(e), free(xv);
done:
	air_model_destroy(low), air_model_destroy(packed), air_model_destroy(ref);
	air_graph_destroy(g);
}

static const repack_case cases[] = {
	/* N  C   H   O   K  s  g  bn res repacks amx */
	{2, 24, 16, 40, 1, 1, 1, 1, 0, 1, 0},   /* 1x1: one GEMM on x */
	{2, 20, 16, 36, 3, 2, 1, 1, 0, 0, 0},   /* 3x3 stride 2: 64 pixels, packed once */
	{4, 20, 32, 36, 3, 2, 1, 1, 0, 1, 0},   /* 3x3 stride 2 (im2col), 1024 pixels */
	{1, 16, 24, 136, 3, 1, 1, 1, 1, 0, 0},  /* Winograd, U under 4 MiB: kept */
	{2, 256, 16, 256, 3, 1, 1, 1, 1, 1, 0}, /* Winograd, U of 4 MiB: made per call */
	{2, 12, 16, 20, 3, 1, 2, 1, 0, 1, 0},   /* grouped (im2col) */
	{2, 24, 16, 40, 1, 1, 1, 0, 0, 1, 0},   /* no batch norm: the weight itself */
	{4, 12, 32, 24, 1, 2, 1, 1, 0, 1, 0},   /* 1x1 stride 2 (im2col), 1024 pixels */
	{4, 3, 32, 24, 7, 2, 1, 1, 0, 1, 0},    /* a stem: implicit GEMM in NCHW, 1024 pixels */
	{1, 3, 32, 24, 7, 2, 1, 1, 0, 0, 0},    /* the same, 256 pixels: packed once */
	{2, 24, 15, 40, 1, 1, 1, 1, 0, 0, 0},   /* 450 pixels: packed once */
	{2, 64, 16, 136, 1, 1, 1, 1, 1, 1, 1},  /* 1x1 wide enough for AMX, 512 pixels */
	{1, 32, 16, 48, 3, 2, 1, 1, 0, 0, 0},   /* 64 pixels: packed once */
};

int main(void)
{
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		test_case(&cases[i]);
	for (int i = 0; i < nkeep; i++)
		free(keep[i]);
	return check_report("test_weight_repack");
}

/* test_quantize.c - the quantize op's loops (kernels/gemm_q/quantize.h) against the reference on
 * the ISA CTest forces with AIR_ISA: lengths around the vector widths (0 to 40, 1000), u8 and s8,
 * zero points 0, 3 and 128, values exactly halfway between two steps (round half to even, as
 * torch.round), values past both bounds (saturation), and a few results worked by hand. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "kernels/common/cpu.h"
#include "kernels/gemm_q/quantize.h"

typedef void (*qfn)(const kqz_params *p, const float *x, void *q, int64_t n);

static qfn fast(void)
{
#if defined(AIR_HAVE_X86)
	const unsigned f = kcpu_features();
	if ((f & KCPU_AVX512) == KCPU_AVX512)
		return kqz_run_avx512;
	if (f & KCPU_AVX2)
		return kqz_run_avx2;
#endif
	return kqz_run_scalar;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static float frand(void)
{
	rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
	return (float)((uint32_t)(rng_state >> 33) & 0xffffff) / (float)0x800000 - 1.0f;
}

int main(void)
{
	fprintf(stderr, "kernel: %s\n", kqz_kernel_name());
	/* by hand: scale 0.5 (inv 2): 0.25 -> 0.5 -> 0 (even), 0.75 -> 1.5 -> 2, 1.25 -> 2.5 -> 2, -0.25 -> -0 */
	{
		const kqz_params p = {2.0f, 10.0f, 0.0f, 255.0f, 0};
		const float x[6] = {0.25f, 0.75f, 1.25f, -0.25f, 1000.0f, -1000.0f};
		uint8_t q[6];
		fast()(&p, x, q, 6);
		CHECK(q[0] == 10 && q[1] == 12 && q[2] == 12 && q[3] == 10 && q[4] == 255 && q[5] == 0);
	}
	const float zps[] = {0.0f, 3.0f, 128.0f};
	float x[1000];
	unsigned char a[1000], b[1000];
	for (int s = 0; s < 2; s++)
		for (int z = 0; z < 3; z++) {
			const kqz_params p = {1.0f / 0.037f, s ? (zps[z] > 127 ? 0.0f : zps[z]) : zps[z], s ? -128.0f : 0.0f,
					      s ? 127.0f : 255.0f, s};
			for (int64_t n = 0; n <= 1000; n = n < 40 ? n + 1 : 1000) {
				for (int64_t i = 0; i < n; i++) {
					if (i % 5 == 0) /* exactly halfway after the product: k + 0.5 over inv */
						x[i] = ((float)(i % 301 - 150) + 0.5f) / p.inv;
					else
						x[i] = frand() * (i % 7 == 0 ? 20.0f : 4.0f); /* some saturate */
				}
				memset(a, 0xA5, sizeof a);
				memset(b, 0xA5, sizeof b);
				fast()(&p, x, a, n);
				kqz_run_scalar(&p, x, b, n);
				CHECK(memcmp(a, b, sizeof a) == 0);
				if (n == 1000) {
					int lo = 0, hi = 0;
					for (int64_t i = 0; i < n; i++) {
						lo += s ? (int8_t)a[i] == -128 : a[i] == 0;
						hi += s ? (int8_t)a[i] == 127 : a[i] == 255;
					}
					CHECK(lo > 0 && hi > 0);
				}
				if (n == 1000)
					break;
			}
		}
	return check_report("test_quantize");
}

/* ukernel.c - the GEMM micro-kernels' table and the choice of one for this
 * CPU, the activations every micro-kernel and driver shares, and the
 * portable micro-kernel (4x16), used where no SIMD kernel fits
 * (AIR_ISA=scalar, non-x86). */
#include "kernels/gemm/ukernel.h"

#include <pthread.h>

#include "kernels/common/cpu.h"
#include "kernels/vmath/vmath.h"

/* Cache blocks (in elements) of the portable kernel, and the AVX2 kernel's
 * mc and nc. kc x nr of B (16 KiB) stays in L1 next to a 6 x kc sliver of
 * A; mc x kc of A (144 KiB) stays in L2; a kc x nc block of B is shared by
 * the threads through L3. On a 2-core Zen test machine, kc in 192..384, mc
 * in 96..216 and nc 512..4096 were all within noise (+-3%) of this choice
 * (bench_gemm.c). Each kernel's entry in the table below carries its own
 * blocks.
 *
 * The AVX2 kernel takes K in blocks of up to KGEMM_KC_AVX2 = 1024: every K
 * block but the first reloads and restores each C tile, and on Zen 3 (32
 * KiB L1, 512 KiB L2) a B panel of up to 64 KiB streams from L2 fast
 * enough. ResNet-50's channels-last convolutions (K = 576..4608) took
 * 46.6-46.8 ms instead of 47.4 at batch 1 and 768 instead of 779 at batch
 * 16 (bench_conv --layout, 2 threads); squares and BERT's linears did not
 * move (bench_gemm). */
enum { KGEMM_KC = 256, KGEMM_KC_AVX2 = 1024, KGEMM_MC = 144, KGEMM_NC = 1024 };

/* ---- dispatch ---------------------------------------------------------- */

/* Widest ISA first, portable last: the first entry whose features are all
 * present is used, once per process, so a B packed by kgemm_pack_b (whose
 * panel width is the kernel's nr) always meets the kernel it was packed for.
 *
 * AVX-512 blocks (Sapphire Rapids, 48 KiB L1d, 2 MiB L2): the 32 KiB B
 * micro-panel (kc 256) lives in L1/L2, the 168 x 256 A block (168 KiB) in L2.
 * kc 256..512, mc 120..336 and nc 256..1024 measured within the (large,
 * shared machine) noise of each other; kc 512 lost 10-20% on ResNet's K=576
 * layers. */
static const kgemm_ukernel_desc kgemm_ukernels[] = {
#ifdef AIR_HAVE_X86
	{.name = "avx512_12x32", .isa = KCPU_AVX512, .mr = 12, .nr = 32, .fn = kgemm_ukernel_12x32__avx512,
	 .kc = 256, .mc = 168, .nc = 1024, .strided = kgemm_ukernel_12x32_strided__avx512,
	 .dot = kgemm_dot_4x4__avx512, .dot_mr = 4, .dot_nr = 4, .seg = kgemm_ukernel_12x32_seg__avx512,
	 .tile_prefetch = 1, .strided_packs_b = 1, .pack_a = kgemm_pack_a_12__avx512, .store_t = 1,
	 .pack_a_t = kgemm_pack_a_t_12__avx512},
	{.name = "avx2_6x16", .isa = KCPU_AVX2, .mr = 6, .nr = 16, .fn = kgemm_ukernel_6x16__avx2,
	 .kc = KGEMM_KC_AVX2, .mc = KGEMM_MC, .nc = KGEMM_NC, .seg = kgemm_ukernel_6x16_seg__avx2,
	 .strided = kgemm_ukernel_6x16_strided__avx2},
#endif
	{.name = "scalar_4x16", .isa = 0, .mr = 4, .nr = 16, .fn = kgemm_ukernel_4x16__scalar, .kc = KGEMM_KC,
	 .mc = KGEMM_MC, .nc = KGEMM_NC},
};
enum { KGEMM_NUKERNELS = sizeof kgemm_ukernels / sizeof kgemm_ukernels[0] };

static pthread_once_t kgemm_once = PTHREAD_ONCE_INIT;
static const kgemm_ukernel_desc *kgemm_selected;

static void kgemm_select(void)
{
	unsigned f = kcpu_features();
	kgemm_selected = &kgemm_ukernels[KGEMM_NUKERNELS - 1];
	for (int i = 0; i < KGEMM_NUKERNELS; i++) {
		if ((kgemm_ukernels[i].isa & f) == kgemm_ukernels[i].isa) {
			kgemm_selected = &kgemm_ukernels[i];
			break;
		}
	}
}

static const kgemm_ukernel_desc *kgemm_ukernel(void)
{
	pthread_once(&kgemm_once, kgemm_select);
	return kgemm_selected;
}

const kgemm_ukernel_desc *kgemm_active_ukernel(void)
{
	return kgemm_ukernel();
}

/* ---- activations --------------------------------------------------------- */

static kv_func kgemm_act_vmath(k_act act)
{
	switch (act) {
	case K_ACT_GELU: return KV_gelu;
	case K_ACT_GELU_TANH: return KV_gelu_tanh;
	case K_ACT_SILU: return KV_silu;
	case K_ACT_SIGMOID: return KV_sigmoid;
	default: return KV_tanh;
	}
}

void kgemm_act_tile(float *c, int64_t ldc, int64_t m, int64_t n, k_act act)
{
	kv_unary_f32 f = kv_unary(kgemm_act_vmath(act));
	for (int64_t r = 0; r < m; r++)
		f(c + r * ldc, c + r * ldc, n);
}

void kgemm_epilogue_row(float *y, const float *res, int64_t n, k_act act)
{
	if (res)
		for (int64_t i = 0; i < n; i++)
			y[i] += res[i];
	if (kgemm_act_is_transcendental(act))
		kgemm_act_tile(y, n, 1, n, act);
	else if (act != K_ACT_NONE)
		for (int64_t i = 0; i < n; i++)
			y[i] = kgemm_act_simple_f32(y[i], act);
}

/* ---- the portable micro-kernel ------------------------------------------- */

/* Plain C over fixed-size arrays so the compiler can keep the tile in vector
 * registers (SSE2 on x86-64). */
enum { MR = 4, NR = 16 };

void kgemm_ukernel_4x16__scalar(int64_t kc, const float *a, int64_t rs_a, int64_t cs_a, const float *b,
				float *c, int64_t ldc, int m, int n, const kgemm_tile_ep *ep)
{
	float acc[MR][NR] = {{0}};
	/* rows past m repeat row 0 rather than read outside A; never stored */
	int64_t off[MR];
	for (int r = 0; r < MR; r++)
		off[r] = (r < m ? r : 0) * rs_a;
	for (int64_t p = 0; p < kc; p++) {
		const float *bp = b + p * NR;
		for (int r = 0; r < MR; r++) {
			float ar = a[p * cs_a + off[r]];
			for (int j = 0; j < NR; j++)
				acc[r][j] += ar * bp[j];
		}
	}
	const int first = ep->flags & KGEMM_TILE_FIRST, last = ep->flags & KGEMM_TILE_LAST;
	for (int r = 0; r < m; r++) {
		float *cr = c + r * ldc;
		float bm = first && ep->bias_m ? ep->bias_m[r] : 0.0f;
		const float *res = first && ep->res ? ep->res + r * ep->ld_res : 0;
		for (int j = 0; j < n; j++) {
			float v = ep->alpha * acc[r][j];
			if (first) {
				v += bm;
				if (ep->bias_n)
					v += ep->bias_n[j];
				if (res)
					v += res[j];
			} else {
				v += cr[j];
			}
			if (last)
				v = kgemm_act_simple_f32(v, ep->act);
			cr[j] = v;
		}
	}
	if (last && kgemm_act_is_transcendental(ep->act))
		kgemm_act_tile(c, ldc, m, n, ep->act);
}

/* gemm_scalar.c - the portable GEMM micro-kernel (4x16), used where no SIMD
 * kernel fits (AIR_ISA=scalar, non-x86). Plain C over fixed-size arrays so
 * the compiler can keep the tile in vector registers (SSE2 on x86-64). */
#include "kernels/gemm/gemm_internal.h"

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

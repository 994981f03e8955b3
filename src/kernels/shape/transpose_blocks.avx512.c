/* transpose_blocks.avx512.c - the block transposes on AVX-512: the 8 x 8
 * block of transpose_blocks.h compiled with AVX-512, and a 16 x 16 block in
 * registers, about a third faster than two 8 x 8 AVX2 steps per 16 rows
 * (C harness, one thread, 128 x 768 floats in L2: 23.0 -> 17.1 us;
 * 128 x 3136: 194-219 -> 165-185 us). */
#define KTR_SUFFIX avx512
#include "kernels/shape/transpose_blocks.h"

#include "kernels/common/transpose_avx512.h"

void ktr_block16__avx512(const uint32_t *x, int64_t ldx, uint32_t *y, int64_t ldy, const float *res, int64_t ldr)
{
	__m512 r[16];
	for (int i = 0; i < 16; i++)
		r[i] = _mm512_castsi512_ps(_mm512_loadu_si512(x + i * ldx));
	k16_transpose(r);
	if (res) {
		for (int i = 0; i < 16; i++)
			_mm512_storeu_ps(y + i * ldy, _mm512_add_ps(r[i], _mm512_loadu_ps(res + i * ldr)));
		return;
	}
	for (int i = 0; i < 16; i++)
		_mm512_storeu_si512(y + i * ldy, _mm512_castps_si512(r[i]));
}

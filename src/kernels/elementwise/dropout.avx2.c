/* dropout.avx2.c - f32 dropout for eight Philox counters at once: lanes
 * hold counters 8g..8g+7, so each of the four output words is a vector of
 * eight consecutive elements' draws (the layout dropout_ref.c defines),
 * bitwise the reference's. A short last group goes to the reference. */
#include <immintrin.h>
#include <string.h>

#include "kernels/elementwise/dropout.h"

/* hi and lo 32 bits of a * m for each 32-bit lane */
static inline void mulhilo(__m256i a, __m256i m, __m256i *hi, __m256i *lo)
{
	__m256i even = _mm256_mul_epu32(a, m);
	__m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
	*lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
	*hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
}

void kd_dropout_range_avx2(const k_call *call, int64_t i0, int64_t i1)
{
	uint32_t key[2], limit;
	double scale;
	kd_params(call, key, &limit, &scale);
	uint64_t stream = (uint64_t)call->attrs[1].i;
	const float *x = call->in[0].data;
	float *y = call->out[0].data;
	uint8_t *mask = call->out[1].data;
	const __m256i m0 = _mm256_set1_epi32((int)0xD2511F53u), m1 = _mm256_set1_epi32((int)0xCD9E8D57u);
	const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), vlimit = _mm256_set1_epi32((int)limit);
	const __m256i c2s = _mm256_set1_epi32((int)(uint32_t)stream), c3s = _mm256_set1_epi32((int)(uint32_t)(stream >> 32));
	const __m256 vscale = _mm256_set1_ps((float)scale), one = _mm256_set1_ps(1.0f);
	int64_t i = i0;
	for (; i + 32 <= i1; i += 32) {
		uint64_t base = (uint64_t)(i >> 5) * 8;
		/* counters base + lane: the low word may carry into the high one only
		 * at a multiple of 2^32, and base is a multiple of 8 */
		__m256i c0 = _mm256_add_epi32(_mm256_set1_epi32((int)(uint32_t)base), lane);
		__m256i c1 = _mm256_set1_epi32((int)(uint32_t)(base >> 32)), c2 = c2s, c3 = c3s;
		__m256i k0 = _mm256_set1_epi32((int)key[0]), k1 = _mm256_set1_epi32((int)key[1]);
		const __m256i w0 = _mm256_set1_epi32((int)0x9E3779B9u), w1 = _mm256_set1_epi32((int)0xBB67AE85u);
		for (int round = 0; round < 10; round++) {
			__m256i hi0, lo0, hi1, lo1;
			mulhilo(c0, m0, &hi0, &lo0);
			mulhilo(c2, m1, &hi1, &lo1);
			c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), k0);
			c1 = lo1;
			c2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), k1);
			c3 = lo0;
			k0 = _mm256_add_epi32(k0, w0);
			k1 = _mm256_add_epi32(k1, w1);
		}
		__m256i words[4] = {c0, c1, c2, c3};
		for (int j = 0; j < 4; j++) {
			/* draws < 2^24: a signed compare is exact */
			__m256i keep = _mm256_cmpgt_epi32(vlimit, _mm256_srli_epi32(words[j], 8));
			__m256 kf = _mm256_and_ps(_mm256_castsi256_ps(keep), one);
			int64_t e = i + 8 * j;
			_mm256_storeu_ps(y + e, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + e), kf), vscale));
			/* 0/1 bytes: each lane's low byte after masking with 1, packed */
			__m256i b = _mm256_and_si256(keep, _mm256_set1_epi32(1));
			__m128i w = _mm_packus_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
			__m128i bytes = _mm_packus_epi16(w, w);
			_mm_storel_epi64((__m128i *)(mask + e), bytes);
		}
	}
	if (i < i1)
		kd_dropout_range(call, i, i1);
}

void kd_masked_scale_avx2(const float *g, const uint8_t *mask, float *y, int64_t n, float scale)
{
	const __m256 vs = _mm256_set1_ps(scale);
	int64_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m128i m8 = _mm_loadl_epi64((const __m128i *)(mask + i));
		__m256 mf = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(m8));
		_mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(g + i), _mm256_mul_ps(mf, vs)));
	}
	for (; i < n; i++)
		y[i] = g[i] * ((float)mask[i] * scale);
}

/* half.h - portable f16 and bf16 conversions (round to nearest even), used
 * by cast and by any kernel that reads or writes 16-bit floats. */
#ifndef AIR_KERNELS_COMMON_HALF_H
#define AIR_KERNELS_COMMON_HALF_H

#include <stdint.h>
#include <string.h>

static inline float k_bits_to_f32(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

static inline uint32_t k_f32_to_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

static inline float k_bf16_to_f32(uint16_t h)
{
	return k_bits_to_f32((uint32_t)h << 16);
}

static inline uint16_t k_f32_to_bf16(float f)
{
	uint32_t u = k_f32_to_bits(f);
	if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it quiet and NaN */
		return (uint16_t)((u >> 16) | 0x40);
	u += 0x7fffu + ((u >> 16) & 1);
	return (uint16_t)(u >> 16);
}

static inline float k_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
	if (exp == 0) {
		if (man == 0)
			return k_bits_to_f32(sign);
		/* subnormal: value = man * 2^-24 */
		float v = (float)man * (1.0f / 16777216.0f);
		return sign ? -v : v;
	}
	if (exp == 31)
		return k_bits_to_f32(sign | 0x7f800000u | (man << 13));
	return k_bits_to_f32(sign | ((exp + 112) << 23) | (man << 13));
}

static inline uint16_t k_f32_to_f16(float f)
{
	uint32_t u = k_f32_to_bits(f);
	uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
	uint32_t a = u & 0x7fffffffu;
	if (a > 0x7f800000u)
		return sign | 0x7e00; /* NaN */
	if (a >= 0x477ff000u)     /* rounds to >= 65520: infinity */
		return sign | 0x7c00;
	if (a < 0x38800000u) { /* below the smallest normal half: subnormal or 0 */
		float v = k_bits_to_f32(a) * 16777216.0f; /* in units of 2^-24 */
		/* round half to even */
		uint32_t q = (uint32_t)v;
		float r = v - (float)q;
		if (r > 0.5f || (r == 0.5f && (q & 1)))
			q++;
		return sign | (uint16_t)q;
	}
	uint32_t e = (a >> 23) - 112, m = a & 0x7fffff;
	uint32_t h = (e << 10) | (m >> 13);
	uint32_t rest = m & 0x1fff;
	if (rest > 0x1000 || (rest == 0x1000 && (h & 1)))
		h++;
	return sign | (uint16_t)h;
}

#endif

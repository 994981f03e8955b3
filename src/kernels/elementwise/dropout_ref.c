/* dropout_ref.c - the generator and per-range arithmetic of dropout, and the
 * reference kernel (every element on the calling thread). Element i of a
 * group of 32 (g = i / 32) takes word (i / 8) % 4 of counter 8g + i % 8, so
 * that eight counters' same word are eight consecutive elements (one AVX2
 * vector: dropout.avx2.c). Keep decision:
 * the top 24 bits of the generator's word for the element, as u in [0, 1)
 * in steps of 2^-24, keep when u < 1 - p (so p = 0 keeps all, p = 1 none).
 * y = (x * keep) * scale with scale = 1/(1-p) rounded to x's dtype (0 when
 * p = 1), the order torch's CPU dropout uses, so p = 0 gives x exactly. */
#include <math.h>

#include "core/error.h"
#include "kernels/elementwise/dropout.h"

/* Philox-4x32's multipliers and Weyl key increments (Salmon et al., 2011). */
#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

void kd_philox(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4])
{
	uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3], k0 = key[0], k1 = key[1];
	for (int round = 0; round < 10; round++) {
		uint64_t p0 = (uint64_t)PHILOX_M0 * c0, p1 = (uint64_t)PHILOX_M1 * c2;
		uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
		uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
		c0 = hi1 ^ c1 ^ k0;
		c1 = lo1;
		c2 = hi0 ^ c3 ^ k1;
		c3 = lo0;
		k0 += PHILOX_W0;
		k1 += PHILOX_W1;
	}
	out[0] = c0;
	out[1] = c1;
	out[2] = c2;
	out[3] = c3;
}

air_status kd_check(const k_call *call)
{
	if (call->in[1].dtype != AIR_I64 || call->in[1].numel != 1)
		return air_error(AIR_INVALID_ARGUMENT, "dropout: seed must be one i64");
	air_dtype dt = call->in[0].dtype;
	if (dt != AIR_F32 && dt != AIR_F64)
		return air_error(AIR_UNSUPPORTED, "dropout: no kernel for %s", air_dtype_name(dt));
	return AIR_OK;
}

void kd_params(const k_call *call, uint32_t key[2], uint32_t *limit, double *scale)
{
	double q = 1.0 - call->attrs[0].f;
	uint64_t seed = (uint64_t)*(const int64_t *)call->in[1].data;
	key[0] = (uint32_t)seed;
	key[1] = (uint32_t)(seed >> 32);
	/* keep when the 24-bit draw v satisfies v * 2^-24 < q */
	*limit = q >= 1.0 ? (1u << 24) : (uint32_t)ceil(q * 16777216.0);
	*scale = q > 0 ? 1.0 / q : 0.0;
}

void kd_dropout_range(const k_call *call, int64_t i0, int64_t i1)
{
	uint32_t key[2], limit;
	double scale;
	kd_params(call, key, &limit, &scale);
	uint64_t stream = (uint64_t)call->attrs[1].i;
	uint8_t *mask = call->out[1].data;
	bool f32 = call->in[0].dtype == AIR_F32;
	float sf = (float)scale;
	uint32_t word[8][4];
	int64_t have = -1; /* the group whose words are in word[] */
	for (int64_t i = i0; i < i1; i++) {
		int64_t group = i >> 5;
		if (group != have) {
			for (int l = 0; l < 8; l++) {
				uint64_t ctr64 = (uint64_t)group * 8 + (uint64_t)l;
				uint32_t ctr[4] = {(uint32_t)ctr64, (uint32_t)(ctr64 >> 32), (uint32_t)stream,
						   (uint32_t)(stream >> 32)};
				kd_philox(ctr, key, word[l]);
			}
			have = group;
		}
		uint8_t keep = (word[i & 7][(i >> 3) & 3] >> 8) < limit;
		mask[i] = keep;
		if (f32)
			((float *)call->out[0].data)[i] = (((const float *)call->in[0].data)[i] * (float)keep) * sf;
		else
			((double *)call->out[0].data)[i] = (((const double *)call->in[0].data)[i] * (double)keep) * scale;
	}
}

air_status kref_dropout(const k_call *call)
{
	AIR_TRY(kd_check(call));
	kd_dropout_range(call, 0, call->in[0].numel);
	return AIR_OK;
}

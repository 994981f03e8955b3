/* linear_q.c - op table entry of linear_q: a linear whose weight is quantized weight-only
 * (int8 or int4, group-wise f16 scales; kernels/gemm_q/gemm_q.h gives the format), made by
 * torchair's weight_quantization option (python/torchair/lowering/quant.py).
 *
 * linear_q(x [..., K] f32, q, scales [N, ngroups] f16, bias [N] f32?) -> [..., N] f32
 *   bits 8: q int8 [N, kpad]; bits 4: q u8 [N, kpad / 2]; kpad = ngroups * group, the
 *   smallest multiple of group that holds K. Shape inference rejects anything else, so a
 *   malformed call falls back to eager instead of reading past a buffer. */
#include "kernels/gemm_q/linear_q.h"
#include "ops/op.h"

static air_status infer_linear_q(op_infer_ctx *c)
{
	const int64_t bits = op_attr(c, KLINQ_ATTR_BITS)->i, group = op_attr(c, KLINQ_ATTR_GROUP)->i;
	if (bits != 8 && bits != 4)
		return op_fail(c, AIR_INVALID_ARGUMENT, "bits is %lld; it must be 8 or 4", (long long)bits);
	if (group < KQ_BLOCK || group % KQ_BLOCK)
		return op_fail(c, AIR_INVALID_ARGUMENT, "group is %lld; it must be a positive multiple of %d",
			       (long long)group, (int)KQ_BLOCK);
	const int has_bias = kref_present(op_attr(c, KLINQ_ATTR_HAS_BIAS)->i, c->n_in, 3);
	if (c->n_in != 3 + has_bias)
		return op_fail(c, AIR_INVALID_ARGUMENT, "has_bias is %d but there are %d inputs", has_bias, c->n_in);
	const ir_value *x = c->in[0], *q = c->in[1], *s = c->in[2];
	if (x->dtype != AIR_F32 || x->rank < 1)
		return op_fail(c, AIR_UNSUPPORTED, "x must be f32 of rank 1 or more, not %s rank %d",
			       air_dtype_name(x->dtype), x->rank);
	if (q->dtype != (bits == 8 ? AIR_I8 : AIR_U8) || q->rank != 2)
		return op_fail(c, AIR_UNSUPPORTED, "the %lld-bit weight must be a 2-D %s tensor, not %s rank %d",
			       (long long)bits, bits == 8 ? "i8" : "u8", air_dtype_name(q->dtype), q->rank);
	if (s->dtype != AIR_F16 || s->rank != 2)
		return op_fail(c, AIR_UNSUPPORTED, "the scales must be a 2-D f16 tensor");
	const air_dim K = x->dims[x->rank - 1], N = q->dims[0], G = s->dims[1];
	if (N < 0 || G < 0 || q->dims[1] < 0 || s->dims[0] != N)
		return op_fail(c, AIR_SHAPE_MISMATCH, "the weight and its scales need static sizes of one N");
	const air_dim kpad = G * group;
	if (q->dims[1] != (bits == 8 ? kpad : kpad / 2))
		return op_fail(c, AIR_SHAPE_MISMATCH, "the weight has %lld bytes a row for %lld groups of %lld",
			       (long long)q->dims[1], (long long)G, (long long)group);
	/* a symbolic K cannot be checked against the groups: refused */
	if (K < 0 || K > kpad || K <= kpad - group)
		return op_fail(c, AIR_SHAPE_MISMATCH, "x has %lld features; %lld groups of %lld hold %lld to %lld",
			       (long long)K, (long long)G, (long long)group, (long long)(kpad - group + 1),
			       (long long)kpad);
	if (has_bias) {
		const ir_value *b = c->in[3];
		if (b->dtype != AIR_F32 || b->rank != 1 || b->dims[0] != N)
			return op_fail(c, AIR_SHAPE_MISMATCH, "the bias must be f32 [%lld]", (long long)N);
	}
	c->out[0] = *x;
	c->out[0].dims[x->rank - 1] = N;
	return AIR_OK;
}

static const op_attr_spec linear_q_attrs[] = {
	{"bits", OPA_INT, true, 0, 0},  /* 8 or 4 */
	{"group", OPA_INT, true, 0, 0}, /* values per scale */
	{"has_bias", OPA_INT, false, -1, 0},
};

const op_def op_def_linear_q = {"linear_q", 3, 4, 1, linear_q_attrs, KLINQ_NATTRS, infer_linear_q,
				{"linear_q_ref", 0, NULL, NULL, NULL, NULL, kref_linear_q}, 0};

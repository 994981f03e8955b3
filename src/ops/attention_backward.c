/* attention_backward.c - op table entry of sdpa_backward, the gradient of
 * scaled-dot-product attention from the forward's output and log-sum-exp
 * (sdpa_lse, ops/linalg.c): torch's
 * _scaled_dot_product_flash_attention_for_cpu_backward. The shape function
 * rejects what the kernels do not do (dropout, k/v broadcast over a batch
 * dim) so such a node falls back to eager. */
#include "core/error.h"
#include "kernels/attention/attention_bwd_ref.h"
#include "ops/op.h"

static bool conflict(air_dim a, air_dim b)
{
	return a >= 0 && b >= 0 && a != b;
}

static air_status same_dims(op_infer_ctx *c, int i, const ir_value *want, int rank, const char *what)
{
	const ir_value *x = c->in[i];
	bool bad = x->rank != rank;
	for (int d = 0; d < rank && !bad; d++)
		bad = conflict(x->dims[d], want->dims[d]);
	if (bad)
		return op_fail(c, AIR_SHAPE_MISMATCH, "%s does not have the shape it needs", what);
	return AIR_OK;
}

/* sdpa_backward(grad_out [..., L, Ev], q [..., L, E], k [..., S, E],
 * v [..., S, Ev], out [..., L, Ev], lse [..., L], mask?) -> (grad_q,
 * grad_k, grad_v) of q's, k's and v's shapes. k and v have q's leading
 * dims, but for the heads (dim -3), of which they may have fewer that
 * divide q's (grouped-query attention; k's and v's alike); the mask is bool or q's dtype and broadcasts to
 * [..., L, S] as sdpa's does. */
static air_status infer_sdpa_backward(op_infer_ctx *c)
{
	int has_mask = kref_present(op_attr(c, KSDPB_ATTR_HAS_MASK)->i, c->n_in, 6);
	if (c->n_in != 6 + has_mask)
		return op_fail(c, AIR_INVALID_ARGUMENT, "has_mask is %d but there are %d inputs", has_mask, c->n_in);
	if (op_attr(c, KSDPB_ATTR_DROPOUT)->f != 0.0)
		return op_fail(c, AIR_UNSUPPORTED, "attention dropout is not supported");
	const ir_value *q = c->in[1], *k = c->in[2], *v = c->in[3];
	if (q->dtype != AIR_F32 && q->dtype != AIR_F64)
		return op_fail(c, AIR_UNSUPPORTED, "takes f32 or f64, not %s", air_dtype_name(q->dtype));
	AIR_TRY(op_same_dtype(c, 0, 5));
	int r = q->rank;
	if (r < 2 || k->rank != r || v->rank != r)
		return op_fail(c, AIR_SHAPE_MISMATCH, "q, k and v must have one rank of 2 or more");
	for (int d = 0; d < r - 2; d++) {
		air_dim kd = k->dims[d], qd = q->dims[d];
		bool gqa = d == r - 3 && kd > 0 && qd >= 0 && qd % kd == 0;
		if (conflict(v->dims[d], kd) || (conflict(kd, qd) && !gqa))
			return op_fail(c, AIR_SHAPE_MISMATCH,
				       "k and v must have q's leading dims, or heads that divide q's (dim %d)", d);
	}
	if (conflict(q->dims[r - 1], k->dims[r - 1]) || conflict(k->dims[r - 2], v->dims[r - 2]))
		return op_fail(c, AIR_SHAPE_MISMATCH, "q, k and v do not fit");
	ir_value o = *q;
	o.dims[r - 1] = v->dims[r - 1];
	AIR_TRY(same_dims(c, 0, &o, r, "grad_out"));
	AIR_TRY(same_dims(c, 4, &o, r, "out"));
	AIR_TRY(same_dims(c, 5, q, r - 1, "lse"));
	if (has_mask) {
		const ir_value *m = c->in[6];
		if (m->dtype != AIR_BOOL && m->dtype != q->dtype)
			return op_fail(c, AIR_DTYPE_MISMATCH, "the mask must be bool or %s", air_dtype_name(q->dtype));
		if (m->rank > r)
			return op_fail(c, AIR_SHAPE_MISMATCH, "the mask has rank %d, above q's %d", m->rank, r);
		for (int i = 0; i < m->rank; i++) {
			int d = r - m->rank + i;
			air_dim want = d == r - 1 ? k->dims[r - 2] : q->dims[d];
			if (m->dims[i] != 1 && conflict(m->dims[i], want))
				return op_fail(c, AIR_SHAPE_MISMATCH, "the mask does not broadcast to [..., L, S]");
		}
	}
	c->out[0] = *q;
	c->out[1] = *k;
	c->out[2] = *v;
	for (int i = 0; i < 3; i++)
		c->out[i].dtype = q->dtype;
	return AIR_OK;
}

static const op_attr_spec sdpa_backward_attrs[] = {
	{"scale", OPA_FLOAT, false, 0, 0.0}, /* 0: 1 / sqrt(E) */
	{"is_causal", OPA_INT, false, 0, 0},
	{"has_mask", OPA_INT, false, -1, 0},
	{"dropout_p", OPA_FLOAT, false, 0, 0.0}, /* anything but 0 is rejected */
};

const op_def op_def_sdpa_backward = {
	"sdpa_backward",	 6, 7, 3, sdpa_backward_attrs, KSDPB_NATTRS, infer_sdpa_backward,
	{"sdpa_backward_ref", 0, NULL, NULL, NULL, kref_sdpa_backward_workspace, kref_sdpa_backward},
	0};

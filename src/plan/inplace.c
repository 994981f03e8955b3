/* inplace.c - which kernels may write their output over one of their inputs.
 * A kernel is listed here only after reading it: every loop reads element i
 * of the shared input before it writes element i of the output, never reads
 * ahead of what it has written, and never reads it again after. */
#include <string.h>

#include "kernels/conv_nhwc.h"
#include "kernels/elementwise_fast.h"
#include "kernels/fused_fast.h"
#include "kernels/linalg_fast.h"
#include "kernels/rowops_fast.h"
#include "ops/op.h"
#include "plan/arena.h"

/* The reference kernels of the elementwise ops (kernels/ref/elementwise.c):
 * unary loops are y[i] = f(x[i]); binary and where loops read a[i], b[i]
 * (and cond[i]) before writing y[i] at the same row offset, which an input
 * of the output's size has (no broadcast: its strides are the output's).
 * Not cast: between equal dtypes it is a memcpy, which must not overlap.
 * fused_elementwise's tile interpreter (kernels/ref/fused.c) reads the input
 * tile once, into the output tile, then works on the output tile. */
static bool elementwise_ref(const op_def *def, const rt_step *st, int op)
{
	return (def->flags & OPF_ELEMENTWISE) && st->kernel == &def->ref && op != OP_cast;
}

/* The index of a node's residual input (conv2d/linear with has_residual:
 * the last input), or -1. Found by attribute name, so the op schemas may
 * grow. */
static int residual_input(const ir_node *n, const op_def *def)
{
	for (int a = 0; a < def->n_attrs; a++)
		if (!strcmp(def->attrs[a].name, "has_residual"))
			return n->attrs[a].set && n->attrs[a].i ? n->n_in - 1 : -1;
	return -1;
}

/* Kernels whose residual goes through the GEMM epilogue (kernels/gemm.c),
 * which folds it into C on the first K block, tile by tile, reading each
 * tile of the residual before writing the same tile of C: so it may alias C
 * exactly (same pointer and row stride, as these kernels pass it). The
 * Winograd kernel's output transform likewise reads each output element's
 * residual just before it writes that element. Not here: the reference
 * conv2d and linear kernels and the depthwise kernel, which write y first
 * and add the residual after. */
static const k_kernel *const residual_in_place[] = {
	&kfast_linear_packed,	&kfast_linear,		    &kfast_conv2d_1x1,
	&kfast_conv2d_im2col,	&kfast_conv2d_nhwc_1x1,	    &kfast_conv2d_nhwc_im2col,
	&kfast_conv2d_nhwc_winograd, NULL,
};

/* The vmath kernels of the unary ops (kernels/rowops_fast.c): each task
 * runs kv_<f>_f32 on its own chunk, which vmath.h documents as safe in
 * place (x == y): every vector is loaded before its result is stored. The
 * fast fused_elementwise (kernels/fused_fast.c) is the reference's tile
 * loop whose instructions are such vmath calls or loops out[i] = f(in[i]).
 * elu's (kernels/elu_fast.c) copies each tile of x before its last loop,
 * which reads x[i] before it writes y[i]. The lanes kernels
 * (kernels/elementwise_fast.c: relu, clamp, and add, sub, mul, div of inputs of
 * the output's size) load a[i..i+7] and b[i..i+7] before they store
 * y[i..i+7], so either input may be the output; when sizes known only at
 * run time broadcast, they hand the call to the reference kernel, which
 * may run in place too (above). */
static const k_kernel *const unary_in_place[] = {
#define VMATH_ENTRY_(name) &kfast_##name##_vmath,
	KFAST_VMATH_OPS(VMATH_ENTRY_)
#undef VMATH_ENTRY_
	&kfast_elu_vmath,
	&kfast_fused_elementwise,
	&kfast_relu_lanes,
	&kfast_clamp_lanes,
	&kfast_add_lanes,
	&kfast_sub_lanes,
	&kfast_mul_lanes,
	&kfast_div_lanes,
	NULL,
};

bool mp_inplace_allowed(const air_model *m, int k, int i)
{
	const rt_step *st = &m->steps[k];
	if (st->alias)
		return false;
	const ir_node *n = &m->g->nodes[st->node];
	const op_def *def = op_get(n->op);
	if (elementwise_ref(def, st, n->op))
		return true;
	for (const k_kernel *const *kk = unary_in_place; *kk; kk++)
		if (*kk == st->kernel)
			return true;
	if (i < 0 || i != residual_input(n, def))
		return false;
	/* the residual may be overwritten only when it is nothing else too:
	 * conv(x, residual = x) reads x around every output tile, so writing
	 * y over it would change what later tiles read */
	for (int j = 0; j < n->n_in; j++)
		if (j != i && m->root[n->in[j]] == m->root[n->in[i]])
			return false;
	for (const k_kernel *const *kk = residual_in_place; *kk; kk++)
		if (*kk == st->kernel)
			return true;
	return false;
}

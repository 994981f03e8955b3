/* inplace.c - may a step write its output over one of its inputs? The
 * kernels say what they allow (k_kernel.flags, each with its reason beside
 * the kernel); the reference kernels of the elementwise ops are judged here,
 * by their op. */
#include <string.h>

#include "ops/op.h"
#include "plan/arena.h"

/* The reference kernels of the elementwise ops (kernels/elementwise/
 * unary_ref.c, binary_ref.c): unary loops are y[i] = f(x[i]); binary and where loops
 * read a[i], b[i] (and cond[i]) before writing y[i] at the same row offset,
 * which an input of the output's size has (no broadcast: its strides are the
 * output's). Not cast: between equal dtypes it is a memcpy, which must not
 * overlap. fused_elementwise's tile interpreter (elementwise/fused_ref.c)
 * reads the input tile once, into the output tile, then works on the output
 * tile. */
static bool elementwise_ref(const op_def *def, const mp_step *st, int op)
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

bool mp_inplace_allowed(const mp_program *p, int k, int i)
{
	const mp_step *st = &p->steps[k];
	if (st->alias)
		return false;
	const ir_node *n = &p->g->nodes[st->node];
	const op_def *def = op_get(n->op);
	if (elementwise_ref(def, st, n->op) || (st->kernel->flags & K_INPLACE_ANY))
		return true;
	/* index_copy over its x (kernels/shape/index_copy_ref.c): with out == x
	 * it writes only the indexed slices, from src; not when the index or src
	 * share x's buffer */
	if (n->op == OP_index_copy && st->kernel == &def->ref)
		return i == 0 && p->root[n->in[1]] != p->root[n->in[0]] && p->root[n->in[2]] != p->root[n->in[0]];
	if (i < 0 || i != residual_input(n, def) || !(st->kernel->flags & K_INPLACE_RESIDUAL))
		return false;
	/* the residual may be overwritten only when it is nothing else too:
	 * conv(x, residual = x) reads x around every output tile, so writing
	 * y over it would change what later tiles read */
	for (int j = 0; j < n->n_in; j++)
		if (j != i && p->root[n->in[j]] == p->root[n->in[i]])
			return false;
	return true;
}

/* layout.c - the layout pass: CNN regions run channels-last (NHWC), the
 * layout the convolution and pooling kernels want, converted once at the
 * region's edges instead of per op.
 *
 * A region is a connected set of nodes, linked by the [N, C, H, W] values
 * they pass each other, of these kinds:
 *   conv2d      f32, constant weight (its kernel packs it at compile time),
 *               or a 16-bit weight (its kernels are channels-last only);
 *   pooling     max_pool2d, avg_pool2d, adaptive_avg_pool2d, rank 4, and
 *               mean over H and W (the global pool that usually ends it:
 *               with keepdim it becomes the NHWC adaptive pool to [1, 1],
 *               without keepdim its [N, C] needs no permute at all);
 *   elementwise f32 ops of rank 4 whose operands are rank 4 too (they may
 *               broadcast: that commutes with the permute) or have only
 *               dims of 1 (the same in any layout);
 *   cat         of f32 rank-4 values, on any axis (renumbered for NHWC):
 *               a U-Net's skip joins the decoder without leaving NHWC.
 * Only regions with at least one conv2d that is not pointwise (1x1,
 * unpadded: one GEMM in either layout) are converted; a lone pointwise
 * conv ran 1.02-1.9x faster in NCHW than between two permutes (ResNet-50's
 * 56x56 and 28x28 shapes, strided or not). Their nodes become
 * conv2d_nhwc / *_pool2d_nhwc (elementwise ops stay as they are; only their
 * values' dims change), every value they produce gets NHWC dims
 * [N, H, W, C], a value entering the region passes one permute to NHWC,
 * and a value leaving it (a graph output, or used by any node outside)
 * one permute back, shared by all its outside users. A value leaving with
 * H = W = 1 (a global pool) is the same bytes in both layouts and leaves
 * through a reshape (an alias: no copy). Last, a permute that undoes the
 * permute before it (an edge meeting a transposed convolution's own
 * NCHW <-> NHWC permutes) is dropped with it.
 * Requires: node order is execution order. Runs last, after fusion. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kernels/conv/conv_nhwc.h"  /* kconv_implicit_fits */
#include "kernels/conv/conv_ref.h"   /* kref_pair */
#include "kernels/matmul/matmul_ref.h" /* kref_present */
#include "ops/op.h"
#include "passes/pass.h"

enum { K_OTHER = 0, K_CONV, K_POOL, K_ELEM, K_MEAN, K_CAT };

typedef struct layout_ctx {
	air_graph *g;
	int n0;           /* nodes before the pass */
	char *kind;       /* per node: K_* */
	int *parent;      /* union-find over nodes */
	char *in_region;  /* per node */
	char *nhwc_out;   /* per region node: its output is NHWC (not a mean's [N, C]) */
	air_value *entry; /* per value: its NHWC copy (where has_entry) */
	air_value *exit;  /* per value: its NCHW copy (where has_exit) */
	char *has_entry, *has_exit;
	int *after;       /* per added node: the node it follows (-1: the start) */
} layout_ctx;

static int find(int *parent, int k)
{
	while (parent[k] != k) {
		parent[k] = parent[parent[k]];
		k = parent[k];
	}
	return k;
}

static int64_t attr_i(const ir_node *n, const char *name, int64_t def)
{
	int i = pass_attr_index(n->op, name);
	return i < 0 ? def : n->attrs[i].i;
}

static const ir_value *val(const air_graph *g, air_value v)
{
	return &g->values[v];
}

/* A value whose dims are all 1 is the same in every layout. */
static bool layout_free(const air_graph *g, air_value v)
{
	const ir_value *x = val(g, v);
	for (int d = 0; d < x->rank; d++)
		if (x->dims[d] != 1)
			return false;
	return true;
}

/* conv2d's inputs: x, weight, [bias], [residual] (the last, if the op has
 * a has_residual attribute set). */
static int conv_has_residual(const ir_node *n)
{
	return attr_i(n, "has_residual", 0) != 0;
}

static int conv_has_bias(const ir_node *n)
{
	return kref_present(attr_i(n, "has_bias", -1), n->n_in - conv_has_residual(n), 2);
}

/* A 1x1, unpadded, ungrouped conv2d: in NCHW it is one GEMM, weight
 * [O x C] times x [C x H*W] (after subsampling x if strided), as fast as
 * in NHWC, so on its own it is not worth the two permutes at the region's
 * edges. */
static bool conv_is_pointwise(const air_graph *g, const ir_node *n)
{
	static const int64_t zeros[2] = {0, 0};
	int64_t pad[2];
	int pi = pass_attr_index(n->op, "padding");
	if (pi < 0)
		return false;
	kref_pair(n->attrs[pi].ints, n->attrs[pi].n, zeros, pad);
	const ir_value *w = val(g, n->in[1]);
	return w->dims[2] == 1 && w->dims[3] == 1 && pad[0] == 0 && pad[1] == 0 && attr_i(n, "groups", 1) == 1;
}

/* A conv of a narrow input (the stem's 3 channels) without a residual:
 * the implicit GEMM runs it in NCHW as fast as in NHWC (it builds its
 * input band channels-last itself and transposes its output back), so it
 * too is not worth two permutes on its own. Inside a region
 * that other convs make NHWC, it runs NHWC like the rest. */
static bool conv_is_narrow(const air_graph *g, const ir_node *n)
{
	static const int64_t ones[2] = {1, 1};
	int64_t dil[2];
	int di = pass_attr_index(n->op, "dilation");
	if (di < 0 || conv_has_residual(n))
		return false;
	kref_pair(n->attrs[di].ints, n->attrs[di].n, ones, dil);
	const ir_value *x = val(g, n->in[0]), *w = val(g, n->in[1]);
	return kconv_implicit_fits(x->dims[1], attr_i(n, "groups", 1), w->dims[2], w->dims[3], dil[1]);
}

/* A conv with a 16-bit weight (bf16, f16): its fast kernels are
 * channels-last only (kernels/conv/conv_nhwc_lowp.c), so it always
 * converts, weight constant or not. */
static bool conv_has_lowp_weight(const air_graph *g, const ir_node *n)
{
	air_dtype w = val(g, n->in[1])->dtype;
	return n->op == OP_conv2d && (w == AIR_BF16 || w == AIR_F16);
}

/* A conv that NHWC runs much faster than NCHW on its own: spatial, stride
 * 1 (Winograd, 1.7-2.6x; im2col about 1.3x). A strided spatial conv gains
 * less (1.15-1.5x), which two permutes can outweigh. */
static bool conv_is_strong(const air_graph *g, const ir_node *n)
{
	static const int64_t ones[2] = {1, 1};
	int64_t st[2];
	int si = pass_attr_index(n->op, "stride");
	if (si < 0 || conv_has_lowp_weight(g, n))
		return true;
	kref_pair(n->attrs[si].ints, n->attrs[si].n, ones, st);
	return !conv_is_pointwise(g, n) && !conv_is_narrow(g, n) && st[0] == 1 && st[1] == 1;
}

/* Bytes of a value with every dim known, or -1. */
static double known_bytes(const ir_value *v)
{
	double b = (double)air_dtype_size(v->dtype);
	for (int d = 0; d < v->rank; d++) {
		if (v->dims[d] < 0)
			return -1;
		b *= (double)v->dims[d];
	}
	return b;
}

/* Multiply-adds of a conv2d with known dims, or -1. */
static double conv_work(const air_graph *g, const ir_node *n)
{
	const ir_value *y = val(g, n->out[0]), *w = val(g, n->in[1]);
	double ybytes = known_bytes(y), wbytes = known_bytes(w);
	if (ybytes < 0 || wbytes < 0 || y->dims[1] <= 0)
		return -1;
	/* per output element, the weight's taps of one output channel */
	return ybytes / 4.0 * (wbytes / 4.0 / (double)y->dims[1]);
}

/* Is input i of node n a value in the node's layout (an image it reads)? */
static bool spatial_input(const air_graph *g, const ir_node *n, int kind, int i)
{
	switch (kind) {
	case K_CONV: return i == 0 || (conv_has_residual(n) && i == n->n_in - 1);
	case K_POOL:
	case K_MEAN: return i == 0;
	case K_ELEM: return !layout_free(g, n->in[i]);
	case K_CAT: return true;
	default: return false;
	}
}

/* mean over H and W of an f32 [N, C, H, W] (a global average pool): in
 * NHWC the same mean over axes 1 and 2; without keepdim its [N, C] is the
 * same in both layouts, so the region ends there with no permute. */
static bool is_spatial_mean(const air_graph *g, const ir_node *n)
{
	const ir_value *x = val(g, n->in[0]);
	const ir_attr *axes = &n->attrs[pass_attr_index(OP_mean, "axes")];
	if (x->dtype != AIR_F32 || x->rank != 4 || axes->n != 2)
		return false;
	int seen = 0;
	for (int i = 0; i < 2; i++) {
		int64_t a = axes->ints[i] < 0 ? axes->ints[i] + 4 : axes->ints[i];
		if (a == 2 || a == 3)
			seen |= 1 << (a - 2);
	}
	return seen == 3;
}

static bool mean_keepdim(const ir_node *n)
{
	return n->attrs[pass_attr_index(OP_mean, "keepdim")].i != 0;
}

static int classify(const air_graph *g, const ir_node *n)
{
	if (n->n_out != 1)
		return K_OTHER;
	const ir_value *y = val(g, n->out[0]);
	if (n->op == OP_mean && is_spatial_mean(g, n))
		return K_MEAN;
	if (y->dtype != AIR_F32 || y->rank != 4)
		return K_OTHER;
	const ir_value *x = n->n_in > 0 ? val(g, n->in[0]) : NULL;
	switch (n->op) {
	case OP_conv2d: {
		const ir_value *w = val(g, n->in[1]);
		for (int i = 0; i < n->n_in; i++)
			if (val(g, n->in[i])->dtype != AIR_F32 && !(i == 1 && conv_has_lowp_weight(g, n)))
				return K_OTHER;
		/* an act this pass does not know of would be lost */
		for (int a = 0; a < op_get(n->op)->n_attrs; a++) {
			const char *name = op_get(n->op)->attrs[a].name;
			if (strcmp(name, "stride") && strcmp(name, "padding") && strcmp(name, "dilation") &&
			    strcmp(name, "groups") && strcmp(name, "has_bias") && strcmp(name, "act") &&
			    strcmp(name, "has_residual"))
				return K_OTHER;
		}
		bool packable = w->kind == IR_CONSTANT || conv_has_lowp_weight(g, n);
		return x->rank == 4 && packable && w->rank == 4 ? K_CONV : K_OTHER;
	}
	case OP_max_pool2d:
	case OP_avg_pool2d:
	case OP_adaptive_avg_pool2d: return x->rank == 4 && x->dtype == AIR_F32 ? K_POOL : K_OTHER;
	case OP_cat:
		for (int i = 0; i < n->n_in; i++)
			if (val(g, n->in[i])->dtype != AIR_F32 || val(g, n->in[i])->rank != 4)
				return K_OTHER;
		return K_CAT;
	default: break;
	}
	/* a fused_dag of one output is elementwise too (passes/fuse_dag.c:
	 * inputs of its shape or of one element), so it stays in a region */
	if ((!(op_get(n->op)->flags & OPF_ELEMENTWISE) && n->op != OP_fused_dag) || n->n_in < 1)
		return K_OTHER;
	/* but its inputs that repeat over the output ([W] against [N, C, H,
	 * W]) would repeat no more once permuted */
	for (int i = 0; n->op == OP_fused_dag && i < n->n_in; i++) {
		const ir_value *a = val(g, n->in[i]);
		bool same = a->rank == y->rank;
		for (int d = 0; same && d < a->rank; d++)
			same = a->dims[d] == y->dims[d];
		if (!same && !layout_free(g, n->in[i]))
			return K_OTHER;
	}
	/* broadcasting commutes with permuting every operand the same way, so
	 * operands need the output's rank, not its shape */
	int tensors = 0;
	for (int i = 0; i < n->n_in; i++) {
		const ir_value *a = val(g, n->in[i]);
		if (a->dtype != AIR_F32)
			return K_OTHER;
		if (layout_free(g, n->in[i]))
			continue;
		if (a->rank != 4)
			return K_OTHER;
		tensors++;
	}
	return tensors > 0 ? K_ELEM : K_OTHER;
}

/* NCHW dims -> NHWC dims of a region value, in place. */
static void to_nhwc(ir_value *v)
{
	air_dim c = v->dims[1];
	v->dims[1] = v->dims[2];
	v->dims[2] = v->dims[3];
	v->dims[3] = c;
}

/* conv2d -> conv2d_nhwc: attributes moved by name into the new schema,
 * has_bias made explicit. */
static void rewrite_conv(ir_node *n)
{
	static const char *const names[] = {"stride", "padding", "dilation", "groups", "has_bias", "act",
					    "has_residual"};
	int has_bias = conv_has_bias(n), has_res = conv_has_residual(n);
	ir_attr old[IR_MAX_ATTRS];
	memcpy(old, n->attrs, sizeof old);
	memset(n->attrs, 0, sizeof n->attrs);
	int old_op = n->op;
	for (int k = 0; k < (int)(sizeof names / sizeof names[0]); k++) {
		int from = pass_attr_index(old_op, names[k]), to = pass_attr_index(OP_conv2d_nhwc, names[k]);
		if (from >= 0) {
			n->attrs[to] = old[from];
			memset(&old[from], 0, sizeof old[from]);
		} else {
			n->attrs[to].i = op_get(OP_conv2d_nhwc)->attrs[to].def_i;
		}
	}
	for (int a = 0; a < IR_MAX_ATTRS; a++)
		free(old[a].ints);
	n->op = OP_conv2d_nhwc;
	n->attrs[pass_attr_index(OP_conv2d_nhwc, "has_bias")].i = has_bias;
	n->attrs[pass_attr_index(OP_conv2d_nhwc, "has_bias")].set = true;
	n->attrs[pass_attr_index(OP_conv2d_nhwc, "has_residual")].i = has_res;
	n->attrs[pass_attr_index(OP_conv2d_nhwc, "has_residual")].set = true;
}

static int pool_nhwc_op(int op)
{
	switch (op) {
	case OP_max_pool2d: return OP_max_pool2d_nhwc;
	case OP_avg_pool2d: return OP_avg_pool2d_nhwc;
	default: return OP_adaptive_avg_pool2d_nhwc;
	}
}

/* Adds permute(v, perm) (or, for an exit of a value whose H and W are 1,
 * a reshape to the NCHW dims) after node `after`; its output in *out. */
static air_status add_convert(layout_ctx *c, air_value v, bool to_nhwc_layout, int after, air_value *out)
{
	air_graph *g = c->g;
	const ir_value *x = val(g, v);
	int nout;
	air_status st;
	if (!to_nhwc_layout && x->dims[1] == 1 && x->dims[2] == 1) {
		int64_t shape[4] = {x->dims[0], x->dims[3], 1, 1};
		air_attr a = {"shape", AIR_ATTR_INTS, 0, 0, shape, 4};
		st = air_graph_add_node(g, "reshape", &v, 1, &a, 1, out, 1, &nout);
	} else {
		static const int64_t into[4] = {0, 2, 3, 1}, back[4] = {0, 3, 1, 2};
		air_attr a = {"perm", AIR_ATTR_INTS, 0, 0, to_nhwc_layout ? into : back, 4};
		st = air_graph_add_node(g, "permute", &v, 1, &a, 1, out, 1, &nout);
	}
	if (st != AIR_OK)
		return st;
	c->after[g->n_nodes - 1 - c->n0] = after;
	return AIR_OK;
}

static int producer(const air_graph *g, air_value v)
{
	const ir_value *x = val(g, v);
	return x->kind == IR_NODE_OUTPUT ? x->index : -1;
}

/* A region whose convs are all strided spatial ones pays for its permutes
 * (every byte entering or leaving it is read and written once more) with
 * those convs' gain. Measured on Zen 3, batch 1, against the NCHW im2col:
 * the permutes moved 4.4 GB of tensor a second (0.23 ns a byte), NHWC's
 * im2col saved about 2.6 ps a multiply-add, so NHWC paid from about 87
 * multiply-adds per edge byte. The NCHW op now runs such a conv
 * channels-last itself, transposing in L2 (conv_nhwc_im2col.c,
 * conv_implicit.c), which leaves less to gain: on Sapphire Rapids a lone
 * 256>256 3x3 stride 2 at 28x28 (116 M multiply-adds, 1 MB of edges) took
 * 0.93 ms in NCHW against 0.965 converted (medians of 400 interleaved
 * runs), and 512>512 at 14x14 (0.5 MB) 1.05 against 1.04. For a 3x3
 * stride-2 conv with C = O the ratio is 0.45 C multiply-adds a byte: up to
 * 256 channels stay NCHW, 512 convert. Unknown sizes convert. */
enum { NHWC_MIN_WORK_PER_EDGE_BYTE = 160 };

static void drop_weak_regions(const air_graph *g, const layout_ctx *c, int n0, char *has_conv)
{
	double *work = calloc((size_t)n0 + 1, sizeof *work), *edge = calloc((size_t)n0 + 1, sizeof *edge);
	char *strong = calloc((size_t)n0 + 1, 1);
	if (!work || !edge || !strong)
		goto done;
	for (int k = 0; k < n0; k++) {
		int r = find(c->parent, k);
		const ir_node *n = &g->nodes[k];
		if (!c->kind[k] || !has_conv[r] || strong[r])
			continue;
		if (c->kind[k] == K_CONV && conv_is_strong(g, n)) {
			strong[r] = 1;
			continue;
		}
		if (c->kind[k] == K_CONV && !conv_is_pointwise(g, n) && !conv_is_narrow(g, n)) {
			double wk = conv_work(g, n);
			if (wk < 0)
				strong[r] = 1; /* unknown: convert, as before */
			work[r] += wk;
		}
		/* edges: image inputs from outside the region, and the output if
		 * anything outside reads it */
		for (int i = 0; i < n->n_in; i++) {
			int p = producer(g, n->in[i]);
			if (spatial_input(g, n, c->kind[k], i) && (p < 0 || !c->kind[p] || find(c->parent, p) != r)) {
				double b = known_bytes(val(g, n->in[i]));
				if (b < 0)
					strong[r] = 1;
				edge[r] += b;
			}
		}
		bool leaves = false;
		for (int o = 0; o < g->n_outputs; o++)
			leaves |= g->outputs[o] == n->out[0];
		for (int u = 0; u < n0 && !leaves; u++)
			for (int i = 0; i < g->nodes[u].n_in; i++)
				if (g->nodes[u].in[i] == n->out[0] && (!c->kind[u] || find(c->parent, u) != r))
					leaves = true;
		if (leaves) {
			double b = known_bytes(val(g, n->out[0]));
			if (b < 0)
				strong[r] = 1;
			edge[r] += b;
		}
	}
	for (int r = 0; r < n0; r++)
		if (has_conv[r] && !strong[r] && work[r] < NHWC_MIN_WORK_PER_EDGE_BYTE * edge[r])
			has_conv[r] = 0;
done:
	free(work);
	free(edge);
	free(strong);
}

/* Puts each added node right after the node it follows; renumbers. */
static air_status reorder(layout_ctx *c)
{
	air_graph *g = c->g;
	int n = g->n_nodes, added = n - c->n0, k = 0;
	ir_node *nodes = malloc(sizeof *nodes * (size_t)(n ? n : 1));
	if (!nodes)
		return air_error(AIR_OUT_OF_MEMORY, "layout: no memory");
	for (int a = 0; a < added; a++)
		if (c->after[a] < 0)
			nodes[k++] = g->nodes[c->n0 + a];
	for (int i = 0; i < c->n0; i++) {
		nodes[k++] = g->nodes[i];
		for (int a = 0; a < added; a++)
			if (c->after[a] == i)
				nodes[k++] = g->nodes[c->n0 + a];
	}
	memcpy(g->nodes, nodes, sizeof *nodes * (size_t)n);
	free(nodes);
	for (int i = 0; i < n; i++)
		for (int o = 0; o < g->nodes[i].n_out; o++)
			g->values[g->nodes[i].out[o]].index = i;
	return AIR_OK;
}

/* Does permute b, applied to a's output, give back a's input? */
static bool undoes(const ir_node *a, const ir_node *b)
{
	int r = b->attrs[0].n;
	if (a->attrs[0].n != r)
		return false;
	for (int j = 0; j < r; j++) {
		int64_t q = b->attrs[0].ints[j] < 0 ? b->attrs[0].ints[j] + r : b->attrs[0].ints[j];
		int64_t p = a->attrs[0].ints[q] < 0 ? a->attrs[0].ints[q] + r : a->attrs[0].ints[q];
		if (p != j)
			return false;
	}
	return true;
}

/* A permute that undoes the permute before it: its readers (nodes and
 * graph outputs) read the first one's input instead, and permutes left
 * without readers go. Returns how many pairs it cancelled. */
static air_status cancel_inverse_permutes(air_graph *g, int *cancelled)
{
	int n = g->n_nodes;
	char *dead = calloc((size_t)n + 1, 1);
	int *readers = calloc((size_t)g->n_values + 1, sizeof *readers);
	if (!dead || !readers) {
		free(dead);
		free(readers);
		return air_error(AIR_OUT_OF_MEMORY, "layout: no memory");
	}
	*cancelled = 0;
	for (int k = 0; k < n; k++) {
		const ir_node *b = &g->nodes[k];
		int pk = b->op == OP_permute ? producer(g, b->in[0]) : -1;
		if (pk < 0 || g->nodes[pk].op != OP_permute || !undoes(&g->nodes[pk], b))
			continue;
		ir_replace_uses(g, b->out[0], g->nodes[pk].in[0]);
		dead[k] = 1;
		(*cancelled)++;
	}
	/* the first permutes of the pairs, if nothing else reads them */
	for (int k = 0; k < n; k++)
		for (int i = 0; !dead[k] && i < g->nodes[k].n_in; i++)
			readers[g->nodes[k].in[i]]++;
	for (int o = 0; o < g->n_outputs; o++)
		readers[g->outputs[o]]++;
	for (int k = 0; k < n; k++)
		if (!dead[k] && g->nodes[k].op == OP_permute && readers[g->nodes[k].out[0]] == 0)
			dead[k] = 1;
	if (*cancelled)
		pass_compact(g, dead);
	free(dead);
	free(readers);
	return AIR_OK;
}

static air_status run(layout_ctx *c, pass_log *log)
{
	air_graph *g = c->g;
	const int n0 = c->n0;
	for (int k = 0; k < n0; k++) {
		c->kind[k] = (char)classify(g, &g->nodes[k]);
		c->parent[k] = k;
	}
	for (int k = 0; k < n0; k++) {
		const ir_node *n = &g->nodes[k];
		if (!c->kind[k])
			continue;
		for (int i = 0; i < n->n_in; i++) {
			int p = producer(g, n->in[i]);
			if (p >= 0 && c->kind[p] && spatial_input(g, n, c->kind[k], i))
				c->parent[find(c->parent, k)] = find(c->parent, p);
		}
	}
	/* regions with a conv that wants NHWC: anything but a pointwise or a
	 * narrow one (a region of those, pools and elementwise ops stays NCHW),
	 * or any with a 16-bit weight */
	char *has_conv = calloc((size_t)n0 + 1, 1);
	if (!has_conv)
		return air_error(AIR_OUT_OF_MEMORY, "layout: no memory");
	for (int k = 0; k < n0; k++)
		if (c->kind[k] == K_CONV && ((!conv_is_pointwise(g, &g->nodes[k]) && !conv_is_narrow(g, &g->nodes[k])) ||
					     conv_has_lowp_weight(g, &g->nodes[k])))
			has_conv[find(c->parent, k)] = 1;
	drop_weak_regions(g, c, n0, has_conv);
	int regions = 0, convs = 0, pools = 0, elems = 0, cats = 0;
	for (int k = 0; k < n0; k++) {
		c->in_region[k] = c->kind[k] && has_conv[find(c->parent, k)];
		c->nhwc_out[k] = c->in_region[k] && (c->kind[k] != K_MEAN || mean_keepdim(&g->nodes[k]));
		if (c->in_region[k] && find(c->parent, k) == k)
			regions++;
		if (c->in_region[k]) {
			convs += c->kind[k] == K_CONV;
			pools += c->kind[k] == K_POOL || c->kind[k] == K_MEAN;
			elems += c->kind[k] == K_ELEM;
			cats += c->kind[k] == K_CAT;
		}
	}
	free(has_conv);
	if (regions == 0) {
		pass_logf(log, "layout: no region with a conv2d other than 1x1 or narrow (f32); nothing changed\n");
		return AIR_OK;
	}
	/* which values cross the edge */
	for (int k = 0; k < n0; k++) {
		const ir_node *n = &g->nodes[k];
		for (int i = 0; i < n->n_in; i++) {
			air_value v = n->in[i];
			int p = producer(g, v);
			bool from_region = p >= 0 && c->nhwc_out[p];
			if (c->in_region[k] && spatial_input(g, n, c->kind[k], i) && !from_region)
				c->has_entry[v] = 1;
			if (!c->in_region[k] && from_region)
				c->has_exit[v] = 1;
		}
	}
	for (int i = 0; i < g->n_outputs; i++) {
		int p = producer(g, g->outputs[i]);
		if (p >= 0 && c->nhwc_out[p])
			c->has_exit[g->outputs[i]] = 1;
	}
	/* region values become NHWC, region ops their NHWC forms */
	for (int k = 0; k < n0; k++) {
		if (!c->in_region[k])
			continue;
		ir_node *n = &g->nodes[k];
		if (c->nhwc_out[k])
			to_nhwc(&g->values[n->out[0]]);
		if (c->kind[k] == K_MEAN && mean_keepdim(n)) {
			/* [N, 1, 1, C]: the NHWC pool's output, from its channel-vector kernel */
			ir_attr *a = &n->attrs[pass_attr_index(OP_mean, "axes")];
			a->ints[0] = a->ints[1] = 1;
			for (int i = 0; i < IR_MAX_ATTRS; i++)
				if (&n->attrs[i] != a) {
					free(n->attrs[i].ints);
					memset(&n->attrs[i], 0, sizeof n->attrs[i]);
				}
			ir_attr os = *a;
			memset(a, 0, sizeof *a);
			n->attrs[pass_attr_index(OP_adaptive_avg_pool2d_nhwc, "output_size")] = os;
			n->op = OP_adaptive_avg_pool2d_nhwc;
		} else if (c->kind[k] == K_MEAN) {
			ir_attr *axes = &n->attrs[pass_attr_index(OP_mean, "axes")];
			axes->ints[0] = 1;
			axes->ints[1] = 2;
		} else if (c->kind[k] == K_CAT) {
			/* NCHW axis -> NHWC axis: N stays, C goes last, H and W move up */
			static const int64_t nhwc_axis[4] = {0, 3, 1, 2};
			int64_t *axis = &n->attrs[0].i;
			*axis = nhwc_axis[*axis < 0 ? *axis + 4 : *axis];
		} else if (c->kind[k] == K_CONV)
			rewrite_conv(n);
		else if (c->kind[k] == K_POOL)
			n->op = pool_nhwc_op(n->op);
	}
	/* the conversions at the edges (values added now are past nv) */
	int nv = g->n_values, entries = 0, exits = 0, reshapes = 0;
	for (int v = 0; v < nv; v++) {
		if (c->has_entry[v]) {
			AIR_TRY(add_convert(c, (air_value)v, true, producer(g, (air_value)v), &c->entry[v]));
			entries++;
		}
		if (c->has_exit[v]) {
			AIR_TRY(add_convert(c, (air_value)v, false, producer(g, (air_value)v), &c->exit[v]));
			if (g->nodes[g->n_nodes - 1].op == OP_reshape)
				reshapes++;
			else
				exits++;
		}
	}
	for (int k = 0; k < n0; k++) {
		ir_node *n = &g->nodes[k];
		for (int i = 0; i < n->n_in; i++) {
			air_value v = n->in[i];
			if (v >= (air_value)nv)
				continue;
			if (c->in_region[k] && c->has_entry[v] && spatial_input(g, n, c->kind[k], i))
				n->in[i] = c->entry[v];
			else if (!c->in_region[k] && c->has_exit[v])
				n->in[i] = c->exit[v];
		}
	}
	for (int i = 0; i < g->n_outputs; i++)
		if (g->outputs[i] < (air_value)nv && c->has_exit[g->outputs[i]])
			g->outputs[i] = c->exit[g->outputs[i]];
	AIR_TRY(reorder(c));
	int cancelled = 0;
	AIR_TRY(cancel_inverse_permutes(g, &cancelled));
	pass_logf(log,
		  "layout: %d NHWC region(s): %d conv2d, %d pool, %d elementwise, %d cat; %d permute(s) in, %d out, "
		  "%d free reshape(s) out; %d permute pair(s) cancelled\n",
		  regions, convs, pools, elems, cats, entries, exits, reshapes, cancelled);
	return AIR_OK;
}

air_status pass_layout(air_graph *g, const pass_options *po, pass_log *log)
{
	layout_ctx c;
	memset(&c, 0, sizeof c);
	c.g = g;
	c.n0 = g->n_nodes;
	size_t nn = (size_t)g->n_nodes + 1, nv = (size_t)g->n_values + 1;
	c.kind = calloc(nn, 1);
	c.parent = calloc(nn, sizeof *c.parent);
	c.in_region = calloc(nn, 1);
	c.nhwc_out = calloc(nn, 1);
	c.entry = calloc(nv, sizeof *c.entry);
	c.exit = calloc(nv, sizeof *c.exit);
	c.has_entry = calloc(nv, 1);
	c.has_exit = calloc(nv, 1);
	/* at most one entry and one exit per value */
	c.after = calloc(2 * nv, sizeof *c.after);
	air_status st;
	if (!c.kind || !c.parent || !c.in_region || !c.nhwc_out || !c.entry || !c.exit || !c.has_entry || !c.has_exit || !c.after)
		st = air_error(AIR_OUT_OF_MEMORY, "layout: no memory");
	else
		st = run(&c, log);
	free(c.kind), free(c.parent), free(c.in_region), free(c.nhwc_out), free(c.entry), free(c.exit);
	free(c.has_entry), free(c.has_exit), free(c.after);
	return st;
}

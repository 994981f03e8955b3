/* fuse_dag.c - elementwise fusion across several tensors: a group of f32
 * elementwise ops over one shape (unary ops, fused_elementwise chains,
 * tensor-tensor add/sub/mul/div/maximum/minimum/pow, comparisons feeding
 * where, where) becomes one fused_dag node: a register program
 * (kernels/elementwise/fused_dag_ref.h) with up to KD_MAX_IN inputs, whose
 * intermediates may be read more than once, and whose results read outside
 * the group (or graph outputs) are its outputs, up to OP_MAX_OUT. An AdamW
 * update (new param, exp_avg, exp_avg_sq from four tensors) is one pass.
 *
 * Groups: fusible nodes joined by a value of the group's shape form
 * connected components; each component is cut, in node order, into
 * groups that fit the limits. The fused node takes the place of the
 * group's last node, so a group is valid only when no node outside it
 * reads one of its values before that place (which also rules out a cycle
 * through outside nodes). Operands of one element, or repeating over the
 * leading dims ([C] against [N, C]), are broadcast; f32 constants of one
 * element become immediates. Runs after pass_fuse_elementwise, whose
 * chains it takes in whole. Requires: node order is execution order. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kernels/elementwise/fused_dag_ref.h"
#include "ops/op.h"
#include "passes/pass.h"

typedef struct dag {
	air_graph *g;
	int *ustart, *users; /* CSR: the nodes reading each value (once per read) */
	char *graph_out;     /* per value */
	char *fus;           /* per node: may join a group */
	char *member;        /* per node: in the group being looked at */
	int *reg;            /* per value: its register while building, or -1 */
	int instr_limit;
	/* what build() made */
	int64_t prog[4 * KD_MAX_INSTR];
	int n_instr;
	air_value ins[KD_MAX_IN];
	int n_ins;
	air_value outs[OP_MAX_OUT];
	int64_t out_reg[OP_MAX_OUT];
	int n_outs;
} dag;

static int binary_code(int op)
{
	switch (op) {
	case OP_add: return KD_ADD;
	case OP_sub: return KD_SUB;
	case OP_mul: return KD_MUL;
	case OP_div: return KD_DIV;
	case OP_maximum: return KD_MAX;
	case OP_minimum: return KD_MIN;
	case OP_pow: return KD_POW;
	case OP_eq: return KD_EQ;
	case OP_ne: return KD_NE;
	case OP_lt: return KD_LT;
	case OP_le: return KD_LE;
	case OP_gt: return KD_GT;
	case OP_ge: return KD_GE;
	default: return -1;
	}
}

static bool same_dims(const ir_value *a, const ir_value *b)
{
	if (a->rank != b->rank)
		return false;
	for (int d = 0; d < a->rank; d++)
		if (a->dims[d] != b->dims[d])
			return false;
	return true;
}

/* x repeats over out's leading dims: after its leading 1s, x's dims are
 * out's trailing ones, so element i of x is x[i % numel(x)] (one element
 * is the case of no dims left: a scalar; [C] against [N, C] a bias) */
static bool periodic(const ir_value *x, const ir_value *out)
{
	if (x->rank > out->rank)
		return false;
	int k = 0;
	while (k < x->rank && x->dims[k] == 1)
		k++;
	for (int d = k; d < x->rank; d++)
		if (x->dims[d] != out->dims[d + out->rank - x->rank])
			return false;
	return true;
}

static bool operand_ok(const air_graph *g, air_value v, const ir_value *out, air_dtype dt)
{
	const ir_value *x = &g->values[v];
	return x->dtype == dt && (same_dims(x, out) || periodic(x, out));
}

static bool node_fusible(const air_graph *g, const ir_node *n)
{
	if (n->n_out != 1)
		return false;
	const ir_value *out = &g->values[n->out[0]];
	if (n->op == OP_fused_elementwise || pass_fused_unary_opcode(n->op) >= 0)
		return out->dtype == AIR_F32 && g->values[n->in[0]].dtype == AIR_F32 &&
		       same_dims(&g->values[n->in[0]], out);
	if (n->op == OP_where)
		return n->n_in == 3 && out->dtype == AIR_F32 && operand_ok(g, n->in[0], out, AIR_BOOL) &&
		       operand_ok(g, n->in[1], out, AIR_F32) && operand_ok(g, n->in[2], out, AIR_F32);
	int code = binary_code(n->op);
	if (code < 0 || n->n_in != 2)
		return false;
	air_dtype want = code >= KD_EQ ? AIR_BOOL : AIR_F32;
	return out->dtype == want && operand_ok(g, n->in[0], out, AIR_F32) && operand_ok(g, n->in[1], out, AIR_F32);
}

static int uf_find(int *parent, int x)
{
	while (parent[x] != x) {
		parent[x] = parent[parent[x]];
		x = parent[x];
	}
	return x;
}

static bool is_scalar_const(const air_graph *g, air_value v, float *c)
{
	return pass_f32_scalar(g, v, c);
}

static bool emit(dag *d, int64_t op, int64_t a, int64_t b, int64_t c)
{
	if (d->n_instr >= d->instr_limit)
		return false;
	int64_t *p = d->prog + 4 * d->n_instr++;
	p[0] = op, p[1] = a, p[2] = b, p[3] = c;
	return true;
}

/* The register of operand v; a new input or constant instruction if need
 * be. Registers of inputs are renumbered at the end (inputs first). */
enum { REG_INPUT = 1 << 20 };
static bool operand(dag *d, air_value v, int *r, air_value *consts, int *n_consts)
{
	if (d->reg[v] >= 0) {
		*r = d->reg[v];
		return true;
	}
	float c;
	if (is_scalar_const(d->g, v, &c)) {
		uint32_t bits;
		memcpy(&bits, &c, 4);
		if (!emit(d, KD_CONST, bits, 0, 0))
			return false;
		consts[(*n_consts)++] = v;
		*r = d->reg[v] = d->n_instr - 1;
		return true;
	}
	if (d->n_ins >= KD_MAX_IN)
		return false;
	d->ins[d->n_ins] = v;
	*r = d->reg[v] = REG_INPUT + d->n_ins++;
	return true;
}

/* What build() found. */
enum { BUILD_OK, BUILD_LIMIT, BUILD_NOT_YET };

/* Builds the program of the member nodes (node order) into d. BUILD_LIMIT:
 * too many instructions or inputs (more members make it worse);
 * BUILD_NOT_YET: no full f32 input to lead, or outputs that are too many,
 * bool or none (more members may mend it). reg[] is left all -1. */
static int build(dag *d, const int *mem, int n_mem)
{
	air_graph *g = d->g;
	d->n_instr = d->n_ins = d->n_outs = 0;
	air_value consts[4 * KD_MAX_INSTR];
	int n_consts = 0;
	bool ok = true;
	for (int m = 0; m < n_mem && ok; m++) {
		const ir_node *n = &g->nodes[mem[m]];
		int r[3];
		float c;
		if (n->op == OP_fused_elementwise) {
			const ir_attr *p = &n->attrs[0];
			ok = operand(d, n->in[0], &r[0], consts, &n_consts);
			for (int k = 0; ok && k < p->n; k += 2) {
				ok = emit(d, p->ints[k], r[0], p->ints[k + 1], 0);
				r[0] = d->n_instr - 1;
			}
		} else if (pass_fused_unary_opcode(n->op) >= 0) {
			ok = operand(d, n->in[0], &r[0], consts, &n_consts) && emit(d, pass_fused_unary_opcode(n->op), r[0], 0, 0);
		} else if (n->op == OP_where) {
			for (int i = 0; i < 3 && ok; i++)
				ok = operand(d, n->in[i], &r[i], consts, &n_consts);
			ok = ok && emit(d, KD_WHERE, r[0], r[1], r[2]);
		} else {
			/* a tensor-scalar op with an f32 constant of one element
			 * takes it as an immediate */
			int first = is_scalar_const(g, n->in[0], &c) ? 0 : is_scalar_const(g, n->in[1], &c) ? 1 : -1;
			int sc = first >= 0 && !is_scalar_const(g, n->in[1 - first], &(float){0}) ?
					 pass_fused_scalar_opcode(n->op, first == 0) :
					 -1;
			if (sc >= 0) {
				uint32_t bits;
				memcpy(&bits, &c, 4);
				ok = operand(d, n->in[1 - first], &r[0], consts, &n_consts) && emit(d, sc, r[0], bits, 0);
			} else {
				ok = operand(d, n->in[0], &r[0], consts, &n_consts) &&
				     operand(d, n->in[1], &r[1], consts, &n_consts) &&
				     emit(d, binary_code(n->op), r[0], r[1], 0);
			}
		}
		if (ok)
			d->reg[n->out[0]] = d->n_instr - 1;
	}
	int result = ok ? BUILD_OK : BUILD_LIMIT;
	/* a full-size f32 input goes first (it gives the node its shape) */
	int lead = -1;
	if (ok) {
		const ir_value *shape = &g->values[g->nodes[mem[n_mem - 1]].out[0]];
		for (int i = 0; i < d->n_ins && lead < 0; i++)
			if (g->values[d->ins[i]].dtype == AIR_F32 && same_dims(&g->values[d->ins[i]], shape))
				lead = i;
		ok = lead >= 0;
		result = ok ? BUILD_OK : BUILD_NOT_YET;
	}
	if (ok) {
		air_value t = d->ins[0];
		d->ins[0] = d->ins[lead];
		d->ins[lead] = t;
		/* renumber: inputs 0..n_ins-1, instruction k is n_ins + k */
		for (int k = 0; k < d->n_instr; k++) {
			int64_t *p = d->prog + 4 * k;
			int na = p[0] < KF_OPCODE_COUNT ? 1 : p[0] == KD_CONST ? 0 : p[0] == KD_WHERE ? 3 : 2;
			for (int o = 0; o < na; o++) {
				int64_t x = p[1 + o];
				if (x >= REG_INPUT) {
					x -= REG_INPUT;
					x = x == 0 ? lead : x == lead ? 0 : x;
				} else {
					x += d->n_ins;
				}
				p[1 + o] = x;
			}
		}
		/* outputs: member values read outside the group or graph outputs */
		for (int m = 0; m < n_mem && ok; m++) {
			air_value v = g->nodes[mem[m]].out[0];
			bool outside = d->graph_out[v];
			for (int u = d->ustart[v]; u < d->ustart[v + 1] && !outside; u++)
				outside = !d->member[d->users[u]];
			if (!outside)
				continue;
			if (d->n_outs >= OP_MAX_OUT || g->values[v].dtype != AIR_F32)
				ok = false;
			else {
				d->out_reg[d->n_outs] = d->n_ins + d->reg[v];
				d->outs[d->n_outs++] = v;
			}
		}
		ok = ok && d->n_outs > 0;
		result = ok ? BUILD_OK : BUILD_NOT_YET;
	}
	for (int m = 0; m < n_mem; m++)
		d->reg[g->nodes[mem[m]].out[0]] = -1;
	for (int i = 0; i < d->n_ins; i++)
		d->reg[d->ins[i]] = -1;
	for (int i = 0; i < n_consts; i++)
		d->reg[consts[i]] = -1;
	return result;
}

/* No node outside the group reads a group value before the group's last
 * node (where the fused node will stand). */
static bool order_ok(const dag *d, const int *mem, int n_mem)
{
	int last = mem[n_mem - 1];
	for (int m = 0; m < n_mem; m++) {
		air_value v = d->g->nodes[mem[m]].out[0];
		for (int u = d->ustart[v]; u < d->ustart[v + 1]; u++)
			if (!d->member[d->users[u]] && d->users[u] < last)
				return false;
	}
	return true;
}

/* Is mem a group that can be fused as it is? With final false, the output
 * count is not judged (a later member may take in an outside reader). */
static bool group_ok(dag *d, const int *mem, int n_mem, bool final)
{
	for (int m = 0; m < n_mem; m++)
		d->member[mem[m]] = 1;
	bool ok = order_ok(d, mem, n_mem);
	if (ok) {
		int b = build(d, mem, n_mem);
		ok = b == BUILD_OK || (!final && b == BUILD_NOT_YET);
	}
	for (int m = 0; m < n_mem; m++)
		d->member[mem[m]] = 0;
	return ok;
}

/* Node mem[n_mem - 1] becomes the fused node (d holds its program); the
 * other members die, and so do the values that are not outputs. */
static air_status rewrite(dag *d, const int *mem, int n_mem, char *dead)
{
	air_graph *g = d->g;
	ir_node *n = &g->nodes[mem[n_mem - 1]];
	air_value *in = malloc(sizeof *in * (size_t)d->n_ins);
	air_value *out = malloc(sizeof *out * (size_t)d->n_outs);
	int64_t *prog = malloc(sizeof *prog * 4 * (size_t)d->n_instr);
	int64_t *outs = malloc(sizeof *outs * (size_t)d->n_outs);
	if (!in || !out || !prog || !outs) {
		free(in), free(out), free(prog), free(outs);
		return air_error(AIR_OUT_OF_MEMORY, "fuse_elementwise: no memory");
	}
	memcpy(in, d->ins, sizeof *in * (size_t)d->n_ins);
	memcpy(out, d->outs, sizeof *out * (size_t)d->n_outs);
	memcpy(prog, d->prog, sizeof *prog * 4 * (size_t)d->n_instr);
	for (int m = 0; m < n_mem; m++) {
		air_value v = g->nodes[mem[m]].out[0];
		bool is_out = false;
		for (int j = 0; j < d->n_outs; j++)
			is_out |= d->outs[j] == v;
		if (!is_out)
			g->values[v].kind = IR_DEAD;
		else
			g->values[v].index = mem[n_mem - 1];
		if (m < n_mem - 1)
			dead[mem[m]] = 1;
	}
	free(n->in);
	free(n->out);
	pass_set_op(n, OP_fused_dag);
	n->in = in;
	n->n_in = d->n_ins;
	n->out = out;
	n->n_out = d->n_outs;
	n->attrs[0] = (ir_attr){true, 0, 0, prog, 4 * d->n_instr};
	n->attrs[1] = (ir_attr){true, 0, 0, outs, d->n_outs};
	for (int j = 0; j < d->n_outs; j++)
		outs[j] = d->out_reg[j];
	return AIR_OK;
}

air_status pass_fuse_dag(air_graph *g, int max_group, pass_log *log)
{
	int nv = g->n_values, nn = g->n_nodes;
	dag d;
	memset(&d, 0, sizeof d);
	d.g = g;
	d.instr_limit = max_group > 0 && max_group < KD_MAX_INSTR ? max_group : KD_MAX_INSTR;
	int n_reads = 0;
	for (int k = 0; k < nn; k++)
		n_reads += g->nodes[k].n_in;
	d.ustart = calloc((size_t)nv + 2, sizeof *d.ustart);
	d.users = malloc(sizeof *d.users * ((size_t)n_reads + 1));
	d.graph_out = calloc((size_t)nv + 1, 1);
	d.fus = calloc((size_t)nn + 1, 1);
	d.member = calloc((size_t)nn + 1, 1);
	d.reg = malloc(sizeof *d.reg * ((size_t)nv + 1));
	int *parent = malloc(sizeof *parent * ((size_t)nn + 1));
	int *tail = malloc(sizeof *tail * ((size_t)nn + 1)); /* per root: last node of its list */
	int *next = malloc(sizeof *next * ((size_t)nn + 1));  /* per node: the next of its component */
	char *dead = calloc((size_t)nn + 1, 1);
	air_status st = AIR_OK;
	if (!d.ustart || !d.users || !d.graph_out || !d.fus || !d.member || !d.reg || !parent || !tail || !next ||
	    !dead) {
		st = air_error(AIR_OUT_OF_MEMORY, "fuse_elementwise: no memory");
		goto done;
	}
	for (int k = 0; k < nn; k++)
		for (int i = 0; i < g->nodes[k].n_in; i++)
			d.ustart[g->nodes[k].in[i] + 1]++;
	for (int v = 0; v < nv; v++)
		d.ustart[v + 1] += d.ustart[v];
	{
		int *pos = malloc(sizeof *pos * ((size_t)nv + 1));
		if (!pos) {
			st = air_error(AIR_OUT_OF_MEMORY, "fuse_elementwise: no memory");
			goto done;
		}
		memcpy(pos, d.ustart, sizeof *pos * (size_t)nv);
		for (int k = 0; k < nn; k++)
			for (int i = 0; i < g->nodes[k].n_in; i++)
				d.users[pos[g->nodes[k].in[i]]++] = k;
		free(pos);
	}
	for (int i = 0; i < g->n_outputs; i++)
		d.graph_out[g->outputs[i]] = 1;
	for (int v = 0; v < nv; v++)
		d.reg[v] = -1;
	/* components of fusible nodes joined by values of their shape */
	for (int k = 0; k < nn; k++) {
		parent[k] = k;
		d.fus[k] = node_fusible(g, &g->nodes[k]);
	}
	for (int k = 0; k < nn; k++) {
		if (!d.fus[k])
			continue;
		const ir_node *n = &g->nodes[k];
		const ir_value *shape = &g->values[n->out[0]];
		for (int i = 0; i < n->n_in; i++) {
			const ir_value *x = &g->values[n->in[i]];
			if (x->kind != IR_NODE_OUTPUT || !d.fus[x->index] || !same_dims(x, shape))
				continue;
			int a = uf_find(parent, k), b = uf_find(parent, x->index);
			if (a != b)
				parent[a < b ? b : a] = a < b ? a : b;
		}
	}
	/* each component's nodes in node order: a linked list from its root */
	for (int k = 0; k < nn; k++)
		next[k] = -1;
	for (int k = 0; k < nn; k++) {
		if (!d.fus[k])
			continue;
		int r = uf_find(parent, k);
		if (r == k)
			tail[k] = k;
		else {
			next[tail[r]] = k;
			tail[r] = k;
		}
	}
	int groups = 0, fused_ops = 0, mem[KD_MAX_INSTR + 1], list[KD_MAX_INSTR + 1];
	for (int r = 0; r < nn; r++) {
		if (!d.fus[r] || uf_find(parent, r) != r || next[r] < 0)
			continue;
		int k = r;
		while (k >= 0) {
			/* grow a group from k in node order while it fits */
			int n_mem = 0;
			mem[n_mem++] = k;
			int j = next[k];
			while (j >= 0 && n_mem < KD_MAX_INSTR) {
				mem[n_mem] = j;
				if (!group_ok(&d, mem, n_mem + 1, false))
					break;
				n_mem++;
				j = next[j];
			}
			while (n_mem >= 2 && !group_ok(&d, mem, n_mem, true))
				n_mem--;
			/* the walk goes on after the group (or after k alone) */
			int resume = next[mem[n_mem - 1]];
			if (n_mem >= 2) {
				memcpy(list, mem, sizeof *mem * (size_t)n_mem);
				for (int m = 0; m < n_mem; m++)
					d.member[list[m]] = 1;
				build(&d, list, n_mem);
				for (int m = 0; m < n_mem; m++)
					d.member[list[m]] = 0;
				pass_logf(log, "  fused dag %d (%d ops, %d input(s), %d output(s)):", groups, n_mem, d.n_ins,
					  d.n_outs);
				for (int m = 0; m < n_mem; m++)
					pass_logf(log, " %s", op_get(g->nodes[list[m]].op)->name);
				pass_logf(log, "\n");
				if ((st = rewrite(&d, list, n_mem, dead)) != AIR_OK)
					goto done;
				groups++;
				fused_ops += n_mem;
			}
			k = resume;
		}
	}
	pass_compact(g, dead);
	pass_logf(log, "fuse_dag: %d group(s) of %d ops in all\n", groups, fused_ops);
done:
	free(d.ustart), free(d.users), free(d.graph_out), free(d.fus), free(d.member), free(d.reg);
	free(parent), free(tail), free(next), free(dead);
	return st;
}

/* build.c - from an opened .air file to a graph and a model: the saved
 * graph is rebuilt through the public building API (air_graph_symbol,
 * air_graph_dim_expr, air_graph_add_input/constant/node), so every check a
 * graph built in memory gets, a loaded one gets too; then air_compile runs
 * the passes and picks kernels for this CPU. Also the model's names and
 * metadata. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/graph.h"
#include "format/format.h"
#include "ops/op.h"
#include "runtime/model.h"

/* a file's dim in the rebuilt graph */
static air_dim map_dim(const air_dim *emap, int64_t d)
{
	return d >= 0 ? d : emap[-(d + 1)];
}

static air_status add_node(const struct air_file *f, const af_record *rec, const air_dim *emap,
			   const air_value *vmap, air_graph *g, air_value *vmap_out)
{
	air_value in[AF_MAX_NODE_IN];
	air_attr attrs[AF_MAX_ATTRS];
	int64_t lists[AF_MAX_ATTRS][AF_MAX_LIST];
	for (int i = 0; i < rec->n_in; i++)
		in[i] = vmap[rec->in[i]];
	int op = op_find(rec->name);
	if (op < 0)
		return air_error(AIR_UNSUPPORTED, "air file: op '%s' is unknown to this libair", rec->name);
	const op_def *def = op_get(op);
	for (int k = 0; k < rec->n_attrs; k++) {
		const af_attr *a = &rec->attrs[k];
		/* the file says which values are dims (mapped to this graph's
		 * expressions); the op's schema must agree */
		int s = 0;
		while (s < def->n_attrs && strcmp(def->attrs[s].name, a->name) != 0)
			s++;
		bool dim = a->type == AF_ATTR_DIM || a->type == AF_ATTR_DIMS;
		if (s < def->n_attrs && dim != (def->attrs[s].type == OPA_DIM || def->attrs[s].type == OPA_DIMS))
			return air_error(AIR_UNSUPPORTED, "air file: %s: attribute '%s' changed type", rec->name,
					 a->name);
		attrs[k] = (air_attr){.name = a->name};
		switch (a->type) {
		case AF_ATTR_INT: attrs[k].type = AIR_ATTR_INT; attrs[k].i = a->i; break;
		case AF_ATTR_DIM: attrs[k].type = AIR_ATTR_INT; attrs[k].i = map_dim(emap, a->i); break;
		case AF_ATTR_FLOAT: attrs[k].type = AIR_ATTR_FLOAT; attrs[k].f = a->f; break;
		default:
			attrs[k].type = AIR_ATTR_INTS;
			for (int j = 0; j < a->n; j++)
				lists[k][j] = a->type == AF_ATTR_DIMS ? map_dim(emap, a->ints[j]) : a->ints[j];
			attrs[k].ints = lists[k];
			attrs[k].n = a->n;
		}
	}
	air_value out[AF_MAX_NODE_OUT];
	int n_out;
	air_status st = air_graph_add_node(g, rec->name, in, rec->n_in, attrs, rec->n_attrs, out, AF_MAX_NODE_OUT,
					   &n_out);
	if (st != AIR_OK)
		return air_error_context(st, "air file: node %s (value %u)", rec->name, rec->first_value);
	if (n_out != rec->n_out)
		return air_error(AIR_BAD_FILE, "air file: node %s has %d outputs here, %d in the file", rec->name,
				 n_out, rec->n_out);
	for (int o = 0; o < n_out; o++)
		vmap_out[o] = out[o];
	return AIR_OK;
}

static air_status build(const struct air_file *f, bool borrow, air_graph *g, air_dim *emap, air_value *vmap)
{
	for (int i = 0; i < f->n_exprs; i++) {
		const af_expr *e = &f->exprs[i];
		if (e->kind == AF_EXPR_SYMBOL)
			AIR_TRY(air_graph_symbol(g, e->name, &emap[i]));
		else
			AIR_TRY(air_graph_dim_expr(g, (air_dim_op)e->op, map_dim(emap, e->a), map_dim(emap, e->b),
						   &emap[i]));
	}
	for (int i = 0; i < f->n_records; i++) {
		const af_record *rec = &f->records[i];
		air_value *vm = &vmap[rec->first_value];
		if (rec->kind == AF_REC_NODE) {
			AIR_TRY(add_node(f, rec, emap, vmap, g, vm));
			continue;
		}
		air_dim dims[AIR_MAX_RANK];
		for (int d = 0; d < rec->rank; d++)
			dims[d] = map_dim(emap, rec->dims[d]);
		if (rec->kind == AF_REC_INPUT) {
			AIR_TRY(air_graph_add_input(g, rec->name, rec->dtype, rec->rank, dims, vm));
			continue;
		}
		const void *data;
		uint32_t cflags = borrow ? AIR_CONSTANT_BORROW : 0;
		if (rec->external >= 0) {
			data = f->ext_data[rec->external];
			if (!data)
				return air_error(AIR_INVALID_ARGUMENT,
						 "air file: external constant '%s' is not bound (air_load_options)",
						 rec->name);
			cflags = AIR_CONSTANT_BORROW; /* the caller's memory, as documented */
		} else {
			data = f->weights ? f->weights + rec->offset : NULL;
			if (rec->nbytes && !data)
				return air_error(AIR_BAD_FILE, "air file: constant without a weights section");
		}
		AIR_TRY(air_graph_add_constant(g, rec->dtype, rec->rank, dims, data, cflags, vm));
	}
	air_value *outs = malloc(sizeof *outs * ((size_t)f->n_outputs + 1));
	if (!outs)
		return air_error(AIR_OUT_OF_MEMORY, "air file: no memory");
	for (int i = 0; i < f->n_outputs; i++)
		outs[i] = vmap[f->outputs[i]];
	air_status st = air_graph_set_outputs(g, outs, f->n_outputs);
	free(outs);
	return st;
}

air_status af_build_graph(const struct air_file *f, bool borrow, air_graph **out)
{
	*out = NULL;
	air_graph *g = NULL;
	air_dim *emap = calloc((size_t)f->n_exprs + 1, sizeof *emap);
	air_value *vmap = calloc((size_t)f->n_values + 1, sizeof *vmap);
	air_status st;
	if (!emap || !vmap)
		st = air_error(AIR_OUT_OF_MEMORY, "air file: no memory");
	else if ((st = air_graph_create(&g)) == AIR_OK)
		st = build(f, borrow, g, emap, vmap);
	free(emap);
	free(vmap);
	if (st != AIR_OK) {
		air_graph_destroy(g);
		return st;
	}
	*out = g;
	return AIR_OK;
}

air_status air_file_graph(const air_file *f, air_graph **out)
{
	if (!out)
		return air_error(AIR_INVALID_ARGUMENT, "air_file_graph: out is NULL");
	*out = NULL;
	if (!f)
		return air_error(AIR_INVALID_ARGUMENT, "air_file_graph: file is NULL");
	return af_build_graph(f, false, out);
}

air_status air_file_compile(air_file *f, const air_compile_options *options, air_model **out)
{
	if (!out)
		return air_error(AIR_INVALID_ARGUMENT, "air_file_compile: out is NULL");
	*out = NULL;
	if (!f)
		return air_error(AIR_INVALID_ARGUMENT, "air_file_compile: file is NULL");
	/* weights in place when the file's bytes are 64-byte aligned (mapped or
	 * copied by libair); else copies, so no kernel reads a misaligned f32 */
	bool borrow = ((uintptr_t)f->data % AF_ALIGN) == 0;
	air_graph *g;
	AIR_TRY(af_build_graph(f, borrow, &g));
	air_status st = air_compile(g, options ? options : &f->compile, out);
	air_graph_destroy(g);
	if (st != AIR_OK)
		return st;
	f->refs++; /* the model keeps the file (its bytes, names, metadata) */
	(*out)->file = f;
	return AIR_OK;
}

air_status air_graph_load_buffer(const void *data, size_t size, const air_load_options *options, air_graph **out)
{
	if (!out)
		return air_error(AIR_INVALID_ARGUMENT, "air_graph_load_buffer: out is NULL");
	*out = NULL;
	air_load_options o;
	air_load_options_init(&o);
	if (options) {
		if (options->size < sizeof(size_t) || options->size > 4096)
			return air_error(AIR_INVALID_ARGUMENT, "air_graph_load_buffer: options.size is %zu",
					 options->size);
		memcpy(&o, options, sizeof o < options->size ? sizeof o : options->size);
	}
	o.flags |= AIR_LOAD_BORROW; /* the graph copies what it keeps */
	air_file *f;
	AIR_TRY(air_file_open_buffer(data, size, &o, &f));
	air_status st = af_build_graph(f, false, out);
	air_file_close(f);
	return st;
}

air_status air_graph_load_file(const char *path, const air_load_options *options, air_graph **out)
{
	if (!out)
		return air_error(AIR_INVALID_ARGUMENT, "air_graph_load_file: out is NULL");
	*out = NULL;
	air_file *f;
	AIR_TRY(air_file_open(path, options, &f));
	air_status st = af_build_graph(f, false, out);
	air_file_close(f);
	return st;
}

air_status air_model_load_file(const char *path, const air_compile_options *options, air_model **out)
{
	if (!out)
		return air_error(AIR_INVALID_ARGUMENT, "air_model_load_file: out is NULL");
	*out = NULL;
	air_file *f;
	AIR_TRY(air_file_open(path, NULL, &f));
	air_status st = air_file_compile(f, options, out);
	air_file_close(f);
	return st;
}

air_status air_model_load_buffer(const void *data, size_t size, const air_compile_options *options,
				 air_model **out)
{
	if (!out)
		return air_error(AIR_INVALID_ARGUMENT, "air_model_load_buffer: out is NULL");
	*out = NULL;
	air_file *f;
	AIR_TRY(air_file_open_buffer(data, size, NULL, &f));
	air_status st = air_file_compile(f, options, out);
	air_file_close(f);
	return st;
}

const char *air_model_input_name(const air_model *m, int i)
{
	if (!m || i < 0 || i >= m->g->n_inputs)
		return NULL;
	return m->g->input_names[i];
}

const char *air_model_output_name(const air_model *m, int i)
{
	return m ? air_file_output_name(m->file, i) : NULL;
}

const char *air_model_metadata(const air_model *m, const char *key)
{
	return m ? air_file_meta(m->file, key) : NULL;
}

/* graph_type.c - torchair._C.Graph: a graph under construction (air_graph),
 * its builder methods, and compile() that makes a Model of it. */
#include "pyair.h"

#include <string.h>

static void Graph_dealloc(GraphObject *self)
{
	air_graph_destroy(self->g);
	Py_XDECREF(self->owners);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Graph_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
	GraphObject *self = (GraphObject *)type->tp_alloc(type, 0);
	if (!self)
		return NULL;
	self->owners = PyList_New(0);
	air_status st = air_graph_create(&self->g);
	if (!self->owners || st != AIR_OK) {
		Py_DECREF(self);
		return st != AIR_OK ? raise_status(st) : NULL;
	}
	return (PyObject *)self;
}

static PyObject *Graph_input(GraphObject *self, PyObject *args)
{
	int dtype;
	PyObject *dims_obj;
	const char *name = NULL;
	if (!PyArg_ParseTuple(args, "iO|z", &dtype, &dims_obj, &name))
		return NULL;
	int64_t dims[AIR_MAX_RANK];
	int rank;
	if (read_ints(dims_obj, dims, AIR_MAX_RANK, &rank) < 0)
		return NULL;
	air_value v;
	air_status st = air_graph_add_input(self->g, name, (air_dtype)dtype, rank, dims, &v);
	return st == AIR_OK ? PyLong_FromUnsignedLong(v) : raise_status(st);
}

static PyObject *Graph_constant(GraphObject *self, PyObject *args)
{
	unsigned long long ptr;
	int dtype, borrow = 1;
	PyObject *dims_obj, *owner;
	if (!PyArg_ParseTuple(args, "KiOO|p", &ptr, &dtype, &dims_obj, &owner, &borrow))
		return NULL;
	int64_t dims[AIR_MAX_RANK];
	int rank;
	if (read_ints(dims_obj, dims, AIR_MAX_RANK, &rank) < 0)
		return NULL;
	air_value v;
	air_status st = air_graph_add_constant(self->g, (air_dtype)dtype, rank, dims, (const void *)(uintptr_t)ptr,
					       borrow ? AIR_CONSTANT_BORROW : 0, &v);
	if (st != AIR_OK)
		return raise_status(st);
	if (borrow && PyList_Append(self->owners, owner) < 0)
		return NULL;
	return PyLong_FromUnsignedLong(v);
}

static PyObject *Graph_symbol(GraphObject *self, PyObject *args)
{
	const char *name = NULL;
	if (!PyArg_ParseTuple(args, "|z", &name))
		return NULL;
	air_dim d;
	air_status st = air_graph_symbol(self->g, name, &d);
	return st == AIR_OK ? PyLong_FromLongLong(d) : raise_status(st);
}

static PyObject *Graph_dim_expr(GraphObject *self, PyObject *args)
{
	int op;
	long long a, b;
	if (!PyArg_ParseTuple(args, "iLL", &op, &a, &b))
		return NULL;
	air_dim d;
	air_status st = air_graph_dim_expr(self->g, (air_dim_op)op, a, b, &d);
	return st == AIR_OK ? PyLong_FromLongLong(d) : raise_status(st);
}

static PyObject *Graph_dim_string(GraphObject *self, PyObject *args)
{
	long long d;
	if (!PyArg_ParseTuple(args, "L", &d))
		return NULL;
	char buf[256];
	air_status st = air_graph_dim_string(self->g, d, buf, sizeof buf);
	return st == AIR_OK ? PyUnicode_FromString(buf) : raise_status(st);
}

enum { MAX_NODE_ATTRS = 16, MAX_NODE_INPUTS = 64 };

static PyObject *Graph_node(GraphObject *self, PyObject *args)
{
	const char *op;
	PyObject *inputs_obj, *attrs_obj = NULL;
	if (!PyArg_ParseTuple(args, "sO|O", &op, &inputs_obj, &attrs_obj))
		return NULL;
	int64_t in64[MAX_NODE_INPUTS];
	int n_in;
	if (read_ints(inputs_obj, in64, MAX_NODE_INPUTS, &n_in) < 0)
		return NULL;
	air_value inputs[MAX_NODE_INPUTS];
	for (int i = 0; i < n_in; i++)
		inputs[i] = (air_value)in64[i];
	air_attr attrs[MAX_NODE_ATTRS];
	int64_t lists[MAX_NODE_ATTRS][64];
	int n_attrs = 0;
	if (attrs_obj && attrs_obj != Py_None) {
		if (!PyDict_Check(attrs_obj)) {
			PyErr_SetString(PyExc_TypeError, "attrs must be a dict");
			return NULL;
		}
		PyObject *key, *val;
		Py_ssize_t pos = 0;
		while (PyDict_Next(attrs_obj, &pos, &key, &val)) {
			if (n_attrs == MAX_NODE_ATTRS) {
				PyErr_SetString(PyExc_ValueError, "too many attributes");
				return NULL;
			}
			air_attr *a = &attrs[n_attrs];
			memset(a, 0, sizeof *a);
			a->name = PyUnicode_AsUTF8(key);
			if (!a->name)
				return NULL;
			if (PyFloat_Check(val)) {
				a->type = AIR_ATTR_FLOAT;
				a->f = PyFloat_AsDouble(val);
			} else if (PyLong_Check(val)) {
				a->type = AIR_ATTR_INT;
				a->i = PyLong_AsLongLong(val);
				if (a->i == -1 && PyErr_Occurred())
					return NULL;
			} else if (PyList_Check(val) || PyTuple_Check(val)) {
				a->type = AIR_ATTR_INTS;
				if (read_ints(val, lists[n_attrs], 64, &a->n) < 0)
					return NULL;
				a->ints = lists[n_attrs];
			} else {
				PyErr_Format(PyExc_TypeError, "attribute '%s': int, float or list of ints expected",
					     a->name);
				return NULL;
			}
			n_attrs++;
		}
	}
	air_value outs[8];
	int n_out;
	air_status st = air_graph_add_node(self->g, op, inputs, n_in, attrs, n_attrs, outs, 8, &n_out);
	if (st != AIR_OK)
		return raise_status(st);
	PyObject *t = PyTuple_New(n_out);
	for (int i = 0; t && i < n_out; i++)
		PyTuple_SET_ITEM(t, i, PyLong_FromUnsignedLong(outs[i]));
	return t;
}

static PyObject *Graph_outputs(GraphObject *self, PyObject *args)
{
	PyObject *seq;
	if (!PyArg_ParseTuple(args, "O", &seq))
		return NULL;
	int64_t v64[1024];
	int n;
	if (read_ints(seq, v64, 1024, &n) < 0)
		return NULL;
	air_value vals[1024];
	for (int i = 0; i < n; i++)
		vals[i] = (air_value)v64[i];
	air_status st = air_graph_set_outputs(self->g, vals, n);
	if (st != AIR_OK)
		return raise_status(st);
	Py_RETURN_NONE;
}

static PyObject *Graph_value_info(GraphObject *self, PyObject *args)
{
	unsigned long v;
	if (!PyArg_ParseTuple(args, "k", &v))
		return NULL;
	air_dtype dt;
	int rank;
	air_dim dims[AIR_MAX_RANK];
	air_status st = air_graph_value_info(self->g, (air_value)v, &dt, &rank, dims);
	if (st != AIR_OK)
		return raise_status(st);
	PyObject *d = PyTuple_New(rank);
	for (int i = 0; d && i < rank; i++)
		PyTuple_SET_ITEM(d, i, PyLong_FromLongLong(dims[i]));
	return d ? Py_BuildValue("(iN)", (int)dt, d) : NULL;
}

static PyObject *Graph_verify(GraphObject *self, PyObject *unused)
{
	air_status st = air_graph_verify(self->g);
	if (st != AIR_OK)
		return raise_status(st);
	Py_RETURN_NONE;
}

static PyObject *Graph_compile(GraphObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"in_dtypes", "out_dtypes", "empty", "flags", "num_threads", "fusion_threshold",
				 "disabled_passes", "autotune_cache", NULL};
	PyObject *in_dt, *out_dt, *empty;
	unsigned int flags = 0, disabled = 0;
	int nthreads = 0, fthresh = 0;
	const char *cache = NULL;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO|IiiIz", kwlist, &in_dt, &out_dt, &empty, &flags, &nthreads,
					 &fthresh, &disabled, &cache))
		return NULL;
	air_compile_options o;
	air_compile_options_init(&o);
	o.flags = flags;
	o.num_threads = nthreads;
	o.fusion_threshold = fthresh;
	o.disabled_passes = disabled;
	o.autotune_cache = cache;
	air_model *m = NULL;
	air_status st;
	Py_BEGIN_ALLOW_THREADS st = air_compile(self->g, &o, &m);
	Py_END_ALLOW_THREADS if (st != AIR_OK) return raise_status(st);
	return model_new(m, self->owners, in_dt, out_dt, empty);
}

static PyMethodDef Graph_methods[] = {
	{"input", (PyCFunction)Graph_input, METH_VARARGS, "input(dtype, dims, name=None) -> value"},
	{"constant", (PyCFunction)Graph_constant, METH_VARARGS,
	 "constant(data_ptr, dtype, dims, owner, borrow=True) -> value; owner is kept alive"},
	{"symbol", (PyCFunction)Graph_symbol, METH_VARARGS, "symbol(name=None) -> dim"},
	{"dim_expr", (PyCFunction)Graph_dim_expr, METH_VARARGS, "dim_expr(op, a, b) -> dim"},
	{"dim_string", (PyCFunction)Graph_dim_string, METH_VARARGS, "dim_string(dim) -> str"},
	{"node", (PyCFunction)Graph_node, METH_VARARGS, "node(op, inputs, attrs=None) -> tuple of values"},
	{"outputs", (PyCFunction)Graph_outputs, METH_VARARGS, "outputs(values)"},
	{"value_info", (PyCFunction)Graph_value_info, METH_VARARGS, "value_info(value) -> (dtype, dims)"},
	{"verify", (PyCFunction)Graph_verify, METH_NOARGS, "verify()"},
	{"save", (PyCFunction)(void (*)(void))graph_save, METH_VARARGS | METH_KEYWORDS, GRAPH_SAVE_DOC},
	{"compile", (PyCFunction)(void (*)(void))Graph_compile, METH_VARARGS | METH_KEYWORDS,
	 "compile(in_dtypes, out_dtypes, empty, flags=0, num_threads=0, fusion_threshold=0, disabled_passes=0, "
	 "autotune_cache=None) -> Model"},
	{NULL, NULL, 0, NULL},
};

PyTypeObject GraphType = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "torchair._C.Graph",
	.tp_basicsize = sizeof(GraphObject),
	.tp_dealloc = (destructor)Graph_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "A graph under construction (air_graph).",
	.tp_methods = Graph_methods,
	.tp_new = Graph_new,
};

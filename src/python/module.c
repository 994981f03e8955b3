/* module.c - torchair._C: the CPython extension over libair, written in C and
 * not linked against libtorch. Tensors cross the boundary as data pointers
 * (zero copy): the Python layer hands in torch tensors, this module reads
 * their data_ptr/shape through ordinary attribute calls, and allocates
 * outputs through a torch.empty callable it was given.
 *
 * Types: Graph (builder over air_graph_*), Model (a compiled air_model with a
 * cached session). Errors raise torchair._C.Error(status, message). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdarg.h>
#include <string.h>

#include "air/air.h"
#include "host_threads.h"
#include "kernels/common/cpu.h"
#include "kernels/gemm/amx.h"
#include "output_pool.h"

static PyObject *Error; /* torchair._C.Error, a RuntimeError */

static PyObject *raise_status(air_status st)
{
	PyObject *args = Py_BuildValue("(iss)", (int)st, air_status_string(st), air_last_error());
	if (args) {
		PyErr_SetObject(Error, args);
		Py_DECREF(args);
	}
	return NULL;
}

/* Raises Error with args (status code, status name, formatted message), the
 * same shape as the errors that come from libair. */
static PyObject *raise_msg(air_status st, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	PyObject *msg = PyUnicode_FromFormatV(fmt, ap);
	va_end(ap);
	if (!msg)
		return NULL;
	PyObject *args = Py_BuildValue("(isN)", (int)st, air_status_string(st), msg);
	if (args) {
		PyErr_SetObject(Error, args);
		Py_DECREF(args);
	}
	return NULL;
}

/* ---- Graph ------------------------------------------------------------ */

typedef struct {
	PyObject_HEAD air_graph *g;
	PyObject *owners; /* list: objects whose memory borrowed constants use */
} GraphObject;

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

/* Reads a sequence of ints into out[0..n), at most max. */
static int read_ints(PyObject *seq, int64_t *out, int max, int *n)
{
	PyObject *fast = PySequence_Fast(seq, "expected a sequence of ints");
	if (!fast)
		return -1;
	Py_ssize_t len = PySequence_Fast_GET_SIZE(fast);
	if (len > max) {
		Py_DECREF(fast);
		PyErr_Format(PyExc_ValueError, "at most %d ints, got %zd", max, len);
		return -1;
	}
	for (Py_ssize_t i = 0; i < len; i++) {
		long long v = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(fast, i));
		if (v == -1 && PyErr_Occurred()) {
			Py_DECREF(fast);
			return -1;
		}
		out[i] = v;
	}
	*n = (int)len;
	Py_DECREF(fast);
	return 0;
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

static PyObject *Graph_compile(GraphObject *self, PyObject *args, PyObject *kw);

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
	{"compile", (PyCFunction)(void (*)(void))Graph_compile, METH_VARARGS | METH_KEYWORDS,
	 "compile(in_dtypes, out_dtypes, empty, flags=0, num_threads=0, fusion_threshold=0, disabled_passes=0) -> Model"},
	{NULL, NULL, 0, NULL},
};

static PyTypeObject GraphType = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "torchair._C.Graph",
	.tp_basicsize = sizeof(GraphObject),
	.tp_dealloc = (destructor)Graph_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "A graph under construction (air_graph).",
	.tp_methods = Graph_methods,
	.tp_new = Graph_new,
};

/* ---- Model ------------------------------------------------------------ */

typedef struct {
	PyObject_HEAD air_model *m;
	air_session *cached; /* a session for the next call; taken under the GIL */
	PyObject *owners;    /* keeps borrowed constants alive */
	PyObject **in_dtypes;  /* torch dtype objects expected per input */
	PyObject **out_dtypes; /* torch dtype objects per output */
	PyObject *empty;     /* callable(shape_tuple, dtype) -> tensor */
	int n_in, n_out;
	size_t last_arena;
} ModelObject;

static void Model_dealloc(ModelObject *self)
{
	air_session_destroy(self->cached);
	air_model_destroy(self->m);
	for (int i = 0; self->in_dtypes && i < self->n_in; i++)
		Py_XDECREF(self->in_dtypes[i]);
	for (int i = 0; self->out_dtypes && i < self->n_out; i++)
		Py_XDECREF(self->out_dtypes[i]);
	PyMem_Free(self->in_dtypes);
	PyMem_Free(self->out_dtypes);
	Py_XDECREF(self->owners);
	Py_XDECREF(self->empty);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *str_data_ptr, *str_shape, *str_dtype, *str_is_contiguous, *str_contiguous, *str_is_cpu,
	*str_device;

/* Binds one torch tensor as input i. *keep receives a new reference to the
 * tensor actually bound (a contiguous copy if x was not contiguous). */
static int bind_input(ModelObject *self, air_session *s, int i, PyObject *x, PyObject **keep)
{
	*keep = NULL;
	if (!PyObject_HasAttr(x, str_data_ptr) || !PyObject_HasAttr(x, str_dtype)) {
		PyErr_Format(PyExc_TypeError, "input %d: expected a torch.Tensor, got %s", i, Py_TYPE(x)->tp_name);
		return -1;
	}
	PyObject *dt = PyObject_GetAttr(x, str_dtype);
	if (!dt)
		return -1;
	if (dt != self->in_dtypes[i]) {
		raise_msg(AIR_DTYPE_MISMATCH, "input %d: expected dtype %S, got %S", i, self->in_dtypes[i], dt);
		Py_DECREF(dt);
		return -1;
	}
	Py_DECREF(dt);
	PyObject *cpu = PyObject_GetAttr(x, str_is_cpu);
	if (!cpu)
		return -1;
	int is_cpu = PyObject_IsTrue(cpu);
	Py_DECREF(cpu);
	if (!is_cpu) {
		PyObject *dev = PyObject_GetAttr(x, str_device);
		if (!dev)
			PyErr_Clear();
		raise_msg(AIR_UNSUPPORTED, "input %d is on %S; torchair runs on the CPU", i, dev ? dev : Py_None);
		Py_XDECREF(dev);
		return -1;
	}
	PyObject *contig = PyObject_CallMethodNoArgs(x, str_is_contiguous);
	if (!contig)
		return -1;
	int ok = PyObject_IsTrue(contig);
	Py_DECREF(contig);
	if (ok) {
		Py_INCREF(x);
		*keep = x;
	} else {
		*keep = PyObject_CallMethodNoArgs(x, str_contiguous);
		if (!*keep)
			return -1;
	}
	PyObject *shape = PyObject_GetAttr(*keep, str_shape);
	if (!shape)
		return -1;
	int64_t dims[AIR_MAX_RANK];
	int rank;
	int r = read_ints(shape, dims, AIR_MAX_RANK, &rank);
	Py_DECREF(shape);
	if (r < 0)
		return -1;
	PyObject *ptr = PyObject_CallMethodNoArgs(*keep, str_data_ptr);
	if (!ptr)
		return -1;
	unsigned long long p = PyLong_AsUnsignedLongLong(ptr);
	Py_DECREF(ptr);
	if (PyErr_Occurred())
		return -1;
	air_status st = air_session_set_input(s, i, (const void *)(uintptr_t)p, rank, dims);
	if (st != AIR_OK) {
		raise_status(st);
		return -1;
	}
	return 0;
}

static PyObject *Model_run(ModelObject *self, PyObject *args)
{
	PyObject *seq;
	if (!PyArg_ParseTuple(args, "O", &seq))
		return NULL;
	PyObject *fast = PySequence_Fast(seq, "run() takes a sequence of tensors");
	if (!fast)
		return NULL;
	Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
	if (n != self->n_in) {
		Py_DECREF(fast);
		raise_msg(AIR_INVALID_ARGUMENT, "the model takes %d inputs, got %zd", self->n_in, n);
		return NULL;
	}
	air_session *s = self->cached;
	self->cached = NULL;
	if (!s) {
		air_status st = air_session_create(self->m, &s);
		if (st != AIR_OK) {
			Py_DECREF(fast);
			return raise_status(st);
		}
	}
	PyObject *keep = PyList_New(n), *outs = NULL;
	if (!keep)
		goto fail;
	for (Py_ssize_t i = 0; i < n; i++) {
		PyObject *k;
		if (bind_input(self, s, (int)i, PySequence_Fast_GET_ITEM(fast, i), &k) < 0) {
			Py_XDECREF(k);
			goto fail;
		}
		PyList_SET_ITEM(keep, i, k);
	}
	outs = PyList_New(self->n_out);
	if (!outs)
		goto fail;
	for (int i = 0; i < self->n_out; i++) {
		int rank;
		int64_t dims[AIR_MAX_RANK];
		air_status st = air_session_output_shape(s, i, &rank, dims);
		if (st != AIR_OK) {
			raise_status(st);
			goto fail;
		}
		PyObject *shape = PyTuple_New(rank);
		if (!shape)
			goto fail;
		for (int d = 0; d < rank; d++)
			PyTuple_SET_ITEM(shape, d, PyLong_FromLongLong(dims[d]));
		PyObject *t = PyObject_CallFunctionObjArgs(self->empty, shape, self->out_dtypes[i], NULL);
		Py_DECREF(shape);
		if (!t)
			goto fail;
		PyList_SET_ITEM(outs, i, t);
		PyObject *ptr = PyObject_CallMethodNoArgs(t, str_data_ptr);
		if (!ptr)
			goto fail;
		unsigned long long p = PyLong_AsUnsignedLongLong(ptr);
		Py_DECREF(ptr);
		if (PyErr_Occurred())
			goto fail;
		air_dtype odt;
		int orank;
		st = air_model_output_info(self->m, i, &odt, &orank, NULL);
		size_t nbytes = air_dtype_size(odt);
		for (int d = 0; st == AIR_OK && d < rank; d++)
			nbytes *= (size_t)dims[d];
		if (st == AIR_OK)
			st = air_session_set_output(s, i, (void *)(uintptr_t)p, nbytes);
		if (st != AIR_OK) {
			raise_status(st);
			goto fail;
		}
	}
	air_status st;
	/* the kernels run without the GIL: other Python threads go on, and
	 * this call keeps its tensors alive through keep/outs */
	Py_BEGIN_ALLOW_THREADS st = air_session_run(s);
	Py_END_ALLOW_THREADS if (st != AIR_OK)
	{
		raise_status(st);
		goto fail;
	}
	self->last_arena = air_session_arena_bytes(s);
	if (!self->cached)
		self->cached = s;
	else
		air_session_destroy(s);
	Py_DECREF(keep);
	Py_DECREF(fast);
	return outs;
fail:
	if (!self->cached)
		self->cached = s;
	else
		air_session_destroy(s);
	Py_XDECREF(keep);
	Py_XDECREF(outs);
	Py_DECREF(fast);
	return NULL;
}

static PyObject *Model_report(ModelObject *self, PyObject *unused)
{
	return PyUnicode_FromString(air_model_report(self->m));
}

static PyObject *Model_arena_bytes(ModelObject *self, PyObject *unused)
{
	return PyLong_FromSize_t(self->last_arena);
}

/* Per-step times of the model's cached session (the one consecutive calls
 * reuse): [(kernel, op, runs, seconds)], empty before the first run or while
 * another thread holds it. */
static PyObject *Model_profile(ModelObject *self, PyObject *unused)
{
	air_session *s = self->cached;
	PyObject *list = PyList_New(0);
	if (!list || !s)
		return list;
	int n = air_session_profile_steps(s);
	for (int k = 0; k < n; k++) {
		const char *kernel, *op;
		uint64_t runs;
		double seconds;
		if (air_session_profile(s, k, &kernel, &op, &runs, &seconds) != AIR_OK)
			continue;
		PyObject *row = Py_BuildValue("(ssKd)", kernel, op, (unsigned long long)runs, seconds);
		if (!row || PyList_Append(list, row) < 0) {
			Py_XDECREF(row);
			Py_DECREF(list);
			return NULL;
		}
		Py_DECREF(row);
	}
	return list;
}

static PyObject *Model_profile_reset(ModelObject *self, PyObject *unused)
{
	air_session_profile_reset(self->cached);
	Py_RETURN_NONE;
}

static PyObject *Model_output_info(ModelObject *self, PyObject *args)
{
	int i;
	if (!PyArg_ParseTuple(args, "i", &i))
		return NULL;
	air_dtype dt;
	int rank;
	air_dim dims[AIR_MAX_RANK];
	air_status st = air_model_output_info(self->m, i, &dt, &rank, dims);
	if (st != AIR_OK)
		return raise_status(st);
	PyObject *d = PyTuple_New(rank);
	for (int k = 0; d && k < rank; k++)
		PyTuple_SET_ITEM(d, k, PyLong_FromLongLong(dims[k]));
	return d ? Py_BuildValue("(iN)", (int)dt, d) : NULL;
}

static PyObject *Model_dot(ModelObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"before", NULL};
	int before = 0;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "|p", kwlist, &before))
		return NULL;
	int which = before ? AIR_DOT_BEFORE_PASSES : AIR_DOT_AFTER_PASSES;
	size_t len = 0;
	air_status st = air_model_dot(self->m, which, NULL, 0, &len);
	if (st != AIR_OK)
		return raise_status(st);
	char *buf = PyMem_Malloc(len + 1);
	if (!buf)
		return PyErr_NoMemory();
	st = air_model_dot(self->m, which, buf, len + 1, &len);
	PyObject *r = st == AIR_OK ? PyUnicode_FromStringAndSize(buf, (Py_ssize_t)len) : raise_status(st);
	PyMem_Free(buf);
	return r;
}

/* The plan of the last run's sizes, else the model's (compile time, or the
 * first run's); "known" is False when the sizes are symbolic and nothing ran. */
static PyObject *Model_memory(ModelObject *self, PyObject *unused)
{
	air_memory_info i = {.size = sizeof i};
	if (!self->cached || air_session_memory_info(self->cached, &i) != AIR_OK) {
		i.size = sizeof i;
		air_status st = air_model_memory_info(self->m, &i);
		if (st != AIR_OK)
			return raise_status(st);
	}
	return Py_BuildValue("{s:O,s:i,s:i,s:n,s:n,s:n,s:n,s:n}", "known", i.known ? Py_True : Py_False, "buffers",
			     i.buffers, "inplace", i.inplace, "arena_bytes", (Py_ssize_t)i.arena_bytes,
			     "workspace_bytes", (Py_ssize_t)i.workspace_bytes, "no_reuse_bytes",
			     (Py_ssize_t)i.no_reuse_bytes, "weight_bytes", (Py_ssize_t)i.weight_bytes,
			     "borrowed_bytes", (Py_ssize_t)i.borrowed_bytes);
}

static PyMethodDef Model_methods[] = {
	{"run", (PyCFunction)Model_run, METH_VARARGS, "run(tensors) -> list of tensors: the whole graph, one call"},
	{"report", (PyCFunction)Model_report, METH_NOARGS, "the compile report"},
	{"arena_bytes", (PyCFunction)Model_arena_bytes, METH_NOARGS, "arena bytes of the last run's session"},
	{"profile", (PyCFunction)Model_profile, METH_NOARGS,
	 "per-step times of the cached session: [(kernel, op, runs, seconds)]"},
	{"profile_reset", (PyCFunction)Model_profile_reset, METH_NOARGS, "zero the cached session's per-step times"},
	{"output_info", (PyCFunction)Model_output_info, METH_VARARGS, "output_info(i) -> (dtype, dims)"},
	{"dot", (PyCFunction)(void (*)(void))Model_dot, METH_VARARGS | METH_KEYWORDS,
	 "dot(before=False) -> str: Graphviz DOT of the graph before or after the passes"},
	{"memory", (PyCFunction)Model_memory, METH_NOARGS,
	 "memory() -> dict: the memory plan (last run's sizes, else the model's) and weight bytes"},
	{NULL, NULL, 0, NULL},
};

static PyTypeObject ModelType = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "torchair._C.Model",
	.tp_basicsize = sizeof(ModelObject),
	.tp_dealloc = (destructor)Model_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "A compiled model (air_model); run() executes the whole graph in one C call.",
	.tp_methods = Model_methods,
};

static PyObject **dtype_array(PyObject *seq, int n, const char *what)
{
	PyObject *fast = PySequence_Fast(seq, "expected a sequence of dtypes");
	if (!fast)
		return NULL;
	if (PySequence_Fast_GET_SIZE(fast) != n) {
		PyErr_Format(PyExc_ValueError, "%s: %d dtypes expected, got %zd", what, n,
			     PySequence_Fast_GET_SIZE(fast));
		Py_DECREF(fast);
		return NULL;
	}
	PyObject **arr = PyMem_Calloc((size_t)n + 1, sizeof *arr);
	if (!arr) {
		Py_DECREF(fast);
		PyErr_NoMemory();
		return NULL;
	}
	for (int i = 0; i < n; i++) {
		arr[i] = PySequence_Fast_GET_ITEM(fast, i);
		Py_INCREF(arr[i]);
	}
	Py_DECREF(fast);
	return arr;
}

static PyObject *Graph_compile(GraphObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"in_dtypes", "out_dtypes", "empty", "flags", "num_threads", "fusion_threshold",
				 "disabled_passes", NULL};
	PyObject *in_dt, *out_dt, *empty;
	unsigned int flags = 0, disabled = 0;
	int nthreads = 0, fthresh = 0;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO|IiiI", kwlist, &in_dt, &out_dt, &empty, &flags, &nthreads,
					 &fthresh, &disabled))
		return NULL;
	air_compile_options o;
	air_compile_options_init(&o);
	o.flags = flags;
	o.num_threads = nthreads;
	o.fusion_threshold = fthresh;
	o.disabled_passes = disabled;
	air_model *m = NULL;
	air_status st;
	Py_BEGIN_ALLOW_THREADS st = air_compile(self->g, &o, &m);
	Py_END_ALLOW_THREADS if (st != AIR_OK) return raise_status(st);
	ModelObject *mo = PyObject_New(ModelObject, &ModelType);
	if (!mo) {
		air_model_destroy(m);
		return NULL;
	}
	mo->m = m;
	mo->cached = NULL;
	mo->n_in = air_model_input_count(m);
	mo->n_out = air_model_output_count(m);
	mo->in_dtypes = NULL;
	mo->out_dtypes = NULL;
	mo->last_arena = 0;
	mo->owners = PyList_GetSlice(self->owners, 0, PyList_GET_SIZE(self->owners));
	Py_INCREF(empty);
	mo->empty = empty;
	if (!mo->owners || !(mo->in_dtypes = dtype_array(in_dt, mo->n_in, "in_dtypes")) ||
	    !(mo->out_dtypes = dtype_array(out_dt, mo->n_out, "out_dtypes"))) {
		Py_DECREF(mo);
		return NULL;
	}
	return (PyObject *)mo;
}

/* ---- module ----------------------------------------------------------- */

static PyObject *mod_set_num_threads(PyObject *m, PyObject *args)
{
	int n;
	if (!PyArg_ParseTuple(args, "i", &n))
		return NULL;
	air_status st = air_set_num_threads(n);
	if (st != AIR_OK)
		return raise_status(st);
	Py_RETURN_NONE;
}

static PyObject *mod_get_num_threads(PyObject *m, PyObject *unused)
{
	return PyLong_FromLong(air_get_num_threads());
}

static PyObject *mod_op_names(PyObject *m, PyObject *unused)
{
	int n = air_op_count();
	PyObject *l = PyList_New(n);
	for (int i = 0; l && i < n; i++)
		PyList_SET_ITEM(l, i, PyUnicode_FromString(air_op_name(i)));
	return l;
}

static PyObject *mod_isa(PyObject *m, PyObject *unused)
{
	return PyUnicode_FromString(kcpu_isa_name());
}

static PyObject *mod_version(PyObject *m, PyObject *unused)
{
	return PyLong_FromLong(air_version());
}

static PyObject *mod_use_openmp(PyObject *m, PyObject *args)
{
	const char *path = NULL;
	if (!PyArg_ParseTuple(args, "z", &path))
		return NULL;
	return PyBool_FromLong(host_threads_use_openmp(path));
}

static PyObject *mod_openmp_loops(PyObject *m, PyObject *unused)
{
	return PyLong_FromUnsignedLongLong(host_threads_openmp_loops());
}

static PyObject *mod_output_block(PyObject *m, PyObject *args)
{
	Py_ssize_t bytes;
	if (!PyArg_ParseTuple(args, "n", &bytes))
		return NULL;
	if (bytes < 0)
		return raise_msg(AIR_INVALID_ARGUMENT, "output_block: %zd bytes", bytes);
	return output_pool_block((size_t)bytes);
}

static PyObject *mod_output_pool_stats(PyObject *m, PyObject *unused)
{
	return output_pool_stats();
}

static PyObject *mod_amx_passes(PyObject *m, PyObject *unused)
{
	return PyLong_FromUnsignedLongLong(kamx_passes());
}

static PyMethodDef module_methods[] = {
	{"output_block", mod_output_block, METH_VARARGS,
	 "output_block(nbytes) -> a writable buffer for a model output, from the pool of kept pages"},
	{"output_pool_stats", mod_output_pool_stats, METH_NOARGS,
	 "(free blocks held, bytes held, blocks reused, blocks newly mapped)"},
	{"use_openmp", mod_use_openmp, METH_VARARGS,
	 "use_openmp(path or None) -> bool: run parallel loops on the OpenMP runtime loaded from path"},
	{"openmp_loops", mod_openmp_loops, METH_NOARGS, "parallel loops run through OpenMP so far"},
	{"amx_passes", mod_amx_passes, METH_NOARGS, "row blocks of GEMMs run on AMX tiles so far (docs/design.md)"},
	{"set_num_threads", mod_set_num_threads, METH_VARARGS, "threads of the default pool"},
	{"get_num_threads", mod_get_num_threads, METH_NOARGS, "threads of the default pool"},
	{"op_names", mod_op_names, METH_NOARGS, "the op table's names"},
	{"isa", mod_isa, METH_NOARGS, "the ISA kernels are chosen for: amx (AVX-512 and AMX), avx512, avx2 or scalar"},
	{"version", mod_version, METH_NOARGS, "libair version as MAJOR*10000+MINOR*100+PATCH"},
	{NULL, NULL, 0, NULL},
};

/* designated fields: the positional form left m_slots .. m_free implicit,
 * which -Wmissing-field-initializers (-Wextra) rejects under AIR_WERROR */
static struct PyModuleDef moduledef = {
	PyModuleDef_HEAD_INIT,
	.m_name = "torchair._C",
	.m_doc = "libair bindings",
	.m_size = -1,
	.m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__C(void)
{
	PyObject *m = PyModule_Create(&moduledef);
	if (!m)
		return NULL;
	if (PyType_Ready(&GraphType) < 0 || PyType_Ready(&ModelType) < 0 || output_pool_init() < 0)
		return NULL;
	Error = PyErr_NewExceptionWithDoc("torchair.TorchairError",
					  "A libair error: args are (status code, status name, message).",
					  PyExc_RuntimeError, NULL);
	str_data_ptr = PyUnicode_InternFromString("data_ptr");
	str_shape = PyUnicode_InternFromString("shape");
	str_dtype = PyUnicode_InternFromString("dtype");
	str_is_contiguous = PyUnicode_InternFromString("is_contiguous");
	str_contiguous = PyUnicode_InternFromString("contiguous");
	str_is_cpu = PyUnicode_InternFromString("is_cpu");
	str_device = PyUnicode_InternFromString("device");
	Py_INCREF(&GraphType);
	Py_INCREF(&ModelType);
	PyModule_AddObject(m, "Graph", (PyObject *)&GraphType);
	PyModule_AddObject(m, "Model", (PyObject *)&ModelType);
	PyModule_AddObject(m, "Error", Error);
	static const char *dtypes[AIR_DTYPE_COUNT] = {"F32", "F64", "F16", "BF16", "I64",
						      "I32", "I16", "I8",  "U8",   "BOOL"};
	for (int i = 0; i < AIR_DTYPE_COUNT; i++)
		PyModule_AddIntConstant(m, dtypes[i], i);
	PyModule_AddIntConstant(m, "COMPILE_NO_FUSION", AIR_COMPILE_NO_FUSION);
	/* the passes, by name: PASSES["fold_batchnorm"] is its AIR_PASS_* bit */
	PyObject *passes = PyDict_New();
	for (uint32_t bit = 1; passes && bit; bit <<= 1) {
		const char *name = air_pass_name(bit);
		PyObject *v = name ? PyLong_FromUnsignedLong(bit) : NULL;
		if (v)
			PyDict_SetItemString(passes, name, v);
		Py_XDECREF(v);
	}
	if (passes)
		PyModule_AddObject(m, "PASSES", passes);
	PyModule_AddIntConstant(m, "COMPILE_NO_MEMORY_REUSE", AIR_COMPILE_NO_MEMORY_REUSE);
	PyModule_AddIntConstant(m, "COMPILE_REFERENCE_KERNELS", AIR_COMPILE_REFERENCE_KERNELS);
	PyModule_AddIntConstant(m, "COMPILE_OP_BY_OP", AIR_COMPILE_OP_BY_OP);
	return m;
}

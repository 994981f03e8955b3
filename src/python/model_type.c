/* model_type.c - torchair._C.Model: a compiled air_model with a cached
 * session; run() binds torch tensors as inputs and outputs and executes the
 * whole graph in one C call, the rest reports on it (report, profile,
 * memory, dot). */
#include "pyair.h"

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

/* Tracing (torchair.trace): the cached session records each step of each
 * run with its thread; trace() reads the events back. */
static PyObject *Model_trace_enable(ModelObject *self, PyObject *args)
{
	int capacity;
	if (!PyArg_ParseTuple(args, "i", &capacity))
		return NULL;
	if (!self->cached)
		return raise_msg(AIR_INVALID_STATE, "trace_enable: the model has not run yet");
	air_status st = air_session_trace_enable(self->cached, capacity);
	if (st != AIR_OK)
		return raise_status(st);
	Py_RETURN_NONE;
}

/* [(step, start_ns, dur_ns, thread id)] of the cached session, and how many
 * events did not fit. */
static PyObject *Model_trace(ModelObject *self, PyObject *unused)
{
	air_session *s = self->cached;
	int n = air_session_trace_count(s);
	PyObject *list = PyList_New(n);
	if (!list)
		return NULL;
	for (int i = 0; i < n; i++) {
		int step;
		uint64_t t0, dt, tid;
		air_session_trace_event(s, i, &step, &t0, &dt, &tid);
		PyObject *row = Py_BuildValue("(iKKK)", step, (unsigned long long)t0, (unsigned long long)dt,
					      (unsigned long long)tid);
		if (!row) {
			Py_DECREF(list);
			return NULL;
		}
		PyList_SET_ITEM(list, i, row);
	}
	return Py_BuildValue("(NK)", list, (unsigned long long)air_session_trace_dropped(s));
}

/* step_tensors(step) -> [(is_output, dtype name, dims)] as the last run had them. */
static PyObject *Model_step_tensors(ModelObject *self, PyObject *args)
{
	int step;
	if (!PyArg_ParseTuple(args, "i", &step))
		return NULL;
	PyObject *list = PyList_New(0);
	if (!list || !self->cached)
		return list;
	for (int j = 0;; j++) {
		int is_out, rank;
		air_dtype dt;
		int64_t dims[AIR_MAX_RANK];
		if (air_session_step_tensor(self->cached, step, j, &is_out, &dt, &rank, dims) != AIR_OK)
			break;
		PyObject *shape = PyTuple_New(rank);
		for (int d = 0; shape && d < rank; d++)
			PyTuple_SET_ITEM(shape, d, PyLong_FromLongLong(dims[d]));
		PyObject *row = shape ? Py_BuildValue("(OsN)", is_out ? Py_True : Py_False, air_dtype_name(dt), shape) : NULL;
		if (!row || PyList_Append(list, row) < 0) {
			Py_XDECREF(row);
			Py_DECREF(list);
			return NULL;
		}
		Py_DECREF(row);
	}
	return list;
}

/* compile_phases() -> [(name, start_ns, dur_ns)]: the passes, kernel selection, memory plan. */
static PyObject *Model_compile_phases(ModelObject *self, PyObject *unused)
{
	int n = air_model_compile_phases(self->m);
	PyObject *list = PyList_New(n);
	for (int i = 0; list && i < n; i++) {
		const char *name;
		uint64_t t0, dt;
		air_model_compile_phase(self->m, i, &name, &t0, &dt);
		PyObject *row = Py_BuildValue("(sKK)", name, (unsigned long long)t0, (unsigned long long)dt);
		if (!row) {
			Py_DECREF(list);
			return NULL;
		}
		PyList_SET_ITEM(list, i, row);
	}
	return list;
}

static PyMethodDef Model_methods[] = {
	{"run", (PyCFunction)Model_run, METH_VARARGS, "run(tensors) -> list of tensors: the whole graph, one call"},
	{"report", (PyCFunction)Model_report, METH_NOARGS, "the compile report"},
	{"arena_bytes", (PyCFunction)Model_arena_bytes, METH_NOARGS, "arena bytes of the last run's session"},
	{"profile", (PyCFunction)Model_profile, METH_NOARGS,
	 "per-step times of the cached session: [(kernel, op, runs, seconds)]"},
	{"profile_reset", (PyCFunction)Model_profile_reset, METH_NOARGS, "zero the cached session's per-step times"},
	{"trace_enable", (PyCFunction)Model_trace_enable, METH_VARARGS,
	 "trace_enable(capacity): the cached session records each step of each run (0: off)"},
	{"trace", (PyCFunction)Model_trace, METH_NOARGS, "([(step, start_ns, dur_ns, thread)], dropped)"},
	{"step_tensors", (PyCFunction)Model_step_tensors, METH_VARARGS,
	 "step_tensors(step) -> [(is_output, dtype, dims)] of the last run"},
	{"compile_phases", (PyCFunction)Model_compile_phases, METH_NOARGS, "[(name, start_ns, dur_ns)]"},
	{"output_info", (PyCFunction)Model_output_info, METH_VARARGS, "output_info(i) -> (dtype, dims)"},
	{"dot", (PyCFunction)(void (*)(void))Model_dot, METH_VARARGS | METH_KEYWORDS,
	 "dot(before=False) -> str: Graphviz DOT of the graph before or after the passes"},
	{"memory", (PyCFunction)Model_memory, METH_NOARGS,
	 "memory() -> dict: the memory plan (last run's sizes, else the model's) and weight bytes"},
	{NULL, NULL, 0, NULL},
};

PyTypeObject ModelType = {
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

/* See pyair.h. Graph.compile() is its caller. */
PyObject *model_new(air_model *m, PyObject *graph_owners, PyObject *in_dt, PyObject *out_dt, PyObject *empty)
{
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
	mo->owners = PyList_GetSlice(graph_owners, 0, PyList_GET_SIZE(graph_owners));
	Py_INCREF(empty);
	mo->empty = empty;
	if (!mo->owners || !(mo->in_dtypes = dtype_array(in_dt, mo->n_in, "in_dtypes")) ||
	    !(mo->out_dtypes = dtype_array(out_dt, mo->n_out, "out_dtypes"))) {
		Py_DECREF(mo);
		return NULL;
	}
	return (PyObject *)mo;
}

void model_intern_names(void)
{
	str_data_ptr = PyUnicode_InternFromString("data_ptr");
	str_shape = PyUnicode_InternFromString("shape");
	str_dtype = PyUnicode_InternFromString("dtype");
	str_is_contiguous = PyUnicode_InternFromString("is_contiguous");
	str_contiguous = PyUnicode_InternFromString("contiguous");
	str_is_cpu = PyUnicode_InternFromString("is_cpu");
	str_device = PyUnicode_InternFromString("device");
}

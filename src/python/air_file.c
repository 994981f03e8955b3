/* air_file.c - .air files from Python (docs/air-format.md):
 *
 *   Graph.save(path=None, meta=None, externals=None, output_names=None,
 *              flags=0, num_threads=0, fusion_threshold=0, disabled_passes=0)
 *       -> the file's bytes, or None after writing path atomically.
 *       externals: {name: constant value id}: saved without bytes.
 *   open_file(source, externals=None, check_weights=True) -> File
 *       source: a path (mapped; weights used in place by its models) or a
 *       bytes-like object (copied). externals: {name: (data_ptr, nbytes,
 *       owner)}: memory for external constants, used in place; owner is
 *       kept alive by every model made from the file.
 *   File: .version, .meta (dict), .input_names, .output_names, .ops,
 *       .weight_bytes, .externals [(name, dtype, dims)], .compile_options
 *       (dict), .graph() -> Graph (constants copied),
 *       .compile(in_dtypes, out_dtypes, empty, flags=None, num_threads=None,
 *                fusion_threshold=None, disabled_passes=None) -> Model
 *       (None: the file's saved option).
 *   load(source, in_dtypes, out_dtypes, empty, externals=None, ...)
 *       -> (Model, meta, input_names, output_names)
 *   load_graph(source, externals=None) -> (Graph, meta)
 */
#include "pyair.h"

#include <stdlib.h>
#include <string.h>

/* ---- Graph.save ---------------------------------------------------------- */

/* Borrowed UTF-8 of str objects held by the caller's dicts: valid while
 * those are alive, which is the whole call. */
static int str_items(PyObject *dict, const char ***keys, const char ***vals, air_value **ids, int *n,
		     const char *what)
{
	*n = 0;
	if (!dict || dict == Py_None)
		return 0;
	if (!PyDict_Check(dict)) {
		PyErr_Format(PyExc_TypeError, "%s must be a dict", what);
		return -1;
	}
	Py_ssize_t size = PyDict_Size(dict);
	*keys = PyMem_Calloc((size_t)size + 1, sizeof **keys);
	if (vals)
		*vals = PyMem_Calloc((size_t)size + 1, sizeof **vals);
	if (ids)
		*ids = PyMem_Calloc((size_t)size + 1, sizeof **ids);
	if (!*keys || (vals && !*vals) || (ids && !*ids)) {
		PyErr_NoMemory();
		return -1;
	}
	Py_ssize_t pos = 0;
	PyObject *k, *v;
	while (PyDict_Next(dict, &pos, &k, &v)) {
		if (!((*keys)[*n] = PyUnicode_AsUTF8(k)))
			return -1;
		if (vals && !((*vals)[*n] = PyUnicode_AsUTF8(v)))
			return -1;
		if (ids) {
			unsigned long id = PyLong_AsUnsignedLong(v);
			if (PyErr_Occurred())
				return -1;
			(*ids)[*n] = (air_value)id;
		}
		(*n)++;
	}
	return 0;
}

PyObject *graph_save(PyObject *self_obj, PyObject *args, PyObject *kw)
{
	GraphObject *self = (GraphObject *)self_obj;
	static char *kwlist[] = {"path", "meta", "externals", "output_names", "flags", "num_threads",
				 "fusion_threshold", "disabled_passes", NULL};
	PyObject *path = Py_None, *meta = Py_None, *ext = Py_None, *onames = Py_None;
	unsigned int flags = 0, disabled = 0;
	int nthreads = 0, fthresh = 0;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "|OOOOIiiI", kwlist, &path, &meta, &ext, &onames, &flags,
					 &nthreads, &fthresh, &disabled))
		return NULL;
	const char **mk = NULL, **mv = NULL, **ek = NULL, **on = NULL;
	air_value *ev = NULL;
	PyObject *fspath = NULL, *result = NULL, *onames_fast = NULL;
	air_compile_options co;
	air_compile_options_init(&co);
	co.flags = flags;
	co.num_threads = nthreads;
	co.fusion_threshold = fthresh;
	co.disabled_passes = disabled;
	air_save_options so;
	air_save_options_init(&so);
	so.compile = &co;
	if (str_items(meta, &mk, &mv, NULL, &so.n_meta, "meta") < 0 ||
	    str_items(ext, &ek, NULL, &ev, &so.n_externals, "externals") < 0)
		goto done;
	so.meta_keys = mk;
	so.meta_values = mv;
	so.external_names = ek;
	so.externals = ev;
	if (onames != Py_None) {
		if (!(onames_fast = PySequence_Fast(onames, "output_names must be a sequence")))
			goto done;
		Py_ssize_t n = PySequence_Fast_GET_SIZE(onames_fast);
		if (!(on = PyMem_Calloc((size_t)n + 1, sizeof *on))) {
			PyErr_NoMemory();
			goto done;
		}
		for (Py_ssize_t i = 0; i < n; i++) {
			PyObject *o = PySequence_Fast_GET_ITEM(onames_fast, i);
			if (o != Py_None && !(on[i] = PyUnicode_AsUTF8(o)))
				goto done;
		}
		so.output_names = on;
		so.n_output_names = (int)n;
	}
	air_status st;
	if (path != Py_None) {
		if (!PyUnicode_FSConverter(path, &fspath))
			goto done;
		const char *p = PyBytes_AS_STRING(fspath);
		Py_BEGIN_ALLOW_THREADS st = air_graph_save_file(self->g, &so, p);
		Py_END_ALLOW_THREADS if (st != AIR_OK) raise_status(st);
		else result = Py_NewRef(Py_None);
	} else {
		void *buf;
		size_t size;
		Py_BEGIN_ALLOW_THREADS st = air_graph_save_buffer(self->g, &so, &buf, &size);
		Py_END_ALLOW_THREADS if (st != AIR_OK) raise_status(st);
		else {
			result = PyBytes_FromStringAndSize(buf, (Py_ssize_t)size);
			air_free(buf);
		}
	}
done:
	PyMem_Free(mk);
	PyMem_Free(mv);
	PyMem_Free(ek);
	PyMem_Free(ev);
	PyMem_Free(on);
	Py_XDECREF(onames_fast);
	Py_XDECREF(fspath);
	return result;
}

/* ---- File ---------------------------------------------------------------- */

typedef struct {
	PyObject_HEAD air_file *f;
	PyObject *owners; /* list: the externals' owners */
} FileObject;

static void File_dealloc(FileObject *self)
{
	air_file_close(self->f);
	Py_XDECREF(self->owners);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Opens source with externals {name: (ptr, nbytes, owner)}. */
static PyObject *file_open(PyObject *source, PyObject *ext, int check_weights)
{
	FileObject *fo = PyObject_New(FileObject, &FileType);
	if (!fo)
		return NULL;
	fo->f = NULL;
	fo->owners = PyList_New(0);
	air_external *xs = NULL;
	PyObject *fspath = NULL, *result = NULL;
	Py_buffer view = {0};
	int n = 0;
	if (!fo->owners)
		goto done;
	if (ext && ext != Py_None) {
		if (!PyDict_Check(ext)) {
			PyErr_SetString(PyExc_TypeError, "externals must be a dict name -> (data_ptr, nbytes, owner)");
			goto done;
		}
		if (!(xs = PyMem_Calloc((size_t)PyDict_Size(ext) + 1, sizeof *xs))) {
			PyErr_NoMemory();
			goto done;
		}
		Py_ssize_t pos = 0;
		PyObject *k, *v, *owner;
		unsigned long long ptr;
		Py_ssize_t nbytes;
		while (PyDict_Next(ext, &pos, &k, &v)) {
			if (!PyArg_ParseTuple(v, "KnO;externals: (data_ptr, nbytes, owner)", &ptr, &nbytes, &owner) ||
			    !(xs[n].name = PyUnicode_AsUTF8(k)) || PyList_Append(fo->owners, owner) < 0)
				goto done;
			if (nbytes < 0) {
				PyErr_SetString(PyExc_ValueError, "externals: negative nbytes");
				goto done;
			}
			xs[n].data = (const void *)(uintptr_t)ptr;
			xs[n].nbytes = (size_t)nbytes;
			n++;
		}
	}
	air_load_options lo;
	air_load_options_init(&lo);
	lo.externals = xs;
	lo.n_externals = n;
	lo.flags = check_weights ? 0 : AIR_LOAD_NO_WEIGHT_CHECKSUM;
	air_status st;
	if (PyObject_CheckBuffer(source)) {
		if (PyObject_GetBuffer(source, &view, PyBUF_SIMPLE) < 0)
			goto done;
		Py_BEGIN_ALLOW_THREADS st = air_file_open_buffer(view.buf, (size_t)view.len, &lo, &fo->f);
		Py_END_ALLOW_THREADS
	} else {
		if (!PyUnicode_FSConverter(source, &fspath))
			goto done;
		const char *p = PyBytes_AS_STRING(fspath);
		Py_BEGIN_ALLOW_THREADS st = air_file_open(p, &lo, &fo->f);
		Py_END_ALLOW_THREADS
	}
	if (st != AIR_OK) {
		raise_status(st);
		goto done;
	}
	result = (PyObject *)fo;
	fo = NULL;
done:
	if (view.obj)
		PyBuffer_Release(&view);
	PyMem_Free(xs);
	Py_XDECREF(fspath);
	Py_XDECREF(fo);
	return result;
}

static PyObject *names_list(const air_file *f, int n, const char *(*get)(const air_file *, int))
{
	PyObject *l = PyList_New(n);
	for (int i = 0; l && i < n; i++) {
		const char *s = get(f, i);
		PyObject *o = s ? PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "replace") : Py_NewRef(Py_None);
		if (!o) {
			Py_DECREF(l);
			return NULL;
		}
		PyList_SET_ITEM(l, i, o);
	}
	return l;
}

static PyObject *meta_dict(const air_file *f)
{
	PyObject *d = PyDict_New();
	for (int i = 0; d && i < air_file_meta_count(f); i++) {
		const char *k, *v;
		air_file_meta_at(f, i, &k, &v);
		PyObject *ko = PyUnicode_DecodeUTF8(k, (Py_ssize_t)strlen(k), "replace");
		PyObject *vo = PyUnicode_DecodeUTF8(v, (Py_ssize_t)strlen(v), "replace");
		if (!ko || !vo || PyDict_SetItem(d, ko, vo) < 0) {
			Py_XDECREF(ko);
			Py_XDECREF(vo);
			Py_DECREF(d);
			return NULL;
		}
		Py_DECREF(ko);
		Py_DECREF(vo);
	}
	return d;
}

static PyObject *File_get(FileObject *self, void *which)
{
	const air_file *f = self->f;
	switch ((int)(intptr_t)which) {
	case 0: return PyLong_FromLong(air_file_version(f));
	case 1: return meta_dict(f);
	case 2: return names_list(f, air_file_input_count(f), air_file_input_name);
	case 3: return names_list(f, air_file_output_count(f), air_file_output_name);
	case 4: return names_list(f, air_file_node_count(f), air_file_node_op);
	case 5: return PyLong_FromSize_t(air_file_weight_bytes(f));
	case 6: {
		int n = air_file_external_count(f);
		PyObject *l = PyList_New(n);
		for (int i = 0; l && i < n; i++) {
			const char *name;
			air_dtype dt;
			int rank;
			int64_t dims[AIR_MAX_RANK];
			air_file_external_info(f, i, &name, &dt, &rank, dims);
			PyObject *d = PyTuple_New(rank);
			for (int k = 0; d && k < rank; k++)
				PyTuple_SET_ITEM(d, k, PyLong_FromLongLong(dims[k]));
			PyObject *t = d ? Py_BuildValue("(siN)", name, (int)dt, d) : NULL;
			if (!t) {
				Py_DECREF(l);
				return NULL;
			}
			PyList_SET_ITEM(l, i, t);
		}
		return l;
	}
	default: {
		air_compile_options o;
		air_file_compile_options(f, &o);
		return Py_BuildValue("{sIsisisI}", "flags", o.flags, "num_threads", o.num_threads, "fusion_threshold",
				     o.fusion_threshold, "disabled_passes", o.disabled_passes);
	}
	}
}

static PyObject *file_graph(FileObject *self)
{
	air_graph *g;
	air_status st;
	Py_BEGIN_ALLOW_THREADS st = air_file_graph(self->f, &g);
	Py_END_ALLOW_THREADS if (st != AIR_OK) return raise_status(st);
	GraphObject *go = (GraphObject *)GraphType.tp_alloc(&GraphType, 0);
	if (!go) {
		air_graph_destroy(g);
		return NULL;
	}
	go->g = g;
	/* externals are used in place: their owners go with the graph */
	go->owners = PyList_GetSlice(self->owners, 0, PyList_GET_SIZE(self->owners));
	if (!go->owners) {
		Py_DECREF(go);
		return NULL;
	}
	return (PyObject *)go;
}

static PyObject *File_graph(FileObject *self, PyObject *unused)
{
	return file_graph(self);
}

static PyObject *file_compile(FileObject *self, PyObject *in_dt, PyObject *out_dt, PyObject *empty, PyObject *flags,
			      PyObject *nthreads, PyObject *fthresh, PyObject *disabled)
{
	air_compile_options o;
	air_file_compile_options(self->f, &o);
	PyObject *given[4] = {flags, nthreads, fthresh, disabled};
	long long vals[4];
	for (int i = 0; i < 4; i++) {
		if (!given[i] || given[i] == Py_None)
			continue;
		vals[i] = PyLong_AsLongLong(given[i]);
		if (PyErr_Occurred())
			return NULL;
		switch (i) {
		case 0: o.flags = (uint32_t)vals[i]; break;
		case 1: o.num_threads = (int)vals[i]; break;
		case 2: o.fusion_threshold = (int)vals[i]; break;
		default: o.disabled_passes = (uint32_t)vals[i];
		}
	}
	air_model *m;
	air_status st;
	Py_BEGIN_ALLOW_THREADS st = air_file_compile(self->f, &o, &m);
	Py_END_ALLOW_THREADS if (st != AIR_OK) return raise_status(st);
	return model_new(m, self->owners, in_dt, out_dt, empty);
}

static PyObject *File_compile(FileObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"in_dtypes", "out_dtypes", "empty", "flags", "num_threads", "fusion_threshold",
				 "disabled_passes", NULL};
	PyObject *in_dt, *out_dt, *empty, *fl = NULL, *nt = NULL, *ft = NULL, *dp = NULL;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO|OOOO", kwlist, &in_dt, &out_dt, &empty, &fl, &nt, &ft, &dp))
		return NULL;
	return file_compile(self, in_dt, out_dt, empty, fl, nt, ft, dp);
}

static PyGetSetDef File_getset[] = {
	{"version", (getter)File_get, NULL, "format version of the file", (void *)0},
	{"meta", (getter)File_get, NULL, "metadata: dict str -> str", (void *)1},
	{"input_names", (getter)File_get, NULL, "input names (None where unnamed)", (void *)2},
	{"output_names", (getter)File_get, NULL, "output names (None where unnamed)", (void *)3},
	{"ops", (getter)File_get, NULL, "op name of every node of the saved graph", (void *)4},
	{"weight_bytes", (getter)File_get, NULL, "bytes of constants stored in the file", (void *)5},
	{"externals", (getter)File_get, NULL, "external constants: [(name, dtype, dims)]", (void *)6},
	{"compile_options", (getter)File_get, NULL, "the saved compile options (dict)", (void *)7},
	{NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef File_methods[] = {
	{"graph", (PyCFunction)File_graph, METH_NOARGS, "graph() -> Graph (constants copied, externals in place)"},
	{"compile", (PyCFunction)(void (*)(void))File_compile, METH_VARARGS | METH_KEYWORDS,
	 "compile(in_dtypes, out_dtypes, empty, flags=None, num_threads=None, fusion_threshold=None, "
	 "disabled_passes=None) -> Model; None: the file's saved option"},
	{NULL, NULL, 0, NULL},
};

PyTypeObject FileType = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "torchair._C.File",
	.tp_basicsize = sizeof(FileObject),
	.tp_dealloc = (destructor)File_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "An opened, checked .air file (air_file); see open_file.",
	.tp_methods = File_methods,
	.tp_getset = File_getset,
};

/* ---- module functions ---------------------------------------------------- */

static PyObject *mod_open_file(PyObject *m, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"source", "externals", "check_weights", NULL};
	PyObject *source, *ext = Py_None;
	int check = 1;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|Op", kwlist, &source, &ext, &check))
		return NULL;
	return file_open(source, ext, check);
}

static PyObject *mod_load(PyObject *m, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"source", "in_dtypes", "out_dtypes", "empty", "externals", "flags", "num_threads",
				 "fusion_threshold", "disabled_passes", NULL};
	PyObject *source, *in_dt, *out_dt, *empty, *ext = Py_None, *fl = NULL, *nt = NULL, *ft = NULL, *dp = NULL;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOO|OOOOO", kwlist, &source, &in_dt, &out_dt, &empty, &ext, &fl,
					 &nt, &ft, &dp))
		return NULL;
	FileObject *fo = (FileObject *)file_open(source, ext, 1);
	if (!fo)
		return NULL;
	PyObject *model = file_compile(fo, in_dt, out_dt, empty, fl, nt, ft, dp);
	PyObject *r = model ? Py_BuildValue("(NNNN)", model, meta_dict(fo->f),
					   names_list(fo->f, air_file_input_count(fo->f), air_file_input_name),
					   names_list(fo->f, air_file_output_count(fo->f), air_file_output_name))
			    : NULL;
	Py_DECREF(fo);
	return r;
}

static PyObject *mod_load_graph(PyObject *m, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = {"source", "externals", NULL};
	PyObject *source, *ext = Py_None;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O", kwlist, &source, &ext))
		return NULL;
	FileObject *fo = (FileObject *)file_open(source, ext, 1);
	if (!fo)
		return NULL;
	PyObject *g = file_graph(fo);
	PyObject *r = g ? Py_BuildValue("(NN)", g, meta_dict(fo->f)) : NULL;
	Py_DECREF(fo);
	return r;
}

PyMethodDef air_file_methods[] = {
	{"open_file", (PyCFunction)(void (*)(void))mod_open_file, METH_VARARGS | METH_KEYWORDS,
	 "open_file(source, externals=None, check_weights=True) -> File. source: a path (mapped) or bytes "
	 "(copied); externals: {name: (data_ptr, nbytes, owner)}, used in place"},
	{"load", (PyCFunction)(void (*)(void))mod_load, METH_VARARGS | METH_KEYWORDS,
	 "load(source, in_dtypes, out_dtypes, empty, externals=None, flags=None, num_threads=None, "
	 "fusion_threshold=None, disabled_passes=None) -> (Model, meta, input_names, output_names)"},
	{"load_graph", (PyCFunction)(void (*)(void))mod_load_graph, METH_VARARGS | METH_KEYWORDS,
	 "load_graph(source, externals=None) -> (Graph, meta); constants copied, externals in place"},
	{NULL, NULL, 0, NULL},
};

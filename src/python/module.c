/* module.c - torchair._C: the CPython extension over libair, written in C and
 * not linked against libtorch. Tensors cross the boundary as data pointers
 * (zero copy): the Python layer hands in torch tensors, this module reads
 * their data_ptr/shape through ordinary attribute calls, and allocates
 * outputs through a torch.empty callable it was given.
 *
 * Types: Graph (builder over air_graph_*, graph_type.c), Model (a compiled
 * air_model with a cached session, model_type.c). Errors raise
 * torchair._C.Error(status, message) (pyair.c). This file: the module-level
 * functions and the module's init. */
#include "pyair.h"

#include "air/air.h"
#include "host_threads.h"
#include "kernels/common/cpu.h"
#include "kernels/gemm/amx.h"
#include "output_pool.h"

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

/* libair's messages go to one Python callable, handler(level, message), with
 * level 0 error .. 3 debug (torchair.log routes them to logging). */
static PyObject *log_handler;

static void log_to_python(air_log_level level, const char *message, void *user)
{
	(void)user;
	PyGILState_STATE g = PyGILState_Ensure();
	if (log_handler) {
		PyObject *r = PyObject_CallFunction(log_handler, "is", (int)level, message);
		if (!r)
			PyErr_WriteUnraisable(log_handler);
		Py_XDECREF(r);
	}
	PyGILState_Release(g);
}

static PyObject *mod_set_log_handler(PyObject *self, PyObject *args)
{
	PyObject *fn;
	if (!PyArg_ParseTuple(args, "O", &fn))
		return NULL;
	if (fn != Py_None && !PyCallable_Check(fn)) {
		PyErr_SetString(PyExc_TypeError, "set_log_handler: expected a callable or None");
		return NULL;
	}
	air_set_log_callback(NULL, NULL);
	Py_XDECREF(log_handler);
	log_handler = NULL;
	if (fn != Py_None) {
		Py_INCREF(fn);
		log_handler = fn;
		air_set_log_callback(log_to_python, NULL);
	}
	Py_RETURN_NONE;
}

static PyObject *mod_set_log_level(PyObject *self, PyObject *args)
{
	int level;
	if (!PyArg_ParseTuple(args, "i", &level))
		return NULL;
	air_set_log_level((air_log_level)level);
	return PyLong_FromLong(air_get_log_level());
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
	{"set_log_handler", mod_set_log_handler, METH_VARARGS,
	 "set_log_handler(fn or None): fn(level, message) receives libair's messages (0 error .. 3 debug)"},
	{"set_log_level", mod_set_log_level, METH_VARARGS, "set_log_level(0..3) -> the level set"},
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
	if (PyType_Ready(&GraphType) < 0 || PyType_Ready(&ModelType) < 0 || PyType_Ready(&FileType) < 0 ||
	    output_pool_init() < 0 || PyModule_AddFunctions(m, air_file_methods) < 0)
		return NULL;
	Error = PyErr_NewExceptionWithDoc("torchair.TorchairError",
					  "A libair error: args are (status code, status name, message).",
					  PyExc_RuntimeError, NULL);
	model_intern_names();
	Py_INCREF(&GraphType);
	Py_INCREF(&ModelType);
	PyModule_AddObject(m, "Graph", (PyObject *)&GraphType);
	PyModule_AddObject(m, "Model", (PyObject *)&ModelType);
	Py_INCREF(&FileType);
	PyModule_AddObject(m, "File", (PyObject *)&FileType); /* .air files: air_file.c */
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
	PyModule_AddIntConstant(m, "COMPILE_AUTOTUNE", AIR_COMPILE_AUTOTUNE);
	PyModule_AddIntConstant(m, "COMPILE_WEIGHTS_IN_PLACE", AIR_COMPILE_WEIGHTS_IN_PLACE);
	return m;
}

/* air.h - the public C API of libair, torchair's graph compiler and runtime.
 *
 * This is the only header a C user includes. The lifecycle is staged:
 *
 *   air_graph_create      build a graph: inputs, constants, nodes, outputs
 *   air_compile           verify, optimize, choose kernels -> air_model
 *   air_session_create    per-call state (buffers, resolved shapes)
 *   air_session_set_input bind input data (zero copy) and concrete shapes
 *   air_session_output_shape / air_session_set_output
 *   air_session_run       run the whole graph in one call
 *   ..._destroy           every destroy accepts NULL and half-built objects
 *
 * Every function that can fail returns air_status. On failure it leaves its
 * out-parameters zeroed and sets a thread-local message, read with
 * air_last_error(). The library never aborts or exits on user input.
 *
 * Ownership: the caller owns what it creates and destroys it. A model owns a
 * copy of everything it needs from the graph, except constants added with
 * AIR_CONSTANT_BORROW, whose memory the caller keeps alive and unchanged for
 * the model's lifetime. A model is immutable after air_compile and may be used
 * from many threads at once, each thread with its own session.
 */
#ifndef AIR_AIR_H
#define AIR_AIR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Every declaration in this header is part of libair's ABI: exported from
 * libair.so although the library is built with -fvisibility=hidden. */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

#define AIR_VERSION_MAJOR 0
#define AIR_VERSION_MINOR 1
#define AIR_VERSION_PATCH 0

/* Largest tensor rank the IR represents. */
#define AIR_MAX_RANK 8

typedef enum air_status {
	AIR_OK = 0,
	AIR_INVALID_ARGUMENT = 1, /* a bad parameter (NULL, out of range, unknown name) */
	AIR_UNSUPPORTED = 2,      /* valid, but not implemented (op, dtype, attribute) */
	AIR_SHAPE_MISMATCH = 3,   /* shapes that cannot go together */
	AIR_DTYPE_MISMATCH = 4,   /* dtypes that cannot go together */
	AIR_OUT_OF_MEMORY = 5,
	AIR_INVALID_GRAPH = 6,    /* the verifier rejected the graph */
	AIR_INVALID_STATE = 7,    /* a call out of order (e.g. run before binding) */
	AIR_BAD_FILE = 8,         /* a damaged or unreadable .air file */
	AIR_INTERNAL = 9,         /* a bug in libair; please report it */
} air_status;

/* A short constant description of a status ("ok", "invalid argument", ...). */
const char *air_status_string(air_status status);

/* The calling thread's message for its most recent failure. Never NULL; valid
 * until the thread's next libair call. */
const char *air_last_error(void);

/* Version of the library actually linked, as MAJOR*10000+MINOR*100+PATCH. */
int air_version(void);

typedef enum air_dtype {
	AIR_F32 = 0,
	AIR_F64 = 1,
	AIR_F16 = 2,
	AIR_BF16 = 3,
	AIR_I64 = 4,
	AIR_I32 = 5,
	AIR_I16 = 6,
	AIR_I8 = 7,
	AIR_U8 = 8,
	AIR_BOOL = 9, /* one byte, 0 or 1 */
	AIR_DTYPE_COUNT
} air_dtype;

/* Bytes per element; 0 for an invalid dtype. */
size_t air_dtype_size(air_dtype dtype);
/* "f32", "i64", ...; "?" for an invalid dtype. */
const char *air_dtype_name(air_dtype dtype);

/* A dimension: a value >= 0 is a constant size. A negative value names a
 * symbolic expression held by the graph (created by air_graph_symbol and
 * air_graph_dim_expr). Symbols stand for input sizes that are known only
 * when a session binds its inputs. */
typedef int64_t air_dim;

typedef enum air_dim_op {
	AIR_DIM_ADD = 0,
	AIR_DIM_SUB,
	AIR_DIM_MUL,
	AIR_DIM_FLOORDIV,
	AIR_DIM_CEILDIV,
	AIR_DIM_MOD,
	AIR_DIM_MIN,
	AIR_DIM_MAX,
} air_dim_op;

/* A value in a graph (a tensor): an index into the graph's value list. */
typedef uint32_t air_value;

typedef struct air_graph air_graph;     /* a graph under construction */
typedef struct air_model air_model;     /* a compiled graph, immutable */
typedef struct air_session air_session; /* per-call state for one model */

/* ---- graph building ---------------------------------------------------- */

air_status air_graph_create(air_graph **out);
void air_graph_destroy(air_graph *graph);

/* A new symbol named name (for messages; need not be unique) as a dim. */
air_status air_graph_symbol(air_graph *graph, const char *name, air_dim *out);

/* The dim (a op b). Constant operands are folded; FLOORDIV, CEILDIV and MOD
 * by a constant zero are an error. */
air_status air_graph_dim_expr(air_graph *graph, air_dim_op op, air_dim a, air_dim b, air_dim *out);

/* Writes a readable form of dim ("s0*2+1") into buf (always terminated). */
air_status air_graph_dim_string(const air_graph *graph, air_dim dim, char *buf, size_t size);

/* A graph input. dims may hold symbolic dims; every symbol used anywhere in
 * the graph must appear as a bare dim of some input, which is how a session
 * learns its value. name may be NULL. */
air_status air_graph_add_input(air_graph *graph, const char *name, air_dtype dtype, int rank,
			       const air_dim *dims, air_value *out);

enum {
	/* The constant's data is used in place; the caller keeps it alive and
	 * unchanged while any model compiled from this graph exists. Without
	 * this flag the data is copied. */
	AIR_CONSTANT_BORROW = 1u << 0,
};

/* A constant tensor, dense and row-major (C-contiguous). */
air_status air_graph_add_constant(air_graph *graph, air_dtype dtype, int rank, const int64_t *dims,
				  const void *data, uint32_t flags, air_value *out);

typedef enum air_attr_type {
	AIR_ATTR_INT = 0,   /* i */
	AIR_ATTR_FLOAT = 1, /* f */
	AIR_ATTR_INTS = 2,  /* ints[0..n) ; for DIM-typed schema entries, air_dims */
} air_attr_type;

/* One named attribute of a node. Which names and types an op takes is its
 * schema (air_op_describe). */
typedef struct air_attr {
	const char *name;
	air_attr_type type;
	int64_t i;
	double f;
	const int64_t *ints;
	int n;
} air_attr;

/* Adds a node running op (by name, see air_op_count/air_op_name) on inputs.
 * Its output values are inferred (dtype and shape, symbolic where inputs
 * are) and written to outputs[0..*n_outputs), at most max_outputs.
 * An unknown op or attribute, a missing required attribute, or inputs the op
 * cannot take is an error that names the op and the problem. */
air_status air_graph_add_node(air_graph *graph, const char *op, const air_value *inputs, int n_inputs,
			      const air_attr *attrs, int n_attrs, air_value *outputs, int max_outputs,
			      int *n_outputs);

/* Marks the graph's outputs, in order. A value may appear more than once. */
air_status air_graph_set_outputs(air_graph *graph, const air_value *values, int n);

/* The dtype, rank and dims of a value. dims must hold AIR_MAX_RANK entries. */
air_status air_graph_value_info(const air_graph *graph, air_value value, air_dtype *dtype, int *rank,
				air_dim *dims);

/* Checks the whole graph: every value defined before use, every node's
 * attributes and shapes as its op requires, outputs set. */
air_status air_graph_verify(const air_graph *graph);

/* Number of ops in the op table, and the name of op i. */
int air_op_count(void);
const char *air_op_name(int op);

/* ---- compiling --------------------------------------------------------- */

enum {
	AIR_COMPILE_NO_FUSION = 1u << 0,        /* one kernel per op */
	AIR_COMPILE_NO_MEMORY_REUSE = 1u << 1,  /* every value gets its own buffer */
	AIR_COMPILE_REFERENCE_KERNELS = 1u << 2,/* only the portable reference kernels */
	AIR_COMPILE_OP_BY_OP = 1u << 3,         /* debugging: no passes at all */
	AIR_COMPILE_AUTOTUNE = 1u << 4,         /* time the kernels that can run each step, keep the fastest */
	AIR_COMPILE_WEIGHTS_IN_PLACE = 1u << 5, /* small-output convolutions read the caller's weight in place:
	                                           no packed copy held, slower (kernels/conv/conv_rows.c) */
};

/* The graph passes, in the order they run. Each can be switched off alone
 * (air_compile_options.disabled_passes); AIR_COMPILE_NO_FUSION switches off
 * the fusion ones, AIR_COMPILE_OP_BY_OP all of them. */
enum {
	AIR_PASS_SIMPLIFY = 1u << 0,         /* drop no-op views/copies, fold constants */
	AIR_PASS_FOLD_BATCHNORM = 1u << 1,   /* conv/linear + batch_norm or scale/shift -> new weights */
	AIR_PASS_FUSE_ATTENTION = 1u << 2,   /* matmul-scale-mask-softmax-matmul -> sdpa */
	AIR_PASS_FUSE_EPILOGUE = 1u << 3,    /* conv/linear/mm + bias + act + residual -> one kernel */
	AIR_PASS_FUSE_ELEMENTWISE = 1u << 4, /* elementwise chains -> fused_elementwise */
	AIR_PASS_LAYOUT = 1u << 5,           /* CNN regions in the kernels' layout */
	AIR_PASS_FUSE_ACTIVATION = 1u << 6,  /* GELU written out in elementwise ops -> one op */
	AIR_PASS_ATTENTION_VIEWS = 1u << 7,  /* sdpa reads/writes heads in place: no permute/slice copies */
	AIR_PASS_FUSE_RMS_NORM = 1u << 8,    /* RMS norm written out in elementwise ops -> rms_norm */
	AIR_PASS_FUSE_ROPE = 1u << 9,        /* rotary embedding written out (rotate_half) -> rope */
	AIR_PASS_NARROW_OUTPUTS = 1u << 10,  /* linear + cast to bf16/f16 -> linear storing 16 bits */
};

/* Name of one AIR_PASS_* bit ("fold_batchnorm"), or NULL. */
const char *air_pass_name(uint32_t pass);

/* Options carry their own size so that fields can be added later. Fill with
 * air_compile_options_init first. */
typedef struct air_compile_options {
	size_t size;          /* sizeof(air_compile_options) */
	uint32_t flags;       /* AIR_COMPILE_* */
	int num_threads;      /* 0: the process default (AIR_NUM_THREADS or CPU count) */
	int fusion_threshold; /* largest fused group, in ops; 0: no limit */
	uint32_t disabled_passes; /* AIR_PASS_* bits: passes to skip */
	/* With AIR_COMPILE_AUTOTUNE: a text file that remembers the choices (read, then
	 * appended to), keyed by CPU, op, shapes and attributes; NULL: no file. Copied. */
	const char *autotune_cache;
} air_compile_options;

void air_compile_options_init(air_compile_options *options);

/* Compiles graph into a model. The graph is not changed and may be destroyed
 * right after. options may be NULL for the defaults. */
air_status air_compile(const air_graph *graph, const air_compile_options *options, air_model **out);
void air_model_destroy(air_model *model);

int air_model_input_count(const air_model *model);
int air_model_output_count(const air_model *model);
/* dtype and rank of input/output i; dims (AIR_MAX_RANK entries, may be NULL)
 * gets its dims, symbolic ones negative. */
air_status air_model_input_info(const air_model *model, int i, air_dtype *dtype, int *rank, air_dim *dims);
air_status air_model_output_info(const air_model *model, int i, air_dtype *dtype, int *rank, air_dim *dims);
/* Writes a readable form of one of the model's dims (a symbolic dim from
 * air_model_input_info/output_info: "batch", "seq*2") into buf (always
 * terminated), as air_graph_dim_string does for a graph. */
air_status air_model_dim_string(const air_model *model, air_dim dim, char *buf, size_t size);

/* A human-readable compile report: ops before and after the passes, each
 * pass's log, fused groups and their members, the kernel of every step, and
 * the memory plan (when every size is a constant). Owned by the model. */
const char *air_model_report(const air_model *model);

/* Graphviz DOT text of the model's graph: which == AIR_DOT_BEFORE_PASSES is
 * the graph as compiled (after verification, before any pass),
 * AIR_DOT_AFTER_PASSES the graph that runs, with each op's kernel and, when
 * the plan is known (see air_model_memory_info), in-place steps marked.
 * Writes at most size bytes into buf (always terminated when size > 0) and
 * the full length without the terminator into *length, so a first call
 * with buf NULL and size 0 asks for the size. */
enum { AIR_DOT_BEFORE_PASSES = 0, AIR_DOT_AFTER_PASSES = 1 };
air_status air_model_dot(const air_model *model, int which, char *buf, size_t size, size_t *length);

/* The same graph as plain text, one line per input, constant and node
 * ("%7 = linear(%0, %3, %4) : f32[batch, 3]  [linear_gemm_packed]"),
 * with attributes by name and, after the passes, each step's kernel. Same
 * which, buf, size and length rules as air_model_dot. */
air_status air_model_text(const air_model *model, int which, char *buf, size_t size, size_t *length);

/* What the memory plan does for one set of input sizes. Set size to
 * sizeof(air_memory_info) before the call; fields may be added at the end. */
typedef struct air_memory_info {
	size_t size;
	int known;              /* 0: sizes are symbolic and nothing was planned yet */
	int buffers;            /* activations: node outputs with memory of their own */
	int inplace;            /* steps writing their output over a dead input */
	size_t arena_bytes;     /* planned peak of the activations */
	size_t workspace_bytes; /* kernel scratch, after the activations */
	size_t no_reuse_bytes;  /* every activation in its own buffer (the sum) */
	size_t weight_bytes;    /* constant bytes the model holds: copies it owns
				 * (copied or folded constants) and kernel data
				 * prepared from them (packed weights: exact for
				 * packed GEMM operands, else estimated as the
				 * bytes of the constants they were made from) */
	size_t borrowed_bytes;  /* constants used in place (AIR_CONSTANT_BORROW) */
} air_memory_info;

/* The model's memory plan: computed at compile time when every size is a
 * constant, else the plan of the first session that ran (known == 0 until
 * then). Weight bytes are known in both cases. */
air_status air_model_memory_info(const air_model *model, air_memory_info *info);

/* ---- running ----------------------------------------------------------- */

air_status air_session_create(const air_model *model, air_session **out);
void air_session_destroy(air_session *session);

/* Binds input i: dense row-major data of the model's input dtype with the
 * given concrete dims. The memory is read in place during air_session_run
 * and must stay valid until then. */
air_status air_session_set_input(air_session *session, int i, const void *data, int rank, const int64_t *dims);

/* After all inputs are set: the concrete dims of output i (AIR_MAX_RANK
 * entries). Fails with AIR_SHAPE_MISMATCH if the inputs' sizes contradict
 * each other (e.g. a symbol bound to two values). */
air_status air_session_output_shape(air_session *session, int i, int *rank, int64_t *dims);

/* Binds output i to caller memory of nbytes bytes, which must be at least
 * the output's size. Outputs are written in place. */
air_status air_session_set_output(air_session *session, int i, void *data, size_t nbytes);

/* Runs the whole graph. All inputs and outputs must be bound. */
air_status air_session_run(air_session *session);

/* Bytes of the session's arena for the current shapes (planned peak of
 * intermediate values plus kernel workspace). */
size_t air_session_arena_bytes(const air_session *session);

/* The memory plan of the session's current input sizes (after a run or
 * air_session_output_shape). */
air_status air_session_memory_info(const air_session *session, air_memory_info *info);

/* Where a session's runs spent their time, step by step (always measured:
 * two clock reads per step). Steps are the compiled model's, in run order;
 * air_session_profile_steps gives their count. For step i: the kernel's
 * name ("linear_gemm_packed"), the op's name, how many runs timed it and
 * the seconds they took in all. Steps that only alias memory take none. */
int air_session_profile_steps(const air_session *session);
air_status air_session_profile(const air_session *session, int step, const char **kernel, const char **op,
			       uint64_t *runs, double *seconds);
/* Zeroes the session's per-step times, e.g. after a warm-up run whose first
 * touches of the arena would otherwise weigh on every step's figure. */
void air_session_profile_reset(air_session *session);

/* ---- threads ----------------------------------------------------------- */

/* Sets the number of threads of the process-wide pool used by models
 * compiled with num_threads == 0. Not while a model runs. */
air_status air_set_num_threads(int nthreads);
int air_get_num_threads(void);

/* Parallel loops run on libair's own pool unless the host has threads of
 * its own to lend, such as PyTorch's OpenMP team: then the two never
 * compete for the cores (a team left spinning after an eager op halved a
 * GEMM's speed on a 2-core machine). run(body, ctx, nthreads, user) must
 * call body(ctx, i) once for each i in [0, n), for some 1 <= n <= nthreads,
 * each on one thread at a time, and return when every call has returned;
 * n < nthreads only costs speed. NULL restores the pool. Not while a model
 * runs. */
typedef void (*air_parallel_body)(void *ctx, int thread);
typedef void (*air_parallel_runner)(air_parallel_body body, void *ctx, int nthreads, void *user);
void air_set_parallel_runner(air_parallel_runner run, void *user);

/* ---- .air files: saving and loading (docs/air-format.md) --------------- */

/* A graph is saved as it is given to air_compile (inputs, constants,
 * symbols and dim expressions, nodes as op name + attributes by name,
 * outputs); loading rebuilds it through the graph-building API (which
 * checks everything again) and compiling picks kernels for the CPU it runs
 * on. A file also holds metadata (key/value strings), input and output
 * names, and the compile options to use by default. */

/* Frees memory libair handed to the caller (air_graph_save_buffer). */
void air_free(void *p);

typedef struct air_save_options {
	size_t size; /* sizeof(air_save_options); fill with air_save_options_init */
	/* metadata: n_meta pairs of UTF-8 strings (keys unique, non-empty) */
	const char *const *meta_keys;
	const char *const *meta_values;
	int n_meta;
	/* names of the graph's outputs (NULL, or one per output; an entry may be NULL) */
	const char *const *output_names;
	int n_output_names;
	/* the compile options the loader uses when it is given none; NULL: defaults.
	 * autotune_cache is not saved. */
	const air_compile_options *compile;
	/* constants saved as EXTERNAL: dtype, dims and a name, no bytes; the
	 * loader is given their memory (air_load_options.externals). */
	const air_value *externals;
	const char *const *external_names; /* one per external, unique, non-NULL */
	int n_externals;
} air_save_options;

void air_save_options_init(air_save_options *options);

/* The graph as a .air file in new memory (*out, *size), freed with air_free.
 * options may be NULL. The graph must be one that air_compile accepts. */
air_status air_graph_save_buffer(const air_graph *graph, const air_save_options *options, void **out, size_t *size);

/* The same, written to path atomically: a temporary file in the same folder,
 * flushed, then renamed over path. */
air_status air_graph_save_file(const air_graph *graph, const air_save_options *options, const char *path);

/* Memory for an external constant, bound by name, or by position among the
 * file's externals (air_file_external_info) when name is NULL. nbytes must
 * equal the constant's size. The memory is used in place (as
 * AIR_CONSTANT_BORROW) by graphs and models made from the file. */
typedef struct air_external {
	const char *name;
	int index;
	const void *data;
	size_t nbytes;
} air_external;

enum {
	/* air_file_open_buffer: use the caller's bytes in place instead of a
	 * copy; they must stay alive and unchanged while the file, or any graph
	 * or model made from it, exists. */
	AIR_LOAD_BORROW = 1u << 0,
	/* Skip the checksum of the weights section (a large file's weights are
	 * then not read at open; every other section is still checked). */
	AIR_LOAD_NO_WEIGHT_CHECKSUM = 1u << 1,
};

typedef struct air_load_options {
	size_t size;    /* sizeof(air_load_options); fill with air_load_options_init */
	uint32_t flags; /* AIR_LOAD_* */
	const air_external *externals;
	int n_externals;
} air_load_options;

void air_load_options_init(air_load_options *options);

/* An opened .air file: checked (header, section table, checksums, every
 * record decoded with its bounds checked) but not yet built into a graph.
 * A file is immutable; graphs and models made from it keep what they need
 * (a model keeps the file itself, whose weights it uses in place). */
typedef struct air_file air_file;

/* Opens a file from memory: copied unless options->flags has
 * AIR_LOAD_BORROW. A damaged file is AIR_BAD_FILE, a newer format version
 * AIR_UNSUPPORTED, an unbound or mismatched external AIR_INVALID_ARGUMENT. */
air_status air_file_open_buffer(const void *data, size_t size, const air_load_options *options, air_file **out);
/* Opens a file from disk by mapping it (read-only); weights are not copied. */
air_status air_file_open(const char *path, const air_load_options *options, air_file **out);
/* Drops the caller's reference; the file goes when no model uses it either. */
void air_file_close(air_file *file);

int air_file_version(const air_file *file); /* the format version it was written in */
/* Metadata: count, pair i, or the value of key (NULL if absent). */
int air_file_meta_count(const air_file *file);
air_status air_file_meta_at(const air_file *file, int i, const char **key, const char **value);
const char *air_file_meta(const air_file *file, const char *key);
/* Names of inputs and outputs (NULL where none was saved). */
int air_file_input_count(const air_file *file);
int air_file_output_count(const air_file *file);
const char *air_file_input_name(const air_file *file, int i);
const char *air_file_output_name(const air_file *file, int i);
/* Nodes and constants of the saved graph; op name of node i; bytes of the
 * constants stored in the file (external ones not counted). */
int air_file_node_count(const air_file *file);
const char *air_file_node_op(const air_file *file, int i);
int air_file_constant_count(const air_file *file);
size_t air_file_weight_bytes(const air_file *file);
/* External constant i: name, dtype, rank, dims (AIR_MAX_RANK entries). */
int air_file_external_count(const air_file *file);
air_status air_file_external_info(const air_file *file, int i, const char **name, air_dtype *dtype, int *rank,
				  int64_t *dims);
/* The compile options saved in the file (autotune_cache NULL). */
air_status air_file_compile_options(const air_file *file, air_compile_options *options);

/* The saved graph, rebuilt: constants copied out of the file (externals
 * point to the caller's memory), so the graph may outlive the file. */
air_status air_file_graph(const air_file *file, air_graph **out);

/* Compiles the saved graph with options (NULL: the file's own). Constants
 * are used in place from the file's memory, which the model keeps (the
 * caller may close the file right after). */
air_status air_file_compile(air_file *file, const air_compile_options *options, air_model **out);

/* Shorthands: open, rebuild or compile, close. air_graph_load_* copy the
 * constants; air_model_load_file maps the file and its model uses the
 * weights in place (64-byte aligned) and unmaps on destroy;
 * air_model_load_buffer copies data (to use the caller's bytes in place:
 * air_file_open_buffer with AIR_LOAD_BORROW, then air_file_compile).
 * options of air_model_load_*: compile options, NULL for the file's. A file
 * with external constants needs air_file_open* and air_load_options. */
air_status air_graph_load_buffer(const void *data, size_t size, const air_load_options *options, air_graph **out);
air_status air_graph_load_file(const char *path, const air_load_options *options, air_graph **out);
air_status air_model_load_file(const char *path, const air_compile_options *options, air_model **out);
air_status air_model_load_buffer(const void *data, size_t size, const air_compile_options *options,
				 air_model **out);

/* A model's input and output names and metadata, from the file it was
 * loaded from (input names also from air_graph_add_input); NULL if none. */
const char *air_model_input_name(const air_model *model, int i);
const char *air_model_output_name(const air_model *model, int i);
const char *air_model_metadata(const air_model *model, const char *key);


/* ---- log messages and traces ------------------------------------------- */

/* libair's messages, most severe first. A message is delivered when its
 * level is at most the level set (default AIR_LOG_WARNING); below that it is
 * not even formatted. */
typedef enum air_log_level {
	AIR_LOG_ERROR = 0,
	AIR_LOG_WARNING = 1,
	AIR_LOG_INFO = 2,
	AIR_LOG_DEBUG = 3,
} air_log_level;

/* Receives every delivered message (one line, no newline), on the thread
 * that made it, which may be any thread compiling or running a model. */
typedef void (*air_log_fn)(air_log_level level, const char *message, void *user);

/* The one callback for all messages; NULL drops them (the default). Set it
 * and the level before compiling, not while a model compiles or runs. */
void air_set_log_callback(air_log_fn fn, void *user);
void air_set_log_level(air_log_level level);
air_log_level air_get_log_level(void);

/* Compile phases of a model, in the order they ran: each pass that ran (by
 * its name, "simplify"), then "kernel selection" and "memory plan". Start times are
 * CLOCK_MONOTONIC nanoseconds (Python's time.monotonic_ns()). */
int air_model_compile_phases(const air_model *model);
air_status air_model_compile_phase(const air_model *model, int i, const char **name, uint64_t *start_ns,
				   uint64_t *dur_ns);

/* Per-run step events: after air_session_trace_enable(s, capacity) with
 * capacity > 0 every run records, for each step that ran a kernel, its start
 * (CLOCK_MONOTONIC ns), its duration and the id of the thread that ran it
 * (Linux: the kernel's thread id), until capacity events are held; later
 * events are counted as dropped. capacity 0 turns tracing off and frees
 * the events. */
air_status air_session_trace_enable(air_session *session, int capacity);
int air_session_trace_count(const air_session *session);
uint64_t air_session_trace_dropped(const air_session *session);
air_status air_session_trace_event(const air_session *session, int i, int *step, uint64_t *start_ns,
				   uint64_t *dur_ns, uint64_t *thread);
/* Tensor j of step's last run (its inputs, then its outputs): dtype, rank
 * and dims; *is_output says which. AIR_INVALID_ARGUMENT past the last. */
air_status air_session_step_tensor(const air_session *session, int step, int j, int *is_output,
				   air_dtype *dtype, int *rank, int64_t dims[AIR_MAX_RANK]);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif

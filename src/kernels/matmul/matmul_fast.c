/* matmul_fast.c - fast kernels of mm, addmm, linear and bmm on the
 * f32 GEMM (gemm.h). A constant weight operand is packed once, when the model is
 * compiled, into the GEMM's panel layout; linear's weight w[N, K] is read as
 * B = w^T through strides (rs 1, cs K), so the transpose costs nothing.
 * Biases, alpha and beta, and linear's fused residual and activation, go
 * into the GEMM's epilogue, applied while each output tile is still in
 * registers. f32 only; f64 takes the reference. */
#include "kernels/matmul/matmul_fast.h"

#include <string.h>

#include "core/error.h"
#include "kernels/gemm/amx.h"
#include "kernels/gemm/gemm.h"
#include "kernels/matmul/matmul_ref.h"

/* ---- operand geometry ---------------------------------------------------- */

/* C[M, N] = A[M, K] @ B[K, N] with B(k, j) = b[k * rs_b + j * cs_b]. */
typedef struct mm_dims {
	int64_t M, N, K;
	int64_t rs_a, cs_a; /* A(i, k) = a[i * rs_a + k * cs_a] */
	int64_t rs_b, cs_b;
	const float *a, *b;
	int b_input; /* which input is B */
} mm_dims;

static void dims_of(int op_linear, int op_addmm, const k_call *call, mm_dims *d)
{
	if (op_linear) {
		const k_tensor *x = &call->in[0], *w = &call->in[1];
		d->K = w->dims[1];
		d->N = w->dims[0];
		/* at compile time x's leading dims may be unknown (-1) */
		d->M = 1;
		for (int i = 0; i < x->rank - 1; i++)
			d->M = (d->M < 0 || x->dims[i] < 0) ? -1 : d->M * x->dims[i];
		d->rs_a = d->K;
		d->cs_a = 1;
		d->rs_b = 1;
		d->cs_b = d->K;
		d->a = x->data;
		d->b = w->data;
		d->b_input = 1;
		return;
	}
	const k_tensor *a = &call->in[op_addmm], *b = &call->in[op_addmm + 1];
	/* mm's trans_a: a is [K, M], read through strides (the GEMM packs it) */
	const int ta = !op_addmm && call->attrs[0].i != 0;
	d->M = a->dims[ta ? 1 : 0];
	d->K = a->dims[ta ? 0 : 1];
	d->N = b->dims[1];
	d->rs_a = ta ? 1 : d->K;
	d->cs_a = ta ? d->M : 1;
	d->rs_b = d->N;
	d->cs_b = 1;
	d->a = a->data;
	d->b = b->data;
	d->b_input = op_addmm + 1;
}

/* A's and B's contraction sizes, which shape inference leaves unchecked
 * when they are different symbols. */
static air_status check_inner(const char *op, const k_call *call, int op_linear, int op_addmm)
{
	const k_tensor *a = &call->in[op_addmm], *b = &call->in[op_addmm + 1];
	const int ta = !op_linear && !op_addmm && call->attrs[0].i != 0;
	int64_t ka = op_linear ? a->dims[a->rank - 1] : a->dims[ta ? 0 : 1], K = op_linear ? b->dims[1] : b->dims[0];
	if (ka != K)
		return air_error(AIR_SHAPE_MISMATCH, "%s: contraction sizes differ: %lld and %lld", op, (long long)ka,
				 (long long)K);
	return AIR_OK;
}

/* ---- addmm's bias as an epilogue ------------------------------------------- */

/* Scratch floats the bias needs: a scaled or broadcast copy of a row or
 * column bias. */
static size_t bias_scratch_floats(const k_call *call, int64_t M, int64_t N)
{
	return (size_t)(M > N ? M : N);
}

/* Fills ep with beta * bias broadcast to [M, N]. A full [M, N] bias is the
 * residual input of the epilogue; with beta != 1 it is first written scaled
 * into C and read back from there (the epilogue allows residual == C). */
static air_status addmm_epilogue(const k_call *call, int64_t M, int64_t N, float *C, float *scratch,
				 k_epilogue *ep)
{
	const k_tensor *bias = &call->in[0];
	float alpha = (float)call->attrs[0].f, beta = (float)call->attrs[1].f;
	*ep = k_epilogue_none();
	ep->alpha = alpha;
	if (beta == 0.0f)
		return AIR_OK; /* torch ignores the bias then, NaN included */
	const float *b = bias->data;
	int64_t bm = bias->rank >= 2 ? bias->dims[bias->rank - 2] : 1;
	int64_t bn = bias->rank >= 1 ? bias->dims[bias->rank - 1] : 1;
	if ((bm != 1 && bm != M) || (bn != 1 && bn != N))
		return air_error(AIR_SHAPE_MISMATCH, "addmm: bias [%lld, %lld] does not broadcast to [%lld, %lld]",
				 (long long)bm, (long long)bn, (long long)M, (long long)N);
	if (bm == M && bn == N && M > 1 && N > 1) {
		if (beta != 1.0f) {
			for (int64_t i = 0; i < M * N; i++)
				C[i] = beta * b[i];
			b = C;
		}
		ep->residual = b;
		ep->ld_residual = N;
		return AIR_OK;
	}
	if (bm == 1 && bn == 1) {
		/* a scalar: a row of N equal entries */
		for (int64_t j = 0; j < N; j++)
			scratch[j] = beta * b[0];
		ep->bias_n = scratch;
		return AIR_OK;
	}
	int64_t n = bm == 1 ? N : M;
	const float *v = b;
	if (beta != 1.0f) {
		for (int64_t i = 0; i < n; i++)
			scratch[i] = beta * b[i];
		v = scratch;
	}
	if (bm == 1)
		ep->bias_n = v;
	else
		ep->bias_m = v;
	return AIR_OK;
}

/* ---- the kernels ---------------------------------------------------------- */

typedef enum { OP_IS_MM, OP_IS_ADDMM, OP_IS_LINEAR } which_op;

static const char *const op_names[] = {"mm", "addmm", "linear"};

static air_status run_product(const k_call *call, which_op op, const kgemm_packed_b *packed, int nthreads_hint)
{
	mm_dims d;
	dims_of(op == OP_IS_LINEAR, op == OP_IS_ADDMM, call, &d);
	AIR_TRY(check_inner(op_names[op], call, op == OP_IS_LINEAR, op == OP_IS_ADDMM));
	float *C = call->out[0].data;
	if (d.M == 0 || d.N == 0)
		return AIR_OK;
	size_t gemm_ws = packed ? kgemm_packed_workspace_bytes(d.M, d.N, d.K, nthreads_hint)
				: kgemm_workspace_bytes(d.M, d.N, d.K, d.cs_a, nthreads_hint);
	float *scratch = (float *)((char *)call->workspace + k_align64(gemm_ws));
	k_epilogue ep = k_epilogue_none();
	if (op == OP_IS_ADDMM) {
		AIR_TRY(addmm_epilogue(call, d.M, d.N, C, scratch, &ep));
	} else if (op == OP_IS_LINEAR) {
		int has_res = call->attrs[2].i != 0;
		if (kref_present(call->attrs[0].i, call->n_in - has_res, 2)) {
			if (call->in[2].dims[0] != d.N)
				return air_error(AIR_SHAPE_MISMATCH, "linear: bias has %lld entries for %lld outputs",
						 (long long)call->in[2].dims[0], (long long)d.N);
			ep.bias_n = call->in[2].data;
		}
		if (has_res) {
			const k_tensor *res = &call->in[call->n_in - 1];
			AIR_TRY(kref_check_residual("linear", res, &call->out[0]));
			ep.residual = res->data; /* may alias C: the GEMM reads it first */
			ep.ld_residual = d.N;
		}
		ep.act = (k_act)call->attrs[1].i;
	}
	if (packed)
		kgemm_f32_packed(d.M, d.N, d.K, d.a, d.rs_a, d.cs_a, packed, C, d.N, &ep, call->pool, call->workspace);
	else
		kgemm_f32(d.M, d.N, d.K, d.a, d.rs_a, d.cs_a, d.b, d.rs_b, d.cs_b, C, d.N, &ep, call->pool,
			  call->workspace);
	return AIR_OK;
}

static size_t product_workspace(const k_call *call, int nthreads, which_op op, bool packed)
{
	mm_dims d;
	dims_of(op == OP_IS_LINEAR, op == OP_IS_ADDMM, call, &d);
	size_t w = packed ? kgemm_packed_workspace_bytes(d.M, d.N, d.K, nthreads)
			  : kgemm_workspace_bytes(d.M, d.N, d.K, d.cs_a, nthreads);
	if (op == OP_IS_ADDMM)
		w = k_align64(w) + bias_scratch_floats(call, d.M, d.N) * sizeof(float);
	return w;
}

/* B packed; and split for the AMX path as well when every call's M is
 * known at compile time and large enough to take it (gemm/amx.h): then B
 * is not split again on each call. 512^3 on 2 threads
 * (tests/c/bench_gemm.c) went from 540 to 730 GFLOP/s with the split of B
 * left out; it also took 1.5 times the packed B's memory. */
static air_status prepare_packed(const mm_dims *d, kgemm_packed_b **out)
{
	AIR_TRY(kgemm_pack_b(d->K, d->N, d->b, d->rs_b, d->cs_b, out));
	if (d->M <= 0 || d->cs_a != 1 || !kamx_wanted(d->M, d->N, d->K))
		return AIR_OK;
	air_status st = kgemm_packed_b_presplit(*out);
	if (st != AIR_OK) {
		kgemm_packed_b_free(*out);
		*out = NULL;
	}
	return st;
}

/* The workspace was sized with the model's pool size; the GEMM's own slot
 * layout must use the same count, so runs pass the pool's size back. */
#define PRODUCT_KERNELS(name, OPV)                                                                  \
	static size_t name##_ws(const k_call *call, int nthreads)                                   \
	{                                                                                           \
		return product_workspace(call, nthreads, OPV, false);                               \
	}                                                                                           \
	static size_t name##_packed_ws(const k_call *call, int nthreads)                            \
	{                                                                                           \
		return product_workspace(call, nthreads, OPV, true);                                \
	}                                                                                           \
	static air_status name##_run(const k_call *call)                                            \
	{                                                                                           \
		return run_product(call, OPV, NULL, rt_pool_size(call->pool));                      \
	}                                                                                           \
	static air_status name##_packed_run(const k_call *call)                                     \
	{                                                                                           \
		return run_product(call, OPV, call->prepared, rt_pool_size(call->pool));            \
	}                                                                                           \
	static bool name##_packed_supports(const k_call *call)                                      \
	{                                                                                           \
		mm_dims d;                                                                          \
		dims_of(OPV == OP_IS_LINEAR, OPV == OP_IS_ADDMM, call, &d);                         \
		return k_all_f32(call) && call->in_const[d.b_input] && d.K >= 0 && d.N >= 0;          \
	}                                                                                           \
	static air_status name##_prepare(const k_call *call, void **prepared)                       \
	{                                                                                           \
		mm_dims d;                                                                          \
		dims_of(OPV == OP_IS_LINEAR, OPV == OP_IS_ADDMM, call, &d);                         \
		return prepare_packed(&d, (kgemm_packed_b **)prepared);                             \
	}

static bool f32_supports(const k_call *call)
{
	return k_all_f32(call);
}

static void release_packed(void *p)
{
	kgemm_packed_b_free(p);
}

PRODUCT_KERNELS(mm, OP_IS_MM)
PRODUCT_KERNELS(addmm, OP_IS_ADDMM)
PRODUCT_KERNELS(linear, OP_IS_LINEAR)

const k_kernel kfast_mm_packed = {"mm_gemm_packed", 0, mm_packed_supports, mm_prepare, release_packed,
				  mm_packed_ws, mm_packed_run};
const k_kernel kfast_mm = {"mm_gemm", 0, f32_supports, NULL, NULL, mm_ws, mm_run};
const k_kernel kfast_addmm_packed = {"addmm_gemm_packed", 0, addmm_packed_supports, addmm_prepare, release_packed,
				     addmm_packed_ws, addmm_packed_run};
const k_kernel kfast_addmm = {"addmm_gemm", 0, f32_supports, NULL, NULL, addmm_ws, addmm_run};
/* K_INPLACE_RESIDUAL: the residual goes through the GEMM epilogue, which
 * folds it into C on the first K block, reading each tile of it just before
 * it writes that tile of C, through the pointer and row stride passed. */
const k_kernel kfast_linear_packed = {"linear_gemm_packed", 0, linear_packed_supports, linear_prepare,
				      release_packed, linear_packed_ws, linear_packed_run, K_INPLACE_RESIDUAL};
const k_kernel kfast_linear = {"linear_gemm", 0, f32_supports, NULL, NULL, linear_ws, linear_run, K_INPLACE_RESIDUAL};

/* ---- bmm -------------------------------------------------------------------- */

static size_t bmm_ws(const k_call *call, int nthreads)
{
	const k_tensor *a = &call->in[0], *b = &call->in[1];
	return kgemm_batched_workspace_bytes(a->dims[0], a->dims[1], b->dims[2], a->dims[2], nthreads);
}

static air_status bmm_run(const k_call *call)
{
	const k_tensor *a = &call->in[0], *b = &call->in[1];
	int64_t B = a->dims[0], M = a->dims[1], K = a->dims[2], N = b->dims[2];
	if (b->dims[1] != K || b->dims[0] != B)
		return air_error(AIR_SHAPE_MISMATCH, "bmm: [%lld, %lld, %lld] and [%lld, %lld, %lld] do not fit",
				 (long long)B, (long long)M, (long long)K, (long long)b->dims[0], (long long)b->dims[1],
				 (long long)N);
	kgemm_f32_batched(B, M, N, K, a->data, M * K, K, 1, b->data, K * N, N, 1, call->out[0].data, M * N, N, NULL,
			  call->pool, call->workspace);
	return AIR_OK;
}

const k_kernel kfast_bmm = {"bmm_gemm", 0, f32_supports, NULL, NULL, bmm_ws, bmm_run};

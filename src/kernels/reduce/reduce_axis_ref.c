/* reduce_axis_ref.c - reference kernels of the reductions along one axis:
 * argmax and cumsum. */
#include "kernels/reduce/reduce_ref.h"

#include "core/error.h"
#include "kernels/reduce/reduce_util.h"

/* ---- argmax ------------------------------------------------------------ */

/* First index of the maximum; the first NaN counts as the maximum. */
#define ARGMAX_TASK(SUF, T, BETTER)                                                               \
	static void argmax_##SUF(void *arg, int64_t t, int th)                                    \
	{                                                                                         \
		const axis_ctx *c = arg;                                                          \
		if (c->inner == 1) {                                                              \
			int64_t r1 = kr_min(t * c->per_task + c->per_task, c->outer);             \
			for (int64_t r = t * c->per_task; r < r1; r++) {                          \
				const T *x = (const T *)c->x + r * c->len;                        \
				T b = x[0];                                                       \
				int64_t bi = 0;                                                   \
				for (int64_t k = 1; k < c->len; k++) {                            \
					T v = x[k];                                               \
					if (BETTER(v, b)) {                                       \
						b = v;                                            \
						bi = k;                                           \
					}                                                         \
				}                                                                 \
				((int64_t *)c->y)[r] = bi;                                        \
			}                                                                         \
			return;                                                                   \
		}                                                                                 \
		int64_t u1 = kr_min(t * c->per_task + c->per_task, c->outer * c->nblocks);        \
		T best[KR_CB];                                                                    \
		for (int64_t u = t * c->per_task; u < u1; u++) {                                  \
			int64_t o = u / c->nblocks, c0 = (u % c->nblocks) * KR_CB;                \
			int64_t n = kr_min(KR_CB, c->inner - c0);                                 \
			const T *x = (const T *)c->x + o * c->len * c->inner + c0;                \
			int64_t *y = (int64_t *)c->y + o * c->inner + c0;                         \
			for (int64_t i = 0; i < n; i++) {                                         \
				best[i] = x[i];                                                   \
				y[i] = 0;                                                         \
			}                                                                         \
			for (int64_t r = 1; r < c->len; r++) {                                    \
				const T *row = x + r * c->inner;                                  \
				for (int64_t i = 0; i < n; i++) {                                 \
					T v = row[i], b = best[i];                                \
					if (BETTER(v, b)) {                                       \
						best[i] = v;                                      \
						y[i] = r;                                         \
					}                                                         \
				}                                                                 \
			}                                                                         \
		}                                                                                 \
	}

#define F_BETTER(v, b) ((v) > (b) || ((v) != (v) && (b) == (b)))
#define I_BETTER(v, b) ((v) > (b))
ARGMAX_TASK(f32, float, F_BETTER)
ARGMAX_TASK(f64, double, F_BETTER)
ARGMAX_TASK(i64, int64_t, I_BETTER)
ARGMAX_TASK(i32, int32_t, I_BETTER)
ARGMAX_TASK(i16, int16_t, I_BETTER)
ARGMAX_TASK(i8, int8_t, I_BETTER)
ARGMAX_TASK(u8, uint8_t, I_BETTER)

air_status kref_argmax(const k_call *call)
{
	const k_tensor *x = &call->in[0];
	rt_task_fn fn;
	switch (x->dtype) {
	case AIR_F32: fn = argmax_f32; break;
	case AIR_F64: fn = argmax_f64; break;
	case AIR_I64: fn = argmax_i64; break;
	case AIR_I32: fn = argmax_i32; break;
	case AIR_I16: fn = argmax_i16; break;
	case AIR_I8: fn = argmax_i8; break;
	case AIR_U8: fn = argmax_u8; break;
	default: return kr_bad_dtype("argmax", x->dtype);
	}
	int axis = x->rank ? kr_axis(call->attrs[0].i, x->rank) : 0;
	axis_ctx c = {0};
	axis_plan(&c, x, axis);
	if (c.len == 0)
		return air_error(AIR_INVALID_ARGUMENT, "argmax: reduction dim %d has size 0", axis);
	c.x = x->data;
	c.y = call->out[0].data;
	rt_pool_run(call->pool, axis_tasks(&c), fn, &c);
	return AIR_OK;
}

/* ---- cumsum ------------------------------------------------------------ */

#define CUMSUM_TASK(SUF, T, ACC)                                                                  \
	static void cumsum_##SUF(void *arg, int64_t t, int th)                                    \
	{                                                                                         \
		const axis_ctx *c = arg;                                                          \
		if (c->inner == 1) {                                                              \
			int64_t r1 = kr_min(t * c->per_task + c->per_task, c->outer);             \
			for (int64_t r = t * c->per_task; r < r1; r++) {                          \
				const T *x = (const T *)c->x + r * c->len;                        \
				T *y = (T *)c->y + r * c->len;                                    \
				ACC acc = 0;                                                      \
				for (int64_t k = 0; k < c->len; k++) {                            \
					acc += (ACC)x[k];                                         \
					y[k] = (T)acc;                                            \
				}                                                                 \
			}                                                                         \
			return;                                                                   \
		}                                                                                 \
		int64_t u1 = kr_min(t * c->per_task + c->per_task, c->outer * c->nblocks);        \
		ACC acc[KR_CB];                                                                   \
		for (int64_t u = t * c->per_task; u < u1; u++) {                                  \
			int64_t o = u / c->nblocks, c0 = (u % c->nblocks) * KR_CB;                \
			int64_t n = kr_min(KR_CB, c->inner - c0);                                 \
			int64_t off = o * c->len * c->inner + c0;                                 \
			const T *x = (const T *)c->x + off;                                       \
			T *y = (T *)c->y + off;                                                   \
			for (int64_t i = 0; i < n; i++)                                           \
				acc[i] = 0;                                                       \
			for (int64_t r = 0; r < c->len; r++)                                      \
				for (int64_t i = 0; i < n; i++) {                                 \
					acc[i] += (ACC)x[r * c->inner + i];                       \
					y[r * c->inner + i] = (T)acc[i];                          \
				}                                                                 \
		}                                                                                 \
	}

CUMSUM_TASK(f32, float, double)
CUMSUM_TASK(f64, double, double)
CUMSUM_TASK(i64, int64_t, uint64_t)
CUMSUM_TASK(i32, int32_t, uint64_t)
CUMSUM_TASK(i16, int16_t, uint64_t)
CUMSUM_TASK(i8, int8_t, uint64_t)
CUMSUM_TASK(u8, uint8_t, uint64_t)

air_status kref_cumsum(const k_call *call)
{
	const k_tensor *x = &call->in[0];
	rt_task_fn fn;
	switch (x->dtype) {
	case AIR_F32: fn = cumsum_f32; break;
	case AIR_F64: fn = cumsum_f64; break;
	case AIR_I64: fn = cumsum_i64; break;
	case AIR_I32: fn = cumsum_i32; break;
	case AIR_I16: fn = cumsum_i16; break;
	case AIR_I8: fn = cumsum_i8; break;
	case AIR_U8: fn = cumsum_u8; break;
	default: return kr_bad_dtype("cumsum", x->dtype);
	}
	if (x->numel == 0)
		return AIR_OK;
	axis_ctx c = {0};
	axis_plan(&c, x, x->rank ? kr_axis(call->attrs[0].i, x->rank) : 0);
	c.x = x->data;
	c.y = call->out[0].data;
	rt_pool_run(call->pool, axis_tasks(&c), fn, &c);
	return AIR_OK;
}

/* optable.h - the single list of ops (an X-macro: OP(name)). The order is
 * the op id order. Each op's op_def is defined as op_def_<name> in its
 * family file (ops/<family>.c). Keep the families in their sections. */

/* elementwise: ops/elementwise.c (activation_backward, dropout_backward: ops/backward.c) */
OP(neg) OP(abs) OP(exp) OP(log) OP(log1p) OP(expm1) OP(sqrt) OP(rsqrt) OP(sin) OP(cos)
OP(tanh) OP(sigmoid) OP(erf) OP(relu) OP(gelu) OP(gelu_tanh) OP(silu) OP(hardswish)
OP(hardsigmoid) OP(reciprocal) OP(floor) OP(ceil) OP(round) OP(trunc) OP(sign)
OP(logical_not) OP(bitwise_not) OP(isnan) OP(clamp) OP(leaky_relu) OP(elu)
OP(add) OP(sub) OP(mul) OP(div) OP(floor_divide) OP(remainder) OP(fmod) OP(pow) OP(maximum) OP(minimum)
OP(eq) OP(ne) OP(lt) OP(le) OP(gt) OP(ge) OP(logical_and) OP(logical_or) OP(logical_xor)
OP(bitwise_and) OP(bitwise_or) OP(bitwise_xor)
OP(where) OP(cast)
OP(activation_backward) OP(dropout_backward)

/* created by passes only: ops/fused.c, ops/conv_nhwc.c (layout pass) */
OP(fused_elementwise) OP(rope)
OP(conv2d_nhwc) OP(max_pool2d_nhwc) OP(avg_pool2d_nhwc) OP(adaptive_avg_pool2d_nhwc)
OP(fused_dag) /* ops/fused_dag.c */

/* shape and data movement: ops/shape.c */
OP(reshape) OP(copy) OP(permute) OP(expand) OP(slice) OP(cat)

/* reductions and normalization: ops/reduce.c (layer_norm_backward, softmax_backward: ops/backward.c) */
OP(sum) OP(mean) OP(amax) OP(amin) OP(prod) OP(argmax) OP(cumsum) OP(softmax) OP(log_softmax)
OP(layer_norm) OP(rms_norm)
OP(layer_norm_backward) OP(softmax_backward)
/* training batch norm and relu's backward: ops/norm_train.c */
OP(batch_norm_train) OP(batch_norm_backward) OP(threshold_backward)

/* matrix products, convolution, pooling, attention: ops/linalg.c, ops/conv.c,
 * ops/conv_backward.c, ops/pool_backward.c */
OP(mm) OP(bmm) OP(addmm) OP(linear) OP(sdpa)
OP(sdpa_lse) OP(sdpa_backward) /* training attention: linalg.c, attention_backward.c */
OP(conv2d) OP(batch_norm) OP(max_pool2d) OP(avg_pool2d) OP(adaptive_avg_pool2d) OP(col2im)
OP(conv2d_backward_input) OP(conv2d_backward_weight) /* ops/conv_backward.c */
OP(max_pool2d_indices) OP(max_pool2d_backward) /* ops/pool_backward.c */

/* indexing and creation: ops/index.c (embedding_backward, dropout: ops/backward.c) */
OP(arange) OP(full) OP(embedding) OP(gather) OP(index) OP(index_select) OP(index_copy) OP(size_scalar)
OP(embedding_backward) OP(dropout)

/* weight-only quantized linear (int8/int4 weights): ops/linear_q.c */
OP(linear_q)
/* PT2E static int8: ops/linear_u8s8.c (u8 x s8, s32 sums), ops/quantize.c, ops/conv_u8s8.c */
OP(linear_u8s8) OP(quantize) OP(conv2d_u8s8)

/* optable.h - the single list of ops (an X-macro: OP(name)). The order is
 * the op id order. Each op's op_def is defined as op_def_<name> in its
 * family file (ops/<family>.c). Keep the families in their sections. */

/* elementwise: ops/elementwise.c */
OP(neg) OP(abs) OP(exp) OP(log) OP(log1p) OP(expm1) OP(sqrt) OP(rsqrt) OP(sin) OP(cos)
OP(tanh) OP(sigmoid) OP(erf) OP(relu) OP(gelu) OP(gelu_tanh) OP(silu) OP(hardswish)
OP(hardsigmoid) OP(reciprocal) OP(floor) OP(ceil) OP(round) OP(trunc) OP(sign)
OP(logical_not) OP(bitwise_not) OP(isnan) OP(clamp) OP(leaky_relu)
OP(add) OP(sub) OP(mul) OP(div) OP(floor_divide) OP(remainder) OP(pow) OP(maximum) OP(minimum)
OP(eq) OP(ne) OP(lt) OP(le) OP(gt) OP(ge) OP(logical_and) OP(logical_or) OP(logical_xor)
OP(bitwise_and) OP(bitwise_or) OP(bitwise_xor)
OP(where) OP(cast)

/* shape and data movement: ops/shape.c */
OP(reshape) OP(copy) OP(permute) OP(expand) OP(slice) OP(cat)

/* reductions and normalization: ops/reduce.c */

/* matrix products, convolution, pooling, attention: ops/linalg.c, ops/conv.c */

/* indexing and creation: ops/index.c */

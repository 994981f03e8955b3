/* act_backward.h - the gradients of the activations, one pass each:
 * activation_backward(g, t) with t the forward's input x (gelu, gelu_tanh,
 * silu) or output y (tanh, sigmoid), and dropout_backward(g, mask) =
 * g * (mask * scale). Reference kernels (double arithmetic through libm) in
 * act_backward_ref.c; the fast f32 ones (vmath, a tile at a time) in
 * act_backward.c. */
#ifndef AIR_KERNELS_ELEMENTWISE_ACT_BACKWARD_H
#define AIR_KERNELS_ELEMENTWISE_ACT_BACKWARD_H

#include "kernels/common/kernel.h"

/* activation_backward's `kind` attribute */
enum ka_kind {
	KA_GELU = 0,      /* t = x: g * (Phi(x) + x phi(x)) */
	KA_GELU_TANH = 1, /* t = x: the derivative of x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
	KA_SILU = 2,      /* t = x: g * s (1 + x (1 - s)), s = sigmoid(x) */
	KA_TANH = 3,      /* t = y: g * (1 - y^2) */
	KA_SIGMOID = 4,   /* t = y: g * (1 - y) y */
	KA_KIND_COUNT
};

air_status kref_activation_backward(const k_call *call);
air_status kref_dropout_backward(const k_call *call);
extern const k_kernel kfast_activation_backward;
extern const k_kernel kfast_dropout_backward;

#endif

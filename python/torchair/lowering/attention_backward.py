"""Lowering of the training backward of scaled dot-product attention: torch's
CPU flash backward, from the forward's output and log-sum-exp (which the
forward's lowering, lowering/attention.py, produces as sdpa_lse), to one
libair sdpa_backward node."""

from __future__ import annotations

from torch.fx import Node

from torchair.errors import Unsupported
from torchair.lowering.core import Lowerer, Value, air_dtype, arg, aten, lowers, meta


@lowers(aten._scaled_dot_product_flash_attention_for_cpu_backward.default)
def _sdpa_flash_backward(L: Lowerer, n: Node) -> tuple[Value, Value, Value]:
    grad_out, q, k, v, out, lse = n.args[:6]
    if arg(n, 6, "dropout_p", 0.0):
        raise Unsupported("attention dropout")
    is_causal = bool(arg(n, 7, "is_causal", False))
    mask = n.kwargs.get("attn_mask")
    scale = n.kwargs.get("scale")
    mq, ml = meta(q), meta(lse)
    if ml is None or mq is None or air_dtype(ml.dtype) != air_dtype(mq.dtype):
        # sdpa_backward reads lse in the dtype q computes in (f32 or f64),
        # as torch gives it (f32 for 16-bit q, widened to f32 here)
        raise Unsupported("attention backward with a log-sum-exp not in q's dtype")
    inputs = [L.value(grad_out), L.value(q), L.value(k), L.value(v), L.value(out), L.value(lse)]
    if mask is not None:
        inputs.append(L.value(mask))
    attrs = {"scale": float(scale or 0.0), "is_causal": int(is_causal), "has_mask": int(mask is not None)}
    dq, dk, dv = L.node("sdpa_backward", inputs, attrs)
    return (dq, dk, dv)

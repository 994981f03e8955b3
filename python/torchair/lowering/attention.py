"""Lowerings of attention: scaled dot-product attention and the
TransformerEncoderLayer fast path."""

from __future__ import annotations

import operator
from typing import Any

from torch.fx import Node

from torchair.errors import Unsupported
from torchair.lowering.core import Lowerer, Value, arg, aten, lowers, meta


@lowers(aten._scaled_dot_product_flash_attention_for_cpu.default, outputs=(0, 1))
def _sdpa_flash(L: Lowerer, n: Node) -> tuple[Value | None, ...]:
    """Output 1, the log-sum-exp [B, H, L], is what the training backward
    (lowering/attention_backward.py) reads: when the graph uses it the node
    is sdpa_lse, which also writes it; else plain sdpa."""
    q, k, v = n.args[:3]
    dropout = arg(n, 3, "dropout_p", 0.0)
    if dropout:
        raise Unsupported("attention dropout")
    is_causal = bool(arg(n, 4, "is_causal", False))
    mask = n.kwargs.get("attn_mask")
    scale = n.kwargs.get("scale")
    inputs = [L.value(q), L.value(k), L.value(v)]
    if mask is not None:
        inputs.append(L.value(mask))
    attrs = {"scale": float(scale or 0.0), "is_causal": int(is_causal), "has_mask": int(mask is not None)}
    if any(u.target is operator.getitem and u.args[1] == 1 for u in n.users):
        out, lse = L.node("sdpa_lse", inputs, attrs)
        return (out, lse)
    return (L.node("sdpa", inputs, attrs), None)


@lowers(aten.scaled_dot_product_attention.default)
def _sdpa(L: Lowerer, n: Node) -> Value:
    q, k, v = n.args[:3]
    mask = arg(n, 3, "attn_mask", None)
    if arg(n, 4, "dropout_p", 0.0):
        raise Unsupported("attention dropout")
    inputs = [L.value(q), L.value(k), L.value(v)]
    if mask is not None:
        inputs.append(L.value(mask))
    attrs = {
        "scale": float(n.kwargs.get("scale") or 0.0),
        "is_causal": int(bool(arg(n, 5, "is_causal", False))),
        "has_mask": int(mask is not None),
    }
    return L.node("sdpa", inputs, attrs)


@lowers(aten._transformer_encoder_layer_fwd.default)
def _transformer_encoder_layer(L: Lowerer, n: Node) -> Value:
    """nn.TransformerEncoderLayer's inference fast path (eval, batch_first, no
    grad) as the ops it is: the packed q/k/v projection, attention, the output
    projection, two layer norms and the feed-forward pair, post- or pre-norm
    (norm_first). Masks are not lowered (the layer falls back with one)."""
    (x, E, H, qkv_w, qkv_b, proj_w, proj_b, use_gelu, norm_first, eps,
     n1_w, n1_b, n2_w, n2_b, f1_w, f1_b, f2_w, f2_b) = n.args[:18]
    mask = arg(n, 18, "mask", None)
    if mask is not None:
        raise Unsupported("transformer encoder layer fast path with a mask")
    xm = meta(x)
    if xm.dim() != 3 or not isinstance(E, int) or not isinstance(H, int) or E % H:
        raise Unsupported("transformer encoder layer fast path: not [B, L, E] with E divisible by heads")
    B, T = xm.shape[0], xm.shape[1]
    D = E // H

    def linear(v: Value, w: Any, b: Any) -> Value:
        return L.node("linear", [v, L.value(w), L.value(b)], {"has_bias": 1})

    def norm(v: Value, w: Any, b: Any) -> Value:
        out = L.node("layer_norm", [v, L.value(w), L.value(b)],
                     {"normalized_ndim": 1, "eps": float(eps), "has_weight": 1, "has_bias": 1})
        return out[0]

    def attention(v: Value) -> Value:
        qkv = linear(v, qkv_w, qkv_b)  # [B, T, 3E]: q, k, v in turn
        heads = []
        for i in range(3):
            part = L.node("slice", [qkv], {"axis": 2, "start": i * E, "end": (i + 1) * E, "step": 1})
            part = L.node("reshape", [part], {"shape": L.dims([B, T, H, D])})
            heads.append(L.node("permute", [part], {"perm": [0, 2, 1, 3]}))
        a = L.node("sdpa", heads, {"scale": 0.0, "is_causal": 0, "has_mask": 0})  # [B, H, T, D]
        a = L.node("reshape", [L.node("permute", [a], {"perm": [0, 2, 1, 3]})], {"shape": L.dims([B, T, E])})
        return linear(a, proj_w, proj_b)

    def feed_forward(v: Value) -> Value:
        h = linear(v, f1_w, f1_b)
        h = L.node("gelu", [h]) if use_gelu else L.node("relu", [h])
        return linear(h, f2_w, f2_b)

    y = L.value(x)
    if norm_first:
        y = L.node("add", [y, attention(norm(y, n1_w, n1_b))])
        return L.node("add", [y, feed_forward(norm(y, n2_w, n2_b))])
    y = norm(L.node("add", [y, attention(y)]), n1_w, n1_b)
    return norm(L.node("add", [y, feed_forward(y)]), n2_w, n2_b)

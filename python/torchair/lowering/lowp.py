"""Low-precision products: a 2-D weight stored in bf16 or f16 (a bf16 model's
parameter, or an fp32 one converted once under ``mixed_precision``) is read in
place by libair's ``linear`` (kernels/gemm/lowp_w.h: the activations rounded
to the weight's type, products exact, f32 accumulation), never widened to an
f32 copy. aot_autograd gives a linear as ``mm(x, t(W))`` or ``addmm(b, x,
t(W))``: the transpose is deferred (Lowerer.lazy) and remembered
(Lowerer.weight_t), and the product that reads it becomes ``linear(x, W)``.
Any other use of the transpose lowers it the ordinary way, on f32."""

from __future__ import annotations

from typing import Any

import torch
from torch.fx import Node

from torchair.lowering.core import LAZY, LOW_PRECISION, Lowerer, Value, meta, storage_dtype


def _converted(L: Lowerer, src: Node, dtype: torch.dtype) -> Value | None:
    """A frozen 2-D f32 weight in dtype: converted once, at compile time."""
    tensor = L.const_tensors.get(src)
    if tensor is None or tensor.dtype != torch.float32 or tensor.dim() != 2:
        return None
    v = L._mixed_cache.get((src, dtype))
    if v is None:
        # the converted copy is the graph's own (copied in: the report counts
        # it as owned); the f32 original stays the user's, borrowed only if
        # a generic op reads it
        low = tensor.detach().to(dtype).contiguous()
        v = L.g.constant(low.data_ptr(), storage_dtype(dtype), list(low.shape), low, False)
        L._mixed_cache[src, dtype] = v
    return v


def _weight_16(L: Lowerer, src: Any) -> Value | None:
    """src's 16-bit value, if src is a 2-D 16-bit tensor: a 16-bit model's
    weight; an f32 one cast to 16 bits (torch.autocast's _to_copy: once at
    compile time if it is frozen, else on every call as autocast does); or,
    under mixed_precision, a frozen f32 weight converted once. Else None."""
    if not isinstance(src, Node):
        return None
    val = meta(src)
    if not isinstance(val, torch.Tensor) or val.dim() != 2:
        return None
    if src in L.raw and val.dtype in LOW_PRECISION:
        return L.raw[src]
    if src.op == "call_function" and src.target is torch.ops.aten._to_copy.default and val.dtype in LOW_PRECISION:
        inner = src.args[0]
        v = _converted(L, inner, val.dtype)
        if v is not None:
            return v
        return L.node("cast", [L.value(inner)], {"dtype": storage_dtype(val.dtype)})
    if L.mixed_precision is None:
        return None
    return _converted(L, src, L.mixed_precision)


def defer_weight_transpose(L: Lowerer, n: Node, lower: Any) -> Any:
    """For t(W) / transpose(W, 0, 1) / permute(W, [1, 0]) of a 16-bit 2-D
    weight: LAZY, remembering W for lowp_linear; lower(L, n) runs only if
    something else reads the transpose. Otherwise lower(L, n) now."""
    w = _weight_16(L, n.args[0])
    if w is None:
        return lower(L, n)
    L.weight_t[n] = w
    L.lazy[n] = lambda: lower(L, n)
    return LAZY


def lowp_linear(L: Lowerer, x: Any, wt: Any, bias: Any = None) -> Value | None:
    """linear(x, W[, bias]) when wt is a deferred 16-bit weight transpose
    and the rest fits linear (x 2-D, bias 1-D over N); None otherwise."""
    w = L.weight_t.get(wt) if isinstance(wt, Node) else None
    if w is None:
        return None
    inputs = [L.value(x), w]
    if bias is not None:
        bv = meta(bias)
        if not isinstance(bv, torch.Tensor) or bv.dim() != 1:
            return None
        inputs.append(L.value(bias))
    return L.node("linear", inputs, {"has_bias": int(bias is not None)})

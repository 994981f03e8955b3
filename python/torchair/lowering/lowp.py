"""Low-precision products: a 2-D weight stored in bf16 or f16 (a bf16 model's
parameter, or an fp32 one converted once under ``mixed_precision``) is read in
place by libair's ``linear`` (and a convolution's 4-D one by ``conv2d``) (kernels/gemm/lowp_w.h: the activations rounded
to the weight's type, products exact, f32 accumulation), never widened to an
f32 copy. aot_autograd gives a linear as ``mm(x, t(W))`` or ``addmm(b, x,
t(W))``: the transpose is deferred (Lowerer.lazy) and remembered
(Lowerer.weight_t), and the product that reads it becomes ``linear(x, W)``.
Any other use of the transpose lowers it the ordinary way, on f32."""

from __future__ import annotations

import weakref
from typing import Any

import torch
from torch.fx import Node

from torchair.lowering.core import LAZY, LOW_PRECISION, Lowerer, Value, meta, storage_dtype
from torchair.lowering.quant import QuantWeight, quantized_weight
from torchair.lowering.quant import linear_q as quant_linear
from torchair.lowering.pt2e import PT2EWeight, pt2e_linear, pt2e_weight


# A frozen f32 weight's 16-bit copies, by (id of the weight, dtype): shared
# by every graph compiled from the same weights (transformers' generate
# compiles 3 graphs of one model; each holding its own copies took a 125M
# model's peak RSS from 1.0 to 2.3 GB). An entry holds its weight weakly
# and dies with it; it is reused only while the weight's version and
# sampled bytes are those it was converted from (a .data write changes the
# bytes, not the version: frozen.py's guard rebuilds, and the rebuild must
# not get the stale copy back).
_SHARED: dict[tuple[int, torch.dtype], tuple[Any, int, bytes, torch.Tensor]] = {}


def _fingerprint(t: torch.Tensor) -> bytes:
    flat = t.detach().reshape(-1)
    n = flat.numel()
    picks = sorted({0, n - 1, *range(0, n, max(1, n // 16))}) if n else []
    return flat[picks].numpy().tobytes()


def shared_conversion(tensor: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    key = (id(tensor), dtype)
    hit = _SHARED.get(key)
    stamp = _fingerprint(tensor)
    if hit is not None and hit[0]() is tensor and hit[1] == tensor._version and hit[2] == stamp:
        return hit[3]
    low = tensor.detach().to(dtype).contiguous()
    ref = weakref.ref(tensor, lambda _: _SHARED.pop(key, None))
    _SHARED[key] = (ref, tensor._version, stamp, low)
    return low


def _converted(L: Lowerer, src: Node, dtype: torch.dtype, rank: int = 2) -> Value | None:
    """A frozen f32 weight of this rank in dtype: converted once, at compile
    time, and shared with other graphs of the same weights
    (shared_conversion); the graph borrows it, and the compile report counts
    it (Lowerer.converted)."""
    tensor = L.const_tensors.get(src)
    if tensor is None or tensor.dtype != torch.float32 or tensor.dim() != rank:
        return None
    v = L._mixed_cache.get((src, dtype))
    if v is None:
        low = shared_conversion(tensor, dtype)
        v = L.g.constant(low.data_ptr(), storage_dtype(dtype), list(low.shape), low, True)
        L._mixed_cache[src, dtype] = v
        L.converted.append(low.numel() * low.element_size())
    return v


def _weight_16(L: Lowerer, src: Any, rank: int = 2) -> Value | None:
    """src's 16-bit value, if src is a 16-bit tensor of this rank (2: a
    linear's weight, 4: a convolution's): a 16-bit model's weight; an f32
    one cast to 16 bits (torch.autocast's _to_copy: once at compile time if
    it is frozen, else on every call as autocast does); or, under
    mixed_precision, a frozen f32 weight converted once. Else None."""
    if not isinstance(src, Node):
        return None
    val = meta(src)
    if not isinstance(val, torch.Tensor) or val.dim() != rank:
        return None
    if src in L.raw and val.dtype in LOW_PRECISION:
        return L.raw[src]
    if src.op == "call_function" and src.target is torch.ops.aten._to_copy.default and val.dtype in LOW_PRECISION:
        inner = src.args[0]
        v = _converted(L, inner, val.dtype, rank)
        if v is not None:
            return v
        return L.node("cast", [L.value(inner)], {"dtype": storage_dtype(val.dtype)})
    dtype = L.mixed_precision or getattr(L, "precision_low", {}).get(rank)
    if dtype is None:
        return None
    return _converted(L, src, dtype, rank)


# Input channels below which a convolution keeps an f32 weight: a network's
# stem (3 channels, 7x7) runs on the implicit GEMM (kernels/conv/conv_implicit.c),
# 2.4x faster at ResNet-50's stem than im2col rows of 21 values on the
# 16-bit GEMM; its weight is tiny (9408 values).
MIN_LOWP_CONV_CHANNELS = 16


def conv_weight_16(L: Lowerer, w: Any, groups: int) -> Value | None:
    """A 2-D convolution's weight in 16 bits, read as it is by libair's
    channels-last conv kernels (kernels/conv/conv_nhwc_lowp.c), when the
    convolution has one group and enough input channels; grouped ones
    (depthwise) and narrow ones (a stem) keep a small f32 weight. None:
    lower the weight the ordinary way."""
    val = meta(w)
    if groups != 1 or not isinstance(val, torch.Tensor) or val.dim() != 4 or val.shape[1] < MIN_LOWP_CONV_CHANNELS:
        return None
    return _weight_16(L, w, 4)


def defer_weight_transpose(L: Lowerer, n: Node, lower: Any) -> Any:
    """For t(W) / transpose(W, 0, 1) / permute(W, [1, 0]) of a 16-bit 2-D
    weight: LAZY, remembering W for lowp_linear; lower(L, n) runs only if
    something else reads the transpose. Otherwise lower(L, n) now. Under
    weight_quantization a frozen weight is remembered quantized instead
    (lowering/quant.py), and PT2E's s8 weight behind its dequantize (lowering/pt2e.py)."""
    w = quantized_weight(L, n.args[0]) or pt2e_weight(L, n.args[0]) or _weight_16(L, n.args[0])
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
    if isinstance(w, QuantWeight):
        return quant_linear(L, x, w, bias)
    if isinstance(w, PT2EWeight):  # PT2E's int8 weight (lowering/pt2e.py); None: the f32 product
        return pt2e_linear(L, x, wt, w, bias)
    inputs = [L.value(x), w]
    if bias is not None:
        bv = meta(bias)
        if not isinstance(bv, torch.Tensor) or bv.dim() != 1:
            return None
        inputs.append(L.value(bias))
    return L.node("linear", inputs, {"has_bias": int(bias is not None)})

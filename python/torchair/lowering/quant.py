"""Weight-only quantization (``options={'weight_quantization': 'int8'|'int4'}``): the 2-D
weight of a linear, frozen as a constant, is quantized once at compile time into libair's
format (src/kernels/gemm_q/gemm_q.h): K cut into groups of ``group`` values, one f16 scale
per group, symmetric (no zero point), q = round(w / s): int8 with s = max|w| / 127; int4
as ggml's Q4_0, s = p / -8 for the group's value p of largest magnitude, q in [-8, 7], two
values a byte (max|w| / 7 leaves -8 unused: the small LLaMA's logits lost 0.01 of cosine). The graph holds only q and the scales: no f32 or
16-bit copy of the weight (the module keeps its own parameter, as it does under
mixed_precision). The product becomes libair's ``linear_q(x, q, scales[, bias])``:
activations stay f32, so the only error is the weights' rounding.

Group sizes (``weight_quantization_group_size``): int4 defaults to 32, llama.cpp's Q4_0
block (torchao's Int4WeightOnlyConfig defaults to 128, which saves 4% of the bytes and
costs accuracy on small models); int8 defaults to one group per row (per-channel, as
torchao's Int8WeightOnlyConfig): 8 bits leave the step small enough that a row's outliers
cost little, and the bytes are exactly 1/4 of fp32 plus 2 per row."""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

import torch
from torch.fx import Node

from torchair.lowering.core import Lowerer, Value, meta, storage_dtype

BLOCK = 32  # group sizes are multiples of this (gemm_q.h's KQ_BLOCK)
DEFAULT_GROUP = {"int8": 0, "int4": 32}  # 0: one group per row (per-channel)


@dataclass
class QuantWeight:
    """A frozen linear weight in libair's quantized format, as linear_q takes it."""

    q: Value
    scales: Value
    bits: int
    group: int
    n: int
    k: int


def group_for(fmt: str, group: int | None, k: int) -> int:
    """The group size a weight with k columns gets: per-channel (0) is the row rounded up
    to a block."""
    g = DEFAULT_GROUP[fmt] if group is None else group
    if g == 0:
        return max(BLOCK, -(-k // BLOCK) * BLOCK)
    return g


def quantize(w: torch.Tensor, bits: int, group: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(q, scales) of a 2-D weight, as kq_quantize in gemm_q_ref.c makes them: the scale
    rounded to f16 first and q computed from the rounded one. The f32 temporaries die here."""
    n, k = w.shape
    ng = -(-k // group)
    kpad = ng * group
    with torch.no_grad():
        wp = torch.nn.functional.pad(w.detach().float(), (0, kpad - k)).view(n, ng, group)
        if bits == 8:
            s16 = (wp.abs().amax(-1) / 127.0).to(torch.float16)
            lo, hi = -127.0, 127.0
        else:
            # ggml's Q4_0: the group's value of largest magnitude is q = -8 exactly
            peak = wp.gather(-1, wp.abs().argmax(-1, keepdim=True)).squeeze(-1)
            s16 = (peak / -8.0).to(torch.float16)
            lo, hi = -8.0, 7.0
        s = s16.float().unsqueeze(-1)
        qv = torch.where(s != 0, torch.round(wp / torch.where(s != 0, s, 1.0)), 0.0).clamp_(lo, hi)
        del wp
        qi = qv.to(torch.int8).view(n, kpad)
        del qv
        if bits == 8:
            return qi.contiguous(), s16.contiguous()
        # every 32 values: byte b holds value b (low nibble) and b + 16 (high), each + 8
        blocks = (qi + 8).to(torch.uint8).view(n, kpad // BLOCK, BLOCK)
        packed = blocks[..., : BLOCK // 2] | (blocks[..., BLOCK // 2 :] << 4)
        return packed.reshape(n, kpad // 2).contiguous(), s16.contiguous()


# Quantized copies by (id of the weight, bits, group), shared by every graph of the same
# weights (generate compiles 3) as lowp.shared_conversion shares 16-bit copies, and
# reused only while the weight is unchanged.
_SHARED: dict[tuple[int, int, int], tuple[Any, int, bytes, tuple[torch.Tensor, torch.Tensor]]] = {}


def _fingerprint(t: torch.Tensor) -> bytes:
    flat = t.detach().reshape(-1)
    n = flat.numel()
    picks = sorted({0, n - 1, *range(0, n, max(1, n // 16))}) if n else []
    return flat[picks].float().numpy().tobytes()


def shared_quantized(tensor: torch.Tensor, bits: int, group: int) -> tuple[torch.Tensor, torch.Tensor]:
    key = (id(tensor), bits, group)
    hit = _SHARED.get(key)
    stamp = _fingerprint(tensor)
    if hit is not None and hit[0]() is tensor and hit[1] == tensor._version and hit[2] == stamp:
        return hit[3]
    made = quantize(tensor, bits, group)
    ref = weakref.ref(tensor, lambda _: _SHARED.pop(key, None))
    _SHARED[key] = (ref, tensor._version, stamp, made)
    return made


def quantized_weight(L: Lowerer, src: Any) -> QuantWeight | None:
    """src's quantized value, if weight_quantization is on and src is a frozen 2-D float
    weight; else None."""
    fmt = getattr(L, "weight_quantization", None)
    if fmt is None or not isinstance(src, Node):
        return None
    tensor = L.const_tensors.get(src)
    if tensor is None or tensor.dim() != 2 or tensor.dtype not in (torch.float32, torch.bfloat16, torch.float16):
        return None
    val = meta(src)
    if not isinstance(val, torch.Tensor) or val.dtype != tensor.dtype:
        return None
    cache: dict[Node, QuantWeight] = L.__dict__.setdefault("_quant_cache", {})
    hit = cache.get(src)
    if hit is not None:
        return hit
    bits = 8 if fmt == "int8" else 4
    n, k = tensor.shape
    group = group_for(fmt, getattr(L, "weight_quantization_group", None), k)
    q, scales = shared_quantized(tensor, bits, group)
    qv = L.g.constant(q.data_ptr(), storage_dtype(q.dtype), list(q.shape), q, True)
    sv = L.g.constant(scales.data_ptr(), storage_dtype(torch.float16), list(scales.shape), scales, True)
    made = QuantWeight(qv, sv, bits, group, n, k)
    cache[src] = made
    L.__dict__.setdefault("quantized", []).append(
        (fmt, group, q.numel() * q.element_size() + scales.numel() * 2, n * k * 4)
    )
    return made


def linear_q(L: Lowerer, x: Any, w: QuantWeight, bias: Any = None) -> Value | None:
    """linear_q(x, q, scales[, bias]) when x has w's K features and the bias is 1-D; None
    otherwise (the caller lowers the product on f32). A 16-bit x or bias is f32 in the graph
    (lowering/core.py's LOW_PRECISION), as linear_q takes it."""
    floats = (torch.float32, torch.bfloat16, torch.float16)
    xv = meta(x)
    if not isinstance(xv, torch.Tensor) or xv.dtype not in floats or xv.dim() < 1 or xv.shape[-1] != w.k:
        return None
    inputs = [L.value(x), w.q, w.scales]
    if bias is not None:
        bv = meta(bias)
        if not isinstance(bv, torch.Tensor) or bv.dim() != 1 or bv.dtype not in floats:
            return None
        inputs.append(L.value(bias))
    return L.node("linear_q", inputs, {"bits": w.bits, "group": w.group, "has_bias": int(bias is not None)})

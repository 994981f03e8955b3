"""Lowerings of elementwise ops: unary, binary (a sum of zero pads as a cat
among them), comparisons, where, casts and clamps."""

from __future__ import annotations

from typing import Any

import torch
from torch.fx import Node

from torchair.errors import Unsupported
from torchair.lowering.core import (
    LOWERINGS,
    Lowerer,
    Value,
    air_dtype,
    arg,
    aten,
    is_float,
    lowers,
    meta,
    out_val,
    result_dtype,
)

_UNARY = {
    aten.neg.default: "neg",
    aten.abs.default: "abs",
    aten.exp.default: "exp",
    aten.log.default: "log",
    aten.log1p.default: "log1p",
    aten.expm1.default: "expm1",
    aten.sqrt.default: "sqrt",
    aten.rsqrt.default: "rsqrt",
    aten.sin.default: "sin",
    aten.cos.default: "cos",
    aten.tanh.default: "tanh",
    aten.sigmoid.default: "sigmoid",
    aten.erf.default: "erf",
    aten.relu.default: "relu",
    aten.silu.default: "silu",
    aten.hardswish.default: "hardswish",
    aten.hardsigmoid.default: "hardsigmoid",
    aten.reciprocal.default: "reciprocal",
    aten.floor.default: "floor",
    aten.ceil.default: "ceil",
    aten.round.default: "round",
    aten.trunc.default: "trunc",
    aten.sign.default: "sign",
    aten.logical_not.default: "logical_not",
    aten.bitwise_not.default: "bitwise_not",
    aten.isnan.default: "isnan",
}


def _unary(L: Lowerer, n: Node) -> Value:
    out = out_val(n)
    x = L.value(n.args[0])
    op = _UNARY[n.target]
    if op in ("logical_not", "isnan"):
        return L.node(op, [x])
    # float ops on integer inputs: torch promotes to the default float dtype
    return L.node(op, [L.cast(x, out.dtype)])


for _t in _UNARY:
    LOWERINGS[_t] = _unary


@lowers(aten.gelu.default)
def _gelu(L: Lowerer, n: Node) -> Value:
    approx = n.kwargs.get("approximate", n.args[1] if len(n.args) > 1 else "none")
    return L.node("gelu_tanh" if approx == "tanh" else "gelu", [L.value(n.args[0])])


@lowers(aten.hardtanh.default, aten.clamp.default, aten.clamp_min.default, aten.clamp_max.default)
def _clamp(L: Lowerer, n: Node) -> Value:
    out = out_val(n)
    x = L.cast(L.value(n.args[0]), out.dtype)
    if n.target == aten.hardtanh.default:
        lo, hi = arg(n, 1, "min_val", -1.0), arg(n, 2, "max_val", 1.0)
    elif n.target == aten.clamp_min.default:
        lo, hi = arg(n, 1, "min"), None
    elif n.target == aten.clamp_max.default:
        lo, hi = None, arg(n, 1, "max")
    else:
        lo, hi = arg(n, 1, "min"), arg(n, 2, "max")
    for b in (lo, hi):
        if b is not None and not isinstance(b, (int, float)):
            raise Unsupported("clamp bounds must be numbers")
    attrs = {"has_min": int(lo is not None), "has_max": int(hi is not None)}
    if lo is not None:
        attrs["min"] = float(lo)
    if hi is not None:
        attrs["max"] = float(hi)
    return L.node("clamp", [x], attrs)


@lowers(aten.clamp.Tensor)
def _clamp_tensor(L: Lowerer, n: Node) -> Value:
    # torch.clamp(x, lo, hi) == minimum(maximum(x, lo), hi), NaN included
    out = out_val(n)
    y = L.cast(L.value(n.args[0]), out.dtype)
    lo, hi = arg(n, 1, "min"), arg(n, 2, "max")
    if lo is not None:
        y = L.node("maximum", [y, L.operand(lo, out.dtype)])
    if hi is not None:
        y = L.node("minimum", [y, L.operand(hi, out.dtype)])
    return y if (lo is not None or hi is not None) else L.node("copy", [y])


@lowers(aten.leaky_relu.default)
def _leaky_relu(L: Lowerer, n: Node) -> Value:
    return L.node("leaky_relu", [L.value(n.args[0])], {"negative_slope": float(arg(n, 1, "negative_slope", 0.01))})


@lowers(aten.elu.default)
def _elu(L: Lowerer, n: Node) -> Value:
    """ELU, and SELU and CELU through its arguments: one elementwise op."""
    alpha, scale, input_scale = (arg(n, i, k, 1.0) for i, k in ((1, "alpha"), (2, "scale"), (3, "input_scale")))
    if any(not isinstance(v, (int, float)) for v in (alpha, scale, input_scale)):
        raise Unsupported("elu with a symbolic alpha or scale")
    return L.node("elu", [L.value(n.args[0])],
                  {"alpha": float(alpha), "scale": float(scale), "input_scale": float(input_scale)})


_BINARY = {
    aten.add.Tensor: "add",
    aten.add.Scalar: "add",
    aten.sub.Tensor: "sub",
    aten.sub.Scalar: "sub",
    aten.rsub.Scalar: "rsub",
    aten.rsub.Tensor: "rsub",
    aten.mul.Tensor: "mul",
    aten.mul.Scalar: "mul",
    aten.div.Tensor: "div",
    aten.div.Scalar: "div",
    aten.pow.Tensor_Scalar: "pow",
    aten.pow.Tensor_Tensor: "pow",
    aten.pow.Scalar: "pow",
    aten.maximum.default: "maximum",
    aten.minimum.default: "minimum",
    aten.remainder.Tensor: "remainder",
    aten.remainder.Scalar: "remainder",
    aten.fmod.Tensor: "fmod",
    aten.fmod.Scalar: "fmod",
    aten.floor_divide.default: "floor_divide",
    aten.bitwise_and.Tensor: "bitwise_and",
    aten.bitwise_and.Scalar: "bitwise_and",
    aten.bitwise_or.Tensor: "bitwise_or",
    aten.bitwise_or.Scalar: "bitwise_or",
    aten.bitwise_xor.Tensor: "bitwise_xor",
    aten.bitwise_xor.Scalar: "bitwise_xor",
}


def _zero_pad_window(n: Any) -> tuple[int, int, Node] | None:
    """(dim, start, x) for constant_pad_nd(x, pad, 0) that pads one dim of x
    and crops none; else None."""
    if not isinstance(n, Node) or n.op != "call_function" or n.target != aten.constant_pad_nd.default:
        return None
    x, pad = n.args[:2]
    value = arg(n, 2, "value", 0)
    if not isinstance(value, (int, float)) or value != 0 or any(not isinstance(p, int) or p < 0 for p in pad):
        return None
    padded = [i for i in range(len(pad) // 2) if pad[2 * i] or pad[2 * i + 1]]
    if len(padded) != 1 or not isinstance(x, Node):
        return None
    return meta(x).dim() - 1 - padded[0], pad[2 * padded[0]], x


# adds deep enough to be something else than a split's gradients
_PAD_SUM_DEPTH = 16


def _zero_pad_parts(n: Any, like: torch.Tensor, depth: int = 0) -> tuple[int, list[tuple[int, Node]]] | None:
    """n as a sum of zero pads along one dim, each of like's shape and dtype:
    (dim, [(start, unpadded source)]), or None. An add both of whose
    operands are pads or adds is looked into, to a bounded depth: every add
    of a residual stream asks, and must not walk the stream (quadratic, and
    Python's recursion limit past a thousand layers)."""
    m = meta(n) if isinstance(n, Node) else None
    if not isinstance(m, torch.Tensor) or m.shape != like.shape or m.dtype != like.dtype:
        return None
    if (w := _zero_pad_window(n)) is not None:
        return w[0], [(w[1], w[2])]
    if n.target != aten.add.Tensor or n.kwargs.get("alpha", 1) != 1 or len(n.args) != 2 or depth >= _PAD_SUM_DEPTH:
        return None
    if not all(isinstance(v, Node) and (v.target == aten.add.Tensor or _zero_pad_window(v)) for v in n.args):
        return None
    a = _zero_pad_parts(n.args[0], like, depth + 1)
    b = _zero_pad_parts(n.args[1], like, depth + 1) if a is not None else None
    if a is None or b is None or a[0] != b[0]:
        return None
    return a[0], a[1] + b[1]


def _pads_as_cat(L: Lowerer, n: Node) -> Value | None:
    """A sum of zero pads whose unpadded windows do not overlap, as one cat
    of the windows (and zeros between them). It is select_backward's (see
    decompositions.py) in a ViT's qkv split: three pads of [3, B, H, T, D]
    and two adds, five full-size passes, where the cat writes once. Values
    as the sum gives them, but for -0.0, which the cat keeps (as eager's own
    select_backward does) where + 0.0 made it 0.0."""
    out = out_val(n)
    parts = _zero_pad_parts(n, out)
    if parts is None or len(parts[1]) < 2:
        return None
    d, windows = parts
    if not isinstance(out.shape[d], int) or any(not isinstance(meta(src).shape[d], int) for _, src in windows):
        return None
    if any(isinstance(L.env.get(src), (tuple, type(None))) for _, src in windows):
        return None  # a source lowered elsewhere (check_node lowers the add alone)
    windows.sort(key=lambda w: w[0])
    pieces, at = [], 0
    for start, src in windows:
        if start < at:
            return None  # overlapping windows: a sum, not a cat
        if start > at:
            block = list(out.shape[:d]) + [start - at] + list(out.shape[d + 1:])
            pieces.append(L.node("full", [], {"shape": L.dims(block), "value": 0.0, "dtype": air_dtype(out.dtype)}))
        pieces.append(L.value(src))
        at = start + meta(src).shape[d]
    if at < out.shape[d]:
        block = list(out.shape[:d]) + [out.shape[d] - at] + list(out.shape[d + 1:])
        pieces.append(L.node("full", [], {"shape": L.dims(block), "value": 0.0, "dtype": air_dtype(out.dtype)}))
    return L.node("cat", pieces, {"axis": d})


def _binary(L: Lowerer, n: Node) -> Value:
    out = out_val(n)
    op = _BINARY[n.target]
    a, b = n.args[0], n.args[1]
    if n.target == aten.add.Tensor and (joined := _pads_as_cat(L, n)) is not None:
        return joined
    if op == "pow" and isinstance(b, (int, float)) and not isinstance(b, bool):
        if b == 2:
            x = L.operand(a, out.dtype)
            return L.node("mul", [x, x])
        if b == 0.5 and is_float(out.dtype):
            return L.node("sqrt", [L.operand(a, out.dtype)])
        if b == 1:
            return L.node("copy", [L.operand(a, out.dtype)])
    alpha = n.kwargs.get("alpha", n.args[2] if len(n.args) > 2 else 1)
    if op == "rsub":
        a, b, op = b, a, "sub"
    x, y = L.operand(a, out.dtype), L.operand(b, out.dtype)
    if alpha != 1 and op in ("add", "sub"):
        y = L.node("mul", [y, L.scalar(alpha, out.dtype)])
    if n.target == aten.div.Tensor and n.kwargs.get("rounding_mode") is not None:
        raise Unsupported("div with rounding_mode")
    return L.node(op, [x, y])


for _t in _BINARY:
    LOWERINGS[_t] = _binary


@lowers("prims.fma.default")  # registered by torch._inductor.inductor_prims
def _fma(L: Lowerer, n: Node) -> Value:
    """a * b + c: lerp's decomposition (AdamW's moment update) gives it. Two roundings here
    where the prim has one: within an ulp of eager's lerp, which is not an fma either."""
    out = out_val(n)
    a, b, c = (L.operand(v, out.dtype) for v in n.args[:3])
    return L.node("add", [L.node("mul", [a, b]), c])


@lowers(aten.div.Tensor_mode)
def _div_mode(L: Lowerer, n: Node) -> Value:
    out = out_val(n)
    mode = n.kwargs.get("rounding_mode", n.args[2] if len(n.args) > 2 else None)
    x, y = L.operand(n.args[0], out.dtype), L.operand(n.args[1], out.dtype)
    if mode == "floor":
        return L.node("floor_divide", [x, y])
    if mode == "trunc" and is_float(out.dtype):
        return L.node("trunc", [L.node("div", [x, y])])
    if mode is None and is_float(out.dtype):
        return L.node("div", [x, y])
    raise Unsupported(f"div rounding_mode={mode!r} on {out.dtype}")


_COMPARE = {
    aten.eq.Tensor: "eq",
    aten.eq.Scalar: "eq",
    aten.ne.Tensor: "ne",
    aten.ne.Scalar: "ne",
    aten.lt.Tensor: "lt",
    aten.lt.Scalar: "lt",
    aten.le.Tensor: "le",
    aten.le.Scalar: "le",
    aten.gt.Tensor: "gt",
    aten.gt.Scalar: "gt",
    aten.ge.Tensor: "ge",
    aten.ge.Scalar: "ge",
    aten.logical_and.default: "logical_and",
    aten.logical_or.default: "logical_or",
    aten.logical_xor.default: "logical_xor",
}


def _compare(L: Lowerer, n: Node) -> Value:
    a, b = n.args[0], n.args[1]
    dt = result_dtype(a, b)
    return L.node(_COMPARE[n.target], [L.operand(a, dt), L.operand(b, dt)])


for _t in _COMPARE:
    LOWERINGS[_t] = _compare


@lowers(aten.where.self, aten.where.ScalarSelf, aten.where.ScalarOther, aten.where.Scalar)
def _where(L: Lowerer, n: Node) -> Value:
    out = out_val(n)
    cond = L.cast(L.value(n.args[0]), torch.bool)
    return L.node("where", [cond, L.operand(n.args[1], out.dtype), L.operand(n.args[2], out.dtype)])


@lowers(aten._to_copy.default, aten.to.dtype)
def _to_copy(L: Lowerer, n: Node) -> Value:
    out = out_val(n)
    if out.device.type != "cpu":
        raise Unsupported(f"copy to {out.device}")
    x = L.value(n.args[0])
    if L.dtype_of(x) == air_dtype(out.dtype):
        return L.node("copy", [x])
    return L.cast(x, out.dtype)


@lowers(aten.scalar_tensor.default)
def _scalar_tensor(L: Lowerer, n: Node) -> Value:
    out = out_val(n)
    return L.node("copy", [L.scalar(n.args[0], out.dtype)])

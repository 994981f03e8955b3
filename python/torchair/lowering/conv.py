"""Lowerings of convolution (transposed too, as GEMM and col2im), constant
padding, col2im, inference batch norm and pooling."""

from __future__ import annotations

import math
from typing import Any

from torch.fx import Node

from torchair.errors import Unsupported
from torchair.lowering.core import Lowerer, Value, air_dtype, arg, aten, is_float, lowers, meta, out_val
from torchair.lowering.lowp import conv_weight_16
from torchair.lowering.pt2e import pt2e_conv
from torchair.lowering.shape import _slice_bounds


@lowers(aten.convolution.default)
def _convolution(L: Lowerer, n: Node) -> Value:
    x, w, b, stride, padding, dilation, transposed, _output_padding, groups = n.args
    if isinstance(groups, Node):
        raise Unsupported("convolution with symbolic groups")
    if transposed:
        return _conv_transpose2d(L, n)
    v = pt2e_conv(L, n)  # PT2E's int8 convolution (lowering/pt2e.py)
    if v is not None:
        return v
    rank = meta(x).dim()
    if rank not in (3, 4):
        raise Unsupported(f"{rank - 2}-d convolution (only 1-d and 2-d)")
    for v in (stride, padding, dilation):
        if any(isinstance(e, Node) for e in v):
            raise Unsupported("convolution with a symbolic stride, padding or dilation")
    xv = L.value(x)
    wv = conv_weight_16(L, w, int(groups)) if rank == 4 else None
    if wv is None:
        wv = L.value(w)
    stride, padding, dilation = list(stride), list(padding), list(dilation)
    if rank == 3:
        # a 1-d convolution is a 2-d one over [N, C, 1, L] with a [O, C/g, 1, K] kernel;
        # shapes from libair's own dims, as a symbolic length (s//5 - 1 after a
        # stride-5 conv) is bound whole and the output's (s//10 - 1) could not be
        # written from it, but conv2d computes it
        wm = meta(w)
        n0, c0, l0 = L.shape_of(xv)
        xv = L.node("reshape", [xv], {"shape": [n0, c0, 1, l0]})
        wv = L.node("reshape", [wv], {"shape": L.dims([wm.shape[0], wm.shape[1], 1, wm.shape[2]])})
        stride, padding, dilation = [1, stride[-1]], [0, padding[-1]], [1, dilation[-1]]
    inputs = [xv, wv]
    if b is not None:
        inputs.append(L.value(b))
    attrs = {
        "stride": stride,
        "padding": padding,
        "dilation": dilation,
        "groups": int(groups),
        "has_bias": int(b is not None),
    }
    y = L.node("conv2d", inputs, attrs)
    if rank == 3:
        d = L.shape_of(y)
        y = L.node("reshape", [y], {"shape": [d[0], d[1], d[3]]})
    return y


# Groups of a transposed convolution lowered one GEMM and col2im each; more
# (a depthwise one: a GEMM per channel) fall back.
MAX_TRANSPOSED_GROUPS = 8


def _conv_transpose2d(L: Lowerer, n: Node) -> Value:
    """A transposed convolution as the GEMM it is, then col2im: each input
    pixel's C channels times the weight give its KH x KW x O output taps, and
    col2im adds every tap, and the bias, into the output pixel it lands on
    (stride, padding and dilation as the forward convolution's;
    output_padding only makes the output larger). The pixels of every image
    are the GEMM's rows ([N*H*W, C], a permute of x), so the weight
    ([C, KH*KW*O], permuted once: folded when it is a constant) is one B
    operand for the whole batch, packed at compile time; col2im then works
    channels-last (each tap's O channels contiguous) and one permute brings
    the output back to NCHW. Groups (up to MAX_TRANSPOSED_GROUPS) are a GEMM
    and col2im each on their slices of the channels, joined by a cat."""
    x, w, b, stride, padding, dilation, _transposed, output_padding, groups = n.args
    xm, wm, out = meta(x), meta(w), out_val(n)
    if xm.dim() != 4:
        raise Unsupported(f"{xm.dim() - 2}-d transposed convolution (only 2-d)")
    if any(not isinstance(p, int) or p >= s for p, s in zip(output_padding, stride)):
        # allowed by torch when dilation exceeds stride; col2im's blocks would not tile it
        raise Unsupported("transposed convolution with output_padding >= stride")
    if not isinstance(groups, int) or groups > MAX_TRANSPOSED_GROUPS:
        raise Unsupported(f"transposed convolution with {groups} groups (at most {MAX_TRANSPOSED_GROUPS})")
    for v in (stride, padding, dilation):
        if any(isinstance(e, Node) for e in v):
            raise Unsupported("transposed convolution with a symbolic stride, padding or dilation")
    N, C, H, W = xm.shape
    Og, KH, KW = wm.shape[1], wm.shape[2], wm.shape[3]
    Cg = C // groups
    pixels = L.node("permute", [L.value(x)], {"perm": [0, 2, 3, 1]})
    pixels = L.node("reshape", [pixels], {"shape": L.dims([N * H * W, C])})
    weight = L.node("permute", [L.value(w)], {"perm": [0, 2, 3, 1]})  # [C, KH, KW, Og]
    weight = L.node("reshape", [weight], {"shape": L.dims([C, KH * KW * Og])})
    attrs = {"output_size": L.dims(out.shape[2:]), "kernel": [KH, KW], "dilation": list(dilation),
             "padding": list(padding), "stride": list(stride), "channels_last": 1, "has_bias": int(b is not None)}
    parts = []
    for g in range(groups):  # each group its own GEMM and col2im, joined on channels
        rows, wg = pixels, weight
        if groups > 1:
            rows = L.node("slice", [pixels], {"axis": 1, "start": g * Cg, "end": (g + 1) * Cg, "step": 1})
            wg = L.node("slice", [weight], {"axis": 0, "start": g * Cg, "end": (g + 1) * Cg, "step": 1})
        cols = L.node("reshape", [L.node("mm", [rows, wg])], {"shape": L.dims([N, H * W, KH * KW * Og])})
        inputs = [cols]
        if b is not None:
            bias = L.value(b)
            if groups > 1:
                bias = L.node("slice", [bias], {"axis": 0, "start": g * Og, "end": (g + 1) * Og, "step": 1})
            inputs.append(bias)
        parts.append(L.node("col2im", inputs, attrs))
    y = parts[0] if groups == 1 else L.node("cat", parts, {"axis": 3})
    return L.node("permute", [y], {"perm": [0, 3, 1, 2]})


@lowers(aten.constant_pad_nd.default)
def _constant_pad(L: Lowerer, n: Node) -> Value:
    """F.pad with a constant: pairs of (before, after) from the last dim
    backwards. A negative amount crops (a slice); a positive one joins blocks
    of the fill value on that side (cat with full)."""
    x, pad = n.args[:2]
    value = arg(n, 2, "value", 0)
    xm = meta(x)
    if any(not isinstance(p, int) for p in pad) or not isinstance(value, (int, float, bool)):
        raise Unsupported("constant_pad_nd with a symbolic pad or value")
    if len(pad) % 2 or len(pad) // 2 > xm.dim():
        raise Unsupported(f"constant_pad_nd with pad {list(pad)} for rank {xm.dim()}")
    if isinstance(value, float) and math.isnan(value) and not is_float(xm.dtype):
        raise Unsupported("NaN fill of an integer tensor")
    y, shape = L.value(x), list(xm.shape)
    for i in range(len(pad) // 2):
        d, before, after = xm.dim() - 1 - i, pad[2 * i], pad[2 * i + 1]
        if before < 0 or after < 0:
            start, end = _slice_bounds(L, shape[d], max(-before, 0), shape[d] - max(-after, 0))
            y = L.node("slice", [y], {"axis": d, "start": start, "end": end, "step": 1})
            shape[d] = shape[d] - max(-before, 0) - max(-after, 0)
        parts = []
        for amount in (before, after):
            if amount > 0:
                block = shape[:d] + [amount] + shape[d + 1:]
                parts.append(L.node("full", [], {"shape": L.dims(block), "value": float(value),
                                                 "dtype": air_dtype(xm.dtype)}))
        if parts:
            parts.insert(1 if before > 0 else 0, y)
            y = L.node("cat", parts, {"axis": d})
            shape[d] = shape[d] + max(before, 0) + max(after, 0)
    return y


@lowers(aten.col2im.default)
def _col2im(L: Lowerer, n: Node) -> Value:
    """torch's fold; an unbatched [C*KH*KW, L] input gains and loses a batch of one."""
    x, output_size, kernel, dilation, padding, stride = n.args[:6]
    xm = meta(x)
    if any(isinstance(e, Node) for e in list(kernel) + list(dilation) + list(padding) + list(stride)):
        raise Unsupported("col2im with a symbolic kernel, dilation, padding or stride")
    xv = L.value(x)
    if xm.dim() == 2:
        xv = L.node("reshape", [xv], {"shape": L.dims([1] + list(xm.shape))})
    y = L.node("col2im", [xv], {"output_size": L.dims(list(output_size)), "kernel": list(kernel),
                                "dilation": list(dilation), "padding": list(padding), "stride": list(stride)})
    if xm.dim() == 2:
        y = L.node("reshape", [y], {"shape": L.dims(out_val(n).shape)})
    return y


@lowers(aten._native_batch_norm_legit_no_training.default, outputs=(0,))
def _batch_norm(L: Lowerer, n: Node) -> tuple[Value | None, ...]:
    x, w, b, mean, var, _momentum, eps = n.args
    inputs = [L.value(x)]
    if w is not None:
        inputs.append(L.value(w))
    if b is not None:
        inputs.append(L.value(b))
    inputs += [L.value(mean), L.value(var)]
    attrs = {"eps": float(eps), "has_weight": int(w is not None), "has_bias": int(b is not None)}
    return (L.node("batch_norm", inputs, attrs), None, None)


def _pair(v: Any, default: int) -> list[int]:
    if isinstance(v, Node) or (isinstance(v, (list, tuple)) and any(isinstance(e, Node) for e in v)):
        raise Unsupported("a symbolic kernel size, stride, padding or dilation")
    if v is None or (isinstance(v, (list, tuple)) and len(v) == 0):
        return [default, default]
    if isinstance(v, int):
        return [v, v]
    return [int(v[0]), int(v[-1])] if len(v) == 1 else [int(v[0]), int(v[1])]


@lowers(aten.max_pool2d_with_indices.default, outputs=(0,))
def _max_pool(L: Lowerer, n: Node) -> tuple[Value | None, ...]:
    kernel = _pair(n.args[1], 1)
    stride = _pair(arg(n, 2, "stride", None), 0)
    if stride == [0, 0]:
        stride = kernel
    attrs = {
        "kernel": kernel,
        "stride": stride,
        "padding": _pair(arg(n, 3, "padding", 0), 0),
        "dilation": _pair(arg(n, 4, "dilation", 1), 1),
        "ceil_mode": int(bool(arg(n, 5, "ceil_mode", False))),
    }
    return (L.node("max_pool2d", [L.value(n.args[0])], attrs), None)


@lowers(aten.adaptive_max_pool2d.default, outputs=(0,))
def _adaptive_max_pool(L: Lowerer, n: Node) -> tuple[Value | None, ...]:
    """Adaptive max pooling where its windows are a plain pooling's: to 1x1 an
    amax over H and W (a global max pool); to sizes that divide the input, a
    max_pool2d with kernel = stride = input / output. Other sizes (uneven,
    overlapping windows) fall back, and so does a use of the indices."""
    x, size = n.args[:2]
    xm = meta(x)
    H, W = xm.shape[-2], xm.shape[-1]
    size = [size, size] if isinstance(size, int) else list(size)
    if list(size) == [1, 1]:
        return (L.node("amax", [L.value(x)], {"axes": [xm.dim() - 2, xm.dim() - 1], "keepdim": 1}), None)
    if not all(isinstance(v, int) and v > 0 for v in [H, W] + size) or H % size[0] or W % size[1]:
        raise Unsupported(f"adaptive max pool of {H}x{W} to {size[0]}x{size[1]} (uneven windows)")
    kernel = [H // size[0], W // size[1]]
    attrs = {"kernel": kernel, "stride": kernel, "padding": [0, 0], "dilation": [1, 1], "ceil_mode": 0}
    return (L.node("max_pool2d", [L.value(x)], attrs), None)


@lowers(aten.avg_pool2d.default)
def _avg_pool(L: Lowerer, n: Node) -> Value:
    kernel = _pair(n.args[1], 1)
    stride = _pair(arg(n, 2, "stride", None), 0)
    if stride == [0, 0]:
        stride = kernel
    divisor = arg(n, 6, "divisor_override", None)
    attrs = {
        "kernel": kernel,
        "stride": stride,
        "padding": _pair(arg(n, 3, "padding", 0), 0),
        "ceil_mode": int(bool(arg(n, 4, "ceil_mode", False))),
        "count_include_pad": int(bool(arg(n, 5, "count_include_pad", True))),
        "divisor_override": int(divisor or 0),
    }
    return L.node("avg_pool2d", [L.value(n.args[0])], attrs)


@lowers(aten._adaptive_avg_pool2d.default, aten.adaptive_avg_pool2d.default)
def _adaptive_avg_pool(L: Lowerer, n: Node) -> Value:
    return L.node("adaptive_avg_pool2d", [L.value(n.args[0])], {"output_size": _pair(n.args[1], 1)})

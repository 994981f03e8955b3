"""Lowerings of a training step's convolution and max-pooling backward.
aten.convolution_backward goes to libair's conv2d_backward_input and
conv2d_backward_weight, and the bias's gradient is a sum of grad_out; only
the gradients output_mask asks for are computed, the others are None, as in
eager. Transposed convolutions and 3-d ones fall back. A max pool whose
indices are used (by its backward) is max_pool2d_indices, and its backward
max_pool2d_backward scatters grad_out to them; a max pool whose indices
nobody reads stays conv.py's plain max_pool2d."""

from __future__ import annotations

import torch
from torch.fx import Node

from torchair.errors import Unsupported
import operator

from torchair.lowering.conv import _max_pool, _pair
from torchair.lowering.core import Lowerer, Value, arg, aten, lowers, meta


@lowers(aten.convolution_backward.default)
def _convolution_backward(L: Lowerer, n: Node) -> tuple[Value | None, ...]:
    dy, x, w, _bias_sizes, stride, padding, dilation, transposed, _output_padding, groups, mask = n.args
    if transposed:
        raise Unsupported("backward of a transposed convolution")
    if not isinstance(groups, int):
        raise Unsupported("convolution backward with symbolic groups")
    for v in (stride, padding, dilation):
        if any(isinstance(e, Node) for e in v):
            raise Unsupported("convolution backward with a symbolic stride, padding or dilation")
    xm, wm, dym = meta(x), meta(w), meta(dy)
    rank = dym.dim()
    if rank not in (3, 4):
        raise Unsupported(f"{rank - 2}-d convolution backward (only 1-d and 2-d)")
    for t in (xm, wm, dym):
        if t.dtype not in (torch.float32, torch.float64):
            raise Unsupported(f"convolution backward in {t.dtype} (f32 and f64 only)")
    if len({xm.dtype, wm.dtype, dym.dtype}) != 1:
        raise Unsupported("convolution backward of mixed dtypes")
    stride, padding, dilation = list(stride), list(padding), list(dilation)
    dyv = L.value(dy)
    size = list(xm.shape[2:])
    kernel = list(wm.shape[2:])
    if rank == 3:
        # as the forward: a 1-d convolution is a 2-d one over [N, C, 1, L]
        nd, od, ld = L.shape_of(dyv)
        dyv = L.node("reshape", [dyv], {"shape": [nd, od, 1, ld]})
        stride, padding, dilation = [1, stride[-1]], [0, padding[-1]], [1, dilation[-1]]
        size, kernel = [1] + size, [1] + kernel
    if any(not isinstance(k, int) for k in kernel):
        raise Unsupported("convolution backward with a symbolic kernel size")
    conv = {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups}
    dx = dw = db = None
    if mask[0]:
        wv = L.value(w)
        if rank == 3:
            wv = L.node("reshape", [wv], {"shape": L.dims([wm.shape[0], wm.shape[1], 1, wm.shape[2]])})
        dx = L.node("conv2d_backward_input", [dyv, wv], {**conv, "input_size": L.dims(size)})
        if rank == 3:
            d = L.shape_of(dx)
            dx = L.node("reshape", [dx], {"shape": [d[0], d[1], d[3]]})
    if mask[1]:
        xv = L.value(x)
        if rank == 3:
            nd, cd, ld = L.shape_of(xv)
            xv = L.node("reshape", [xv], {"shape": [nd, cd, 1, ld]})
        dw = L.node("conv2d_backward_weight", [dyv, xv], {**conv, "kernel": kernel})
        if rank == 3:
            dw = L.node("reshape", [dw], {"shape": L.dims(list(wm.shape))})
    if mask[2]:
        db = L.node("sum", [dyv], {"axes": [0, 2, 3], "keepdim": 0})
    return (dx, dw, db)


def _indices_used(n: Node) -> bool:
    return any(u.target is not operator.getitem or u.args[1] != 0 for u in n.users)


# replaces conv.py's entry (registered before this module is imported), which
# gave no indices
@lowers(aten.max_pool2d_with_indices.default, outputs=(0, 1))
def _max_pool_with_indices(L: Lowerer, n: Node) -> tuple[Value | None, ...]:
    if not _indices_used(n):
        return _max_pool(L, n)
    kernel = _pair(n.args[1], 1)
    stride = _pair(arg(n, 2, "stride", None), 0)
    attrs = {
        "kernel": kernel,
        "stride": kernel if stride == [0, 0] else stride,
        "padding": _pair(arg(n, 3, "padding", 0), 0),
        "dilation": _pair(arg(n, 4, "dilation", 1), 1),
        "ceil_mode": int(bool(arg(n, 5, "ceil_mode", False))),
    }
    y, idx = L.node("max_pool2d_indices", [L.value(n.args[0])], attrs)
    return (y, idx)


@lowers(aten.max_pool2d_with_indices_backward.default)
def _max_pool_backward(L: Lowerer, n: Node) -> Value:
    dy, x = n.args[:2]
    indices = arg(n, 7, "indices", None)
    xm = meta(x)
    if xm.dtype not in (torch.float32, torch.float64) or meta(dy).dtype != xm.dtype:
        raise Unsupported(f"max_pool2d backward in {xm.dtype} (f32 and f64 only)")
    return L.node("max_pool2d_backward", [L.value(dy), L.value(indices)],
                  {"input_size": L.dims(list(xm.shape[-2:]))})

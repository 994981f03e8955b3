"""Lowerings of ops that reshape, permute, slice, join or split tensors, and of
getitem on multi-output ops; slice bounds on symbolic sizes as dim expressions."""

from __future__ import annotations

import operator
from typing import Any

import sympy
import torch
from torch.fx import Node

from torchair.errors import Unsupported
from torchair.lowering.lowp import defer_weight_transpose
from torchair.lowering.core import (
    _DIM_MAX,
    _DIM_MIN,
    _DIM_SUB,
    _INT64_MAX,
    Lowerer,
    Value,
    arg,
    aten,
    lowers,
    meta,
    norm_axis,
    out_val,
)


@lowers(
    aten.view.default,
    aten._unsafe_view.default,
    aten.reshape.default,
    aten.unsqueeze.default,
    aten.squeeze.dim,
    aten.squeeze.dims,
    aten.squeeze.default,
    aten.alias.default,
    aten.detach.default,
    aten.flatten.using_ints,
    aten.lift_fresh_copy.default,
)
def _reshape(L: Lowerer, n: Node) -> Value:
    out = out_val(n)
    return L.node("reshape", [L.value(n.args[0])], {"shape": L.dims(out.shape)})


@lowers(aten.clone.default)
def _clone(L: Lowerer, n: Node) -> Value:
    return L.node("copy", [L.value(n.args[0])])


@lowers(aten.permute.default)
def _permute(L: Lowerer, n: Node) -> Value:
    if list(n.args[1]) in ([1, 0], [-1, -2], [1, -2], [-1, 0]):
        return defer_weight_transpose(L, n, _permute_now)
    return _permute_now(L, n)


def _permute_now(L: Lowerer, n: Node) -> Value:
    x, perm = L.value(n.args[0]), list(n.args[1])
    sizes = meta(n.args[0]).shape
    moved = [d % len(sizes) for d in perm if not (isinstance(sizes[d], int) and sizes[d] == 1)]
    if moved == sorted(moved):
        # only dims of size 1 move: the same memory order, a reshape (no copy)
        return L.node("reshape", [x], {"shape": L.dims(out_val(n).shape)})
    return L.node("permute", [x], {"perm": perm})


@lowers(aten.t.default, aten.transpose.int)
def _transpose(L: Lowerer, n: Node) -> Value:
    return defer_weight_transpose(L, n, _transpose_now)


def _transpose_now(L: Lowerer, n: Node) -> Value:
    x = L.value(n.args[0])
    rank = len(L.shape_of(x))
    if n.target == aten.t.default:
        d0, d1 = 0, min(1, rank - 1)
    else:
        d0, d1 = norm_axis(n.args[1], rank), norm_axis(n.args[2], rank)
    perm = list(range(rank))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return L.node("permute", [x], {"perm": perm})


@lowers(aten.expand.default)
def _expand(L: Lowerer, n: Node) -> Value:
    out = out_val(n)
    return L.node("expand", [L.value(n.args[0])], {"shape": L.dims(out.shape)})


@lowers(aten.repeat.default)
def _repeat(L: Lowerer, n: Node) -> Value:
    """x.repeat(reps) tiles x: each dim s (with leading 1s for extra reps)
    becomes a new dim of its rep count before it, expanded, then the pairs
    merge: [1, s0, 1, s1] -> [r0, s0, r1, s1] -> [r0 * s0, r1 * s1]."""
    x, reps = n.args[:2]
    xm = meta(x)
    if any(not isinstance(r, int) for r in reps) or len(reps) < xm.dim():
        raise Unsupported("repeat with symbolic or too few repeats")
    shape = [1] * (len(reps) - xm.dim()) + list(xm.shape)
    split = [d for s in shape for d in (1, s)]
    paired = [d for r, s in zip(reps, shape) for d in (r, s)]
    y = L.node("reshape", [L.value(x)], {"shape": L.dims(split)})
    y = L.node("expand", [y], {"shape": L.dims(paired)})
    return L.node("reshape", [y], {"shape": L.dims(out_val(n).shape)})


def _nonnegative(e: sympy.Expr) -> bool:
    """Whether a size expression cannot be negative; sympy does not know it
    of ceil(a / b) or floor(a / b) of sizes (CeilToInt(IntTrueDiv(a, b)))."""
    if e.is_nonnegative:
        return True
    if type(e).__name__ in ("CeilToInt", "FloorToInt") and type(e.args[0]).__name__ == "IntTrueDiv":
        return all(_nonnegative(a) for a in e.args[0].args)
    return False


def _size_bound(b: Any) -> Any:
    """A slice bound that is a graph node holding a SymInt which cannot be
    negative (an expression of sizes): that SymInt; anything else as it is."""
    v = meta(b) if isinstance(b, Node) else b
    if isinstance(v, torch.SymInt) and _nonnegative(v.node.expr):
        return v
    return b


def _slice_bounds(L: Lowerer, size: Any, start: Any, end: Any) -> tuple[int, int]:
    """Normalizes Python slice bounds to [start, end) within [0, size]."""
    if isinstance(size, int) and isinstance(start, int) and isinstance(end, int):
        s = max(0, min(size, start + size if start < 0 else start))
        e = max(s, min(size, end + size if end < 0 else end))
        return s, e
    size_d = L.dim(size)
    if isinstance(start, int) and start >= 0 and isinstance(end, int) and end >= _INT64_MAX // 2:
        return L.g.dim_expr(_DIM_MIN, start, size_d), size_d
    end = _size_bound(end)
    if not isinstance(start, int) or not isinstance(end, (int, torch.SymInt)):
        raise Unsupported("slice with symbolic bounds")
    # int bounds on a symbolic size (wav2vec2's positional conv output [..., :-1]),
    # or a size-like SymInt end (BERT's position_ids[:, :s]): Python's clamping
    # written as dim expressions, evaluated per call; a negative bound is
    # size - min(size, -b), as no dim may evaluate below 0
    def bound(b: int | torch.SymInt) -> int:
        if isinstance(b, torch.SymInt):
            return L.g.dim_expr(_DIM_MIN, L.dim(b), size_d)
        if b >= _INT64_MAX // 2:
            return size_d
        if b >= 0:
            return L.g.dim_expr(_DIM_MIN, b, size_d)
        return L.g.dim_expr(_DIM_SUB, size_d, L.g.dim_expr(_DIM_MIN, size_d, -b))

    s = bound(start)
    return s, L.g.dim_expr(_DIM_MAX, s, bound(end))


@lowers(aten.slice.Tensor)
def _slice(L: Lowerer, n: Node) -> Value:
    x = L.value(n.args[0])
    xv = meta(n.args[0])
    rank = xv.dim()
    axis = norm_axis(arg(n, 1, "dim", 0), rank)
    start = arg(n, 2, "start", None)
    end = arg(n, 3, "end", None)
    step = arg(n, 4, "step", 1)
    start = 0 if start is None else start
    end = _INT64_MAX if end is None else end
    start, end = _slice_bounds(L, xv.shape[axis], start, end)
    return L.node("slice", [x], {"axis": axis, "start": start, "end": end, "step": int(step)})


@lowers(aten.select.int)
def _select(L: Lowerer, n: Node) -> Value:
    out = out_val(n)
    xv = meta(n.args[0])
    axis = norm_axis(n.args[1], xv.dim())
    index = n.args[2]
    size = xv.shape[axis]
    if not isinstance(index, int):
        raise Unsupported("select with a symbolic index")
    if isinstance(size, int):
        if index < 0:
            index += size
        start, end = index, index + 1
    else:
        # an int index into a symbolic size (RoBERTa's [:, 0] at a second
        # length): the slice's clamped bounds, evaluated per call; an index
        # out of range leaves an empty slice, which the reshape refuses
        start, end = _slice_bounds(L, size, index, _INT64_MAX if index == -1 else index + 1)
    s = L.node("slice", [L.value(n.args[0])], {"axis": axis, "start": start, "end": end, "step": 1})
    return L.node("reshape", [s], {"shape": L.dims(out.shape)})


@lowers(aten.copy.default)
def _copy(L: Lowerer, n: Node) -> Value:
    """copy(self, src), functionalized copy_: src's values in self's dtype
    and shape (broadcast); self's values are not read."""
    out = out_val(n)
    src = n.args[1]
    v = L.cast(L.value(src), out.dtype)
    if tuple(meta(src).shape) != tuple(out.shape):
        return L.node("expand", [v], {"shape": L.dims(out.shape)})
    return L.node("copy", [v])


def _scatter_pieces(L: Lowerer, base: Node, axis: int, start: Any, end: Any, middle: Value) -> Value:
    """base with [start, end) along axis replaced by middle: a cat of what
    is kept on either side and middle (pieces known to be empty left out)."""
    size = meta(base).shape[axis]
    b = L.value(base)
    pieces = []
    if not (isinstance(start, int) and start == 0):
        s, e = _slice_bounds(L, size, 0, start)
        pieces.append(L.node("slice", [b], {"axis": axis, "start": s, "end": e, "step": 1}))
    pieces.append(middle)
    if not (isinstance(end, int) and (end >= _INT64_MAX // 2 or (isinstance(size, int) and end >= size))):
        s, e = _slice_bounds(L, size, end, _INT64_MAX)
        pieces.append(L.node("slice", [b], {"axis": axis, "start": s, "end": e, "step": 1}))
    return pieces[0] if len(pieces) == 1 else L.node("cat", pieces, {"axis": axis})


@lowers(aten.slice_scatter.default)
def _slice_scatter(L: Lowerer, n: Node) -> Value:
    """slice_scatter(base, src, dim, start, end, step 1): functionalized
    x[..., a:b] = src (BART's shift_tokens_right)."""
    out = out_val(n)
    base, src = n.args[:2]
    axis = norm_axis(arg(n, 2, "dim", 0), out.dim())
    start, end, step = arg(n, 3, "start", None), arg(n, 4, "end", None), arg(n, 5, "step", 1)
    if step != 1:
        raise Unsupported("slice_scatter with a step")
    start = 0 if start is None else start
    end = _INT64_MAX if end is None else end
    if not isinstance(start, int) or not isinstance(end, int):
        raise Unsupported("slice_scatter with symbolic bounds")
    size = out.shape[axis]
    if isinstance(size, int):  # Python's clamping, so that the pieces are what eager keeps
        start, end = _slice_bounds(L, size, start, end)
    elif start < 0 or end < 0:
        raise Unsupported("slice_scatter with a negative bound on a symbolic size")
    return _scatter_pieces(L, base, axis, start, end, L.cast(L.value(src), out.dtype))


@lowers(aten.select_scatter.default)
def _select_scatter(L: Lowerer, n: Node) -> Value:
    """select_scatter(base, src, dim, index): functionalized x[..., i] = src."""
    out = out_val(n)
    base, src = n.args[:2]
    axis = norm_axis(n.args[2], out.dim())
    index, size = n.args[3], out.shape[axis]
    if not isinstance(index, int) or (index < 0 and not isinstance(size, int)):
        raise Unsupported("select_scatter with a symbolic or negative index on a symbolic size")
    if index < 0:
        index += size
    shape = list(out.shape)
    shape[axis] = 1
    middle = L.node("reshape", [L.cast(L.value(src), out.dtype)], {"shape": L.dims(shape)})
    return _scatter_pieces(L, base, axis, index, index + 1, middle)


@lowers(aten.cat.default)
def _cat(L: Lowerer, n: Node) -> Value:
    out = out_val(n)
    tensors = [t for t in n.args[0] if not (isinstance(t, Node) and meta(t).numel() == 0 and meta(t).dim() == 1)]
    axis = norm_axis(arg(n, 1, "dim", 0), out.dim())
    values = [L.cast(L.value(t), out.dtype) for t in tensors]
    if len(values) == 1:
        return L.node("copy", values)
    return L.node("cat", values, {"axis": axis})


@lowers(aten.split_with_sizes.default, aten.split.Tensor)
def _split(L: Lowerer, n: Node) -> tuple[Value, ...]:
    xv = meta(n.args[0])
    axis = norm_axis(arg(n, 2, "dim", 0), xv.dim())
    outs = meta(n)
    x = L.value(n.args[0])
    start = 0
    values = []
    for o in outs:
        length = o.shape[axis]
        if not isinstance(length, int):
            raise Unsupported("split with symbolic sizes")
        values.append(L.node("slice", [x], {"axis": axis, "start": start, "end": start + length, "step": 1}))
        start += length
    return tuple(values)


@lowers(operator.getitem)
def _getitem(L: Lowerer, n: Node) -> Value:
    src, index = n.args
    values = L.env.get(src)
    if not isinstance(values, tuple) or not isinstance(index, int) or values[index] is None:
        raise Unsupported(f"output {index} of {getattr(src, 'name', src)} is not available")
    return values[index]

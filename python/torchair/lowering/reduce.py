"""Lowerings of reductions (sum, mean, amax, any/all, vector norms, cumsum,
argmax) and of normalization (softmax, layer, group and batch-statistics norm)."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch.fx import Node

from torchair.errors import Unsupported
from torchair.lowering.core import Lowerer, Value, arg, aten, is_float, lowers, meta, norm_axis, out_val


def _axes(dims: Any, rank: int) -> list[int]:
    if dims is None or rank == 0:  # a 0-d tensor takes dim 0 or -1: "all" of nothing
        return []
    if isinstance(dims, int):
        dims = [dims]
    return sorted(norm_axis(d, rank) for d in dims)


@lowers(
    aten.mean.dim,
    aten.sum.dim_IntList,
    aten.amax.default,
    aten.amin.default,
    aten.mean.default,
    aten.sum.default,
    aten.prod.default,
    aten.prod.dim_int,
)
def _reduce(L: Lowerer, n: Node) -> Value:
    out = out_val(n)
    xv = meta(n.args[0])
    op = {
        aten.mean.dim: "mean",
        aten.mean.default: "mean",
        aten.sum.dim_IntList: "sum",
        aten.sum.default: "sum",
        aten.amax.default: "amax",
        aten.amin.default: "amin",
        aten.prod.default: "prod",
        aten.prod.dim_int: "prod",
    }[n.target]
    if n.target in (aten.mean.default, aten.sum.default, aten.prod.default):
        axes, keep = list(range(xv.dim())), 0
    else:
        axes = _axes(arg(n, 1, "dim", None), xv.dim())
        keep = int(bool(arg(n, 2, "keepdim", False)))
        if not axes:
            axes = list(range(xv.dim()))
    x = L.cast(L.value(n.args[0]), out.dtype)
    return L.node(op, [x], {"axes": axes, "keepdim": keep})


@lowers(aten.any.dim, aten.any.dims, aten.any.default, aten.all.dim, aten.all.dims, aten.all.default)
def _any_all(L: Lowerer, n: Node) -> Value:
    # on bool, amax is "any" and amin is "all"
    xv = meta(n.args[0])
    op = "amax" if n.target in (aten.any.dim, aten.any.dims, aten.any.default) else "amin"
    axes = _axes(arg(n, 1, "dim", None), xv.dim()) if len(n.args) > 1 or "dim" in n.kwargs else []
    keep = int(bool(arg(n, 2, "keepdim", False)))
    x = L.cast(L.value(n.args[0]), torch.bool)
    return L.node(op, [x], {"axes": axes or list(range(xv.dim())), "keepdim": keep})


@lowers(aten.linalg_vector_norm.default)
def _vector_norm(L: Lowerer, n: Node) -> Value:
    """||x||_ord over dims (all when none), in the output's dtype: ord 2 as
    sqrt(sum(x * x)), 1 as sum(|x|), +-inf as amax / amin(|x|), 0 as the
    count of nonzeros, any other p as sum(|x|^p)^(1/p). Eager computes them
    the same way, without scaling (so 1e20 overflows to inf in both).
    Weight norm (wav2vec2's positional conv) and F.normalize reach the graph
    as this op; as a fallback it split the graph, and its weight norm, all
    parameters, could not fold at compile time."""
    out = out_val(n)
    xv = meta(n.args[0])
    if not is_float(out.dtype) or xv.is_complex():
        raise Unsupported("linalg_vector_norm of a non-float tensor")
    order = arg(n, 1, "ord", 2)
    if not isinstance(order, (int, float)) or isinstance(order, bool) or math.isnan(order):
        raise Unsupported(f"linalg_vector_norm of ord {order}")
    axes = _axes(arg(n, 2, "dim", None), xv.dim()) or list(range(xv.dim()))
    keep = int(bool(arg(n, 3, "keepdim", False)))
    # (dynamo never makes a size of 0 symbolic, so an empty extent is an int here)
    if (order < 0 or order == math.inf) and any(isinstance(xv.shape[a], int) and xv.shape[a] == 0 for a in axes):
        raise Unsupported(f"linalg_vector_norm: the {order} norm of nothing (eager raises)")
    x = L.cast(L.value(n.args[0]), out.dtype)
    attrs = {"axes": axes, "keepdim": keep}
    if order == 2:
        return L.node("sqrt", [L.node("sum", [L.node("mul", [x, x])], attrs)])
    if order == 0:
        nonzero = L.node("ne", [x, L.operand(0.0, out.dtype)])
        return L.node("sum", [L.cast(nonzero, out.dtype)], attrs)
    a = L.node("abs", [x])
    if order in (1, math.inf, -math.inf):
        return L.node({1: "sum", math.inf: "amax", -math.inf: "amin"}[order], [a], attrs)
    powered = L.node("pow", [a, L.operand(float(order), out.dtype)])
    return L.node("pow", [L.node("sum", [powered], attrs), L.operand(1.0 / order, out.dtype)])


@lowers(aten.cumsum.default)
def _cumsum(L: Lowerer, n: Node) -> Value:
    out = out_val(n)
    x = L.cast(L.value(n.args[0]), out.dtype)
    return L.node("cumsum", [x], {"axis": norm_axis(n.args[1], out.dim())})


@lowers(aten.argmax.default)
def _argmax(L: Lowerer, n: Node) -> Value:
    dim = arg(n, 1, "dim", None)
    xv = meta(n.args[0])
    if dim is None or xv.dim() == 0:  # over everything: flatten first
        flat = L.node("reshape", [L.value(n.args[0])], {"shape": [L.dim(xv.numel())]})
        out = L.node("argmax", [flat], {"axis": 0, "keepdim": 0})
        return L.node("reshape", [out], {"shape": L.dims(out_val(n).shape)})
    return L.node("argmax", [L.value(n.args[0])], {"axis": norm_axis(dim, xv.dim()), "keepdim": int(arg(n, 2, "keepdim", False))})


@lowers(aten._softmax.default, aten._log_softmax.default)
def _softmax(L: Lowerer, n: Node) -> Value:
    out = out_val(n)
    if arg(n, 2, "half_to_float", False):
        raise Unsupported("softmax with half_to_float")
    op = "softmax" if n.target == aten._softmax.default else "log_softmax"
    return L.node(op, [L.value(n.args[0])], {"axis": norm_axis(n.args[1], out.dim())})


@lowers(aten.native_layer_norm.default, outputs=(0, 1, 2))
def _layer_norm(L: Lowerer, n: Node) -> tuple[Value, ...]:
    x, shape, w, b, eps = n.args[:5]
    inputs = [L.value(x)]
    if w is not None:
        inputs.append(L.value(w))
    if b is not None:
        inputs.append(L.value(b))
    attrs = {"normalized_ndim": len(shape), "eps": float(eps), "has_weight": int(w is not None), "has_bias": int(b is not None)}
    return tuple(L.node("layer_norm", inputs, attrs))


@lowers(aten.native_group_norm.default, outputs=(0, 1, 2))
def _group_norm(L: Lowerer, n: Node) -> tuple[Value, ...]:
    """GroupNorm as a layer norm over each group's elements, which are contiguous in
    [N, C, *spatial] ([N, G, C/G * HxW]), then the per-channel affine as a broadcast
    multiply and add. Returns (out, mean [N, G], rstd [N, G]) as aten does. Sizes come
    from the tensors' shapes, so a symbolic batch or image size stays symbolic."""
    x, w, b = n.args[:3]
    groups, eps = n.args[6], n.args[7]
    xm = meta(x)
    C = xm.shape[1]
    if not isinstance(groups, int) or not isinstance(C, int) or groups <= 0 or C % groups != 0:
        raise Unsupported(f"group_norm: {C} channels in {groups} groups")
    per_group = C // groups
    for s in xm.shape[2:]:
        per_group = per_group * s
    flat = L.node("reshape", [L.value(x)], {"shape": L.dims([xm.shape[0], groups, per_group])})
    y, mean, rstd = L.node("layer_norm", [flat], {"normalized_ndim": 1, "eps": float(eps), "has_weight": 0,
                                                  "has_bias": 0})
    y = L.node("reshape", [y], {"shape": L.dims(xm.shape)})
    per_channel = [C] + [1] * (xm.dim() - 2)
    if w is not None:
        y = L.node("mul", [y, L.node("reshape", [L.value(w)], {"shape": per_channel})])
    if b is not None:
        y = L.node("add", [y, L.node("reshape", [L.value(b)], {"shape": per_channel})])
    stats = {"shape": L.dims([xm.shape[0], groups])}
    return y, L.node("reshape", [mean], stats), L.node("reshape", [rstd], stats)


@lowers(aten._native_batch_norm_legit.no_stats, outputs=(0, 1, 2))
def _batch_norm_batch_stats(L: Lowerer, n: Node) -> tuple[Value, ...]:
    """Batch norm with the batch's own statistics and no running ones. InstanceNorm
    (``F.instance_norm``) becomes this over x viewed as [1, N*C, *spatial]. Each
    channel's statistics are over every dim but 1: with a batch of one that is a
    layer norm over the rows of [C, prod(spatial)]; otherwise the channels are first
    moved to the front ([C, N, *spatial]) and back after. Then the per-channel affine,
    as for GroupNorm. Returns (out, mean [C], rstd [C]) as aten does."""
    x, w, b, training, _momentum, eps = n.args
    if training is not True:
        raise Unsupported("_native_batch_norm_legit.no_stats without training=True")
    xm = meta(x)
    if xm.dim() < 2:
        raise Unsupported(f"batch norm over a {xm.dim()}-d input")
    C, N, rank = xm.shape[1], xm.shape[0], xm.dim()
    one_image = isinstance(N, int) and N == 1  # a symbolic batch is not known to be 1
    rows = list(xm.shape[2:]) if one_image else [N] + list(xm.shape[2:])  # each channel's elements
    swap = [1, 0] + list(range(2, rank))  # [N, C, ...] <-> [C, N, ...]
    xv = L.value(x) if one_image else L.node("permute", [L.value(x)], {"perm": swap})
    per_channel = 1
    for s in rows:
        per_channel = per_channel * s
    flat = L.node("reshape", [xv], {"shape": L.dims([C, per_channel])})
    y, mean, rstd = L.node("layer_norm", [flat], {"normalized_ndim": 1, "eps": float(eps), "has_weight": 0,
                                                  "has_bias": 0})
    if one_image:
        y = L.node("reshape", [y], {"shape": L.dims(xm.shape)})
    else:
        y = L.node("permute", [L.node("reshape", [y], {"shape": L.dims([C] + rows)})], {"perm": swap})
    affine_shape = [C] + [1] * (rank - 2)
    if w is not None:
        y = L.node("mul", [y, L.node("reshape", [L.value(w)], {"shape": affine_shape})])
    if b is not None:
        y = L.node("add", [y, L.node("reshape", [L.value(b)], {"shape": affine_shape})])
    stats = {"shape": L.dims([C])}
    return y, L.node("reshape", [mean], stats), L.node("reshape", [rstd], stats)

"""Lowerings of indexing (embedding, gather, index_select, index, index_copy)
and of tensor creation (arange, full, zeros, ones and their _like forms)."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch.fx import Node

from torchair.errors import Unsupported
from torchair.lowering.core import (
    LAZY, LOW_PRECISION, Lowerer, Value, air_dtype, arg, aten, is_float, lowers, meta, norm_axis, out_val,
    storage_dtype)


@lowers(aten.embedding.default)
def _embedding(L: Lowerer, n: Node) -> Value:
    table = n.args[0]
    if table in L.raw and table not in L.env:
        # a 16-bit table: gather its rows, widen only those
        rows = L.node("embedding", [L.raw[table], L.value(n.args[1])])
        return L.node("cast", [rows], {"dtype": air_dtype(torch.float32)})
    return L.node("embedding", [L.value(table), L.value(n.args[1])])


@lowers(aten.gather.default)
def _gather(L: Lowerer, n: Node) -> Value:
    xv = meta(n.args[0])
    if arg(n, 3, "sparse_grad", False):
        raise Unsupported("sparse gather")
    return L.node("gather", [L.value(n.args[0]), L.value(n.args[2])], {"axis": norm_axis(n.args[1], xv.dim())})


@lowers(aten.index_select.default)
def _index_select(L: Lowerer, n: Node) -> Value:
    xv = meta(n.args[0])
    return L.node("index_select", [L.value(n.args[0]), L.value(n.args[2])], {"axis": norm_axis(n.args[1], xv.dim())})


@lowers(aten.index_copy.default)
def _index_copy(L: Lowerer, n: Node) -> Any:
    """x with slices replaced along one axis: transformers' StaticCache writes
    each step's keys and values with index_copy_, which aot_autograd gives as
    index_copy + copy_ into the cache (write_back.py). A 16-bit cache stays
    16-bit: the new slices are rounded to its dtype and copied as bytes, and
    the result is widened only if an f32 op reads it (the attention)."""
    x, dim, index, source = n.args[:4]
    xv = meta(x)
    axis = norm_axis(dim, xv.dim())
    if xv.dtype in LOW_PRECISION and x in L.raw:
        src = L.raw.get(source)
        if src is None:
            src = L.node("cast", [L.value(source)], {"dtype": storage_dtype(xv.dtype)})
        v = L.node("index_copy", [L.raw[x], L.value(index), src], {"axis": axis})
        L.raw[n] = v
        L.lazy[n] = lambda: L.node("cast", [v], {"dtype": air_dtype(xv.dtype)})
        return LAZY
    return L.node("index_copy", [L.value(x), L.value(index), L.value(source)], {"axis": axis})


@lowers(aten.index.Tensor)
def _index(L: Lowerer, n: Node) -> Value:
    x, indices = n.args
    axes, values = [], []
    for axis, idx in enumerate(indices):
        if idx is None:
            continue
        iv = meta(idx)
        if iv.dtype not in (torch.int64, torch.int32):
            raise Unsupported(f"index with a {iv.dtype} index (boolean masks give data-dependent shapes)")
        axes.append(axis)
        values.append(L.value(idx))
    return L.node("index", [L.value(x)] + values, {"axes": axes})


@lowers(aten.arange.start_step, aten.arange.default, aten.arange.start)
def _arange(L: Lowerer, n: Node) -> Value:
    out = out_val(n)
    if n.target == aten.arange.default:
        start, _end, step = 0, n.args[0], 1
    else:
        start, _end = n.args[0], n.args[1]
        step = n.args[2] if len(n.args) > 2 else n.kwargs.get("step", 1)
    for v in (start, step):
        if not isinstance(v, (int, float)):
            raise Unsupported("arange with symbolic start or step")
    length = out.shape[0]
    return L.node("arange", [], {"start": float(start), "step": float(step), "length": L.dim(length), "dtype": air_dtype(out.dtype)})


@lowers(aten.full.default, aten.zeros.default, aten.ones.default, aten.full_like.default, aten.zeros_like.default, aten.ones_like.default)
def _full(L: Lowerer, n: Node) -> Value:
    out = out_val(n)
    if n.target in (aten.full.default, aten.full_like.default):
        value = n.args[1]
    elif n.target in (aten.zeros_like.default, aten.ones_like.default):
        value = 0 if n.target == aten.zeros_like.default else 1
    else:
        value = 0 if n.target == aten.zeros.default else 1
    if not isinstance(value, (int, float, bool)):
        raise Unsupported("full with a symbolic value")
    if isinstance(value, float) and math.isnan(value) and not is_float(out.dtype):
        raise Unsupported("NaN fill of an integer tensor")
    return L.node("full", [], {"shape": L.dims(out.shape), "value": float(value), "dtype": air_dtype(out.dtype)})

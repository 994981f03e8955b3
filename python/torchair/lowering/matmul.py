"""Lowerings of matrix products: mm, bmm and addmm."""

from __future__ import annotations

from torch.fx import Node

from torchair.lowering.core import Lowerer, Value, aten, lowers


@lowers(aten.mm.default)
def _mm(L: Lowerer, n: Node) -> Value:
    return L.node("mm", [L.value(n.args[0]), L.value(n.args[1])])


@lowers(aten.bmm.default)
def _bmm(L: Lowerer, n: Node) -> Value:
    return L.node("bmm", [L.value(n.args[0]), L.value(n.args[1])])


@lowers(aten.addmm.default)
def _addmm(L: Lowerer, n: Node) -> Value:
    bias, a, b = (L.value(v) for v in n.args[:3])
    beta = float(n.kwargs.get("beta", 1))
    alpha = float(n.kwargs.get("alpha", 1))
    return L.node("addmm", [bias, a, b], {"alpha": alpha, "beta": beta})

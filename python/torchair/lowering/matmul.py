"""Lowerings of matrix products: mm, bmm and addmm."""

from __future__ import annotations

from torch.fx import Node

from torchair.lowering.core import Lowerer, Value, aten, lowers
from torchair.lowering.lowp import lowp_linear


@lowers(aten.mm.default)
def _mm(L: Lowerer, n: Node) -> Value:
    v = lowp_linear(L, n.args[0], n.args[1])
    if v is not None:
        return v
    return L.node("mm", [L.value(n.args[0]), L.value(n.args[1])])


@lowers(aten.bmm.default)
def _bmm(L: Lowerer, n: Node) -> Value:
    return L.node("bmm", [L.value(n.args[0]), L.value(n.args[1])])


@lowers(aten.addmm.default)
def _addmm(L: Lowerer, n: Node) -> Value:
    beta = float(n.kwargs.get("beta", 1))
    alpha = float(n.kwargs.get("alpha", 1))
    if alpha == 1 and beta == 1:
        v = lowp_linear(L, n.args[1], n.args[2], n.args[0])
        if v is not None:
            return v
    bias, a, b = (L.value(v) for v in n.args[:3])
    return L.node("addmm", [bias, a, b], {"alpha": alpha, "beta": beta})

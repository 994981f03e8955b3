"""``torchair.register_lowering(op, fn)``: a user teaches torchair an op (their own
``torch.library.custom_op``, or an ATen op torchair leaves to eager) by writing it in torch
ops. At each node of the op, ``fn`` is traced with ``make_fx`` on the node's fake arguments
into an ATen graph (torchair's decompositions applied), and that graph's nodes are lowered,
in place of the op's node, by torchair's own lowerings into the same libair graph. So the op
compiles with its neighbours instead of splitting the graph and falling back.

What ``fn`` cannot be turned into is said in the reason the support check records (the
compile report's fallbacks, ``torchair.explain``): an op with no torchair lowering, an op
whose lowering refuses these arguments (with its reason), or a trace that failed (data-
dependent control flow, ``.item()``, NumPy).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch
from torch.fx import GraphModule, Node

from torchair.errors import TorchairError, Unsupported
from torchair.lowering.core import LOWERINGS, Lowerer, lowering_for, meta

# user lowerings: {op overload: fn}
USER_LOWERINGS: dict[Any, Callable[..., Any]] = {}

# ops the traced graph may hold that move no data: their output is their input
_PASS_THROUGH = {
    torch.ops.aten.lift_fresh_copy.default,
    torch.ops.aten.lift_fresh.default,
    torch.ops.aten.alias.default,
    torch.ops.aten.detach.default,
}


def _overloads(op: Any) -> list[Any]:
    """The OpOverloads op names: an overload, every overload of a packet, or a custom_op's."""
    inner = getattr(op, "_opoverload", None)  # torch.library.custom_op's CustomOpDef
    if inner is not None:
        op = inner
    if isinstance(op, torch._ops.OpOverload):
        return [op]
    if isinstance(op, torch._ops.OpOverloadPacket):
        return [getattr(op, name) for name in op.overloads()]
    raise TypeError(
        f"register_lowering: op must be a torch op (torch.ops.ns.name[.overload]) or a torch.library.custom_op, "
        f"got {type(op).__name__}"
    )


def register_lowering(op: Any, fn: Callable[..., Any] | None = None) -> Any:
    """Registers ``fn`` (torch ops on the op's arguments, returning a tensor or a tuple of
    tensors) as torchair's lowering of ``op``. Usable as a decorator:
    ``@torchair.register_lowering(torch.ops.mylib.my_op)``. A later registration of the same
    op replaces the earlier one (torchair's own lowering included)."""
    if fn is None:
        return lambda f: register_lowering(op, f)
    if not callable(fn):
        raise TypeError(f"register_lowering: fn must be callable, got {type(fn).__name__}")
    for overload in _overloads(op):
        USER_LOWERINGS[overload] = fn
        LOWERINGS[overload] = _lowering(overload, fn)
    return fn


def _fake(value: Any) -> Any:
    if isinstance(value, Node):
        return meta(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_fake(v) for v in value)
    return value


def _trace(op: Any, fn: Callable[..., Any], node: Node) -> GraphModule:
    from torch.fx.experimental.proxy_tensor import make_fx

    from torchair.decompositions import torchair_decompositions

    args, kwargs = list(_fake(node.args)), _fake(dict(node.kwargs))
    if any(isinstance(v, torch.Tensor) for v in kwargs.values()):
        raise Unsupported(f"register_lowering({op}): tensor keyword arguments are not supported")
    if any(isinstance(a, (list, tuple)) and any(isinstance(t, torch.Tensor) for t in a) for a in args):
        raise Unsupported(f"register_lowering({op}): lists of tensors as arguments are not supported")
    # the tensors are the traced graph's inputs; other arguments are fixed, as at the call
    positions = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]

    def call(*tensors: Any) -> Any:
        full = list(args)
        for i, t in zip(positions, tensors):
            full[i] = t
        return fn(*full, **kwargs)

    try:
        return make_fx(call, decomposition_table=torchair_decompositions(), tracing_mode="fake")(
            *[args[i] for i in positions]
        )
    except Exception as e:  # anything the trace cannot follow
        raise Unsupported(f"register_lowering({op}): fn could not be traced to ATen ops: {type(e).__name__}: {e}") from e


def _lowering(op: Any, fn: Callable[..., Any]) -> Callable[[Lowerer, Node], Any]:
    def lower(L: Lowerer, node: Node) -> Any:
        traced = _trace(op, fn, node)
        placeholders = [n for n in traced.graph.nodes if n.op == "placeholder"]
        outer = [a for a in node.args if isinstance(a, Node) and isinstance(meta(a), torch.Tensor)]
        for ph, arg in zip(placeholders, outer):
            L.env[ph] = L.value(arg)
            if arg in L.raw:
                L.raw[ph] = L.raw[arg]
            ph.meta.setdefault("val", meta(arg))
        result: Any = None
        for n in traced.graph.nodes:
            if n.op == "placeholder":
                continue
            if n.op == "output":
                result = n.args[0]
                continue
            if n.op == "get_attr":
                t = getattr(traced, str(n.target))
                if not isinstance(t, torch.Tensor):
                    raise Unsupported(f"register_lowering({op}): fn's constant {n.target} is not a tensor")
                L.bind_constant(n, t.detach().clone())
                continue
            if n.target in _PASS_THROUGH:
                src = n.args[0]
                L.env[n] = L.value(src)
                continue
            target = n.target
            name = getattr(target, "__name__", str(target)) if target is not operator.getitem else "getitem"
            lowering = lowering_for(target)
            if lowering is None:
                raise Unsupported(f"register_lowering({op}): fn uses {target}, which torchair has no lowering for")
            try:
                L.bind(n, lowering(L, n))
            except Unsupported as e:
                raise Unsupported(f"register_lowering({op}): fn's {name} ({n.name}): {e}") from e
            except TorchairError as e:
                why = e.args[2] if len(e.args) > 2 else str(e)
                raise Unsupported(f"register_lowering({op}): fn's {name} ({n.name}): {why}") from e
        if isinstance(result, (tuple, list)):
            return tuple(L.value(r) for r in result)
        return L.value(result)

    lower.__name__ = f"user_lowering_{getattr(op, '__name__', 'op')}"
    return lower

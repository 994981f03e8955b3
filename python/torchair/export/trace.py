"""torchair.export's first step: the model as one ATen graph. torch.export
(non-strict) with the user's dynamic_axes as named ``Dim``s, then the same
decompositions the torch.compile backend gives aot_autograd, and the
parameters, buffers and constant tensors picked out to be frozen (copied into
the file). Also the names of the flat inputs and outputs."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.fx import GraphModule, Node

from torchair.dynamic_axes import Spec
from torchair.errors import TorchairError


class ExportError(TorchairError):
    """torchair.export could not write the model (an op torchair cannot compile, a
    graph that mutates its buffers, an input that is not a tensor ...)."""


def _err(msg: str) -> ExportError:
    return ExportError(2, "unsupported", f"torchair.export: {msg}")


@dataclass
class Traced:
    gm: GraphModule  # the decomposed ATen graph; placeholders are frozen tensors or user inputs
    frozen: dict[Node, torch.Tensor]  # placeholder -> parameter / buffer / constant
    inputs: list[Node]  # the user inputs' placeholders, in call order (flattened)
    input_names: list[str]
    outputs: list[Node]  # the user outputs, flattened
    output_names: list[str]
    symbol_names: dict[Any, str] = field(default_factory=dict)  # sympy symbol -> the dynamic_axes name


def _parameters(model: torch.nn.Module) -> list[str]:
    fn = model.forward if isinstance(model, torch.nn.Module) else model
    return [
        p.name
        for p in inspect.signature(fn).parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]


def dynamic_shapes(
    model: torch.nn.Module, args: tuple[Any, ...], spec: Spec | None, auto: bool = False
) -> dict[str, Any] | None:
    """torch.export's dynamic_shapes from torchair's dynamic_axes: {parameter: {axis: Dim}},
    one Dim per name (axes of one name share it), with the given range. auto (TorchAir's
    dynamo_export(dynamic=True)): every axis of every input may be dynamic (Dim.AUTO: torch.export
    keeps as symbols those the model does not fix; they are named s0, s1, ...)."""
    from torch.export import Dim

    names = _parameters(model)[: len(args)]
    if auto:
        return {n: {ax: Dim.AUTO for ax in range(a.dim())} for n, a in zip(names, args)}
    if not spec:
        return None
    unknown = [a for a in spec if a not in names]
    if unknown:
        raise _err(f"dynamic_axes names {unknown}, which are not among the forward's arguments {names}")
    dims: dict[str, Any] = {}
    out: dict[str, Any] = {}
    for i, name in enumerate(names):
        axes = spec.get(name)
        if not axes:
            out[name] = None
            continue
        t = args[i]
        if not isinstance(t, torch.Tensor):
            raise _err(f"dynamic_axes names argument {name!r}, which is a {type(t).__name__}, not a tensor")
        one: dict[int, Any] = {}
        for ax, a in axes.items():
            if not -t.dim() <= ax < t.dim():
                raise _err(f"dynamic_axes: {name!r} has {t.dim()} dims, no axis {ax}")
            if a.name not in dims:
                kw = {k: v for k, v in (("min", a.min), ("max", a.max)) if v is not None}
                dims[a.name] = Dim(a.name, **kw)
            one[ax % t.dim()] = dims[a.name]
        out[name] = one
    return out


def _flat_names(spec: Any, n: int, single: str) -> list[str]:
    """Names of a pytree's flat leaves from their paths: dict keys, attribute names and
    positions joined by '.' ('logits', 'past.0.1'); a lone tensor is ``single``; a
    tuple of tensors gives 'output0', 'output1', ... (positions alone are not names)."""
    from torch.utils import _pytree as pytree

    tree = pytree.tree_unflatten(list(range(n)), spec)
    leaves, _ = pytree.tree_flatten_with_path(tree)
    names = []
    for path, _leaf in leaves:
        parts = []
        for k in path:
            if isinstance(k, pytree.MappingKey):
                parts.append(str(k.key))
            elif isinstance(k, pytree.GetAttrKey):
                parts.append(k.name)
            elif isinstance(k, pytree.SequenceKey):
                parts.append(str(k.idx))
            else:
                parts.append(str(k))
        names.append(".".join(parts))
    if n == 1 and names == [""]:
        return [single]
    return [nm if not nm.isdigit() else f"{single}{nm}" for nm in names]


# ops torch.export leaves in a graph that check sizes or metadata and compute nothing
_ASSERTS = (
    "aten._assert_tensor_metadata",
    "aten._assert_scalar",
    "aten.sym_constrain_range_for_size",
    "aten.sym_constrain_range",
    "aten._assert_async",
)


def _drop_asserts(gm: GraphModule) -> None:
    for n in list(gm.graph.nodes):
        if n.op == "call_function" and not n.users and str(n.target).startswith(_ASSERTS):
            gm.graph.erase_node(n)
    gm.graph.eliminate_dead_code()
    gm.recompile()


def trace(
    model: torch.nn.Module,
    args: tuple[Any, ...],
    spec: Spec | None,
    decompositions: dict[Any, Any],
    auto_dynamic: bool = False,
) -> Traced:
    from torch.export import export
    from torch.export.graph_signature import InputKind, OutputKind

    if not isinstance(model, torch.nn.Module):
        raise _err(f"expected a torch.nn.Module, got {type(model).__name__}")
    for i, a in enumerate(args):
        if not isinstance(a, torch.Tensor):
            raise _err(f"example input {i} is a {type(a).__name__}; the exported file takes tensors only")
    with torch.no_grad():
        try:
            ep = export(model, args, dynamic_shapes=dynamic_shapes(model, args, spec, auto_dynamic), strict=False)
        except torch._dynamo.exc.UserError as e:
            if "Constraints violated" not in str(e):
                raise
            # torch's advice is in terms of its Dim; say it in dynamic_axes' terms too
            raise _err(
                f"the model does not take every size dynamic_axes allows: {e}\n(in dynamic_axes, a range is "
                "given as {argument: {axis: ('name', min, max)}})"
            ) from e
        ep = ep.run_decompositions(decompositions)
    gm = ep.graph_module
    _drop_asserts(gm)
    sig = ep.graph_signature
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    by_name = {n.name: n for n in placeholders}
    frozen: dict[Node, torch.Tensor] = {}
    inputs: list[Node] = []
    for s in sig.input_specs:
        node = by_name[s.arg.name]
        if s.kind == InputKind.USER_INPUT:
            if not isinstance(node.meta.get("val"), torch.Tensor):
                raise _err(f"input {s.arg.name} is not a tensor (a Python number is baked in by torch.export)")
            inputs.append(node)
        elif s.kind in (InputKind.PARAMETER, InputKind.BUFFER):
            t = ep.state_dict[s.target] if s.target in ep.state_dict else ep.constants[s.target]
            frozen[node] = t.detach()
        elif s.kind == InputKind.CONSTANT_TENSOR:
            frozen[node] = ep.constants[s.target].detach()
        else:
            raise _err(f"graph input {s.arg.name} is a {s.kind.name}, which an exported file cannot hold")
    out_node = next(n for n in gm.graph.nodes if n.op == "output")
    results = list(out_node.args[0])
    mutated = [s.target for s in sig.output_specs if s.kind != OutputKind.USER_OUTPUT]
    if mutated:
        raise _err(
            f"the model writes to {', '.join(map(str, mutated))} when it runs (a training-mode batch norm's "
            "running statistics?); call model.eval() before exporting"
        )
    outputs = []
    for r in results:
        if not isinstance(r, Node) or not isinstance(r.meta.get("val"), torch.Tensor):
            raise _err(f"an output of the model is {r!r}, not a tensor computed by it")
        outputs.append(r)
    try:
        input_names = [n.name for n in inputs]
        output_names = _flat_names(ep.call_spec.out_spec, len(outputs), "output")
    except Exception:  # an odd pytree node: positions
        output_names = [f"output{i}" for i in range(len(outputs))]
    symbol_names = _symbols(inputs, args, spec, model)
    return Traced(gm, frozen, inputs, input_names, outputs, output_names, symbol_names)


def _symbols(inputs: list[Node], args: tuple[Any, ...], spec: Spec | None, model: torch.nn.Module) -> dict[Any, str]:
    """{sympy symbol: its dynamic_axes name} from the user inputs' symbolic dims."""
    import sympy

    out: dict[Any, str] = {}
    if not spec:
        return out
    params = _parameters(model)[: len(args)]
    for pname, node in zip(params, inputs):
        val = node.meta["val"]
        for ax, a in (spec.get(pname) or {}).items():
            size = val.shape[ax]
            expr = size.node.expr if isinstance(size, torch.SymInt) else None
            if not isinstance(expr, sympy.Symbol):
                raise _err(
                    f"dynamic_axes: axis {ax} of {pname!r} ({a.name!r}) came out as {size}, not a symbol "
                    "(the model's code fixes that size)"
                )
            if out.setdefault(expr, a.name) != a.name:
                raise _err(f"dynamic_axes: {a.name!r} and {out[expr]!r} are always the same size; give them one name")
    return out

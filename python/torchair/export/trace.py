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


def _var_keyword(model: torch.nn.Module) -> str | None:
    """The name of the forward's ``**kwargs`` parameter, if it has one."""
    fn = model.forward if isinstance(model, torch.nn.Module) else model
    return next((p.name for p in inspect.signature(fn).parameters.values() if p.kind == p.VAR_KEYWORD), None)


def argument_names(model: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[str]:
    """The name of each example input, in the order torch.export flattens them (and the
    exported file takes them): the positional ones by the forward's parameter names, then
    the keyword ones in the order given. A keyword the forward has no parameter for (and no
    ``**kwargs`` to take it), or one given positionally too, is an error naming it."""
    sig = inspect.signature(model.forward if isinstance(model, torch.nn.Module) else model)
    params = sig.parameters
    positional = _parameters(model)[: len(args)]
    keyword_ok = {n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    for k in kwargs:
        if k in positional:
            raise _err(f"example input {k!r} is given both positionally and by keyword")
        if k not in keyword_ok and _var_keyword(model) is None:
            raise _err(
                f"example keyword input {k!r} is not an argument of {type(model).__name__}.forward "
                f"(its arguments: {', '.join(params)})"
            )
    return positional + list(kwargs)


def dynamic_shapes(
    model: torch.nn.Module,
    args: tuple[Any, ...],
    spec: Spec | None,
    auto: bool = False,
    kwargs: dict[str, Any] | None = None,
) -> dict[str, Any] | None:
    """torch.export's dynamic_shapes from torchair's dynamic_axes: {parameter: {axis: Dim}},
    one Dim per name (axes of one name share it), with the given range. Inputs given by
    keyword are named by their keyword. auto (TorchAir's
    dynamo_export(dynamic=True)): every axis of every input may be dynamic (Dim.AUTO: torch.export
    keeps as symbols those the model does not fix; they are named s0, s1, ...)."""
    from torch.export import Dim

    kwargs = kwargs or {}
    names = argument_names(model, args, kwargs)
    values = list(args) + list(kwargs.values())
    if not auto and not spec:
        return None
    if not auto:
        unknown = [a for a in spec if a not in names]
        if unknown:
            raise _err(f"dynamic_axes names {unknown}, which are not among the model's inputs {names}")
    # torch.export (2.x) fails on any dynamic_shapes when an input goes through the forward's
    # **kwargs (its constraint step cannot match the nesting), so such a file is static
    named = set(inspect.signature(model.forward).parameters) - {_var_keyword(model)}
    through_var = [n for n in kwargs if n not in named]
    if through_var:
        raise _err(
            f"{type(model).__name__}.forward takes {', '.join(map(repr, through_var))} through "
            f"**{_var_keyword(model)}, and torch.export cannot make any size dynamic then: export with static "
            "sizes (no dynamic_axes), or give the forward a parameter of that name"
        )
    dims: dict[str, Any] = {}
    flat: dict[str, Any] = {}
    for name, t in zip(names, values):
        if auto:
            flat[name] = {ax: Dim.AUTO for ax in range(t.dim())}
            continue
        axes = spec.get(name)
        if not axes:
            flat[name] = None
            continue
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
        flat[name] = one
    return flat


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
    kwargs: dict[str, Any] | None = None,
) -> Traced:
    from torch.export import export
    from torch.export.graph_signature import InputKind, OutputKind

    if not isinstance(model, torch.nn.Module):
        raise _err(f"expected a torch.nn.Module, got {type(model).__name__}")
    kwargs = dict(kwargs or {})
    for i, a in enumerate(args):
        if not isinstance(a, torch.Tensor):
            raise _err(f"example input {i} is a {type(a).__name__}; the exported file takes tensors only")
    for k, a in kwargs.items():
        if not isinstance(a, torch.Tensor):
            raise _err(f"example input {k!r} is a {type(a).__name__}; the exported file takes tensors only")
    names = argument_names(model, args, kwargs)
    with torch.no_grad():
        try:
            shapes = dynamic_shapes(model, args, spec, auto_dynamic, kwargs)
            ep = export(model, args, kwargs or None, dynamic_shapes=shapes, strict=False)
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
    # a keyword the forward takes through **kwargs and never reads is most likely misspelt
    named = set(inspect.signature(model.forward).parameters)
    unused = [k for k, node in zip(kwargs, inputs[len(args) :]) if k not in named and not node.users]
    if unused:
        raise _err(
            f"the model does not use keyword input(s) {', '.join(map(repr, unused))} ({type(model).__name__}.forward "
            f"takes them through **{_var_keyword(model)} and ignores them: a misspelt name?)"
        )
    outputs = []
    for r in results:
        if not isinstance(r, Node) or not isinstance(r.meta.get("val"), torch.Tensor):
            raise _err(f"an output of the model is {r!r}, not a tensor computed by it")
        outputs.append(r)
    # positional inputs keep their placeholder's name (the forward's parameter, as before
    # keywords were taken); keyword inputs are named by their keyword
    input_names = [n.name for n in inputs[: len(args)]] + list(kwargs)
    if len(input_names) != len(inputs) or len(set(input_names)) != len(input_names):
        raise _err(f"the model's inputs {names} did not come out as {len(names)} distinct tensor inputs")
    try:
        output_names = _flat_names(ep.call_spec.out_spec, len(outputs), "output")
    except Exception:  # an odd pytree node: positions
        output_names = [f"output{i}" for i in range(len(outputs))]
    symbol_names = _symbols(inputs, names, spec)
    return Traced(gm, frozen, inputs, input_names, outputs, output_names, symbol_names)


def _symbols(inputs: list[Node], params: list[str], spec: Spec | None) -> dict[Any, str]:
    """{sympy symbol: its dynamic_axes name} from the user inputs' symbolic dims."""
    import sympy

    out: dict[Any, str] = {}
    if not spec:
        return out
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

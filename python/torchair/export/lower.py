"""torchair.export's second step: the traced ATen graph as ONE libair graph,
through the torch.compile path's own pieces: its config (TorchAir's groups
applied), its pattern passes, its per-op support check (compiler.check_node)
and its subgraph lowering (compiler.build_subgraph) over the whole graph, the
parameters frozen as constants. An exported file cannot fall back to Python,
so any op the check refuses is an error that names it, with the reason."""

from __future__ import annotations

from typing import Any

import torch

from torchair.compiler import BuiltGraph, build_subgraph, check_node, op_name
from torchair.config import CompilerConfig
from torchair.errors import TorchairError, Unsupported
from torchair.export.trace import Traced, _err
from torchair.partition import is_size_node


def _tree_passes(traced: Traced, config: CompilerConfig) -> None:
    """What TorchAir's config tree asks of the ATen graph (pre/post passes, registered
    replacements), as the backend runs it; run_eagerly cannot be exported."""
    from torchair.backend import _tree_passes as run

    extras = getattr(config, "extras", None)
    if extras is None:
        return
    examples = [n.meta.get("val") for n in traced.gm.graph.nodes if n.op == "placeholder"]
    if run(traced.gm, examples, config, extras):
        raise _err("config.debug.run_eagerly asks for the graph to run in eager, which an exported file cannot")


def unsupported(traced: Traced) -> list[tuple[str, str, str]]:
    """(node, op, reason) of every op torchair cannot compile."""
    out = []
    for n in traced.gm.graph.nodes:
        if n.op != "call_function" or is_size_node(n):
            continue
        reason = check_node(n)
        if reason is not None:
            out.append((n.name, op_name(n), reason))
    return out


def check_options(config: CompilerConfig) -> None:
    """Options that split or interpret the graph have no meaning for one exported graph."""
    if config.dynamic_graph_mode:
        raise _err("dynamic_graph_mode runs the graph op by op from Python; an exported file is one graph")
    if config.max_static_subgraph_ops is not None:
        raise _err("max_static_subgraph_ops splits the graph between Python calls; an exported file is one graph")


def lower(traced: Traced, config: CompilerConfig) -> BuiltGraph:
    _tree_passes(traced, config)
    bad = unsupported(traced)
    if bad:
        ops = sorted({op for _, op, _ in bad})
        detail = "; ".join(f"{node}: {op}: {reason}" for node, op, reason in bad[:10])
        more = f" (and {len(bad) - 10} more)" if len(bad) > 10 else ""
        raise _err(
            f"torchair cannot compile {len(bad)} op(s) of this model ({', '.join(ops)}), and an exported file "
            f"cannot fall back to Python: {detail}{more}"
        )
    gm = traced.gm
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    try:
        built = build_subgraph(gm, placeholders, config, traced.frozen, traced.symbol_names, lazy_frozen=True)
    except (Unsupported, TorchairError) as e:
        reason = str(e) if isinstance(e, Unsupported) else (e.args[2] if len(e.args) > 2 else str(e))
        raise _err(f"the graph did not lower: {reason}") from e
    if built.seeded:
        raise _err("the graph draws random numbers (dropout in training mode?); call model.eval() before exporting")
    if built.size_args or len(built.tensor_args) != len(traced.inputs):
        raise _err("the graph takes sizes that no input tensor has; export it with static sizes")
    return built


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def shape_spec(val: Any, names: dict[Any, str]) -> list[Any]:
    """A tensor's shape for the metadata: ints, and the dynamic_axes name of a symbolic dim."""
    out: list[Any] = []
    for s in val.shape:
        if isinstance(s, torch.SymInt):
            expr = s.node.expr
            out.append(names.get(expr, str(expr)) if not expr.is_number else int(expr))
        else:
            out.append(int(s))
    return out

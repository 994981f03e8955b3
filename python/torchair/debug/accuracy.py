"""``torchair.debug.compare(model, *inputs)``: where does torchair's result leave eager's?

Captures the ATen graphs torchair would compile for ``model(*inputs)`` and their real inputs,
runs each graph in eager in fp32 and in fp64 (every node's value kept), compiles a copy with
torchair and runs it, checking each compiled subgraph's outputs against eager's on the same
inputs by SPEC section 4's rule: ``allclose`` at a per-op tolerance, failing that the RMSE
against the fp64 run at most 2x (3x for 16-bit floats) eager's own plus tol/10; integers and
booleans exactly. In the first subgraph that fails, each op is compiled alone and run on
eager's inputs to it, and the first op whose output fails is named: the FX node, the ATen op
and the model's source line (``node.meta['stack_trace']``). When no op fails alone, the
subgraph is named: what broke is in how its ops were fused (the passes).
"""

from __future__ import annotations

import copy
import math
import re
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.fx import Graph, GraphModule, Interpreter, Node

# per-op allclose tolerance (SPEC 4: "tighter per op" than the model level's 1e-3 for fp32)
TOLERANCE = {torch.float32: 1e-4, torch.float64: 1e-7, torch.bfloat16: 1e-2, torch.float16: 1e-2}


@dataclass
class Mismatch:
    graph: str
    subgraph: str
    node: str  # the FX node ("" when no single op fails: the subgraph's fusion does)
    op: str
    source: str  # the model's line that made the node, "" if unknown
    max_abs_error: float
    rmse: float  # torchair's RMSE against fp64
    eager_rmse: float  # eager's RMSE against fp64
    tolerance: float

    def __str__(self) -> str:
        where = f"op {self.node} ({self.op})" if self.node else f"subgraph {self.subgraph} (no op fails alone: its fusion does)"
        return (
            f"{self.graph}, subgraph {self.subgraph}: {where} leaves the tolerance: max |torchair - eager| "
            f"{self.max_abs_error:.3g}, RMSE vs fp64 {self.rmse:.3g} against eager's {self.eager_rmse:.3g} "
            f"(tol {self.tolerance:g})" + (f"\n  at {self.source}" if self.source else "")
        )


@dataclass
class CompareReport:
    subgraphs: list[tuple[str, str, bool, float]] = field(default_factory=list)  # (graph, name, ok, max error)
    first: Mismatch | None = None

    @property
    def ok(self) -> bool:
        return self.first is None

    def __str__(self) -> str:
        lines = [f"torchair.debug.compare: {len(self.subgraphs)} compiled subgraph(s) checked against eager and fp64"]
        for graph, name, ok, err in self.subgraphs:
            lines.append(f"  {graph} {name}: {'ok' if ok else 'FAILS'} (max |torchair - eager| {err:.3g})")
        lines.append(str(self.first) if self.first else "every compiled subgraph is within tolerance")
        return "\n".join(lines)


def _within(got: Any, eager: Any, ref64: Any) -> tuple[bool, float, float, float, float]:
    """SPEC 4's check of one output: (ok, max abs error, rmse, eager rmse, tol)."""
    if not isinstance(got, torch.Tensor) or not isinstance(eager, torch.Tensor):
        return True, 0.0, 0.0, 0.0, 0.0
    if got.shape != eager.shape:
        return False, math.inf, math.inf, 0.0, 0.0
    if not eager.dtype.is_floating_point:
        same = torch.equal(got, eager)
        return same, 0.0 if same else math.inf, 0.0, 0.0, 0.0
    tol = TOLERANCE.get(eager.dtype, 1e-4)
    g, e = got.detach().double(), eager.detach().double()
    err = (g - e).abs().max().item() if g.numel() else 0.0
    if torch.allclose(g, e, rtol=tol, atol=tol, equal_nan=True):
        return True, err, 0.0, 0.0, tol
    r = ref64.detach().double() if isinstance(ref64, torch.Tensor) else e
    rmse = (g - r).square().mean().sqrt().item()
    eager_rmse = (e - r).square().mean().sqrt().item()
    factor = 3.0 if eager.dtype in (torch.bfloat16, torch.float16) else 2.0
    return rmse <= factor * eager_rmse + tol / 10, err, rmse, eager_rmse, tol


def source_line(node: Node) -> str:
    """The last frame of the node's stack trace outside torch itself: the model's line."""
    trace = node.meta.get("stack_trace") or ""
    frames = re.findall(r'File "([^"]+)", line (\d+), in (\S+)\n\s*(.*)', trace)
    mine = [f for f in frames if "/torch/" not in f[0]] or frames
    if not mine:
        return ""
    path, line, func, code = mine[-1]
    return f"{path}:{line} in {func}: {code.strip()}"


def _to64(v: Any) -> Any:
    if isinstance(v, torch.Tensor) and v.dtype.is_floating_point:
        return v.detach().double()
    return v


class _Values(Interpreter):
    """Runs a graph in eager, keeping every node's value by name."""

    def __init__(self, gm: GraphModule) -> None:
        super().__init__(gm)
        self.values: dict[str, Any] = {}

    def run_node(self, n: Node) -> Any:
        out = super().run_node(n)
        self.values[n.name] = out
        return out


def _eager_values(gm: GraphModule, args: list[Any], f64: bool) -> dict[str, Any]:
    run = _Values(gm)
    with torch.no_grad():
        if f64:
            # constants and dtype arguments stay as captured: the graph's own casts decide
            run.run(*[_to64(a) for a in args])
        else:
            run.run(*args)
    return run.values


def _capture(model: Any, inputs: tuple[Any, ...]) -> list[tuple[GraphModule, list[Any]]]:
    """The ATen inference graphs of model(*inputs) as torchair gets them, each with the real
    inputs of its first call."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    from torchair.decompositions import torchair_decompositions

    graphs: list[list[Any]] = []

    def compiler(gm: GraphModule, example_inputs: list[Any]) -> Any:
        entry: list[Any] = [gm, None]
        graphs.append(entry)

        def run(*args: Any) -> Any:
            if entry[1] is None:
                entry[1] = [a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args]
            return gm(*args)

        return make_boxed_func(run)

    backend = aot_autograd(fw_compiler=compiler, decompositions=torchair_decompositions())
    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(model, backend=backend)(*inputs)
    torch._dynamo.reset()
    return [(gm, args) for gm, args in graphs if args is not None]


def _single_op(node: Node, config: Any) -> Any:
    """node compiled alone (its tensor inputs as graph inputs), or None if it cannot be."""
    from torchair.compiler import lower_subgraph
    from torchair.errors import TorchairError, Unsupported

    g = Graph()
    outer = [a for a in node.all_input_nodes]
    env = {a: g.placeholder(a.name) for a in outer}
    for a in outer:
        env[a].meta["val"] = a.meta.get("val")
    copy_ = g.node_copy(node, lambda a: env[a])
    g.output(copy_)
    try:
        return lower_subgraph(GraphModule(torch.nn.Module(), g), outer, config), outer
    except (Unsupported, TorchairError, AssertionError):
        return None


def _localize(graph: str, name: str, sub: GraphModule, ref32: dict[str, Any], ref64: dict[str, Any],
              config: Any) -> Mismatch | None:
    for n in sub.graph.nodes:
        if n.op != "call_function":
            continue
        made = _single_op(n, config)
        if made is None:
            continue
        air, outer = made
        try:
            with torch.no_grad():
                got = air(*[ref32[a.name] for a in outer])
        except Exception:
            continue
        ok, err, rmse, eager_rmse, tol = _within(got, ref32.get(n.name), ref64.get(n.name))
        if not ok:
            from torchair.compiler import op_name

            return Mismatch(graph, name, n.name, op_name(n), source_line(n), err, rmse, eager_rmse, tol)
    return None


def compare(model: Any, *inputs: Any, options: dict[str, Any] | None = None) -> CompareReport:
    """Checks every compiled subgraph of model(*inputs) against eager (and fp64) and names
    the first op whose output leaves SPEC section 4's tolerance; see the module's text."""
    from torchair.compiler import compile_graph
    from torchair.config import config_from

    config, extras = config_from(options, None).effective()
    extras.debug.keep_sources = True
    config.freezing = False  # parameters stay graph inputs, so eager and compiled read the same tensors
    report = CompareReport()
    for gi, (gm, args) in enumerate(_capture(model, inputs)):
        label = f"graph{gi}"
        ref32 = _eager_values(gm, args, f64=False)
        ref64 = _eager_values(gm, args, f64=True)
        work = copy.deepcopy(gm)
        compiled, _ = compile_graph(work, config, "inference")
        runner = _Checked(compiled, label, ref32, ref64, config, report)
        with torch.no_grad():
            runner.run(*args)
        if report.first is not None:
            break
    return report


class _Checked(Interpreter):
    """Runs the compiled graph on eager's values: each compiled subgraph gets exactly the
    inputs eager computed, so a difference is that subgraph's own."""

    def __init__(self, gm: GraphModule, label: str, ref32: dict[str, Any], ref64: dict[str, Any], config: Any,
                 report: CompareReport) -> None:
        super().__init__(gm)
        self.label, self.ref32, self.ref64, self.config, self.report = label, ref32, ref64, config, report

    def call_module(self, target: Any, args: Any, kwargs: Any) -> Any:
        sub = self.fetch_attr(target)
        source = getattr(sub, "source", None)
        if source is None:  # a subgraph left to eager
            return super().call_module(target, args, kwargs)
        placeholders = [n for n in source.graph.nodes if n.op == "placeholder"]
        ins = [self.ref32.get(p.name, a) for p, a in zip(placeholders, args)]
        got = sub(*ins)
        out_node = next(n for n in source.graph.nodes if n.op == "output")
        results = out_node.args[0]
        results = list(results) if isinstance(results, (tuple, list)) else [results]
        gots = [got] if not isinstance(got, (tuple, list)) else list(got)
        ok_all, worst = True, 0.0
        for r, g in zip(results, gots):
            ok, err, *_ = _within(g, self.ref32.get(r.name), self.ref64.get(r.name))
            ok_all &= ok
            worst = max(worst, err)
        self.report.subgraphs.append((self.label, str(target), ok_all, worst))
        if not ok_all and self.report.first is None:
            self.report.first = _localize(self.label, str(target), source, self.ref32, self.ref64, self.config)
            if self.report.first is None:
                r, g = next((r, g) for r, g in zip(results, gots)
                            if not _within(g, self.ref32.get(r.name), self.ref64.get(r.name))[0])
                _, err, rmse, eager_rmse, tol = _within(g, self.ref32.get(r.name), self.ref64.get(r.name))
                self.report.first = Mismatch(self.label, str(target), "", "", source_line(r), err, rmse, eager_rmse, tol)
        # the rest of the graph continues from eager's values, so later subgraphs are judged alone
        if len(results) == 1 and not isinstance(got, (tuple, list)):
            return self.ref32.get(results[0].name, got)
        return type(got)(self.ref32.get(r.name, g) for r, g in zip(results, gots))

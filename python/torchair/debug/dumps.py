"""The files TorchAir's debug options write, per ATen graph torchair is given:
``debug.graph_dump`` (txt / py / dot / svg), ``debug.fx_summary`` (a CSV of the ops and what
torchair does with each) and the data dump of ``debug.data_dump`` / ``dump_config`` (each
compiled subgraph's inputs and outputs as .npy).

``GraphDump`` follows one graph through its compile: made before torchair touches it (the
partitioner rewrites the graph in place, so the dumps' view of it is taken first), told the
compile report at the end, and asked by ``lower_subgraph`` for the data-dump hook of each
subgraph it compiles. File names carry a process-wide graph number, the graph's kind
(forward, backward, inference) and the pid, so a run's files sort in compile order.
"""

from __future__ import annotations

import csv
import itertools
import os
import shutil
import subprocess
from typing import Any

import torch
from torch.fx import GraphModule, Node

from torchair.debug.options import DataDumpOptions, DebugOptions
from torchair.log import get_logger

log = get_logger("debug")
_graph_ids = itertools.count()


def _shape_of(val: Any) -> str:
    if isinstance(val, torch.Tensor):
        return f"{str(val.dtype).replace('torch.', '')}{list(val.shape)}"
    if isinstance(val, (tuple, list)):
        return "(" + ", ".join(_shape_of(v) for v in val) + ")"
    return type(val).__name__ if val is not None else ""


def _dtype_of(node: Node) -> str:
    val = node.meta.get("val")
    if isinstance(val, (tuple, list)):
        val = next((v for v in val if isinstance(v, torch.Tensor)), None)
    return str(val.dtype).replace("torch.", "") if isinstance(val, torch.Tensor) else ""


class GraphDump:
    """One graph's dumps. ``finish(report)`` writes them (report None: the graph runs in
    eager, uncompiled)."""

    def __init__(self, gm: GraphModule, kind: str, options: DebugOptions) -> None:
        from torchair.compiler import op_name
        from torchair.partition import is_size_node

        self.options = options
        self.kind = kind
        self.id = next(_graph_ids)
        self.label = f"graph{self.id}_{kind}"
        self.subgraphs = 0
        # the graph as given, before partitioning rewrites it
        self.nodes = [
            (n.name, n.op, op_name(n) if n.op == "call_function" else str(n.target), _shape_of(n.meta.get("val")),
             [a.name for a in n.all_input_nodes], _dtype_of(n))
            for n in gm.graph.nodes
        ]
        self.ops = [n for n in gm.graph.nodes if n.op == "call_function" and not is_size_node(n)]
        self.text = gm.print_readable(print_output=False, include_stride=True) if options.graph_dump else ""
        self.py = runnable_source(gm) if options.graph_dump == "py" else None
        self.support: dict[str, str | None] = {}
        if options.fx_summary:
            from torchair.compiler import check_node

            # what torchair would do with each op alone (the real compile may also leave
            # an op to eager beside unsupported neighbours: finish() uses its report then)
            self.support = {n.name: check_node(n) for n in self.ops}
        self.op_names = {n.name: op_name(n) for n in self.ops}
        self.op_dtypes = {n.name: _dtype_of(n) for n in self.ops}
        options.current = self

    @property
    def skip_compile(self) -> bool:
        return self.options.fx_summary and self.options.skip_compile

    def _file(self, folder: str, stem: str, ext: str) -> str:
        os.makedirs(folder, exist_ok=True)
        return os.path.join(folder, f"{stem}_pid{os.getpid()}.{ext}")

    def finish(self, report: Any) -> list[str]:
        self.options.current = None
        written: list[str] = []
        eager = {name: reason for name, _, reason in report.fallbacks} if report is not None else None
        if self.options.fx_summary:
            written.append(self._write_summary(eager))
        kind = self.options.graph_dump
        if kind is not None:
            path = self._file(self.options.graph_dump_path, f"torchair_{self.label}", "dot" if kind == "svg" else kind)
            if kind == "txt":
                text = self.text + "\n"
                text += str(report) if report is not None else "(not compiled: the graph runs in eager)"
                _write(path, text + "\n")
            elif kind == "py":
                _write(path, self.py[0])
                if self.py[1]:
                    torch.save(self.py[1], os.path.splitext(path)[0] + ".pt")
            else:
                _write(path, self._dot(eager))
                if kind == "svg":
                    svg = os.path.splitext(path)[0] + ".svg"
                    exe = shutil.which("dot")
                    if exe is None:
                        raise RuntimeError("config.debug.graph_dump.type='svg': Graphviz's dot is no longer on PATH")
                    subprocess.run([exe, "-Tsvg", path, "-o", svg], check=True, capture_output=True, timeout=300)
                    written.append(svg)
            written.append(path)
        for p in written:
            log.info("wrote %s", p)
        return written

    def _write_summary(self, eager: dict[str, str] | None) -> str:
        rows: dict[tuple[str, str, str, str], int] = {}
        for name, op in self.op_names.items():
            if eager is None:
                reason = self.support.get(name)
            else:
                reason = eager.get(name)
            status = "eager" if reason is not None else "compiled"
            key = (op, status, reason or "", self.op_dtypes[name])
            rows[key] = rows.get(key, 0) + 1
        path = self._file(self.options.fx_summary_path, f"torchair_fx_summary_{self.label}", "csv")
        with open(path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["aten_op", "count", "status", "reason", "dtype"])
            for (op, status, reason, dtype), count in sorted(rows.items(), key=lambda kv: (kv[0][1], kv[0][0])):
                w.writerow([op, count, status, reason, dtype])
        return path

    def _dot(self, eager: dict[str, str] | None) -> str:
        """The ATen graph as DOT: ops torchair compiled in green, ops left to eager in orange
        (with the reason as tooltip), inputs and outputs grey."""

        def q(s: str) -> str:
            return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'

        lines = [f"digraph {q(self.label)} {{", "  rankdir=TB;", '  node [shape=box, style=filled, fontname="monospace"];']
        for name, op, target, shape, _, _ in self.nodes:
            if op == "call_function":
                reason = None if eager is None else eager.get(name)
                if eager is None:
                    reason = self.support.get(name) if self.support else None
                color = "#f5b971" if reason else "#9fd89f"
                tip = f', tooltip={q("eager: " + reason)}' if reason else ""
                lines.append(f"  {q(name)} [label={q(name + chr(10) + target + chr(10) + shape)}, fillcolor={q(color)}{tip}];")
            else:
                lines.append(f"  {q(name)} [label={q(name + chr(10) + shape)}, fillcolor=\"#dddddd\", shape=ellipse];")
        for name, _, _, _, inputs, _ in self.nodes:
            for a in inputs:
                lines.append(f"  {q(a)} -> {q(name)};")
        lines.append("}")
        return "\n".join(lines) + "\n"

    # ---- data dump ---------------------------------------------------------------------

    def data_hook(self, sub: GraphModule) -> Any:
        """The hook for the next compiled subgraph (``AirSubgraph.debug``), or None when the
        dump does not choose it (dump_layer, data_dump.filter)."""
        d = self.options.data_dump
        name = f"air_{self.subgraphs}"
        self.subgraphs += 1
        ops = [n for n in sub.graph.nodes if n.op == "call_function"]
        if d.layers.strip():
            wanted = set(d.layers.split())
            from torchair.compiler import op_name

            names = {n.name for n in ops} | {op_name(n) for n in ops} | {name}
            names |= {op_name(n).split(".")[1] for n in ops if op_name(n).startswith("aten.")}
            if not wanted & names:
                return None
        if d.filter is not None and all(d.filter(n) is None for n in ops):
            return None
        return DataDumpHook(os.path.join(d.path, "torchair_dump", self.label, name), d)


class DataDumpHook:
    """Runs a compiled subgraph and, on the chosen calls, saves its inputs and outputs."""

    def __init__(self, folder: str, options: DataDumpOptions) -> None:
        self.folder = folder
        self.options = options
        self.chosen = options.step_set()
        self.calls = 0

    def __call__(self, air: Any, args: tuple[Any, ...]) -> Any:
        k = self.calls
        self.calls += 1
        out = air.call(args)
        if not self.chosen(k):
            return out
        where = os.path.join(self.folder, f"call{k}")
        os.makedirs(where, exist_ok=True)
        tensors: list[tuple[str, torch.Tensor]] = []
        if self.options.mode in ("input", "all"):
            tensors += [(f"input{i}", a) for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
        if self.options.mode in ("output", "all"):
            outs = [out] if isinstance(out, torch.Tensor) else list(out)
            tensors += [(f"output{i}", o) for i, o in enumerate(outs)]
        if self.options.stats:
            with open(os.path.join(where, "stats.csv"), "w", newline="") as f:
                w = csv.writer(f)
                w.writerow(["tensor", "dtype", "shape", "min", "max", "mean"])
                for name, t in tensors:
                    v = t.detach().double() if t.numel() else None
                    w.writerow([name, str(t.dtype).replace("torch.", ""), list(t.shape),
                                *(("", "", "") if v is None else (v.min().item(), v.max().item(), v.mean().item()))])
        else:
            import numpy as np

            for name, t in tensors:
                t = t.detach()
                if t.dtype == torch.bfloat16:  # numpy has no bfloat16: saved widened
                    t = t.float()
                np.save(os.path.join(where, f"{name}.npy"), t.contiguous().numpy())
        log.debug("dumped %d tensor(s) to %s", len(tensors), where)
        return out


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _example(val: Any) -> str:
    """Source that makes a random value like val (a fake tensor or a SymInt)."""
    if isinstance(val, torch.SymInt):
        return str(val.node.hint if val.node.hint is not None else 1)
    if isinstance(val, (int, float, bool)):
        return repr(val)
    if isinstance(val, torch.Tensor):
        shape = [int(s.node.hint) if isinstance(s, torch.SymInt) and s.node.hint is not None else int(s) for s in val.shape]
        if val.dtype.is_floating_point or val.dtype.is_complex:
            return f"torch.randn({shape}, dtype={val.dtype})"
        if val.dtype == torch.bool:
            return f"torch.zeros({shape}, dtype=torch.bool)"
        # zeros: a valid index into any non-empty dim
        return f"torch.zeros({shape}, dtype={val.dtype})"
    return "None"


def runnable_source(gm: GraphModule) -> tuple[str, dict[str, torch.Tensor]]:
    """A Python file that rebuilds gm and runs it on random inputs of its shapes, and the
    tensors it reads as attributes (saved beside it as .pt)."""
    body = gm.print_readable(print_output=False, include_stride=True, include_device=True)
    # the class is named after gm's own class, which may be "<lambda>"
    first, _, rest = body.partition("\n")
    body = "class GraphModule(torch.nn.Module):\n" + rest if first.startswith("class ") else body
    consts: dict[str, torch.Tensor] = {}
    for n in gm.graph.nodes:
        if n.op == "get_attr":
            obj = gm
            for part in str(n.target).split("."):
                obj = getattr(obj, part, None)
            if isinstance(obj, torch.Tensor):
                consts[str(n.target)] = obj.detach().clone()
    inputs = [_example(n.meta.get("val")) for n in gm.graph.nodes if n.op == "placeholder"]
    lines = [
        '"""An ATen graph torchair was given, dumped by config.debug.graph_dump.type=\'py\'.',
        "Run it: python this_file.py (random inputs of the graph's shapes), or import it and call",
        'GraphModule()(*make_inputs())."""',
        "import os",
        "",
        "import torch",
        "from torch import device  # noqa: F401  (the graph's code may name devices)",
        "",
        "inf, nan = float('inf'), float('nan')",
        "",
        body,
        "",
        "def load_constants(module):",
        "    path = os.path.splitext(os.path.abspath(__file__))[0] + '.pt'",
        "    if os.path.exists(path):",
        "        for name, t in torch.load(path).items():",
        "            owner = module",
        "            *parents, leaf = name.split('.')",
        "            for p in parents:",
        "                if not hasattr(owner, p):",
        "                    setattr(owner, p, torch.nn.Module())",
        "                owner = getattr(owner, p)",
        "            setattr(owner, leaf, t)",
        "    return module",
        "",
        "",
        "def make_inputs():",
        f"    return [{', '.join(inputs)}]",
        "",
        "",
        "if __name__ == '__main__':",
        "    torch.manual_seed(0)",
        "    out = load_constants(GraphModule())(*make_inputs())",
        "    outs = out if isinstance(out, (tuple, list)) else [out]",
        "    for i, o in enumerate(outs):",
        "        print(i, tuple(o.shape) if isinstance(o, torch.Tensor) else o)",
    ]
    return "\n".join(lines) + "\n", consts

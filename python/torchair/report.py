"""``torchair.explain``: compile a model and say what happened: the
subgraphs run in C, the ops in each, and every op left to eager with why;
each compiled subgraph's memory plan, and its graph before and after the
passes as Graphviz DOT (and SVG where Graphviz's ``dot`` is installed)."""

from __future__ import annotations

import re
import shutil
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import torch

from torchair.backend import _backend
from torchair.compiler import CompileReport
from torchair.config import config_from


@dataclass
class ExplainReport:
    graphs: list[CompileReport] = field(default_factory=list)
    # compile phases and runs as timed spans (profile() records them: torchair.trace)
    spans: list[Any] = field(default_factory=list, repr=False)
    # per compiled model (by id): its runs' step events, ([(step, start_ns, dur_ns, tid)], dropped)
    kernel_trace: dict[int, Any] = field(default_factory=dict, repr=False)

    def write_trace(self, path: str | Path) -> str:
        """Writes a Chrome/Perfetto trace (trace-event JSON) of the compile's phases and of
        every kernel of every profiled run (see ``torchair.trace``); returns the path."""
        from torchair.trace import write_trace

        return write_trace(self, path)

    @property
    def fallbacks(self) -> list[tuple[str, str, str]]:
        return [f for g in self.graphs for f in g.fallbacks]

    @property
    def fallback_ops(self) -> set[str]:
        return {op for _, op, _ in self.fallbacks}

    @property
    def compiled_ops(self) -> int:
        return sum(g.compiled_ops for g in self.graphs)

    @property
    def total_ops(self) -> int:
        return sum(g.total_ops for g in self.graphs)

    def memory(self) -> list[dict[str, Any]]:
        """The memory plan of every compiled subgraph (see ``subgraph_memory``)."""
        return [subgraph_memory(s) for g in self.graphs for s in g.subgraphs if s.compiled and s.model is not None]

    def memory_summary(self) -> str:
        return memory_summary(self.graphs)

    def write_graphs(self, directory: str | Path, svg: bool | None = None) -> list[Path]:
        """Writes every compiled subgraph's graph before and after the passes
        as DOT files into directory (see ``write_graphs``)."""
        return write_graphs(self.graphs, directory, svg=svg)

    def profile(self) -> list[ProfileRow]:
        """Time per kernel over the runs made so far (see ``profile``)."""
        return profile_rows(self.graphs)

    def __str__(self) -> str:
        return "\n".join(str(g) for g in self.graphs) or "no graph was compiled"


@dataclass
class ProfileRow:
    kernel: str
    op: str
    steps: int      # steps of the compiled graphs that ran this kernel
    runs: int       # model runs timed
    seconds: float  # total over those runs

    @property
    def ms_per_run(self) -> float:
        return 1e3 * self.seconds / max(self.runs, 1)


def profile_rows(graphs: Iterable[Any]) -> list[ProfileRow]:
    """Per-step times measured in C (two clock reads per step) summed by
    (kernel, op) over every compiled subgraph, largest first."""
    rows: dict[tuple[str, str], ProfileRow] = {}
    for g in graphs:
        for sub in g.subgraphs:
            if not sub.compiled or sub.model is None:
                continue
            for kernel, op, runs, seconds in sub.model.profile():
                if runs == 0:
                    continue
                r = rows.setdefault((kernel, op), ProfileRow(kernel, op, 0, runs, 0.0))
                r.steps += 1
                r.seconds += seconds
                r.runs = max(r.runs, runs)
    return sorted(rows.values(), key=lambda r: -r.seconds)


def format_profile(rows: list[ProfileRow]) -> str:
    total = sum(r.ms_per_run for r in rows)
    lines = [f"{'kernel':34} {'op':22} {'steps':>5} {'ms/run':>9} {'share':>6}"]
    for r in rows:
        share = r.ms_per_run / total if total else 0.0
        lines.append(f"{r.kernel:34} {r.op:22} {r.steps:5d} {r.ms_per_run:9.3f} {share:6.1%}")
    lines.append(f"{'total':34} {'':22} {sum(r.steps for r in rows):5d} {total:9.3f}")
    return "\n".join(lines)


def profile(model: Any, *inputs: Any, runs: int = 10, options: dict[str, Any] | None = None,
            **kwargs: Any) -> ExplainReport:
    """Compiles model with torchair, runs it ``runs`` times more after the
    first call (under no_grad unless training) and returns the report, whose
    ``profile()`` gives the time per kernel over those runs (the first call,
    which also first-touches the memory plan's arena, is not counted):
    ``print(format_profile(torchair.report.profile(model, x).profile()))``."""
    import time

    from torchair import trace

    config = config_from(options, None)
    config.check_built()
    recorder: list[CompileReport] = []
    spans = trace.Recorder()
    last = [0]  # when dynamo was last in charge: the first call's start, then each backend's end

    def backend(gm: Any, example_inputs: Any) -> Any:
        now = time.monotonic_ns()
        spans.add(trace.Span("dynamo", "compile", last[0], now - last[0], threading.get_native_id()))
        try:
            with trace.span("aot_autograd", nodes=len(gm.graph.nodes)):
                return _backend(gm, example_inputs, config, recorder)
        finally:
            last[0] = time.monotonic_ns()

    compiled = torch.compile(model, backend=backend, **kwargs)
    training = getattr(model, "training", False)
    with torch.set_grad_enabled(training and torch.is_grad_enabled()):
        with trace.recording(spans):
            last[0] = time.monotonic_ns()
            with trace.span("first call: capture, compile, run", cat="run"):
                compiled(*inputs)
        models = [s.model for g in recorder for s in g.subgraphs if s.compiled and s.model is not None]
        for m in models:
            m.profile_reset()
            try:  # every step of every run, with some room for graphs run more than once a call
                m.trace_enable(len(m.profile()) * (runs + 1) * 2 + 16)
            except Exception:  # a subgraph that has not run has no session: no events
                pass
        with trace.recording(spans):
            for i in range(runs):
                with trace.span(f"run {i}", cat="run"):
                    compiled(*inputs)
        kernel_trace = {}
        for m in models:
            try:
                kernel_trace[id(m)] = m.trace()
                m.trace_enable(0)
            except Exception:
                continue
    return ExplainReport(recorder, spans.spans, kernel_trace)


def explain(
    model: Any, *inputs: Any, options: dict[str, Any] | None = None, config: Any = None, **kwargs: Any
) -> ExplainReport:
    """Compiles model with torchair, runs it once on inputs (under no_grad
    unless the model is training) and returns the compile report. The options
    come from ``options`` (a dict) or ``config`` (a CompilerConfig, TorchAir's
    groups included), not both."""
    if config is not None and options is not None:
        from torchair.errors import OptionError

        raise OptionError(1, "invalid argument", "explain: give options= or config=, not both")
    if config is None:
        config = config_from(options, None)
    config.effective()
    recorder: list[CompileReport] = []

    def backend(gm: Any, example_inputs: Any) -> Any:
        return _backend(gm, example_inputs, config, recorder)

    compiled = torch.compile(model, backend=backend, **kwargs)
    training = getattr(model, "training", False)
    with torch.set_grad_enabled(training and torch.is_grad_enabled()):
        compiled(*inputs)
    return ExplainReport(recorder)


def subgraph_memory(sub: Any) -> dict[str, Any]:
    """A compiled subgraph's memory plan, from libair: ``arena_bytes`` (the
    planned peak of intermediate values), ``no_reuse_bytes`` (every value in
    its own buffer), ``inplace`` (steps writing over a dead input),
    ``buffers``, ``workspace_bytes``, ``weight_bytes`` (constants the model
    holds: its copies and packed weights), ``borrowed_bytes``; ``known`` is
    False for symbolic sizes before the first run. Sizes are the last run's,
    else those known at compile time."""
    info = dict(sub.model.memory())
    info["name"] = str(sub.name)
    return info


def _mib(n: int) -> str:
    return f"{n / 2**20:.2f} MiB"


def memory_summary(graphs: Iterable[Any]) -> str:
    """One line per compiled subgraph: planned arena vs no reuse, in-place
    steps and weight bytes."""
    lines = []
    for g in graphs:
        for sub in g.subgraphs:
            if not sub.compiled or sub.model is None:
                continue
            m = subgraph_memory(sub)
            head = f"{g.graph} {m['name']}:"
            if not m["known"]:
                lines.append(f"{head} sizes are symbolic and it has not run yet; weights {_mib(m['weight_bytes'])}")
                continue
            saved = 1 - m["arena_bytes"] / m["no_reuse_bytes"] if m["no_reuse_bytes"] else 0.0
            lines.append(
                f"{head} arena {_mib(m['arena_bytes'])} planned vs {_mib(m['no_reuse_bytes'])} without reuse "
                f"({saved:.0%} saved), {m['inplace']} step(s) in place of {m['buffers']} values, "
                f"workspace {_mib(m['workspace_bytes'])}, weights held {_mib(m['weight_bytes'])}"
            )
    return "\n".join(lines) or "no compiled subgraph"


def has_graphviz() -> bool:
    """Is Graphviz's ``dot`` on PATH (needed for SVG only)?"""
    return shutil.which("dot") is not None


def dot_to_svg(dot_path: str | Path) -> Path:
    """Renders a DOT file to SVG beside it with Graphviz's ``dot``."""
    dot_path = Path(dot_path)
    svg = dot_path.with_suffix(".svg")
    exe = shutil.which("dot")
    if exe is None:
        raise RuntimeError("Graphviz's dot is not on PATH (apt-get install graphviz)")
    subprocess.run([exe, "-Tsvg", str(dot_path), "-o", str(svg)], check=True, capture_output=True, timeout=300)
    return svg


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "graph"


def write_graphs(graphs: Iterable[Any], directory: str | Path, svg: bool | None = None) -> list[Path]:
    """For every compiled subgraph of the compile reports in graphs, writes
    ``<graph>_<subgraph>_before.dot`` and ``..._after.dot`` (the graph as
    lowered and the graph that runs, with kernels and in-place steps) into
    directory; with svg True also an SVG of each (svg None: when Graphviz's
    ``dot`` is installed). Returns the paths written."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    render = has_graphviz() if svg is None else svg
    written: list[Path] = []
    for g in graphs:
        for sub in g.subgraphs:
            if not sub.compiled or sub.model is None:
                continue
            for before in (True, False):
                path = out / f"{_safe(g.graph)}_{_safe(str(sub.name))}_{'before' if before else 'after'}.dot"
                path.write_text(sub.model.dot(before=before))
                written.append(path)
                if render:
                    written.append(dot_to_svg(path))
    return written

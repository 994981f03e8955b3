"""Chrome / Perfetto traces of a torchair model (``chrome://tracing``, ui.perfetto.dev).

``torchair.report.profile(model, *inputs, runs=N)`` records, while it compiles, the compile's
phases as spans (``span``): dynamo's capture, aot_autograd, torchair's compile of each graph,
its partitioning, the lowering of each subgraph, and inside libair each pass, kernel
selection and the memory plan (timed in C: ``Model.compile_phases``). Then each of the N runs
records every kernel step of every compiled subgraph with the thread that ran it (libair's
per-session trace: ``Model.trace``). ``write_trace(report, path)`` writes them as trace-event
JSON: one complete ("X") event per kernel per run, with the op, its tensors' shapes, bytes
moved and FLOPs (for the products: linear, matmul, convolution, attention) in ``args``.

All timestamps are CLOCK_MONOTONIC (Python's ``time.monotonic_ns``, libair's clock), so the
C and Python events share one timeline; thread ids are the OS's (``threading.get_native_id``).

``python -m torchair.trace resnet50 -o resnet50.trace.json`` writes one for a zoo model.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from torchair.log import get_logger

log = get_logger("trace")


@dataclass
class Span:
    name: str
    cat: str
    start_ns: int
    dur_ns: int
    tid: int
    args: dict[str, Any] = field(default_factory=dict)


class Recorder:
    """Spans recorded while it is active (``recording``)."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.lock = threading.Lock()

    def add(self, span: Span) -> None:
        with self.lock:
            self.spans.append(span)


_active: Recorder | None = None


@contextmanager
def recording(rec: Recorder) -> Iterator[Recorder]:
    global _active
    before, _active = _active, rec
    try:
        yield rec
    finally:
        _active = before


def active() -> Recorder | None:
    return _active


@contextmanager
def span(name: str, cat: str = "compile", **args: Any) -> Iterator[None]:
    """Times the block as a span of the active recorder; nothing when none is active."""
    rec = _active
    if rec is None:
        yield
        return
    t0 = time.monotonic_ns()
    try:
        yield
    finally:
        rec.add(Span(name, cat, t0, time.monotonic_ns() - t0, threading.get_native_id(), args))


def add_c_phases(model: Any, subgraph: str) -> None:
    """libair's compile phases of a just-compiled model (passes, kernel selection, memory
    plan) as spans of the active recorder, on the thread that compiled it."""
    rec = _active
    if rec is None:
        return
    tid = threading.get_native_id()
    for name, t0, dt in model.compile_phases():
        label = name if name in ("kernel selection", "memory plan") else f"pass {name}"
        rec.add(Span(label, "libair", t0, dt, tid, {"subgraph": subgraph}))


# ---- kernel events ---------------------------------------------------------------------------

_DTYPE_BYTES = {"f32": 4, "f64": 8, "f16": 2, "bf16": 2, "i64": 8, "i32": 4, "i16": 2, "i8": 1, "u8": 1, "bool": 1}


def _flops(op: str, ins: list[tuple[str, tuple[int, ...]]], out: tuple[int, ...]) -> int | None:
    """Multiply-adds x 2 of the products, from their tensors' shapes; None where not known."""
    n_out = math.prod(out) if out else 1
    if op in ("linear", "mm", "bmm", "matmul", "addmm", "linear_lowp") and ins and ins[0][1]:
        return 2 * n_out * ins[0][1][-1]
    if op.startswith("conv") and len(ins) >= 2 and len(ins[1][1]) >= 3:
        return 2 * n_out * math.prod(ins[1][1][1:])
    if op == "sdpa" and len(ins) >= 3 and len(ins[0][1]) >= 2 and len(ins[1][1]) >= 2:
        q, k, v = ins[0][1], ins[1][1], ins[2][1]
        heads_len = math.prod(q[:-1])  # B * H * L
        return 2 * heads_len * k[-2] * (q[-1] + v[-1])
    return None


def _step_args(model: Any, step: int, op: str) -> dict[str, Any]:
    tensors = model.step_tensors(step)
    ins = [(dt, tuple(shape)) for is_out, dt, shape in tensors if not is_out]
    outs = [(dt, tuple(shape)) for is_out, dt, shape in tensors if is_out]
    nbytes = sum(_DTYPE_BYTES.get(dt, 4) * math.prod(shape) for dt, shape in ins + outs)
    args: dict[str, Any] = {
        "inputs": [f"{dt}{list(s)}" for dt, s in ins],
        "outputs": [f"{dt}{list(s)}" for dt, s in outs],
        "bytes": nbytes,
    }
    flops = _flops(op, ins, outs[0][1] if outs else ())
    if flops is not None:
        args["flops"] = flops
    return args


def kernel_events(graphs: list[Any], traced: dict[int, Any]) -> list[Span]:
    """Every traced step of every compiled subgraph of the compile reports, per run
    (traced: {id(model): model.trace()} as profile() read them)."""
    out: list[Span] = []
    for g in graphs:
        for sub in g.subgraphs:
            if not sub.compiled or sub.model is None or id(sub.model) not in traced:
                continue
            events, dropped = traced[id(sub.model)]
            if dropped:
                log.warning("trace of %s: %d step event(s) did not fit and are missing", sub.name, dropped)
            if not events:
                continue
            rows = sub.model.profile()
            cache: dict[int, dict[str, Any]] = {}
            for step, t0, dt, tid in events:
                kernel, op = rows[step][0], rows[step][1]
                if step not in cache:
                    cache[step] = _step_args(sub.model, step, op)
                args = {"op": op, "step": step, "subgraph": str(sub.name), "graph": g.graph, **cache[step]}
                out.append(Span(kernel, "kernel", t0, dt, tid, args))
    return out


def trace_events(spans: list[Span], pid: int | None = None) -> list[dict[str, Any]]:
    """Trace-event JSON objects: complete events in microseconds from the first span, and the
    process's and threads' names."""
    pid = os.getpid() if pid is None else pid
    if not spans:
        return []
    origin = min(s.start_ns for s in spans)
    events: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": "torchair"}}
    ]
    main = threading.main_thread().native_id
    for tid in sorted({s.tid for s in spans}):
        name = "main" if tid == main else f"thread {tid}"
        events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}})
    for s in sorted(spans, key=lambda s: (s.start_ns, -s.dur_ns)):
        events.append(
            {
                "name": s.name,
                "cat": s.cat,
                "ph": "X",
                "ts": (s.start_ns - origin) / 1e3,
                "dur": s.dur_ns / 1e3,
                "pid": pid,
                "tid": s.tid,
                "args": s.args,
            }
        )
    return events


def write_trace(report: Any, path: str | os.PathLike[str]) -> str:
    """Writes the profile report's compile spans and kernel events as trace-event JSON."""
    spans = list(getattr(report, "spans", [])) + kernel_events(report.graphs, getattr(report, "kernel_trace", {}))
    doc = {"traceEvents": trace_events(spans), "displayTimeUnit": "ms"}
    with open(path, "w") as f:
        json.dump(doc, f)
    log.info("wrote %s: %d events", path, len(doc["traceEvents"]))
    return str(path)

"""Test helpers: compile a callable with torchair while recording the
compile reports, so a test can tell a compiled run from an eager fallback."""

from __future__ import annotations

from typing import Any

import torch

from torchair.backend import _backend
from torchair.compiler import CompileReport
from torchair.config import config_from


def recording_backend(options: dict[str, Any] | None = None) -> tuple[Any, list[CompileReport]]:
    """The torchair backend, recording its compile reports in the list it
    returns beside it (one backend for several torch.compile calls lets
    dynamo share a graph between them)."""
    config = config_from(options, None)
    reports: list[CompileReport] = []

    def backend(gm: Any, example_inputs: Any) -> Any:
        return _backend(gm, example_inputs, config, reports)

    return backend, reports


def compile_recording(fn: Any, options: dict[str, Any] | None = None, **kwargs: Any) -> tuple[Any, list[CompileReport]]:
    backend, reports = recording_backend(options)
    return torch.compile(fn, backend=backend, **kwargs), reports


def fallbacks(reports: list[CompileReport]) -> list[tuple[str, str, str]]:
    return [f for r in reports for f in r.fallbacks]


def kernel_steps(reports: list[CompileReport], graph: str) -> list[tuple[str, str, str]]:
    """(op, kernel, output type) of every step of the compiled subgraphs of
    one graph kind ("inference", "forward", "backward"), from their reports'
    "kernels per step" tables; an alias step's kernel is "(alias)"."""
    steps = []
    for r in reports:
        if r.graph != graph:
            continue
        for s in r.subgraphs:
            text = s.air_report
            for line in text[text.index("kernels per step:"):text.index("memory (")].splitlines()[1:]:
                parts = line.split()
                if len(parts) > 3:
                    steps.append((parts[1], parts[2], parts[3]))
    return steps


def run_mixed_precision(model: Any, x: Any) -> tuple[Any, list[CompileReport], Any, Any]:
    """model compiled with mixed_precision='bf16' and run on x, beside eager fp32 and eager under
    torch.autocast bf16 (the yardstick for the error): (out, reports, eager, autocast)."""
    compiled, reports = compile_recording(model, {"mixed_precision": "bf16"})
    with torch.no_grad():
        out = compiled(x)
        want = model(x)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            auto = model(x).float()
    return out, reports, want, auto

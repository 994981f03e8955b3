"""``torchair.explain``: compile a model and say what happened: the
subgraphs run in C, the ops in each, and every op left to eager with why."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from torchair.backend import _backend
from torchair.compiler import CompileReport
from torchair.config import config_from


@dataclass
class ExplainReport:
    graphs: list[CompileReport] = field(default_factory=list)

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

    def __str__(self) -> str:
        return "\n".join(str(g) for g in self.graphs) or "no graph was compiled"


def explain(model: Any, *inputs: Any, options: dict[str, Any] | None = None, **kwargs: Any) -> ExplainReport:
    """Compiles model with torchair, runs it once on inputs (under no_grad
    unless the model is training) and returns the compile report."""
    config = config_from(options, None)
    config.check_built()
    recorder: list[CompileReport] = []

    def backend(gm: Any, example_inputs: Any) -> Any:
        return _backend(gm, example_inputs, config, recorder)

    compiled = torch.compile(model, backend=backend, **kwargs)
    training = getattr(model, "training", False)
    with torch.set_grad_enabled(training and torch.is_grad_enabled()):
        compiled(*inputs)
    return ExplainReport(recorder)

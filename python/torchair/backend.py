"""The torch.compile backend. ``torch.compile(model, backend="torchair")``
finds ``torchair_backend`` through the ``torch_dynamo_backends`` entry point;
``get_npu_backend(compiler_config=...)`` builds one with a given config."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
from torch.fx import GraphModule

from torchair.compiler import CompileReport, compile_graph
from torchair.config import CompilerConfig, config_from
from torchair.decompositions import torchair_decompositions

# Reports of the compiles made by backends that were given a recorder.
_Recorder = list[CompileReport]


def _aten_compiler(config: CompilerConfig, kind: str, recorder: _Recorder | None) -> Callable[..., Any]:
    def compile_aten(gm: GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        from functorch.compile import make_boxed_func

        compiled, report = compile_graph(gm, config, kind)
        if recorder is not None:
            recorder.append(report)
        return make_boxed_func(compiled.forward)

    return compile_aten


def _is_symbolic(gm: GraphModule, example_inputs: list[Any]) -> bool:
    """Whether the graph has symbolic sizes. Dynamo hands the backend real
    example inputs; the symbolic sizes are on its placeholders' fake values."""
    values = [n.meta.get("example_value", n.meta.get("val")) for n in gm.graph.nodes if n.op == "placeholder"]
    for v in values + list(example_inputs):
        if isinstance(v, torch.SymInt):
            return True
        if isinstance(v, torch.Tensor) and any(isinstance(s, torch.SymInt) for s in v.shape):
            return True
    return False


def _backend(gm: GraphModule, example_inputs: list[Any], config: CompilerConfig, recorder: _Recorder | None = None) -> Callable[..., Any]:
    from torch._dynamo.backends.common import aot_autograd

    config.check_built()
    if not config.enable_dynamic_shape and _is_symbolic(gm, example_inputs):
        from torchair.errors import NotBuiltError

        raise NotBuiltError(
            2, "unsupported", "the graph has symbolic shapes but enable_dynamic_shape=False; compile with dynamic=False"
        )
    return aot_autograd(
        fw_compiler=_aten_compiler(config, "forward", recorder),
        bw_compiler=_aten_compiler(config, "backward", recorder),
        inference_compiler=_aten_compiler(config, "inference", recorder),
        decompositions=torchair_decompositions(),
        keep_inference_input_mutations=True,
    )(gm, example_inputs)


def torchair_backend(gm: GraphModule, example_inputs: list[Any], *, options: dict[str, Any] | None = None, mode: str | None = None) -> Callable[..., Any]:
    """The backend behind ``backend="torchair"``; honours ``options`` and ``mode``."""
    return _backend(gm, example_inputs, config_from(options, mode))


def get_npu_backend(*, compiler_config: CompilerConfig | None = None, config: CompilerConfig | None = None) -> Callable[..., Any]:
    """A backend with the given config (the article's ``config=`` and the
    original ``compiler_config=`` are both accepted)."""
    cfg = compiler_config or config or CompilerConfig()
    if not isinstance(cfg, CompilerConfig):
        from torchair.errors import OptionError

        raise OptionError(1, "invalid argument", f"expected a torchair.CompilerConfig, got {type(cfg).__name__}")
    cfg.check_built()
    return functools.partial(_backend, config=cfg)


get_backend = get_npu_backend

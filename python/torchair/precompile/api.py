"""torchair.precompile.save / load: torch's aot_compile, save_compiled_function and
load_compiled_function with backend="torchair", for a module, in two calls. They
turn on torch._dynamo.config.enable_aot_compile, compile and run under
torch.no_grad() (only inference graphs are precompiled), pass the module as torch's
external data (a module cannot be pickled, and its weights are bound at load), and
call the loaded function the way torch traced it (the module's forward, or its
__call__ with the module first)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch


def save(model: torch.nn.Module, example_inputs: Sequence[Any], path: str, *,
         options: dict[str, Any] | None = None, mode: str | None = None) -> Callable[..., Any]:
    """Compiles model for example_inputs (positional) and writes path; returns the compiled
    function (called like the model)."""
    torch._dynamo.config.enable_aot_compile = True
    compiled = torch.compile(model, backend="torchair", fullgraph=True, options=options, mode=mode)
    with torch.no_grad():
        fn = compiled.forward.aot_compile((tuple(example_inputs), {}))
    fn.save_compiled_function(path, external_data={"model": model})
    return _bound(fn, model)


def load(model: torch.nn.Module, path: str) -> Callable[..., Any]:
    """The function saved at path, for this model (an instance of the class it was saved
    from: its parameters are bound at the first call); called like the model."""
    torch._dynamo.config.enable_aot_compile = True
    with open(path, "rb") as f:
        fn = torch.compiler.load_compiled_function(f, external_data={"model": model})
    return _bound(fn, model)


def _bound(fn: Any, model: torch.nn.Module) -> Callable[..., Any]:
    params = list(fn._artifacts.signature.parameters)
    with_self = bool(params) and params[0] == "self"

    def call(*args: Any) -> Any:
        with torch.no_grad():
            return fn(model, *args) if with_self else fn(*args)

    call.compiled = fn  # type: ignore[attr-defined]
    return call

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
         options: dict[str, Any] | None = None, mode: str | None = None,
         guard_filter_fn: Callable[[Sequence[Any]], Sequence[bool]] | None = None) -> Callable[..., Any]:
    """Compiles model for example_inputs (positional) and writes path; returns the compiled
    function (called like the model). guard_filter_fn: torch's (which dynamo guards are
    saved), e.g. serializable_guards for a model whose guards torch cannot all save."""
    torch._dynamo.config.enable_aot_compile = True
    if guard_filter_fn is not None:
        options = {**(options or {}), "guard_filter_fn": guard_filter_fn}
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


def serializable_guards(entries: Sequence[Any]) -> list[bool]:
    """A guard_filter_fn keeping the guards torch can save: aot_compile's own default
    drops global guards and those of a type it cannot serialize, but not a guard built
    on one (a BUILTIN_MATCH made of an ID_MATCH: Hugging Face's activation functions),
    and the save then fails. This drops those too; the loaded function then does not
    notice that such an object (an activation function, a decorator's closure) changed."""
    from torch._dynamo.guards import CheckFunctionManager

    unsupported = CheckFunctionManager.UNSUPPORTED_SERIALIZATION_GUARD_TYPES
    return [not (g.is_global or g.guard_type in unsupported
                 or any(t in unsupported for t in (g.derived_guard_types or ())))
            for g in entries]


def _bound(fn: Any, model: torch.nn.Module) -> Callable[..., Any]:
    params = list(fn._artifacts.signature.parameters)
    with_self = bool(params) and params[0] == "self"

    def call(*args: Any) -> Any:
        with torch.no_grad():
            return fn(model, *args) if with_self else fn(*args)

    call.compiled = fn  # type: ignore[attr-defined]
    return call

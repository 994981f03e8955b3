"""The execution modes being compared, and how each one is compiled.

``eager``              the module itself
``inductor``           ``torch.compile(m)`` (Inductor, default options)
``inductor_freezing``  ``torch.compile(m, backend=<compile_fx with
                       torch._inductor.config.freezing = True>)``. In torch 2.13
                       ``options={"freezing": True}`` does NOT turn freezing on (checked: no
                       weight prepacking happens), so the global config is patched around
                       compile_fx, inside a backend of its own (see compile_mode).
``torchair``           ``torch.compile(m, backend="torchair")``
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

MODES: tuple[str, ...] = ("eager", "inductor", "inductor_freezing", "torchair")


@dataclass
class Compiled:
    fn: Callable[..., Any]
    notes: list[str] = field(default_factory=list)
    # Entered around the first call, where compilation actually happens.
    first_call_ctx: Callable[[], contextlib.AbstractContextManager[None]] = contextlib.nullcontext


@contextlib.contextmanager
def _freezing() -> Iterator[None]:
    import torch._inductor.config as inductor_config

    with inductor_config.patch(freezing=True):
        yield


def _inductor_freezing_backend(gm: Any, example_inputs: Any) -> Any:
    from torch._inductor.compile_fx import compile_fx

    with _freezing():
        return compile_fx(gm, example_inputs)


def _torchair_backend(model: Any) -> Compiled:
    import torch

    try:
        return Compiled(torch.compile(model, backend="torchair"), ["backend found by name (entry point)"])
    except Exception as by_name:  # noqa: BLE001
        # Not installed as a package (no entry point yet): importing torchair may register it.
        try:
            importlib.import_module("torchair")
            fn = torch.compile(model, backend="torchair")
        except Exception:  # noqa: BLE001
            raise by_name from None
        return Compiled(fn, ["backend registered only after an explicit `import torchair`"])


def compile_mode(mode: str, model: Any) -> Compiled:
    """Wrap ``model`` for ``mode``. Compilation itself is lazy and happens in the first call."""
    import torch

    if mode == "eager":
        return Compiled(model)
    if mode == "inductor":
        return Compiled(torch.compile(model))
    if mode == "inductor_freezing":
        # Its own backend object: dynamo's cache entries are guarded on the
        # backend, so this compiles anew even when mode "inductor" already
        # compiled the same model in this process. (With plain
        # torch.compile(model) and the config patched around the first call,
        # dynamo reused "inductor"'s unfrozen code: a cache hit in 0.05 s.)
        return Compiled(torch.compile(model, backend=_inductor_freezing_backend),
                        ["torch._inductor.config.freezing=True around compile_fx (own backend object)"])
    if mode == "torchair":
        return _torchair_backend(model)
    raise ValueError(f"unknown mode {mode!r}; known: {', '.join(MODES)}")

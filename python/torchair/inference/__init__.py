"""``torchair.inference``: TorchAir's inference helpers. ``set_dim_gears`` declares the sizes a
dim takes; torchair compiles such a dim symbolically (one compile serves every gear) and
refuses other sizes as TorchAir does. ``cache_compile`` and ``readable_cache`` need the compile cache, which is
not built yet: they raise NotBuiltError."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from torchair.errors import NotBuiltError, OptionError

__all__ = ["set_dim_gears", "get_dim_gears", "cache_compile", "readable_cache"]


def set_dim_gears(t: torch.Tensor, dim_gears: dict[int, Sequence[int]]) -> None:
    """Declares the sizes (gears) dims of ``t`` take, as TorchAir's ``set_dim_gears``: each
    dim is marked dynamic for dynamo with the gears' range, and the gears are kept on the
    tensor (``t.dim_gears``). torchair compiles the dim as a symbol, so one compile serves every
    gear (TorchAir compiles one graph per gear; a size of 1 is specialized by dynamo and gets a
    graph of its own). A call with a size that is not a gear raises AssertionError, as in
    TorchAir (``gear_check``)."""
    if not isinstance(t, torch.Tensor):
        raise OptionError(1, "invalid argument", f"set_dim_gears: expected a tensor, got {type(t).__name__}")
    if not isinstance(dim_gears, dict):
        raise OptionError(1, "invalid argument", f"set_dim_gears: dim_gears must be a dict, got {type(dim_gears).__name__}")
    checked: dict[int, list[int]] = {}
    for dim, gears in dim_gears.items():
        if not isinstance(dim, int) or not -t.dim() <= dim < t.dim():
            raise OptionError(
                1, "invalid argument", f"set_dim_gears: dim {dim!r} is not a dim of a tensor of rank {t.dim()}"
            )
        if not isinstance(gears, (list, tuple)) or not all(isinstance(g, int) and not isinstance(g, bool) for g in gears):
            raise OptionError(1, "invalid argument", f"set_dim_gears: the gears of dim {dim} must be a list of ints, got {gears!r}")
        if not 2 <= len(gears) <= 100:
            raise OptionError(
                1, "invalid argument", f"Length of gears for dim index {dim} in dim_gears must be in range [2, 100], but got {len(gears)}."
            )
        if min(gears) < 1:
            raise OptionError(1, "invalid argument", f"set_dim_gears: dim {dim}'s gears must be at least 1, got {list(gears)}")
        checked[dim % t.dim()] = sorted(set(gears))
    old = getattr(t, "dim_gears", None)
    if old is not None and old != checked:
        raise OptionError(1, "invalid argument", "set_dim_gears: the tensor already has other dim gears; TorchAir does not allow setting them again")
    for dim, gears in checked.items():
        if gears[0] == 1:  # dynamo specializes size 1: mark_dynamic would refuse it
            torch._dynamo.maybe_mark_dynamic(t, dim)
        else:
            torch._dynamo.mark_dynamic(t, dim, min=gears[0], max=gears[-1])
    t.dim_gears = checked  # type: ignore[attr-defined]


def get_dim_gears(t: torch.Tensor) -> dict[int, list[int]] | None:
    return getattr(t, "dim_gears", None)


def cache_compile(func: Callable[..., Any], *, config: Any = None, dynamic: bool = True, cache_dir: str | None = None, **kwargs: Any) -> Callable[..., Any]:
    raise NotBuiltError(
        2,
        "unsupported",
        "torchair.inference.cache_compile needs the compile cache, which is not built yet (the deployment issue, #35)",
    )


def readable_cache(cache_bin: str, print_output: bool = True, file: str | None = None) -> str:
    raise NotBuiltError(
        2, "unsupported", "torchair.inference.readable_cache reads cache_compile's files; the compile cache is not built yet (#35)"
    )


def gear_check(example_inputs: Sequence[Any], compiled: Callable[..., Any]) -> Callable[..., Any]:
    """``compiled``, refusing calls whose sizes are not among the gears set_dim_gears declared
    on the example inputs (TorchAir's message). ``compiled`` itself when there are none."""
    checks = [(i, dim, frozenset(gears)) for i, t in enumerate(example_inputs)
              if isinstance(t, torch.Tensor) for dim, gears in (get_dim_gears(t) or {}).items()]
    if not checks:
        return compiled

    def call(*args: Any) -> Any:
        for i, dim, gears in checks:
            size = args[i].shape[dim]
            if size not in gears:
                raise AssertionError(f"The index {size} of the current tensor shape is not within the range {sorted(gears)}")
        return compiled(*args)

    return call

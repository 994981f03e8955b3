"""``torchair.inference``: TorchAir's inference helpers. ``set_dim_gears`` declares the sizes a
dim takes; torchair compiles such a dim symbolically (one compile serves every gear, and every
size between them). ``cache_compile`` and ``readable_cache`` need the compile cache, which is
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
    gear (TorchAir compiles one graph per gear)."""
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
        if len(gears) < 2:
            raise OptionError(1, "invalid argument", f"The gears size at least 2, but config gears is {list(gears)} for dim {dim}")
        if min(gears) < 2:
            # dynamo specializes sizes 0 and 1; TorchAir's gears exclude them too
            raise OptionError(1, "invalid argument", f"set_dim_gears: dim {dim}'s gears must be at least 2, got {list(gears)}")
        checked[dim % t.dim()] = sorted(set(gears))
    for dim, gears in checked.items():
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

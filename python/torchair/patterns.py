"""``torchair.register_replacement``: a user's own rewrite of the ATen graph (a search function
and a replacement function written in torch ops), as TorchAir offers it. Patterns go into one
pattern pass, built on ``torch._inductor.pattern_matcher`` and traced with torchair's own
decompositions, so a pattern is written against the graphs torchair sees; the backend applies
the pass to every ATen graph before lowering while
``config.experimental_config.pattern_fusion_pass`` is on (its default).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from torch.fx import GraphModule

__all__ = ["register_replacement", "apply_replacements", "registered_count"]

_pass: Any = None
_count = 0


def _the_pass() -> Any:
    global _pass
    if _pass is None:
        from torch._inductor.pattern_matcher import PatternMatcherPass

        _pass = PatternMatcherPass(pass_name="torchair_user_patterns")
    return _pass


def _always(match: Any) -> bool:
    return True


def register_replacement(
    search_fn: Callable[..., Any],
    replace_fn: Callable[..., Any],
    example_inputs: Sequence[Any],
    trace_fn: Callable[..., Any] | None = None,
    extra_check: Callable[[Any], bool] = _always,
    search_fn_pattern: Any = None,
    scalar_workaround: dict[str, float | int] | None = None,
    skip_duplicates: bool = False,
) -> bool:
    """Wherever the ATen graph computes ``search_fn``'s graph, compute ``replace_fn``'s
    instead (TorchAir's signature). ``example_inputs`` fix the dtypes and ranks the pattern
    is traced with. Returns whether the pattern was added."""
    global _count
    from torch._inductor.pattern_matcher import fwd_only
    from torch._inductor.pattern_matcher import register_replacement as inductor_register

    from torchair.decompositions import torchair_decompositions

    added = inductor_register(
        search_fn,
        replace_fn,
        list(example_inputs),
        trace_fn or fwd_only,
        _the_pass(),
        extra_check=extra_check,
        scalar_workaround=scalar_workaround,
        search_fn_pattern=search_fn_pattern,
        skip_duplicates=skip_duplicates,
        get_decomp_fn=torchair_decompositions,
    )
    _count += 1
    return bool(added)


def registered_count() -> int:
    return _count


def apply_replacements(gm: GraphModule) -> int:
    """Runs the registered patterns over gm's graph; returns how many places were rewritten."""
    if _pass is None or _count == 0:
        return 0
    n = _pass.apply(gm.graph)
    if n:
        gm.graph.lint()
        gm.recompile()
    return int(n)

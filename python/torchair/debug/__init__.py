"""``torchair.debug``: TorchAir's debug options made real (``config.debug.graph_dump``,
``fx_summary``, ``data_dump``, ``dump_config``: see ``dumps``) and accuracy debugging,
``torchair.debug.compare(model, *inputs)`` (``accuracy``). Light on import: the config tree
imports ``options`` from here."""

from __future__ import annotations

from typing import Any


def compare(model: Any, *inputs: Any, **kwargs: Any) -> Any:
    """See ``torchair.debug.accuracy.compare``."""
    from torchair.debug.accuracy import compare as _compare

    return _compare(model, *inputs, **kwargs)


__all__ = ["compare"]

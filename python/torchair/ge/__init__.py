"""``torchair.ge``: TorchAir's API for building Ascend (GE) graphs inside converters. torchair
builds no GE graphs: the names exist so converter modules import, and using one raises
NotBuiltError pointing to how torchair learns an op (its lowering table)."""

from __future__ import annotations

from typing import Any

from torchair.errors import NotBuiltError

_NAMES = ("custom_op", "Const", "Cast", "Clone", "DataType", "Format", "Tensor", "TensorSpec", "attr")


def _not_built(name: str) -> NotBuiltError:
    return NotBuiltError(
        2,
        "unsupported",
        f"torchair.ge.{name} builds Ascend GE graphs, which torchair does not have; an op torchair lacks runs in "
        "eager, and torchair.register_lowering (the debug-surface issue, #36) will teach it new ones",
    )


class _NotBuilt:
    def __init__(self, name: str) -> None:
        self._name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise _not_built(self._name)

    def __getattr__(self, attr: str) -> Any:
        raise _not_built(f"{self._name}.{attr}")


def __getattr__(name: str) -> Any:
    if name in _NAMES:
        return _NotBuilt(name)
    raise AttributeError(f"module 'torchair.ge' has no attribute {name!r}")

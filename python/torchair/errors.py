"""torchair's exceptions. Errors from the C core arrive as ``TorchairError``
(raised by ``torchair._C``) with args ``(status code, status name, message)``."""

from __future__ import annotations

from torchair._C import Error as TorchairError

__all__ = ["TorchairError", "OptionError", "NotBuiltError", "Unsupported"]


class OptionError(TorchairError, ValueError):
    """An unknown option, or an option with a value of the wrong type."""


class NotBuiltError(TorchairError, NotImplementedError):
    """An option asks for a feature that torchair does not have yet."""


class Unsupported(Exception):
    """Raised inside the lowering when an ATen node cannot run in torchair; the
    partitioner catches it and runs that node in eager, recording the reason."""

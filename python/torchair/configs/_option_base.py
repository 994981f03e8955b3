"""The value types and the group base of TorchAir's config tree, with TorchAir's checks.

Every leaf of ``CompilerConfig``'s groups (``config.debug.graph_dump.type``, ...) is one of
these value objects; assigning to it goes through the group's ``__setattr__``, which
validates at once, as TorchAir does, and raises the same exception types with the same
first line (so a script's ``except ValueError`` or ``pytest.raises(..., match=...)`` keeps
working). The errors are torchair's ``OptionError`` (a ``ValueError``) or, where TorchAir
raises ``TypeError`` / ``FileNotFoundError``, subclasses of those that are ``OptionError`` too.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from torchair.errors import OptionError


class TreeOptionError(OptionError):
    """A bad value for an option of TorchAir's tree: an ``OptionError`` whose text is TorchAir's
    message alone (``print(e)`` and a traceback's last line read as they do under TorchAir)."""

    def __str__(self) -> str:
        return str(self.args[2]) if len(self.args) == 3 else super().__str__()


class OptionTypeError(TreeOptionError, TypeError):
    """A value of the wrong type for a TorchAir option (TorchAir raises ``TypeError``)."""


class OptionPathError(TreeOptionError, FileNotFoundError):
    """A path option naming no existing file or directory (TorchAir: ``FileNotFoundError``)."""


def _error(cls: type[TreeOptionError], msg: str) -> TreeOptionError:
    return cls(1, "invalid argument", msg)


class OptionValue:
    """A leaf with a default and, optionally, the list of values it may take. Membership is
    tested with ``==`` as TorchAir does, so ``1`` passes for ``True``. ``value`` is the
    string form TorchAir hands on ("1"/"0" for booleans), ``raw`` the value as set."""

    def __init__(self, default: Any, optional: Sequence[Any] | None = None) -> None:
        self._optional = list(optional) if optional is not None else None
        self._value = default
        self._default = default

    def check(self, v: Any) -> None:
        if self._optional is not None and v not in self._optional:
            first = type(self._optional[0]) if self._optional else None
            raise _error(
                TreeOptionError,
                f"Value {v!r} (type: {type(v)}) not in optional list {self._optional!r} (type: {first}).",
            )

    @property
    def value(self) -> Any:
        v = self._value
        if v is None:
            return None
        if v is True:
            return "1"
        if v is False:
            return "0"
        return str(v)

    @value.setter
    def value(self, v: Any) -> None:
        self.check(v)
        self._value = v

    @property
    def raw(self) -> Any:
        return self._value

    @property
    def default(self) -> Any:
        return self._default

    @property
    def optional(self) -> list[Any] | None:
        return self._optional

    def is_default(self) -> bool:
        return self._value == self._default and type(self._value) is type(self._default)

    def __bool__(self) -> bool:
        return bool(self._value)

    def __repr__(self) -> str:
        return repr(self._value)


class IntRangeValue(OptionValue):
    def __init__(self, default: int | None, value_min: int, value_max: int) -> None:
        super().__init__(default)
        self._min, self._max = value_min, value_max

    def check(self, v: Any) -> None:
        if not isinstance(v, int):
            raise _error(TreeOptionError, f"Please set integer type, but got {type(v)}")
        if not self._min <= v <= self._max:
            raise _error(TreeOptionError, f"Please set value in [{self._min}, {self._max}], {v} is out of range.")


class IntListValue(OptionValue):
    def __init__(self, default: list[int] | None = None) -> None:
        super().__init__([] if default is None else list(default))

    def check(self, v: Any) -> None:
        if v is not None and not isinstance(v, (list, tuple)):
            raise _error(OptionTypeError, f"the set value must be None or list, got {type(v)}")
        if v is not None and not all(isinstance(x, int) for x in v):
            raise _error(OptionTypeError, f"the set value must be int list, got list type: {list(v)}")

    @property
    def value(self) -> Any:
        return self._value

    @value.setter
    def value(self, v: Any) -> None:
        self.check(v)
        self._value = [] if v is None else list(v)


class StrOptionValue(OptionValue):
    def __init__(self, default: str | None = None) -> None:
        super().__init__(default)

    def check(self, v: Any) -> None:
        if v is not None and not isinstance(v, str):
            raise _error(OptionTypeError, f"value must be str or None, got {type(v)}")


class FileValue(OptionValue):
    def check(self, v: Any) -> None:
        if v is not None and not (isinstance(v, str) and os.path.isfile(v)):
            raise _error(OptionPathError, f"Please set legal file path, {v} is not found or is not a file!")


class MustExistedPathValue(OptionValue):
    def check(self, v: Any) -> None:
        if v is None or not (isinstance(v, str) and os.path.isdir(v)):
            raise _error(
                OptionPathError, f"Please set legal dir path, {v} is not found or is not a file directory!"
            )


class MustExistedFileAddr(OptionValue):
    def check(self, v: Any) -> None:
        if v == "":
            raise _error(TreeOptionError, "File path cannot be empty!")
        if not (isinstance(v, str) and v.endswith(".json") and os.path.isfile(v)):
            raise _error(OptionPathError, f"Please set legal file path, {v} is not found or is not '.json' file!")


class RegexValue(OptionValue):
    def __init__(self, default: str, regex: str, example: str) -> None:
        super().__init__(default)
        self._regex, self._example = regex, example

    def check(self, v: Any) -> None:
        if not isinstance(v, str) or re.match(self._regex, v) is None:
            raise _error(
                TreeOptionError,
                f"Please set legal regex value format match {self._regex}, {v} is Illegal format, "
                f"correct example:{self._example}.",
            )


class CallableValue(OptionValue):
    def __init__(self, default: Callable[..., Any] | None = None) -> None:
        super().__init__(default)

    def check(self, v: Any) -> None:
        if v is not None and not callable(v):
            raise _error(OptionTypeError, f"value must be Callable or None, got {type(v)}")

    @property  # type: ignore[override]
    def value(self) -> Any:
        return self._value

    @value.setter
    def value(self, v: Any) -> None:
        self.check(v)
        self._value = v


class NpuBaseConfig:
    """A group of options. Its ``__init__`` ends by recording its option names; from then on
    an assignment to a leaf validates the value, and a name the group does not have is an
    error naming it and listing the group's options (TorchAir's message)."""

    def __init__(self) -> None:
        fixed = [k for k, v in vars(self).items() if isinstance(v, (OptionValue, NpuBaseConfig))]
        object.__setattr__(self, "_fixed_attrs", fixed)

    def __setattr__(self, key: str, value: Any) -> None:
        fixed = self.__dict__.get("_fixed_attrs")
        if fixed is None or key.startswith("_") and key not in fixed:
            object.__setattr__(self, key, value)
            return
        if key not in fixed:
            raise _error(TreeOptionError, f"{type(self).__name__} has no option {key}, all options {fixed}")
        current = self.__dict__.get(key)
        if isinstance(current, OptionValue):
            current.value = value
        elif isinstance(current, NpuBaseConfig) and not isinstance(value, type(current)):
            raise _error(
                OptionTypeError, f"{type(self).__name__}.{key} must be a {type(current).__name__}, got {type(value)}"
            )
        else:
            object.__setattr__(self, key, value)

    def leaves(self, prefix: str) -> Iterator[tuple[str, OptionValue]]:
        """Every leaf of the group, depth first: (dotted path, value object)."""
        for key in self._fixed_attrs:
            item = self.__dict__.get(key)
            if isinstance(item, NpuBaseConfig):
                yield from item.leaves(f"{prefix}.{key}")
            elif isinstance(item, OptionValue):
                yield f"{prefix}.{key}", item

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        mine = [(k, v.raw) for k, v in self.leaves("")]
        theirs = [(k, v.raw) for k, v in other.leaves("")]  # type: ignore[attr-defined]
        return mine == theirs

    __hash__ = None  # type: ignore[assignment]

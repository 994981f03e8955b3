"""torchair's log levels: ``TORCHAIR_LOG=error|warning|info|debug`` (default warning, so a
normal compile prints nothing) sets the level of Python's ``logging.getLogger("torchair")``
and of libair's own messages, which arrive through the C library's one callback
(``air_set_log_callback``) on the child logger ``torchair.c``.

The child loggers: ``torchair.compile`` (what each compile did), ``torchair.debug`` (the
debug options' files), ``torchair.trace`` and ``torchair.c`` (libair: passes and kernel
choices at debug, a compile's summary at info). ``logging.getLogger("torchair").setLevel``
works as usual; libair is asked for its messages at the level the ``torchair.c`` logger
enables when each graph is compiled (``sync_c_level``), so messages nobody wants are not
even formatted in C.
"""

from __future__ import annotations

import logging
import os
import sys

LEVELS: dict[str, int] = {
    "error": logging.ERROR,
    "warning": logging.WARNING,
    "info": logging.INFO,
    "debug": logging.DEBUG,
}

# libair's levels (air.h: AIR_LOG_ERROR .. AIR_LOG_DEBUG) as Python's
_C_TO_PY = (logging.ERROR, logging.WARNING, logging.INFO, logging.DEBUG)

ROOT = "torchair"
_installed = False


def get_logger(name: str = "") -> logging.Logger:
    """``torchair`` or its child ``torchair.<name>``."""
    return logging.getLogger(f"{ROOT}.{name}" if name else ROOT)


def parse_level(text: str | None) -> int | None:
    """The logging level a ``TORCHAIR_LOG`` value names, or None (unset or unknown: an
    unknown one is a warning naming the valid levels)."""
    if text is None or not text.strip():
        return None
    level = LEVELS.get(text.strip().lower())
    if level is None:
        get_logger().warning(
            "TORCHAIR_LOG=%r is not a level; the levels are %s (default warning)", text, "|".join(LEVELS)
        )
    return level


def set_level(level: int | str) -> None:
    """Sets torchair's level (a logging level or a ``TORCHAIR_LOG`` name) in Python and in
    libair."""
    if isinstance(level, str):
        parsed = parse_level(level)
        if parsed is None:
            return
        level = parsed
    get_logger().setLevel(level)
    sync_c_level()


def _c_message(level: int, message: str) -> None:
    get_logger("c").log(_C_TO_PY[max(0, min(level, 3))], "%s", message)


def sync_c_level() -> None:
    """Asks libair for exactly the messages the ``torchair.c`` logger would show."""
    from torchair import _C

    c = get_logger("c")
    for air_level in (3, 2, 1, 0):
        if c.isEnabledFor(_C_TO_PY[air_level]):
            _C.set_log_level(air_level)
            return
    _C.set_log_level(0)


def install() -> None:
    """Once, at import: routes libair's messages to ``torchair.c`` and applies
    ``TORCHAIR_LOG``. With TORCHAIR_LOG set, torchair's messages at that level go to stderr
    (a handler of its own, as TORCH_LOGS does); without it, logging's configuration decides."""
    global _installed
    if _installed:
        return
    _installed = True
    from torchair import _C

    _C.set_log_handler(_c_message)
    level = parse_level(os.environ.get("TORCHAIR_LOG"))
    root = get_logger()
    if level is not None:
        root.setLevel(level)
        if not any(getattr(h, "_torchair", False) for h in root.handlers):
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(logging.Formatter("[%(name)s %(levelname)s] %(message)s"))
            handler._torchair = True  # type: ignore[attr-defined]
            root.addHandler(handler)
            root.propagate = False
    sync_c_level()

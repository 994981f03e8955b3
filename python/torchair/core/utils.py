"""``torchair.core.utils.logger``: the ``"torchair"`` logger under TorchAir's module path, with
its ``EVENT`` level (35) and ``warning_once``. Its level comes from ``TNG_LOG_LEVEL`` (TorchAir's
variable: 0 DEBUG, 1 INFO, 2 WARNING, 3 ERROR, 4 EVENT) when set, else WARNING; set at import,
as TorchAir does."""

from __future__ import annotations

import functools
import logging
import os

__all__ = ["logger", "EVENT_LEVEL"]

EVENT_LEVEL = 35
logging.addLevelName(EVENT_LEVEL, "EVENT")

_TNG_LEVELS = {"0": logging.DEBUG, "1": logging.INFO, "2": logging.WARNING, "3": logging.ERROR, "4": EVENT_LEVEL}


class _TorchairLogger(logging.Logger):
    def event(self, msg: str, *args: object) -> None:
        if self.isEnabledFor(EVENT_LEVEL):
            self._log(EVENT_LEVEL, msg, args)

    @functools.lru_cache(maxsize=None)  # noqa: B019  (one message, once per process)
    def warning_once(self, msg: str) -> None:
        self.warning(msg)


def _make_logger() -> _TorchairLogger:
    existing = logging.Logger.manager.loggerDict.get("torchair")
    if isinstance(existing, _TorchairLogger):
        return existing
    previous = logging.getLoggerClass()
    logging.setLoggerClass(_TorchairLogger)
    try:
        if isinstance(existing, logging.Logger):  # created earlier as a plain logger: replace it
            del logging.Logger.manager.loggerDict["torchair"]
        made = logging.getLogger("torchair")
    finally:
        logging.setLoggerClass(previous)
    assert isinstance(made, _TorchairLogger)
    level = os.environ.get("TNG_LOG_LEVEL")
    if level is not None:
        if level.strip() in _TNG_LEVELS:
            made.setLevel(_TNG_LEVELS[level.strip()])
        else:
            made.warning("TNG_LOG_LEVEL=%r is not a level; the levels are 0 (debug) to 4 (event)", level)
    return made


logger = _make_logger()

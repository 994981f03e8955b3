"""Where the compile cache keeps its entries, and the rules for touching them:
the folder (``TORCHAIR_CACHE_DIR``, default ``~/.cache/torchair``; off with
``TORCHAIR_CACHE=0``), one file per key (``graphs-v1/<key[:2]>/<key>.air``),
written to a temporary file in the same folder and renamed into place (a
reader never sees half an entry; two processes writing one key leave one of
the two whole), and warnings, not errors, for a folder that cannot be written
or an entry that cannot be read (each said once per folder or entry)."""

from __future__ import annotations

import os
import tempfile
import warnings
from collections.abc import Callable

SUBDIR = "graphs-v1"

_warned: set[str] = set()


class CacheWarning(UserWarning):
    """The compile cache skipped a folder or an entry (the compile goes on without it)."""


def warn_once(tag: str, msg: str) -> None:
    if tag in _warned:
        return
    _warned.add(tag)
    warnings.warn(f"torchair compile cache: {msg}", CacheWarning, stacklevel=3)


def enabled() -> bool:
    return os.environ.get("TORCHAIR_CACHE", "1") != "0"


def root() -> str:
    return os.environ.get("TORCHAIR_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "torchair")


def entry_path(key: str) -> str:
    return os.path.join(root(), SUBDIR, key[:2], key + ".air")


def write_atomically(path: str, write: Callable[[str], None]) -> bool:
    """write(tmp) fills a temporary file beside path, which is then renamed to path.
    False (and a warning) if the folder cannot be made or written."""
    folder = os.path.dirname(path)
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".air", dir=folder)
        os.close(fd)
    except OSError as e:
        warn_once("dir:" + folder, f"cannot write to {folder!r} ({e.strerror or e}); compiled graphs are not cached")
        return False
    try:
        write(tmp)
        os.replace(tmp, path)
        return True
    except OSError as e:
        warn_once("dir:" + folder, f"cannot write an entry in {folder!r} ({e}); compiled graphs are not cached")
        return False
    except Exception as e:  # noqa: BLE001  (a graph the format cannot hold: not cached, the compile goes on)
        warn_once(f"save:{type(e).__name__}:{e}", f"a compiled graph could not be saved ({e}); it is not cached")
        return False
    finally:
        if os.path.exists(tmp):
            try:
                os.unlink(tmp)
            except OSError:
                pass


def discard(path: str) -> None:
    """Removes a bad entry (it is rewritten by the compile that follows)."""
    try:
        os.unlink(path)
    except OSError:
        pass

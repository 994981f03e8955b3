"""Which threads run torchair's parallel loops.

``"torch"`` (the default where torch runs on GNU OpenMP, as the pip wheels
do): torch's own OpenMP team. After an eager op that team keeps spinning for a
while; a loop on a second pool would share the cores with it (on 2 cores a
1024^3 GEMM right after an eager op took 9.2 ms instead of 6.2), while on the
same team the spinning threads are the ones that take the loop. Inductor's
kernels use that team too.

``"own"``: libair's own pthread pool (what the C library uses on its own).

The environment variable ``TORCHAIR_THREADS=own`` chooses the pool at import.
The number of threads is torchair's either way (``torchair.set_num_threads``).
"""

from __future__ import annotations

import os

import torch  # noqa: F401  (loads torch's OpenMP runtime into the process)

from torchair import _C
from torchair.errors import OptionError

BACKENDS = ("torch", "own")
_current = "own"


def _torch_openmp_path() -> str | None:
    """The GNU OpenMP runtime mapped into this process (torch's), if any."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                fields = line.split()
                if len(fields) >= 6 and os.path.basename(fields[5]).startswith("libgomp"):
                    return fields[5]
    except OSError:
        pass
    return None


def set_thread_backend(name: str) -> None:
    """Run parallel loops on ``"torch"``'s OpenMP team or on torchair's ``"own"`` pool.
    Not while a compiled model runs in another thread."""
    global _current
    if name not in BACKENDS:
        raise OptionError(1, "invalid argument", f"thread backend must be one of {BACKENDS}, got {name!r}")
    if name == "torch":
        path = _torch_openmp_path()
        if path is None or not _C.use_openmp(path):
            raise OptionError(
                2, "unsupported", "torch's GNU OpenMP runtime (libgomp) is not loaded in this process; use 'own'"
            )
    else:
        _C.use_openmp(None)
    _current = name


def get_thread_backend() -> str:
    return _current


def _init_from_env() -> None:
    want = os.environ.get("TORCHAIR_THREADS", "torch")
    if want == "own":
        return
    try:
        set_thread_backend("torch")
    except OptionError:
        pass  # torch built with another OpenMP (or none): the own pool it is


_init_from_env()

"""torchair: a graph compiler and C runtime for torch.compile.

    compiled = torch.compile(model, backend="torchair")

See README.md and docs/ for the options, the compile report and the design.
"""

from __future__ import annotations

from torchair import _C
from torchair.backend import get_backend, get_npu_backend, torchair_backend
from torchair.config import CompilerConfig, get_npu_backend_config, valid_options
from torchair.errors import NotBuiltError, OptionError, TorchairError
from torchair.report import explain
from torchair.threads import get_thread_backend, set_thread_backend

__version__ = "0.1.0"

# The graph passes in the order they run; any of them can be skipped with
# options={"disabled_passes": [...]}.
PASS_NAMES: tuple[str, ...] = tuple(_C.PASSES)

__all__ = [
    "CompilerConfig",
    "PASS_NAMES",
    "NotBuiltError",
    "OptionError",
    "TorchairError",
    "explain",
    "get_backend",
    "get_npu_backend",
    "get_npu_backend_config",
    "torchair_backend",
    "valid_options",
    "set_num_threads",
    "get_num_threads",
    "set_thread_backend",
    "get_thread_backend",
]


def set_num_threads(n: int) -> None:
    """Threads of torchair's own pool (default: AIR_NUM_THREADS or the CPU count)."""
    _C.set_num_threads(n)


def get_num_threads() -> int:
    return _C.get_num_threads()

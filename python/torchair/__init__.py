"""torchair: a graph compiler and C runtime for torch.compile.

    compiled = torch.compile(model, backend="torchair")

See README.md and docs/ for the options, the compile report and the design.
"""

from __future__ import annotations

from torchair import _C
from torchair import configs, ge, inference, ops, scope  # noqa: F401  (TorchAir's submodules)
from torchair.backend import get_backend, get_npu_backend, torchair_backend
from torchair.config import CompilerConfig, get_npu_backend_config, valid_options
from torchair.core.utils import logger
from torchair import log as _log
from torchair.errors import NotBuiltError, OptionError, TorchairError
from torchair.export import export, load
from torchair.facade import (
    dynamo_export,
    get_compiler,
    npu_format_cast_via_cpu,
    patch_for_hcom,
    register_fx_node_ge_converter,
    use_internal_format_weight,
)
from torchair.lowering.user import register_lowering
from torchair.patterns import register_replacement
from torchair.report import explain
from torchair.threads import get_thread_backend, set_thread_backend

_log.install()  # TORCHAIR_LOG, and libair's messages on the torchair.c logger

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
    "get_compiler",
    "dynamo_export",
    "export",
    "load",
    "use_internal_format_weight",
    "npu_format_cast_via_cpu",
    "register_fx_node_ge_converter",
    "patch_for_hcom",
    "register_replacement",
    "register_lowering",
    "logger",
    "configs",
    "inference",
    "ops",
    "scope",
    "ge",
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


# the compile cache serves only graphs lowered by this lowering table (torchair.cache.entry)
from torchair.cache.entry import snapshot_lowerings as _snapshot_lowerings  # noqa: E402

_snapshot_lowerings()

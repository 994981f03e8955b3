"""What TorchAir's debug options ask of a compile, gathered from the config tree by
``torchair.configs.outcomes`` into ``Extras.debug`` (one ``DebugOptions``), and the applies
that fill it. No torch import here: the config tree loads this module."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from torchair.errors import NotBuiltError, OptionError


@dataclass
class DataDumpOptions:
    """Inputs and outputs of compiled subgraphs as .npy (``debug.data_dump`` or
    ``dump_config``)."""

    enabled: bool = False
    path: str = "./"
    mode: str = "all"  # "input", "output" or "all"
    steps: str = ""  # "0|2-5": the calls (from 0) to dump; "": every call
    layers: str = ""  # space-separated op or node names; "": every subgraph
    stats: bool = False  # dump_data="stats": a CSV of statistics instead of tensors
    filter: Callable[[Any], Any] | None = None  # debug.data_dump.filter: fx node -> node or None

    def step_set(self) -> Callable[[int], bool]:
        """Is call k (from 0) chosen by ``steps``?"""
        ranges = []
        for part in self.steps.split("|"):
            part = part.strip()
            if not part:
                continue
            lo, _, hi = part.partition("-")
            ranges.append((int(lo), int(hi) if hi else int(lo)))
        if not ranges:
            return lambda k: True
        return lambda k: any(lo <= k <= hi for lo, hi in ranges)


@dataclass
class DebugOptions:
    graph_dump: str | None = None  # "txt", "py", "dot" or "svg"
    graph_dump_path: str = "./"
    fx_summary: bool = False
    fx_summary_path: str = "./"
    skip_compile: bool = True  # fx_summary: run the graph in eager after writing the CSV
    data_dump: DataDumpOptions = field(default_factory=DataDumpOptions)
    # set per graph while it compiles (torchair.debug.dumps.GraphDump)
    current: Any = None
    # each AirSubgraph keeps its FX submodule as .source (torchair.debug.accuracy)
    keep_sources: bool = False

    @property
    def active(self) -> bool:
        return self.graph_dump is not None or self.fx_summary or self.data_dump.enabled


def _graph_dump_type(value: Any, flat: Any, extras: Any) -> None:
    if value == "pbtxt":
        raise NotBuiltError(
            2,
            "unsupported",
            "config.debug.graph_dump.type='pbtxt' is not built in this torchair: pbtxt is Ascend GE's graph; "
            "torchair dumps its ATen graphs as 'txt', 'py' (a runnable FX file), 'dot' or 'svg'",
        )
    if value == "svg" and shutil.which("dot") is None:
        raise OptionError(
            1,
            "invalid argument",
            "config.debug.graph_dump.type='svg' needs Graphviz's dot on PATH (apt-get install graphviz); "
            "'dot' writes the same graph as DOT text",
        )
    extras.debug.graph_dump = value


def _set(attr: str, sub: str | None = None, convert: Callable[[Any], Any] = lambda v: v) -> Callable[[Any, Any, Any], None]:
    def apply(value: Any, flat: Any, extras: Any) -> None:
        target = extras.debug if sub is None else getattr(extras.debug, sub)
        setattr(target, attr, convert(value))

    return apply


def _fx_summary_type(value: Any, flat: Any, extras: Any) -> None:
    extras.debug.fx_summary = value == "csv"


def _data_dump_type(value: Any, flat: Any, extras: Any) -> None:
    extras.debug.data_dump.enabled = value == "npy"


def _dump_data(value: Any, flat: Any, extras: Any) -> None:
    extras.debug.data_dump.stats = value == "stats"


APPLY: dict[str, Callable[[Any, Any, Any], None]] = {
    "debug.graph_dump.type": _graph_dump_type,
    "debug.graph_dump._path": _set("graph_dump_path"),
    "debug.fx_summary.type": _fx_summary_type,
    "debug.fx_summary._path": _set("fx_summary_path"),
    "debug.fx_summary.skip_compile": _set("skip_compile", convert=bool),
    "debug.data_dump.type": _data_dump_type,
    "debug.data_dump._path": _set("path", "data_dump"),
    "dump_config.enable_dump": _set("enabled", "data_dump", bool),
    "dump_config.dump_path": _set("path", "data_dump"),
    "dump_config.dump_mode": _set("mode", "data_dump"),
    "dump_config.dump_step": _set("steps", "data_dump"),
    "dump_config.dump_layer": _set("layers", "data_dump"),
    "dump_config.dump_data": _dump_data,
}

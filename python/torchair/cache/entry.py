"""One compiled subgraph in the compile cache. A miss lowers and compiles as
usual, then saves the libair graph as a .air file whose frozen parameters are
EXTERNAL constants (dtype and shape only: the cache holds no weights) with
what compiler.lower_subgraph needs to rebuild its AirSubgraph (which
arguments are tensors or sizes, one output or several, a seed, the dtypes).
A hit loads that file (the format checks its checksums), binds the externals
to the live module's tensors, and compiles it: the Python lowering is
skipped, libair's compile (passes, kernel choice, weight packing) is not.

Not cached: training graphs (only inference graphs reach here), graphs whose
lowering made 16-bit copies of weights (mixed_precision, autocast: those
copies would be weights in the cache). An entry that does not load (damaged,
written by another build, a different key inside) is ignored with a warning,
removed, and written again after the compile.

torchair.precompile carries entries inside a saved compiled function: while
``embedded(collect=...)`` is active, every entry a compile saves or hits is
also put in ``collect`` ({key: bytes}); while ``embedded(provide=...)`` is
active, a key found there is loaded from those bytes before the folder is
looked at (an entry that does not load is ignored with a warning, as one on
disk is). Either works with TORCHAIR_CACHE=0 (then the folder is not used)."""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from torch.fx import GraphModule, Node

import torchair.cache.key as key_mod
import torchair.cache.store as store

META_KEY = "torchair.cache"

# torchair.precompile's entries (see embedded()), per thread and context: written to / read
# from besides the folder
_embedded: contextvars.ContextVar[tuple[dict[str, bytes] | None, dict[str, bytes] | None]] = contextvars.ContextVar(
    "torchair_cache_embedded", default=(None, None))


@contextlib.contextmanager
def embedded(collect: dict[str, bytes] | None = None, provide: dict[str, bytes] | None = None) -> Iterator[None]:
    token = _embedded.set((collect, provide))
    try:
        yield
    finally:
        _embedded.reset(token)


class Lookup:
    """The cache's answer for one subgraph: ``hit`` (an AirSubgraph) or None; after a
    miss, ``serialize(built)`` before the compile (libair's compile may retire values
    of the graph it compiles, which the writer then refuses) and ``write()`` after it."""

    def __init__(self, key: str, path: str | None) -> None:
        self.key = key
        self.path = path
        self.hit: Any = None
        self._data: bytes | None = None

    def serialize(self, built: Any) -> None:
        if built.lowerer.converted or getattr(built.lowerer, "quantized", None):
            return  # 16-bit or quantized copies of weights would be stored in the entry
        info = {
            "key": self.key,
            "tensor_args": built.tensor_args,
            "size_args": built.size_args,
            "single": built.single,
            "seeded": built.seeded,
            "n_placeholders": built.n_placeholders,
            "in_dtypes": [str(d) for d in built.in_dtypes],
            "out_dtypes": [str(d) for d in built.out_dtypes],
            "externals": len(built.frozen_values),
        }
        externals = {f"frozen{i}": v for i, v in enumerate(built.frozen_values)}
        try:
            self._data = built.graph.save(meta={META_KEY: json.dumps(info)}, externals=externals)
            collect = _embedded.get()[0]
            if collect is not None:
                collect[self.key] = self._data
        except Exception as e:  # noqa: BLE001  (a graph the format cannot hold: not cached)
            store.warn_once(f"save:{type(e).__name__}:{e}", f"a compiled graph could not be saved ({e}); it is not cached")

    def write(self) -> None:
        data = self._data
        if data is None or self.path is None:
            return

        def fill(tmp: str) -> None:
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())

        store.write_atomically(self.path, fill)
        self._data = None


def _dtype(name: str) -> torch.dtype:
    dt = getattr(torch, name.removeprefix("torch."), None)
    if not isinstance(dt, torch.dtype):
        raise ValueError(f"unknown dtype {name!r}")
    return dt


def lookup(
    sub: GraphModule, arg_nodes: Sequence[Any], config: Any, frozen: dict[Node, torch.Tensor] | None,
    compile_fn: Callable[[Any, Any], Any],
) -> Lookup | None:
    """None when the cache is off (TORCHAIR_CACHE=0) and no precompile collects or provides
    entries (embedded()), this libair cannot save graphs, or
    the lowerings are not the ones torchair ships (a user's register_lowering or
    register_replacement, a test's patch: the key cannot see what they do). compile_fn
    (compiler.compile_built) compiles a hit's graph with the options' flags."""
    from torchair import _C

    collect, provide = _embedded.get()
    use_folder = store.enabled()
    if not (use_folder or collect is not None or provide is not None):
        return None
    if not hasattr(_C.Graph, "save") or not hasattr(_C, "load_graph"):
        return None
    if not _lowerings_as_shipped():
        return None
    k = key_mod.key(sub, arg_nodes, config, frozen)
    found = Lookup(k, store.entry_path(k) if use_folder else None)
    given = provide.get(k) if provide is not None else None
    if given is not None:
        try:
            found.hit = _load(found, given, sub, arg_nodes, config, frozen, compile_fn)
        except Exception as e:  # noqa: BLE001  (a bad embedded entry: look further, then compile)
            store.warn_once("embedded:" + k, f"ignoring an embedded entry ({e}); compiling again")
            given = None
    if found.hit is None and found.path is not None and os.path.exists(found.path):
        try:
            found.hit = _load(found, found.path, sub, arg_nodes, config, frozen, compile_fn)
        except Exception as e:  # noqa: BLE001  (any bad entry: recompile)
            store.warn_once("entry:" + found.path, f"ignoring entry {found.path!r} ({e}); compiling again")
            store.discard(found.path)
            found.hit = None
    if found.hit is not None and collect is not None:
        if given is None:
            try:
                with open(found.path, "rb") as f:  # type: ignore[arg-type]
                    given = f.read()
            except OSError:
                given = None
        if given is not None:
            collect[k] = given
    return found


# torchair's lowering table as its import left it (snapshot_lowerings, called at the end of
# torchair/__init__.py)
_SHIPPED: dict[Any, Any] | None = None


def snapshot_lowerings() -> None:
    global _SHIPPED
    from torchair.lowering.core import LOWERINGS

    _SHIPPED = dict(LOWERINGS)


def _lowerings_as_shipped() -> bool:
    from torchair.lowering.core import LOWERINGS
    from torchair.patterns import registered_count

    if _SHIPPED is None or registered_count():
        return False
    return LOWERINGS.keys() == _SHIPPED.keys() and all(LOWERINGS[k] is fn for k, fn in _SHIPPED.items())


def _load(found: Lookup, source: str | bytes, sub: GraphModule, arg_nodes: Sequence[Any], config: Any,
          frozen: dict[Node, torch.Tensor] | None, compile_fn: Callable[[Any, Any], Any]) -> Any:
    from types import SimpleNamespace

    from torchair import _C
    from torchair.subgraph import AirSubgraph

    placeholders = [n for n in sub.graph.nodes if n.op == "placeholder"]
    frozen_used = [outer for outer in arg_nodes if frozen and outer in frozen]
    tensors = [frozen[o].detach().contiguous() for o in frozen_used] if frozen else []
    graph, meta = _C.load_graph(
        source, externals={f"frozen{i}": (t.data_ptr(), t.nbytes, t) for i, t in enumerate(tensors)}
    )
    info = json.loads(meta[META_KEY])
    if info.get("key") != found.key:
        raise ValueError("the entry holds another key")
    if info["externals"] != len(tensors) or info["n_placeholders"] != len(placeholders):
        raise ValueError("the entry does not match the graph's arguments")
    shim = SimpleNamespace(graph=graph, in_dtypes=[_dtype(d) for d in info["in_dtypes"]],
                           out_dtypes=[_dtype(d) for d in info["out_dtypes"]])
    model = compile_fn(shim, config)
    all_tensors = len(info["tensor_args"]) == info["n_placeholders"]
    air = AirSubgraph(model, None if all_tensors else info["tensor_args"], info["single"], model.report(),
                      frozen_used, info["size_args"], info["seeded"])
    air.cached = True
    air.keep = tensors  # the externals' memory, used in place by the model
    return air

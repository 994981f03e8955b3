"""PrecompiledGraph: what torchair's backend returns to torch's aot_compile, a
SerializableCallable. In the process that compiled it, it runs the compiled graph;
serialized, it is a checksummed pickle of the ATen inference graph, the options,
the fp32 precision knobs it was compiled under, the frozen argument positions and
the compile cache's entries of its subgraphs; deserialized, its first call binds
the parameters passed to it (the frozen positions) and compiles the graph:
dynamo and aot_autograd do not run again, and a subgraph whose entry's key still
matches (the same torchair, libair build, CPU and options) is loaded instead of
lowered. The weights are never in the file: they come from the live module.

A damaged file, or one from another torch (its pickled ATen graph may not load),
is an error: there is no model to trace again. One from another torchair or
libair build is loaded with a warning and its entries are dropped (the keys would
miss anyway): the graph is lowered again."""

from __future__ import annotations

import hashlib
import pickle
import threading
import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch._dynamo.aot_compile_types import SerializableCallable

from torchair.precompile.capture import Capture, PrecompileError, PrecompileWarning, load_graph

MAGIC = b"torchair-precompile\0"
FORMAT_VERSION = 1
_DIGEST = 32  # sha256 of the body, after the magic


def _environment() -> dict[str, Any]:
    from torchair.cache.key import environment

    return dict(environment())


class PrecompiledGraph(SerializableCallable):
    def __init__(self, state: dict[str, Any], live: Callable[..., Any] | None = None) -> None:
        self.state = state
        self.report: Any = None  # the CompileReport of the graph's compile in this process
        self.entries_used = 0  # of the saved entries, how many that compile looked up and found
        self._fn: Callable[..., Any] | None = None
        self._lock = threading.Lock()
        if live is not None:
            self._fn = self._guarded(live, tuple(state["setting"]))

    @classmethod
    def from_capture(cls, capture: Capture, config: Any, setting: tuple[str, str], live: Callable[..., Any]) -> "PrecompiledGraph":
        try:
            config_bytes = pickle.dumps(config)
        except Exception as e:  # noqa: BLE001  (a pre/post pass function, a lambda)
            raise PrecompileError(f"the options cannot be saved ({type(e).__name__}: {e})") from e
        state = {
            "format": FORMAT_VERSION,
            "environment": _environment(),
            "graph": capture.graph,
            "config": config_bytes,
            "setting": list(setting),
            "frozen": capture.frozen,
            "by_content": capture.by_content,
            "freezing": capture.freezing,
            "entries": dict(capture.entries),
        }
        return cls(state, live)

    # ---- SerializableCallable ----------------------------------------------------------------

    @classmethod
    def serialize_compile_artifacts(cls, fn: "PrecompiledGraph") -> bytes:
        body = pickle.dumps(fn.state, protocol=pickle.HIGHEST_PROTOCOL)
        return MAGIC + hashlib.sha256(body).digest() + body

    @classmethod
    def deserialize_compile_artifacts(cls, data: bytes) -> "PrecompiledGraph":
        data = bytes(data)
        if not data.startswith(MAGIC) or len(data) < len(MAGIC) + _DIGEST:
            raise PrecompileError("not a torchair precompiled graph (bad magic)")
        digest, body = data[len(MAGIC):len(MAGIC) + _DIGEST], data[len(MAGIC) + _DIGEST:]
        if hashlib.sha256(body).digest() != digest:
            raise PrecompileError("the torchair precompiled graph is damaged (checksum mismatch)")
        try:
            state = pickle.loads(body)
        except Exception as e:  # noqa: BLE001
            raise PrecompileError(f"the torchair precompiled graph does not unpickle ({e})") from e
        if not isinstance(state, dict) or state.get("format") != FORMAT_VERSION:
            raise PrecompileError(f"unsupported torchair precompile format {state.get('format') if isinstance(state, dict) else '?'}")
        saved, now = state["environment"], _environment()
        if saved.get("torch") != now["torch"]:
            raise PrecompileError(f"saved with torch {saved.get('torch')}, this is torch {now['torch']}: compile again")
        differ = sorted(k for k in now if saved.get(k) != now[k])
        if differ:
            warnings.warn(f"torchair precompiled graph: saved by another build or machine ({', '.join(differ)} differ); "
                          "its subgraphs are lowered again", PrecompileWarning, stacklevel=2)
            state["entries"] = {}
        return cls(state)

    def __call__(self, *args: Any) -> Any:
        fn = self._fn
        if fn is None:
            with self._lock:
                if self._fn is None:
                    from torchair import precision

                    setting = precision.current()
                    self._fn = self._guarded(self._compile_for(setting, list(args)), setting)
                fn = self._fn
        return fn(*args)

    # ---- compiling from the saved graph ------------------------------------------------------

    def _guarded(self, compiled: Callable[..., Any], setting: tuple[str, str]) -> Callable[..., Any]:
        """compiled, compiled again from the saved graph for other fp32 precision knobs."""
        from torchair import precision

        return precision.guard_precision(compiled, setting, False,
                                         lambda args: self._compile_for(precision.current(), args))

    def _compile_for(self, setting: tuple[str, str], args: list[Any]) -> Callable[..., Any]:
        from torchair.cache.entry import embedded
        from torchair.compiler import compile_graph

        state = self.state
        gm = load_graph(state["graph"])  # a fresh copy: the compile rewrites it
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        if len(args) != len(placeholders):
            raise PrecompileError(f"the precompiled graph takes {len(placeholders)} arguments, got {len(args)}")
        frozen = {}
        for i in state["frozen"]:
            t, val = args[i], placeholders[i].meta.get("val")
            if type(t) not in (torch.Tensor, torch.nn.Parameter) or not isinstance(val, torch.Tensor) or (
                (tuple(t.shape), tuple(t.stride()), t.dtype) != (tuple(val.shape), tuple(val.stride()), val.dtype)
            ):
                raise PrecompileError(f"argument {i} is not the parameter the graph was compiled for")
            frozen[i] = t
        config = pickle.loads(state["config"])
        flat, _ = config.effective()
        object.__setattr__(flat, "fp32_precision", setting)
        gm.meta["torchair_freeze"] = (frozen, state["freezing"], set(state["by_content"]))
        provided = _Provided(state["entries"])
        with embedded(provide=provided):
            compiled, report = compile_graph(gm, flat, "inference")
        self.report, self.entries_used = report, len(provided.used)
        forward = compiled.forward

        def call(*a: Any) -> Any:
            # aot_autograd's wrapper, which this replaces, runs an inference graph with grad off
            if torch.is_grad_enabled():
                with torch.no_grad():
                    return forward(*a)
            return forward(*a)

        return call



class _Provided(dict):  # type: ignore[type-arg]
    """The saved entries, noting which keys the compile found among them."""

    def __init__(self, entries: dict[str, bytes]) -> None:
        super().__init__(entries)
        self.used: set[str] = set()

    def get(self, key: Any, default: Any = None) -> Any:
        if key in self:
            self.used.add(key)
        return super().get(key, default)

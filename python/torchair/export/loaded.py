"""``torchair.load(path, *, num_threads=None)``: an exported .air file as a
callable. It checks each call's inputs against the file's metadata (count,
dtype, rank, fixed sizes, named dims: equal where a name repeats, inside their
range) with errors naming the input, then runs the graph in libair, the same
C code the ``air`` CLI runs, so results are the CLI's bit for bit."""

from __future__ import annotations

import os
from typing import Any

import torch

from torchair.export.meta import parse as parse_meta
from torchair.export.trace import ExportError


def _bad(msg: str) -> ExportError:
    return ExportError(1, "invalid argument", msg)


class LoadedModel:
    """A loaded .air file. ``model(*inputs, **named)`` takes torch tensors or numpy
    arrays, one per input: positionally in the file's order, or by the input's name
    (the keyword it was exported with, or the forward's parameter name), or the
    first ones positionally and the rest by name, as a Python function takes its
    arguments. It returns a list of tensors, one per output (the model's outputs
    flattened: meta["output_flattening"]).
    ``input_names``, ``output_names`` and ``meta`` describe the file."""

    def __init__(self, runner: Any, meta: dict[str, Any], path: str) -> None:
        self._runner = runner
        self.meta = meta
        self.path = path
        self.input_names = [i["name"] for i in meta["inputs"]]
        self.output_names = [o["name"] for o in meta["outputs"]]
        self._dtypes = [_dtype(i["dtype"], path) for i in meta["inputs"]]

    def __repr__(self) -> str:
        ins = ", ".join(f"{i['name']}: {i['dtype']}{i['shape']}" for i in self.meta["inputs"])
        outs = ", ".join(f"{o['name']}: {o['dtype']}{o['shape']}" for o in self.meta["outputs"])
        return f"LoadedModel({self.path!r}, inputs=[{ins}], outputs=[{outs}])"

    def _bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        """The inputs in the file's order from positional and named ones; an unknown,
        repeated or missing name is an error naming it and the file's inputs."""
        if not kwargs:
            return args
        names, file = self.input_names, os.path.basename(self.path)
        listed = ", ".join(names)
        unknown = [k for k in kwargs if k not in names]
        if unknown:
            raise _bad(f"{file} has no input named {', '.join(map(repr, unknown))} (its inputs: {listed})")
        if len(args) > len(names):
            raise _bad(f"{file} takes {len(names)} input(s) ({listed}), got {len(args)} positionally")
        twice = [k for k in kwargs if names.index(k) < len(args)]
        if twice:
            raise _bad(f"{file}: input {twice[0]!r} is given both positionally and by name")
        missing = [n for n in names[len(args):] if n not in kwargs]
        if missing:
            raise _bad(f"{file}: missing input(s) {', '.join(map(repr, missing))} (its inputs: {listed})")
        return tuple(args) + tuple(kwargs[n] for n in names[len(args):])

    def _check(self, args: tuple[Any, ...]) -> list[torch.Tensor]:
        if len(args) != len(self.input_names):
            raise _bad(
                f"{os.path.basename(self.path)} takes {len(self.input_names)} input(s) "
                f"({', '.join(self.input_names)}), got {len(args)}"
            )
        sizes: dict[str, tuple[int, str]] = {}
        dims = self.meta.get("dims", {})
        out = []
        for arg, spec, dtype in zip(args, self.meta["inputs"], self._dtypes):
            name = spec["name"]
            if not isinstance(arg, torch.Tensor):
                if type(arg).__module__ == "numpy" and hasattr(arg, "dtype"):
                    import numpy as np

                    arg = torch.from_numpy(np.ascontiguousarray(arg))
                else:
                    raise _bad(f"input {name!r} must be a tensor or numpy array, got {type(arg).__name__}")
            if arg.device.type != "cpu":
                raise _bad(f"input {name!r} is on {arg.device}; the file runs on the CPU")
            if arg.dtype != dtype:
                raise _bad(f"input {name!r} must be {spec['dtype']}, got {str(arg.dtype).removeprefix('torch.')}")
            shape = spec["shape"]
            if arg.dim() != len(shape):
                raise _bad(f"input {name!r} must have {len(shape)} dims {shape}, got {list(arg.shape)}")
            for ax, (want, got) in enumerate(zip(shape, arg.shape)):
                if isinstance(want, int):
                    if want != got:
                        raise _bad(f"input {name!r} axis {ax} must be {want} (shape {shape}), got {list(arg.shape)}")
                    continue
                seen = sizes.setdefault(want, (got, name))
                if seen[0] != got:
                    raise _bad(
                        f"input {name!r} axis {ax} is dim {want!r} = {got}, but input {seen[1]!r} has {want!r} = {seen[0]}"
                    )
                lo, hi = (dims.get(want) or {}).get("min"), (dims.get(want) or {}).get("max")
                if (lo is not None and got < lo) or (hi is not None and got > hi):
                    raise _bad(f"input {name!r} axis {ax} is dim {want!r} = {got}, outside its range [{lo}, {hi}]")
            out.append(arg if arg.is_contiguous() else arg.contiguous())
        return out

    def __call__(self, *args: Any, **kwargs: Any) -> list[torch.Tensor]:
        tensors = self._check(self._bind(args, kwargs))
        with torch.no_grad():
            return list(self._runner.run(tensors))


def _dtype(name: str, path: str) -> torch.dtype:
    dt = getattr(torch, name, None)
    if not isinstance(dt, torch.dtype):
        raise _bad(f"torchair.load({path!r}): the metadata names an unknown dtype {name!r}")
    return dt


def load(path: str | os.PathLike[str], *, num_threads: int | None = None) -> LoadedModel:
    """Loads a file written by ``torchair.export``: a callable (LoadedModel). A
    missing, unreadable, damaged or foreign file is an error saying which and why.
    num_threads: threads for its runs (default: torchair's pool, AIR_NUM_THREADS or the CPUs)."""
    from torchair import _C

    path = os.fspath(path)
    if num_threads is not None and (not isinstance(num_threads, int) or isinstance(num_threads, bool) or num_threads < 1):
        raise _bad(f"num_threads must be a positive int, got {num_threads!r}")
    if not os.path.exists(path):
        raise FileNotFoundError(2, f"torchair.load: no such file: {path!r}")
    if not hasattr(_C, "open_file"):
        from torchair.errors import NotBuiltError

        raise NotBuiltError(2, "unsupported", "this libair has no .air loader (_C.open_file): the .air format is not built")
    from torchair.compiler import _empty
    from torchair.export.write import META_KEY

    try:
        f = _C.open_file(path)  # checks the header, the section table and every checksum
    except _C.Error as e:
        raise _bad(f"torchair.load({path!r}): {e}") from e
    meta = parse_meta((f.meta or {}).get(META_KEY), path)
    in_dtypes = [_dtype(i["dtype"], path) for i in meta["inputs"]]
    out_dtypes = [_dtype(o["dtype"], path) for o in meta["outputs"]]
    try:
        runner = f.compile(in_dtypes, out_dtypes, _empty, num_threads=num_threads)
    except _C.Error as e:
        raise _bad(f"torchair.load({path!r}): the graph does not compile: {e}") from e
    return LoadedModel(runner, meta, path)

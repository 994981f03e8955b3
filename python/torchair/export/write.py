"""``torchair.export(model, example_inputs, path, *, kwargs=None, options=None, dynamic_axes=None)``:
the model traced (export/trace.py), lowered into one libair graph with the
torch.compile path's lowering and options (export/lower.py), and written as
one .air file with its weights and metadata (export/meta.py)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

import torch

from torchair.compiler import BuiltGraph
from torchair.config import CompilerConfig, config_from


@dataclass
class Prepared:
    """What export writes: the built graph (weights bound as constants), its metadata,
    the flat options it was lowered with."""

    built: BuiltGraph
    meta: dict[str, Any]
    config: CompilerConfig


def prepare(
    model: torch.nn.Module,
    example_inputs: Any,
    *,
    kwargs: dict[str, Any] | None = None,
    options: dict[str, Any] | None = None,
    dynamic_axes: dict[str, Any] | None = None,
    config: CompilerConfig | None = None,
    auto_dynamic: bool = False,
) -> Prepared:
    """Everything export does but writing the file. config: a CompilerConfig in place of
    options (TorchAir's dynamo_export); auto_dynamic: every axis may be dynamic."""
    from torchair.decompositions import torchair_decompositions
    from torchair.dynamic_axes import parse
    from torchair.export.lower import check_options, lower
    from torchair.export.meta import build as build_meta
    from torchair.export.trace import trace
    from torchair.export.trace import _err

    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    if isinstance(example_inputs, dict):
        raise _err(
            "example_inputs is a dict; give inputs by keyword as torch.export takes them: "
            "torchair.export(model, (), path, kwargs={'input_ids': ..., ...})"
        )
    if not isinstance(example_inputs, (tuple, list)):
        raise _err(f"example_inputs must be a tuple of tensors, got {type(example_inputs).__name__}")
    if kwargs is not None and not (isinstance(kwargs, dict) and all(isinstance(k, str) for k in kwargs)):
        raise _err(f"kwargs must be a dict of keyword name -> tensor, got {type(kwargs).__name__}")
    if config is not None:
        if options is not None:
            raise _err("give options or config, not both")
        from torchair.config import CompilerConfig as _Config

        if not isinstance(config, _Config):
            raise _err(f"config must be a torchair.CompilerConfig, got {type(config).__name__}")
    else:
        config = config_from(options, None)
    flat, _extras = config.effective()  # a copy: the caller's config is not changed
    if dynamic_axes is not None:
        if flat.dynamic_axes is not None and flat.dynamic_axes != dynamic_axes:
            raise _err("dynamic_axes is given both as an argument and in the options, differently")
        flat.dynamic_axes = dynamic_axes  # validated as the option is
        flat.check_built()
    check_options(flat)
    spec = parse(flat.dynamic_axes) if flat.dynamic_axes is not None else None
    traced = trace(model, tuple(example_inputs), spec, torchair_decompositions(), auto_dynamic, kwargs)
    built = lower(traced, flat)
    return Prepared(built, build_meta(traced, flat, spec), flat)


def export(
    model: torch.nn.Module,
    example_inputs: Any,
    path: str | os.PathLike[str],
    *,
    kwargs: dict[str, Any] | None = None,
    options: dict[str, Any] | None = None,
    dynamic_axes: dict[str, Any] | None = None,
) -> str:
    """Writes ``model`` as one .air file at ``path``: the graph after torchair's
    lowering, the parameters and buffers frozen into it as constants (in the
    precision ``options`` chose: mixed_precision='bf16' stores bf16 weights), the
    inputs' and outputs' names, dtypes and shapes (``dynamic_axes``,
    ``{argument: {axis: 'name'}}``, makes those axes symbols named so), the options
    and the torchair version. The model is called as ``model(*example_inputs, **kwargs)``,
    as torch.export calls it: keyword inputs (``kwargs={'input_ids': ids,
    'attention_mask': mask}``, a Hugging Face model's way) are named in the file by
    their keyword, come after the positional ones in the order given, and
    ``dynamic_axes`` names them by keyword too; ``torchair.load``'s callable takes
    them by the same keywords (or positionally, in the file's order). Run it with ``torchair.load(path)`` or the ``air``
    CLI. The model is traced with ``torch.export`` (non-strict) in its current
    mode: call ``model.eval()`` first. An op torchair cannot compile is an error
    naming it (an exported file cannot fall back to Python). Outputs are the flat
    leaves of the model's output (export/meta.py: FLATTENING). Returns the path."""
    prepared = prepare(model, example_inputs, kwargs=kwargs, options=options, dynamic_axes=dynamic_axes)
    path = os.fspath(path)
    save(prepared, path)
    return path


META_KEY = "torchair.export"  # the metadata's key in the file (export/meta.py's JSON)


def save(prepared: Prepared, path: str) -> None:
    """Writes the file (libair writes it atomically: a temporary file renamed into place).
    Its metadata: META_KEY (export/meta.py's JSON), and torchair_version and options as
    plain keys for ``air info``. The compile options saved are the ones the options chose,
    so the CLI compiles the graph as torchair.load does."""
    from torchair.compiler import _compile_flags, _disabled_passes
    from torchair.export.trace import _err

    graph = prepared.built.graph
    if not hasattr(graph, "save"):
        from torchair.errors import NotBuiltError

        raise NotBuiltError(2, "unsupported", "this libair has no .air writer (Graph.save): the .air format is not built")
    config = prepared.config
    meta = {
        META_KEY: json.dumps(prepared.meta),
        "torchair_version": prepared.meta["torchair_version"],
        "options": json.dumps(prepared.meta["options"]),
    }
    try:
        graph.save(
            path,
            meta=meta,
            output_names=[o["name"] for o in prepared.meta["outputs"]],
            flags=_compile_flags(config),
            fusion_threshold=config.fusion_threshold or 0,
            disabled_passes=_disabled_passes(config),
        )
    except OSError as e:
        raise _err(f"cannot write {path!r}: {e}") from e

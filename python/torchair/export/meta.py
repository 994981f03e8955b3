"""The metadata torchair.export writes beside the graph (one JSON object) and
torchair.load reads back: torchair version, the options, the inputs and
outputs (names, dtypes, shapes with the dynamic_axes names of symbolic dims),
the named dims and their ranges, and how outputs were flattened."""

from __future__ import annotations

import json
from typing import Any

from torchair.config import CompilerConfig
from torchair.export.lower import dtype_name, shape_spec
from torchair.export.trace import Traced

FORMAT = "torchair.export/1"
FLATTENING = (
    "outputs are the leaves of the model's output pytree in torch.utils._pytree order "
    "(a tuple/list in order, a dict or ModelOutput in key order); names are their paths"
)


def options_json(config: CompilerConfig) -> dict[str, Any]:
    """The flat options as JSON values (a dynamic_axes dict's int axes become strings)."""
    return json.loads(json.dumps(config.as_dict(), default=str))


def build(traced: Traced, config: CompilerConfig, spec: Any) -> dict[str, Any]:
    from torchair import __version__

    names = traced.symbol_names
    dims: dict[str, dict[str, Any]] = {}
    for axes in (spec or {}).values():
        for a in axes.values():
            dims[a.name] = {"min": a.min, "max": a.max}
    return {
        "format": FORMAT,
        "torchair_version": __version__,
        "options": options_json(config),
        "inputs": [
            {"name": nm, "dtype": dtype_name(n.meta["val"].dtype), "shape": shape_spec(n.meta["val"], names)}
            for nm, n in zip(traced.input_names, traced.inputs)
        ],
        "outputs": [
            {"name": nm, "dtype": dtype_name(n.meta["val"].dtype), "shape": shape_spec(n.meta["val"], names)}
            for nm, n in zip(traced.output_names, traced.outputs)
        ],
        "dims": dims,
        "output_flattening": FLATTENING,
    }


def parse(text: str | bytes | None, path: str) -> dict[str, Any]:
    """The metadata of a loaded file, checked enough to drive the input checks."""
    from torchair.export.trace import ExportError

    def bad(why: str) -> ExportError:
        return ExportError(1, "invalid argument", f"torchair.load({path!r}): {why}")

    if not text:
        raise bad("the file has no torchair.export metadata (was it written by torchair.export?)")
    try:
        meta = json.loads(text)
    except ValueError as e:
        raise bad(f"its metadata is not valid JSON ({e})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise bad(f"its metadata format is {meta.get('format') if isinstance(meta, dict) else None!r}, not {FORMAT!r}")
    for key in ("inputs", "outputs"):
        items = meta.get(key)
        if not isinstance(items, list) or not all(
            isinstance(x, dict) and isinstance(x.get("name"), str) and isinstance(x.get("dtype"), str)
            and isinstance(x.get("shape"), list)
            for x in items
        ):
            raise bad(f"its metadata's {key!r} is malformed")
    return meta

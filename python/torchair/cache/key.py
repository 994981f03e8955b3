"""The compile cache's key for one subgraph: a SHA-256 over everything that
decides the libair graph lowered from it and the model compiled from that:

- the subgraph's ATen code and, per node, its op, arguments and the dtype,
  shape (symbolic sizes as their expressions), strides and layout of its value;
- each outer argument: a frozen parameter (its dtype, shape and strides; its
  values are not in the key, they are bound from the live module at load) or an
  input; constants the subgraph holds itself (get_attr) by their bytes;
- the options (the flat ones and what TorchAir's groups set), torchair's and
  torch's versions, libair's version and build (a hash of the _C extension,
  which links libair in) and the CPU (the ISA kernels are chosen for and the
  CPU's feature flags)."""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Sequence
from typing import Any

import torch
from torch.fx import GraphModule, Node

KEY_VERSION = 1  # bumped when what an entry holds, or how the key is made, changes


def _val(v: Any) -> Any:
    if isinstance(v, torch.Tensor):
        return ["T", str(v.dtype), [str(s) for s in v.shape], [str(s) for s in v.stride()], str(v.layout),
                v.device.type]
    if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return ["S", str(v.node.expr)]
    if isinstance(v, (tuple, list)):
        return [_val(x) for x in v]
    if isinstance(v, (int, float, bool, str)) or v is None:
        return v
    return type(v).__name__


def _arg(a: Any) -> Any:
    if isinstance(a, Node):
        return "%" + a.name
    if isinstance(a, (tuple, list)):
        return [_arg(x) for x in a]
    if isinstance(a, dict):
        return {str(k): _arg(v) for k, v in a.items()}
    if isinstance(a, (int, float, bool, str)) or a is None:
        return repr(a)
    return str(a)  # dtypes, memory formats, devices


def _tensor_bytes(t: torch.Tensor) -> str:
    t = t.detach().contiguous()
    h = hashlib.sha256(str((t.dtype, tuple(t.shape))).encode())
    if t.numel():
        h.update(t.view(-1).view(torch.uint8).numpy().tobytes() if t.dtype != torch.bool else t.numpy().tobytes())
    return h.hexdigest()


def graph_description(sub: GraphModule, arg_nodes: Sequence[Any], frozen: dict[Node, torch.Tensor] | None) -> Any:
    nodes = []
    for n in sub.graph.nodes:
        entry: list[Any] = [n.op, n.name, str(n.target), _arg(n.args), _arg(n.kwargs), _val(n.meta.get("val"))]
        if n.op == "get_attr":
            t = getattr(sub, n.target, None)
            entry.append(_tensor_bytes(t) if isinstance(t, torch.Tensor) else repr(t))
        nodes.append(entry)
    args = []
    for a in arg_nodes:
        v = a.meta.get("val") if isinstance(a, Node) else a
        if frozen and a in frozen:
            t = frozen[a]
            args.append(["frozen", str(t.dtype), list(t.shape), list(t.stride())])
        else:
            args.append(["input", _val(v)])
    return {"code": sub.code, "nodes": nodes, "args": args}


@functools.cache
def environment() -> dict[str, Any]:
    """What the key takes from the installation and the machine (fixed in a process)."""
    import os

    from torchair import __version__, _C

    build = hashlib.sha256()
    try:
        with open(_C.__file__, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                build.update(block)
    except OSError:
        build.update(b"unknown")
    flags = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = " ".join(sorted(line.split(":", 1)[1].split()))
                    break
    except OSError:
        pass
    return {
        "key_version": KEY_VERSION,
        "torchair": __version__,
        "torch": torch.__version__,
        "libair": _C.version(),
        "libair_build": build.hexdigest(),
        "isa": _C.isa(),
        "cpu_flags": hashlib.sha256(flags.encode()).hexdigest(),
        "machine": os.uname().machine,
    }


def options_description(config: Any) -> Any:
    flat = json.loads(json.dumps(config.as_dict(), default=str, sort_keys=True))
    extras = getattr(config, "extras", None)
    # torch.set_float32_matmul_precision and the mkldnn knobs, read at compile time (torchair.precision)
    precision = getattr(config, "fp32_precision", None)
    return {"options": flat, "num_threads": getattr(extras, "num_threads", 0),
            "fp32_precision": list(precision) if precision is not None else None}


def key(sub: GraphModule, arg_nodes: Sequence[Any], config: Any, frozen: dict[Node, torch.Tensor] | None) -> str:
    text = json.dumps(
        [environment(), options_description(config), graph_description(sub, arg_nodes, frozen)],
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(text.encode()).hexdigest()

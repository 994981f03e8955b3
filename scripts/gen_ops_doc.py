"""Writes docs/ops.md: every ATen op torchair compiles, from its lowering table
(``torchair.lowering.LOWERINGS``), with what PyTorch's OpInfo sweep found for it
(tests/python/test_ops_opinfo.py: the dtypes it samples; docs/opinfo-coverage.md: the samples
that compiled and matched eager, and those left to eager).

    PYTHONPATH=python python scripts/gen_ops_doc.py          # write docs/ops.md
    PYTHONPATH=python python scripts/gen_ops_doc.py --check  # exit 1 if it is not current

``--check`` is run by tests/python/test_ops_doc.py. After adding a lowering, or regenerating
docs/opinfo-coverage.md (tools/opinfo_report.py), run this again.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "ops.md"
COVERAGE = REPO / "docs" / "opinfo-coverage.md"
SWEEP = REPO / "tests" / "python" / "test_ops_opinfo.py"

# OpInfo names whose ATen op (after torchair's decompositions) is not the name itself
OPINFO_TO_ATEN: dict[str, list[str]] = {
    "softmax": ["_softmax"],
    "log_softmax": ["_log_softmax"],
    "nn.functional.layer_norm": ["native_layer_norm"],
    "nn.functional.conv2d": ["convolution"],
    "nn.functional.conv_transpose2d": ["convolution"],
    "nn.functional.max_pool2d": ["max_pool2d_with_indices"],
    "nn.functional.adaptive_avg_pool2d": ["_adaptive_avg_pool2d", "adaptive_avg_pool2d"],
    "nn.functional.scaled_dot_product_attention": ["_scaled_dot_product_flash_attention_for_cpu", "scaled_dot_product_attention"],
    "nn.functional.pad": ["constant_pad_nd"],
    "nn.functional.elu": ["elu"],
    "nn.functional.selu": ["elu"],
    "nn.functional.celu": ["elu"],
    "linalg.vector_norm": ["linalg_vector_norm"],
    "nn.functional.normalize": ["linalg_vector_norm"],
    "nn.functional.relu": ["relu"],
}

FAMILIES = {
    "elementwise": "Elementwise (unary, binary, comparisons, casts)",
    "shape": "Shapes, views and copies",
    "reduce": "Reductions and normalisation",
    "matmul": "Matrix products",
    "conv": "Convolution and pooling",
    "attention": "Attention",
    "index": "Indexing and tensor factories",
    "backward": "Backward ops (training)",
    "conv_backward": "Backward ops (training)",
    "attention_backward": "Backward ops (training)",
    "norm_train": "Normalisation in training",
    "lowp": "Low precision",
}


def _sweep() -> tuple[dict[str, tuple[str, ...]], dict[str, tuple[int, int]]]:
    """The sweep's claimed dtypes {OpInfo name: dtype names} and its record
    {OpInfo name: (samples compiled, samples left to eager)}."""
    text = SWEEP.read_text()
    start = text.index("CLAIMED: dict")
    block = text[start:text.index("\n}\n", start)]
    claimed: dict[str, tuple[str, ...]] = {}
    for dtypes, names in re.findall(r"\*\*\{n: \(([^)]*)\) for n in \[(.*?)\]\}", block, re.S):
        dts = tuple(d.strip().replace("torch.", "") for d in dtypes.split(",") if d.strip())
        for name in re.findall(r'"([^"]+)"', names):
            claimed[name] = dts
    record: dict[str, tuple[int, int]] = {}
    for line in COVERAGE.read_text().splitlines():
        m = re.match(r"\| ([\w.]+) \| (\d+) \| (.*) \|$", line)
        if m:
            reasons = m.group(3).strip()
            record[m.group(1)] = (int(m.group(2)), len(reasons.split("<br>")) if reasons else 0)
    return claimed, record


def markdown() -> str:
    import torch

    import torchair  # noqa: F401  (registers the lowerings)
    from torchair.lowering.core import AVAILABLE_OUTPUTS, LOWERINGS

    claimed, record = _sweep()
    by_aten: dict[str, list[str]] = {}
    for name in claimed:
        for aten_name in OPINFO_TO_ATEN.get(name, [name.split(".")[-1]]):
            by_aten.setdefault(aten_name, []).append(name)

    # {family: {packet: [overloads]}}
    table: dict[str, dict[str, list[str]]] = {}
    fns: dict[str, str] = {}
    for target, fn in LOWERINGS.items():
        if isinstance(target, torch._ops.OpOverload):
            ns, packet, overload = str(target).split(".")
        elif isinstance(target, str) and target.count(".") == 2:
            ns, packet, overload = target.split(".")
        else:
            continue  # Python operators (getitem) are not ATen ops
        module = getattr(fn, "__module__", "").rsplit(".", 1)[-1]
        if module == "user" or not getattr(fn, "__module__", "").startswith("torchair.lowering."):
            continue  # a user's lowering (register_lowering) is not torchair's
        family = FAMILIES.get(module, module)
        table.setdefault(family, {}).setdefault(f"{ns}.{packet}", []).append(overload)
        if target in AVAILABLE_OUTPUTS:
            fns[f"{ns}.{packet}"] = "outputs " + ", ".join(str(i) for i in sorted(AVAILABLE_OUTPUTS[target]))

    n_overloads = sum(len(v) for fam in table.values() for v in fam.values())
    n_packets = sum(len(fam) for fam in table.values())
    swept = sum(1 for fam in table.values() for p in fam if by_aten.get(p.split(".", 1)[1]))
    lines = [
        "# The ATen ops torchair compiles",
        "",
        "Generated by `python scripts/gen_ops_doc.py` from torchair's lowering table",
        "(`python/torchair/lowering/`) and the OpInfo sweep (`tests/python/test_ops_opinfo.py`, whose",
        "record is `docs/opinfo-coverage.md`); do not edit by hand. `tests/python/test_ops_doc.py` checks",
        "that it is current.",
        "",
        f"{n_packets} ATen ops ({n_overloads} overloads) have a lowering; {swept} of them are swept with",
        "PyTorch's own OpInfo samples through `torch.compile(backend=\"torchair\")` and compared with eager.",
        "A lowering may still refuse a node (a dtype, rank or attribute its kernel lacks): the node then",
        "runs in eager and the compile report says why (`torchair.explain`, `config.debug.fx_summary`).",
        "16-bit floats (bf16, f16) are storage types: every op on them computes in f32 between the casts",
        "at the graph's edges (docs/low-precision.md). Ops with several outputs compile the outputs listed.",
        "An op torchair lacks can be taught with `torchair.register_lowering(op, fn)` (docs/debugging.md).",
        "",
        "Columns: the overloads lowered; the OpInfo entries that sample the op, the dtypes they sample,",
        "and how many samples compiled and matched eager / were left to eager (reasons in",
        "docs/opinfo-coverage.md).",
    ]
    order = list(dict.fromkeys(FAMILIES.values())) + [f for f in table if f not in FAMILIES.values()]
    for family in order:
        if family not in table:
            continue
        lines += ["", f"## {family}", "", "| ATen op | overloads | OpInfo | dtypes sampled | compiled / eager |",
                  "|---|---|---|---|---|"]
        for packet in sorted(table[family]):
            overloads = ", ".join(sorted(table[family][packet]))
            if packet in fns:
                overloads += f" ({fns[packet]})"
            infos = by_aten.get(packet.split(".", 1)[1], [])
            if infos:
                dts = sorted({d for i in infos for d in claimed[i]})
                done = [record.get(i, (0, 0)) for i in infos]
                counts = f"{sum(c for c, _ in done)} / {sum(u for _, u in done)}"
                lines.append(f"| `{packet}` | {overloads} | {', '.join(infos)} | {', '.join(dts)} | {counts} |")
            else:
                lines.append(f"| `{packet}` | {overloads} | | | |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    text = markdown()
    if "--check" in argv:
        if not DOC.is_file() or DOC.read_text() != text:
            print(f"{DOC} is out of date: run PYTHONPATH=python python scripts/gen_ops_doc.py")
            return 1
        return 0
    DOC.write_text(text)
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The memory plan and the compile report (issue 4): outputs are identical
with and without ``enable_memory_optimization`` on ResNet- and BERT-like
blocks, the planned arena is below the no-reuse total, in-place steps are
counted, the report and ``torchair.explain`` show the numbers, and the DOT
export has a node per op before and after the passes (SVG where Graphviz
is installed)."""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F

import torchair
from torchair.report import has_graphviz, write_graphs


pytestmark = pytest.mark.usefixtures("fresh_dynamo")


class _Basic(torch.nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.c1 = torch.nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.b1 = torch.nn.BatchNorm2d(c)
        self.c2 = torch.nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.b2 = torch.nn.BatchNorm2d(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.b1(self.c1(x)))
        return torch.relu(self.b2(self.c2(y)) + x)


def _resnetish() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    m = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1),
        torch.nn.ReLU(),
        _Basic(16),
        _Basic(16),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(16, 10),
    ).eval()
    for mod in m.modules():  # non-trivial batch norm statistics
        if isinstance(mod, torch.nn.BatchNorm2d):
            mod.running_mean.uniform_(-0.5, 0.5)
            mod.running_var.uniform_(0.5, 1.5)
    return m, (torch.randn(2, 3, 17, 17),)


class _Layer(torch.nn.Module):
    def __init__(self, d: int = 32, heads: int = 4, ff: int = 64) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.out = torch.nn.Linear(d, d)
        self.ln1 = torch.nn.LayerNorm(d)
        self.ff1 = torch.nn.Linear(d, ff)
        self.ff2 = torch.nn.Linear(ff, d)
        self.ln2 = torch.nn.LayerNorm(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (t.reshape(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, s, d)
        h = self.ln1(x + self.out(a))
        return self.ln2(h + self.ff2(F.gelu(self.ff1(h))))


def _bertish() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return torch.nn.Sequential(_Layer(), _Layer()).eval(), (torch.randn(2, 9, 32),)


def _elementwise_tail(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    # softmax is no elementwise op, so the fused group tanh(a * y) + 1 gets a
    # dying activation to write over; the last softmax keeps the group's
    # result from being a graph output (the caller's memory)
    a = torch.softmax(x, dim=-1)
    return torch.softmax(torch.tanh(a * y) + 1.0, dim=-1)


def _elementwise_case() -> tuple[object, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return _elementwise_tail, (torch.randn(6, 33), torch.randn(6, 33))


CASES = {"resnetish": _resnetish, "bertish": _bertish, "elementwise": _elementwise_case}


def _subgraphs(report):
    subs = [s for g in report.graphs for s in g.subgraphs if s.compiled]
    assert subs, "nothing was compiled:\n" + str(report)
    return subs


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_outputs_and_smaller_plan(name: str) -> None:
    model, inputs = CASES[name]()
    outs, plans = {}, {}
    for reuse in (True, False):
        torch._dynamo.reset()
        options = {"enable_memory_optimization": reuse}
        with torch.no_grad():
            report = torchair.explain(model, *inputs, options=options)
            torch._dynamo.reset()
            outs[reuse] = torch.compile(model, backend="torchair", options=options)(*inputs)
        plans[reuse] = report.memory()
        assert plans[reuse], report
        for sub, mem in zip(_subgraphs(report), plans[reuse]):
            assert mem["known"]
            # the report text carries the same numbers
            assert f"({mem['arena_bytes']} bytes)" in sub.air_report, sub.air_report
            assert f"({mem['no_reuse_bytes']} bytes)" in sub.air_report, sub.air_report
            assert "weights held by the model" in sub.air_report
        assert "arena" in report.memory_summary()
    # with the optimization a linear reads its weight in place (linear_gemm_weight_rows) instead of
    # a packed copy: the same products, but a tile of fewer than 4 rows sums even and odd k apart,
    # and which outputs fall in such a tile differs, so the two agree to an ulp or so, not bitwise
    torch.testing.assert_close(outs[True], outs[False], rtol=1e-5, atol=1e-6, msg=name)
    with torch.no_grad():
        torch.testing.assert_close(outs[True], model(*inputs), rtol=1e-4, atol=1e-4)
    planned = sum(m["arena_bytes"] for m in plans[True])
    no_reuse = sum(m["no_reuse_bytes"] for m in plans[True])
    assert planned < no_reuse, plans[True]
    # without reuse: every value its own buffer, nothing in place
    for m in plans[False]:
        assert m["inplace"] == 0 and m["arena_bytes"] == m["no_reuse_bytes"], m
    assert no_reuse == sum(m["no_reuse_bytes"] for m in plans[False])
    if name == "elementwise":
        assert sum(m["inplace"] for m in plans[True]) >= 1, plans[True]


def _op_nodes(dot: str) -> int:
    return len(re.findall(r"^  n\d+ \[", dot, flags=re.M))


@pytest.mark.parametrize("name", ["resnetish", "bertish"])
def test_report_and_dot(name: str, tmp_path) -> None:
    model, inputs = CASES[name]()
    with torch.no_grad():
        report = torchair.explain(model, *inputs)
    for sub in _subgraphs(report):
        text = sub.air_report
        before_ops = int(re.search(r"ops before passes: (\d+)", text).group(1))
        after_ops = int(re.search(r"ops after passes: (\d+)", text).group(1))
        steps = int(re.search(r"steps: (\d+)", text).group(1))
        assert after_ops == steps
        assert "passes:" in text and "kernels per step:" in text and "arena planned:" in text
        before, after = sub.model.dot(before=True), sub.model.dot(before=False)
        for dot in (before, after):
            assert dot.startswith("digraph ")
            assert dot.count("{") == dot.count("}")
            assert re.search(r"^  in0 ", dot, flags=re.M)
            assert re.search(r"-> out0;", dot)
        assert _op_nodes(before) == before_ops
        assert _op_nodes(after) == steps
    paths = write_graphs(report.graphs, tmp_path, svg=False)
    assert len(paths) == 2 * len(_subgraphs(report))
    assert all(p.suffix == ".dot" and p.read_text().startswith("digraph") for p in paths)
    if has_graphviz():
        svgs = [p for p in report.write_graphs(tmp_path / "svg", svg=True) if p.suffix == ".svg"]
        assert len(svgs) == len(paths)
        assert all("<svg" in p.read_text() for p in svgs)


def test_report_fused_groups_listed() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(torch.softmax(x, -1) * 2.0 + 1.0).sigmoid()

    report = torchair.explain(f, torch.randn(4, 8))
    (sub,) = _subgraphs(report)
    assert re.search(r"fused groups:\n  step \d+: fused_elementwise \(4 ops\): mul\(2\) add\(1\) tanh sigmoid",
                     sub.air_report), sub.air_report


@pytest.mark.parametrize(
    "size, kernel, copy",
    [(10, "conv2d_nhwc_im2col_gemm", 1.0), (12, "conv2d_nhwc_winograd_f2x3", 16 / 9)],
    ids=["im2col", "winograd"],
)
def test_folded_weights_are_not_held_twice(size: int, kernel: str, copy: float) -> None:
    """Batch-norm-folded conv weights are owned copies; once the NHWC conv
    kernels have packed them the model frees them, so the weights it holds
    are about one packed copy of the convs' weights (16/9 of them for
    Winograd's 4x4 transformed taps), not that plus the folded copy. The
    result still equals eager."""
    torch.manual_seed(0)
    model = _Basic(32).eval()
    for bn in (model.b1, model.b2):
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
    x = torch.randn(1, 32, size, size)  # 25 or 36 tiles of 2x2 pixels: Winograd from 32
    with torch.no_grad():
        report = torchair.explain(model, x)
        got = torch.compile(model, backend="torchair")(x)
        torch.testing.assert_close(got, model(x), rtol=1e-4, atol=1e-4)
    conv_bytes = sum(m.weight.numel() * 4 for m in (model.c1, model.c2))
    subs = [s for g in report.graphs for s in g.subgraphs if s.compiled]
    assert len(subs) == 1
    text = subs[0].air_report
    assert "fold_batchnorm" in text and kernel in text, text
    held = subs[0].model.memory()["weight_bytes"]
    # packed weights (+ biases), without the folded copies
    assert copy * conv_bytes <= held < (copy + 0.5) * conv_bytes, (held, conv_bytes)


def test_big_convs_repack_the_modules_own_weights() -> None:
    """From 512 output pixels a channels-last conv re-packs its weight on
    every call, from the module's own parameter and the batch norm's scale,
    instead of holding a packed copy (enable_memory_optimization, on by
    default). The model then holds next to no weight bytes, and its result
    equals bit for bit the one with packed copies (the option off). Weights
    changed in place between calls are seen."""
    torch.manual_seed(0)
    model = _Basic(256).eval()  # Winograd makes its 4 MiB of U per call from 256 x 256 channels
    for bn in (model.b1, model.b2):
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
    x = torch.randn(2, 256, 16, 16)  # 512 output pixels
    conv_bytes = sum(m.weight.numel() * 4 for m in (model.c1, model.c2))
    held, outs = {}, {}
    for low in (True, False):
        torch._dynamo.reset()
        options = {"enable_memory_optimization": low}
        with torch.no_grad():
            report = torchair.explain(model, x, options=options)
            torch._dynamo.reset()
            outs[low] = torch.compile(model, backend="torchair", options=options)(x)
        (sub,) = _subgraphs(report)
        # 3x3 stride 1, 128 tiles: Winograd, whose transformed weight is made per call too
        assert "conv2d_nhwc_winograd_f2x3" in sub.air_report, sub.air_report
        held[low] = sub.model.memory()["weight_bytes"]
    assert held[False] >= conv_bytes, held
    assert held[True] < 0.1 * conv_bytes, held  # the folded biases and scales
    assert torch.equal(outs[True], outs[False])
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="torchair")
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-3, atol=1e-3)
        model.c1.weight.mul_(-0.5)  # the parameter the kernel re-packs from
        model.b2.running_var.mul_(3.0)  # the scale it applies while packing
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-3, atol=1e-3)


def test_profile_per_kernel() -> None:
    """torchair.report.profile times every step in C: the conv kernels of a
    conv block are listed with the number of steps that ran them, every run
    counted, and the table's total is the sum of its rows."""
    from torchair.report import format_profile, profile

    torch.manual_seed(0)
    model = _Basic(16).eval()
    x = torch.randn(1, 16, 10, 10)
    with torch.no_grad():
        report = profile(model, x, runs=4)
    rows = report.profile()
    assert rows, "no profile rows"
    assert all(r.runs == 4 for r in rows), rows  # the 4 runs after the first call (not counted)
    conv_steps = sum(r.steps for r in rows if r.op.startswith("conv2d"))
    assert conv_steps == 2, rows
    assert all(r.seconds >= 0 for r in rows) and sum(r.seconds for r in rows) > 0
    text = format_profile(rows)
    total = float(text.splitlines()[-1].split()[-1])
    assert abs(total - sum(r.ms_per_run for r in rows)) < 1e-2, text

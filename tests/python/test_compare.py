"""torchair.debug.compare: every compiled subgraph checked against eager and fp64 by SPEC
section 4's rule; with a lowering broken on purpose (monkeypatched) the first op that leaves
the tolerance is named, with its FX node, ATen op and the model's source line."""

from __future__ import annotations

import pytest
import torch

import torchair
from torchair.lowering.core import LOWERINGS

aten = torch.ops.aten


class Net(torch.nn.Module):
    def __init__(self, sort: bool = False) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.a = torch.nn.Linear(8, 16)
        self.b = torch.nn.Linear(16, 4)
        self.sort = sort

    def forward(self, x):
        h = torch.relu(self.a(x))  # LINE-RELU
        if self.sort:
            h = torch.sort(h, dim=-1).values  # left to eager: two compiled subgraphs
        return torch.tanh(self.b(h))  # LINE-TANH


def _line(tag: str) -> int:
    with open(__file__) as f:
        return next(i for i, line in enumerate(f, 1) if f"# {tag}" in line and "_line" not in line)


def _break(monkeypatch, op) -> None:
    """op's lowering, then x 1.01: a wrong result no tolerance accepts."""
    real = LOWERINGS[op]

    def broken(L, n):
        return L.node("mul", [real(L, n), L.scalar(1.01, torch.float32)])

    monkeypatch.setitem(LOWERINGS, op, broken)


@pytest.fixture(autouse=True)
def _fresh():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def test_a_correct_compile_passes():
    report = torchair.debug.compare(Net().eval(), torch.randn(5, 8))
    assert report.ok, str(report)
    assert report.subgraphs and all(ok for _, _, ok, _ in report.subgraphs)
    assert "within tolerance" in str(report)


def test_a_broken_lowering_is_named_with_its_node_and_source_line(monkeypatch):
    _break(monkeypatch, aten.relu.default)
    report = torchair.debug.compare(Net().eval(), torch.randn(5, 8))
    assert not report.ok
    m = report.first
    assert (m.node, m.op) == ("relu", "aten.relu.default"), str(report)
    assert m.source.startswith(f"{__file__}:{_line('LINE-RELU')} in forward"), m.source
    assert m.rmse > 2 * m.eager_rmse + m.tolerance / 10
    assert "op relu (aten.relu.default) leaves the tolerance" in str(report)


def test_the_first_failing_subgraph_is_found_after_good_ones(monkeypatch):
    _break(monkeypatch, aten.tanh.default)
    report = torchair.debug.compare(Net(sort=True).eval(), torch.randn(5, 8))
    assert not report.ok
    assert (report.first.node, report.first.op) == ("tanh", "aten.tanh.default"), str(report)
    assert report.first.source.startswith(f"{__file__}:{_line('LINE-TANH')}")
    oks = [ok for _, _, ok, _ in report.subgraphs]
    assert oks == [True, False], str(report)  # the relu subgraph passes, the tanh one does not

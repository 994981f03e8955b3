"""SPEC.md section 3.1: ops torchair does not support run in eager between
compiled subgraphs, so compiling never fails because of one missing op, and
torchair.explain says which ops fell back and why."""

from __future__ import annotations

import pytest
import torch

import torchair
from _compile import compile_recording


pytestmark = pytest.mark.usefixtures("fresh_dynamo")


class RfftInTheMiddle(torch.nn.Module):
    """linear -> rfft -> abs -> linear: the FFT (and abs of a complex tensor)
    have no libair op."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.a = torch.nn.Linear(16, 32)
        self.b = torch.nn.Linear(17, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.fft.rfft(torch.relu(self.a(x))).abs())


class TwoUnsupported(torch.nn.Module):
    """Two unsupported ops (an FFT and a sort) separated by supported ones."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.a = torch.nn.Linear(16, 16)
        self.b = torch.nn.Linear(9, 12)
        self.c = torch.nn.Linear(12, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.a(x))
        h = torch.fft.rfft(h).real  # unsupported
        h = torch.relu(self.b(h)) * 2
        h = torch.sort(h, dim=-1).values  # unsupported
        return self.c(h)


def _fallback_ops(report):
    return {op for _, op, _ in report.fallbacks}


def test_rfft_in_the_middle_compiles_and_matches_eager():
    model, x = RfftInTheMiddle().eval(), torch.randn(4, 16)
    with torch.no_grad():
        compiled, reports = compile_recording(model)
        out = compiled(x)
        torch.testing.assert_close(out, model(x), rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(compiled(x + 1), model(x + 1), rtol=1e-4, atol=1e-5)
    assert reports
    compiled_subs = [s for r in reports for s in r.subgraphs if s.compiled]
    assert len(compiled_subs) >= 2, "\n".join(map(str, reports))  # one linear before, one after the FFT


def test_explain_names_the_fallback_op_and_why():
    model, x = RfftInTheMiddle().eval(), torch.randn(4, 16)
    with torch.no_grad():
        report = torchair.explain(model, x)
    assert "aten._fft_r2c.default" in report.fallback_ops, str(report)
    reasons = {op: reason for _, op, reason in report.fallbacks}
    assert reasons["aten._fft_r2c.default"], "a fallback must say why"
    assert "lowering" in reasons["aten._fft_r2c.default"] or "unsupported" in reasons["aten._fft_r2c.default"]
    # every fallback has a node name, an op and a non-empty reason
    assert all(node and op and reason for node, op, reason in report.fallbacks)
    text = str(report)
    assert "fallback" in text and "aten._fft_r2c.default" in text
    # the linears around it are compiled
    assert report.compiled_ops >= 2
    assert "aten.addmm.default" not in report.fallback_ops


def test_complex_abs_falls_back_with_a_dtype_reason():
    model, x = RfftInTheMiddle().eval(), torch.randn(4, 16)
    with torch.no_grad():
        report = torchair.explain(model, x)
    reasons = {op: reason for _, op, reason in report.fallbacks}
    assert "aten.abs.default" in reasons, str(report)  # abs is supported, but not on complex64
    assert "complex" in reasons["aten.abs.default"]


def test_two_unsupported_ops_give_several_compiled_subgraphs():
    model, x = TwoUnsupported().eval(), torch.randn(5, 16)
    with torch.no_grad():
        report = torchair.explain(model, x)
        torch._dynamo.reset()
        compiled, _ = compile_recording(model)
        out = compiled(x)
        torch.testing.assert_close(out, model(x), rtol=1e-4, atol=1e-5)
    subs = [s for g in report.graphs for s in g.subgraphs if s.compiled]
    assert len(subs) >= 3, str(report)  # before the FFT, between the two, after the sort
    assert "aten._fft_r2c.default" in report.fallback_ops
    assert any("sort" in op for op in report.fallback_ops), str(report)
    assert report.compiled_ops + len(report.fallbacks) == report.total_ops


def test_training_with_a_fallback_op():
    model, x = RfftInTheMiddle().train(), torch.randn(4, 16)
    ref = RfftInTheMiddle().train()
    ref.load_state_dict(model.state_dict())
    compiled, reports = compile_recording(model)
    compiled(x).pow(2).sum().backward()
    ref(x).pow(2).sum().backward()
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5)
    assert {r.graph for r in reports} >= {"forward", "backward"}


def _nothing_supported(x: torch.Tensor) -> torch.Tensor:
    return torch.fft.rfft(x).abs()


def test_graph_with_no_supported_op_still_works():
    x = torch.randn(3, 16)
    compiled, reports = compile_recording(_nothing_supported)
    out = compiled(x)
    torch.testing.assert_close(out, _nothing_supported(x))
    assert reports
    assert all(r.compiled_ops == 0 for r in reports), "\n".join(map(str, reports))
    assert all(not s.compiled for r in reports for s in r.subgraphs)
    torch._dynamo.reset()
    report = torchair.explain(_nothing_supported, x)
    assert report.compiled_ops == 0
    assert len(report.fallbacks) == report.total_ops >= 2
    assert "aten._fft_r2c.default" in report.fallback_ops


def _complex_scale(t: torch.Tensor) -> torch.Tensor:
    return (t * 2).real + 1


def test_unsupported_dtype_falls_back():
    x = torch.randn(4, 4, dtype=torch.complex64)
    compiled, reports = compile_recording(_complex_scale)
    assert torch.equal(compiled(x), _complex_scale(x))
    reasons = [reason for r in reports for _, _, reason in r.fallbacks]
    assert any("complex64" in reason for reason in reasons), "\n".join(map(str, reports))

"""backend._direct_call: an inference graph for which aot_autograd's runtime
wrapper has nothing to do is called without it. These tests check that the
short path is taken only then, and that every case the wrapper exists for
(outputs that alias inputs or each other, inputs mutated outside the graph,
training graphs, autocast, grad mode) still behaves as in eager."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from _compile import compile_recording


pytestmark = pytest.mark.usefixtures("fresh_dynamo")


class Linear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(16, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.fc(x))


def _direct(reports) -> list[bool]:
    return [r.direct_call for r in reports]


def test_inference_graph_is_called_directly_and_matches_eager():
    m = Linear().eval()
    c, reports = compile_recording(m)
    x = torch.randn(4, 16)
    with torch.no_grad():
        want = m(x)
        for _ in range(3):  # the first call goes through the wrapper, the rest not
            got = c(x)
            torch.testing.assert_close(got, want)
    assert _direct(reports) == [True]
    assert not got.requires_grad


def test_grad_mode_on_without_grad_inputs_is_direct_and_tracks_nothing():
    m = Linear().eval().requires_grad_(False)
    c, reports = compile_recording(m)
    x = torch.randn(4, 16)
    for _ in range(3):
        got = c(x)
    assert _direct(reports) == [True]
    torch.testing.assert_close(got, m(x))
    assert not got.requires_grad and got.grad_fn is None


def test_multiple_outputs_and_graph_breaks():
    def f(x, w):
        a = x @ w
        b = a.sigmoid()
        print("", end="")  # a graph break: two graphs
        return b * 2, a - 1

    c, reports = compile_recording(f)
    x, w = torch.randn(5, 7), torch.randn(7, 3)
    with torch.no_grad():
        for _ in range(3):
            got = c(x, w)
    want = f(x, w)
    assert len(reports) == 2 and all(_direct(reports))
    for g, e in zip(got, want):
        torch.testing.assert_close(g, e)


def test_output_that_is_an_input_or_its_view_keeps_the_wrapper():
    def f(x):
        return x, x.view(-1)[:3], x.sin()

    c, reports = compile_recording(f)
    x = torch.randn(2, 4)
    with torch.no_grad():
        for _ in range(3):
            same, view, s = c(x)
    assert _direct(reports) == [False]
    torch.testing.assert_close(s, x.sin())
    assert same is x
    view[0] = 42.0  # writes through to x, as eager's view does
    assert x[0, 0].item() == 42.0


def test_aliased_inputs_one_mutated_keep_the_wrapper():
    # x and a view of x: aot_autograd passes their common base (a synthetic
    # base) and the wrapper maps the caller's two tensors onto it
    def f(a, b):
        b.mul_(2)
        return a + 1

    c, reports = compile_recording(f)
    with torch.no_grad():
        for _ in range(3):
            x = torch.ones(4, 3)
            e = x.clone()
            want = f(e, e[1:3])
            got = c(x, x[1:3])
            assert torch.equal(got, want) and torch.equal(x, e)
    assert _direct(reports) == [False]


def test_input_mutated_in_the_graph_still_reaches_the_caller():
    def f(x, y):
        x.add_(1)
        return y * x

    c, reports = compile_recording(f)
    x, y = torch.zeros(4), torch.randn(4)
    with torch.no_grad():
        for i in range(3):
            out = c(x, y)
            torch.testing.assert_close(x, torch.full((4,), float(i + 1)))
    torch.testing.assert_close(out, y * 3)
    assert len(reports) == 1


def test_input_metadata_mutation_reaches_the_caller():
    def f(x):
        x.t_()  # a metadata-only mutation (dynamo replays it on the caller's tensor)
        return x + 1

    c, reports = compile_recording(f)
    xs = [torch.randn(2, 3) for _ in range(3)]
    with torch.no_grad():
        for x in xs:
            want = x.t() + 1
            got = c(x)
            assert x.shape == (3, 2)
            torch.testing.assert_close(got, want)
    assert len(reports) == 1


def test_training_graph_keeps_the_wrapper_and_gradients():
    m = Linear().train()
    c, reports = compile_recording(m)
    x = torch.randn(4, 16)
    for _ in range(2):
        c(x).sum().backward()
    assert not any(_direct(reports))
    ref = Linear().train()
    ref(x).sum().backward()
    ref(x).sum().backward()
    torch.testing.assert_close(m.fc.weight.grad, ref.fc.weight.grad)


def test_autocast_matches_eager():
    # dynamo puts autocast's casts in the graph; whichever way it is called,
    # the results are eager's
    m = Linear().eval()
    c, reports = compile_recording(m)
    x = torch.randn(4, 16)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        for _ in range(3):
            got = c(x)
        want = m(x)
    assert got.dtype == want.dtype == torch.bfloat16
    torch.testing.assert_close(got.float(), want.float(), atol=2e-2, rtol=2e-2)


def test_a_changed_weight_still_rebuilds_on_the_direct_path():
    m = Linear().eval()
    c, reports = compile_recording(m)
    x = torch.randn(4, 16)
    with torch.no_grad():
        for _ in range(3):
            c(x)
        m.fc.weight.mul_(2)
        got = c(x)
    assert _direct(reports) == [True] and reports[0].rebuilds == 1
    torch.testing.assert_close(got, m(x))


def _wrapper_only(monkeypatch) -> list:
    """Makes _backend keep aot_autograd's wrapper; returns the marks it was offered."""
    import torchair.backend

    offered: list = []

    def keep_wrapper(forward, wrapped, marks):
        offered.append(marks)
        return wrapped

    monkeypatch.setattr(torchair.backend, "_direct_call", keep_wrapper)
    return offered


def test_dynamic_shapes_are_direct_and_mark_outputs_as_the_wrapper_does(monkeypatch):
    m = nn.Sequential(nn.Linear(16, 8), nn.GELU()).eval()
    c, reports = compile_recording(m, dynamic=True)
    marks = {}
    with torch.no_grad():
        for n in (3, 5, 7, 5):
            x = torch.randn(n, 16)
            y = c(x)
            torch.testing.assert_close(y, m(x))
            marks[n] = getattr(y, "_dynamo_propagated_dynamic_indices", None)
    assert _direct(reports) == [True]
    assert marks[7] == {0}  # the batch dim, which dynamo traced as a symbol

    torch._dynamo.reset()
    offered = _wrapper_only(monkeypatch)
    c2, _ = compile_recording(m, dynamic=True)
    with torch.no_grad():
        for n in (3, 5, 7):
            y2 = c2(torch.randn(n, 16))
    assert offered == [[(0, {0})]]
    assert getattr(y2, "_dynamo_propagated_dynamic_indices", None) == marks[7]


def test_dynamic_shapes_through_a_graph_break():
    def f(x):
        y = torch.relu(x @ x.t())
        print("", end="")  # the second graph traces y, whose dims the first marked
        return y.sum(0) * 2

    c, reports = compile_recording(f, dynamic=True)
    with torch.no_grad():
        for n in (3, 6, 9, 6):
            x = torch.randn(n, 4)
            torch.testing.assert_close(c(x), f(x))
    assert len(reports) == 2 and all(_direct(reports))

"""Backward ops that torchair decomposes its own way (torchair.decompositions):
select_backward is the gradient padded with zeros, not a where over an
expanded copy. Gradients match eager's for every index form (first, middle,
negative) and dim, and the backward graph holds the pads, not the wheres."""

from __future__ import annotations

import pytest
import torch

from _compile import compile_recording, kernel_steps


pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def _backward_ops(reports) -> list[str]:
    return [op for r in reports if r.graph == "backward" for s in r.subgraphs if s.compiled for op in s.ops]


def qkv_like(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    # a ViT's attention input: one projection split three ways along dim 0
    # by indexing (unbind's backward is a stack instead)
    qkv = (x @ w).reshape(2, 5, 3, 4).permute(2, 0, 1, 3)
    q, k, v = qkv[0], qkv[1], qkv[2]
    return (q * k.sin() + v.cos()).sum(-1)


def selects(x: torch.Tensor) -> torch.Tensor:
    return x[:, 0].exp() + x[:, -1] * 2 + x.select(2, 1).sum(-1, keepdim=True)


@pytest.mark.parametrize("fn, shapes", [(qkv_like, [(2, 5, 6), (6, 12)]), (selects, [(3, 4, 5)])])
def test_select_backward_gradients_match_eager(fn, shapes):
    torch.manual_seed(0)
    args = [torch.randn(s, requires_grad=True) for s in shapes]
    ref_args = [a.detach().clone().requires_grad_() for a in args]
    compiled, reports = compile_recording(fn)
    for _ in range(2):  # the second call runs the compiled graphs again
        for a in args + ref_args:
            a.grad = None
        out, ref = compiled(*args), fn(*ref_args)
        out.square().sum().backward()
        ref.square().sum().backward()
        torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-6)
        for a, b in zip(args, ref_args):
            torch.testing.assert_close(a.grad, b.grad, rtol=1e-4, atol=1e-5)
    ops = _backward_ops(reports)
    # the pads, or the cat that pads tiling their dim become (partition._pads_to_cats)
    assert any("constant_pad_nd" in op or op == "aten.cat.default" for op in ops), ops
    assert not any("where" in op for op in ops), ops


def _kernels(reports, graph: str) -> list[str]:
    """The op of each step of the compiled subgraphs of one graph kind."""
    return [op for op, _, _ in kernel_steps(reports, graph)]


def test_qkv_backward_joins_the_pads_in_one_cat():
    # the three select_backward pads and the two adds that sum them are one
    # cat in the compiled backward, with eager's gradients; the permute
    # after it is the cat's own layout (partition._permutes_through_cats)
    torch.manual_seed(0)
    x, w = torch.randn(2, 5, 6, requires_grad=True), torch.randn(6, 12, requires_grad=True)
    xr, wr = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    compiled, reports = compile_recording(qkv_like)
    compiled(x, w).square().sum().backward()
    qkv_like(xr, wr).square().sum().backward()
    torch.testing.assert_close(x.grad, xr.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(w.grad, wr.grad, rtol=1e-4, atol=1e-5)
    steps = _kernels(reports, "backward")
    assert steps.count("cat") == 1, steps
    assert "add" not in steps and "permute" not in steps, steps


aten = torch.ops.aten


def _pad0(t: torch.Tensor, before: int, after: int) -> torch.Tensor:
    # zero pad along dim 0 of t.unsqueeze(0) (pad pairs run from the last dim)
    return aten.constant_pad_nd(t.unsqueeze(0), [0, 0] * (t.dim()) + [before, after], 0.0)


def three_windows(a, b, c):
    return (_pad0(a, 0, 2) + _pad0(b, 1, 1)) + _pad0(c, 2, 0)


def two_windows_and_a_gap(a, b, c):
    return _pad0(a, 0, 3) + _pad0(b, 3, 0) + c[0, 0]


def overlapping(a, b, c):
    return aten.constant_pad_nd(a, [0, 0, 0, 2], 0.0) + aten.constant_pad_nd(b, [0, 0, 1, 1], 0.0) + c[0, 0]


def nonzero_fill(a, b, c):
    return aten.constant_pad_nd(a.unsqueeze(0), [0, 0, 0, 0, 0, 1], 1.5) + _pad0(b, 1, 0) + c[0, 0]


@pytest.mark.parametrize("fn, cats, adds", [
    (three_windows, 1, 0),          # the windows tile the dim: one cat
    (two_windows_and_a_gap, 1, 1),  # a gap: zeros between them (the add is + c[0, 0])
    (overlapping, 2, 1),            # windows overlap: the pads and their sum stay
    (nonzero_fill, 2, 1),           # a fill of 1.5 is no zero pad: the sum stays
])  # adds: steps that add (the sum's two adds are one fused_dag step)
def test_sums_of_zero_pads(fn, cats, adds):
    torch.manual_seed(0)
    args = [torch.randn(4, 5) for _ in range(3)]
    args[0][0, 0] = -0.0
    compiled, reports = compile_recording(fn)
    out, ref = compiled(*args), fn(*args)
    assert torch.equal(out, ref)
    steps = _kernels(reports, "inference")
    assert (steps.count("cat"), steps.count("add") + steps.count("fused_dag")) == (cats, adds), steps
    if fn is three_windows:  # the cat keeps -0.0, as eager's select_backward does
        assert torch.signbit(out[0, 0, 0]) and not torch.signbit(ref[0, 0, 0])


def test_a_long_residual_stream_compiles():
    # every add asks whether it sums zero pads; one of a residual stream must
    # not walk the stream back (past Python's recursion limit it raised)
    ws = [0.001 * i for i in range(1100)]

    def stream(x):
        for w in ws:
            x = x + torch.tanh(x * w)
        return x

    compiled, reports = compile_recording(stream)
    x = torch.randn(32)
    torch.testing.assert_close(compiled(x), stream(x), rtol=1e-4, atol=1e-4)
    assert any(s.compiled for r in reports for s in r.subgraphs)

"""Backward ops that torchair decomposes its own way (torchair.decompositions):
select_backward is the gradient padded with zeros, not a where over an
expanded copy. Gradients match eager's for every index form (first, middle,
negative) and dim, and the backward graph holds the pads, not the wheres."""

from __future__ import annotations

import pytest
import torch

from _compile import compile_recording


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
    assert any("constant_pad_nd" in op for op in ops), ops
    assert not any("where" in op for op in ops), ops

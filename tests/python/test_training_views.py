"""A training step's forward graph returns permute(W) of each linear's weight
for the backward, which transposes it back. Those transposes are left to
eager as views (torchair.partition._eager_views): no weight-sized copies, the
same gradients, and inference graphs keep compiling their permutes."""

from __future__ import annotations

import pytest
import torch

from _compile import compile_recording, kernel_steps
from torchair.compiler import EAGER_VIEW_REASON


pytestmark = pytest.mark.usefixtures("fresh_dynamo")


class Mlp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.a = torch.nn.Linear(24, 40)
        self.b = torch.nn.Linear(40, 12)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.nn.functional.gelu(self.a(x)))


def _eager_view_nodes(reports, graph: str) -> list[str]:
    return [node for r in reports if r.graph == graph for node, _, why in r.fallbacks if why == EAGER_VIEW_REASON]


def test_saved_weight_transposes_are_views_and_gradients_match():
    model, ref = Mlp().train(), Mlp().train()
    ref.load_state_dict(model.state_dict())
    x = torch.randn(6, 24)
    compiled, reports = compile_recording(model)
    for step in range(2):  # the second step runs the compiled graphs again
        for m in (model, ref):
            m.zero_grad()
        out = compiled(x)
        out.square().mean().backward()
        ref(x).square().mean().backward()
        torch.testing.assert_close(out, ref(x), rtol=1e-5, atol=1e-6)
        for p, q in zip(model.parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-6)
    # the forward saves the second linear's W^T (the first one's input needs
    # no gradient, so its W^T is not saved); the backward transposes it back
    assert _eager_view_nodes(reports, "forward"), [r.fallbacks for r in reports]
    assert _eager_view_nodes(reports, "backward"), [r.fallbacks for r in reports]


def test_a_parameter_updated_between_steps_is_seen():
    # the saved view is of the parameter itself: an optimizer step changes
    # what the next forward and backward read, as in eager
    model, ref = Mlp().train(), Mlp().train()
    ref.load_state_dict(model.state_dict())
    x = torch.randn(5, 24)
    compiled, _ = compile_recording(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    opt_ref = torch.optim.SGD(ref.parameters(), lr=0.1)
    for _ in range(3):
        for o in (opt, opt_ref):
            o.zero_grad()
        compiled(x).square().mean().backward()
        ref(x).square().mean().backward()
        opt.step()
        opt_ref.step()
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-6)


def test_inference_graphs_keep_their_permutes_compiled():
    def transpose(x: torch.Tensor) -> torch.Tensor:
        return x.t()

    compiled, reports = compile_recording(transpose)
    x = torch.randn(7, 9)
    with torch.no_grad():
        y = compiled(x)
    torch.testing.assert_close(y, x.t())
    assert not any(why == EAGER_VIEW_REASON for r in reports for _, _, why in r.fallbacks)
    assert sum(s.compiled for r in reports for s in r.subgraphs) >= 1


class Flatten(torch.nn.Module):
    """[B, T, C] -> [B * T, C] -> linear -> gelu -> [B, T, D]: the forward
    returns its reshapes for the backward."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(1)
        self.a = torch.nn.Linear(24, 16)
        self.b = torch.nn.Linear(16, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.nn.functional.gelu(self.a(x.reshape(-1, x.shape[-1])))
        return self.b(h).reshape(x.shape[0], x.shape[1], -1)


def test_returned_reshapes_are_views_and_gradients_match():
    model, ref = Flatten().train(), Flatten().train()
    ref.load_state_dict(model.state_dict())
    x = torch.randn(2, 5, 24, requires_grad=True)
    xr = x.detach().clone().requires_grad_(True)
    compiled, reports = compile_recording(model)
    out = compiled(x)
    out.square().mean().backward()
    ref(xr).square().mean().backward()
    torch.testing.assert_close(out, ref(xr), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(x.grad, xr.grad, rtol=1e-4, atol=1e-6)
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-6)
    reshaped = [op for r in reports if r.graph == "forward" for _, op, why in r.fallbacks if why == EAGER_VIEW_REASON]
    assert any("view" in op or "reshape" in op for op in reshaped), [r.fallbacks for r in reports]


class Attention(torch.nn.Module):
    """A ViT block's attention: q, k and v split out of one projection. The
    attention itself compiles (sdpa_lse and sdpa_backward), so its operands
    are compiled tensors, not views handed to eager."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.qkv = torch.nn.Linear(32, 96)
        self.proj = torch.nn.Linear(32, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, 4, d // 4).permute(2, 0, 3, 1, 4)
        out = torch.nn.functional.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2])
        return self.proj(out.transpose(1, 2).reshape(b, n, d))


def _copying_view_kernels(reports, graph: str) -> list[str]:
    """Steps of the compiled subgraphs that copy for a view op."""
    return [f"{op} {kernel} {out}" for op, kernel, out in kernel_steps(reports, graph)
            if op in ("permute", "slice", "reshape") and kernel != "(alias)"]


def test_views_between_subgraphs_and_eager_are_not_copied():
    # the backward returns the weight gradients' [tokens, features] operands
    # as views (a subgraph output was a copy of each). The forward copies
    # only the head split and merge around the compiled attention: q, k and
    # v are saved for its backward, so they are tensors of their own (when
    # attention ran in eager they were views of the projection; reading them
    # in place would need the backward to take them as views too)
    model, ref = Attention().train(), Attention().train()
    ref.load_state_dict(model.state_dict())
    x = torch.randn(2, 7, 32, requires_grad=True)
    xr = x.detach().clone().requires_grad_(True)
    compiled, reports = compile_recording(model)
    for _ in range(2):
        for m in (model, ref):
            m.zero_grad()
        x.grad = xr.grad = None
        out = compiled(x)
        out.square().mean().backward()
        ref(xr).square().mean().backward()
        torch.testing.assert_close(out, ref(xr), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(x.grad, xr.grad, rtol=1e-4, atol=1e-6)
        for p, q in zip(model.parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-6)
    assert any(s.compiled for r in reports if r.graph == "forward" for s in r.subgraphs)
    copies = sorted(k.split()[0] for k in _copying_view_kernels(reports, "forward"))
    assert copies == ["permute", "permute", "slice", "slice", "slice"], _copying_view_kernels(reports, "forward")
    assert [k for k in _copying_view_kernels(reports, "backward") if k.startswith(("reshape", "slice"))] == []

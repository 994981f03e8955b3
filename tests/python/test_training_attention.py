"""Attention in a training step runs in libair, forward and backward: torch's
CPU flash attention lowers to sdpa_lse when the backward reads its
log-sum-exp, and its backward to sdpa_backward (the blocked kernel for f32).
A tiny attention block (a q/k/v projection, F.scaled_dot_product_attention
causal, with a float mask, with a bool mask, with a scale, an output
projection) and bare attention on leaf q, k, v (grouped-query too) are
trained one step compiled, in eager f32 and in eager f64; the gradients of
the inputs and the parameters are judged as SPEC section 4 says (allclose,
else as close to f64 as eager f32 is); neither attention op falls back,
here nor in the LLaMA-small and ViT-Tiny training steps."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

from _compile import compile_recording, fallbacks, kernel_steps
from torchair.zoo import build


pytestmark = pytest.mark.usefixtures("fresh_dynamo")

SDPA_OPS = ("_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention_for_cpu_backward")


def _masks(kind: str, L: int, S: int) -> dict:
    g = torch.Generator().manual_seed(1)
    if kind == "causal":
        return {"is_causal": True}
    if kind == "float":
        m = torch.randn(L, S, generator=g)
        m[torch.rand(L, S, generator=g) < 0.3] = float("-inf")
        m[:, 0] = 0.0  # every row keeps a key
        return {"attn_mask": m}
    if kind == "bool":
        m = torch.rand(1, 1, L, S, generator=g) > 0.3
        m[..., 0] = True
        return {"attn_mask": m}
    if kind == "scale":
        return {"scale": 0.37}
    return {}


class Block(torch.nn.Module):
    def __init__(self, dim: int, heads: int, kind: str, L: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)
        self.kw = _masks(kind, L, L)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, L, C = x.shape
        q, k, v = self.qkv(x).reshape(B, L, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        kw = {k_: (v_.to(x.dtype) if torch.is_tensor(v_) and v_.is_floating_point() else v_)
              for k_, v_ in self.kw.items()}
        a = F.scaled_dot_product_attention(q, k, v, **kw)
        return self.proj(a.transpose(1, 2).reshape(B, L, C))


def _rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.detach().double(), b.detach().double()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def _close(ours: torch.Tensor, eager: torch.Tensor, exact: torch.Tensor, what: str) -> None:
    """SPEC section 4: allclose at 1e-4, else within 2x eager f32's error
    against f64 (plus a little)."""
    assert ours is not eager and exact is not None and exact.dtype == torch.float64, what
    if torch.allclose(ours, eager, rtol=1e-4, atol=1e-5):
        return
    e_ours, e_eager = _rel_err(ours, exact), _rel_err(eager, exact)
    assert e_ours <= 2 * e_eager + 1e-6, (what, e_ours, e_eager)


def _no_sdpa_fallback(reports) -> None:
    bad = [f for f in fallbacks(reports) if any(s in f[1] for s in SDPA_OPS)]
    assert not bad, bad


def _ops(reports, graph: str) -> list[str]:
    return [op for op, _, _ in kernel_steps(reports, graph)]


@pytest.mark.parametrize("kind", ["none", "causal", "float", "bool", "scale"])
@pytest.mark.parametrize("L", [37, 130])
def test_attention_block_training_step(kind, L):
    torch.manual_seed(0)
    model = Block(64, 2, kind, L)
    ref, exact = copy.deepcopy(model), copy.deepcopy(model).double()
    x = torch.randn(2, L, 64)
    xs = [x.clone().requires_grad_(), x.clone().requires_grad_(), x.double().requires_grad_()]
    compiled, reports = compile_recording(model)
    for _ in range(2):  # the second call runs the compiled graphs again
        for m, xi in zip((model, ref, exact), xs):
            m.zero_grad()
            xi.grad = None
        outs = [compiled(xs[0]), ref(xs[1]), exact(xs[2])]
        for o in outs:
            o.square().mean().backward()
        _close(outs[0], outs[1], outs[2], "output")
        _close(xs[0].grad, xs[1].grad, xs[2].grad, "x.grad")
        for (name, p), q, e in zip(model.named_parameters(), ref.parameters(), exact.parameters()):
            _close(p.grad, q.grad, e.grad, name)
    _no_sdpa_fallback(reports)
    assert "sdpa_lse" in _ops(reports, "forward")
    assert "sdpa_backward" in _ops(reports, "backward")


@pytest.mark.parametrize("kind", ["none", "causal", "float", "bool", "scale"])
@pytest.mark.parametrize("shape", [(2, 3, 45, 32), (1, 2, 200, 80), (1, 1, 67, 64)])
def test_attention_leaf_qkv_gradients(kind, shape):
    # q, k, v are the leaves: their gradients are sdpa_backward's outputs
    B, H, L, D = shape
    torch.manual_seed(1)
    base = [torch.randn(B, H, L, D) for _ in range(3)]
    kw = _masks(kind, L, L)

    def fn(q, k, v):
        kwd = {k_: (v_.to(q.dtype) if torch.is_tensor(v_) and v_.is_floating_point() else v_) for k_, v_ in kw.items()}
        return F.scaled_dot_product_attention(q, k, v, **kwd) * 1.5

    compiled, reports = compile_recording(fn)
    runs = []
    for dtype, f in ((torch.float32, compiled), (torch.float32, fn), (torch.float64, fn)):
        args = [t.detach().clone().to(dtype).requires_grad_() for t in base]
        out = f(*args)
        (out * torch.linspace(-1, 1, D, dtype=dtype)).sum().backward()
        runs.append((out, [a.grad for a in args]))
    _close(runs[0][0], runs[1][0], runs[2][0], "out")
    for i, name in enumerate("qkv"):
        _close(runs[0][1][i], runs[1][1][i], runs[2][1][i], f"grad {name}")
    _no_sdpa_fallback(reports)
    assert "sdpa_backward" in _ops(reports, "backward")


@pytest.mark.parametrize("kind", ["none", "causal", "float"])
def test_grouped_query_attention_gradients(kind):
    # enable_gqa: 6 q heads on 2 k/v heads; k's and v's gradients sum over each group
    torch.manual_seed(3)
    L = 75
    base = [torch.randn(2, 6, L, 32), torch.randn(2, 2, L, 32), torch.randn(2, 2, L, 32)]
    kw = _masks(kind, L, L)

    def fn(q, k, v):
        kwd = {k_: (v_.to(q.dtype) if torch.is_tensor(v_) and v_.is_floating_point() else v_) for k_, v_ in kw.items()}
        return F.scaled_dot_product_attention(q, k, v, enable_gqa=True, **kwd)

    compiled, reports = compile_recording(fn)
    runs = []
    for dtype, f in ((torch.float32, compiled), (torch.float32, fn), (torch.float64, fn)):
        args = [t.detach().clone().to(dtype).requires_grad_() for t in base]
        out = f(*args)
        out.sin().sum().backward()
        runs.append((out, [a.grad for a in args]))
    _close(runs[0][0], runs[1][0], runs[2][0], "out")
    for i, name in enumerate("qkv"):
        _close(runs[0][1][i], runs[1][1][i], runs[2][1][i], f"grad {name}")
    _no_sdpa_fallback(reports)
    assert "sdpa_backward" in _ops(reports, "backward")


def test_dropout_falls_back():
    # dropout_p != 0 is not lowered: the attention runs in eager, the step still trains
    torch.manual_seed(2)
    q, k, v = (torch.randn(1, 2, 9, 16, requires_grad=True) for _ in range(3))
    compiled, reports = compile_recording(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, dropout_p=0.5))
    compiled(q, k, v).sum().backward()
    assert q.grad is not None and torch.isfinite(q.grad).all()
    assert "sdpa_backward" not in _ops(reports, "backward")


@pytest.mark.parametrize("name, batch, kw", [("llama_small", 2, {"seq": 64}), ("vit_tiny", 1, {})])
def test_model_training_step_attention_compiles(name, batch, kw):
    model, args = build(name, batch=batch, **kw)
    model.train()
    compiled, reports = compile_recording(model)
    out = compiled(*args)
    (out if isinstance(out, torch.Tensor) else out[0]).float().square().mean().backward()
    _no_sdpa_fallback(reports)
    assert "sdpa_lse" in _ops(reports, "forward")
    assert "sdpa_backward" in _ops(reports, "backward")

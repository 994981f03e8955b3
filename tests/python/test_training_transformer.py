"""The backward ops of transformer training run in libair (lowering/backward.py):
layer norm, softmax and log_softmax, the activations, embedding, and dropout. Each
is checked in a small module trained one step, compiled against eager (gradients
of the input and of every parameter), and the op must not fall back. Dropout's
masks come from libair's own generator (seeded from torch's, so
torch.manual_seed repeats them; they are not eager's masks): checked for its
keep fraction, scale, reproducibility, p = 0 and p = 1. Then small BERT and
GPT-2 models (transformers configs, random weights, dropout off) trained one
step, their gradients judged against an fp64 eager run as SPEC section 4 does."""

from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F

from _compile import compile_recording, fallbacks, kernel_steps

pytestmark = pytest.mark.usefixtures("fresh_dynamo")

NEW_OPS = (
    "native_layer_norm_backward",
    "_softmax_backward_data",
    "_log_softmax_backward_data",
    "gelu_backward",
    "silu_backward",
    "tanh_backward",
    "sigmoid_backward",
    "hardtanh_backward",
    "threshold_backward",
    "embedding_dense_backward",
    "native_dropout",
)


def _fallen(reports) -> list[str]:
    """The new ops among the fallbacks (views left to eager are not ours)."""
    return [f[1] for f in fallbacks(reports) if any(op in f[1] for op in NEW_OPS)]


def _step(module, inputs, loss_fn=lambda out: out.square().sum()):
    """One training step's output and gradients (inputs that require grad, then parameters)."""
    module.zero_grad()
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.requires_grad:
            x.grad = None
    out = module(*inputs)
    loss_fn(out).backward()
    grads = [x.grad.clone() for x in inputs if isinstance(x, torch.Tensor) and x.requires_grad]
    grads += [p.grad.clone() for p in module.parameters()]
    return out.detach(), grads


def _rmse(a, b):
    return (a.double() - b.double()).square().mean().sqrt().item()


def _judge(name, got, want32, want64):
    """SPEC section 4: the compiled fp32 result's RMSE against fp64 eager at most twice
    eager fp32's (gradients that cancel, such as a bias before a layer norm, carry
    fp32 noise far above 1e-4 relative), with a floor at fp32 rounding for results
    eager happens to get almost exactly."""
    err, eager_err = _rmse(got, want64), _rmse(want32, want64)
    scale = want64.double().square().mean().sqrt().item()
    assert err <= 2 * eager_err + 1e-6 * scale + 1e-12, (name, err, eager_err, scale)


def _compare(module, inputs):
    """Compiled vs eager fp32 and fp64, twice (the second run reuses the compiled
    graphs); returns the reports."""
    ref32 = copy.deepcopy(module)
    ref64 = copy.deepcopy(module).double()
    compiled, reports = compile_recording(module)

    def fresh(dtype=None):
        return [x.detach().to(dtype if dtype and x.is_floating_point() else x.dtype).requires_grad_(x.requires_grad)
                if isinstance(x, torch.Tensor) else x for x in inputs]

    for _ in range(2):
        want, want_g = _step(ref32, fresh())
        want64, want64_g = _step(ref64, fresh(torch.float64))
        got, got_g = _step(compiled, inputs)
        _judge("output", got, want, want64)
        assert len(got_g) == len(want_g) == len(want64_g)
        for i, (g, w, w64) in enumerate(zip(got_g, want_g, want64_g)):
            _judge(f"gradient {i}", g, w, w64)
    assert _fallen(reports) == [], "\n".join(str(r) for r in reports)
    return reports


def _backward_ops(reports) -> list[str]:
    return [op for r in reports if r.graph == "backward" for s in r.subgraphs if s.compiled for op in s.ops]


# ---- layer norm -------------------------------------------------------------------


class Norm(torch.nn.Module):
    def __init__(self, shape, affine):
        super().__init__()
        self.lin = torch.nn.Linear(shape[-1], shape[-1])
        self.ln = torch.nn.LayerNorm(shape, elementwise_affine=affine)

    def forward(self, x):
        return self.ln(self.lin(x)) * 1.5


@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("shape, normalized", [((3, 5, 7), (7,)), ((2, 5, 33), (5, 33)), ((4, 1), (1,))])
def test_layer_norm_backward(affine, shape, normalized):
    torch.manual_seed(0)
    m = Norm(normalized, affine)
    if affine:  # not the initial 1 and 0, so the weight's part in the gradient shows
        with torch.no_grad():
            m.ln.weight.uniform_(0.5, 1.5)
            m.ln.bias.uniform_(-0.5, 0.5)
    x = torch.randn(shape, requires_grad=True)
    reports = _compare(m, [x])
    assert any("native_layer_norm_backward" in op for op in _backward_ops(reports))


# ---- softmax ------------------------------------------------------------------------


class Softmax(torch.nn.Module):
    def __init__(self, dim, log):
        super().__init__()
        self.dim, self.log = dim, log
        self.scale = torch.nn.Parameter(torch.tensor(1.3))

    def forward(self, x):
        y = x * self.scale
        y = F.log_softmax(y, self.dim) if self.log else F.softmax(y, self.dim)
        return y * torch.arange(y.shape[-1], dtype=y.dtype)  # a gradient that differs along the dim


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("dim", [-1, 1, 0])
def test_softmax_backward(log, dim):
    torch.manual_seed(0)
    x = torch.randn(4, 9, 6, requires_grad=True)
    reports = _compare(Softmax(dim, log), [x])
    want = "_log_softmax_backward_data" if log else "_softmax_backward_data"
    assert any(want in op for op in _backward_ops(reports))
    steps = kernel_steps(reports, "backward")
    assert "softmax_backward" in [op for op, _, _ in steps]  # one row kernel, any dim
    if dim == -1 and torch.backends.cpu.get_cpu_capability() != "DEFAULT":
        assert "softmax_backward_rows_avx2" in [k for _, k, _ in steps], steps


# ---- activations ----------------------------------------------------------------------

ACTIVATIONS = {
    "gelu": (lambda x: F.gelu(x), "gelu_backward"),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), "gelu_backward"),
    "silu": (F.silu, "silu_backward"),
    "tanh": (torch.tanh, "tanh_backward"),
    "sigmoid": (torch.sigmoid, "sigmoid_backward"),
    "hardtanh": (F.hardtanh, "hardtanh_backward"),
    "relu6": (F.relu6, "hardtanh_backward"),
    "relu": (torch.relu, "threshold_backward"),
}


class Act(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        return self.fn(self.lin(x) * 3)


@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_activation_backward(name):
    fn, op = ACTIVATIONS[name]
    torch.manual_seed(0)
    m = Act(fn)
    x = torch.randn(5, 7, 8, requires_grad=True)
    with torch.no_grad():  # some pre-activations exactly on hardtanh's and relu's bounds
        m.lin.bias.zero_()
        x[0, 0].zero_()
        m.lin.weight[0] = 0
        m.lin.bias[0] = 1 / 3
        m.lin.bias[1] = -1 / 3
    reports = _compare(m, [x])
    assert any(op in o for o in _backward_ops(reports)), _backward_ops(reports)
    if op in ("gelu_backward", "silu_backward", "tanh_backward", "sigmoid_backward"):  # one pass each
        assert "activation_backward" in [k for k, _, _ in kernel_steps(reports, "backward")]


# ---- embedding ----------------------------------------------------------------------------


class Embed(torch.nn.Module):
    def __init__(self, padding_idx):
        super().__init__()
        self.emb = torch.nn.Embedding(20, 6, padding_idx=padding_idx)
        self.lin = torch.nn.Linear(6, 3)

    def forward(self, idx):
        return self.lin(self.emb(idx))


@pytest.mark.parametrize("padding_idx", [None, 2])
def test_embedding_backward(padding_idx):
    torch.manual_seed(0)
    idx = torch.randint(0, 20, (3, 11))
    idx[0, :4] = 5  # a repeated index
    idx[1, 3] = 2  # the padding row, if any
    idx[2, 0] = 19  # the last row
    m = Embed(padding_idx)
    reports = _compare(m, [idx])
    assert any("embedding_dense_backward" in op for op in _backward_ops(reports))
    if padding_idx is not None:
        compiled_grad = m.emb.weight.grad
        assert torch.all(compiled_grad[padding_idx] == 0)


# ---- dropout ----------------------------------------------------------------------------


class Drop(torch.nn.Module):
    def __init__(self, p):
        super().__init__()
        self.p = p

    def forward(self, x):
        return F.dropout(x * 1.0, self.p, training=True)


def _dropout_step(compiled, n=60001):
    x = torch.ones(n, requires_grad=True)
    out = compiled(x)
    out.sum().backward()
    return out.detach(), x.grad


@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_dropout_statistics_and_gradient(p):
    compiled, reports = compile_recording(Drop(p))
    torch.manual_seed(0)
    out, grad = _dropout_step(compiled)
    n = out.numel()
    scale = 1.0 / (1.0 - p)
    kept = out != 0
    assert torch.all(out[kept] == torch.tensor(scale, dtype=torch.float32))
    sd = math.sqrt(n * p * (1 - p))
    assert abs(kept.sum().item() - (1 - p) * n) < 5 * sd
    # the gradient is the mask times the scale: the output itself for x = 1
    torch.testing.assert_close(grad, out, rtol=0, atol=0)
    assert _fallen(reports) == [], "\n".join(str(r) for r in reports)
    assert any("native_dropout" in op for r in reports if r.graph == "forward" for s in r.subgraphs if s.compiled
               for op in s.ops)
    # the backward is one pass: g * (mask * scale)
    assert [op for op, _, _ in kernel_steps(reports, "backward")] == ["dropout_backward"]


def test_dropout_reproducible_under_manual_seed():
    compiled, _ = compile_recording(Drop(0.5))
    torch.manual_seed(7)
    a, _ = _dropout_step(compiled)
    b, _ = _dropout_step(compiled)  # the generator moved on: another mask
    torch.manual_seed(7)
    c, _ = _dropout_step(compiled)
    assert torch.equal(a, c)
    assert not torch.equal(a, b)
    agree = (a == b).float().mean().item()
    assert abs(agree - 0.5) < 0.02  # independent masks agree half the time


class TwoDrops(torch.nn.Module):
    def forward(self, x):
        return F.dropout(x, 0.5, training=True), F.dropout(x, 0.5, training=True)


def test_two_dropouts_in_one_graph_draw_different_masks():
    compiled, reports = compile_recording(TwoDrops())
    torch.manual_seed(0)
    a, b = compiled(torch.ones(20000))
    agree = (a == b).float().mean().item()
    assert abs(agree - 0.5) < 0.03
    assert _fallen(reports) == []


def test_dropout_with_dynamic_sizes():
    # the seed goes in after the size inputs a symbolic batch may need
    def f(x, w):
        return F.dropout(x @ w, 0.5, training=True).sum(-1)

    compiled, reports = compile_recording(f, dynamic=True)
    w = torch.randn(8, 8, requires_grad=True)
    for n in (5, 9, 13):
        x = torch.ones(n, 8)
        torch.manual_seed(3)
        a = compiled(x, w)
        torch.manual_seed(3)
        b = compiled(x, w)
        assert torch.equal(a, b)
        a.sum().backward()
    assert _fallen(reports) == []


@pytest.mark.parametrize("p", [0.0, 1.0])
def test_dropout_p0_identity_p1_zero(p):
    compiled, reports = compile_recording(Drop(p))
    x = torch.randn(1001, requires_grad=True)
    out = compiled(x)
    out.sum().backward()
    if p == 0.0:
        assert torch.equal(out, x.detach())
        assert torch.equal(x.grad, torch.ones_like(x))
    else:
        assert torch.equal(out, torch.zeros_like(out))
        assert torch.equal(x.grad, torch.zeros_like(x))
    assert _fallen(reports) == []


# ---- small transformers, one training step ------------------------------------------------


def _hf(name):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    if name == "bert":
        cfg = transformers.BertConfig(vocab_size=120, hidden_size=48, num_hidden_layers=2, num_attention_heads=3,
                                      intermediate_size=96, max_position_embeddings=64, hidden_dropout_prob=0.0,
                                      attention_probs_dropout_prob=0.0, attn_implementation="eager")
        return transformers.BertModel(cfg)
    cfg = transformers.GPT2Config(vocab_size=120, n_embd=48, n_layer=2, n_head=3, n_positions=64, resid_pdrop=0.0,
                                  embd_pdrop=0.0, attn_pdrop=0.0, attn_implementation="eager", use_cache=False)
    return transformers.GPT2Model(cfg)


def _hf_grads(model, ids, run=None):
    """Parameter gradients of one step; run: the callable to step (a compiled model)."""
    model.zero_grad()
    out = (model if run is None else run)(input_ids=ids).last_hidden_state
    out.square().mean().backward()
    return {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("name", ["bert", "gpt2"])
def test_small_transformer_trains_one_step_like_eager(name):
    model = _hf(name).train()
    ids = torch.randint(0, 120, (2, 17), generator=torch.Generator().manual_seed(1))
    want32 = _hf_grads(copy.deepcopy(model), ids)
    want64 = _hf_grads(copy.deepcopy(model).double(), ids)
    compiled, reports = compile_recording(model)
    got = _hf_grads(model, ids, compiled)
    # torch.compile gives the unused pooler zero gradients where eager leaves None
    assert want64.keys() <= got.keys()
    for k in got.keys() - want64.keys():
        assert not got[k].any(), k
    for k in want64:
        _judge(k, got[k], want32[k], want64[k])
    assert _fallen(reports) == [], "\n".join(str(r) for r in reports)
    ops = _backward_ops(reports)
    for op in ("native_layer_norm_backward", "_softmax_backward_data", "embedding_dense_backward"):
        assert any(op in o for o in ops), (op, ops)


# ---- fp64 gradcheck of the compiled backward ops ------------------------------------------

GRADCHECK = {
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (5,), w, b), [(3, 4, 5), (5,), (5,)]),
    "softmax": (lambda x: F.softmax(x, 1), [(3, 4, 5)]),
    "log_softmax": (lambda x: F.log_softmax(x, -1), [(3, 4, 5)]),
    "gelu": (F.gelu, [(4, 6)]),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), [(4, 6)]),
    "silu": (F.silu, [(4, 6)]),
    "tanh": (torch.tanh, [(4, 6)]),
    "sigmoid": (torch.sigmoid, [(4, 6)]),
    # no padding_idx: its row's zero gradient is by definition, not the derivative gradcheck measures
    "embedding": (lambda w: F.embedding(torch.tensor([[0, 2, 2], [5, 1, 0]]), w), [(6, 3)]),
}


@pytest.mark.parametrize("name", list(GRADCHECK))
def test_gradcheck_fp64(name):
    fn, shapes = GRADCHECK[name]
    torch.manual_seed(0)
    args = [torch.randn(s, dtype=torch.float64, requires_grad=True) for s in shapes]
    compiled, reports = compile_recording(fn, dynamic=False)
    assert torch.autograd.gradcheck(compiled, args, eps=1e-6, atol=1e-8, rtol=1e-6)
    assert _fallen(reports) == [], "\n".join(str(r) for r in reports)

"""The models of the foundation issue end to end through
torch.compile(backend=torchair): eval mode, no_grad, zero fallbacks, and the
SPEC.md section 4 accuracy rule against eager fp32 and fp64."""

from __future__ import annotations

import copy
import re

import pytest
import torch

from _compile import compile_recording, fallbacks
from bench.accuracy import check_accuracy
from torchair.zoo import build

# a fresh dynamo for each test: the zoo's Hugging Face models share one
# wrapper, and a wrapper seen with another input shape is recompiled with
# symbolic sizes (wav2vec2's audio after BERT's tokens)
pytestmark = pytest.mark.usefixtures("fresh_dynamo")

MODELS = ["resnet50", "mobilenet_v2", "vit_tiny", "unet_small", "bert_base", "gpt2", "llama_small", "wav2vec2_base"]


def _double(inputs):
    return tuple(x.double() if x.is_floating_point() else x for x in inputs)


def _compiles_whole_and_matches_eager(model, *inputs):
    """Compiles model with torchair and runs it on inputs under no_grad; asserts
    no op fell back and SPEC section 4 accuracy against eager fp32 and fp64.
    Returns the compile reports."""
    with torch.no_grad():
        ref32 = model(*inputs)
        ref64 = copy.deepcopy(model).double()(*_double(inputs))
        compiled, reports = compile_recording(model)
        out = compiled(*inputs)
    assert fallbacks(reports) == [], "\n".join(str(r) for r in reports)
    ok, detail = check_accuracy(out, ref32, ref64)
    assert ok, detail
    return reports


@pytest.mark.parametrize("name", MODELS)
def test_model_matches_eager_with_no_fallback(name):
    model, inputs = build(name)
    with torch.no_grad():
        ref32 = model(*inputs)
        ref64 = copy.deepcopy(model).double()(*_double(inputs))
        compiled, reports = compile_recording(model)
        out = compiled(*inputs)
        again = compiled(*inputs)  # the second call reuses the session and its arena
    assert reports, "torchair compiled no graph"
    assert fallbacks(reports) == [], "\n".join(str(r) for r in reports)
    for got in (out, again):
        ok, detail = check_accuracy(got, ref32, ref64)
        assert ok, detail


class _NewGELU(torch.nn.Module):
    """GPT-2's ``gelu_new`` as Hugging Face writes it: six elementwise ops."""

    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(0.7978845608028654 * (x + 0.044715 * torch.pow(x, 3.0))))


def test_written_out_gelu_runs_in_the_linear_epilogue():
    """fuse_activation makes the six ops one gelu_tanh, which fuse_epilogue
    puts into the linear: one step for the MLP's first half. Without the
    pass they stay separate steps; both match eager."""
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(64, 256), _NewGELU(), torch.nn.Linear(256, 64)).eval()
    x = torch.randn(3, 17, 64) * 3
    with torch.no_grad():
        ref32 = mlp(x)
        ref64 = copy.deepcopy(mlp).double()(x.double())
        for options, fused in (({}, True), ({"disabled_passes": ["fuse_activation"]}, False)):
            torch._dynamo.reset()
            compiled, reports = compile_recording(mlp, options)
            out = compiled(x)
            air = "\n".join(s.air_report for r in reports for s in r.subgraphs if s.compiled)
            assert ("linear epilogue: + bias -> gelu_tanh" in air) == fused, air
            assert ("1 tanh GELU(s)" in air) == fused, air
            ok, detail = check_accuracy(out, ref32, ref64)
            assert ok, detail


class _UpCat(torch.nn.Module):
    """A U-Net decoder step: nearest upsample, concatenate the skip, 3x3 conv."""

    def __init__(self, c: int = 16, size=None):
        super().__init__()
        self.conv = torch.nn.Conv2d(2 * c, c, 3, padding=1)
        self.size = size

    def forward(self, x, skip):
        if self.size is None:
            u = torch.nn.functional.interpolate(x, scale_factor=2, mode="nearest")
        else:
            u = torch.nn.functional.interpolate(x, size=self.size, mode="nearest")
        return torch.relu(self.conv(torch.cat([u, skip], 1)))


@pytest.mark.parametrize("size", [None, (29, 45)])
def test_nearest_upsample_matches_eager_with_no_fallback(size):
    """aten's nearest upsample reaches libair as an index with [OH, 1] and
    [OW] index tensors; its rows are 1-D gathers (kernels/ref/index.c)."""
    torch.manual_seed(0)
    model = _UpCat(size=size).eval()
    x = torch.randn(2, 16, 14, 17)
    skip = torch.randn(2, 16, 28, 34) if size is None else torch.randn(2, 16, *size)
    _compiles_whole_and_matches_eager(model, x, skip)


@pytest.mark.parametrize("groups,affine,shape", [(8, True, (2, 64, 9, 11)), (1, False, (3, 6, 5, 7)),
                                                 (6, True, (2, 6, 10)), (4, True, (1, 32, 4, 4, 3))])
def test_group_norm_matches_eager_with_no_fallback(groups, affine, shape):
    """GroupNorm (diffusion U-Nets, detection heads) lowers to a layer norm over
    each group's contiguous elements and a per-channel multiply and add."""
    torch.manual_seed(0)
    torch._dynamo.reset()  # a fresh compile per case (dynamo would recompile the next one dynamic)
    gn = torch.nn.GroupNorm(groups, shape[1], affine=affine).eval()
    if affine:
        with torch.no_grad():
            gn.weight.uniform_(0.5, 1.5)
            gn.bias.uniform_(-0.5, 0.5)
    model = torch.nn.Sequential(gn, torch.nn.SiLU()).eval()
    x = torch.randn(*shape) * 3 + 1
    _compiles_whole_and_matches_eager(model, x)


def test_group_norm_with_dynamic_batch_and_size():
    """With dynamic=True the batch and image sizes are symbols; GroupNorm still compiles."""
    torch.manual_seed(0)
    torch._dynamo.reset()
    model = torch.nn.Sequential(torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.GroupNorm(4, 16)).eval()
    compiled, reports = compile_recording(model, dynamic=True)
    with torch.no_grad():
        for shape in ((2, 8, 10, 12), (3, 8, 7, 9)):
            x = torch.randn(*shape)
            out = compiled(x)
            ok, detail = check_accuracy(out, model(x), copy.deepcopy(model).double()(x.double()))
            assert ok, detail
    assert len(reports) == 1, "a second compile: " + "\n".join(str(r) for r in reports)
    # the graph's own size arithmetic (H * W for HxW, on SymInts) stays beside its user
    assert fallbacks(reports) == [], "\n".join(str(r) for r in reports)


@pytest.mark.parametrize("make,shape", [
    (lambda: torch.nn.InstanceNorm2d(16, affine=True), (1, 16, 9, 11)),
    (lambda: torch.nn.InstanceNorm2d(16, affine=True), (3, 16, 9, 11)),
    (lambda: torch.nn.InstanceNorm2d(6), (2, 6, 5, 7)),
    (lambda: torch.nn.InstanceNorm1d(8, affine=True), (2, 8, 30)),
    # no running statistics: eval mode still normalizes over the batch
    (lambda: torch.nn.BatchNorm2d(12, track_running_stats=False), (4, 12, 6, 5)),
])
def test_instance_norm_matches_eager_with_no_fallback(make, shape):
    """InstanceNorm (style transfer, GAN generators) and batch norm without running
    statistics reach the graph as _native_batch_norm_legit.no_stats; it lowers to a
    layer norm per channel (after moving the channels first when the batch is not 1)."""
    torch.manual_seed(0)
    torch._dynamo.reset()
    norm = make().eval()
    if getattr(norm, "weight", None) is not None:
        with torch.no_grad():
            norm.weight.uniform_(0.5, 1.5)
            norm.bias.uniform_(-0.5, 0.5)
    model = torch.nn.Sequential(norm, torch.nn.ReLU()).eval()
    x = torch.randn(*shape) * 2 + 0.5
    _compiles_whole_and_matches_eager(model, x)


def test_instance_norm_with_dynamic_batch():
    """A symbolic batch is not known to be 1: the channels move first, and the
    answer holds for batches of 1 and 3 from the one compile."""
    torch.manual_seed(0)
    torch._dynamo.reset()
    model = torch.nn.Sequential(torch.nn.Conv2d(4, 8, 3, padding=1), torch.nn.InstanceNorm2d(8, affine=True)).eval()
    compiled, reports = compile_recording(model, dynamic=True)
    with torch.no_grad():
        for shape in ((2, 4, 10, 12), (1, 4, 10, 12), (3, 4, 10, 12)):
            x = torch.randn(*shape)
            ok, detail = check_accuracy(compiled(x), model(x), copy.deepcopy(model).double()(x.double()))
            assert ok, detail
    eager_ops = [f for f in fallbacks(reports) if "batch_norm" in str(f) or "convolution" in str(f)]
    assert eager_ops == [], "\n".join(str(r) for r in reports)


class _ResidualBlock(torch.nn.Module):
    """A ResNet basic block: two 3x3 convs with batch norms, the input added back."""

    def __init__(self, c: int):
        super().__init__()
        self.c1, self.b1 = torch.nn.Conv2d(c, c, 3, padding=1, bias=False), torch.nn.BatchNorm2d(c)
        self.c2, self.b2 = torch.nn.Conv2d(c, c, 3, padding=1, bias=False), torch.nn.BatchNorm2d(c)

    def forward(self, x):
        return torch.relu(x + self.b2(self.c2(torch.relu(self.b1(self.c1(x))))))


def test_symbolic_batch_keeps_winograd():
    """A second batch size makes dynamo recompile with a symbolic batch (its
    automatic dynamic shapes); the 3x3 convs still take Winograd, which needs
    32 tiles of 2x2 pixels: a 16x16 map has 64 in every image, whatever the
    batch. The answers hold for batches of 2, 3 and 5 (a batch of 1 would
    compile again: dynamo specializes sizes 0 and 1)."""
    torch.manual_seed(0)
    torch._dynamo.reset()
    model = _ResidualBlock(32).eval()
    compiled, reports = compile_recording(model)
    with torch.no_grad():
        for n in (2, 3, 5):
            x = torch.randn(n, 32, 16, 16)
            ok, detail = check_accuracy(compiled(x), model(x), copy.deepcopy(model).double()(x.double()))
            assert ok, detail
    assert len(reports) == 2, "\n".join(str(r) for r in reports)
    symbolic = reports[-1].subgraphs[0].air_report
    assert "f32[s" in symbolic, symbolic  # the batch is a symbol
    assert symbolic.count("conv2d_nhwc_winograd_f2x3") == 2, symbolic
    assert fallbacks(reports) == [], "\n".join(str(r) for r in reports)


def test_symbolic_image_size_takes_winograd():
    """With dynamic=True the image size is a symbol too: the 3x3 convs take
    Winograd (their tile count is unknown; see conv_winograd.c), and the
    answers hold at two image sizes from the one compile, odd sizes included."""
    torch.manual_seed(0)
    torch._dynamo.reset()
    model = _ResidualBlock(16).eval()
    compiled, reports = compile_recording(model, dynamic=True)
    with torch.no_grad():
        for shape in ((2, 16, 12, 10), (3, 16, 9, 15)):
            x = torch.randn(*shape)
            ok, detail = check_accuracy(compiled(x), model(x), copy.deepcopy(model).double()(x.double()))
            assert ok, detail
    assert len(reports) == 1, "\n".join(str(r) for r in reports)
    air = reports[0].subgraphs[0].air_report
    assert air.count("conv2d_nhwc_winograd_f2x3") == 2, air
    assert fallbacks(reports) == [], "\n".join(str(r) for r in reports)


class _UpDecoder(torch.nn.Module):
    """A U-Net decoder step: a transposed convolution doubles the map, the skip
    joins it, a convolution mixes them."""

    def __init__(self, up: torch.nn.ConvTranspose2d):
        super().__init__()
        self.up = up
        self.mix = torch.nn.Conv2d(2 * up.out_channels, up.out_channels, 3, padding=1)

    def forward(self, x, skip):
        return torch.relu(self.mix(torch.cat([torch.relu(self.up(x)), skip], 1)))


@pytest.mark.parametrize("up,shape", [
    (lambda: torch.nn.ConvTranspose2d(16, 8, 2, stride=2), (1, 16, 14, 15)),
    (lambda: torch.nn.ConvTranspose2d(16, 8, 4, stride=2, padding=1), (2, 16, 9, 7)),
    (lambda: torch.nn.ConvTranspose2d(12, 6, 3, stride=2, padding=1, output_padding=1, bias=False), (3, 12, 6, 5)),
    (lambda: torch.nn.ConvTranspose2d(6, 5, (3, 2), stride=(1, 2), padding=(2, 0), dilation=(2, 1)), (1, 6, 7, 5)),
])
def test_transposed_conv_matches_eager_with_no_fallback(up, shape):
    """ConvTranspose2d lowers to the GEMM of each input pixel's channels with the
    transposed weight, then col2im adds every tap into the output pixel it lands on."""
    torch.manual_seed(0)
    torch._dynamo.reset()
    model = _UpDecoder(up()).eval()
    x = torch.randn(*shape)
    with torch.no_grad():
        skip = torch.randn_like(model.up(x))
    _compiles_whole_and_matches_eager(model, x, skip)


@pytest.mark.parametrize("cin,cout,groups,bias", [(8, 4, 2, True), (12, 6, 3, False)])
def test_grouped_transposed_conv_matches_eager(cin, cout, groups, bias):
    """Grouped transposed convolution: a GEMM and col2im per group, joined on channels."""
    torch.manual_seed(0)
    torch._dynamo.reset()
    model = torch.nn.ConvTranspose2d(cin, cout, 3, stride=2, padding=1, groups=groups, bias=bias).eval()
    x = torch.randn(2, cin, 5, 6)
    _compiles_whole_and_matches_eager(model, x)


@pytest.mark.parametrize("make,reason", [
    # a depthwise one would be a GEMM per channel
    (lambda: torch.nn.ConvTranspose2d(16, 16, 3, stride=2, groups=16), "16 groups"),
    # torch allows output_padding up to the dilation; col2im's blocks do not tile it
    (lambda: torch.nn.ConvTranspose2d(16, 8, 3, stride=1, dilation=2, output_padding=1), "output_padding >= stride"),
])
def test_transposed_conv_fallbacks_give_eager_answer_and_reason(make, reason):
    torch._dynamo.reset()
    model = make().eval()
    x = torch.randn(1, 16, 5, 5)
    with torch.no_grad():
        compiled, reports = compile_recording(model)
        out = compiled(x)
        torch.testing.assert_close(out, model(x))
    assert any(reason in str(f) for f in fallbacks(reports)), "\n".join(str(r) for r in reports)


@pytest.mark.parametrize("shape,kw", [
    ((2, 4 * 6, 4 * 7), dict(output_size=(7, 9), kernel_size=(3, 2), dilation=(1, 2), padding=(1, 0), stride=(2, 1))),
    ((3 * 4, 25), dict(output_size=(10, 10), kernel_size=2, stride=2)),  # unbatched, blocks that do not overlap
])
def test_fold_matches_eager_with_no_fallback(shape, kw):
    """F.fold (aten.col2im) is the col2im op itself, batched or not."""
    torch._dynamo.reset()
    x = torch.randn(*shape)

    def fold(t):
        return torch.nn.functional.fold(t * 2, **kw)

    compiled, reports = compile_recording(fold)
    with torch.no_grad():
        out = compiled(x)
    assert fallbacks(reports) == [], "\n".join(str(r) for r in reports)
    torch.testing.assert_close(out, fold(x), rtol=1e-6, atol=1e-6)


class _SamePadBlock(torch.nn.Module):
    """TensorFlow-style "same" padding (uneven, by F.pad), a strided conv, ELU
    and SELU, and a crop by negative padding: ops that used to fall back."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(8, 16, 3, stride=2)
        self.pw = torch.nn.Conv2d(16, 16, 1)

    def forward(self, x):
        y = torch.nn.functional.elu(self.conv(torch.nn.functional.pad(x, (0, 1, 0, 1))), alpha=0.7)
        y = torch.nn.functional.selu(self.pw(torch.nn.functional.pad(y, (1, 1, 2, 0), value=0.25)))
        return torch.nn.functional.pad(y, (-1, -2, 0, -1))


def test_same_padding_and_elu_match_eager_with_no_fallback():
    torch.manual_seed(0)
    torch._dynamo.reset()
    model = _SamePadBlock().eval()
    x = torch.randn(2, 8, 15, 16)
    _compiles_whole_and_matches_eager(model, x)


@pytest.mark.parametrize("norm_first,activation", [(False, "relu"), (True, "gelu")])
def test_transformer_encoder_fast_path_matches_eager_with_no_fallback(norm_first, activation):
    """nn.TransformerEncoderLayer in eval takes torch's fused inference path
    (_transformer_encoder_layer_fwd); it lowers to projections, attention and
    norms, post- or pre-norm."""
    torch.manual_seed(0)
    torch._dynamo.reset()
    layer = torch.nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, activation=activation,
                                             batch_first=True, norm_first=norm_first)
    model = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()
    x = torch.randn(3, 17, 64)
    reports = _compiles_whole_and_matches_eager(model, x)
    assert any("_transformer_encoder_layer_fwd" in str(r) for r in reports), "the fast path was not taken"


def test_transformer_encoder_fast_path_with_a_mask_falls_back():
    """A padding mask is not lowered: that layer runs in eager, with eager's answer."""
    torch.manual_seed(0)
    torch._dynamo.reset()
    model = torch.nn.TransformerEncoderLayer(32, 2, 64, dropout=0.0, batch_first=True).eval()
    x = torch.randn(2, 9, 32)
    pad = torch.zeros(2, 9, dtype=torch.bool)
    pad[1, 6:] = True
    with torch.no_grad():
        compiled, reports = compile_recording(model)
        out = compiled(x, src_key_padding_mask=pad)
        torch.testing.assert_close(out, model(x, src_key_padding_mask=pad), rtol=1e-5, atol=1e-5)
    assert any("with a mask" in str(f) for f in fallbacks(reports)), "\n".join(str(r) for r in reports)


@pytest.mark.parametrize("size,shape,compiled_whole", [
    (1, (2, 8, 7, 9), True),           # global max pool
    ((2, 3), (1, 8, 8, 9), True),      # windows of 4x3
    (3, (1, 4, 7, 7), False),          # uneven windows: falls back
])
def test_adaptive_max_pool(size, shape, compiled_whole):
    """AdaptiveMaxPool2d where its windows are a plain pooling's: amax or
    max_pool2d; other sizes run in eager with eager's answer and the reason."""
    torch._dynamo.reset()
    model = torch.nn.Sequential(torch.nn.Conv2d(shape[1], 6, 1), torch.nn.AdaptiveMaxPool2d(size)).eval()
    x = torch.randn(*shape)
    with torch.no_grad():
        compiled, reports = compile_recording(model)
        out = compiled(x)
        torch.testing.assert_close(out, model(x), rtol=1e-5, atol=1e-5)
    fb = fallbacks(reports)
    if compiled_whole:
        assert fb == [], "\n".join(str(r) for r in reports)
    else:
        assert any("uneven windows" in str(f) for f in fb), "\n".join(str(r) for r in reports)


class _Conv1dStack(torch.nn.Module):
    """An audio front end: strided, depthwise and pointwise 1-d convolutions."""

    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv1d(12, 32, 5, stride=2, padding=2)
        self.c2 = torch.nn.Conv1d(32, 32, 3, padding=2, dilation=2, groups=32)
        self.c3 = torch.nn.Conv1d(32, 24, 1, bias=False)

    def forward(self, x):
        return self.c3(torch.nn.functional.gelu(self.c2(torch.relu(self.c1(x)))))


def test_conv1d_matches_eager_with_no_fallback():
    """A 1-d convolution lowers to a 2-d one over [N, C, 1, L]."""
    torch.manual_seed(0)
    torch._dynamo.reset()
    model = _Conv1dStack().eval()
    x = torch.randn(2, 12, 101)
    _compiles_whole_and_matches_eager(model, x)


class _WeightNormConv(torch.nn.Module):
    """wav2vec2's positional convolution: a grouped Conv1d under weight norm
    (computed from its parameters on every call), then an F.normalize."""

    def __init__(self):
        super().__init__()
        conv = torch.nn.Conv1d(32, 32, 9, padding=4, groups=4)
        self.conv = torch.nn.utils.parametrizations.weight_norm(conv, name="weight", dim=2)

    def forward(self, x):
        return torch.nn.functional.normalize(torch.nn.functional.gelu(self.conv(x)), dim=1)


def test_weight_norm_and_normalize_compile_and_fold():
    """linalg_vector_norm lowers (ord 2), so the weight norm, all parameters,
    folds at compile time: no norm is left to run per call."""
    torch.manual_seed(0)
    torch._dynamo.reset()
    reports = _compiles_whole_and_matches_eager(_WeightNormConv().eval(), torch.randn(2, 32, 50))
    ops_after = [line for s in reports[0].subgraphs for line in s.air_report.splitlines()
                 if line.startswith("ops after passes")]
    assert ops_after, reports[0]
    # F.normalize's norm over the activations stays: one sqrt, not two
    sqrts = [re.search(r"\bsqrt(?: x(\d+))?[,\s]", line + " ") for line in ops_after]
    assert sum(int(m.group(1) or 1) for m in sqrts if m) == 1, ops_after


class _AudioEncoder(torch.nn.Module):
    """wav2vec2's feature encoder in small: a stride-5 conv1d with group norm
    (whose HxW argument is sym_size of the conv's output), stride-2 convs,
    then a padded conv whose last frame is sliced off ([..., :-1])."""

    def __init__(self):
        super().__init__()
        self.c0 = torch.nn.Conv1d(1, 32, 10, stride=5, bias=False)
        self.norm = torch.nn.GroupNorm(32, 32)
        self.c1 = torch.nn.Conv1d(32, 32, 3, stride=2, bias=False)
        self.c2 = torch.nn.Conv1d(32, 32, 2, stride=2, bias=False)
        self.pos = torch.nn.Conv1d(32, 32, 8, padding=4, groups=4)

    def forward(self, x):
        h = torch.nn.functional.gelu(self.norm(self.c0(x[:, None])))
        h = torch.nn.functional.gelu(self.c2(torch.nn.functional.gelu(self.c1(h))))
        return h + torch.nn.functional.gelu(self.pos(h)[..., :-1])


def test_dynamic_length_conv1d_stack_compiles_whole():
    """With a symbolic audio length every conv's output length is an
    expression of it (s//5 - 1, s//10 - 1, ...), the size arithmetic between
    them runs on SymInts, and the last slice has a negative end: one
    subgraph, no fallback, eager's answer at every length."""
    torch.manual_seed(0)
    model = _AudioEncoder().eval()
    compiled, reports = compile_recording(model, dynamic=True)
    with torch.no_grad():
        for length in (400, 653, 1000):
            x = torch.randn(2, length)
            ok, detail = check_accuracy(compiled(x), model(x), copy.deepcopy(model).double()(x.double()))
            assert ok, (length, detail)
    assert len(reports) == 1, "a second compile: " + "\n".join(str(r) for r in reports)
    assert fallbacks(reports) == [], "\n".join(str(r) for r in reports)
    assert len(reports[0].subgraphs) == 1, str(reports[0])


@pytest.mark.parametrize("bounds", [(0, -1), (2, -3), (-5, None), (1, -100), (-3, -1)])
def test_slice_with_int_bounds_on_a_symbolic_size(bounds):
    """Python's clamping of int slice bounds, on a size known only per call
    (including bounds past the size, which give an empty slice)."""
    start, end = bounds
    # literal bounds in the code (closed-over ints would be symbolic too under dynamic=True)
    fn = eval(f"lambda x: (x * 2)[:, {start}:{end}] + 1")  # noqa: S307 - our own literal source
    compiled, reports = compile_recording(fn, dynamic=True)
    for length in (7, 12, 40):
        x = torch.randn(3, length)
        torch.testing.assert_close(compiled(x), fn(x))
    assert fallbacks(reports) == [], "\n".join(str(r) for r in reports)


@pytest.mark.parametrize("index", [0, 2, -1, -2])
def test_select_with_an_int_index_on_a_symbolic_size(index):
    """x[:, i] on a size known only per call (RoBERTa's [:, 0] at a second
    length), from either end."""
    fn = eval(f"lambda x: (x * 2)[:, {index}] + 1")  # noqa: S307 - our own literal source
    compiled, reports = compile_recording(fn, dynamic=True)
    for length in (5, 12, 40):
        x = torch.randn(3, length, 4)
        torch.testing.assert_close(compiled(x), fn(x))
    assert fallbacks(reports) == [], "\n".join(str(r) for r in reports)


def test_select_past_a_symbolic_size_is_eagers_error():
    # the graph holds for sizes past the index (dynamo guards it); a size
    # that the index passes gets eager's IndexError, not an empty result
    fn = lambda x: (x * 2)[:, 3] + 1  # noqa: E731
    compiled, _ = compile_recording(fn, dynamic=True)
    compiled(torch.randn(2, 8))
    torch.testing.assert_close(compiled(torch.randn(2, 6).fill_(1.0)), torch.full((2,), 3.0))
    with pytest.raises(IndexError, match="out of bounds"):
        compiled(torch.randn(2, 3))


def _shift_right(ids):
    # BART's shift_tokens_right, functionalized: slice_scatter, select_scatter
    z = ids.new_zeros(ids.shape)
    z = torch.ops.aten.slice_scatter(z, ids[:, :-1], 1, 1)
    return torch.ops.aten.select_scatter(z, torch.full((ids.shape[0],), 7, dtype=ids.dtype), 1, 0)


_aten = torch.ops.aten
_SCATTERS = {
    "shift_right": (_shift_right, True),
    "slice_middle": (lambda x: _aten.slice_scatter(x * 2, torch.ones(3, 2), 1, 2, 4) + 1, False),
    "slice_negative": (lambda x: _aten.slice_scatter(x * 2, torch.ones(3, 2), 1, -3, -1) + 1, False),
    "slice_empty": (lambda x: _aten.slice_scatter(x * 2, torch.ones(3, 0), 1, 2, 2) + 1, False),
    "select_last": (lambda x: _aten.select_scatter(x * 2, torch.arange(3.0), 1, -1) + 1, False),
    "copy_cast_broadcast": (lambda x: _aten.copy(x, torch.arange(6, dtype=torch.int32)) * 2, False),
}


@pytest.mark.parametrize("name", list(_SCATTERS))
def test_scatters_and_copy_compile(name):
    """slice_scatter, select_scatter and copy (what x[:, a:b] = y, x[:, i] = y
    and x.copy_(y) functionalize to) match eager bit for bit, at a fixed
    size without falling back."""
    fn, ints = _SCATTERS[name]
    compiled, reports = compile_recording(fn)
    x = torch.randint(0, 100, (3, 6)) if ints else torch.randn(3, 6)
    assert torch.equal(compiled(x), fn(x))
    assert fallbacks(reports) == [], "\n".join(str(r) for r in reports)


def test_shift_right_at_symbolic_lengths():
    compiled, reports = compile_recording(_shift_right, dynamic=True)
    for length in (5, 9, 30):
        ids = torch.randint(0, 100, (2, length))
        assert torch.equal(compiled(ids), _shift_right(ids))
    assert fallbacks(reports) == [], "\n".join(str(r) for r in reports)


@pytest.mark.parametrize("rounding", ["ceil", "floor"])
def test_rounded_size_ratios_are_sizes(rounding):
    """math.ceil(h / 2) and math.floor(h / 3) on a symbolic size (MobileViT's
    interpolate at a second image size) are size arithmetic: a slice to that
    length compiles, no op falls back."""
    import math

    rnd = getattr(math, rounding)
    fn = lambda x: (x * 2)[:, : rnd(x.shape[1] / (2 if rounding == "ceil" else 3))] + 1  # noqa: E731
    compiled, reports = compile_recording(fn, dynamic=True)
    for length in (5, 8, 13, 30):
        x = torch.randn(2, length)
        torch.testing.assert_close(compiled(x), fn(x))
    assert fallbacks(reports) == [], "\n".join(str(r) for r in reports)


def test_convnext_at_a_second_image_size_compiles_whole():
    """Hugging Face ConvNeXt at a second image size: dynamo recompiles with
    symbolic H and W. Its views name sizes such as s//16 that no tensor
    input of their subgraph has as a dim (the input is [s//16 * t//16, C]);
    they enter as size inputs: no fallback, eager's answer at two new
    sizes."""
    import transformers

    torch.manual_seed(0)
    cfg = transformers.ConvNextConfig(depths=[1, 1, 2, 1], hidden_sizes=[48, 96, 192, 384])
    model = transformers.ConvNextModel(cfg).eval()
    compiled, reports = compile_recording(model)
    with torch.no_grad():
        for shape in ((1, 3, 224, 224), (1, 3, 192, 192), (1, 3, 160, 224)):
            x = torch.randn(*shape)
            got = compiled(x).last_hidden_state
            ok, detail = check_accuracy(got, model(x).last_hidden_state,
                                        copy.deepcopy(model).double()(x.double()).last_hidden_state)
            assert ok, (shape, detail)
    assert len(reports) >= 2, "no recompile with symbolic sizes"
    assert fallbacks(reports) == [], "\n".join(str(r) for r in reports)


def test_slice_to_another_inputs_symbolic_length():
    """BERT-style position_ids[:, :seq]: the end is a SymInt (a size, never
    negative), clamped to the sliced dim per call, including past it."""
    table = torch.randn(1, 50)
    compiled, reports = compile_recording(lambda ids: table[:, : ids.shape[1]] * 2, dynamic=True)
    for seq in (7, 31, 64):
        ids = torch.zeros(2, seq, dtype=torch.int64)
        torch.testing.assert_close(compiled(ids), table[:, :seq] * 2)
    assert fallbacks(reports) == [], "\n".join(str(r) for r in reports)

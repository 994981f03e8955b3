"""Channels-last convs with fewer than 512 output pixels read the module's
own weight in place (kernels/conv/conv_rows.c, ``conv2d_nhwc_weight_rows``)
instead of holding a packed copy beside it: ResNet-50 at batch 1, whose
layer3 and layer4 held 104 MiB of packed weights, holds under 40 MiB, and
still matches eager (SPEC section 4, against fp32 and fp64)."""

from __future__ import annotations

import copy

import pytest
import torch

import torchair
from bench.accuracy import check_accuracy
from torchair.zoo import build

pytestmark = pytest.mark.usefixtures("fresh_dynamo")

ROWS = "conv2d_nhwc_weight_rows"
IN_PLACE = {"weights_in_place": True}  # the kernel is opt-in: slower than the packed copy


def _subgraphs(report):
    subs = [s for g in report.graphs for s in g.subgraphs if s.compiled]
    assert subs, "nothing was compiled:\n" + str(report)
    return subs


def _double(inputs):
    return tuple(x.double() if x.is_floating_point() else x for x in inputs)


def test_resnet50_b1_holds_no_packed_conv_weights():
    model, inputs = build("resnet50", batch=1)
    with torch.no_grad():
        report = torchair.explain(model, *inputs, options=IN_PLACE)
        torch._dynamo.reset()
        out = torch.compile(model, backend="torchair", options=IN_PLACE)(*inputs)
        ref32 = model(*inputs)
        ref64 = copy.deepcopy(model).double()(*_double(inputs))
    subs = _subgraphs(report)
    text = "\n".join(s.air_report for s in subs)
    # 23 of the 28 convs of layer3 and layer4 with 14x14 and 7x7 outputs:
    # layer3's 3x3 stride-1 convs stay with Winograd (49 tiles), and its
    # first 1x1, at 28x28, re-packs its weight per call
    assert text.count(ROWS) == 23, text
    held = sum(s.model.memory()["weight_bytes"] for s in subs)
    # main held 104 MiB (a packed copy of each of those convs); now 32 MiB:
    # Winograd's 5 x 4 MiB, the classifier's 8 MiB, layer1's and layer2's
    assert held < 40 * 2**20, (held, text)
    ok, detail = check_accuracy(out, ref32, ref64)
    assert ok, detail


class _Bottleneck(torch.nn.Module):
    """A ResNet bottleneck at 7x7: 1x1, 3x3, 1x1 (each + batch norm), the
    residual and relu in the last conv's epilogue."""

    def __init__(self, c: int, mid: int) -> None:
        super().__init__()
        self.c1, self.b1 = torch.nn.Conv2d(c, mid, 1, bias=False), torch.nn.BatchNorm2d(mid)
        self.c2, self.b2 = torch.nn.Conv2d(mid, mid, 3, padding=1, bias=False), torch.nn.BatchNorm2d(mid)
        self.c3, self.b3 = torch.nn.Conv2d(mid, c, 1, bias=False), torch.nn.BatchNorm2d(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.b1(self.c1(x)))
        y = torch.relu(self.b2(self.c2(y)))
        return torch.relu(self.b3(self.c3(y)) + x)


def test_bottleneck_reads_the_modules_weights_as_they_change():
    """Odd channel counts, every conv through the in-place kernel; weights
    and batch-norm statistics changed in place after compiling are seen, as
    with the re-packing kernels (test_memory.py)."""
    torch.manual_seed(0)
    model = _Bottleneck(520, 260).eval()
    for bn in (model.b1, model.b2, model.b3):
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 2)
    x = torch.randn(1, 520, 7, 9)
    with torch.no_grad():
        report = torchair.explain(model, x, options=IN_PLACE)
        (sub,) = _subgraphs(report)
        assert sub.air_report.count(ROWS) >= 3, sub.air_report
        torch._dynamo.reset()
        compiled = torch.compile(model, backend="torchair", options=IN_PLACE)
        for change in range(2):
            ref64 = copy.deepcopy(model).double()(x.double())
            ok, detail = check_accuracy(compiled(x), model(x), ref64)
            assert ok, (change, detail)
            model.c2.weight.mul_(-0.5)
            model.b3.running_var.mul_(3.0)

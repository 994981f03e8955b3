"""Vision models over varying batch and image sizes (#33 item 5): one compile, every op in
libair, results as eager's. The detection model's shape arithmetic (ceil-divided feature
maps, interpolate's scale computed from sizes, reshapes by H*W) is what used to split it."""

from __future__ import annotations

import torch

from tests.python._compile import compile_recording, fallbacks
from torchair.zoo.vision import TinyDetector

SHAPES = ((1, 3, 320, 320), (2, 3, 384, 512), (1, 3, 256, 448), (3, 3, 224, 288), (1, 3, 200, 328))


def _run(compiled, model):
    for shape in SHAPES:
        x = torch.randn(shape, generator=torch.Generator().manual_seed(shape[2]))
        with torch.no_grad():
            got, want = compiled(x), model(x)
        for g, w in zip(got, want):
            assert g.shape == w.shape, shape
            torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)


def test_detector_with_declared_axes_compiles_once_for_every_size():
    torch.manual_seed(0)
    model = TinyDetector().eval()
    compiled, reports = compile_recording(model, {"dynamic_axes": {"x": {0: "batch", 2: "h", 3: "w"}}})
    _run(compiled, model)
    assert len(reports) == 1
    assert fallbacks(reports) == []


def test_detector_with_dynamic_true_runs_every_op_compiled():
    """dynamic=True: dynamo's own guards (batch 1 specialized, H == W duck-sized at 320x320,
    a threshold in the convolution's meta function) recompile a few times; every graph is
    whole."""
    torch.manual_seed(0)
    model = TinyDetector().eval()
    compiled, reports = compile_recording(model, dynamic=True)
    _run(compiled, model)
    assert 1 <= len(reports) <= 4
    assert fallbacks(reports) == []

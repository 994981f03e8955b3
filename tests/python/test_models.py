"""The models of the foundation issue end to end through
torch.compile(backend=torchair): eval mode, no_grad, zero fallbacks, and the
SPEC.md section 4 accuracy rule against eager fp32 and fp64."""

from __future__ import annotations

import copy

import pytest
import torch

from _compile import compile_recording, fallbacks
from bench.accuracy import check_accuracy
from torchair.zoo import build

MODELS = ["resnet50", "mobilenet_v2", "vit_tiny", "bert_base", "gpt2", "llama_small"]


def _double(inputs):
    return tuple(x.double() if x.is_floating_point() else x for x in inputs)


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

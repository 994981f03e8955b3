"""Every op torchair claims, checked against eager with PyTorch's own OpInfo
samples through torch.compile(backend=torchair). A sample that torchair does
not compile (it falls back to eager) is recorded with the reason; a sample
that compiles must match eager; every claimed op must compile at least one
sample, or the claim is false."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from torch.testing._internal.common_methods_invocations import op_db

from _compile import compile_recording, fallbacks

# OpInfo name -> dtypes to sample. These are the ops torchair claims.
CLAIMED: dict[str, tuple[torch.dtype, ...]] = {
    **{n: (torch.float32,) for n in [
        "exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "erf",
        "nn.functional.gelu", "nn.functional.silu", "nn.functional.hardswish", "nn.functional.hardsigmoid",
        "reciprocal", "floor", "ceil", "round", "trunc", "nn.functional.leaky_relu", "div", "pow",
        "softmax", "log_softmax", "nn.functional.layer_norm", "mean", "mm", "bmm", "addmm",
        "nn.functional.conv2d", "nn.functional.max_pool2d", "nn.functional.avg_pool2d",
        "nn.functional.adaptive_avg_pool2d", "nn.functional.scaled_dot_product_attention",
        "nn.functional.embedding", "isnan", "nn.functional.conv_transpose2d", "nn.functional.pad",
        "nn.functional.elu", "nn.functional.selu", "nn.functional.celu", "linalg.vector_norm",
        "nn.functional.normalize",
    ]},
    **{n: (torch.float32, torch.int64) for n in [
        "neg", "abs", "sign", "nn.functional.relu", "clamp", "add", "sub", "mul", "maximum", "minimum",
        "floor_divide", "remainder", "fmod", "eq", "ne", "lt", "le", "gt", "ge", "where", "permute", "expand", "repeat",
        "constant_pad_nd",
        "cat", "sum", "amax", "amin", "prod", "argmax", "cumsum", "gather", "index_select",
        "logical_not", "logical_and", "logical_or", "logical_xor", "slice_scatter", "select_scatter",
    ]},
    **{n: (torch.int64, torch.bool) for n in ["bitwise_not", "bitwise_and", "bitwise_or", "bitwise_xor"]},
}
MAX_SAMPLES = int(os.environ.get("TORCHAIR_OPINFO_SAMPLES", "6"))
_BY_NAME = {}
for _op in op_db:  # the plain variant, else the first one (div has only named variants)
    if _op.name in CLAIMED and (_op.name not in _BY_NAME or _op.variant_test_name == ""):
        if _op.name not in _BY_NAME or _BY_NAME[_op.name].variant_test_name != "":
            _BY_NAME[_op.name] = _op

COVERAGE: dict[str, dict[str, object]] = {}


def _tensors_equal(a, b):
    if isinstance(a, torch.Tensor):
        if a.dtype.is_floating_point:
            tol = dict(rtol=1e-4, atol=1e-5)
            torch.testing.assert_close(a, b, equal_nan=True, **tol)
        else:
            assert torch.equal(a, b), f"{a} != {b}"
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _tensors_equal(x, y)
    else:
        assert a == b


@pytest.mark.parametrize("name", sorted(CLAIMED))
def test_op_against_eager(name):
    op = _BY_NAME.get(name)
    assert op is not None, f"no OpInfo named {name}"
    compiled_ok, unsupported = 0, []
    for dtype in CLAIMED[name]:
        if dtype not in op.supported_dtypes("cpu"):
            continue
        samples = list(op.sample_inputs("cpu", dtype, requires_grad=False))[:MAX_SAMPLES]
        for i, s in enumerate(samples):
            if s.kwargs.get("dropout_p", 0.0) or s.kwargs.get("training", False) and "dropout" in name:
                unsupported.append(f"{dtype} sample {i}: random (dropout), not comparable with eager")
                continue
            torch._dynamo.reset()

            # the op itself, not OpInfo.__call__ (SDPA's wrapper breaks dynamo's graph)
            target = torch.nn.functional.scaled_dot_product_attention if "scaled_dot" in name else op.op

            def fn(x):
                return target(x, *s.args, **s.kwargs)

            try:
                expected = fn(s.input)
            except Exception:
                continue  # eager itself rejects this sample
            compiled, reports = compile_recording(fn)
            with torch.no_grad():
                got = compiled(s.input)
            fb = fallbacks(reports)
            if fb or not any(r.subgraphs for r in reports):
                unsupported.append(f"{dtype} sample {i}: " + "; ".join(f"{o}: {r}" for _, o, r in fb))
            else:
                compiled_ok += 1
            _tensors_equal(got, expected)
    COVERAGE[name] = {"compiled": compiled_ok, "unsupported": unsupported}
    assert compiled_ok > 0, f"{name}: no sample ran compiled: {unsupported}"


def teardown_module(module):
    out = os.environ.get("TORCHAIR_OPINFO_REPORT")
    if out:
        Path(out).write_text(json.dumps(COVERAGE, indent=1, sort_keys=True))

"""The f32 GEMM on AMX tiles (docs/design.md, "f32 GEMMs on AMX"), through
torch.compile: products it takes meet SPEC.md section 4 against f64 (at most
2x eager's RMSE), and values it must not take (tiny, huge, Inf, NaN) give
eager's answer from the f32 kernels. On a CPU without AMX, or under
AIR_ISA=avx512, the same answers come with no AMX pass run."""

import math

import pytest
import torch

import torchair
from torchair import _C

AMX = _C.isa() == "amx"


def _rmse(a: torch.Tensor, ref: torch.Tensor) -> float:
    return math.sqrt(float(((a.double() - ref) ** 2).mean()))


def _compiled_passes(model: torch.nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, int]:
    torch._dynamo.reset()
    c = torch.compile(model, backend="torchair")
    with torch.no_grad():
        c(x)  # compile
        before = _C.amx_passes()
        y = c(x)
    return y, _C.amx_passes() - before


class MatMul(torch.nn.Module):
    def __init__(self, k: int, n: int) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(3)
        self.w = torch.nn.Parameter(torch.randn(k, n, generator=g) / math.sqrt(k), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.w


class LinearGelu(torch.nn.Module):
    def __init__(self, k: int, n: int) -> None:
        super().__init__()
        torch.manual_seed(4)
        self.fc = torch.nn.Linear(k, n)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(self.fc(x))


@pytest.mark.parametrize(
    "model,x_shape",
    [(lambda: MatMul(512, 512), (512, 512)), (lambda: MatMul(768, 3072), (512, 768)),
     (lambda: LinearGelu(768, 3072), (4, 150, 768))],
    ids=["square-512", "ffn1-512-tokens", "linear-gelu-600-tokens"],
)
def test_accuracy_against_f64(model, x_shape):
    m = model().eval()
    x = torch.randn(*x_shape, generator=torch.Generator().manual_seed(5))
    y, passes = _compiled_passes(m, x)
    with torch.no_grad():
        want = m(x)
        ref = m.double()(x.double())
    assert (passes > 0) == AMX
    eager_rmse, ours = _rmse(want, ref), _rmse(y, ref)
    assert ours <= 2 * eager_rmse, (ours, eager_rmse)
    torch.testing.assert_close(y, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("bad", [1e-30, 3e38, math.inf, math.nan], ids=["tiny", "huge", "inf", "nan"])
def test_values_out_of_range_get_eagers_answer(bad):
    m = MatMul(512, 512).eval()
    x = torch.randn(512, 512, generator=torch.Generator().manual_seed(6))
    x[200, 17] = bad
    y, passes = _compiled_passes(m, x)
    with torch.no_grad():
        want = m(x)
    assert passes == 0  # A out of range: all of it to the f32 kernels
    torch.testing.assert_close(y, want, rtol=1e-4, atol=1e-4, equal_nan=True)


def _compiled_model(model: torch.nn.Module, x: torch.Tensor, dynamic_rows: bool) -> tuple[torch.Tensor, int, int]:
    """The compiled call's answer, its AMX passes and the weight bytes of
    the one libair model it runs."""
    from torchair.backend import _backend
    from torchair.config import CompilerConfig

    torch._dynamo.reset()
    reports: list = []
    c = torch.compile(model, backend=lambda gm, ex: _backend(gm, ex, CompilerConfig(), reports))
    if dynamic_rows:
        torch._dynamo.mark_dynamic(x, 0)
    with torch.no_grad():
        c(x)
        before = _C.amx_passes()
        y = c(x)
    models = [s.model for r in reports for s in r.subgraphs if s.compiled]
    assert len(models) == 1
    return y, _C.amx_passes() - before, models[0].memory()["weight_bytes"]


@pytest.mark.parametrize("dynamic_rows", [False, True], ids=["rows-known", "rows-symbolic"])
def test_weight_is_split_once_when_every_call_takes_the_path(dynamic_rows):
    """With M known at compile time and large enough, the packed weight
    also holds its AMX split (6 bytes a value beside the packed 4), made
    once instead of on every call; with M symbolic it does not."""
    k, n = 512, 384
    m = MatMul(k, n).eval()
    x = torch.randn(640, k, generator=torch.Generator().manual_seed(7))
    y, passes, weight_bytes = _compiled_model(m, x, dynamic_rows)
    with torch.no_grad():
        want = m(x)
    torch.testing.assert_close(y, want, rtol=1e-4, atol=1e-4)
    assert (passes > 0) == AMX
    split = AMX and not dynamic_rows
    assert weight_bytes >= (10 if split else 4) * k * n
    assert weight_bytes < (11 if split else 5) * k * n

"""Which threads run torchair's parallel loops (torchair.threads): torch's
OpenMP team by default where torch runs on GNU OpenMP, or torchair's own
pool; results are the same either way, interleaved with eager ops too."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

import torchair
from torchair import _C


@pytest.fixture(autouse=True)
def fresh_dynamo_and_backend():
    torch._dynamo.reset()
    before = torchair.get_thread_backend()
    yield
    torchair.set_thread_backend(before)
    torch._dynamo.reset()


def _torch_uses_gnu_openmp() -> bool:
    return "OpenMP" in torch.__config__.parallel_info() and any(
        "libgomp" in line for line in open("/proc/self/maps")
    )


class Mlp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.a = torch.nn.Linear(256, 512)
        self.b = torch.nn.Linear(512, 256)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.relu(self.a(x)))


def _run(backend: str) -> tuple[int, list[torch.Tensor], list[torch.Tensor]]:
    """Loops run through OpenMP, and (compiled, eager) outputs of calls that
    alternate with eager matmuls (which leave torch's team spinning)."""
    torchair.set_thread_backend(backend)
    model = Mlp().eval()
    compiled = torch.compile(model, backend="torchair")
    got, want = [], []
    with torch.no_grad():
        before = _C.openmp_loops()
        for i in range(5):
            x = torch.randn(64, 256, generator=torch.Generator().manual_seed(i))
            torch.mm(torch.randn(256, 256), torch.randn(256, 256))  # an eager op in between
            got.append(compiled(x))
            want.append(model(x))
        return _C.openmp_loops() - before, got, want


def test_default_is_torch_openmp_where_torch_has_it():
    expected = "torch" if _torch_uses_gnu_openmp() else "own"
    assert torchair.get_thread_backend() == expected


@pytest.mark.skipif(not _torch_uses_gnu_openmp(), reason="this torch does not run on GNU OpenMP")
def test_torch_backend_runs_loops_on_openmp():
    loops, got, want = _run("torch")
    assert loops > 0  # the GEMMs' loops went through torch's team
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)


def test_own_backend_bypasses_openmp():
    loops, got, want = _run("own")
    assert loops == 0
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)


@pytest.mark.skipif(not _torch_uses_gnu_openmp(), reason="this torch does not run on GNU OpenMP")
def test_torch_backend_with_fewer_torch_threads_than_ours():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        loops, got, want = _run("torch")
    finally:
        torch.set_num_threads(old)
    assert loops > 0
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", ["openmp", "", None, "TORCH"])
def test_unknown_backend_is_refused(name):
    with pytest.raises(torchair.OptionError, match="thread backend"):
        torchair.set_thread_backend(name)


def test_env_var_chooses_own_pool():
    env = dict(os.environ, TORCHAIR_THREADS="own")
    out = subprocess.run(
        [sys.executable, "-c", "import torchair; print(torchair.get_thread_backend())"],
        env=env, capture_output=True, text=True, check=True,
    )
    assert out.stdout.strip() == "own"


@pytest.mark.parametrize("backend", ["own", "torch"])
def test_flush_denormal_reaches_every_thread(backend):
    # torch.set_flush_denormal sets the calling thread's mode only (eager's
    # OpenMP workers keep theirs); torchair's loops take the caller's mode
    # on every thread of either backend, and torch's threads get their own
    # back after
    if backend == "torch" and not _torch_uses_gnu_openmp():
        pytest.skip("this torch does not run on GNU OpenMP")
    torchair.set_thread_backend(backend)
    x = torch.full((1 << 20,), 1e-20)
    compiled = torch.compile(lambda a, b: a * b + 0.0, backend="torchair")
    kept = compiled(x, x)  # 1e-40: subnormal
    assert torch.set_flush_denormal(True)
    try:
        flushed = compiled(x, x)
    finally:
        torch.set_flush_denormal(False)
    again = compiled(x, x)
    # bit patterns: a subnormal compares equal to 0 on a thread that flushes
    assert bool((flushed.view(torch.int32) == 0).all())
    assert bool((kept.view(torch.int32) != 0).all()) and bool((again.view(torch.int32) != 0).all())
    assert bool((torch.mul(x, x).view(torch.int32) != 0).all())

"""One compiled model called from several Python threads at once: every
result equals eager (and equals the same call made alone, so no run sees
another's buffers)."""

from __future__ import annotations

import threading

import pytest
import torch

import torchair.compiler
from _compile import compile_recording

THREADS = 4
CALLS = 50


pytestmark = pytest.mark.usefixtures("fresh_dynamo")


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.a = torch.nn.Linear(32, 64)
        self.b = torch.nn.Linear(64, 64)
        self.c = torch.nn.Linear(64, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.a(x))
        h = torch.tanh(self.b(h)) * 1.5 + h
        return self.c(h) - x[:, :16]


def _run_threads(work) -> list[BaseException]:
    errors: list[BaseException] = []
    start = threading.Barrier(THREADS)

    def body(t: int) -> None:
        try:
            start.wait()
            work(t)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    threads = [threading.Thread(target=body, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    assert not any(th.is_alive() for th in threads), "a thread hung"
    return errors


@pytest.fixture
def c_calls(monkeypatch):
    calls = [0]
    lock = threading.Lock()
    real = torchair.compiler.AirSubgraph.__call__

    def counting(self, *args):
        with lock:
            calls[0] += 1
        return real(self, *args)

    monkeypatch.setattr(torchair.compiler.AirSubgraph, "__call__", counting)
    return calls


def test_one_model_four_threads(c_calls):
    model = Net().eval()
    compiled, reports = compile_recording(model)
    gen = torch.Generator().manual_seed(1)
    inputs = [[torch.randn(8, 32, generator=gen) for _ in range(CALLS)] for _ in range(THREADS)]
    with torch.no_grad():
        want = [[model(x) for x in xs] for xs in inputs]
        alone = compiled(inputs[0][0])  # compiles before the threads start
    torch.testing.assert_close(alone, want[0][0], rtol=1e-4, atol=1e-5)
    assert reports and reports[0].fallbacks == [], str(reports[0])
    got: list[list[torch.Tensor | None]] = [[None] * CALLS for _ in range(THREADS)]

    def work(t: int) -> None:
        with torch.no_grad():
            for i, x in enumerate(inputs[t]):
                got[t][i] = compiled(x)

    errors = _run_threads(work)
    assert not errors, errors
    for t in range(THREADS):
        for i in range(CALLS):
            torch.testing.assert_close(got[t][i], want[t][i], rtol=1e-4, atol=1e-5)
    # the same call alone gives the same bits: no run saw another's buffers
    with torch.no_grad():
        for t in range(THREADS):
            assert torch.equal(compiled(inputs[t][7]), got[t][7])
    assert len(reports) == 1  # no recompiles
    assert c_calls[0] >= 1 + THREADS * CALLS


def _scale(x: torch.Tensor) -> torch.Tensor:
    return torch.tanh(x) * 2 + torch.relu(x) - 0.5


def test_symbolic_sizes_from_four_threads(c_calls):
    # each thread a different size through one symbolic graph: every call
    # plans its own arena for its own shapes
    compiled, reports = compile_recording(_scale, dynamic=True)
    compiled(torch.randn(5, 3))
    gen = torch.Generator().manual_seed(2)
    inputs = [[torch.randn(2 + t * 7 + i % 3, 3 + t, generator=gen) for i in range(CALLS)] for t in range(THREADS)]
    got: list[list[torch.Tensor | None]] = [[None] * CALLS for _ in range(THREADS)]

    def work(t: int) -> None:
        for i, x in enumerate(inputs[t]):
            got[t][i] = compiled(x)

    errors = _run_threads(work)
    assert not errors, errors
    for t in range(THREADS):
        for i in range(CALLS):
            torch.testing.assert_close(got[t][i], _scale(inputs[t][i]))
    assert len(reports) == 1, "\n".join(map(str, reports))
    assert c_calls[0] >= 1 + THREADS * CALLS

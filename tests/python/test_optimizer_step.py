"""``torch.compile(optimizer.step, backend="torchair")`` (#34, item 6): torch's optimizers,
unchanged, with their foreach update compiled. Three steps from the same weights and
gradients as an eager optimizer give the same parameters and state; the update's arithmetic
(lerp's fma among it) runs in libair."""

from __future__ import annotations

import pytest
import torch

from _compile import compile_recording, fallbacks

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def _params(seed: int) -> list[torch.nn.Parameter]:
    g = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(*s, generator=g)) for s in ((64, 48), (48,), (7, 5, 3), (1,))]


def _full_size_steps(report) -> list[str]:
    """The kernels-per-step rows of a subgraph that run over more than one element."""
    text = report.air_report
    rows = text[text.index("kernels per step:"):text.index("memory (")].splitlines()[1:]
    return [row for row in rows if len(row.split()) > 3 and not row.split()[3].startswith(("f32[]", "f32[1]"))]


@pytest.mark.parametrize("make, one_pass", [
    (lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9), False),
    (lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-2), True),
    (lambda ps: torch.optim.AdamW(ps, lr=1e-2), True),
    (lambda ps: torch.optim.Adam(ps, lr=1e-2, weight_decay=1e-2), True),
], ids=["sgd_momentum", "sgd_nesterov_wd", "adamw", "adam_wd"])
def test_compiled_step_matches_eager(make, one_pass):
    """Three compiled steps give eager's parameters and state. Where `one_pass`, the whole
    update of one parameter (new param and state from the param, its gradient and state,
    scalars broadcast) is one fused_dag step: one pass over its memory, where the unfused
    graph made ~19 for AdamW."""
    ours, ref = _params(0), _params(0)
    opt, opt_ref = make(ours), make(ref)
    step, reports = compile_recording(opt.step)
    g = torch.Generator().manual_seed(1)
    for _ in range(3):
        for p, q in zip(ours, ref):
            p.grad = torch.randn(p.shape, generator=g)
            q.grad = p.grad.clone()
        step()
        opt_ref.step()
    for p, q in zip(ours, ref):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)
    for p, q in zip(ours, ref):  # the optimizer state too (momentum buffers, moments, step)
        for k, v in opt_ref.state[q].items():
            torch.testing.assert_close(opt.state[p][k], v, rtol=1e-5, atol=1e-6, msg=k)
    assert reports and any(g.subgraphs for g in reports)
    assert not [f for f in fallbacks(reports) if "fma" in f[1]]
    if one_pass:
        big = sum(1 for p in ours if p.numel() > 1)
        subs = [s for r in reports for s in r.subgraphs]
        assert subs
        for s in subs:
            full = _full_size_steps(s)
            assert all(row.split()[1] == "fused_dag" for row in full), "\n".join(full)
            assert len(full) == big, "\n".join(full)

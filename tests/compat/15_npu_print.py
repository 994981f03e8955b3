"""torchair.ops.npu_print inside a compiled function, as TorchAir users debug graphs: strings
and tensors mixed, summarize_size, several prints in one graph (fullgraph=True: no graph
break). The printed lines are captured and checked: their order (program order, each after
the values it prints were computed), their text, and that the tensors printed are the
values eager computes; the function's result is checked against eager."""

import contextlib
import io
import sys

import numpy as np
import torch
import torchair
from torchair.configs.compiler_config import CompilerConfig

NAME = "15_npu_print"
device = torch.device("cpu")  # "npu" with torch_npu on Ascend

from compat_check import REPORTS  # torchair's report of every graph compiled here (compat_check.py)


def step(x, w):
    h = torch.relu(x @ w) + 1
    torchair.ops.npu_print("after relu:", h.sum(dim=1), summarize_size=2)
    logits = h @ w.t()
    probs = torch.softmax(logits, dim=-1)
    torchair.ops.npu_print("argmax", probs.argmax(-1), "max prob", probs.amax(-1), summarize_size=-1)
    counts = torch.arange(10, device=x.device) * 3
    torchair.ops.npu_print("counts", counts)
    return probs


def fmt(t, edge):
    a = t.detach().cpu().numpy()
    if edge < 0:
        return np.array2string(a, separator=" ", threshold=sys.maxsize)
    return np.array2string(a, separator=" ", edgeitems=edge, threshold=0)


def main():
    torch.manual_seed(0)
    x = torch.randn(6, 16, device=device)
    w = torch.randn(16, 16, device=device) * 0.2

    config = CompilerConfig()
    config.mode = "max-autotune"
    npu_backend = torchair.get_npu_backend(compiler_config=config)
    compiled = torch.compile(step, dynamic=False, fullgraph=True, backend=npu_backend)

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        print("before")
        got = compiled(x, w)
        print("between")
        compiled(x, w)
        print("after")
    lines = out.getvalue().splitlines()

    h = torch.relu(x @ w) + 1
    want = torch.softmax(h @ w.t(), dim=-1)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    one_call = [
        "after relu: " + fmt(h.sum(dim=1), 2),
        "argmax " + fmt(want.argmax(-1), -1) + " max prob " + fmt(want.amax(-1), -1),
        "counts " + fmt(torch.arange(10) * 3, 3),
    ]
    expected = ["before", *one_call, "between", *one_call, "after"]
    if lines != expected:
        # float text can differ in the last digit between the compiled and the eager sums;
        # everything else must be identical
        assert len(lines) == len(expected), "\n".join(lines)
        for got_line, want_line in zip(lines, expected):
            if got_line != want_line:
                g, w_ = got_line.split(), want_line.split()
                assert len(g) == len(w_) and g[0] == w_[0], (got_line, want_line)
                for a, b in zip(g, w_):
                    if a != b:
                        fa, fb = float(a.strip("[]")), float(b.strip("[]"))
                        assert abs(fa - fb) <= 1e-4 * max(1.0, abs(fb)), (got_line, want_line)
    assert lines[-2] == "counts [ 0  3  6 ... 21 24 27]", lines[-2]

    assert len(REPORTS) == 1, [str(r) for r in REPORTS]
    report = REPORTS[0]
    assert report.compiled_ops > 0, str(report)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 1
    print("\n".join(lines))
    print(str(report).splitlines()[0])

    # TorchAir's argument checks
    for bad, exc in (({"summarize_size": 0}, ValueError), ({}, RuntimeError)):
        try:
            if bad:
                torchair.ops.npu_print("x", x, **bad)
            else:
                torchair.ops.npu_print("no tensor")
        except exc:
            pass
        else:
            raise AssertionError(f"npu_print did not raise {exc.__name__}")
    print(f"COMPAT OK {NAME}")


if __name__ == "__main__":
    main()

"""experimental_config.static_model_ops_lower_limit, as TorchAir users keep tiny graphs out of
graph mode: a model whose ATen graph is cut by an op torchair runs in eager (erfinv) into a
long stretch and a two-op stretch. With the limit at 5 the short stretch must run in eager
and the long one compiled; without it both are compiled; with -1 every op runs on its own.
Each result is checked against eager."""

import torch
import torchair
from torch import nn
from torchair.configs.compiler_config import CompilerConfig

NAME = "04_static_model_ops_lower_limit"
device = torch.device("cpu")  # "npu" with torch_npu on Ascend

from compat_check import REPORTS  # torchair's report of every graph compiled here (compat_check.py)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(32, 64)
        self.b = nn.Linear(64, 64)
        self.norm = nn.LayerNorm(64)

    def forward(self, x):
        h = self.norm(torch.relu(self.b(torch.relu(self.a(x)))))  # a long stretch
        h = torch.erfinv(torch.tanh(h) * 0.5)  # no torchair lowering: eager
        return torch.exp(h) * 2.0  # a two-op stretch


def compile_with(model, x, want, limit):
    config = CompilerConfig()
    config.mode = "max-autotune"
    if limit is not None:
        config.experimental_config.static_model_ops_lower_limit = limit
    torch._dynamo.reset()
    REPORTS.clear()
    compiled = torch.compile(model, dynamic=False, fullgraph=True, backend=torchair.get_npu_backend(compiler_config=config))
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), want, rtol=1e-4, atol=1e-4)
    assert len(REPORTS) == 1, [str(r) for r in REPORTS]
    return REPORTS[0]


def main():
    torch.manual_seed(0)
    model = Net().to(device).eval()
    x = torch.randn(8, 32, device=device)
    with torch.no_grad():
        want = model(x)

    plain = compile_with(model, x, want, None)
    sizes = sorted(len(s.ops) for s in plain.subgraphs if s.compiled)
    assert len(sizes) == 2 and sizes[0] <= 3, str(plain)

    limited = compile_with(model, x, want, 5)
    compiled = [s for s in limited.subgraphs if s.compiled]
    assert len(compiled) == 1 and len(compiled[0].ops) == sizes[1], str(limited)
    assert "shorter than static_model_ops_lower_limit=5" in str(limited), str(limited)
    assert limited.compiled_ops < plain.compiled_ops

    op_by_op = compile_with(model, x, want, -1)
    assert op_by_op.compiled_ops > 0, str(op_by_op)

    print("no limit:", str(plain).splitlines()[0])
    print("limit 5: ", str(limited).splitlines()[0])
    print("limit -1:", str(op_by_op).splitlines()[0])
    print(f"COMPAT OK {NAME}")


if __name__ == "__main__":
    main()

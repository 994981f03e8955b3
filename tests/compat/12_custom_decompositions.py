"""get_npu_backend(compiler_config=..., custom_decompositions=...) as TorchAir users pass their
own decompositions: one hand-written ({aten.hardswish.default: fn}) and one taken from
torch._decomp.get_decompositions([aten.gelu]). Checked: the result matches eager, the
hand-written decomposition was called, and the ATen graph torchair compiles has the
decomposed ops instead of hardswish and gelu (seen by a post_grad_custom_pre_pass)."""

import torch
import torch.nn.functional as F
import torchair
from torch import nn
from torch._decomp import get_decompositions
from torchair.configs.compiler_config import CompilerConfig

NAME = "12_custom_decompositions"
device = torch.device("cpu")  # "npu" with torch_npu on Ascend
aten = torch.ops.aten

from compat_check import REPORTS  # torchair's report of every graph compiled here (compat_check.py)

calls = []


def hardswish_decomposition(x):
    calls.append(tuple(x.shape))
    return x * torch.clamp(x + 3.0, 0.0, 6.0) / 6.0


class MobileBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(32, 96)
        self.fc2 = nn.Linear(96, 96)
        self.fc3 = nn.Linear(96, 32)

    def forward(self, x):
        return self.fc3(F.gelu(self.fc2(F.hardswish(self.fc1(x))))) + x


def main():
    torch.manual_seed(0)
    model = MobileBlock().to(device).eval()
    x = torch.randn(4, 10, 32, device=device)

    decompositions = {aten.hardswish.default: hardswish_decomposition}
    decompositions.update(get_decompositions([aten.gelu]))
    graphs = []
    config = CompilerConfig()
    config.post_grad_custom_pre_pass = lambda gm, example_inputs, cfg: graphs.append(
        [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]
    )
    npu_backend = torchair.get_npu_backend(compiler_config=config, custom_decompositions=decompositions)
    compiled = torch.compile(model, dynamic=False, fullgraph=True, backend=npu_backend)
    with torch.no_grad():
        want = model(x)
        got = compiled(x)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)

    assert calls, "the custom hardswish decomposition was not called"
    assert len(graphs) == 1, graphs
    ops = graphs[0]
    assert "aten.hardswish.default" not in ops and "aten.gelu.default" not in ops, ops
    assert "aten.clamp.default" in ops and "aten.erf.default" in ops, ops
    assert len(REPORTS) == 1 and REPORTS[0].compiled_ops == REPORTS[0].total_ops, [str(r) for r in REPORTS]
    print(str(REPORTS[0]).splitlines()[0])

    # without them, torchair's own table keeps hardswish and gelu as ops
    graphs.clear()
    torch._dynamo.reset()
    plain = torch.compile(model, dynamic=False, backend=torchair.get_npu_backend(compiler_config=config))
    with torch.no_grad():
        torch.testing.assert_close(plain(x), want, rtol=1e-4, atol=1e-4)
    assert "aten.hardswish.default" in graphs[0] and "aten.gelu.default" in graphs[0], graphs[0]

    # anything but a dict is refused, as in TorchAir
    try:
        torchair.get_npu_backend(compiler_config=config, custom_decompositions=[hardswish_decomposition])
    except (TypeError, ValueError) as e:
        print("refused:", type(e).__name__)
    else:
        raise AssertionError("custom_decompositions=[...] was accepted")
    print(f"COMPAT OK {NAME}")


if __name__ == "__main__":
    main()

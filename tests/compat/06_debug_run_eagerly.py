"""config.debug.run_eagerly, as TorchAir users bisect an accuracy problem: the graph dynamo
captured is run in eager PyTorch instead of being compiled, after the user's FX passes. With
it, torchair must compile nothing and the custom pass must still run; without it, the same
model is compiled. Both results are checked against eager, on a model with a graph break
(two captured graphs) and a batch-norm CNN."""

import torch
import torchair
from torch import nn
from torchair.configs.compiler_config import CompilerConfig

NAME = "06_debug_run_eagerly"
device = torch.device("cpu")  # "npu" with torch_npu on Ascend

from compat_check import REPORTS  # torchair's report of every graph compiled here (compat_check.py)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        h = torch.relu(self.bn(self.conv(x))).mean((2, 3))
        print("graph break")  # dynamo splits the graph here
        return self.fc(h).softmax(-1)


def main():
    torch.manual_seed(0)
    model = Net().to(device).eval()
    x = torch.randn(2, 3, 16, 16, device=device)
    with torch.no_grad():
        want = model(x)

    for run_eagerly in (True, False):
        passes = []
        config = CompilerConfig()
        config.mode = "max-autotune"
        config.debug.run_eagerly = run_eagerly
        config.post_grad_custom_pre_pass = lambda gm, inputs, cfg: passes.append(len(gm.graph.nodes))
        torch._dynamo.reset()
        REPORTS.clear()
        compiled = torch.compile(model, dynamic=False, backend=torchair.get_npu_backend(compiler_config=config))
        with torch.no_grad():
            torch.testing.assert_close(compiled(x), want, rtol=1e-4, atol=1e-4)
            torch.testing.assert_close(compiled(x), want, rtol=1e-4, atol=1e-4)
        assert len(passes) == 2, passes  # two captured graphs, the user's pass ran on each
        if run_eagerly:
            assert REPORTS == [], [str(r) for r in REPORTS]
        else:
            assert len(REPORTS) == 2 and all(r.compiled_ops > 0 for r in REPORTS), [str(r) for r in REPORTS]
        print(f"run_eagerly={run_eagerly}: {len(REPORTS)} graph(s) compiled by torchair")
    print(f"COMPAT OK {NAME}")


if __name__ == "__main__":
    main()

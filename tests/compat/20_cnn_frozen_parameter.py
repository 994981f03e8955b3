"""Small CNN inference (conv + batch norm + ReLU blocks, a residual, pooling, a classifier)
compiled with experimental_config.frozen_parameter = True, as TorchAir's image-model samples
do. Checked against eager for a batch, then again after the weights are changed in place
(the way a weight update or a LoRA merge touches a served model: on the NPU the graph reads
the parameters at their fixed addresses, so it sees the new values) and after
load_state_dict. torchair must compile the whole graph with the parameters frozen."""

import torch
import torchair
from torch import nn
from torchair.configs.compiler_config import CompilerConfig

NAME = "20_cnn_frozen_parameter"
device = torch.device("cpu")  # "npu" with torch_npu on Ascend

from compat_check import REPORTS  # torchair's report of every graph compiled here (compat_check.py)


def conv_bn(cin, cout, stride=1):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class SmallResNet(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.stem = conv_bn(3, 16)
        self.block1 = nn.Sequential(conv_bn(16, 16), nn.Conv2d(16, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16))
        self.down = conv_bn(16, 32, stride=2)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(32, classes)

    def forward(self, x):
        x = self.stem(x)
        x = torch.relu(x + self.block1(x))
        x = self.down(x)
        return self.fc(torch.flatten(self.pool(x), 1))


def randomize_bn(model):
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.2, 0.2)
            m.running_var.uniform_(0.5, 1.5)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.2, 0.2)


def main():
    torch.manual_seed(0)
    model = SmallResNet().to(device).eval()
    randomize_bn(model)
    x = torch.randn(2, 3, 32, 32, device=device)

    config = CompilerConfig()
    config.mode = "max-autotune"
    config.experimental_config.frozen_parameter = True
    npu_backend = torchair.get_npu_backend(compiler_config=config)
    compiled = torch.compile(model, dynamic=False, fullgraph=True, backend=npu_backend)

    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(compiled(x * 2), model(x * 2), rtol=1e-4, atol=1e-4)
        # weights changed in place after the compile
        model.stem[0].weight.mul_(0.5)
        model.fc.bias.add_(1.0)
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4, msg=lambda m: f"after an in-place update: {m}")
        # a new state dict, as when a checkpoint is swapped in
        other = SmallResNet().to(device).eval()
        randomize_bn(other)
        model.load_state_dict(other.state_dict())
        torch.testing.assert_close(compiled(x), other(x), rtol=1e-4, atol=1e-4, msg=lambda m: f"after load_state_dict: {m}")

    assert len(REPORTS) == 1, [str(r) for r in REPORTS]
    report = REPORTS[0]
    assert report.freezing == "on" and report.frozen_tensors > 0, str(report)
    assert report.compiled_ops == report.total_ops and not report.fallbacks, str(report)
    print(str(report))
    print(f"COMPAT OK {NAME}")


if __name__ == "__main__":
    main()

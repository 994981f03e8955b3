"""Training through the TorchAir backend, as TorchAir's training samples do: a small CNN
(conv, batch norm in training mode, ReLU, pooling, dropout-free classifier) compiled with
get_npu_backend, cross-entropy loss, backward, SGD with momentum for a few steps. The loss of
every step, every parameter's gradient, the parameters after each step and the batch-norm
running statistics are checked against the same model trained in eager. torchair must have
compiled forward and backward graphs."""

import copy

import torch
import torch.nn.functional as F
import torchair
from torch import nn
from torchair.configs.compiler_config import CompilerConfig

NAME = "21_training_step"
device = torch.device("cpu")  # "npu" with torch_npu on Ascend

from compat_check import REPORTS  # torchair's report of every graph compiled here (compat_check.py)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.fc1 = nn.Linear(16 * 8 * 8, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.conv2(x))
        x = torch.flatten(x, 1)
        return self.fc2(F.gelu(self.fc1(x)))


def main():
    torch.manual_seed(0)
    model = Net().to(device).train()
    ref = copy.deepcopy(model)

    config = CompilerConfig()
    config.mode = "max-autotune"
    npu_backend = torchair.get_npu_backend(compiler_config=config)
    compiled = torch.compile(model, dynamic=False, backend=npu_backend)

    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.05, momentum=0.9)
    gen = torch.Generator().manual_seed(1)
    for step in range(3):
        x = torch.randn(8, 3, 16, 16, generator=gen).to(device)
        y = torch.randint(0, 10, (8,), generator=gen).to(device)

        opt.zero_grad()
        loss = F.cross_entropy(compiled(x), y)
        loss.backward()
        ref_opt.zero_grad()
        ref_loss = F.cross_entropy(ref(x), y)
        ref_loss.backward()

        torch.testing.assert_close(loss, ref_loss, rtol=1e-4, atol=1e-4, msg=lambda m: f"loss, step {step}: {m}")
        for (name, p), q in zip(model.named_parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-4, msg=lambda m: f"grad {name}, step {step}: {m}")
        opt.step()
        ref_opt.step()
        for (name, p), q in zip(model.named_parameters(), ref.parameters()):
            torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-4, msg=lambda m: f"{name} after step {step}: {m}")
        print(f"step {step}: loss {loss.item():.6f} (eager {ref_loss.item():.6f})")
    torch.testing.assert_close(model.bn1.running_mean, ref.bn1.running_mean, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(model.bn1.running_var, ref.bn1.running_var, rtol=1e-4, atol=1e-4)
    assert model.bn1.num_batches_tracked.item() == ref.bn1.num_batches_tracked.item() == 3

    kinds = [r.graph for r in REPORTS]
    assert "forward" in kinds and "backward" in kinds, [str(r) for r in REPORTS]
    assert all(r.compiled_ops > 0 for r in REPORTS), [str(r) for r in REPORTS]
    print("\n".join(str(r).splitlines()[0] for r in REPORTS))
    print(f"COMPAT OK {NAME}")


if __name__ == "__main__":
    main()

"""Updating a served model's weights in place after it was compiled, the way weight loaders
and RL weight-sync code do it: `param.data.copy_(new_weight)` for every parameter (vLLM's
default_weight_loader writes `param.data.copy_(loaded_weight)`). Under TorchAir the compiled
graph reads the parameters where they live, so the next call uses the new weights -- with the
default config (frozen_parameter False: parameters are graph inputs) and with
frozen_parameter True (fixed addresses, values read at run time). Each compiled result after
the update must match eager with the new weights."""

import torch
import torch.nn.functional as F
import torchair
from torch import nn
from torchair.configs.compiler_config import CompilerConfig

NAME = "28_weight_sync_param_data"
device = torch.device("cpu")  # "npu" with torch_npu on Ascend

from compat_check import REPORTS  # torchair's report of every graph compiled here (compat_check.py)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate_up = nn.Linear(64, 256, bias=False)
        self.down = nn.Linear(128, 64, bias=False)
        self.head = nn.Linear(64, 32)

    def forward(self, x):
        gate, up = self.gate_up(x).chunk(2, dim=-1)
        return self.head(x + self.down(F.silu(gate) * up))


def load_weights(model, state):
    """A weight loader / RL weight sync: copy into the existing parameters."""
    params = dict(model.named_parameters())
    for name, weight in state.items():
        params[name].data.copy_(weight)


def main():
    x = torch.randn(4, 64, device=device)
    failures = []
    for frozen in (False, True):
        torch.manual_seed(0)
        model = MLP().to(device).eval()
        config = CompilerConfig()
        config.mode = "max-autotune"
        config.experimental_config.frozen_parameter = frozen
        torch._dynamo.reset()
        REPORTS.clear()
        compiled = torch.compile(model, dynamic=False, fullgraph=True, backend=torchair.get_npu_backend(compiler_config=config))
        with torch.inference_mode():
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)
        assert len(REPORTS) == 1 and REPORTS[0].compiled_ops == REPORTS[0].total_ops, [str(r) for r in REPORTS]
        for step in range(2):
            new_state = {name: torch.randn_like(p) * 0.1 for name, p in model.named_parameters()}
            load_weights(model, new_state)
            with torch.inference_mode():
                got, want = compiled(x), model(x)
            err = (got - want).abs().max().item()
            if not torch.allclose(got, want, rtol=1e-4, atol=1e-4):
                failures.append(f"frozen_parameter={frozen}, weight sync {step}: max error {err:.3g} (stale weights)")
            else:
                print(f"frozen_parameter={frozen}, weight sync {step}: max error {err:.3g}")
        print(f"frozen_parameter={frozen}: {str(REPORTS[0]).splitlines()[1].strip()}")
    assert not failures, "\n".join(failures)
    print(f"COMPAT OK {NAME}")


if __name__ == "__main__":
    main()

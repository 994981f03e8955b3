"""torchair.scope in a MoE layer, as LLM serving code that runs TorchAir graph mode overlaps
a shared expert with the routed experts: the shared expert runs under
npu_stream_switch("shared_expert") after npu_wait_tensor on the router output, inside
limit_core_num and super_kernel scopes. On the CPU there is one stream, so the scopes must
only order what already runs in order; the compiled layer (fullgraph=True, no graph break
from the scopes) must match eager."""

import torch
import torch.nn.functional as F
import torchair
from torch import nn
from torchair.configs.compiler_config import CompilerConfig
from torchair.scope import limit_core_num, npu_stream_switch, npu_wait_tensor, super_kernel

NAME = "29_scope_multistream_moe"
device = torch.device("cpu")  # "npu" with torch_npu on Ascend

from compat_check import REPORTS  # torchair's report of every graph compiled here (compat_check.py)

DIM, EXPERTS, TOP_K, INTER = 64, 4, 2, 96


class Expert(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate_up = nn.Linear(DIM, 2 * INTER, bias=False)
        self.down = nn.Linear(INTER, DIM, bias=False)

    def forward(self, x):
        gate, up = self.gate_up(x).chunk(2, dim=-1)
        return self.down(F.silu(gate) * up)


class MoE(nn.Module):
    def __init__(self):
        super().__init__()
        self.router = nn.Linear(DIM, EXPERTS, bias=False)
        self.experts = nn.ModuleList(Expert() for _ in range(EXPERTS))
        self.shared_expert = Expert()

    def forward(self, x):
        logits = self.router(x)
        weights, chosen = torch.topk(logits.softmax(-1), TOP_K, dim=-1)
        weights = weights / weights.sum(-1, keepdim=True)
        with super_kernel("moe", ""), npu_stream_switch("shared_expert", 0):
            npu_wait_tensor(x, logits)
            with limit_core_num(8, 16):
                shared = self.shared_expert(x)
        # dense dispatch: every expert on every token, weighted by the routing (small model)
        routed = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            w = (weights * (chosen == e)).sum(-1, keepdim=True)
            routed = routed + w * expert(x)
        return routed + shared


def main():
    torch.manual_seed(0)
    model = MoE().to(device).eval()
    x = torch.randn(6, DIM, device=device)
    config = CompilerConfig()
    config.mode = "max-autotune"
    config.experimental_config.frozen_parameter = True
    compiled = torch.compile(model, dynamic=False, fullgraph=True, backend=torchair.get_npu_backend(compiler_config=config))
    with torch.inference_mode():
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)
    assert len(REPORTS) == 1 and REPORTS[0].compiled_ops > 0.8 * REPORTS[0].total_ops, [str(r) for r in REPORTS]
    print(str(REPORTS[0]).splitlines()[0])
    print(f"COMPAT OK {NAME}")


if __name__ == "__main__":
    main()

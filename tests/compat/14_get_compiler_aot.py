"""torchair.get_compiler(compiler_config=...) in a user's own dynamo backend built on
functorch's aot_module_simplified, as TorchAir's docs show it: the backend looks at the ATen
graph, then hands it to TorchAir's compiler. Used as fw_compiler for inference and as both
fw_compiler and bw_compiler for a training step; outputs and gradients are checked against
eager and torchair must have compiled the graphs."""

import torch
import torchair
from functorch.compile import aot_module_simplified
from torch import nn
from torchair.configs.compiler_config import CompilerConfig

NAME = "14_get_compiler_aot"
device = torch.device("cpu")  # "npu" with torch_npu on Ascend

from compat_check import REPORTS  # torchair's report of every graph compiled here (compat_check.py)

seen_graphs = []


def my_backend(gm, example_inputs):
    config = CompilerConfig()
    config.mode = "max-autotune"
    compiler = torchair.get_compiler(compiler_config=config)

    def inspect_then_compile(gm, example_inputs):
        seen_graphs.append(sorted({str(n.target) for n in gm.graph.nodes if n.op == "call_function"}))
        return compiler(gm, example_inputs)

    return aot_module_simplified(gm, example_inputs, fw_compiler=inspect_then_compile, bw_compiler=inspect_then_compile)


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.LayerNorm(64), nn.GELU(), nn.Linear(64, 10)).to(device)
    x = torch.randn(16, 32, device=device)
    target = torch.randint(0, 10, (16,), device=device)

    # inference
    model.eval()
    compiled = torch.compile(model, dynamic=False, backend=my_backend)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)
    assert len(seen_graphs) == 1 and "aten.addmm.default" in seen_graphs[0], seen_graphs
    assert len(REPORTS) == 1 and REPORTS[0].compiled_ops > 0, [str(r) for r in REPORTS]
    print("inference:", str(REPORTS[0]).splitlines()[0])

    # training: forward and backward both through torchair's compiler
    torch._dynamo.reset()
    seen_graphs.clear()
    REPORTS.clear()
    model.train()
    ref_model = nn.Sequential(nn.Linear(32, 64), nn.LayerNorm(64), nn.GELU(), nn.Linear(64, 10)).to(device)
    ref_model.load_state_dict(model.state_dict())
    compiled = torch.compile(model, dynamic=False, backend=my_backend)
    loss = nn.functional.cross_entropy(compiled(x), target)
    loss.backward()
    ref_loss = nn.functional.cross_entropy(ref_model(x), target)
    ref_loss.backward()
    torch.testing.assert_close(loss, ref_loss, rtol=1e-4, atol=1e-4)
    for (name, p), q in zip(model.named_parameters(), ref_model.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-4, msg=lambda m: f"grad of {name}: {m}")
    assert len(seen_graphs) == 2, seen_graphs  # forward, backward
    assert len(REPORTS) == 2 and all(r.compiled_ops > 0 for r in REPORTS), [str(r) for r in REPORTS]
    print("training:", " / ".join(str(r).splitlines()[0] for r in REPORTS))
    print(f"COMPAT OK {NAME}")


if __name__ == "__main__":
    main()

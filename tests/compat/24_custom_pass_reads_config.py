"""A post_grad_custom_pre_pass / post_grad_custom_post_pass that reads the config it is given,
as TorchAir passes do (TorchAir calls fn(gm, example_inputs, config) with the user's
CompilerConfig): the pass decides what to do from config.experimental_config.frozen_parameter
and config.ge_config.oo_level. The values the passes read must be the ones the user set;
the compiled model must match eager."""

import torch
import torchair
from torch import nn
from torchair.configs.compiler_config import CompilerConfig

NAME = "24_custom_pass_reads_config"
device = torch.device("cpu")  # "npu" with torch_npu on Ascend

from compat_check import REPORTS  # torchair's report of every graph compiled here (compat_check.py)

seen = []


def pre_pass(gm, example_inputs, config):
    seen.append(("pre", config.experimental_config.frozen_parameter.value, config.ge_config.oo_level.value, config.mode))


def post_pass(gm, example_inputs, config):
    seen.append(("post", config.experimental_config.frozen_parameter.value, config.ge_config.oo_level.value, config.mode))


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 8)).to(device).eval()
    x = torch.randn(4, 16, device=device)

    config = CompilerConfig()
    config.mode = "max-autotune"
    config.experimental_config.frozen_parameter = True
    config.ge_config.oo_level = "O1"
    config.post_grad_custom_pre_pass = pre_pass
    config.post_grad_custom_post_pass = post_pass
    compiled = torch.compile(model, dynamic=False, fullgraph=True, backend=torchair.get_npu_backend(compiler_config=config))
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)
    assert len(REPORTS) == 1 and REPORTS[0].compiled_ops > 0, [str(r) for r in REPORTS]
    assert REPORTS[0].freezing == "on", str(REPORTS[0])  # the compile itself honoured the options

    print(seen)
    assert seen == [("pre", "1", "O1", "max-autotune"), ("post", "1", "O1", "max-autotune")], (
        f"the passes read {seen}; the user set frozen_parameter=True, oo_level='O1'"
    )
    print(f"COMPAT OK {NAME}")


if __name__ == "__main__":
    main()

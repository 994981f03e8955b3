"""ge_config.aicore_num, TorchAir's cap on the cores one graph may use ("<cube>|<vector>"),
as serving code sets it to leave cores to other work: on the CPU the first number is the
graph's thread count. A small MLP is compiled with "1|1" (one thread) and with "2|2"; each
compile's report must give that thread count, and both results must match eager. A value
that is not "<int>|<int>" is refused, naming the option."""

import torch
import torchair
from torch import nn
from torchair.configs.compiler_config import CompilerConfig

NAME = "03_aicore_num_threads"
device = torch.device("cpu")  # "npu" with torch_npu on Ascend

from compat_check import REPORTS  # torchair's report of every graph compiled here (compat_check.py)


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.SiLU(), nn.Linear(128, 128), nn.SiLU(), nn.Linear(128, 16)).to(device).eval()
    x = torch.randn(32, 64, device=device)
    with torch.no_grad():
        want = model(x)

    for aicore_num, threads in (("1|1", 1), ("2|2", 2)):
        config = CompilerConfig()
        config.mode = "max-autotune"
        config.experimental_config.frozen_parameter = True
        config.ge_config.aicore_num = aicore_num
        npu_backend = torchair.get_npu_backend(compiler_config=config)
        torch._dynamo.reset()
        REPORTS.clear()
        compiled = torch.compile(model, dynamic=False, fullgraph=True, backend=npu_backend)
        with torch.no_grad():
            for _ in range(3):
                torch.testing.assert_close(compiled(x), want, rtol=1e-4, atol=1e-4)
        assert len(REPORTS) == 1 and REPORTS[0].compiled_ops == REPORTS[0].total_ops, [str(r) for r in REPORTS]
        log = REPORTS[0].subgraphs[0].air_report
        assert f"threads: {threads}\n" in log, f"aicore_num={aicore_num!r}:\n{log}"
        print(f"aicore_num={aicore_num!r}: " + log.splitlines()[0])

    config = CompilerConfig()
    config.ge_config.aicore_num = "all"  # TorchAir does not validate it when set either
    try:
        torchair.get_npu_backend(compiler_config=config)
    except (ValueError, NotImplementedError) as e:
        assert "aicore_num" in str(e), str(e)
        print("refused:", type(e).__name__)
    else:
        raise AssertionError("aicore_num='all' was accepted")
    print(f"COMPAT OK {NAME}")


if __name__ == "__main__":
    main()

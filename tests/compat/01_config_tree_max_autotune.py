"""The TorchAir config tree as inference samples fill it in: mode "max-autotune",
experimental_config.frozen_parameter, keep_inference_input_mutations, the stable topological
order, ge_config.enable_single_stream and export_compile_stat "0", oo_constant_folding /
oo_dead_code_elimination, the aclgraph debug defaults and output clone, the gear merge policy
"zip", dump paths. A transformer FFN block compiled with get_npu_backend and dynamic=False is
checked against eager; torchair must compile the whole graph with the parameters frozen and
time its kernel choices (max-autotune)."""

import torch
import torchair
from torch import nn
from torchair.configs.compiler_config import CompilerConfig

NAME = "01_config_tree_max_autotune"
device = torch.device("cpu")  # "npu" with torch_npu on Ascend

from compat_check import REPORTS  # torchair's report of every graph compiled here (compat_check.py)


class FeedForward(nn.Module):
    def __init__(self, dim=64, hidden=128):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


def main():
    config = CompilerConfig()
    config.mode = "max-autotune"
    config.experimental_config.frozen_parameter = True
    config.experimental_config.keep_inference_input_mutations = True
    config.experimental_config.topology_sorting_strategy = "StableRDFS"
    config.experimental_config.enable_view_optimize = True
    config.experimental_config.jit_compile = "auto"
    config.ge_config.enable_single_stream = True
    config.ge_config.export_compile_stat = "0"
    config.ge_config.oo_constant_folding = True
    config.ge_config.oo_dead_code_elimination = True
    config.debug.aclgraph.enable_output_clone = True
    config.inference_config.dynamic_gears_merge_policy = "zip"
    config.debug.graph_dump.path = "."
    config.dump_config.dump_path = "."
    # reading options back, as TorchAir code does
    assert config.experimental_config.frozen_parameter.value == "1"
    assert config.ge_config.export_compile_stat.value == "0"
    assert bool(config.experimental_config.keep_inference_input_mutations)
    assert not config.debug.run_eagerly

    npu_backend = torchair.get_npu_backend(compiler_config=config)
    torch.manual_seed(0)
    reference = FeedForward().to(device).eval()
    model = torch.compile(reference, dynamic=False, fullgraph=True, backend=npu_backend)

    x = torch.randn(4, 16, 64, device=device)
    with torch.no_grad():
        for i in range(3):
            out = model(x + i)
            torch.testing.assert_close(out, reference(x + i), rtol=1e-4, atol=1e-4)
        first = model(x)
        second = model(x + 1)
    # outputs are fresh tensors: the next call does not overwrite one the caller holds
    torch.testing.assert_close(first, reference(x), rtol=1e-4, atol=1e-4)
    assert first.data_ptr() != second.data_ptr()

    assert len(REPORTS) == 1, [str(r) for r in REPORTS]
    report = REPORTS[0]
    assert report.compiled_ops == report.total_ops and not report.fallbacks, str(report)
    assert report.freezing == "on" and report.frozen_tensors == 6, str(report)
    assert "autotune:" in report.subgraphs[0].air_report, str(report)
    print(str(report))
    print(f"COMPAT OK {NAME}")


if __name__ == "__main__":
    main()

"""fusion_config.fusion_switch_file, as TorchAir users switch fusion rules off with a JSON file
({"Switch": {"GraphFusion": {...}, "UBFusion": {...}}}): one file turns two named fusion
passes off, one turns "ALL" off, one names a GE pass torchair does not have (refused with
NotBuiltError naming it, as a user porting an NPU switch file would see). Each compile is
checked against eager and its pass log must show the passes off as asked."""

import json
import os
import tempfile

import torch
import torch.nn.functional as F
import torchair
from torch import nn
from torchair.configs.compiler_config import CompilerConfig

NAME = "05_fusion_switch_file"
device = torch.device("cpu")  # "npu" with torch_npu on Ascend

from compat_check import REPORTS  # torchair's report of every graph compiled here (compat_check.py)

FUSION = ("fuse_attention", "fuse_activation", "fuse_rms_norm", "fuse_rope", "fuse_epilogue", "fuse_elementwise")


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(8, 16, 3, padding=1)
        self.bn = nn.BatchNorm2d(16)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = F.relu(self.bn(self.conv(x)))
        x = torch.sigmoid(x) * x + 0.5 * x  # an elementwise chain
        return F.gelu(self.fc(x.mean((2, 3))))


def off_passes(report):
    return {name for s in report.subgraphs if s.compiled for name in FUSION if f"  {name}: off" in s.air_report}


def main():
    torch.manual_seed(0)
    model = ConvNet().to(device).eval()
    x = torch.randn(2, 8, 12, 12, device=device)
    with torch.no_grad():
        want = model(x)
    folder = tempfile.mkdtemp()

    def switch_file(name, switches):
        path = os.path.join(folder, name)
        with open(path, "w") as f:
            json.dump({"Switch": switches}, f)
        return path

    cases = [
        (switch_file("two_off.json", {"GraphFusion": {"fuse_epilogue": "off"}, "UBFusion": {"fuse_elementwise": "off"}}),
         {"fuse_epilogue", "fuse_elementwise"}),
        (switch_file("all_off.json", {"GraphFusion": {"ALL": "off"}, "UBFusion": {"ALL": "off"}}), set(FUSION)),
    ]  # fmt: skip
    for path, expect_off in cases:
        config = CompilerConfig()
        config.mode = "max-autotune"
        config.experimental_config.frozen_parameter = True
        config.fusion_config.fusion_switch_file = path
        torch._dynamo.reset()
        REPORTS.clear()
        compiled = torch.compile(model, dynamic=False, fullgraph=True, backend=torchair.get_npu_backend(compiler_config=config))
        with torch.no_grad():
            torch.testing.assert_close(compiled(x), want, rtol=1e-4, atol=1e-4)
        assert len(REPORTS) == 1 and REPORTS[0].compiled_ops == REPORTS[0].total_ops, [str(r) for r in REPORTS]
        off = off_passes(REPORTS[0])
        assert off == expect_off, f"{os.path.basename(path)}: off {sorted(off)}, want {sorted(expect_off)}"
        print(f"{os.path.basename(path)}: off {sorted(off)}")

    # a GE pass name from an NPU switch file
    config = CompilerConfig()
    config.fusion_config.fusion_switch_file = switch_file("ge.json", {"GraphFusion": {"ConvToFullyConnectionFusionPass": "off"}})
    try:
        torchair.get_npu_backend(compiler_config=config)
    except torchair.NotBuiltError as e:
        assert "ConvToFullyConnectionFusionPass" in str(e), str(e)
        print("GE pass name refused: NotBuiltError")
    else:
        raise AssertionError("a GE-only pass name in the switch file was accepted")

    # TorchAir's FileValue: a missing file is a FileNotFoundError when set
    try:
        config.fusion_config.fusion_switch_file = os.path.join(folder, "missing.json")
    except FileNotFoundError:
        pass
    else:
        raise AssertionError("a missing fusion_switch_file was accepted")
    print(f"COMPAT OK {NAME}")


if __name__ == "__main__":
    main()

"""PT2E static int8 against fp32, interleaved in one process (#40 item 2): torchair on the
PT2E-quantized model (torchao's prepare_pt2e / convert_pt2e with X86InductorQuantizer, calibrated
on the timing input), torchair on the fp32 model, eager on both; wall and CPU time per call, and
each output's cosine to eager fp32. Inductor with freezing (what the quantizer targets) compiles
for minutes here, so it runs on its own: see docs/quantization.md.

    PYTHONPATH=python:. python bench/pt2e_int8.py bert|resnet50 [rounds]

ResNet-50 is the zoo's with batch norms folded into the convolutions and a ReLU module per call
(one ReLU module called three times a block is one source partition with three outputs, which
X86InductorQuantizer refuses); every mode runs that same model."""

from __future__ import annotations

import statistics
import sys
import time
import types
import warnings

import torch
from torch import nn
from torch.nn.utils.fusion import fuse_conv_bn_eval


def fold_bn(model: nn.Module) -> nn.Module:
    for mod in model.modules():
        names = dict(mod.named_children())
        for name, child in list(names.items()):
            bn_name = name.replace("conv", "bn")
            bn = names.get(bn_name)
            if isinstance(child, nn.Conv2d) and bn_name != name and isinstance(bn, nn.BatchNorm2d):
                setattr(mod, name, fuse_conv_bn_eval(child, bn))
                setattr(mod, bn_name, nn.Identity())
        if isinstance(mod, nn.Sequential) and len(mod) == 2 and isinstance(mod[0], nn.Conv2d) \
                and isinstance(mod[1], nn.BatchNorm2d):
            mod[0], mod[1] = fuse_conv_bn_eval(mod[0], mod[1]), nn.Identity()
    for mod in model.modules():
        if hasattr(mod, "conv3") and hasattr(mod, "relu"):
            mod.relu1, mod.relu2, mod.relu3 = nn.ReLU(), nn.ReLU(), nn.ReLU()

            def fwd(self: nn.Module, x: torch.Tensor) -> torch.Tensor:
                identity = x
                out = self.relu1(self.bn1(self.conv1(x)))
                out = self.relu2(self.bn2(self.conv2(out)))
                out = self.bn3(self.conv3(out))
                if self.downsample is not None:
                    identity = self.downsample(x)
                return self.relu3(out + identity)

            mod.forward = types.MethodType(fwd, mod)
    return model


def main() -> None:
    warnings.filterwarnings("ignore")
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    import torchao.quantization.pt2e.quantizer.x86_inductor_quantizer as xiq

    import torchair  # noqa: F401

    name = sys.argv[1] if len(sys.argv) > 1 else "bert"
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    torch.manual_seed(0)
    if name == "resnet50":
        from torchair.zoo.vision import resnet50

        m, inputs = fold_bn(resnet50().eval()), (torch.randn(1, 3, 224, 224),)
    else:
        from torchair.zoo.hf import bert_base

        m, fn = bert_base()
        m, inputs = m.eval(), fn(1, 128)
    q = xiq.X86InductorQuantizer()
    q.set_global(xiq.get_default_x86_inductor_quantization_config())
    with torch.no_grad():
        qm = prepare_pt2e(torch.export.export(m, inputs).module(), q)
        qm(*inputs)
        qm = convert_pt2e(qm)
        modes = {"torchair_int8": torch.compile(qm, backend="torchair"),
                 "torchair_fp32": torch.compile(m, backend="torchair"), "eager_int8": qm, "eager_fp32": m}
        outs = {k: [f(*inputs) for _ in range(2)][-1] for k, f in modes.items()}
        wall: dict[str, list[float]] = {k: [] for k in modes}
        cpu: dict[str, list[float]] = {k: [] for k in modes}
        for _ in range(rounds):
            for k, f in modes.items():
                t0, c0 = time.perf_counter(), time.process_time()
                f(*inputs)
                cpu[k].append(time.process_time() - c0)
                wall[k].append(time.perf_counter() - t0)

    def first(o: object) -> torch.Tensor:
        if isinstance(o, (tuple, list)):
            return first(o[0])
        if isinstance(o, dict):
            return first(next(iter(o.values())))
        return o.float()  # type: ignore[union-attr]

    ref = first(outs["eager_fp32"])
    for k in modes:
        cos = torch.nn.functional.cosine_similarity(first(outs[k]).flatten(), ref.flatten(), dim=0).item()
        print(f"{name} {k:14s} wall median {statistics.median(wall[k]) * 1e3:8.1f} min {min(wall[k]) * 1e3:8.1f} ms"
              f" | cpu median {statistics.median(cpu[k]) * 1e3:8.1f} min {min(cpu[k]) * 1e3:8.1f} ms"
              f" | cosine to eager fp32 {cos:.5f}")


if __name__ == "__main__":
    main()

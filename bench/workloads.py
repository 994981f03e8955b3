"""What is benchmarked: whole models from ``torchair.zoo`` and a kernel suite of the
GEMM and convolution shapes those models run.
"""

from __future__ import annotations

import fnmatch
import importlib.util
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from .timing import Budget

REPO = Path(__file__).resolve().parent.parent


class ConvShape(NamedTuple):
    cin: int
    cout: int
    k: int
    stride: int
    pad: int
    h: int
    w: int
    count: int  # how many times ResNet-50 runs this shape per image

    @property
    def name(self) -> str:
        return f"conv_{self.cin}x{self.cout}_k{self.k}s{self.stride}p{self.pad}_{self.h}"

    def flops(self, batch: int = 1) -> float:
        ho = (self.h + 2 * self.pad - self.k) // self.stride + 1
        wo = (self.w + 2 * self.pad - self.k) // self.stride + 1
        return 2.0 * batch * self.cout * ho * wo * self.cin * self.k * self.k


class GemmShape(NamedTuple):
    m: int
    k: int
    n: int
    note: str

    @property
    def name(self) -> str:
        return f"gemm_{self.m}x{self.k}x{self.n}"

    def flops(self) -> float:
        return 2.0 * self.m * self.k * self.n


# ResNet-50 (torchvision v1.5) distinct convolutions at batch 1, 224x224; groups=1 throughout.
# Checked against torchair.zoo.resnet50 with forward hooks (23 shapes, 53 convs).
RESNET50_CONVS: tuple[ConvShape, ...] = (
    ConvShape(3, 64, 7, 2, 3, 224, 224, 1),
    ConvShape(64, 64, 1, 1, 0, 56, 56, 1),
    ConvShape(64, 64, 3, 1, 1, 56, 56, 3),
    ConvShape(64, 256, 1, 1, 0, 56, 56, 4),
    ConvShape(256, 64, 1, 1, 0, 56, 56, 2),
    ConvShape(256, 128, 1, 1, 0, 56, 56, 1),
    ConvShape(128, 128, 3, 2, 1, 56, 56, 1),
    ConvShape(128, 512, 1, 1, 0, 28, 28, 4),
    ConvShape(256, 512, 1, 2, 0, 56, 56, 1),
    ConvShape(512, 128, 1, 1, 0, 28, 28, 3),
    ConvShape(128, 128, 3, 1, 1, 28, 28, 3),
    ConvShape(512, 256, 1, 1, 0, 28, 28, 1),
    ConvShape(256, 256, 3, 2, 1, 28, 28, 1),
    ConvShape(256, 1024, 1, 1, 0, 14, 14, 6),
    ConvShape(512, 1024, 1, 2, 0, 28, 28, 1),
    ConvShape(1024, 256, 1, 1, 0, 14, 14, 5),
    ConvShape(256, 256, 3, 1, 1, 14, 14, 5),
    ConvShape(1024, 512, 1, 1, 0, 14, 14, 1),
    ConvShape(512, 512, 3, 2, 1, 14, 14, 1),
    ConvShape(512, 2048, 1, 1, 0, 7, 7, 3),
    ConvShape(1024, 2048, 1, 2, 0, 14, 14, 1),
    ConvShape(2048, 512, 1, 1, 0, 7, 7, 2),
    ConvShape(512, 512, 3, 1, 1, 7, 7, 2),
)

GEMMS: tuple[GemmShape, ...] = (
    GemmShape(1, 2048, 1000, "ResNet-50 fc, batch 1"),
    GemmShape(16, 2048, 1000, "ResNet-50 fc, batch 16"),
    # BERT-base, batch 1 x seq 128. HF BertModel keeps q, k, v as three 768x768 linears;
    # 768x2304 is the shape a compiler that fuses q/k/v would run instead.
    GemmShape(128, 768, 768, "BERT q/k/v/attention-output linear (x4 per layer)"),
    GemmShape(128, 768, 2304, "BERT fused qkv (only if the compiler fuses q/k/v)"),
    GemmShape(128, 768, 3072, "BERT intermediate linear"),
    GemmShape(128, 3072, 768, "BERT output linear"),
    *(GemmShape(s, s, s, "square") for s in (256, 512, 1024, 1536, 2048)),
)


@dataclass
class Workload:
    name: str
    kind: str  # "model" or "kernel"
    desc: str
    build: Callable[[], tuple[Any, tuple[Any, ...]]]
    budget: Budget
    flops: float | None = None
    groups: tuple[str, ...] = ()
    # Modes run when --modes is not given.
    default_modes: tuple[str, ...] = ("eager", "inductor", "inductor_freezing", "torchair", "openvino", "openvino_f32")
    extra: dict[str, Any] = field(default_factory=dict)


def import_zoo() -> Any:
    """``torchair.zoo``, from the installed package or else from this checkout's python/ dir."""
    if importlib.util.find_spec("torchair") is None:
        sys.path.insert(0, str(REPO / "python"))
    import torchair.zoo

    return torchair.zoo


def _zoo_builder(model: str, batch: int, **kw: int) -> Callable[[], tuple[Any, tuple[Any, ...]]]:
    def build() -> tuple[Any, tuple[Any, ...]]:
        return import_zoo().build(model, batch=batch, **kw)  # type: ignore[no-any-return]

    return build


def _bf16_builder(inner: Callable[[], tuple[Any, tuple[Any, ...]]]) -> Callable[[], tuple[Any, tuple[Any, ...]]]:
    """The model and its floating-point inputs in bf16 (``model.to(torch.bfloat16)``)."""

    def build() -> tuple[Any, tuple[Any, ...]]:
        import torch

        model, inputs = inner()
        cast = tuple(x.to(torch.bfloat16) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs)
        return model.to(torch.bfloat16), cast

    return build


def _gemm_builder(s: GemmShape) -> Callable[[], tuple[Any, tuple[Any, ...]]]:
    def build() -> tuple[Any, tuple[Any, ...]]:
        import torch

        class MatMul(torch.nn.Module):
            """``a @ b`` with ``b`` held as a parameter, as a weight is in a model."""

            def __init__(self) -> None:
                super().__init__()
                g = torch.Generator().manual_seed(0)
                self.b = torch.nn.Parameter(torch.randn(s.k, s.n, generator=g) / math.sqrt(s.k), requires_grad=False)

            def forward(self, a: torch.Tensor) -> torch.Tensor:
                return a @ self.b

        a = torch.randn(s.m, s.k, generator=torch.Generator().manual_seed(1))
        return MatMul().eval(), (a,)

    return build


def _conv_builder(s: ConvShape, batch: int = 1) -> Callable[[], tuple[Any, tuple[Any, ...]]]:
    def build() -> tuple[Any, tuple[Any, ...]]:
        import torch
        import torch.nn.functional as F

        class Conv(torch.nn.Module):
            """``F.conv2d(x, w, stride, padding)`` with ``w`` held as a parameter; no bias."""

            def __init__(self) -> None:
                super().__init__()
                g = torch.Generator().manual_seed(0)
                w = torch.randn(s.cout, s.cin, s.k, s.k, generator=g) / math.sqrt(s.cin * s.k * s.k)
                self.weight = torch.nn.Parameter(w, requires_grad=False)

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return F.conv2d(x, self.weight, None, s.stride, s.pad)

        x = torch.randn(batch, s.cin, s.h, s.w, generator=torch.Generator().manual_seed(1))
        return Conv().eval(), (x,)

    return build


_KERNEL_MODES = ("eager", "torchair")
_KERNEL_BUDGET = Budget(min_rounds=5, max_rounds=200, seconds=1.5)


def all_workloads() -> list[Workload]:
    w: list[Workload] = [
        Workload(
            "resnet50_b1",
            "model",
            "ResNet-50, batch 1, 3x224x224",
            _zoo_builder("resnet50", 1),
            Budget(10, 100, 20.0),
            groups=("models",),
        ),
        Workload(
            "resnet50_b16",
            "model",
            "ResNet-50, batch 16, 3x224x224",
            _zoo_builder("resnet50", 16),
            Budget(3, 30, 40.0),
            groups=("models",),
        ),
        Workload(
            "bert_base_b1",
            "model",
            "BERT-base (HF BertModel, default config), batch 1, seq 128",
            _zoo_builder("bert_base", 1, seq=128),
            Budget(5, 60, 25.0),
            groups=("models",),
        ),
    ]
    for zoo_name, desc in (
        ("mobilenet_v2", "MobileNetV2, batch 1, 3x224x224"),
        ("vit_tiny", "ViT-Tiny, batch 1, 3x224x224"),
        ("unet_small", "U-Net (widths 32-256, transposed-conv upsampling), batch 1, 3x224x224"),
        ("gpt2", "GPT-2 (small zoo config), batch 1, seq 128"),
        ("llama_small", "small LLaMA-style model, batch 1, seq 128"),
        ("wav2vec2_base", "wav2vec2-base (HF Wav2Vec2Model, default config), batch 1, 1 s of 16 kHz audio"),
    ):
        w.append(
            Workload(f"{zoo_name}_b1", "model", desc, _zoo_builder(zoo_name, 1), Budget(5, 60, 15.0), groups=("extra",))
        )
    for zoo_name, kw, desc in (
        ("resnet50", {}, "ResNet-50 in bf16, batch 1, 3x224x224"),
        ("bert_base", {"seq": 128}, "BERT-base (HF BertModel) in bf16, batch 1, seq 128"),
    ):
        w.append(
            Workload(
                f"{zoo_name}_b1_bf16",
                "model",
                desc,
                _bf16_builder(_zoo_builder(zoo_name, 1, **kw)),
                Budget(5, 60, 20.0),
                groups=("bf16",),
                default_modes=("eager", "inductor_freezing", "torchair"),
            )
        )
    for g in GEMMS:
        w.append(
            Workload(
                g.name,
                "kernel",
                f"mm M={g.m} K={g.k} N={g.n} ({g.note})",
                _gemm_builder(g),
                _KERNEL_BUDGET,
                flops=g.flops(),
                groups=("kernels", "gemms"),
                default_modes=_KERNEL_MODES,
                extra=g._asdict(),
            )
        )
    for c in RESNET50_CONVS:
        w.append(
            Workload(
                c.name,
                "kernel",
                f"conv2d Cin={c.cin} Cout={c.cout} k={c.k} s={c.stride} p={c.pad} {c.h}x{c.w} (x{c.count} in ResNet-50)",
                _conv_builder(c),
                _KERNEL_BUDGET,
                flops=c.flops(),
                groups=("kernels", "convs"),
                default_modes=_KERNEL_MODES,
                extra=c._asdict(),
            )
        )
    return w


DEFAULT_SELECTION = ("models", "kernels")
QUICK_SELECTION = ("gemm_256x256x256", "conv_64x64_k1s1p0_56", "resnet50_b1")


def select(patterns: list[str]) -> list[Workload]:
    """Workloads whose name or group matches any pattern (fnmatch), in the order given by all_workloads()."""
    everything = all_workloads()
    chosen = [
        w for w in everything if any(p == "all" or p in w.groups or fnmatch.fnmatchcase(w.name, p) for p in patterns)
    ]
    unknown = [
        p
        for p in patterns
        if p != "all" and not any(p in w.groups or fnmatch.fnmatchcase(w.name, p) for w in everything)
    ]
    if unknown:
        names = ", ".join(w.name for w in everything)
        raise SystemExit(
            f"unknown workload(s) {unknown}; groups: models, extra, bf16, kernels, gemms, convs, all; names: {names}"
        )
    return chosen

"""Models used by torchair's tests, demo and benchmark. Random weights, reproducible (fixed seed).

``build(name)`` returns ``(model, inputs)``: the model in eval mode and a tuple of positional
inputs (batch 1; 224x224 images; sequence length 128).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from .hf import bert_base, example_inputs, gpt2, llama_small, wav2vec2_base
from .vision import mobilenet_v2, resnet50, unet_small, vit_tiny

__all__ = [
    "MODELS",
    "SEED",
    "VISION",
    "bert_base",
    "build",
    "example_inputs",
    "gpt2",
    "llama_small",
    "mobilenet_v2",
    "resnet50",
    "unet_small",
    "vit_tiny",
    "wav2vec2_base",
]

SEED = 0
VISION = ("resnet50", "mobilenet_v2", "vit_tiny", "unet_small")

MODELS: dict[str, Callable[[], nn.Module | tuple[nn.Module, Callable[..., tuple[Tensor, ...]]]]] = {
    "resnet50": resnet50,
    "mobilenet_v2": mobilenet_v2,
    "vit_tiny": vit_tiny,
    "unet_small": unet_small,
    "bert_base": bert_base,
    "gpt2": gpt2,
    "llama_small": llama_small,
    "wav2vec2_base": wav2vec2_base,
}


def image_inputs(batch: int = 1, size: int = 224) -> tuple[Tensor]:
    g = torch.Generator().manual_seed(1)
    return (torch.randn(batch, 3, size, size, generator=g),)


def build(name: str, batch: int = 1, seq: int = 128, size: int = 224) -> tuple[nn.Module, tuple[Tensor, ...]]:
    """Build model ``name`` (eval mode, weights from a fixed seed) and its example inputs."""
    if name not in MODELS:
        raise KeyError(f"unknown model {name!r}; known: {', '.join(MODELS)}")
    torch.manual_seed(SEED)
    if name in VISION:
        model = MODELS[name]()
        assert isinstance(model, nn.Module)
        return model.eval(), image_inputs(batch, size)
    built = MODELS[name]()
    assert isinstance(built, tuple)
    model, inputs_fn = built
    return model.eval(), inputs_fn(batch, seq)

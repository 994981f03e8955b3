"""Hugging Face transformer models with random weights (no downloads), eval mode, SDPA attention."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn
from transformers import (
    BertConfig,
    BertModel,
    GPT2Config,
    GPT2Model,
    LlamaConfig,
    LlamaForCausalLM,
    Wav2Vec2Config,
    Wav2Vec2Model,
)

InputsFn = Callable[..., tuple[Tensor, ...]]


class Positional(nn.Module):
    """Calls a Hugging Face model with keyword inputs taken positionally, returns plain tensors.

    ``forward(input_ids, attention_mask=None)`` (``input_values`` for an audio model). The outputs are
    the model's ``last_hidden_state`` (plus ``pooler_output`` for BERT) or ``logits``. The wrapped
    model is ``.hf``.
    """

    def __init__(self, hf: nn.Module, outputs: tuple[str, ...], input_name: str = "input_ids") -> None:
        super().__init__()
        self.hf = hf
        self.outputs = outputs
        self.input_name = input_name
        self.config = hf.config

    def forward(self, inputs: Tensor, attention_mask: Tensor | None = None) -> Tensor | tuple[Tensor, ...]:
        kwargs = {"attention_mask": attention_mask} if attention_mask is not None else {}
        if self.input_name == "input_ids":
            kwargs["use_cache"] = False
        out = self.hf(**{self.input_name: inputs}, return_dict=True, **kwargs)
        res = tuple(out[k] for k in self.outputs)
        return res[0] if len(res) == 1 else res


def _finish(model: nn.Module, *outputs: str, input_name: str = "input_ids") -> nn.Module:
    model.config.use_cache = False  # no KV-cache objects in the graph
    return Positional(model.eval(), outputs, input_name).eval()


def _ids(vocab: int, batch: int, seq: int) -> Tensor:
    g = torch.Generator().manual_seed(1)
    return torch.randint(0, vocab, (batch, seq), generator=g, dtype=torch.int64)


def _padded_mask(batch: int, seq: int) -> Tensor:
    """All ones except the last quarter of the tokens of every second row (right padding)."""
    mask = torch.ones(batch, seq, dtype=torch.int64)
    mask[::2, seq - max(1, seq // 4) :] = 0
    return mask


def bert_inputs(batch: int = 1, seq: int = 128) -> tuple[Tensor, Tensor]:
    return _ids(BertConfig().vocab_size, batch, seq), _padded_mask(batch, seq)


def gpt2_inputs(batch: int = 1, seq: int = 128) -> tuple[Tensor, Tensor]:
    return _ids(GPT2Config().vocab_size, batch, seq), _padded_mask(batch, seq)


def llama_inputs(batch: int = 1, seq: int = 128) -> tuple[Tensor]:
    return (_ids(1000, batch, seq),)


def wav2vec2_inputs(batch: int = 1, seq: int = 128) -> tuple[Tensor]:
    """One second of 16 kHz audio per item (seq is not used: the feature encoder makes 49 frames)."""
    g = torch.Generator().manual_seed(1)
    return (torch.randn(batch, 16000, generator=g),)


def bert_base() -> tuple[nn.Module, InputsFn]:
    """Default BertConfig (12 layers, hidden 768) -> BertModel; inputs (input_ids, attention_mask).

    Returns (last_hidden_state, pooler_output).
    """
    return _finish(
        BertModel(BertConfig(attn_implementation="sdpa"), add_pooling_layer=True), "last_hidden_state", "pooler_output"
    ), bert_inputs


def gpt2(n_layer: int = 2) -> tuple[nn.Module, InputsFn]:
    """GPT2Config defaults except n_layer -> GPT2Model; inputs (input_ids, attention_mask)."""
    return _finish(GPT2Model(GPT2Config(n_layer=n_layer, attn_implementation="sdpa")), "last_hidden_state"), gpt2_inputs


def llama_small() -> tuple[nn.Module, InputsFn]:
    """Small Llama (hidden 256, 2 layers, 4 heads, 2 kv heads, vocab 1000) -> LlamaForCausalLM; inputs (input_ids,)."""
    cfg = LlamaConfig(
        hidden_size=256,
        intermediate_size=688,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=1000,
        max_position_embeddings=512,
        attn_implementation="sdpa",
    )
    return _finish(LlamaForCausalLM(cfg), "logits"), llama_inputs


def wav2vec2_base() -> tuple[nn.Module, InputsFn]:
    """Default Wav2Vec2Config (base: 7 conv feature layers with group norm, a weight-normed
    positional conv, 12 layers of hidden 768) -> Wav2Vec2Model; inputs (input_values,)."""
    cfg = Wav2Vec2Config(attn_implementation="sdpa")
    return _finish(Wav2Vec2Model(cfg), "last_hidden_state", input_name="input_values"), wav2vec2_inputs


BUILDERS: dict[str, Callable[[], tuple[nn.Module, InputsFn]]] = {
    "bert_base": bert_base,
    "gpt2": gpt2,
    "llama_small": llama_small,
    "wav2vec2_base": wav2vec2_base,
}


def example_inputs(name: str, batch: int = 1, seq: int = 128) -> tuple[Tensor, ...]:
    """Positional inputs for the HF model ``name``: input_ids (int64) and, for BERT/GPT-2, a padded attention_mask."""
    fns: dict[str, InputsFn] = {
        "bert_base": bert_inputs,
        "gpt2": gpt2_inputs,
        "llama_small": llama_inputs,
        "wav2vec2_base": wav2vec2_inputs,
    }
    return fns[name](batch, seq)

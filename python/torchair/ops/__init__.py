"""``torchair.ops``: the ops TorchAir's users call by name, with a CPU meaning.

- ``npu_print``: prints tensors from inside a compiled graph, in order, without a graph break
  (an ``air::print`` op that the graph keeps as a side effect and runs in eager between
  compiled subgraphs). Same text as TorchAir's CPU kernel: ``hello, tensor: [0 1 2 ... 7 8 9]``.
- ``npu_fused_infer_attention_score``: its floating-point subset (layouts BSH, BSND, BNSD; GQA;
  a boolean mask, True = masked out; ``scale``) on ``scaled_dot_product_attention``, which
  torchair compiles to its fused attention kernel. It also runs in eager (TorchAir's raises
  there). Quantization, paged KV (``block_table``), shared prefixes, rope inputs, sparse modes
  other than 0, per-batch lengths and the softmax LSE output raise NotBuiltError.
- ``record`` / ``wait``: stream ordering; the CPU runtime has one stream, so they keep
  TorchAir's checks and order nothing. Tagged events need NPU events: NotBuiltError.
"""

from __future__ import annotations

import sys
from typing import Any

import torch

from torchair.errors import NotBuiltError

__all__ = [
    "npu_print",
    "npu_fused_infer_attention_score",
    "record",
    "wait",
    "npu_create_tagged_event",
    "npu_tagged_event_record",
    "npu_tagged_event_wait",
    "npu_record_tagged_stream",
]

_lib = torch.library.Library("air", "FRAGMENT")
_lib.define("print(Tensor[] tensors, str[] texts, int[] order, int summarize_size) -> ()")


def _format_tensor(t: torch.Tensor, summarize_size: int) -> str:
    import numpy as np

    a = t.detach().cpu()
    if a.dtype in (torch.bfloat16, torch.float16):
        a = a.float()
    edge = sys.maxsize if summarize_size < 0 else summarize_size
    threshold = sys.maxsize if summarize_size < 0 else 0
    return np.array2string(a.numpy(), separator=" ", edgeitems=edge, threshold=threshold)


def _print_impl(tensors: list[torch.Tensor], texts: list[str], order: list[int], summarize_size: int) -> None:
    # order[i] >= 0: the i-th piece is tensors[order[i]]; -1 - k: texts[k]
    pieces = [texts[-1 - k] if k < 0 else _format_tensor(tensors[k], summarize_size) for k in order]
    print(" ".join(pieces), flush=True)


_lib.impl("print", _print_impl, "CompositeExplicitAutograd")
torch.fx.node.has_side_effect(torch.ops.air.print.default)


@torch.library.register_fake("air::print")
def _print_fake(tensors: list[torch.Tensor], texts: list[str], order: list[int], summarize_size: int) -> None:
    return None


def npu_print(*args: Any, summarize_size: int = 3) -> None:
    """Prints strings and tensors, in the order the graph reaches this call. ``summarize_size``
    elements are shown at each end of every dim (-1: all)."""
    if not isinstance(summarize_size, int) or summarize_size == 0 or summarize_size < -1:
        raise ValueError(f"summarize_size must be positive or -1 for all elements, got {summarize_size}")
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    if not tensors:
        raise RuntimeError("print op requires at least one tensor")
    texts: list[str] = []
    order: list[int] = []
    n = 0
    for a in args:
        if isinstance(a, torch.Tensor):
            order.append(n)
            n += 1
        else:
            texts.append(str(a))
            order.append(-len(texts))
    torch.ops.air.print(tensors, texts, order, summarize_size)


_NOT_BUILT_ARGS = (
    "pse_shift", "dequant_scale1", "quant_scale1", "dequant_scale2", "quant_scale2", "quant_offset2",
    "antiquant_scale", "antiquant_offset", "key_antiquant_scale", "key_antiquant_offset",
    "value_antiquant_scale", "value_antiquant_offset", "block_table", "query_padding_size", "kv_padding_size",
    "key_shared_prefix", "value_shared_prefix", "actual_shared_prefix_len", "query_rope", "key_rope",
    "key_rope_antiquant_scale", "actual_seq_lengths", "actual_seq_lengths_kv",
)  # fmt: skip


def _to_bnsd(x: torch.Tensor, layout: str, heads: int, name: str) -> torch.Tensor:
    if layout == "BNSD":
        return x
    if layout == "BSND":
        return x.transpose(1, 2)
    # BSH: [B, S, heads * D]
    if x.dim() != 3 or x.shape[-1] % heads:
        raise ValueError(f"npu_fused_infer_attention_score: {name} {tuple(x.shape)} is not BSH with {heads} heads")
    b, s, h = x.shape
    return x.view(b, s, heads, h // heads).transpose(1, 2)


def npu_fused_infer_attention_score(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    *,
    atten_mask: torch.Tensor | None = None,
    num_heads: int = 1,
    scale: float = 1.0,
    pre_tokens: int = 2147483647,
    next_tokens: int = 2147483647,
    input_layout: str = "BSH",
    num_key_value_heads: int = 0,
    sparse_mode: int = 0,
    inner_precise: int = 0,
    block_size: int = 0,
    antiquant_mode: int = 0,
    key_antiquant_mode: int = 0,
    value_antiquant_mode: int = 0,
    softmax_lse_flag: bool = False,
    **quant_and_paged: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """TorchAir's fused inference attention, its floating-point subset: returns
    (attention_out in the input's layout, an empty softmax-LSE tensor)."""
    given = [k for k, v in quant_and_paged.items() if v is not None]
    unknown = [k for k in given if k not in _NOT_BUILT_ARGS]
    if unknown:
        raise TypeError(f"npu_fused_infer_attention_score() got unexpected keyword arguments {unknown}")
    if given:
        raise NotBuiltError(2, "unsupported", f"npu_fused_infer_attention_score: {', '.join(given)} not built (quantized, paged or per-length attention)")
    if softmax_lse_flag:
        raise NotBuiltError(2, "unsupported", "npu_fused_infer_attention_score: softmax_lse_flag=True is not built")
    if sparse_mode != 0 or (pre_tokens, next_tokens) != (2147483647, 2147483647):
        raise NotBuiltError(2, "unsupported", "npu_fused_infer_attention_score: sparse modes and token windows are not built (sparse_mode=0 only)")
    if input_layout not in ("BSH", "BSND", "BNSD"):
        raise NotBuiltError(2, "unsupported", f"npu_fused_infer_attention_score: input_layout {input_layout!r} is not built (BSH, BSND, BNSD)")
    kv_heads = num_key_value_heads or num_heads
    q = _to_bnsd(query, input_layout, num_heads, "query")
    k = _to_bnsd(key, input_layout, kv_heads, "key")
    v = _to_bnsd(value, input_layout, kv_heads, "value")
    mask = None if atten_mask is None else ~atten_mask.to(torch.bool)  # TorchAir: True = masked out
    out = torch.nn.functional.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, scale=scale, enable_gqa=kv_heads != q.shape[1]
    )
    if input_layout == "BSND":
        out = out.transpose(1, 2)
    elif input_layout == "BSH":
        b, n, s, d = out.shape
        out = out.transpose(1, 2).reshape(b, s, n * d)
    return out, query.new_empty(0)


def record() -> torch.Tensor:
    """A marker for ``wait``; the CPU runtime has one stream, so it is an empty tensor (as
    TorchAir's own eager implementation returns)."""
    return torch.empty(0)


def wait(tensors: list[torch.Tensor]) -> None:
    """Waits for the ops that produced ``tensors``: on one stream they are already done."""
    if not isinstance(tensors, (list, tuple)) or not tensors:
        raise ValueError("torchair.ops.wait() requires at least one tensor input")
    if not all(isinstance(t, torch.Tensor) for t in tensors):
        raise ValueError("arguments of torchair.ops.wait() must be torch.Tensor")


def _no_events(name: str) -> NotBuiltError:
    return NotBuiltError(2, "unsupported", f"torchair.ops.{name} needs NPU events (torch.npu.Event); the CPU runtime has none")


def npu_create_tagged_event(tag: str) -> Any:
    raise _no_events("npu_create_tagged_event")


def npu_tagged_event_record(event: Any) -> Any:
    raise _no_events("npu_tagged_event_record")


def npu_tagged_event_wait(event: Any) -> Any:
    raise _no_events("npu_tagged_event_wait")


def npu_record_tagged_stream(self: torch.Tensor, tagged_stream: str) -> Any:
    raise _no_events("npu_record_tagged_stream")

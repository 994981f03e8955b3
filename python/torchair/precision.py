"""torch's fp32 precision knobs, honoured for fp32 models (#40 item 1).

What torch 2.13 has, and what torchair does with each (read when a graph is compiled):

- ``torch.set_float32_matmul_precision`` writes ``torch.backends.mkldnn.matmul.fp32_precision``
  on CPU: 'highest' -> 'ieee', 'high' -> 'tf32', 'medium' -> 'bf16'. torchair reads that knob
  (so setting it directly works too, and ``torch.backends.fp32_precision``, the generic one,
  where it is 'none'):
  'ieee' (default): fp32 products, bit for bit as before;
  'tf32' ('high'): fp32 as well. A CPU has no tf32; the alternative, three bf16 passes
  (hi*hi + hi*lo + lo*hi), costs 3 vdpbf16ps per product where AVX512-BF16 does one in the
  time of 2 fp32 FMAs (torchair's bf16 GEMM runs 1.8-1.9x its f32 one on Zen 4), so it would
  be about 0.6x the fp32 GEMM: slower for no gain. 'high' only permits less precision;
  torchair keeps fp32;
  'bf16' ('medium'): the linears of frozen fp32 weights run on a bf16 copy converted once (the
  ``mixed_precision='bf16'`` machinery: lowering/lowp.py), one bf16 pass with f32
  accumulation, outputs f32.
- ``torch.backends.mkldnn.conv.fp32_precision``: 'bf16' runs convolutions of frozen weights on
  bf16 copies; 'none' (its default) follows the matmul knob (#40 asks 'medium' to cover
  convolutions; eager keeps them fp32 unless this knob says bf16); 'ieee' keeps them fp32 under
  'medium'; 'tf32' is fp32.
- ``torch.backends.mkldnn.rnn.fp32_precision``: torchair lowers no RNN op (they fall back to
  eager, which honours it). ``torch.backends.cpu`` has no precision knob in 2.13 (only
  ``get_cpu_capability``). ``torch.backends.cuda.*`` / ``cudnn.*`` are CUDA's.
- Not covered at 'medium': products of two activations (attention's ``bmm``/``sdpa``) and
  weights that are graph inputs (freezing off, training) stay fp32: libair has no bf16 kernel
  for them yet. The compile report's precision line names each product's precision.

An explicit ``mixed_precision`` option wins over the knobs.

The knobs are part of what a compiled graph depends on. dynamo's global-state guard checks
``allow_tf32`` (cuBLAS's flag, which set_float32_matmul_precision sets for 'high' and
'medium'), so a switch between 'highest' and the others recompiles by itself; 'high' <->
'medium' and direct writes to the mkldnn knobs are not guarded by dynamo, so
``guard_precision`` checks them on every call (about 1 us) and compiles again for the new
setting."""

from __future__ import annotations

import threading
from typing import Any, Callable

import torch

_get = torch._C._get_fp32_precision_getter


def _resolved(op: str) -> str:
    v = _get("mkldnn", op)
    if v == "none":
        v = _get("generic", "all")
    return "ieee" if v == "none" else v


def current() -> tuple[str, str]:
    """(matmul, conv) fp32 precision as torch's CPU knobs set them now: 'ieee', 'tf32' or
    'bf16' each; conv's 'none' follows matmul."""
    mm = _resolved("matmul")
    conv = _get("mkldnn", "conv")
    if conv == "none":
        generic = _get("generic", "all")
        conv = mm if generic == "none" else generic
    return mm, conv


def low_dtypes(setting: tuple[str, str]) -> dict[int, torch.dtype]:
    """The 16-bit type frozen fp32 weights of each rank (2: linear, 4: convolution) are
    converted to under setting; a rank not in it stays fp32."""
    out: dict[int, torch.dtype] = {}
    if setting[0] == "bf16":
        out[2] = torch.bfloat16
    if setting[1] == "bf16":
        out[4] = torch.bfloat16
    return out


def describe(setting: tuple[str, str]) -> str:
    name = {"ieee": "fp32", "tf32": "fp32 (tf32 asked: no tf32 on a CPU)", "bf16": "bf16 (one pass, f32 accumulation)"}
    return f"fp32 precision: linears {name[setting[0]]}, convolutions {name[setting[1]]}"


def guard_precision(compiled: Callable[..., Any], made_for: tuple[str, str], symbolic: bool,
                    recompile: Callable[[list[Any]], Callable[..., Any]]) -> Callable[..., Any]:
    """compiled, checked on every call against the knobs it was compiled for. A static graph
    compiled again (from the call's arguments) for a new setting, and each setting's kept;
    a graph with symbolic shapes cannot be compiled again from concrete arguments, so a
    change is refused with the fix (torch._dynamo.reset()), never run at the old precision."""
    by_setting = {made_for: compiled}
    lock = threading.Lock()

    def call(*args: Any) -> Any:
        now = current()
        fn = by_setting.get(now)
        if fn is None:
            if symbolic:
                from torchair.errors import NotBuiltError

                raise NotBuiltError(
                    2,
                    "unsupported",
                    f"torch's fp32 matmul/conv precision changed from {made_for} to {now} after this graph with "
                    "symbolic shapes was compiled, and dynamo does not guard that change; call "
                    "torch._dynamo.reset() after changing it",
                )
            with lock:
                fn = by_setting.get(now)
                if fn is None:
                    fn = by_setting[now] = recompile(list(args))
        return fn(*args)

    call.__wrapped__ = compiled  # type: ignore[attr-defined]
    return call

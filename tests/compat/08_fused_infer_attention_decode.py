"""LLM decode through torchair.ops.npu_fused_infer_attention_score, called as TorchAir LLM code
calls it: GQA (num_heads / num_key_value_heads), scale = 1/sqrt(head_dim), a boolean
atten_mask (True = masked out) over a static KV cache, input_layout "BSH" (cache [B, S, H])
and "BNSD" (cache [B, N, S, D]). Batch rows have different prompt lengths (left padding).
Each layout runs a prefill and a greedy decode loop compiled with dynamic=False; logits and
tokens are checked against an eager model whose attention is plain matmul + softmax."""

import math

import torch
import torch.nn.functional as F
import torchair
from torch import nn
from torchair.configs.compiler_config import CompilerConfig

NAME = "08_fused_infer_attention_decode"
device = torch.device("cpu")  # "npu" with torch_npu on Ascend

from compat_check import REPORTS  # torchair's report of every graph compiled here (compat_check.py)

VOCAB, HIDDEN, HEADS, KV_HEADS, HEAD_DIM, INTER, LAYERS, MAX_SEQ = 96, 64, 4, 2, 16, 128, 1, 16


def rms_norm(x, weight, eps=1e-6):
    return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def apply_rope(x, cos, sin):  # x [B, N, S, D]
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


def reference_attention(q, k, v, mask, scale):
    """Eager math: q [B, N, S, D], k/v [B, KV, T, D], mask [B, 1, S, T] True = masked out."""
    rep = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(rep, dim=1)
    v = v.repeat_interleave(rep, dim=1)
    scores = (q @ k.transpose(-1, -2)) * scale
    scores = scores.masked_fill(mask, float("-inf"))
    return scores.softmax(-1) @ v


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.Parameter(1 + 0.1 * torch.randn(HIDDEN))
        self.ln2 = nn.Parameter(1 + 0.1 * torch.randn(HIDDEN))
        self.q_proj = nn.Linear(HIDDEN, HEADS * HEAD_DIM, bias=False)
        self.k_proj = nn.Linear(HIDDEN, KV_HEADS * HEAD_DIM, bias=False)
        self.v_proj = nn.Linear(HIDDEN, KV_HEADS * HEAD_DIM, bias=False)
        self.o_proj = nn.Linear(HEADS * HEAD_DIM, HIDDEN, bias=False)
        self.gate_up = nn.Linear(HIDDEN, 2 * INTER, bias=False)
        self.down = nn.Linear(INTER, HIDDEN, bias=False)


class Model(nn.Module):
    def __init__(self, layout, fused):
        super().__init__()
        self.layout, self.fused = layout, fused
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.layers = nn.ModuleList(Layer() for _ in range(LAYERS))
        self.norm = nn.Parameter(torch.ones(HIDDEN))
        self.lm_head = nn.Linear(HIDDEN, VOCAB, bias=False)
        inv = 1.0 / (10000 ** (torch.arange(0, HEAD_DIM, 2).float() / HEAD_DIM))
        emb = torch.outer(torch.arange(MAX_SEQ).float(), inv).repeat(1, 2)
        self.register_buffer("cos", emb.cos(), persistent=False)
        self.register_buffer("sin", emb.sin(), persistent=False)
        self.scale = 1.0 / math.sqrt(HEAD_DIM)

    def attention(self, q, k_cache, v_cache, mask):
        """q [B, N, S, D]; the caches in the model's layout; returns [B, S, N * D]."""
        b, _, s, _ = q.shape
        if not self.fused:
            if self.layout == "BSH":  # [B, T, KV * D] -> [B, KV, T, D]
                k_cache = k_cache.view(b, MAX_SEQ, KV_HEADS, HEAD_DIM).transpose(1, 2)
                v_cache = v_cache.view(b, MAX_SEQ, KV_HEADS, HEAD_DIM).transpose(1, 2)
            out = reference_attention(q, k_cache, v_cache, mask, self.scale)
            return out.transpose(1, 2).reshape(b, s, HEADS * HEAD_DIM)
        if self.layout == "BSH":
            query = q.transpose(1, 2).reshape(b, s, HEADS * HEAD_DIM)
        else:
            query = q
        out, _ = torchair.ops.npu_fused_infer_attention_score(
            query, k_cache, v_cache,
            num_heads=HEADS, num_key_value_heads=KV_HEADS, input_layout=self.layout,
            scale=self.scale, atten_mask=mask,
        )  # fmt: skip
        if self.layout == "BNSD":
            out = out.transpose(1, 2).reshape(b, s, HEADS * HEAD_DIM)
        return out

    def forward(self, input_ids, positions, k_caches, v_caches, mask):
        b, s = input_ids.shape
        cos, sin = self.cos[positions][None, None], self.sin[positions][None, None]
        x = self.embed(input_ids)
        for i, layer in enumerate(self.layers):
            h = rms_norm(x, layer.ln1)
            q = apply_rope(layer.q_proj(h).view(b, s, HEADS, HEAD_DIM).transpose(1, 2), cos, sin)
            k = apply_rope(layer.k_proj(h).view(b, s, KV_HEADS, HEAD_DIM).transpose(1, 2), cos, sin)
            v = layer.v_proj(h).view(b, s, KV_HEADS, HEAD_DIM).transpose(1, 2)
            if self.layout == "BSH":  # the cache holds [B, T, KV * D]
                k = k.transpose(1, 2).reshape(b, s, KV_HEADS * HEAD_DIM)
                v = v.transpose(1, 2).reshape(b, s, KV_HEADS * HEAD_DIM)
                k_caches[i].index_copy_(1, positions, k)
                v_caches[i].index_copy_(1, positions, v)
            else:
                k_caches[i].index_copy_(2, positions, k)
                v_caches[i].index_copy_(2, positions, v)
            x = x + layer.o_proj(self.attention(q, k_caches[i], v_caches[i], mask))
            gate, up = layer.gate_up(rms_norm(x, layer.ln2)).chunk(2, dim=-1)
            x = x + layer.down(F.silu(gate) * up)
        return self.lm_head(rms_norm(x, self.norm))


def attention_mask(pads, positions):
    """[B, 1, S, MAX_SEQ], True = masked: future cache slots, and a row's left padding
    (a padding query still sees itself, so no row is fully masked)."""
    t = torch.arange(MAX_SEQ, device=device)
    pads = torch.tensor(pads, device=device)[:, None, None]
    q = positions[None, :, None]
    future = t[None, None, :] > q
    pad_key = (t[None, None, :] < pads) & (q >= pads)
    return (future | pad_key)[:, None]


def generate(model, forward, prompt, pads, steps):
    b, s = prompt.shape
    if model.layout == "BSH":
        shape = (b, MAX_SEQ, KV_HEADS * HEAD_DIM)
    else:
        shape = (b, KV_HEADS, MAX_SEQ, HEAD_DIM)
    k_caches = [torch.zeros(shape, device=device) for _ in range(LAYERS)]
    v_caches = [torch.zeros(shape, device=device) for _ in range(LAYERS)]
    positions = torch.arange(s, device=device)
    logits = forward(prompt, positions, k_caches, v_caches, attention_mask(pads, positions))[:, -1]
    out_logits, tokens = [logits], [logits.argmax(-1, keepdim=True)]
    for step in range(steps):
        positions = torch.tensor([s + step], device=device)
        logits = forward(tokens[-1], positions, k_caches, v_caches, attention_mask(pads, positions))[:, -1]
        out_logits.append(logits)
        tokens.append(logits.argmax(-1, keepdim=True))
    return out_logits, torch.cat(tokens, 1)


def main():
    from torch._dynamo.utils import counters

    config = CompilerConfig()
    config.mode = "max-autotune"
    config.experimental_config.frozen_parameter = True
    npu_backend = torchair.get_npu_backend(compiler_config=config)

    prompt = torch.randint(0, VOCAB, (2, 8), device=device)
    pads = [0, 3]  # row 1's prompt is 5 tokens, left-padded to 8
    for layout in ("BSH", "BNSD"):
        torch.manual_seed(0)
        model = Model(layout, fused=True).to(device).eval()
        reference = Model(layout, fused=False).to(device).eval()
        reference.load_state_dict(model.state_dict())
        torch._dynamo.reset()
        counters.clear()
        REPORTS.clear()
        compiled = torch.compile(model, dynamic=False, fullgraph=True, backend=npu_backend)
        with torch.no_grad():
            want_logits, want_tokens = generate(reference, reference, prompt, pads, steps=6)
            # the op also runs in eager on the CPU (TorchAir's raises there)
            eager_logits, _ = generate(model, model, prompt, pads, steps=6)
            got_logits, got_tokens = generate(model, compiled, prompt, pads, steps=6)
        for step, (g, e, w) in enumerate(zip(got_logits, eager_logits, want_logits)):
            torch.testing.assert_close(e, w, rtol=1e-4, atol=1e-4, msg=lambda m: f"{layout} eager step {step}: {m}")
            torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4, msg=lambda m: f"{layout} step {step}: {m}")
        assert torch.equal(got_tokens, want_tokens), (layout, got_tokens, want_tokens)
        assert counters["stats"]["unique_graphs"] == 2, (layout, dict(counters["stats"]))
        assert len(REPORTS) == 2, [str(r) for r in REPORTS]
        for r in REPORTS:
            fused = [op for s in r.subgraphs if s.compiled for op in s.ops if "scaled_dot_product" in op]
            assert len(fused) == LAYERS, f"{layout}: attention not compiled by torchair:\n{r}"
        print(layout, "|", " / ".join(str(r).splitlines()[0] for r in REPORTS))
    print(f"COMPAT OK {NAME}")


if __name__ == "__main__":
    main()

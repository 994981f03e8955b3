"""LLaMA-style prefill + greedy decode with a static KV cache, as LLM serving code runs it
under TorchAir: preallocated per-layer K/V cache buffers are passed to the compiled forward
as inputs and updated in place (slicing assignment in the prefill, index_copy_ at the decode
position), one graph for the prefill shape and one for every decode step (dynamic=False).
Logits, tokens and caches are checked against eager at every step."""

import torch
import torch.nn.functional as F
import torchair
from torch import nn
from torchair.configs.compiler_config import CompilerConfig

NAME = "07_llama_static_kv_cache"
device = torch.device("cpu")  # "npu" with torch_npu on Ascend

from compat_check import REPORTS  # torchair's report of every graph compiled here (compat_check.py)


class Cfg:
    vocab = 128
    hidden = 64
    heads = 4
    kv_heads = 2
    head_dim = 16
    inter = 128
    layers = 2
    max_seq = 32
    eps = 1e-6
    rope_theta = 10000.0


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim) + 0.1 * torch.randn(dim))
        self.eps = eps

    def forward(self, x):
        var = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(var + self.eps))


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.q_proj = nn.Linear(c.hidden, c.heads * c.head_dim, bias=False)
        self.k_proj = nn.Linear(c.hidden, c.kv_heads * c.head_dim, bias=False)
        self.v_proj = nn.Linear(c.hidden, c.kv_heads * c.head_dim, bias=False)
        self.o_proj = nn.Linear(c.heads * c.head_dim, c.hidden, bias=False)

    def forward(self, x, cos, sin, positions, k_cache, v_cache, mask):
        c = self.c
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, c.heads, c.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, s, c.kv_heads, c.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, s, c.kv_heads, c.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if s > 1:  # prefill: the prompt fills the start of the cache
            k_cache[:, :, :s] = k
            v_cache[:, :, :s] = v
        else:  # decode: one new position
            k_cache.index_copy_(2, positions, k)
            v_cache.index_copy_(2, positions, v)
        rep = c.heads // c.kv_heads
        keys = k_cache.repeat_interleave(rep, dim=1)
        values = v_cache.repeat_interleave(rep, dim=1)
        out = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)
        return self.o_proj(out.transpose(1, 2).reshape(b, s, c.heads * c.head_dim))


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.gate_proj = nn.Linear(c.hidden, c.inter, bias=False)
        self.up_proj = nn.Linear(c.hidden, c.inter, bias=False)
        self.down_proj = nn.Linear(c.inter, c.hidden, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.input_layernorm = RMSNorm(c.hidden, c.eps)
        self.self_attn = Attention(c)
        self.post_attention_layernorm = RMSNorm(c.hidden, c.eps)
        self.mlp = MLP(c)

    def forward(self, x, cos, sin, positions, k_cache, v_cache, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, positions, k_cache, v_cache, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaForCausalLM(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.embed_tokens = nn.Embedding(c.vocab, c.hidden)
        self.layers = nn.ModuleList(DecoderLayer(c) for _ in range(c.layers))
        self.norm = RMSNorm(c.hidden, c.eps)
        self.lm_head = nn.Linear(c.hidden, c.vocab, bias=False)
        inv_freq = 1.0 / (c.rope_theta ** (torch.arange(0, c.head_dim, 2).float() / c.head_dim))
        freqs = torch.outer(torch.arange(c.max_seq).float(), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos_cached", emb.cos(), persistent=False)
        self.register_buffer("sin_cached", emb.sin(), persistent=False)

    def forward(self, input_ids, positions, k_caches, v_caches):
        c = self.c
        cos = self.cos_cached[positions][None, None]  # [1, 1, s, d]
        sin = self.sin_cached[positions][None, None]
        # bool mask over the whole static cache: True = attend (SDPA's convention)
        cache_pos = torch.arange(c.max_seq, device=input_ids.device)
        mask = (cache_pos[None, :] <= positions[:, None])[None, None]  # [1, 1, s, max_seq]
        x = self.embed_tokens(input_ids)
        for i, layer in enumerate(self.layers):
            x = layer(x, cos, sin, positions, k_caches[i], v_caches[i], mask)
        return self.lm_head(self.norm(x))


def new_cache(c, batch):
    shape = (batch, c.kv_heads, c.max_seq, c.head_dim)
    return (
        [torch.zeros(shape, device=device) for _ in range(c.layers)],
        [torch.zeros(shape, device=device) for _ in range(c.layers)],
    )


def generate(forward, prompt, steps, c):
    """Greedy decoding; returns the logits of every step, the tokens and the caches."""
    k_caches, v_caches = new_cache(c, prompt.shape[0])
    s = prompt.shape[1]
    logits = forward(prompt, torch.arange(s, device=device), k_caches, v_caches)
    all_logits = [logits[:, -1]]
    token = logits[:, -1].argmax(-1, keepdim=True)
    tokens = [token]
    for step in range(steps):
        pos = torch.tensor([s + step], device=device)
        logits = forward(token, pos, k_caches, v_caches)
        all_logits.append(logits[:, -1])
        token = logits[:, -1].argmax(-1, keepdim=True)
        tokens.append(token)
    return all_logits, torch.cat(tokens, dim=1), k_caches, v_caches


def main():
    torch.manual_seed(0)
    c = Cfg()
    model = LlamaForCausalLM(c).to(device).eval()

    config = CompilerConfig()
    config.mode = "max-autotune"
    config.experimental_config.frozen_parameter = True
    config.experimental_config.keep_inference_input_mutations = True
    npu_backend = torchair.get_npu_backend(compiler_config=config)
    compiled_forward = torch.compile(model.forward, dynamic=False, fullgraph=True, backend=npu_backend)

    prompt = torch.randint(0, c.vocab, (2, 8), device=device)
    steps = 10
    from torch._dynamo.utils import counters

    counters.clear()
    with torch.no_grad():
        ref_logits, ref_tokens, ref_k, ref_v = generate(model.forward, prompt, steps, c)
        got_logits, got_tokens, got_k, got_v = generate(compiled_forward, prompt, steps, c)

    for step, (g, r) in enumerate(zip(got_logits, ref_logits)):
        torch.testing.assert_close(g, r, rtol=1e-4, atol=1e-4, msg=lambda m: f"step {step}: {m}")
    assert torch.equal(got_tokens, ref_tokens), (got_tokens, ref_tokens)
    for i in range(c.layers):
        torch.testing.assert_close(got_k[i], ref_k[i], rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(got_v[i], ref_v[i], rtol=1e-4, atol=1e-4)

    # one graph for the prefill, one serving every decode step
    graphs = counters["stats"]["unique_graphs"]
    assert graphs == 2, f"expected 2 graphs (prefill, decode), dynamo compiled {graphs}"
    assert len(REPORTS) == 2, [str(r) for r in REPORTS]
    for r in REPORTS:
        # the attention, projections, norms and rope run in torchair's C runtime; only the
        # cache writes (copy_ / index_put into the input buffers) may run in eager
        assert r.compiled_ops > 0.9 * r.total_ops, str(r)
        assert {op for _, op, _ in r.fallbacks} <= {"aten.copy_.default", "aten.index_put.default"}, str(r)
        assert any("scaled_dot_product" in op for s in r.subgraphs if s.compiled for op in s.ops), str(r)
    print("\n".join(str(r).splitlines()[0] for r in REPORTS))
    print(f"COMPAT OK {NAME}")


if __name__ == "__main__":
    main()

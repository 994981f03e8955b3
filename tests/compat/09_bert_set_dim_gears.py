"""A BERT-style encoder served at several batch sizes and sequence lengths declared with
torchair.inference.set_dim_gears on every input (TorchAir's gear mode for inference serving),
compiled with dynamic=False. One compile must serve every gear: dynamo's unique_graphs stays 1
after counters.clear(). Outputs (sequence output and pooled output) are checked against eager
for each (batch, seq) gear, with right-padded attention masks."""

import torch
import torch.nn.functional as F
import torchair
from torch import nn
from torchair.configs.compiler_config import CompilerConfig
from torchair.inference import set_dim_gears

NAME = "09_bert_set_dim_gears"
device = torch.device("cpu")  # "npu" with torch_npu on Ascend

from compat_check import REPORTS  # torchair's report of every graph compiled here (compat_check.py)

VOCAB, HIDDEN, HEADS, INTER, LAYERS, MAX_POS = 200, 64, 4, 128, 1, 128


class SelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(HIDDEN, 3 * HIDDEN)
        self.out = nn.Linear(HIDDEN, HIDDEN)
        self.norm = nn.LayerNorm(HIDDEN, eps=1e-12)

    def forward(self, x, ext_mask):
        b, s, _ = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, HEADS, HIDDEN // HEADS).permute(2, 0, 3, 1, 4)
        ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=ext_mask)
        ctx = ctx.transpose(1, 2).reshape(b, s, HIDDEN)
        return self.norm(x + self.out(ctx))


class EncoderLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention = SelfAttention()
        self.intermediate = nn.Linear(HIDDEN, INTER)
        self.output = nn.Linear(INTER, HIDDEN)
        self.norm = nn.LayerNorm(HIDDEN, eps=1e-12)

    def forward(self, x, ext_mask):
        x = self.attention(x, ext_mask)
        return self.norm(x + self.output(F.gelu(self.intermediate(x))))


class Bert(nn.Module):
    def __init__(self):
        super().__init__()
        self.word_embeddings = nn.Embedding(VOCAB, HIDDEN)
        self.position_embeddings = nn.Embedding(MAX_POS, HIDDEN)
        self.token_type_embeddings = nn.Embedding(2, HIDDEN)
        self.emb_norm = nn.LayerNorm(HIDDEN, eps=1e-12)
        self.layers = nn.ModuleList(EncoderLayer() for _ in range(LAYERS))
        self.pooler = nn.Linear(HIDDEN, HIDDEN)

    def forward(self, input_ids, attention_mask, token_type_ids):
        s = input_ids.shape[1]
        pos = torch.arange(s, device=input_ids.device)[None]
        x = self.word_embeddings(input_ids) + self.position_embeddings(pos) + self.token_type_embeddings(token_type_ids)
        x = self.emb_norm(x)
        # additive mask [B, 1, 1, S]: 0 to attend, a large negative number for padding
        ext = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        for layer in self.layers:
            x = layer(x, ext)
        return x, torch.tanh(self.pooler(x[:, 0]))


def inputs(batch, seq, gen):
    ids = torch.randint(0, VOCAB, (batch, seq), generator=gen).to(device)
    mask = torch.ones(batch, seq, dtype=torch.int64)
    for b in range(1, batch):  # right padding: row b drops its last b * seq / (2 * batch) tokens
        mask[b, seq - (b * seq) // (2 * batch) :] = 0
    types = torch.zeros(batch, seq, dtype=torch.int64)
    types[:, seq // 2 :] = 1
    return ids, mask.to(device), types.to(device)


def main():
    from torch._dynamo.utils import counters

    torch.manual_seed(0)
    model = Bert().to(device).eval()
    config = CompilerConfig()
    config.mode = "max-autotune"
    config.experimental_config.frozen_parameter = True
    npu_backend = torchair.get_npu_backend(compiler_config=config)
    compiled = torch.compile(model, dynamic=False, fullgraph=True, backend=npu_backend)

    batch_gears, seq_gears = [2, 4, 8], [16, 32, 64]
    gen = torch.Generator().manual_seed(1)
    counters.clear()
    served = []
    for batch, seq in [(2, 16), (4, 32), (8, 64), (2, 64), (8, 16), (4, 16)]:
        ids, mask, types = inputs(batch, seq, gen)
        for t in (ids, mask, types):
            set_dim_gears(t, {0: batch_gears, 1: seq_gears})
        with torch.no_grad():
            want = model(ids, mask, types)
            got = compiled(ids, mask, types)
        torch.testing.assert_close(got[0], want[0], rtol=1e-4, atol=1e-4, msg=lambda m: f"gear {batch}x{seq}: {m}")
        torch.testing.assert_close(got[1], want[1], rtol=1e-4, atol=1e-4, msg=lambda m: f"gear {batch}x{seq}: {m}")
        served.append((batch, seq))

    graphs = counters["stats"]["unique_graphs"]
    assert graphs == 1, f"one compile should serve every gear, dynamo compiled {graphs} graphs"
    assert len(REPORTS) == 1, [str(r) for r in REPORTS]
    report = REPORTS[0]
    assert report.compiled_ops > 0.9 * report.total_ops, str(report)
    print(str(report).splitlines()[0])
    print("gears served:", served)
    print(f"COMPAT OK {NAME}")


if __name__ == "__main__":
    main()

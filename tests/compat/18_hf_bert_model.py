"""A Hugging Face transformers BertModel (random weights from a small BertConfig; nothing is
downloaded) compiled with get_npu_backend, frozen_parameter and dynamic=False, called with
keyword arguments as serving code calls it (input_ids, attention_mask with right padding,
token_type_ids), for several batches of one shape. last_hidden_state and pooler_output are checked against
eager; torchair must compile the whole graph."""

import sys

import torch
import torchair
from torchair.configs.compiler_config import CompilerConfig

NAME = "18_hf_bert_model"
device = torch.device("cpu")  # "npu" with torch_npu on Ascend

try:
    from transformers import BertConfig, BertModel
except ImportError:
    print(f"transformers is not installed: skipped\nCOMPAT OK {NAME}")
    sys.exit(0)

from compat_check import REPORTS  # torchair's report of every graph compiled here (compat_check.py)


def batch(b, s, gen):
    ids = torch.randint(0, 512, (b, s), generator=gen)
    mask = torch.ones(b, s, dtype=torch.int64)
    mask[1:, s - s // 3 :] = 0  # every row but the first is right-padded
    types = torch.zeros(b, s, dtype=torch.int64)
    types[:, s // 2 :] = 1
    return {"input_ids": ids.to(device), "attention_mask": mask.to(device), "token_type_ids": types.to(device)}


def main():
    config_hf = BertConfig(
        vocab_size=512, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=128, max_position_embeddings=128,
    )  # fmt: skip
    torch.manual_seed(0)
    model = BertModel(config_hf).to(device).eval()

    config = CompilerConfig()
    config.mode = "max-autotune"
    config.experimental_config.frozen_parameter = True
    npu_backend = torchair.get_npu_backend(compiler_config=config)
    compiled = torch.compile(model, dynamic=False, fullgraph=True, backend=npu_backend)

    gen = torch.Generator().manual_seed(1)
    for _ in range(3):
        inputs = batch(3, 16, gen)
        with torch.no_grad():
            want = model(**inputs)
            got = compiled(**inputs)
        torch.testing.assert_close(got.last_hidden_state, want.last_hidden_state, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(got.pooler_output, want.pooler_output, rtol=1e-4, atol=1e-4)

    assert len(REPORTS) == 1, [str(r) for r in REPORTS]
    for r in REPORTS:
        assert r.compiled_ops == r.total_ops and not r.fallbacks, str(r)
        assert r.freezing == "on", str(r)
        ops = [op for s in r.subgraphs if s.compiled for op in s.ops]
        assert sum("scaled_dot_product" in op for op in ops) == config_hf.num_hidden_layers, str(r)
    print("\n".join(str(r).splitlines()[0] for r in REPORTS))
    print(f"COMPAT OK {NAME}")


if __name__ == "__main__":
    main()

"""The dynamic_axes option (#33, python/torchair/dynamic_axes.py): the declared axes of the
forward's arguments are symbols from the first compile, so one graph serves every size,
batch 1 included; ranges and shared names are checked on every call; bad values are
OptionErrors that say what is wrong."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import torchair
from torchair.dynamic_axes import DynamicAxesError
from torchair.errors import OptionError
from tests.python._compile import compile_recording, fallbacks

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


class MyNLPModel(nn.Module):
    """The article's NLP model: an embedding and a transformer encoder."""

    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(32000, 64)
        layer = nn.TransformerEncoderLayer(64, 4, 128, batch_first=True)
        self.transformer = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

    def forward(self, input_ids):
        x = self.embedding(input_ids)
        return self.transformer(x)


def _option_error(call, message):
    """call() raises an OptionError matching message: directly, or (raised in the backend at
    compile time) inside dynamo's BackendCompilerFailed, which carries it."""
    with pytest.raises(Exception) as caught:
        call()
    inner = getattr(caught.value, "inner_exception", caught.value)
    assert isinstance(inner, OptionError), repr(caught.value)
    assert message in str(inner), str(inner)


def _graphs(reports):
    return sum(1 for r in reports if r.graph == "inference")


def _nlp():
    torch.manual_seed(0)
    return MyNLPModel().eval()


def test_the_articles_nlp_example_compiles_once_for_every_length_and_batch():
    model = _nlp()
    options = {"dynamic_axes": {"input_ids": {0: "batch_size", 1: "seq_len"}}, "enable_dynamic_shape": True}
    compiled, reports = compile_recording(model, options)
    for batch in (1, 3):
        for seq_len in (32, 64, 128, 512):
            x = torch.randint(0, 32000, (batch, seq_len))
            with torch.no_grad():
                out, want = compiled(x), model(x)
            torch.testing.assert_close(out, want, rtol=1e-4, atol=1e-4)
            assert _graphs(reports) == 1, (batch, seq_len)
    assert not fallbacks(reports), fallbacks(reports)


def test_through_torch_compile_with_options_and_no_marks_left_on_the_callers_tensors():
    """The plain path: torch.compile(backend="torchair", options=...); dynamo traces the frame
    twice (the restart) and compiles once; the caller's tensors keep no dynamo marks."""
    from torch._dynamo.utils import counters

    model = _nlp()
    counters.clear()
    compiled = torch.compile(model, backend="torchair", options={"dynamic_axes": {"input_ids": {1: "seq"}}})
    x = torch.randint(0, 32000, (2, 40))
    with torch.no_grad():
        compiled(x)
        for n in (7, 300):
            y = torch.randint(0, 32000, (2, n))
            torch.testing.assert_close(compiled(y), model(y), rtol=1e-4, atol=1e-4)
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])
    assert not [a for a in vars(x) if "dynamo" in a or "torchair" in a], vars(x)


def _bert():
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    cfg = BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=1000)
    return BertModel(cfg).eval()


AXES = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}


@pytest.mark.parametrize("how", ["module", "forward"])
@pytest.mark.parametrize("first", [(1, 8), (2, 8)], ids=["batch-1-first", "batch-2-first"])
def test_bert_keyword_arguments_one_graph(how, first):
    model = _bert()
    reference = _bert()
    backend_model = model
    if how == "module":
        compiled, reports = compile_recording(model, {"dynamic_axes": AXES})
    else:
        model.forward, reports = compile_recording(model.forward, {"dynamic_axes": AXES})
        compiled = model
    for shape in [first, (3, 64), (1, 128), (8, 77), (2, 17)]:
        ids = torch.randint(0, 1000, shape)
        mask = torch.ones(shape, dtype=torch.long)
        mask[:, -2:] = 0
        with torch.no_grad():
            out = compiled(input_ids=ids, attention_mask=mask).last_hidden_state
            want = reference(input_ids=ids, attention_mask=mask).last_hidden_state
        torch.testing.assert_close(out, want, rtol=1e-4, atol=1e-4)
    # a first size of 1 is a symbol: one graph; a first size of 2 or more makes a graph whose
    # sizes are 2 or more, and the first call at 1 compiles one more (dynamo's rule for 1,
    # kept after the first compile: see dynamic_axes.apply)
    assert _graphs(reports) == (1 if first[0] == 1 else 2), _graphs(reports)
    assert not fallbacks(reports), fallbacks(reports)
    del backend_model


class Two(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 16)

    def forward(self, tokens, scale):
        return self.lin(tokens) * scale


def test_positional_arguments_are_found_by_name():
    torch.manual_seed(0)
    model = Two().eval()
    compiled, reports = compile_recording(model, {"dynamic_axes": {"tokens": {0: "n"}, "scale": {0: "n"}}})
    for n, graphs in ((1, 1), (5, 1), (33, 1)):
        a, b = torch.randn(n, 16), torch.randn(n, 1)
        with torch.no_grad():
            torch.testing.assert_close(compiled(a, b), model(a, b))
        assert _graphs(reports) == graphs


def test_a_size_outside_the_declared_range_is_an_error_naming_it():
    model = _nlp()
    compiled, reports = compile_recording(
        model, {"dynamic_axes": {"input_ids": {0: ("batch", 1, 4), 1: ("seq", 1, 256)}}}
    )
    with torch.no_grad():
        compiled(torch.randint(0, 32000, (2, 16)))
        with pytest.raises(DynamicAxesError, match=r"input_ids.size\(1\) is 300, outside 'seq'"):
            compiled(torch.randint(0, 32000, (2, 300)))
        with pytest.raises(DynamicAxesError, match=r"input_ids.size\(0\) is 5, outside 'batch'"):
            compiled(torch.randint(0, 32000, (5, 16)))
        x = torch.randint(0, 32000, (4, 256))
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)
    assert _graphs(reports) == 1


def test_one_name_on_two_arguments_is_one_size():
    """Eager broadcasts a scale of 1 row against 5 tokens; the declaration says they are one
    size, so the call is refused (the guard that ties them has dynamo trace again, and the
    backend's check says why)."""
    torch.manual_seed(0)
    model = Two().eval()
    compiled, _ = compile_recording(model, {"dynamic_axes": {"tokens": {0: "n"}, "scale": {0: "n"}}})
    with torch.no_grad():
        compiled(torch.randn(4, 16), torch.randn(4, 1))
        _option_error(
            lambda: compiled(torch.randn(5, 16), torch.randn(1, 1)),
            "the axes named 'n' have different sizes: tokens.size(0) is 5, scale.size(0) is 1",
        )


def test_a_branch_on_a_declared_size_compiles_each_side_once():
    """A Python branch on the size: dynamo guards on which side it took, so each side is a
    graph of its own, symbolic within it; a size on a side seen before compiles nothing."""

    class Branchy(nn.Module):
        def forward(self, x):
            if x.shape[1] > 10:
                return x * 2
            return x - 1

    model = Branchy()
    compiled, reports = compile_recording(model, {"dynamic_axes": {"x": {1: "n"}}})
    with torch.no_grad():
        for n, graphs in ((4, 1), (6, 1), (20, 2), (33, 2), (9, 2)):
            x = torch.randn(3, n)
            torch.testing.assert_close(compiled(x), model(x))
            assert _graphs(reports) == graphs, (n, _graphs(reports))


@pytest.mark.parametrize(
    "value, message",
    [
        ([("input_ids", 0)], "must be dict or None"),
        ({}, "expected a non-empty dict"),
        ({"input_ids": [0, 1]}, "must map axis"),
        ({"input_ids": {"0": "batch"}}, "an axis is an int"),
        ({"input_ids": {0: 5}}, "expected 'name' or"),
        ({"input_ids": {0: ("b", 8, 2)}}, "min 8 is above max 2"),
        ({"input_ids": {0: ("b", 0, 1)}}, "is not dynamic"),
        ({"a": {0: ("b", 1, 8)}, "c": {0: ("b", 1, 9)}}, "two ranges"),
        ({"not a name": {0: "b"}}, "parameter names"),
    ],
)
def test_bad_values_are_option_errors(value, message):
    config = torchair.CompilerConfig()
    with pytest.raises(OptionError, match=message):
        config.dynamic_axes = value
    compiled = torch.compile(_nlp(), backend="torchair", options={"dynamic_axes": value})
    _option_error(lambda: compiled(torch.randint(0, 9, (1, 4))), message)


def test_an_unknown_argument_or_axis_is_an_error_listing_the_arguments():
    model = _nlp()
    compiled, _ = compile_recording(model, {"dynamic_axes": {"tokens": {0: "b"}}})
    _option_error(
        lambda: compiled(torch.randint(0, 32000, (1, 4))), "forward() has no argument 'tokens'; its arguments: ['input_ids']"
    )
    torch._dynamo.reset()
    compiled, _ = compile_recording(model, {"dynamic_axes": {"input_ids": {2: "b"}}})
    _option_error(lambda: compiled(torch.randint(0, 32000, (1, 4))), "'input_ids' has 2 dims, no axis 2")


def test_dynamic_axes_with_enable_dynamic_shape_false_is_refused():
    compiled = torch.compile(
        _nlp(), backend="torchair", options={"dynamic_axes": {"input_ids": {1: "s"}}, "enable_dynamic_shape": False}
    )
    _option_error(lambda: compiled(torch.randint(0, 9, (1, 4))), "enable_dynamic_shape=False refuses")


def test_get_npu_backend_config_carries_dynamic_axes():
    config = torchair.CompilerConfig()
    config.dynamic_axes = {"input_ids": {1: "seq"}}
    model = _nlp()
    compiled = torch.compile(model, backend=torchair.get_npu_backend(compiler_config=config))
    from torch._dynamo.utils import counters

    counters.clear()
    with torch.no_grad():
        for n in (8, 16, 100):
            x = torch.randint(0, 32000, (1, n))
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)
    assert counters["stats"]["unique_graphs"] == 1


def test_a_size_the_models_code_fixes_is_reported_and_stays_correct():
    """Unrolling a loop over a declared size makes it a constant of the graph: torchair says
    so (it cannot keep it symbolic) and a new size compiles a graph of its own."""

    class Unrolled(nn.Module):
        def forward(self, x):
            out = x[0]
            for i in range(1, x.shape[0]):
                out = out + x[i] * i
            return out

    model = Unrolled()
    compiled, reports = compile_recording(model, {"dynamic_axes": {"x": {0: "rows"}}})
    with pytest.warns(UserWarning, match=r"the model's code fixed x axis 0 \(rows\)"):
        with torch.no_grad():
            x = torch.randn(3, 5)
            torch.testing.assert_close(compiled(x), model(x))
    with torch.no_grad():
        x = torch.randn(4, 5)
        torch.testing.assert_close(compiled(x), model(x))
    assert _graphs(reports) == 2


def test_generate_with_declared_lengths_compiles_two_graphs_for_every_prompt():
    """transformers' generate, dynamic KV cache, the forward compiled with its lengths declared:
    the prefill graph is symbolic in the prompt's length from the first compile, the decode
    steps (a query of 1 token: LLaMA's attention is not causal there, so its own graph) one more;
    longer and shorter prompts after that compile nothing. Tokens equal eager's."""
    from torch._dynamo.utils import counters
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=500, hidden_size=128, intermediate_size=344, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    torch.manual_seed(0)
    model, reference = LlamaForCausalLM(cfg).eval(), LlamaForCausalLM(cfg).eval()
    reference.load_state_dict(model.state_dict())
    axes = {"input_ids": {1: "seq"}, "position_ids": {1: "seq"}, "cache_position": {0: "seq"},
            "attention_mask": {1: "total"}}
    model.forward = torch.compile(model.forward, backend="torchair", options={"dynamic_axes": axes})
    counters.clear()
    for prompt, new in ((12, 12), (30, 10), (5, 20), (64, 8)):
        ids = torch.randint(0, 500, (1, prompt), generator=torch.Generator().manual_seed(prompt))
        with torch.no_grad():
            got = model.generate(ids, max_new_tokens=new, do_sample=False, pad_token_id=0)
            want = reference.generate(ids, max_new_tokens=new, do_sample=False, pad_token_id=0)
        assert torch.equal(got, want), prompt
        assert counters["stats"]["unique_graphs"] == 2, (prompt, dict(counters["stats"]))


def test_generate_with_a_static_cache_compiles_two_graphs_for_every_prompt():
    """transformers' generate with a preallocated StaticCache (the KV tensors keep one length,
    max_cache_len): the prefill graph, symbolic in the prompt's length, and the decode graph;
    later prompts of other lengths compile nothing, both graphs run compiled (no fallback),
    and the tokens equal eager's. (A cache_implementation="static" generate sizes its cache
    prompt + max_new_tokens, so each new total recompiles once: dynamo then makes that length
    symbolic; docs/dynamic-shapes.md.)"""
    from torch._dynamo.utils import counters
    from transformers import LlamaConfig, LlamaForCausalLM, StaticCache

    cfg = LlamaConfig(vocab_size=500, hidden_size=128, intermediate_size=344, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    torch.manual_seed(0)
    model, reference = LlamaForCausalLM(cfg).eval(), LlamaForCausalLM(cfg).eval()
    reference.load_state_dict(model.state_dict())
    axes = {"input_ids": {1: "seq"}, "position_ids": {1: "seq"}, "cache_position": {0: "seq"},
            "attention_mask": {1: "total"}}
    model.forward, reports = compile_recording(model.forward, {"dynamic_axes": axes})
    counters.clear()
    for prompt, new in ((12, 12), (30, 10), (5, 20), (64, 8)):
        ids = torch.randint(0, 500, (1, prompt), generator=torch.Generator().manual_seed(prompt))
        with torch.no_grad():
            got = model.generate(ids, max_new_tokens=new, do_sample=False, pad_token_id=0,
                                 cache=StaticCache(config=cfg, max_cache_len=128))
            want = reference.generate(ids, max_new_tokens=new, do_sample=False, pad_token_id=0,
                                      cache=StaticCache(config=cfg, max_cache_len=128))
        assert torch.equal(got, want), prompt
        assert counters["stats"]["unique_graphs"] == 2, (prompt, dict(counters["stats"]))
    assert len(reports) == 2
    assert fallbacks(reports) == []


def test_generate_with_a_bf16_static_cache_keeps_the_cache_in_bf16():
    """A bf16 model's StaticCache: index_copy writes the new keys and values as bf16 bytes
    (lowering/index.py), no op falls back, and greedy tokens follow eager bf16's (rounding in
    another order may move a near tie, so most, not all, must agree: 42 of 42 on Zen 4)."""
    from transformers import LlamaConfig, LlamaForCausalLM, StaticCache

    cfg = LlamaConfig(vocab_size=500, hidden_size=128, intermediate_size=344, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).eval().to(torch.bfloat16)
    reference = LlamaForCausalLM(cfg).eval().to(torch.bfloat16)
    reference.load_state_dict(model.state_dict())
    model.forward, reports = compile_recording(model.forward)
    agree = total = 0
    for prompt, new in ((12, 12), (30, 10), (5, 20)):
        ids = torch.randint(0, 500, (1, prompt), generator=torch.Generator().manual_seed(prompt))
        with torch.no_grad():
            got = model.generate(ids, max_new_tokens=new, do_sample=False, pad_token_id=0,
                                 cache=StaticCache(config=cfg, max_cache_len=64))
            want = reference.generate(ids, max_new_tokens=new, do_sample=False, pad_token_id=0,
                                      cache=StaticCache(config=cfg, max_cache_len=64))
        agree += int((got[0, prompt:] == want[0, prompt:]).sum())
        total += new
    assert fallbacks(reports) == []
    steps = [s.air_report for r in reports for s in r.subgraphs]
    assert all("index_copy" in t for t in steps)
    assert agree >= 0.9 * total, (agree, total)

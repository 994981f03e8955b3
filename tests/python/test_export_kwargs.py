"""torchair.export with inputs by keyword (``kwargs=``, as torch.export takes them):
a small BERT called as ``model(input_ids=..., attention_mask=...)`` exports with
dynamic batch and sequence axes named by keyword, its file names its inputs so,
torchair.load's callable takes them by keyword or positionally (file order) and
matches eager (SPEC section 4), ``air run`` gives the same bits, and a wrong
keyword is an error that names it, at export and at call time."""

from __future__ import annotations

import copy
import pytest
import torch

import torchair
from bench.accuracy import check_accuracy
from tests.python._air_cli import air_binary, air_run
from tests.python.test_dynamic_axes import _bert
from torchair import _C
from torchair.export import ExportError
from torchair.export.write import prepare

pytestmark = pytest.mark.skipif(
    not (hasattr(_C.Graph, "save") and hasattr(_C, "open_file")), reason="this libair has no .air writer/loader"
)

SIZES = ((2, 16), (3, 9), (1, 33))
# BERT's position table has 512 rows: torch.export wants the sequence's range to say so
AXES = {name: {0: "batch", 1: ("seq", 2, 512)} for name in ("input_ids", "attention_mask")}


def _inputs(batch, seq, seed=0):
    g = torch.Generator().manual_seed(seed + 97 * batch + seq)
    ids = torch.randint(0, 1000, (batch, seq), generator=g)
    mask = torch.ones(batch, seq, dtype=torch.long)
    mask[::2, -max(1, seq // 4) :] = 0  # right padding on every second row
    return ids, mask


def _eager(model, ids, mask):
    """The fp32 and fp64 eager outputs, flattened as the file's (last_hidden_state, pooler_output)."""
    with torch.no_grad():
        r32 = model(input_ids=ids, attention_mask=mask)
        r64 = copy.deepcopy(model).double()(input_ids=ids, attention_mask=mask)
    return [r32.last_hidden_state, r32.pooler_output], [r64.last_hidden_state, r64.pooler_output]


@pytest.fixture(scope="module")
def bert_file(tmp_path_factory):
    model = _bert()
    ids, mask = _inputs(2, 16)
    path = tmp_path_factory.mktemp("kw") / "bert.air"
    torchair.export(model, (), path, kwargs={"input_ids": ids, "attention_mask": mask}, dynamic_axes=AXES)
    return model, str(path)


def test_bert_by_keyword_with_dynamic_batch_and_seq_matches_eager(bert_file):
    model, path = bert_file
    loaded = torchair.load(path)
    assert loaded.input_names == ["input_ids", "attention_mask"]
    assert [i["shape"] for i in loaded.meta["inputs"]] == [["batch", "seq"], ["batch", "seq"]]
    assert loaded.output_names == ["last_hidden_state", "pooler_output"]
    for batch, seq in SIZES:
        ids, mask = _inputs(batch, seq, seed=1)
        by_name = loaded(input_ids=ids, attention_mask=mask)
        reordered = loaded(attention_mask=mask, input_ids=ids)
        positional = loaded(ids, mask)
        mixed = loaded(ids, attention_mask=mask)
        for other in (reordered, positional, mixed):
            assert all(torch.equal(a, b) for a, b in zip(by_name, other))
        ref32, ref64 = _eager(model, ids, mask)
        assert [tuple(o.shape) for o in by_name] == [(batch, seq, 64), (batch, 64)]
        ok, detail = check_accuracy(by_name, ref32, ref64)
        assert ok, f"batch {batch} seq {seq}: {detail}"


def test_keyword_order_is_the_file_order_and_positional_inputs_come_first(tmp_path):
    model = _bert()
    ids, mask = _inputs(2, 8)
    # attention_mask first: the file takes inputs in the order the keywords were given
    path = torchair.export(model, (), tmp_path / "rev.air", kwargs={"attention_mask": mask, "input_ids": ids})
    loaded = torchair.load(path)
    assert loaded.input_names == ["attention_mask", "input_ids"]
    want = loaded(input_ids=ids, attention_mask=mask)
    assert all(torch.equal(a, b) for a, b in zip(want, loaded(mask, ids)))
    # input_ids positionally, attention_mask by keyword
    path2 = torchair.export(model, (ids,), tmp_path / "mixed.air", kwargs={"attention_mask": mask})
    loaded2 = torchair.load(path2)
    assert loaded2.input_names == ["input_ids", "attention_mask"]
    assert all(torch.equal(a, b) for a, b in zip(want, loaded2(ids, attention_mask=mask)))
    ref32, ref64 = _eager(model, ids, mask)
    ok, detail = check_accuracy(want, ref32, ref64)
    assert ok, detail


@pytest.mark.skipif(air_binary() is None, reason="no air CLI (set TORCHAIR_AIR_CLI to the built tools/air binary)")
def test_air_run_gives_load_results_bit_for_bit(bert_file, tmp_path):
    _, path = bert_file
    ids, mask = _inputs(3, 11, seed=2)
    cli = air_run(path, [ids.numpy(), mask.numpy()], tmp_path)
    outs = torchair.load(path)(input_ids=ids, attention_mask=mask)
    assert len(outs) == len(cli) == 2
    for i, (c, o) in enumerate(zip(cli, outs)):
        assert torch.equal(c, o), f"output {i} differs from air run's"


def test_load_names_a_bad_keyword(bert_file):
    _, path = bert_file
    loaded = torchair.load(path)
    ids, mask = _inputs(2, 8)
    with pytest.raises(ExportError, match=r"no input named 'token_type_ids' \(its inputs: input_ids, attention_mask\)"):
        loaded(input_ids=ids, attention_mask=mask, token_type_ids=mask)
    with pytest.raises(ExportError, match=r"missing input\(s\) 'attention_mask'"):
        loaded(input_ids=ids)
    with pytest.raises(ExportError, match="input 'input_ids' is given both positionally and by name"):
        loaded(ids, input_ids=ids, attention_mask=mask)
    with pytest.raises(ExportError, match=r"takes 2 input\(s\) \(input_ids, attention_mask\), got 3 positionally"):
        loaded(ids, mask, mask, attention_mask=mask)
    with pytest.raises(ExportError, match=r"takes 2 input\(s\) \(input_ids, attention_mask\), got 1"):
        loaded(ids)
    with pytest.raises(ExportError, match="input 'attention_mask' must be int64, got float32"):
        loaded(input_ids=ids, attention_mask=mask.float())
    with pytest.raises(ExportError, match="input 'attention_mask' axis 1 is dim 'seq' = 9, but input 'input_ids'"):
        loaded(input_ids=ids, attention_mask=torch.ones(2, 9, dtype=torch.long))


class _Extra(torch.nn.Module):
    """A forward that takes its extra inputs through **kwargs."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x, **extra):
        return self.lin(x) * extra["scale"]


class _Plain(torch.nn.Module):
    """A forward without **kwargs: a keyword it has no parameter for is refused up front."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x, scale=None):
        return self.lin(x) * scale


def test_export_names_a_bad_keyword(tmp_path):
    model = _bert()
    ids, mask = _inputs(2, 8)
    x, scale = torch.randn(3, 8), torch.randn(3, 1)
    with pytest.raises(ExportError, match=r"example keyword input 'scal' is not an argument of _Plain.forward "
                                          r"\(its arguments: x, scale\)"):
        prepare(_Plain().eval(), (x,), kwargs={"scal": scale})
    # a forward with **extra takes any keyword: one it never reads is refused as misspelt
    with pytest.raises(ExportError, match=r"does not use keyword input\(s\) 'scael' .* misspelt"):
        prepare(_Extra().eval(), (x,), kwargs={"scale": scale, "scael": scale.clone()})
    with pytest.raises(ExportError, match="'input_ids' is given both positionally and by keyword"):
        prepare(model, (ids,), kwargs={"input_ids": ids})
    with pytest.raises(ExportError, match=r"dynamic_axes names \['mask'\], which are not among the model's inputs"):
        prepare(model, (), kwargs={"input_ids": ids, "attention_mask": mask}, dynamic_axes={"mask": {0: "b"}})
    with pytest.raises(ExportError, match="example input 'attention_mask' is a list"):
        prepare(model, (), kwargs={"input_ids": ids, "attention_mask": [1, 1]})
    with pytest.raises(ExportError, match=r"example_inputs is a dict; give inputs by keyword .* kwargs="):
        prepare(model, {"input_ids": ids})
    with pytest.raises(ExportError, match=r"_Extra.forward takes 'scale' through \*\*extra, and torch.export cannot"):
        prepare(_Extra().eval(), (x,), kwargs={"scale": scale}, dynamic_axes={"x": {0: "n"}})
    assert not list(tmp_path.iterdir())


def test_a_forward_taking_var_keywords_exports_them_by_name(tmp_path):
    torch.manual_seed(0)
    model = _Extra().eval()
    x, scale = torch.randn(3, 8), torch.randn(1, 8)
    # static: torch.export takes no dynamic sizes when an input goes through **extra
    path = torchair.export(model, (x,), tmp_path / "extra.air", kwargs={"scale": scale})
    loaded = torchair.load(path)
    assert loaded.input_names == ["x", "scale"]
    assert [i["shape"] for i in loaded.meta["inputs"]] == [[3, 8], [1, 8]]
    with torch.no_grad():
        want = model(x, scale=scale)
    torch.testing.assert_close(loaded(x, scale=scale)[0], want)
    torch.testing.assert_close(loaded(scale=scale, x=x)[0], want)


def test_dynamo_export_passes_keyword_inputs(tmp_path):
    model = _bert()
    ids, mask = _inputs(2, 8)
    torchair.dynamo_export(model=model, export_path=str(tmp_path), export_name="m", dynamic=True, input_ids=ids,
                           attention_mask=mask)
    loaded = torchair.load(tmp_path / "m.air")
    assert loaded.input_names == ["input_ids", "attention_mask"]
    for batch, seq in ((2, 8), (3, 13)):  # dynamic=True: every axis the model leaves free
        ids, mask = _inputs(batch, seq, seed=3)
        ref32, ref64 = _eager(model, ids, mask)
        ok, detail = check_accuracy(loaded(input_ids=ids, attention_mask=mask), ref32, ref64)
        assert ok, detail

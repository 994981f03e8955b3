"""torchair.precompile: torch's aot_compile / save_compiled_function /
load_compiled_function with backend="torchair". Saved in one process and loaded
in a fresh one, the first call runs neither dynamo nor aot_autograd nor
torchair's lowering (the subgraphs come from the entries in the file) and gives
eager's results; a damaged file is an error, another build's file a warning and
a lowering again, a damaged entry a warning; what cannot be saved exactly
(training graphs) is refused."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch

import torchair
from torchair import _C
from torchair.cache import CacheWarning
from torchair.precompile import PrecompiledGraph, PrecompileError, PrecompileWarning
from torchair.precompile.artifact import MAGIC

pytestmark = [
    pytest.mark.usefixtures("fresh_dynamo"),
    pytest.mark.skipif(not (hasattr(_C.Graph, "save") and hasattr(_C, "load_graph")),
                       reason="this libair cannot save graphs"),
]

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

NET = """
import torch
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8, 5)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 2.0)

    def forward(self, x):
        y = self.bn(self.conv(x)).relu().mean((2, 3))
        return self.fc(y).softmax(-1) * 3.0
"""
exec(NET)  # noqa: S102  (the same class in this process and in the children)


def _call(fn, model, *args):
    """torch traced the module's forward (fn(x)) or its __call__ (fn(model, x))."""
    params = list(fn._artifacts.signature.parameters)
    return fn(model, *args) if params and params[0] == "self" else fn(*args)


def _aot(model, x):
    torch._dynamo.config.enable_aot_compile = True
    compiled = torch.compile(model, backend="torchair", fullgraph=True)
    with torch.no_grad():
        return compiled.forward.aot_compile(((x,), {}))


def _save(fn, model, path, state=None):
    """Saves fn; with state, a PrecompiledGraph of that state in place of fn's."""
    real = fn._artifacts.compiled_fn
    if state is not None:
        fn._artifacts.compiled_fn = PrecompiledGraph(state)
    try:
        fn.save_compiled_function(str(path), external_data={"model": model})
    finally:
        fn._artifacts.compiled_fn = real


def _load(model, path):
    with open(path, "rb") as f:
        return torch.compiler.load_compiled_function(f, external_data={"model": model})


@pytest.fixture
def cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCHAIR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(torch._dynamo.config, "enable_aot_compile", True)
    return tmp_path


CHILD = NET + """
import json, sys, time
import torch, torchair
torch._dynamo.config.enable_aot_compile = True
how, path = sys.argv[1], sys.argv[2]
model = Net().eval()
x = torch.randn(2, 3, 9, 7, generator=torch.Generator().manual_seed(1))
def call(fn, *args):
    params = list(fn._artifacts.signature.parameters)
    return fn(model, *args) if params and params[0] == "self" else fn(*args)
with torch.no_grad():
    if how == "save":
        fn = torch.compile(model, backend="torchair", fullgraph=True).forward.aot_compile(((x,), {}))
        fn.save_compiled_function(path, external_data={"model": model})
        out = call(fn, x)
        print(json.dumps({"out": out.tolist()}))
    else:
        import torch._functorch.aot_autograd as aot
        import torchair.backend, torchair.compiler
        def refuse(*a, **k):
            raise AssertionError("ran at load: " + str(a[:0]))
        aot.aot_module_simplified = refuse  # no aot_autograd
        torchair.backend._backend = refuse  # no dynamo compile reaching the backend
        torchair.compiler.build_subgraph = refuse  # no lowering: the subgraphs come from the file
        with open(path, "rb") as f:
            fn = torch.compiler.load_compiled_function(f, external_data={"model": model})
        out = call(fn, x)
        again = call(fn, x)
        eager = model.double()(x.double())
        print(json.dumps({"out": out.tolist(), "again": again.tolist(), "eager": eager.tolist(),
                          "used": fn._artifacts.compiled_fn.entries_used}))
"""


def test_saved_in_one_process_loaded_in_another(tmp_path):
    path = str(tmp_path / "net.pt2c")
    # the torchair this process imported (CI's source tree has no _C: the installed one is used)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.dirname(os.path.dirname(torchair.__file__)), REPO,
                                                        os.environ.get("PYTHONPATH", "")])}

    def child(how, cache):
        p = subprocess.run([sys.executable, "-c", CHILD, how, path], capture_output=True, text=True, timeout=600,
                           env={**env, "TORCHAIR_CACHE_DIR": str(tmp_path / cache)})
        assert p.returncode == 0, p.stderr[-3000:]
        return json.loads(p.stdout.strip().splitlines()[-1])

    saved = child("save", "cache-a")
    loaded = child("load", "cache-b")  # another, empty cache folder: only the file's entries
    eager = torch.tensor(loaded["eager"], dtype=torch.float64)
    for out in (saved["out"], loaded["out"], loaded["again"]):
        torch.testing.assert_close(torch.tensor(out, dtype=torch.float64), eager, rtol=1e-4, atol=1e-5)
    assert loaded["out"] == saved["out"]  # the same compiled graph: bit for bit
    assert loaded["used"] >= 1


def test_a_loaded_function_follows_weight_updates(cache_dir):
    model = Net().eval()
    x = torch.randn(2, 3, 9, 7)
    fn = _aot(model, x)
    _save(fn, model, cache_dir / "f.pt2c")
    torch._dynamo.reset()
    loaded = _load(model, cache_dir / "f.pt2c")
    with torch.no_grad():
        torch.testing.assert_close(_call(loaded, model, x), model(x), rtol=1e-4, atol=1e-5)
        model.fc.weight.mul_(-2.0)  # in place: the freezing guard rebuilds the subgraph holding it
        torch.testing.assert_close(_call(loaded, model, x), model(x), rtol=1e-4, atol=1e-5)
        other = Net().eval()  # load_compiled_function with another instance's weights
        with torch.no_grad():
            other.conv.weight.add_(0.25)
        again = _load(other, cache_dir / "f.pt2c")
        torch.testing.assert_close(_call(again, other, x), other(x), rtol=1e-4, atol=1e-5)


def _body(path):
    data = open(path, "rb").read()
    at = data.index(MAGIC)
    return data, at


def test_a_damaged_file_is_an_error(cache_dir):
    model = Net().eval()
    x = torch.randn(2, 3, 9, 7)
    fn = _aot(model, x)
    path = cache_dir / "f.pt2c"
    _save(fn, model, path)
    data, at = _body(path)
    # torch pickles our bytes whole: a byte flipped past the digest is caught by it
    flip = at + len(MAGIC) + 32 + 100
    damaged = data[:flip] + bytes([data[flip] ^ 0x40]) + data[flip + 1:]
    (cache_dir / "bad.pt2c").write_bytes(damaged)
    with pytest.raises(PrecompileError, match="damaged"):
        _load(model, cache_dir / "bad.pt2c")


def _state(fn):
    return pickle.loads(pickle.dumps(fn._artifacts.compiled_fn.state))


def test_another_build_is_a_warning_and_a_lowering_again(cache_dir):
    model = Net().eval()
    x = torch.randn(2, 3, 9, 7)
    fn = _aot(model, x)
    state = _state(fn)
    assert state["entries"]
    state["environment"]["libair_build"] = "0" * 64
    _save(fn, model, cache_dir / "f.pt2c", state)
    with pytest.warns(PrecompileWarning, match="libair_build"):
        loaded = _load(model, cache_dir / "f.pt2c")
    assert loaded._artifacts.compiled_fn.state["entries"] == {}
    with torch.no_grad():
        torch.testing.assert_close(_call(loaded, model, x), model(x), rtol=1e-4, atol=1e-5)
    assert loaded._artifacts.compiled_fn.entries_used == 0

    state = _state(fn)
    state["environment"]["torch"] = "0.0.1"
    _save(fn, model, cache_dir / "g.pt2c", state)
    with pytest.raises(PrecompileError, match="torch 0.0.1"):
        _load(model, cache_dir / "g.pt2c")


def test_a_damaged_entry_is_a_warning(cache_dir, monkeypatch):
    monkeypatch.setenv("TORCHAIR_CACHE", "0")  # only the file's entries
    model = Net().eval()
    x = torch.randn(2, 3, 9, 7)
    fn = _aot(model, x)
    state = _state(fn)
    assert state["entries"]
    state["entries"] = {k: v[: len(v) // 2] for k, v in state["entries"].items()}
    _save(fn, model, cache_dir / "f.pt2c", state)
    loaded = _load(model, cache_dir / "f.pt2c")
    with warnings.catch_warnings(record=True) as seen, torch.no_grad():
        warnings.simplefilter("always")
        out = _call(loaded, model, x)
    assert any(issubclass(w.category, CacheWarning) and "embedded entry" in str(w.message) for w in seen)
    with torch.no_grad():
        torch.testing.assert_close(out, model(x), rtol=1e-4, atol=1e-5)


def test_training_graphs_are_refused(cache_dir):
    model = Net().train()
    x = torch.randn(2, 3, 9, 7)
    compiled = torch.compile(model, backend="torchair", fullgraph=True)
    with pytest.raises(Exception, match="inference graphs only"):
        compiled.forward.aot_compile(((x,), {}))


def test_plain_torch_compile_is_unchanged(cache_dir, monkeypatch):
    """Without aot_compile the backend does not record or wrap anything."""
    import torchair.backend

    def refuse(*a, **k):
        raise AssertionError("precompiling outside aot_compile")

    monkeypatch.setattr(torchair.backend, "_precompile", refuse)
    model = Net().eval()
    x = torch.randn(2, 3, 9, 7)
    with torch.no_grad():
        out = torch.compile(model, backend="torchair")(x)
        torch.testing.assert_close(out, model(x), rtol=1e-4, atol=1e-5)


def test_the_file_holds_no_weights(cache_dir):
    model = Net().eval()
    fn = _aot(model, torch.randn(2, 3, 9, 7))
    data = PrecompiledGraph.serialize_compile_artifacts(fn._artifacts.compiled_fn)
    assert data.startswith(MAGIC)
    weights = model.conv.weight.detach().numpy().tobytes()
    assert weights[:64] not in data


def test_save_and_load_helpers(cache_dir):
    from torchair import precompile

    model = Net().eval()
    x = torch.randn(2, 3, 9, 7)
    fn = precompile.save(model, (x,), str(cache_dir / "h.pt2c"))
    torch._dynamo.reset()
    loaded = precompile.load(model, str(cache_dir / "h.pt2c"))
    with torch.no_grad():
        eager = model(x)
    torch.testing.assert_close(fn(x), eager, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(loaded(x), eager, rtol=1e-4, atol=1e-5)
    assert torch.equal(loaded(x), fn(x))
    assert loaded.compiled._artifacts.compiled_fn.entries_used >= 1


def test_serializable_guards_drops_what_torch_cannot_save():
    from types import SimpleNamespace

    from torch._dynamo.guards import CheckFunctionManager

    from torchair.precompile import serializable_guards

    bad = next(iter(CheckFunctionManager.UNSUPPORTED_SERIALIZATION_GUARD_TYPES))
    entries = [
        SimpleNamespace(is_global=False, guard_type="TENSOR_MATCH", derived_guard_types=()),
        SimpleNamespace(is_global=True, guard_type="TENSOR_MATCH", derived_guard_types=()),
        SimpleNamespace(is_global=False, guard_type=bad, derived_guard_types=()),
        SimpleNamespace(is_global=False, guard_type="BUILTIN_MATCH", derived_guard_types=(bad,)),
        SimpleNamespace(is_global=False, guard_type="TYPE_MATCH", derived_guard_types=None),
    ]
    assert serializable_guards(entries) == [True, False, False, False, True]


class _Mutates(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        x.mul_(2.0)
        return self.fc(x)


def test_an_input_mutation_is_saved_in_the_graph_or_refused(cache_dir):
    model = _Mutates().eval()
    x = torch.randn(2, 4)
    # torchair's default keeps the mutation in the ATen graph (keep_inference_input_mutations):
    # the saved graph redoes it
    fn = _aot(model, x.clone())
    _save(fn, model, cache_dir / "m.pt2c")
    torch._dynamo.reset()
    loaded = _load(model, cache_dir / "m.pt2c")
    a, b = x.clone(), x.clone()
    with torch.no_grad():
        out = _call(loaded, model, a)
        want = model(b)
    torch.testing.assert_close(a, b)
    torch.testing.assert_close(out, want, rtol=1e-4, atol=1e-5)
    # without it aot_autograd's wrapper writes the input back: not something the saved graph redoes
    torch._dynamo.reset()
    cfg = torchair.CompilerConfig()
    cfg.experimental_config.keep_inference_input_mutations = False
    compiled = torch.compile(model, backend=torchair.get_npu_backend(compiler_config=cfg), fullgraph=True)
    with torch.no_grad(), pytest.raises(Exception, match="runtime wrapper has work to do"):
        compiled.forward.aot_compile(((x.clone(),), {}))

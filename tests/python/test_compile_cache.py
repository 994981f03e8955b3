"""The compile cache (SPEC section 3.8, torchair.cache): keyed by the graph,
shapes, options and the build; a hit skips the lowering and gives the same
results; a damaged entry or an unwritable folder is a warning, never an error;
TORCHAIR_CACHE=0 turns it off. Every test points TORCHAIR_CACHE_DIR at its own
tmp_path (the session's conftest already keeps tests out of ~/.cache)."""

from __future__ import annotations

import os

import pytest
import torch

import torchair
import torchair.cache
import torchair.compiler
from torchair import _C
from torchair.cache import key as key_mod
from torchair.cache import store

pytestmark = pytest.mark.usefixtures("fresh_dynamo")

HAS_FILES = hasattr(_C.Graph, "save") and hasattr(_C, "load_graph")
needs_files = pytest.mark.skipif(not HAS_FILES, reason="this libair cannot save graphs yet")


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x):
        y = self.bn(self.conv(x)).relu().mean((2, 3))
        return self.fc(y).softmax(-1)


def _run(model, x, options=None):
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="torchair", options=options)
    with torch.no_grad():
        return compiled(x)


@pytest.fixture
def keys(monkeypatch, tmp_path):
    """The cache keys of the subgraphs compiled (the cache itself kept off the disk)."""
    monkeypatch.setenv("TORCHAIR_CACHE_DIR", str(tmp_path))
    seen: list[str] = []
    real = torchair.cache.lookup

    def spy(sub, arg_nodes, config, frozen, compile_fn):
        seen.append(key_mod.key(sub, arg_nodes, config, frozen))
        return None

    monkeypatch.setattr(torchair.cache, "lookup", spy)
    yield seen
    monkeypatch.setattr(torchair.cache, "lookup", real)


def test_the_key_follows_graph_shapes_and_options(keys):
    model = _Net().eval()
    x = torch.randn(2, 3, 8, 8)
    _run(model, x)
    first = list(keys)
    assert len(first) >= 1
    keys.clear()
    _run(_Net().eval(), x)  # another instance, same architecture and shapes: same key (weights are not in it)
    assert keys == first
    keys.clear()
    _run(model, torch.randn(3, 3, 8, 8))
    assert set(keys).isdisjoint(first)
    keys.clear()
    _run(model, x, options={"enable_operator_fusion": False})
    assert set(keys).isdisjoint(first)
    keys.clear()
    _run(model, x.double().float().contiguous(memory_format=torch.channels_last))
    assert set(keys).isdisjoint(first)  # strides are in the key


def test_training_graphs_are_not_looked_up(keys):
    model = _Net().train()
    torch._dynamo.reset()
    out = torch.compile(model, backend="torchair")(torch.randn(2, 3, 8, 8))
    out.sum().backward()
    assert keys == []


def test_the_environment_names_the_build_and_the_cpu():
    env = key_mod.environment()
    assert env["torchair"] == torchair.__version__ and env["libair"] == _C.version() and env["isa"] == _C.isa()
    assert len(env["libair_build"]) == 64 and len(env["cpu_flags"]) == 64


def test_an_unwritable_folder_is_a_warning(tmp_path):
    ro = tmp_path / "ro"
    ro.write_text("a file where the folder should be")
    with pytest.warns(store.CacheWarning, match="cannot write"):
        assert not store.write_atomically(str(ro / "sub" / "x.air"), lambda p: None)
    # a writer that fails leaves no file behind, temporary or final
    folder = tmp_path / "ok"

    def failing(p):
        with open(p, "w") as f:
            f.write("half")
        raise OSError("disk full")

    with pytest.warns(store.CacheWarning, match="disk full"):
        assert not store.write_atomically(str(folder / "y.air"), failing)
    assert os.listdir(folder) == []

    def refusing(p):
        raise ValueError("a graph the format cannot hold")

    with pytest.warns(store.CacheWarning, match="could not be saved"):
        assert not store.write_atomically(str(folder / "z.air"), refusing)
    assert os.listdir(folder) == []


def test_cache_off_and_folder_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCHAIR_CACHE_DIR", str(tmp_path))
    assert store.enabled() and store.root() == str(tmp_path)
    assert store.entry_path("ab" + "0" * 62).startswith(str(tmp_path / store.SUBDIR / "ab"))
    monkeypatch.setenv("TORCHAIR_CACHE", "0")
    assert not store.enabled()
    monkeypatch.delenv("TORCHAIR_CACHE_DIR")
    assert store.root() == os.path.join(os.path.expanduser("~"), ".cache", "torchair")


# ---- with the .air writer ---------------------------------------------------


@pytest.fixture
def builds(monkeypatch, tmp_path):
    """Counts the lowerings (build_subgraph calls): a hit makes none."""
    monkeypatch.setenv("TORCHAIR_CACHE_DIR", str(tmp_path))
    count = [0]
    real = torchair.compiler.build_subgraph

    def counting(*a, **k):
        count[0] += 1
        return real(*a, **k)

    monkeypatch.setattr(torchair.compiler, "build_subgraph", counting)
    return count


def _entries(root) -> list[str]:
    out = []
    for dirpath, _dirs, files in os.walk(root):
        out += [os.path.join(dirpath, f) for f in files if f.endswith(".air")]
    return out


@needs_files
def test_a_hit_skips_the_lowering_and_gives_the_same_results(builds, tmp_path):
    model = _Net().eval()
    x = torch.randn(2, 3, 8, 8)
    cold = _run(model, x)
    n = builds[0]
    assert n >= 1 and len(_entries(tmp_path)) == n
    warm = _run(model, x)
    assert builds[0] == n  # nothing lowered again
    assert torch.equal(cold, warm)
    # another instance of the model: its own weights are bound, not the first's
    other = _Net().eval()
    with torch.no_grad():
        other.fc.weight.mul_(2)
        ref = other(x)
    torch.testing.assert_close(_run(other, x), ref)
    assert builds[0] == n


@needs_files
def test_changed_options_or_shapes_miss(builds, tmp_path):
    model = _Net().eval()
    x = torch.randn(2, 3, 8, 8)
    _run(model, x)
    n = builds[0]
    _run(model, x, options={"enable_memory_optimization": False})
    assert builds[0] > n
    m = builds[0]
    _run(model, torch.randn(4, 3, 8, 8))
    assert builds[0] > m


@needs_files
def test_a_damaged_entry_is_a_warning_and_is_rewritten(builds, tmp_path):
    model = _Net().eval()
    x = torch.randn(2, 3, 8, 8)
    cold = _run(model, x)
    n = builds[0]
    for path in _entries(tmp_path):
        data = bytearray(open(path, "rb").read())
        data[len(data) // 2] ^= 0x5A
        open(path, "wb").write(bytes(data))
    with pytest.warns(store.CacheWarning, match="ignoring entry"):
        out = _run(model, x)
    assert builds[0] == 2 * n  # compiled again
    assert torch.equal(out, cold)
    _run(model, x)  # the rewritten entries are good
    assert builds[0] == 2 * n


@needs_files
def test_cache_off(builds, tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHAIR_CACHE", "0")
    model = _Net().eval()
    x = torch.randn(2, 3, 8, 8)
    _run(model, x)
    _run(model, x)
    assert _entries(tmp_path) == []
    assert builds[0] >= 2


@needs_files
def test_an_unwritable_cache_folder_does_not_stop_a_compile(builds, tmp_path, monkeypatch):
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    monkeypatch.setenv("TORCHAIR_CACHE_DIR", str(blocker / "cache"))
    model = _Net().eval()
    x = torch.randn(2, 3, 8, 8)
    with pytest.warns(store.CacheWarning):
        out = _run(model, x)
    with torch.no_grad():
        torch.testing.assert_close(out, model(x))

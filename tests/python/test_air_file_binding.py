"""torchair._C's .air binding (src/python/air_file.c): Graph.save to bytes and
to a path, open_file / load / load_graph, metadata, names, external
constants bound by name, and that a loaded model gives the original model's
results bit for bit. The Python export and cache build on these."""
import os

import pytest
import torch

from torchair import _C


def _empty(shape, dtype):
    return torch.empty(shape, dtype=dtype)


def _graph():
    torch.manual_seed(0)
    g = _C.Graph()
    s = g.symbol("batch")
    x = g.input(_C.F32, [s, 8], "x")
    w = torch.randn(16, 8)
    b = torch.randn(16)
    cw = g.constant(w.data_ptr(), _C.F32, [16, 8], w)
    cb = g.constant(b.data_ptr(), _C.F32, [16], b)
    (h,) = g.node("linear", [x, cw, cb])
    (h,) = g.node("leaky_relu", [h], {"negative_slope": 0.1})
    (y,) = g.node("sum", [h], {"axes": [1]})
    g.outputs([h, y])
    return g, cb, b


def test_round_trip_bytes_and_path(tmp_path):
    g, cb, b = _graph()
    ref = g.compile([torch.float32], [torch.float32] * 2, _empty)
    data = g.save(meta={"torchair.version": "0.1", "options": "{}"}, externals={"fc.bias": cb},
                  output_names=["h", "y"], num_threads=1)
    assert isinstance(data, bytes) and data[:4] == b"\x89AIR"
    ext = {"fc.bias": (b.data_ptr(), b.nbytes, b)}
    f = _C.open_file(data, externals=ext)
    assert f.meta == {"torchair.version": "0.1", "options": "{}"}
    assert f.input_names == ["x"] and f.output_names == ["h", "y"]
    assert f.ops == ["linear", "leaky_relu", "sum"]
    assert f.externals == [("fc.bias", _C.F32, (16,))]
    assert f.weight_bytes == 16 * 8 * 4 and f.compile_options["num_threads"] == 1
    path = tmp_path / "m.air"
    assert g.save(str(path), externals={"fc.bias": cb}) is None
    assert not [p for p in os.listdir(tmp_path) if ".tmp." in p]
    model, meta, ins, outs = _C.load(str(path), [torch.float32], [torch.float32] * 2, _empty, externals=ext)
    assert meta == {} and ins == ["x"] and outs == [None, None]
    m2 = f.compile([torch.float32], [torch.float32] * 2, _empty)
    for n in (3, 7):
        x = torch.randn(n, 8)
        want = ref.run([x])
        for m in (model, m2):
            got = m.run([x])
            for a, b_ in zip(want, got):
                assert torch.equal(a, b_)
    g2, meta = _C.load_graph(data, externals=ext)
    assert meta["options"] == "{}"
    m3 = g2.compile([torch.float32], [torch.float32] * 2, _empty)
    x = torch.randn(5, 8)
    assert all(torch.equal(a, c) for a, c in zip(ref.run([x]), m3.run([x])))


def test_errors():
    g, cb, b = _graph()
    data = g.save(externals={"fc.bias": cb})
    with pytest.raises(_C.Error, match="not bound"):
        _C.open_file(data).compile([torch.float32], [torch.float32] * 2, _empty)
    with pytest.raises(_C.Error, match="bytes"):
        _C.open_file(data, externals={"fc.bias": (b.data_ptr(), 4, b)})
    bad = bytearray(data)
    bad[100] ^= 0xFF
    with pytest.raises(_C.Error) as e:
        _C.open_file(bytes(bad))
    assert e.value.args[0] == 8  # AIR_BAD_FILE
    with pytest.raises(_C.Error):
        _C.open_file(b"not an air file at all, but long enough to have a header of 64 bytes....")
    with pytest.raises(TypeError):
        g.save(meta=["x"])

"""Large model outputs come from libair's output pool (src/python/
output_pool.h): pages kept mapped between calls, so writing a fresh output
does not page-fault after the heap was trimmed. What must hold: results
equal eager's, outputs the caller still holds are never reused, a freed
output's pages serve the next call, the pool keeps a bounded amount, and
small outputs stay ordinary torch.empty tensors."""

from __future__ import annotations

import gc
import resource

import pytest
import torch
import torch.nn.functional as F

from torchair import _C
from torchair.compiler import POOLED_OUTPUT_BYTES
from _compile import compile_recording

POOL_MAX_BLOCKS = 256
POOL_MAX_BYTES = 1 << 30


pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def _conv() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Conv2d(64, 256, 1).eval()  # [1, 256, 56, 56]: 3.2 MB out


def _compiled_conv():
    m = _conv()
    c, reports = compile_recording(m)
    return m, c, reports


def test_held_outputs_are_never_reused():
    """Five calls on different inputs, every output kept: each still equals
    eager on its own input afterwards, and no two share memory."""
    m, c, _ = _compiled_conv()
    xs = [torch.randn(1, 64, 56, 56) for _ in range(5)]
    with torch.no_grad():
        ys = [c(x) for x in xs]
        for x, y in zip(xs, ys):
            torch.testing.assert_close(y, m(x), rtol=1e-4, atol=1e-4)
    assert len({y.data_ptr() for y in ys}) == len(ys)
    assert ys[0].nbytes >= POOLED_OUTPUT_BYTES


def test_freed_output_pages_serve_the_next_call():
    """A call whose output was dropped leaves its pages in the pool; the next
    call of the same size takes them (a reuse, not a new mapping) and does
    not page-fault writing them."""
    m, c, _ = _compiled_conv()
    x = torch.randn(1, 64, 56, 56)
    with torch.no_grad():
        c(x)
        gc.collect()
        _, _, reused0, mapped0 = _C.output_pool_stats()
        faults0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for _ in range(10):
            y = c(x)
            del y
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults0
        _, _, reused, mapped = _C.output_pool_stats()
        torch.testing.assert_close(c(x), m(x), rtol=1e-4, atol=1e-4)
    assert reused - reused0 == 10 and mapped == mapped0, (reused0, reused, mapped0, mapped)
    # a fresh 3.2 MB output is about 780 faults; the pages kept take none
    assert faults < 200, f"{faults} minor page faults over 10 calls"


def test_pool_keeps_a_bounded_amount():
    blocks = [_C.output_block(5 << 20) for _ in range(POOL_MAX_BLOCKS + 4)]
    del blocks
    held, held_bytes, _, _ = _C.output_pool_stats()
    assert held <= POOL_MAX_BLOCKS and held_bytes <= POOL_MAX_BYTES, (held, held_bytes)
    big = _C.output_block(POOL_MAX_BYTES + 1)  # larger than the pool keeps: unmapped when freed
    del big
    assert _C.output_pool_stats()[1] <= POOL_MAX_BYTES


def test_blocks_are_writable_aligned_and_exact():
    b = _C.output_block(3 * 4096 + 12)
    t = torch.frombuffer(b, dtype=torch.uint8)
    assert t.numel() == 3 * 4096 + 12 and t.data_ptr() % 4096 == 0
    t.fill_(7)
    assert int(t.sum()) == 7 * t.numel()
    with pytest.raises(Exception):
        _C.output_block(-1)


def test_a_slightly_larger_free_block_serves():
    """A request takes a free block up to an eighth larger (the smallest
    such), so outputs whose sizes vary a little reuse memory; one more than
    an eighth larger is left for a new mapping."""
    page = 4096
    gc.collect()
    b = _C.output_block(100 * page)
    ptr = torch.frombuffer(b, dtype=torch.uint8).data_ptr()
    del b
    gc.collect()
    _, _, reused0, mapped0 = _C.output_pool_stats()
    c = _C.output_block(95 * page + 7)  # 96 pages: the 100-page block, 4 spare
    t = torch.frombuffer(c, dtype=torch.uint8)
    assert t.numel() == 95 * page + 7 and t.data_ptr() == ptr
    t[-1] = 1  # its own last byte is writable
    _, _, reused, mapped = _C.output_pool_stats()
    assert (reused, mapped) == (reused0 + 1, mapped0)
    del t, c
    gc.collect()
    d = _C.output_block(80 * page)  # 100 pages is a quarter more: a new mapping
    assert _C.output_pool_stats()[3] == mapped0 + 1
    del d


def test_small_outputs_are_ordinary_tensors():
    """Below the threshold the output is torch.empty's: resizable, like eager's."""
    m = torch.nn.Linear(16, 8).eval()
    c, _ = compile_recording(m)
    with torch.no_grad():
        y = c(torch.randn(4, 16))
    y.resize_(64)  # a pooled output's storage cannot grow; this one can


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_pooled_outputs_of_other_dtypes_and_shapes(dtype):
    torch.manual_seed(0)
    x = torch.randn(2, 8, 160, 160, dtype=dtype)  # 3.3 MB in f32, 6.6 in f64

    def f(x):
        return F.relu(x) * 2 + 1

    c, _ = compile_recording(f)
    with torch.no_grad():
        c(x)
        _, _, reused0, mapped0 = _C.output_pool_stats()
        y = c(x)
    _, _, reused, mapped = _C.output_pool_stats()
    assert reused + mapped > reused0 + mapped0  # the output is a pool block
    assert y.dtype == dtype and y.shape == x.shape and y.is_contiguous()
    torch.testing.assert_close(y, f(x))


def test_outputs_over_32_mib_stop_faulting():
    """glibc maps an allocation over 32 MiB afresh every time, so such an
    output used to cost a page fault per 4 KiB on every call, in a process
    doing nothing else (an LM head's logits: 41 MB, 12K faults a call). From
    the pool, after the first call, none."""
    x = torch.randn(10 << 20)  # 40 MiB in and out

    def f(x):
        return x * 2 + 1

    c, _ = compile_recording(f)
    with torch.no_grad():
        c(x)
        gc.collect()
        faults0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for _ in range(5):
            y = c(x)
            del y
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults0
        torch.testing.assert_close(c(x), f(x))
    assert faults < 1000, f"{faults} minor page faults over 5 calls (a fresh 40 MiB output is 10240)"

"""Eager in-place indexed writes on neuron tensors: their values equal CPU's, and the cost model charges
their records the rows they touch (trainium/projection.py, indexed_write_bytes), counted by hand."""
import pytest
import torch

from torchneuron_ext import costmodel as cm
from torchneuron_ext.profiler import op_stats, timing


pytestmark = pytest.mark.usefixtures("fresh_op_counters")


def _projected(name):
    (s,) = [s for s in op_stats() if s.name == name and s.calls_timed]
    return cm.project(s.name, s.tier, s.bytes_read // s.calls_timed, s.bytes_written // s.calls_timed, 0,
                      s.elements, s.dtype, "trn1")


def test_kv_cache_index_copy():
    cache, pos, new = torch.zeros(1, 8, 4096, 128, dtype=torch.bfloat16), torch.tensor([5]), torch.randn(
        1, 8, 1, 128, dtype=torch.bfloat16)
    dev = [t.to("neuron") for t in (cache, pos, new)]
    with timing():
        dev[0].index_copy_(2, dev[1], dev[2])
    cache.index_copy_(2, pos, new)
    torch.testing.assert_close(dev[0].cpu(), cache)
    # The new position: 8 heads x 128 bf16 (2048 B) and its int64 index (8 B) read, 2056 B written.
    assert _projected("aten::index_copy_").bytes == 2 * (2048 + 8)


def test_index_put_and_scatter_add():
    x, idx, v = torch.zeros(1000, 64), torch.tensor([1, 7, 3]), torch.randn(3, 64)
    dx, didx, dv = (t.to("neuron") for t in (x, idx, v))
    sidx = idx[:, None].expand(3, 64).contiguous()
    with timing():
        dx[didx] = dv                                  # index_put_
        dx.scatter_add_(0, sidx.to("neuron"), dv)
    x[idx] = v
    x.scatter_add_(0, sidx, v)
    torch.testing.assert_close(dx.cpu(), x)
    # x[idx] = v: 3 rows of 64 fp32 (768 B) and 3 int64 indices (24 B) read, 792 B written.
    assert _projected("aten::index_put_").bytes == 2 * 792
    # scatter_add_: 768 B of values and a 3 x 64 int64 index (1536 B) read, and the rule reads and writes as many
    # again (the index counted as rows). The device moves 768 + 1536 + 2 x 768 = 3840 B: a scatter's index, as
    # large as its source, is the rule's overcount (the record does not split it from the source).
    assert _projected("aten::scatter_add_").bytes == 3 * (768 + 1536)

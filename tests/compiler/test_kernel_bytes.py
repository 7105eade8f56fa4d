"""The bytes a compiled graph's generated kernels are recorded with (compiler/kernel_bytes.py): a buffer read
or written through an indirect index is charged the elements the kernel touches, a buffer read whole is
charged whole; hand-counted here."""
import pytest
import torch
import torch.nn.functional as F
from torch._inductor import config as inductor_config

import torchneuron_ext
from torchneuron_ext.compiler.kernel_bytes import kernel_buffer_bytes
from torchneuron_ext.profiler import op_stats, reset_timing, timing


@pytest.fixture(autouse=True)
def _fresh():
    torch._dynamo.reset()
    reset_timing()
    torchneuron_ext.clear_op_tracking()
    # Code from Inductor's cache may predate the counts (its key does not hold this backend's code).
    with inductor_config.patch(force_disable_caches=True):
        yield
    reset_timing()


def _generated(prefix):
    return [s for s in op_stats(nested=True) if s.name.startswith("compiled::cpp_") and s.calls_timed
            and prefix in s.name]


def test_embedding_fused_with_an_add_reads_the_rows_it_gathers():
    def embed(ids, table, pos):
        return F.embedding(ids, table) + pos

    table, ids, pos = torch.randn(1000, 64), torch.tensor([3, 9, 999, 3]), torch.randn(4, 64)
    f = torch.compile(embed, backend="neuron")
    args = [t.to("neuron") for t in (ids, table, pos)]
    f(*args)  # compile outside the timed region
    with timing():
        out = f(*args)
    torch.testing.assert_close(out.cpu(), embed(ids, table, pos))
    (k,) = _generated("embedding")
    # Read: the 4 int64 ids (32 B), 4 rows of the table (4 x 64 x 4 = 1024 B, not its 256,000 B) and the 4 x 64
    # fp32 positions (1024 B); written: the 4 x 64 fp32 result (1024 B). Elements: the 256 touched.
    assert (k.bytes_read, k.bytes_written, k.elements) == (32 + 1024 + 1024, 1024, 256)


def test_kv_cache_write_in_place_writes_one_position():
    def write(cache, pos, new):
        cache.index_copy_(2, pos, new)
        return cache

    cache, pos, new = torch.zeros(1, 2, 512, 16), torch.tensor([5]), torch.randn(1, 2, 1, 16)
    f = torch.compile(write, backend="neuron")
    dev = [t.to("neuron") for t in (cache, pos, new)]
    f(*dev)
    with timing():
        f(*dev)
    write(cache, pos, new)
    torch.testing.assert_close(dev[0].cpu(), cache)
    (k,) = _generated("index_copy")
    # Read: the int64 position (8 B) and the 2 heads x 16 fp32 of the new position (128 B); written: those
    # 128 B of the 65,536 B cache.
    assert (k.bytes_read, k.bytes_written, k.elements) == (8 + 128, 128, 32)


def test_whole_buffer_reads_stay_whole():
    # A reduction reads every element of its input: charged whole. Its 64 sums are stored in the output and
    # read back by the multiply, which Inductor writes in place of them (one in_out_ptr): 256 B more read.
    f = torch.compile(lambda x: x.sum(dim=1) * 2, backend="neuron")
    x = torch.randn(64, 128, device="neuron")
    f(x)
    with timing():
        out = f(x)
    torch.testing.assert_close(out.cpu(), x.cpu().sum(dim=1) * 2)
    (k,) = _generated("sum")
    assert (k.bytes_read, k.bytes_written) == (64 * 128 * 4 + 64 * 4, 64 * 4)


def test_no_counts_for_symbolic_sizes():
    # Dynamic shapes: a count would hold for one size only, so the call counts whole arguments.
    seen = []

    def spy(nodes):
        seen.append(kernel_buffer_bytes(nodes))
        return seen[-1]

    import torchneuron_ext.compiler.kernel_bytes as kb
    real, kb.kernel_buffer_bytes = kb.kernel_buffer_bytes, spy
    try:
        f = torch.compile(lambda t, i: t[i] + 1, backend="neuron", dynamic=True)
        t, i = torch.randn(100, 8, device="neuron"), torch.tensor([1, 2], device="neuron")
        with timing():
            out = f(t, i)
    finally:
        kb.kernel_buffer_bytes = real
    torch.testing.assert_close(out.cpu(), t.cpu()[i.cpu()] + 1)
    assert seen and all(c is None for c in seen)
    (k,) = [s for s in op_stats(nested=True) if s.name.startswith("compiled::cpp_") and s.calls_timed]
    assert k.bytes_read == 100 * 8 * 4 + 2 * 8


def test_a_buffer_reused_in_place_is_read_and_written():
    # The matmul's result (an extern kernel's buffer) is rewritten in place by the fused relu * 2: one
    # in_out_ptr argument under the new buffer's name, read and written whole (64 x 48 fp32 = 12,288 B).
    f = torch.compile(lambda x, w: (x @ w).relu() * 2, backend="neuron")
    x, w = torch.randn(64, 32, device="neuron"), torch.randn(32, 48, device="neuron")
    f(x, w)
    with timing():
        out = f(x, w)
    torch.testing.assert_close(out.cpu(), (x.cpu() @ w.cpu()).relu() * 2)
    (k,) = _generated("relu")
    assert (k.bytes_read, k.bytes_written, k.elements) == (12288, 12288, 3072)

"""Custom ops in the profiler and the per-op timing (named device kernels), and under torch.compile."""
from __future__ import annotations

import json

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

import torchneuron_ext
from torchneuron_ext import profiler as neuron_profiler
from torchneuron_ext.compiler import graph_breaks

ops = torch.ops.test_ops


@pytest.fixture(autouse=True)
def _library(test_ops):
    return test_ops


def test_torch_profiler_shows_a_named_device_kernel(tmp_path):
    x = torch.randn(256, device="neuron")
    ops.affine(x, 2.0, 1, False)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        for _ in range(3):
            ops.affine(x, 2.0, 1, False)
    rows = {e.key: e for e in prof.key_averages()}
    kernel = rows["neuron::test_ops::affine"]
    assert kernel.count == 3 and kernel.self_device_time_total > 0
    host = rows["test_ops::affine"]  # the launching op carries the kernel's device time
    assert host.count == 3 and host.device_time_total == pytest.approx(kernel.self_device_time_total)
    assert "neuron::test_ops::affine" in prof.key_averages().table(sort_by="self_device_time_total")
    prof.export_chrome_trace(str(tmp_path / "trace.json"))
    events = json.loads((tmp_path / "trace.json").read_text())["traceEvents"]
    lanes = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    kernels = [e for e in events if e.get("name") == "neuron::test_ops::affine"]
    assert len(kernels) == 3 and {e["cat"] for e in kernels} == {"kernel"}
    assert {lanes[(e["pid"], e["tid"])] for e in kernels} == {"NC0 hardware (kernel execution)"}


def test_per_op_timing():
    x = torch.randn(256, device="neuron")
    with neuron_profiler.timing():
        for _ in range(4):
            pos, neg = ops.split_sign(x)
    stats = {s.name: s for s in neuron_profiler.op_stats()}
    s = stats["test_ops::split_sign"]
    assert (s.tier, s.calls_timed) == ("custom", 4)
    assert 0 < s.device_total_us <= s.host_total_us
    assert (s.bytes_read, s.bytes_written) == (4 * 1024, 4 * 2 * 1024)
    assert "test_ops::split_sign" in neuron_profiler.timing_table()


def test_compiled_graph_calls_the_op():
    def fn(a, b):
        pos, neg = ops.split_sign(a * 2)
        return ops.stream_add(pos, b).sin() + neg

    a, b = torch.randn(33, device="neuron"), torch.randn(33, device="neuron")
    expected = fn(a, b).cpu()
    torchneuron_ext.clear_op_tracking()
    out = torch.compile(fn, backend="neuron", fullgraph=True)(a, b)
    torch.testing.assert_close(out.cpu(), expected)
    counts = torchneuron_ext.get_op_counts()
    assert counts["test_ops::split_sign"] == {"custom": 1} and counts["test_ops::stream_add"] == {"custom": 1}
    assert graph_breaks(fn, a, b).graph_breaks == 0


def test_compiled_with_changing_shapes():
    f = torch.compile(lambda x: ops.affine(x + 1, 3.0, 2, False), backend="neuron")
    for n in (5, 6, 7):  # the shape function needs sizes: each shape gets its graph
        x = torch.randn(n, device="neuron")
        torch.testing.assert_close(f(x).cpu(), (x.cpu() + 1) * 3 + 2)


def test_projected_on_gpsimd_with_a_launch(tmp_path):
    # A custom op's kernel is projected as GpSimd work (8 cores x 512 bit) or its bytes, plus one
    # launch; split_sign streams 4 B in and 8 B out per element, so its bytes bound it.
    from torchneuron_ext import costmodel

    x = torch.randn(1 << 20, device="neuron")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        ops.split_sign(x)
    prof.export_chrome_trace(str(tmp_path / "trace.json"))
    trace = json.loads((tmp_path / "trace.json").read_text())
    (k,) = [k for k in costmodel.project_trace(trace, "trn2").kernels if k.name == "neuron::test_ops::split_sign"]
    # Elements: its two outputs' (the larger of the outputs' total and the largest input).
    assert (k.tier, k.projection.engine, k.projection.elements) == ("custom", "dma", 2 << 20)
    want = costmodel.custom_kernel(4 << 20, 8 << 20, 2 << 20, "Float", "trn2")
    assert want.launch_s == 12e-6 and abs(k.duration_us - want.duration_s * 1e6) < 1e-6
    # Its GpSimd time, the other candidate: 2**21 fp32 elements / (8 x 16 lanes x 1.2 GHz x 2) = 6.83 us,
    # under the 12 MiB / 725 GB/s = 17.36 us of its bytes.
    assert abs(costmodel.gpsimd_s(2 << 20, "Float", costmodel.get_target("trn2")) * 1e6 - 6.827) < 1e-3
    assert abs(want.work_s * 1e6 - 17.355) < 1e-3

"""Each NKI kernel call is a named device kernel in torch.profiler and in the per-op timing (issue 6,
point 7)."""
import json

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

import torchneuron_ext
from torchneuron_ext import profiler as neuron_profiler
from torchneuron_ext.nki.torch_ops import nki_op
from tests.nki.torch.kernels import add_kernel, relu_kernel


@nki_op("nki_prof_test::relu", mutates_args=())
def nki_relu(x: torch.Tensor) -> torch.Tensor:
    return relu_kernel(x)


def _inputs():
    return torch.randn(256, 64, device="neuron"), torch.randn(256, 64, device="neuron")


def _row(prof, key):
    rows = [e for e in prof.key_averages() if e.key == key]
    assert rows, f"no row {key!r} in {[e.key for e in prof.key_averages()]}"
    return rows[0]


def test_key_averages_has_the_kernel_with_device_time():
    a, b = _inputs()
    add_kernel[2](a, b)  # warm up outside the profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        for _ in range(3):
            add_kernel[2](a, b)
        nki_relu(a)
    launch = _row(prof, "nki::add_kernel")
    assert launch.count == 3
    assert launch.self_device_time_total > 0
    device = _row(prof, "neuron::nki::add_kernel")
    assert device.count == 3
    # The device time is attributed to the launching op, as for ATen kernels.
    assert launch.self_device_time_total == pytest.approx(device.self_device_time_total, rel=1e-6)
    relu = _row(prof, "nki::relu_kernel")
    assert relu.count == 1 and relu.self_device_time_total > 0
    assert _row(prof, "nki_prof_test::relu").count == 1   # the custom op, parent of the kernel
    table = prof.key_averages().table(sort_by="self_device_time_total")
    assert "nki::add_kernel" in table


def test_chrome_trace_has_the_kernel_on_the_hardware_lane(tmp_path):
    a, b = _inputs()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        add_kernel[2](a, b)
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    kernels = [e for e in events if e.get("name") == "neuron::nki::add_kernel"]
    assert len(kernels) == 1 and kernels[0]["dur"] > 0
    cpu_ops = [e for e in events if e.get("name") == "nki::add_kernel"]
    assert len(cpu_ops) == 1
    # Linked to the launching op, and inside it in time.
    k, op = kernels[0], cpu_ops[0]
    assert k["args"]["External id"] == op["args"]["External id"]
    assert op["ts"] <= k["ts"] and k["ts"] + k["dur"] <= op["ts"] + op["dur"] + 1


def test_per_op_timing_lists_the_kernel():
    a, b = _inputs()
    with neuron_profiler.timing():
        add_kernel[2](a, b)
        add_kernel[2](a, b)
        (a + b).sum()
    stats = {s.name: s for s in neuron_profiler.op_stats()}
    s = stats["nki::add_kernel"]
    assert s.tier == "nki" and s.calls_timed == 2
    assert s.device_total_us > 0
    assert s.bytes_read == 2 * 2 * 256 * 64 * 4      # two launches, each reading a and b
    assert s.bytes_written == 2 * 256 * 64 * 4
    assert "nki::add_kernel" in neuron_profiler.timing_table()


def test_op_tracking_counts_kernel_calls():
    a, b = _inputs()
    torchneuron_ext.clear_op_tracking()
    add_kernel[2](a, b)
    nki_relu(a)
    counts = torchneuron_ext.get_op_counts()
    assert counts["nki::add_kernel"] == {"nki": 1}
    assert counts["nki::relu_kernel"] == {"nki": 1}
    assert "nki::add_kernel" in torchneuron_ext.get_executed_ops()


def test_compiled_graph_records_the_kernel():
    torch._dynamo.reset()
    a, b = _inputs()
    fn = torch.compile(lambda x, y: add_kernel[2](x, y) * 2, backend="neuron", fullgraph=True)
    fn(a, b)
    with neuron_profiler.timing():
        fn(a, b)
    # Inside the graph's one launch: a child of the graph, listed with nested=True.
    assert not any(s.name == "nki::add_kernel" and s.calls_timed for s in neuron_profiler.op_stats())
    stats = {s.name: s for s in neuron_profiler.op_stats(nested=True) if s.nested}
    assert stats["nki::add_kernel"].calls_timed == 1
    torch._dynamo.reset()


def test_host_launches_are_not_device_kernels():
    a, b = torch.randn(256, 64), torch.randn(256, 64)
    torchneuron_ext.clear_op_tracking()
    add_kernel[2](a, b)
    add_kernel[2](a.numpy(), b.numpy())
    assert "nki::add_kernel" not in torchneuron_ext.get_op_counts()

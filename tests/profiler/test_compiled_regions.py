"""A compiled graph's launch is one device kernel, as one NEFF execution is on Trainium: what runs
inside it (generated kernels, extern ATen calls) is shown as its children and never counted twice,
in key_averages() (the kernels as device rows, the graph's row its time outside them), the trace and
the report."""
from __future__ import annotations

import json
import re

import pytest
import torch
from expecttest import TestCase
from torch.profiler import ProfilerActivity, profile

import torchneuron_ext  # noqa: F401
from torchneuron_ext import _C, costmodel
from torchneuron_ext.profiler import OpStat, op_stats, summarize_trace, timing, timing_table
from torchneuron_ext.profiler.timing import format_timing_table
from torchneuron_ext.profiler.trace_events import KERNEL, REGION_KERNEL, classify
from torch.autograd.profiler_util import _format_time


def _rms_then_matmul(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    # One fused pointwise/reduction kernel and one extern mm: both kinds of child.
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)) @ w


@pytest.fixture(scope="module")
def compiled():
    x, w = torch.randn(64, 64, device="neuron"), torch.randn(64, 64, device="neuron")
    f = torch.compile(_rms_then_matmul, backend="neuron")
    torch.testing.assert_close(f(x, w).cpu(), _rms_then_matmul(x.cpu(), w.cpu()), rtol=1e-4, atol=1e-4)
    return f, x, w


@pytest.fixture(scope="module")
def trace(compiled, tmp_path_factory):
    f, x, w = compiled
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        for _ in range(3):
            f(x, w)
    path = tmp_path_factory.mktemp("trace") / "compiled.json"
    prof.export_chrome_trace(str(path))
    return prof, json.loads(path.read_text())


def _graph_events(data: dict) -> list[dict]:
    """A graph's launches, each from its first part (the trace writes the parts its kernels leave uncovered)."""
    return [e for e in data["traceEvents"] if e.get("cat") == "kernel" and "compiled::graph_" in e.get("name", "")
            and e["args"].get("part", 1) == 1]


def _us(cell: str) -> float:
    """A time cell of torch's table in microseconds."""
    for unit, scale in (("us", 1.0), ("ms", 1e3), ("s", 1e6)):
        if cell.endswith(unit):
            return float(cell[:-len(unit)]) * scale
    raise ValueError(cell)


def _device_rows(prof) -> list:
    return [e for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.PrivateUse1]


def test_key_averages_show_the_kernels_and_count_device_time_once(trace):
    prof, data = trace
    rows = {e.key: e for e in _device_rows(prof)}
    # No device annotation: torch would give it its whole span as self time again.
    assert not any(e.is_user_annotation for e in rows.values())
    # The generated kernel and the extern mm are device rows of their own, once per launch, with their time.
    kernels = [e for k, e in rows.items() if k.startswith("neuron::compiled::cpp_fused") or k == "neuron::mm.out"]
    assert len(kernels) == 2 and all(e.count == 3 and e.self_device_time_total > 0 for e in kernels)
    (graph,) = [e for k, e in rows.items() if k.startswith("neuron::compiled::graph_")]
    assert graph.count >= 3  # its time outside its kernels, in parts
    # Self NEURON over every row is the device's busy time, each launch counted once; the table's footer agrees.
    busy_us = summarize_trace(data).device_busy_us
    self_us = sum(e.self_device_time_total for e in rows.values())
    assert self_us == pytest.approx(busy_us, rel=1e-3, abs=1.0)
    footer = prof.key_averages().table(row_limit=-1).splitlines()[-1]
    assert footer == f"Self NEURON time total: {_format_time(self_us)}"
    # The host op that launched the graph sees all of it as its device total.
    region = next(e for e in prof.key_averages() if e.key.startswith("Torch-Compiled Region"))
    assert region.device_time_total == pytest.approx(busy_us, rel=1e-3, abs=1.0)


class TestTable(TestCase):
    def test_which_rows_carry_device_time(self):
        # The table's shape: which rows carry Self NEURON and how often each ran (times and generated numbers
        # masked; the table's rows sorted by name, since their order follows the measured times).
        x, w = torch.randn(64, 64, device="neuron"), torch.randn(64, 64, device="neuron")
        f = torch.compile(_rms_then_matmul, backend="neuron")
        f(x, w)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
            for _ in range(3):
                f(x, w)
        table = prof.key_averages().table(sort_by="self_device_time_total", row_limit=-1, max_name_column_width=40)
        shown = []
        header = re.split(r"\s{2,}", table.splitlines()[1].strip())
        self_neuron, calls = header.index("Self NEURON"), header.index("# of Calls")
        for line in table.splitlines():
            cells = re.split(r"\s{2,}", line.strip())
            if len(cells) == len(header) and cells[0].startswith(("neuron::", "Torch-Compiled")):
                name = re.sub(r"_\d+(?=$|\.)", "_N", re.sub(r"(Region: )\d+/\d+", r"\1N/N", cells[0]))
                shown.append(f"{name:<40} Self NEURON {'>0' if _us(cells[self_neuron]) > 0 else '0':<2}  "
                             f"calls {cells[calls]}")
        self.assertExpectedInline("\n".join(sorted(shown)), """\
Torch-Compiled Region: N/N               Self NEURON >0  calls 3
neuron::compiled::cpp_fused_add_mean_... Self NEURON >0  calls 3
neuron::compiled::graph_N                Self NEURON >0  calls 9
neuron::mm.out                           Self NEURON >0  calls 3""")


def test_trace_children_lie_inside_their_graph_on_the_hardware_lane(trace):
    _, data = trace
    c = classify(data)
    graphs = [a for a in c.activities if a.kind == KERNEL and a.op.startswith("compiled::graph_")]
    children = [a for a in c.activities if a.kind == REGION_KERNEL]
    assert len(graphs) == 3 and len(children) == 6
    lane = {a.index: c.spans.lane[a.index] for a in graphs + children}
    for k in children:
        parent = [g for g in graphs if g.ts <= k.ts and k.ts + k.dur <= g.ts + g.dur + 1e-3]
        assert parent and lane[parent[0].index] == lane[k.index], k.name
    # In the trace itself the graph's parts and its kernels never overlap: torch adds them all up.
    spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in data["traceEvents"]
                   if e.get("ph") == "X" and e.get("cat") == "kernel")
    assert all(a_end <= b_start + 1e-3 for (_, a_end), (b_start, _) in zip(spans, spans[1:]))
    parts = [e for e in data["traceEvents"] if e.get("cat") == "kernel" and "compiled::graph_" in e.get("name", "")]
    assert {e["args"]["parts"] for e in parts} == {len(parts) // 3}
    # One runtime launch per graph call: the children have no runtime span of their own.
    launches = [e for e in data["traceEvents"] if e.get("cat") == "privateuse1_runtime"]
    assert len(launches) == 3 and all(e["args"]["op"].startswith("compiled::graph_") for e in launches)


def test_report_counts_each_region_once(trace):
    _, data = trace
    s = summarize_trace(data)
    assert s.kernels == 3
    assert [r.name for r in s.ops if r.device_us > 0] == [_graph_events(data)[0]["name"][len("neuron::"):]]
    assert s.device_busy_us <= s.wall_us and s.host_dispatch_us <= s.wall_us


def test_op_stats_list_children_apart(compiled):
    f, x, w = compiled
    with timing():
        f(x, w)
        f(x, w)
    top = [s for s in op_stats() if s.calls_timed]
    assert [s.name for s in top if s.tier == "compiled"] == [n for n in (top[0].name,) if n.startswith("compiled::")]
    assert not any(s.nested for s in top) and not any(s.name == "aten::mm.out" for s in top)
    everything = [s for s in op_stats(nested=True) if s.calls_timed]
    inside = {s.name: s for s in everything if s.nested}
    assert "aten::mm.out" in inside and inside["aten::mm.out"].calls_timed == 2
    graph = next(s for s in top if s.name.startswith("compiled::graph_"))
    # The graph carries what its children moved and computed (the cost model projects it from that).
    assert graph.flops == inside["aten::mm.out"].flops == 2 * 2 * 64 * 64 * 64
    assert graph.bytes_read == sum(s.bytes_read for s in inside.values())
    assert sum(s.device_total_us for s in inside.values()) <= graph.device_total_us
    # Children project without a launch of their own; the graph pays one per call.
    t = costmodel.resolve_target("trn2")
    assert graph.projected_total_us >= 2 * t.launch_s * 1e6
    assert inside["aten::mm.out"].projected_total_us < t.launch_s * 1e6
    table = timing_table()
    head, _, rest = table.partition("inside compiled graphs")
    assert graph.name[:41] in head and "aten::mm.out" not in head and "aten::mm.out" in rest


def test_generated_kernel_bytes_read_and_written_as_inductor_says(compiled):
    # The fused kernel's parameters (Inductor's names): in_ptr0 = x (read), out_ptr0 = the row
    # means, out_ptr1 = the normalized x (written); the call's tensors alone cannot tell which.
    f, x, w = compiled
    with timing():
        f(x, w)
    fused = next(s for s in op_stats(nested=True) if s.name.startswith("compiled::cpp_fused") and s.calls_timed)
    assert (fused.bytes_read, fused.bytes_written) == (64 * 64 * 4, 64 * 4 + 64 * 64 * 4)


def test_trace_children_carry_the_read_write_split(trace):
    # The same split on the trace's child kernels, which the projected lane's args follow.
    _, data = trace
    fused = [e for e in data["traceEvents"] if e.get("cat") == "kernel" and e.get("args", {}).get("in")
             and e["name"].startswith("neuron::compiled::cpp_fused")]
    assert fused and all((e["args"]["bytes read"], e["args"]["bytes written"]) == (64 * 64 * 4, 64 * 4 + 64 * 64 * 4)
                         for e in fused), [e["args"] for e in fused]
    lane = {k.name: k for k in costmodel.project_trace(data, "trn2").kernels}
    assert lane[fused[0]["name"]].projection.bytes == 64 * 64 * 4 * 2 + 64 * 4


def test_kernel_access_from_inductor_parameter_names():
    from torchneuron_ext.compiler.wrapper_codegen import kernel_access

    assert kernel_access('extern "C"  void  kernel(float* in_out_ptr0, const float* in_ptr0, float* out_ptr0, '
                         'const int64_t ks0)') == "brw-"
    assert kernel_access("not a definition") == ""


def test_op_tracking_still_names_the_children(compiled):
    f, x, w = compiled
    torchneuron_ext.clear_op_tracking()
    f(x, w)
    ops = torchneuron_ext.get_executed_ops()
    assert "aten::mm.out" in ops or "aten::mm" in ops


def test_region_brackets_nest_and_report_their_children():
    assert _C._region_exit() == (0, 0, 0, 0, -1)  # unbalanced exit: no underflow
    a, b = torch.randn(8, 16, device="neuron"), torch.randn(16, 4, device="neuron")
    with timing():
        _C._region_enter()
        _C._region_enter()
        torch.mm(a, b)
        _C._region_exit()
        read, written, flops, _, dtype = _C._region_exit()
        torch.mm(a, b)  # outside again: a top-level kernel
    assert flops == 2 * 8 * 16 * 4 and read == (8 * 16 + 16 * 4) * 4 and written == 8 * 4 * 4
    assert dtype == 6  # c10::ScalarType::Float
    top = {s.name: s for s in op_stats()}
    assert top["aten::mm"].calls_timed == 1


def test_timing_table_text_with_children():
    graph = OpStat("compiled::graph_0", "compiled", 2, 2, 300.0, 300.0, 2 * 4096, 2 * 2048, 2 * 524288, 0, "Float",
                   40.0)
    mm = OpStat("aten::mm.out", "native", 2, 2, 200.0, 199.0, 2 * 4096, 2 * 2048, 2 * 524288, 0, "Float", 1.0,
                nested=True)
    text = format_timing_table([graph], costmodel.get_target("trn2"), [mm])
    lines = text.splitlines()
    assert lines[2].startswith("compiled::graph_0") and lines[3].startswith("inside compiled graphs")
    assert lines[4].startswith("aten::mm.out") and "199.0 us" in lines[4] or "199 us" in lines[4]

"""The HTML report's kernel view (profiler/html/kernel_view.py) on schedules built by hand, read back from the
trace nki/trace.py writes: per-lane utilisation, MFU and HBM bandwidth worked by hand, the critical path, the
top lines; the finding that names the bound, pinned; and the Kernels tab in a headless Chromium."""
from __future__ import annotations

import json

import pytest
from expecttest import TestCase

from torchneuron_ext.nki.schedule import KernelSchedule, Operand, ScheduledInstruction
from torchneuron_ext.nki.trace import kernel_trace
from torchneuron_ext.profiler.html import kernel_findings, write_html_report
from torchneuron_ext.profiler.html.headless import HeadlessChromium, find_chromium
from torchneuron_ext.profiler.html.kernel_view import format_kernel_views, kernel_views, peak_flops
from torchneuron_ext.profiler.html.page import profile_payload
from torchneuron_ext.profiler.trace_events import TraceFormatError, classify
from torchneuron_ext.trainium import targets

TRN2 = targets.by_name("trn2").physical_core()
PEAK = TRN2.tensor_peak_flops  # 128 x 128 PEs x 2 FLOPs x 2.4 GHz = 78.6432 TFLOP/s (BF16, one core)
FILE = "/kernels/my_kernel.py"


def ins(index, queue, start_us, end_us, opcode, *, line, flops=0, nbytes=0, dtype="bfloat16", deps=(), crit=None,
        core=0, wait_us=0.0, shape=(128, 128)):
    engine = queue.split(":")[0]
    n = 128 * 128 * 2 if not nbytes else nbytes
    memory_in = "hbm" if opcode == "load" else "psum" if opcode == "tensor_copy" else "sbuf"
    operands = (Operand("in", memory_in, "", shape, dtype, n),
                Operand("out", "hbm" if opcode == "store" else "psum" if engine == "tensor" else "sbuf", "", shape,
                        "float32" if engine == "tensor" else dtype, n))
    if engine == "tensor":  # stationary and moving
        operands = (Operand("in", "sbuf", "", shape, dtype, n),) + operands
    return ScheduledInstruction(index, core, engine, queue, opcode, FILE, line, start_us * 1e-6, end_us * 1e-6,
                                operands, flops, nbytes, tuple(deps), wait_us * 1e-6, crit)


def schedule(instructions, makespan_us=None, hbm_bytes=None):
    busy: dict = {}
    for i in instructions:
        busy[i.queue] = max(busy.get(i.queue, 0.0), 0.0) + (i.end_s - i.start_s)
    makespan = makespan_us * 1e-6 if makespan_us else max(i.end_s for i in instructions)
    hbm = sum(i.nbytes for i in instructions if i.engine == "dma") if hbm_bytes is None else hbm_bytes
    return KernelSchedule("trn2", list(instructions), makespan, busy, sum(i.flops for i in instructions), hbm,
                          instruction_count=len(instructions))


def view(s, kernel="my_kernel"):
    (v,) = kernel_views(classify(kernel_trace(s, kernel)))
    return v


# 4.8 us of the Tensor Engine's BF16 peak: 377,487,360 FLOPs.
FLOPS_48 = int(PEAK * 4.8e-6)


def tensor_bound(dtype="bfloat16", flops=FLOPS_48):
    """load 0-2 us (256 KiB) -> matmul 2-8 us -> PSUM copy 8-9 us -> store 9-10 us (256 KiB), a chain."""
    return schedule([
        ins(0, "dma:0", 0, 2, "load", line=5, nbytes=1 << 18, dtype=dtype),
        ins(1, "tensor", 2, 8, "nc_matmul", line=7, flops=flops, dtype=dtype, deps=(0,), crit=0, wait_us=2),
        ins(2, "vector", 8, 9, "tensor_copy", line=8, deps=(1,), crit=1, wait_us=8),
        ins(3, "dma:1", 9, 10, "store", line=9, nbytes=1 << 18, deps=(2,), crit=2, wait_us=9),
    ])


class TestNumbers(TestCase):
    def test_utilisation_mfu_and_bandwidth_worked_by_hand(self):
        v = view(tensor_bound())
        assert v.makespan_us == pytest.approx(10.0) and v.instructions == 4 and v.cores == 1
        # busy / makespan: tensor 6 of 10 us, vector 1, DMA queue 0 2, DMA queue 1 1.
        assert [(lane.lane, round(lane.utilisation, 6)) for lane in v.lanes] == [
            ("tensor", 0.6), ("vector", 0.1), ("dma:0", 0.2), ("dma:1", 0.1)]
        assert v.class_utilisation == pytest.approx({"tensor": 0.6, "vector_scalar": 0.1, "dma": 0.2})
        # MFU: 4.8 us of BF16 peak work in a 10 us makespan.
        assert v.mfu == pytest.approx(0.48)
        # HBM: 512 KiB in 10 us over trn2's 362.5 GB/s per core = 14.46%.
        assert TRN2.hbm_bytes_per_s == 362.5e9
        assert v.hbm_utilisation == pytest.approx((1 << 19) / (10e-6 * 362.5e9)) == pytest.approx(0.144631, abs=1e-6)
        assert v.bound == "tensor"

    def test_mfu_uses_the_peak_of_the_instructions_dtype(self):
        # FP32 runs at a quarter of BF16's rate, FP8 at twice (trn2): the same 4.8 us of work at each rate.
        assert peak_flops(TRN2, "float32") == PEAK / TRN2.fp32_slowdown == PEAK / 4
        assert peak_flops(TRN2, "float8_e4m3") == PEAK * TRN2.fp8_speedup == PEAK * 2
        assert view(tensor_bound("float32", int(PEAK / 4 * 4.8e-6))).mfu == pytest.approx(0.48)
        assert view(tensor_bound("float8_e4m3", int(PEAK * 2 * 4.8e-6))).mfu == pytest.approx(0.48)
        # FP32 work counted at the BF16 peak would read 4x too low.
        assert view(tensor_bound("bfloat16", int(PEAK / 4 * 4.8e-6))).mfu == pytest.approx(0.12)

    def test_a_two_core_launch_counts_both_cores_peaks(self):
        s = schedule([ins(0, "tensor", 0, 8, "nc_matmul", line=7, flops=FLOPS_48),
                      ins(0, "tensor", 0, 4, "nc_matmul", line=7, flops=FLOPS_48 // 2, core=1)])
        v = view(s)
        assert v.cores == 2 and v.makespan_us == pytest.approx(8.0)
        # (4.8 + 2.4) us of one core's peak over 8 us x 2 cores.
        assert v.mfu == pytest.approx(7.2 / 16)
        assert [(lane.core, lane.lane, round(lane.utilisation, 6)) for lane in v.lanes] == [
            (0, "tensor", 1.0), (1, "tensor", 0.5)]

    def test_critical_path_and_top_lines(self):
        v = view(tensor_bound())
        assert [(r["index"], r["lane"], r["line"]) for r in v.critical_path] == [
            (0, "dma:0", "my_kernel.py:5"), (1, "tensor", "my_kernel.py:7"), (2, "vector", "my_kernel.py:8"),
            (3, "dma:1", "my_kernel.py:9")]
        assert v.critical_by_class == pytest.approx({"tensor": 6.0, "vector_scalar": 1.0, "dma": 3.0, "waits": 0.0})
        assert [(line.line, round(line.time_us, 6), round(line.share, 6)) for line in v.top_lines] == [
            ("my_kernel.py:7", 6.0, 0.6), ("my_kernel.py:5", 2.0, 0.2), ("my_kernel.py:8", 1.0, 0.1),
            ("my_kernel.py:9", 1.0, 0.1)]
        # 2 transfers' fixed cost (trn2: 1.3 us each) over the 3 us the DMA queues were busy.
        assert v.dma_transfers == 2 and v.dma_fixed_share == pytest.approx(2 * 1.3 / 3)

    def test_a_gap_on_the_critical_path_counts_as_waiting(self):
        s = schedule([ins(0, "dma:0", 0, 2, "load", line=5, nbytes=1 << 16),
                      ins(1, "vector", 3, 4, "tensor_scalar", line=6, deps=(0,), crit=0, wait_us=3)])
        assert view(s).critical_by_class == pytest.approx({"tensor": 0.0, "vector_scalar": 1.0, "dma": 2.0, "waits": 1.0})

    def test_launches_of_one_kernel_are_one_view_of_the_longest(self):
        t = kernel_trace(tensor_bound(), "k")
        short = schedule([ins(0, "vector", 0, 1, "tensor_scalar", line=3)])
        from torchneuron_ext.nki.trace import launch_events
        t["traceEvents"] += launch_events(short, "k", launch=1, origin_us=100.0, flow_id_base=1000)
        (v,) = kernel_views(classify(t))
        assert v.launches == 2 and v.makespan_us == pytest.approx(10.0) and v.total_us == pytest.approx(11.0)

    def test_a_trace_without_instructions_has_no_views(self):
        assert kernel_views(classify({"traceEvents": []})) == []

    def test_a_malformed_profile_is_refused_naming_the_kernel(self):
        for field, value, problem in (("flops", "many", "invalid literal for int"), ("target", "trn9", "trn9")):
            t = kernel_trace(tensor_bound(), "k")
            for e in t["traceEvents"]:
                if e.get("cat") in ("nki_instruction", "nki_launch") and field in e["args"]:
                    e["args"][field] = value
            with pytest.raises(TraceFormatError, match=f"malformed NKI instruction profile of kernel 'k'.*{problem}"):
                kernel_views(classify(t))


def _bounds(s):
    (f,) = kernel_findings([view(s)])
    return f"[{f.key}] {f.title}\n  {f.detail}\n  next: {f.advice}\n"


class TestFindings(TestCase):
    def test_tensor_engine_bound(self):
        self.assertExpectedInline(_bounds(tensor_bound()), """\
[nki_kernel_tensor] NKI kernel my_kernel: Tensor Engine-bound
  Projected on trn2: 10.0 us for 4 instructions; busiest lane per class: Tensor 60%, Vector/Scalar 10%, DMA 20%; MFU 48.0%, HBM bandwidth 14.5%. Critical path: 4 instructions (Tensor 6.0 us, Vector/Scalar 1.0 us, DMA 3.0 us).
  next: Feed the Tensor Engine full tiles: BF16 or FP8 operands (FP32 runs at a quarter of the rate), a 128-row stationary and 512-column moving tile per nc_matmul, and accumulate in PSUM across K instead of copying partial sums out.
""")

    def test_tensor_engine_busy_with_small_instructions(self):
        # Busy 6 of 10 us, but the work is 1.2 us of peak: fixed instruction costs dominate.
        self.assertExpectedInline(_bounds(tensor_bound(flops=FLOPS_48 // 4)), """\
[nki_kernel_tensor] NKI kernel my_kernel: Tensor Engine-bound
  Projected on trn2: 10.0 us for 4 instructions; busiest lane per class: Tensor 60%, Vector/Scalar 10%, DMA 20%; MFU 12.0%, HBM bandwidth 14.5%. Critical path: 4 instructions (Tensor 6.0 us, Vector/Scalar 1.0 us, DMA 3.0 us).
  next: The Tensor Engine is busy but does little work per busy cycle (MFU under half its utilisation): its instructions are too small for their fixed cost. Give each nc_matmul a 128-row stationary and up to 512 moving columns, and accumulate in PSUM across K.
""")

    def test_vector_scalar_bound(self):
        s = schedule([ins(0, "dma:0", 0, 2, "load", line=5, nbytes=1 << 16),
                      ins(1, "vector", 2, 7, "tensor_tensor", line=6, deps=(0,), crit=0),
                      ins(2, "scalar", 2, 6, "activation", line=7, deps=(0,)),
                      ins(3, "dma:1", 7, 8, "store", line=8, nbytes=1 << 16, deps=(1,), crit=1)])
        self.assertExpectedInline(_bounds(s), """\
[nki_kernel_vector_scalar] NKI kernel my_kernel: Vector/Scalar-bound
  Projected on trn2: 8.0 us for 4 instructions; busiest lane per class: Tensor 0%, Vector/Scalar 62%, DMA 25%; MFU 0.0%, HBM bandwidth 4.5%. Critical path: 3 instructions (Vector/Scalar 5.0 us, DMA 3.0 us).
  next: Do fewer elementwise passes: combine steps in one instruction (nisa.tensor_scalar applies two ops, nisa.activation a function with scale and bias), move work between the Vector and Scalar engines so both run, keep GpSimd for what only it can do, and give each instruction a long free dimension.
""")

    def test_dma_bound_by_small_transfers(self):
        loads = [ins(k, f"dma:{k % 2}", 1.4 * (k // 2), 1.4 * (k // 2) + 1.4, "load", line=5, nbytes=512)
                 for k in range(8)]
        s = schedule(loads + [ins(8, "vector", 5.6, 6.0, "tensor_scalar", line=6, deps=(6, 7), crit=7)])
        self.assertExpectedInline(_bounds(s), """\
[nki_kernel_dma] NKI kernel my_kernel: DMA-bound: many small transfers
  Projected on trn2: 6.0 us for 9 instructions; busiest lane per class: Tensor 0%, Vector/Scalar 7%, DMA 93%; MFU 0.0%, HBM bandwidth 0.2%. Critical path: 5 instructions (Vector/Scalar 0.4 us, DMA 5.6 us). 8 transfers averaged 512 B; the fixed per-transfer cost is 93% of the DMA queues' time.
  next: Batch loads into larger tiles (one DMA per tile, not per row), hoist loop-invariant loads out of the loop, and spread independent transfers over the DMA queues.
""")

    def test_dma_bound_by_bandwidth(self):
        s = schedule([ins(0, "dma:0", 0, 9, "load", line=5, nbytes=3 << 20),
                      ins(1, "vector", 9, 10, "tensor_scalar", line=6, deps=(0,), crit=0)])
        self.assertExpectedInline(_bounds(s), """\
[nki_kernel_dma] NKI kernel my_kernel: DMA-bound: HBM bandwidth
  Projected on trn2: 10.0 us for 2 instructions; busiest lane per class: Tensor 0%, Vector/Scalar 10%, DMA 90%; MFU 0.0%, HBM bandwidth 86.8%. Critical path: 2 instructions (Vector/Scalar 1.0 us, DMA 9.0 us). 1 transfer averaged 3.0 MiB; the fixed per-transfer cost is 14% of the DMA queues' time.
  next: Move fewer bytes: reuse tiles held in SBUF across iterations instead of reloading them, load in BF16 rather than FP32, and fuse kernels so intermediates never go to HBM.
""")

    def test_dependency_stalls(self):
        chain, t = [], 0.0
        for k, (queue, opcode, dur) in enumerate([("dma:0", "load", 2.0), ("tensor", "nc_matmul", 1.0),
                                                  ("vector", "tensor_copy", 1.0), ("dma:1", "store", 2.0)] * 2):
            chain.append(ins(k, queue, t, t + dur, opcode, line=5 + k % 4, nbytes=1 << 14 if queue[:3] == "dma" else 0,
                             flops=FLOPS_48 // 20 if opcode == "nc_matmul" else 0,
                             deps=(k - 1,) if k else (), crit=k - 1 if k else None))
            t += dur + 0.5
        self.assertExpectedInline(_bounds(schedule(chain)), """\
[nki_kernel_stalls] NKI kernel my_kernel: Dependency stalls: no engine is busy half the time
  Projected on trn2: 15.5 us for 8 instructions; busiest lane per class: Tensor 13%, Vector/Scalar 13%, DMA 26%; MFU 3.1%, HBM bandwidth 1.2%. Critical path: 8 instructions (Tensor 2.0 us, Vector/Scalar 2.0 us, DMA 8.0 us, waits 3.5 us).
  next: The engines wait on each other: double-buffer (allocate each tile in a buffer of 2 or more so the load of the next tile overlaps work on this one), keep more independent tiles in flight, and issue loads before the compute that needs them.
""")


class TestText(TestCase):
    def test_the_text_report_of_a_kernel(self):
        self.assertExpectedInline(format_kernel_views([view(tensor_bound())]), """\

NKI kernels: instruction-level profile, projected by the schedule model (not a measurement)
  my_kernel on trn2: makespan 10.0 us, 4 instructions, MFU 48.0%, HBM bandwidth 14.5%, bound: Tensor Engine
    lane                               busy   util
    Tensor Engine (PE)               6.0 us  60.0%
    Vector Engine (DVE)              1.0 us  10.0%
    DMA queue 0                      2.0 us  20.0%
    DMA queue 1                      1.0 us  10.0%
    top lines: my_kernel.py:7 6.0 us (60%), my_kernel.py:5 2.0 us (20%), my_kernel.py:8 1.0 us (10%), my_kernel.py:9 1.0 us (10%)
    critical path: 4 instructions (Tensor Engine 6.0 us, Vector/Scalar 1.0 us, DMA 3.0 us)
""")

    def test_nothing_without_kernels(self):
        self.assertEqual(format_kernel_views([]), "")


def test_the_report_payload_carries_the_view_and_its_finding(tmp_path):
    path = tmp_path / "k.json"
    path.write_text(json.dumps(kernel_trace(tensor_bound(), "my_kernel")))
    p = profile_payload(str(path))
    assert [k["kernel"] for k in p["kernels"]] == ["my_kernel"]
    # A kernel trace of its own has no device kernels: its finding is the kernel's, not "no device activity".
    assert [f["key"] for f in p["findings"]] == ["nki_kernel_tensor"]


@pytest.mark.skipif(find_chromium() is None, reason="no Chromium for the browser tests: apt-get install -y chromium")
def test_the_kernels_tab_in_a_browser(tmp_path):
    path = tmp_path / "k.json"
    path.write_text(json.dumps(kernel_trace(tensor_bound(), "my_kernel")))
    report = write_html_report([str(path)], tmp_path / "report.html")
    with HeadlessChromium(width=1400, height=900) as b:
        b.open(f"file://{report}#tab=kernels", "window.tnx && (window.tnx.ready || window.tnx.error)")
        assert b.evaluate("window.tnx.error") is None
        text = b.evaluate("document.getElementById('tab-kernels').innerText")
        assert b.errors() == []
        assert b.requests() == [f"file://{report}"]
        for expected in ("my_kernel", "projected on trn2", "MFU\n48.0%", "HBM bandwidth\n14.5%", "Tensor Engine-bound",
                         "Tensor Engine (PE)\t0\t6.0 us\t60.0%", "my_kernel.py:7\t6.0 us\t60.0%",
                         "Critical path: 4 instructions (Tensor Engine 6.0 us, Vector/Scalar 1.0 us, DMA 3.0 us)\n"):
            assert expected in text, (expected, text)
        # The instruction lanes are on the timeline too, in the hardware group, in lane order.
        b.evaluate("tnx.show('timeline')")
        groups = b.evaluate("tnx.timeline().items.filter(it => it.kind === 'group' && !it.empty).map(it => it.group)")
        assert groups == ["hardware"]
        assert b.errors() == []
        # A trace without instruction events says how to get them.
        plain = tmp_path / "plain.json"
        plain.write_text(json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1,
                                                      "tid": 1, "ts": 0.0, "dur": 5.0}]}))
        other = write_html_report([str(plain)], tmp_path / "plain.html")
        b.open("about:blank")
        b.open(f"file://{other}#tab=kernels", "window.tnx && (window.tnx.ready || window.tnx.error)")
        assert "This trace has no NKI instruction profile" in b.evaluate("document.getElementById('tab-kernels').innerText")
        assert b.errors() == []
    labels = [lane["label"] for lane in profile_payload(str(path))["lanes"]]
    assert labels == ["launch (projected)", "Tensor Engine (PE)", "Vector Engine (DVE)", "DMA queue 0", "DMA queue 1"]

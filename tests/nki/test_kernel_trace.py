"""An NKI launch's instruction-level trace (nki/trace.py): a lane per engine and DMA queue, an event per
instruction with its line, opcode, operands and bytes, dependency arrows as paired flows; what nki.profile and
nki.benchmark(save_trace_name=...) write; checked structurally as Perfetto reads Chrome JSON."""
from __future__ import annotations

import collections
import json
import math
import os

import numpy as np
import pytest

import torchneuron_ext.nki as nki_new
import torchneuron_ext.nki.isa as nisa_new
import torchneuron_ext.nki.language as nl_new
import torchneuron_ext.nki.legacy as nki
import torchneuron_ext.nki.legacy.isa as nisa
import torchneuron_ext.nki.legacy.language as nl
from torchneuron_ext.nki import schedule, trace


@nki.jit
def matmul_kernel(lhsT, rhs):
    """AWS's tiled matmul tutorial in small: lhsT [K, M], rhs [K, N] -> [M, N], accumulating over K in PSUM."""
    K, M = lhsT.shape
    _, N = rhs.shape
    out = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // 128):
        for n in nl.affine_range(N // 512):
            acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // 128):
                a = nl.load(lhsT[k * 128:(k + 1) * 128, m * 128:(m + 1) * 128])
                b = nl.load(rhs[k * 128:(k + 1) * 128, n * 512:(n + 1) * 512])
                acc += nisa.nc_matmul(a, b)
            nl.store(out[m * 128:(m + 1) * 128, n * 512:(n + 1) * 512], value=nl.copy(acc, dtype=out.dtype))
    return out


@nki_new.jit
def scale_rows(a):
    """New dialect, one half of the rows per core of an LNC=2 launch (kernel[2])."""
    out = nl_new.ndarray(a.shape, dtype=a.dtype, buffer=nl_new.shared_hbm)
    i = nl_new.program_id(0)
    half = a.shape[0] // 2
    t = nl_new.ndarray((half, a.shape[1]), dtype=a.dtype, buffer=nl_new.sbuf)
    nisa_new.dma_copy(dst=t, src=a[i * half:(i + 1) * half, :])
    nisa_new.tensor_scalar(dst=t, data=t, op0=nl_new.multiply, operand0=2.0)
    nisa_new.dma_copy(dst=out[i * half:(i + 1) * half, :], src=t)
    return out


def _inputs():
    rng = np.random.default_rng(0)
    return rng.standard_normal((256, 256)).astype(np.float32), rng.standard_normal((256, 1024)).astype(np.float32)


@pytest.fixture(scope="module")
def launch():
    a, b = _inputs()
    with schedule.recording():
        out = matmul_kernel(a, b)
    np.testing.assert_allclose(out, a.T @ b, rtol=1e-4, atol=1e-3)
    return matmul_kernel.last_result.schedule


def _of(events, ph, cat=None):
    return [e for e in events if e["ph"] == ph and (cat is None or e.get("cat") == cat)]


def assert_perfetto_readable(t: dict) -> None:
    """What Perfetto's and Chrome's JSON importers need: valid JSON without NaN, a traceEvents list, every
    event with ph/pid/tid (and name, ts for the timed ones), non-negative durations, each flow id with exactly
    one start and one finish in one category, the finish bound to its enclosing slice (bp "e")."""
    t = json.loads(json.dumps(t, allow_nan=False))
    assert isinstance(t["traceEvents"], list)
    for e in t["traceEvents"]:
        assert {"ph", "pid", "tid", "name"} <= e.keys(), e
        if e["ph"] in ("X", "s", "f"):
            assert isinstance(e["ts"], (int, float)) and math.isfinite(e["ts"]), e
        if e["ph"] == "X":
            assert e["dur"] >= 0, e
    flows = collections.defaultdict(list)
    for e in t["traceEvents"]:
        if e["ph"] in ("s", "f"):
            flows[(e["cat"], e["id"])].append(e)
    for pair in flows.values():
        assert sorted(e["ph"] for e in pair) == ["f", "s"], pair
        s, f = sorted(pair, key=lambda e: e["ph"] != "s")
        assert f["bp"] == "e", pair
        # No arrow points back in time: our dependency arrows, nor the dispatch and runtime-to-kernel flows of a
        # profiled launch, whose ends are stamped on two clocks (torch's for the op, ours for the device events).
        late_ns = (s["ts"] - f["ts"]) * 1e3
        assert late_ns <= 0, f"flow {s['cat']} {s['id']}: ends {late_ns:.0f} ns before its start"


def test_a_lane_per_engine_and_dma_queue_in_a_stable_order(launch) -> None:
    events = trace.kernel_trace(launch, "matmul_kernel")["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in _of(events, "M") if e["name"] == "thread_name"}
    order = [names[tid] for tid in sorted(names, key=lambda tid: next(
        e["args"]["sort_index"] for e in _of(events, "M") if e["name"] == "thread_sort_index" and e["tid"] == tid))]
    queues = sorted({i.queue for i in launch.instructions}, key=trace.lane_rank)
    assert queues[:2] == ["tensor", "vector"] and all(q.startswith("dma:") for q in queues[2:])
    assert order == ["launch (projected)", "Tensor Engine (PE)", "Vector Engine (DVE)"] + [
        f"DMA queue {q[4:]}" for q in queues[2:]]
    (process,) = [e["args"]["name"] for e in _of(events, "M") if e["name"] == "process_name"]
    assert process == "matmul_kernel (NKI, projected on trn2)"
    # Every instruction is on its queue's lane.
    for e in _of(events, "X", trace.CAT_INSTRUCTION):
        assert names[e["tid"]] == trace.lane_label(e["args"]["queue"])


def test_an_event_per_instruction_with_its_line_operands_and_bytes(launch) -> None:
    events = trace.kernel_trace(launch, "matmul_kernel")["traceEvents"]
    xs = _of(events, "X", trace.CAT_INSTRUCTION)
    assert len(xs) == len(launch.instructions) == launch.instruction_count
    by_index = {e["args"]["index"]: e for e in xs}
    src = open(__file__).read().splitlines()
    for i in launch.instructions:
        e = by_index[i.index]
        assert e["name"] == i.opcode and e["ts"] == pytest.approx(i.start_s * 1e6)
        assert e["dur"] == pytest.approx((i.end_s - i.start_s) * 1e6)
        a = e["args"]
        assert a["file"] == __file__ and a["line"] == f"test_kernel_trace.py:{i.line}"
        assert a["bytes"] == i.nbytes and a["flops"] == i.flops
        assert a["wait_us"] == pytest.approx(i.wait_s * 1e6)
        assert [(o["role"], o["memory"], tuple(o["shape"]), o["dtype"], o["bytes"]) for o in a["operands"]] == [
            (o.role, o.memory, o.shape, o.dtype, o.nbytes) for o in i.operands]
        # The line is the kernel's own source line of the call.
        text = src[i.line - 1]
        assert {"nc_matmul": "nc_matmul", "load": "nl.load", "store": "nl.store"}.get(i.opcode, "") in text
    matmuls = [e for e in xs if e["name"] == "nc_matmul"]
    assert len(matmuls) == 8 and all(e["args"]["flops"] == 2 * 128 * 128 * 512 for e in matmuls)
    assert all(e["args"]["engine"] == "tensor" and e["args"]["operands"][0]["dtype"] == "float32" for e in matmuls)
    loads = [e for e in xs if e["name"] == "load"]
    assert sorted({e["args"]["bytes"] for e in loads}) == [128 * 128 * 4, 128 * 512 * 4]


def test_dependencies_are_paired_flows_from_producer_to_consumer(launch) -> None:
    t = trace.kernel_trace(launch, "matmul_kernel")
    assert_perfetto_readable(t)
    events = t["traceEvents"]
    xs = {e["args"]["index"]: e for e in _of(events, "X", trace.CAT_INSTRUCTION)}
    starts = {e["id"]: e for e in _of(events, "s", trace.CAT_DEPENDENCY)}
    arrows = set()
    for f in _of(events, "f", trace.CAT_DEPENDENCY):
        s = starts[f["id"]]
        src = next(i for i, x in xs.items() if x["tid"] == s["tid"] and x["ts"] == s["ts"])
        dst = next(i for i, x in xs.items() if x["tid"] == f["tid"] and x["ts"] == f["ts"])
        arrows.add((src, dst))
    assert arrows == {(d, i.index) for i in launch.instructions for d in i.deps}
    assert arrows  # the matmuls wait for their loads
    matmul = next(i for i in launch.instructions if i.opcode == "nc_matmul")
    assert {launch.instructions[d].opcode for d in matmul.deps} >= {"load"}
    # The critical path is marked, and it ends with the launch's last instruction.
    critical = [x for x in xs.values() if x["args"]["critical"]]
    assert [x["args"]["index"] for x in sorted(critical, key=lambda x: x["ts"])] == [
        i.index for i in launch.critical_path()]
    assert max(x["ts"] + x["dur"] for x in critical) == pytest.approx(launch.makespan_s * 1e6)


def test_the_launch_span_carries_the_totals(launch) -> None:
    events = trace.kernel_trace(launch, "matmul_kernel")["traceEvents"]
    (span,) = _of(events, "X", trace.CAT_LAUNCH)
    a = span["args"]
    assert span["dur"] == pytest.approx(launch.makespan_s * 1e6) == pytest.approx(a["makespan_us"])
    assert a["flops"] == 8 * 2 * 128 * 128 * 512 == launch.flops
    # Each of the 2 x 2 output tiles loads its 2 K-tiles of lhsT and rhs and stores itself once.
    assert a["hbm_bytes"] == launch.hbm_bytes == (8 * 128 * 128 + 8 * 128 * 512 + 4 * 128 * 512) * 4
    assert a["instructions"] == len(launch.instructions) and a["target"] == "trn2" and a["cores"] == 1
    assert a["engine_busy_us"]["tensor"] == pytest.approx(launch.engine_busy_s["tensor"] * 1e6)


def test_both_cores_of_an_lnc2_launch_are_processes_with_cross_lanes() -> None:
    a = np.arange(64 * 32, dtype=np.float32).reshape(64, 32)
    with schedule.recording():
        np.testing.assert_array_equal(scale_rows[2](a), 2 * a)
    s = scale_rows.last_result.schedule
    t = trace.kernel_trace(s, "scale_rows")
    assert_perfetto_readable(t)
    events = t["traceEvents"]
    processes = sorted(e["args"]["name"] for e in _of(events, "M") if e["name"] == "process_name")
    assert processes == [f"scale_rows core {c} (NKI, projected on {s.target})" for c in (0, 1)]
    xs = _of(events, "X", trace.CAT_INSTRUCTION)
    assert {e["pid"] for e in xs} == {1, 2}
    lanes = {(e["pid"], e["tid"]): e["args"]["name"] for e in _of(events, "M") if e["name"] == "thread_name"}
    assert lanes[(2, 128 + 2)] == "core 1 Vector Engine (DVE)" and lanes[(1, 2)] == "core 0 Vector Engine (DVE)"
    assert len(set(lanes.values())) == len(lanes)
    for pid in (1, 2):
        assert [e["name"] for e in sorted((e for e in xs if e["pid"] == pid), key=lambda e: e["ts"])] == [
            "dma_copy", "tensor_scalar", "dma_copy"]


def test_a_schedule_without_records_is_refused_with_what_to_do() -> None:
    a, b = _inputs()
    matmul_kernel(a, b)  # outside schedule.recording(): counts only
    s = matmul_kernel.last_result.schedule
    assert s.instructions == [] and s.instruction_count > 0
    with pytest.raises(ValueError, match=r"no instruction records: launch it inside nki.schedule.recording\(\)"):
        trace.kernel_trace(s, "matmul_kernel")


def test_the_events_come_first_in_the_file(launch, tmp_path) -> None:
    # Streaming JSON readers (Perfetto's) meet the events before the summary keys.
    path = trace.write_kernel_trace(str(tmp_path / "sub" / "k.json"), launch, "matmul_kernel", {"kernel": "x"})
    text = open(path).read()
    assert text.startswith('{"traceEvents":[') and json.loads(text)["kernel"] == "x"


def test_profile_writes_the_trace_where_aws_keywords_say(tmp_path) -> None:
    a, b = _inputs()
    prof = nki.profile(working_directory=str(tmp_path), save_trace_name="mm.ntff", num_execs=2)(matmul_kernel)
    np.testing.assert_allclose(prof(a, b), a.T @ b, rtol=1e-4, atol=1e-3)
    assert sorted(os.listdir(tmp_path)) == ["file.neff", "json_reports", "mm.ntff", "mm_exec_2.ntff"]
    for name in ("mm.ntff", "mm_exec_2.ntff"):
        t = json.loads((tmp_path / name).read_text())
        assert_perfetto_readable(t)
        assert "not an NTFF" in t["note"] and t["kernel"] == "matmul_kernel"
        assert len(_of(t["traceEvents"], "X", trace.CAT_INSTRUCTION)) == sum(t["instructions"].values()) == 36
    report = json.loads((tmp_path / "json_reports" / "mm_exec_2.json").read_text())
    assert "traceEvents" not in report and report["instructions"]["nc_matmul"] == 8


def test_benchmark_writes_a_trace_only_when_asked(tmp_path) -> None:
    a, b = _inputs()
    plain = nki.benchmark(warmup=1, iters=2)(matmul_kernel)
    plain(a, b)
    assert plain.benchmark_result.trace_path is None and plain.benchmark_result.schedule.instructions == []
    path = tmp_path / "bench.json"
    bench = nki.benchmark(warmup=1, iters=2, save_trace_name=str(path))(matmul_kernel)
    np.testing.assert_allclose(bench(a, b), a.T @ b, rtol=1e-4, atol=1e-3)
    assert bench.benchmark_result.trace_path == str(path)
    t = json.loads(path.read_text())
    assert_perfetto_readable(t)
    assert len(_of(t["traceEvents"], "X", trace.CAT_INSTRUCTION)) == 36
    # The same projection as without the trace: recording changes nothing but what is kept.
    assert bench.benchmark_result.nc_latency.get_latency_percentile(50) == pytest.approx(
        plain.benchmark_result.nc_latency.get_latency_percentile(50))


def test_the_trace_readers_put_instruction_lanes_with_the_hardware():
    from torchneuron_ext.profiler import trace_events

    assert trace_events.GROUP_OF_CAT[trace.CAT_INSTRUCTION] == trace_events.GROUP_OF_CAT[trace.CAT_LAUNCH] == "hardware"

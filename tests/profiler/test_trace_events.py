"""A trace classified once (torchneuron_ext/profiler/trace_events.py): every kind of event where the
trace puts it, the text report and the HTML viewer reading the one classification, and malformed
traces refused with a message that names the event."""
import collections
import json

import numpy as np
import pytest
import torch
from expecttest import TestCase

from torchneuron_ext.instrumentation import trace_schema as S
from torchneuron_ext.profiler import summarize_trace
from torchneuron_ext.profiler import trace_events as T
from torchneuron_ext.profiler.html import page
from torchneuron_ext.profiler.html.model import build_profile

from .conftest import neuron_profile
from .test_html_model import columns

ITERS = 2


def _rms_then_matmul(a: torch.Tensor) -> torch.Tensor:
    # One generated kernel and one extern mm inside the graph: both kinds of region kernel.
    return (a * torch.rsqrt(a.pow(2).mean(-1, keepdim=True) + 1e-6)) @ a


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A real profile: ops on two cores, a copy each way, a compiled graph, HBM counters, flows."""
    x = torch.randn(16, 16, device="neuron")
    graph = torch.compile(_rms_then_matmul, backend="neuron")
    torch.testing.assert_close(graph(x).cpu(), _rms_then_matmul(x.cpu()), rtol=1e-4, atol=1e-4)
    with neuron_profile(tmp_path_factory.mktemp("prof"), profile_memory=True) as exporter:
        for _ in range(ITERS):
            y = (x @ x).relu()
            y.cpu()  # DtoH
            torch.ones(4, 4).to("neuron")  # HtoD
            y.to("neuron:1")  # DtoD
            graph(x)
        torch.neuron.synchronize()
    path = f"{exporter.last_export_dir}/trace.json"
    with open(path) as f:
        return path, json.load(f)


def _reference_counts(events):
    """The trace counted by hand, event by event, without the classifier."""
    # A compiled graph's launch is written as the parts its kernels leave uncovered: one span, read from its first.
    xs = [e for e in events if e.get("ph") == "X" and e.get("args", {}).get(S.PART, 1) == 1]
    in_region = [e.get("args", {}).get(S.IN) == S.IN_COMPILED_REGION for e in xs]
    by_cat = collections.Counter(e.get("cat") for e, inside in zip(xs, in_region) if not inside)
    return {
        "spans": len(xs),
        "kernels": by_cat[S.CAT_KERNEL],
        "copies": collections.Counter(e["name"].split()[1] for e in xs if e.get("cat") == S.CAT_MEMCPY),
        "region kernels": sum(in_region),
        "dispatches": by_cat[S.CAT_RUNTIME],
        "framework": sum(n for cat, n in by_cat.items() if cat not in T.GROUP_OF_CAT),
        "flow points": sum(1 for e in events if e.get("ph") in ("s", "f", "t")),
        "hbm samples": collections.Counter(int(e["name"][2:].split()[0]) for e in events
                                           if e.get("ph") == "C" and e.get("name", "").endswith(" HBM")),
    }


def test_every_kind_of_event_is_classified_once(recorded):
    path, trace = recorded
    c = T.classify(path)
    want = _reference_counts(trace["traceEvents"])
    kinds = collections.Counter(a.kind for a in c.activities)
    assert len(c.spans) == want["spans"] and c.skipped == 0 and c.path == path
    assert kinds[T.KERNEL] == want["kernels"] == 3 * ITERS  # mm, relu and the graph's launch
    assert collections.Counter(a.direction for a in c.activities if a.kind == T.COPY) == want["copies"] == \
        {"HtoD": ITERS, "DtoH": ITERS, "DtoD": ITERS}
    assert kinds[T.REGION_KERNEL] == want["region kernels"] >= 2 * ITERS
    assert len(c.dispatches) == want["dispatches"]
    assert sum(1 for k in c.spans.lane if c.lanes[k][0] == "framework") == want["framework"] > 0
    assert len(c.flow_points) == want["flow points"] > 0
    assert {core: len(s) for core, s in c.hbm_allocated.items()} == want["hbm samples"]
    assert set(c.hbm_allocated) == {0, 1}
    assert c.numerics == "host" and c.has_cat(S.CAT_PROJECTED)
    # What each activity is, from its record.
    ops = collections.Counter((a.op, a.tier) for a in c.activities if a.kind == T.KERNEL)
    assert ops[("aten::mm", "native")] == ops[("aten::relu", "native")] == ITERS
    (graph_op,) = [op for op, tier in ops if tier == "compiled" and op.startswith("compiled::graph_")]
    assert all(a.op == T.COPY_OP for a in c.activities if a.kind == T.COPY)
    assert {a.device for a in c.activities if a.direction == "DtoD"} <= {0, 1}
    mm = next(a for a in c.activities if a.op == "aten::mm")
    record = trace["traceEvents"][[i for i, e in enumerate(trace["traceEvents"]) if e.get("ph") == "X"][mm.index]]
    assert record["name"] == mm.name == "neuron::mm"
    assert (mm.bytes, mm.bytes_read, mm.bytes_written, mm.flops, mm.device, mm.stream) == tuple(
        record["args"][k] for k in (S.BYTES, S.BYTES_READ, S.BYTES_WRITTEN, S.FLOPS, S.DEVICE, S.STREAM))
    assert mm.flops == 2 * 16 ** 3 and mm.ts == record["ts"] and mm.dur == record["dur"]
    # A copy counts the bytes it wrote, once.
    dtoh = next(a for a in c.activities if a.direction == "DtoH")
    assert dtoh.bytes == dtoh.bytes_written == 16 * 16 * 4
    # Each dispatch names the op whose kernel or copy it launched.
    assert {d.op for d in c.dispatches} >= {"aten::mm", "aten::relu", graph_op}


def _device_totals_of_viewer(profile, region_kernels):
    """Per op, the device time of the viewer's hardware and transfer lanes, decoded from its columns (the
    kernels named `region_kernels`, inside compiled graphs, are their graph's)."""
    cols = columns(profile)
    totals = collections.defaultdict(float)
    for i in range(profile["events"]):
        cat = profile["cats"][cols["cat"][i]]
        if cat in (S.CAT_KERNEL, S.CAT_MEMCPY) and profile["strings"][cols["name"][i]] not in region_kernels:
            totals[T.activity_op(profile["strings"][cols["name"][i]])] += float(cols["dur"][i])
    return totals


def test_report_and_viewer_read_one_classification(recorded, monkeypatch):
    _, trace = recorded
    runs = []
    real_run = T._Classifier.run
    monkeypatch.setattr(T._Classifier, "run", lambda self, events: runs.append(1) or real_run(self, events))
    c = T.classify(trace)
    summary = summarize_trace(c)
    profile = build_profile(c, "x")
    assert len(runs) == 1, "the readers classified the trace again"
    # The same device time per op: the summary's rows, the classification's activities, the viewer's lanes.
    from_summary = {r.name: r.device_us for r in summary.ops if r.calls}
    from_activities = collections.defaultdict(float)
    for a in c.activities:
        if a.kind != T.REGION_KERNEL:
            from_activities[a.op] += a.dur
    from_viewer = _device_totals_of_viewer(profile, {a.name for a in c.activities if a.kind == T.REGION_KERNEL})
    assert from_summary.keys() == from_activities.keys() == from_viewer.keys()
    for op, us in from_summary.items():
        # Both count each span's whole nanoseconds (Spans.start_ns): equal, not merely within 1 ns a span.
        assert us == pytest.approx(from_activities[op]) and us == pytest.approx(from_viewer[op], rel=1e-12, abs=1e-9)
    assert summary.kernels == sum(1 for a in c.activities if a.kind != T.REGION_KERNEL)
    # The page builds both from one classification too, and a classification handed in is not redone.
    runs.clear()
    payload = page.profile_payload(trace, "x")
    assert len(runs) == 1
    assert [r["name"] for r in payload["ops"]] == [r.name for r in summary.ops]
    page.profile_payload(c, "x")
    assert len(runs) == 1


def test_report_and_viewer_count_the_same_nanoseconds_far_into_the_clock():
    # Kineto's times are microseconds since boot: a few days in, a float64 holds them to about 1 ns, and
    # recorders write fractions of one. Spans that round up and down, two touching ones among them.
    base = 5470301511418.0
    kernels = [(base + 0.4996, 1.0009), (base + 1.5005, 2.0015), (base + 3.502, 0.0005), (base + 10.0004, 3.3337)]
    trace = {"traceEvents": [
        {"ph": "X", "cat": S.CAT_KERNEL, "name": "neuron::mm", "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": {}}
        for ts, dur in kernels]}
    c = T.classify(trace)
    summary = summarize_trace(c)
    viewer = _device_totals_of_viewer(build_profile(c, "x"), set())
    device_us = {r.name: r.device_us for r in summary.ops if r.calls}
    assert device_us.keys() == viewer.keys() == {"aten::mm"}
    assert device_us["aten::mm"] == pytest.approx(viewer["aten::mm"], rel=1e-12)
    # A span is its rounded end minus its rounded start, so the first two, which touch, do not overlap.
    cols = columns(build_profile(c, "x"))
    starts = np.cumsum(cols["start"])
    ends = starts + cols["dur"]
    assert all(ends[:-1] <= starts[1:])
    assert summary.ops[0].device_us == pytest.approx(sum(round(d * 1000) for _, d in kernels) / 1000, abs=4e-3)
    # Each activity carries its span's rounded times, exactly.
    assert [(a.ts, a.dur) for a in c.activities] == [(c.spans.ts[a.index], c.spans.dur[a.index]) for a in c.activities]
    assert all(type(a.ts) is float and type(a.dur) is float for a in c.activities)


def test_reading_leaves_the_classification_as_it_was():
    trace = {"traceEvents": [
        {"ph": "C", "name": "NC0 HBM", "pid": 2, "ts": 3, "args": {"allocated MB": 1.0}},
        {"ph": "C", "name": "NC0 HBM", "pid": 2, "ts": 1, "args": {"allocated MB": 2.0}},
    ]}
    c = T.classify(trace)
    build_profile(c, "x")
    assert [t for t, _ in c.counters[(2, "NC0 HBM")]] == [3.0, 1.0]  # trace order, not the viewer's
    assert summarize_trace(c).peak_hbm_bytes == {0: 2 * 2**20}


def test_what_cannot_be_placed_is_skipped_by_both_readers():
    trace = {"traceEvents": [
        "not an event",
        {"ph": "X", "cat": "kernel", "name": "neuron::mm", "pid": 1, "tid": 1},  # no time
        {"ph": "X", "cat": "kernel", "name": "neuron::mm", "pid": 1, "tid": 1, "ts": "soon", "dur": 1},
        {"ph": "f", "cat": "a", "pid": 1, "tid": 1, "ts": 1},  # no id
        {"ph": "C", "name": "NC0 HBM", "pid": 1},  # no time
        {"ph": "X", "cat": "kernel", "name": "neuron::relu", "pid": 1, "tid": 1, "ts": 5, "dur": 2,
         "args": {"tier": "native", "bytes": 8}},
    ]}
    c = T.classify(trace)
    assert c.skipped == 5 and [a.op for a in c.activities] == ["aten::relu"]
    assert summarize_trace(c).kernels == 1 and build_profile(c, "x")["events"] == 1


def _kernel(**args):
    return {"ph": "X", "cat": "kernel", "name": "neuron::mm", "pid": 0x4E43, "tid": 0, "ts": 1.0, "dur": 2.0,
            "args": args}


_MALFORMED = {
    "bytes not an integer": [_kernel(tier="native", bytes="lots")],
    "args not an object": [dict(_kernel(), args=["bytes", 4])],
    "tier not a string": [{"ph": "X", "cat": "privateuse1_runtime", "name": "nrt_execute", "pid": 1, "tid": 1,
                           "ts": 0, "dur": 1, "args": {"op": "aten::mm", "tier": 3}}],
    "device out of range": [_kernel(device=float("inf"))],
    "HBM counter without args": [{"ph": "C", "name": "NC0 HBM", "pid": 1, "ts": 0}],
    "HBM value not a number": [{"ph": "C", "name": "NC1 HBM", "pid": 1, "ts": 0, "args": {"allocated MB": "2"}}],
    "non-finite time": [dict(_kernel(), ts=float("inf"))],
    "launch part not a number": [_kernel(part="one", parts=2, **{"launch offset ns": 0, "launch ns": 10})],
}


class TestMalformedTraces(TestCase):
    def _errors(self, events):
        """The error of each reader: the classifier, the text report and the viewer."""
        trace = {"traceEvents": events}
        out = []
        for read in (T.classify, summarize_trace, lambda t: build_profile(t, "x")):
            with self.assertRaises(T.TraceFormatError) as cm:
                read(trace)
            self.assertIsInstance(cm.exception, ValueError)  # what the CLI reports as a bad input
            out.append(str(cm.exception))
        self.assertEqual(len(set(out)), 1, "the readers disagree about the trace")
        return out[0]

    def test_messages_name_the_event_and_the_fault(self):
        got = "\n".join(f"{case}: {self._errors(events)}" for case, events in _MALFORMED.items())
        self.assertExpectedInline(got, """\
bytes not an integer: malformed trace: event 0 (kernel 'neuron::mm'): 'bytes' is 'lots', not an integer
args not an object: malformed trace: event 0 (kernel 'neuron::mm'): 'args' is a list, not an object
tier not a string: malformed trace: event 0 (privateuse1_runtime 'nrt_execute'): 'tier' is 3, not a string
device out of range: malformed trace: event 0 (kernel 'neuron::mm'): 'device' is inf, not an integer
HBM counter without args: malformed trace: event 0 (counter 'NC0 HBM'): no 'args' object
HBM value not a number: malformed trace: event 0 (counter 'NC1 HBM'): 'allocated MB' is '2', not a number
non-finite time: trace has a complete event with a non-finite time or duration ('neuron::mm' at inf, lasting 2.0)
launch part not a number: malformed trace: event 0 (kernel 'neuron::mm'): 'part' is 'one', not a non-negative number""")

    def test_not_a_trace(self):
        for data in ({"events": []}, [], {"traceEvents": {"ph": "X"}}):
            self.assertEqual(self._errors_of(data), "not a Chrome trace: no 'traceEvents' list")

    def _errors_of(self, data):
        with self.assertRaises(T.TraceFormatError) as cm:
            T.classify(data)
        return str(cm.exception)

    def test_the_event_index_is_the_traces(self):
        events = [{"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "t"}},
                  "not an event", _kernel(tier="native"), _kernel(stream="main")]
        self.assertIn("event 3 (kernel 'neuron::mm'): 'stream' is 'main'", self._errors_of({"traceEvents": events}))


def test_a_launch_written_in_parts_is_read_as_one():
    # A compiled graph's launch of 10 us with one kernel inside from 3 to 8 us, as the Kineto plugin writes it.
    def part(k, ts, dur):
        extra = {"bytes": 64} if k == 1 else {}
        return dict(_kernel(tier="compiled", part=k, parts=2, **{"launch offset ns": int((ts - 100.0) * 1000),
                                                                "launch ns": 10_000}, **extra),
                    name="neuron::compiled::graph_0", ts=ts, dur=dur)
    child = dict(_kernel(tier="compiled", **{S.IN: S.IN_COMPILED_REGION}), name="neuron::compiled::cpp_fused_0",
                 ts=103.0, dur=5.0)
    c = T.classify({"traceEvents": [part(1, 100.0, 3.0), child, part(2, 108.0, 2.0)]})
    graph, kernel = c.activities
    assert (graph.kind, graph.op, graph.ts, graph.dur, graph.bytes) == (T.KERNEL, "compiled::graph_0", 100.0, 10.0, 64)
    assert (kernel.kind, kernel.ts, kernel.dur) == (T.REGION_KERNEL, 103.0, 5.0)
    assert list(c.spans.ts) == [100.0, 103.0] and list(c.spans.dur) == [10.0, 5.0]  # what the viewer draws
    s = summarize_trace(c)
    assert s.kernels == 1 and s.device_busy_us == 10.0


def test_spans_of_and_an_empty_trace():
    c = T.classify({"traceEvents": []})
    assert len(c.spans) == 0 and c.activities == [] and list(c.spans_of(S.CAT_KERNEL)) == []
    c = T.classify({"traceEvents": [_kernel(tier="native"), dict(_kernel(), cat="cpu_op"), _kernel(tier="generic")]})
    assert list(c.spans_of(S.CAT_KERNEL)) == [0, 2] and list(c.spans_of(S.CAT_CPU_OP, "nothing")) == [1]
    assert isinstance(c.spans.ts, np.ndarray) and [a.tier for a in c.activities] == ["native", "generic"]


def test_a_projection_handed_on_is_the_one_the_summary_would_make(recorded):
    path, trace = recorded
    from torchneuron_ext import costmodel

    c = T.classify(trace)
    fresh = summarize_trace(c)
    handed = summarize_trace(c, projection=costmodel.project_trace(trace))
    assert handed.to_dict() == fresh.to_dict()
    # NeuronProfiler's export summarizes with the projection it drew the lanes from: the same summary.
    stored = trace["neuron"]["summary"]
    assert stored == json.loads(json.dumps(summarize_trace(path).to_dict()))
    with pytest.raises(ValueError, match="the projection is on trn2 LNC=2, the summary's target is trn1"):
        summarize_trace(c, "trn1", projection=costmodel.project_trace(trace))


def test_a_classification_without_projected_lanes_gets_them_on_the_page(recorded):
    _, trace = recorded
    plain = dict(trace, traceEvents=[e for e in trace["traceEvents"] if e.get("cat") != S.CAT_PROJECTED])
    c = T.classify(plain)
    assert not c.has_cat(S.CAT_PROJECTED)
    p, exported = page.profile_payload(c, "plain"), page.profile_payload(trace, "exported")

    def projected_lanes(profile):
        return [lane["label"] for lane in profile["lanes"] if lane["group"] == "projected"]

    assert projected_lanes(p) == projected_lanes(exported) == ["NC0 projected (trn2 LNC=2)"]
    assert p["summary"]["projected"] == exported["summary"]["projected"]
    assert not c.has_cat(S.CAT_PROJECTED) and len(plain["traceEvents"]) == len(c.trace["traceEvents"])

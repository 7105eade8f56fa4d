"""The HTML report's trace model: events in typed columns, lanes, rows, flows and counters, read back
the way the page reads them and checked against the trace they came from."""
import base64
import json
import math
import os
import subprocess
import sys
import zlib

import numpy as np
import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from torchneuron_ext.profiler.html.model import build_profile

from .conftest import neuron_profile

_NP = {"f64": "<f8", "f32": "<f4", "u32": "<u4", "u16": "<u2", "u8": "u1", "i32": "<i4"}


def columns(profile):
    """The blob decoded as the page decodes it: inflate, then typed views at the recorded offsets."""
    buf = zlib.decompress(base64.b64decode(profile["blob"]))
    out = {"args": np.frombuffer(zlib.decompress(base64.b64decode(profile["argsBlob"])), dtype=np.uint8)}
    for name, (dtype, offset, n) in profile["columns"].items():
        dt = np.dtype(_NP[dtype])
        assert offset % dt.itemsize == 0, f"{name} is not aligned for its typed array"
        out[name] = np.frombuffer(buf, dtype=dt, count=n, offset=offset)
    # Times: nanoseconds in uint32, 0xFFFFFFFF meaning "the next escape value"; starts are deltas
    # within each row, counter times deltas; args come as lengths, flow sources as deltas.
    def ns(label):
        esc = iter(out[label + "Escapes"])
        vals = np.array([next(esc) if v == 0xFFFFFFFF else float(v) for v in out[label + "Ns"]])
        assert next(esc, None) is None, f"unused {label} escapes"
        return vals

    start, rs = ns("start"), out["rowStart"]
    for row in range(len(rs) - 1):
        start[rs[row]:rs[row + 1]] = np.cumsum(start[rs[row]:rs[row + 1]])
    out["start"], out["dur"] = start / 1000.0, ns("dur") / 1000.0
    for c in profile["counters"]:
        out[c["column"] + ".ts"] = np.cumsum(ns(c["column"] + ".ts")) / 1000.0
    out["argOffset"] = np.concatenate((np.zeros(1, np.int64), np.cumsum(out["argLength"], dtype=np.int64)))
    out["flowFrom"] = np.cumsum(out["flowFromDelta"].astype(np.int64))
    return out


def events_of(profile):
    """(name, lane label, start, dur, args) per event, in column order."""
    c = columns(profile)
    off, raw = c["argOffset"], c["args"].tobytes()
    return [(profile["strings"][c["name"][i]], profile["lanes"][c["lane"][i]]["label"], float(c["start"][i]),
             float(c["dur"][i]), json.loads(raw[off[i]:off[i + 1]]) if off[i + 1] > off[i] else {})
            for i in range(profile["events"])]


@pytest.fixture(scope="module")
def real_trace(tmp_path_factory):
    """A real neuron profile: ops on two cores, copies both ways, HBM counters."""
    x = torch.randn(64, 64, device="neuron")
    with neuron_profile(tmp_path_factory.mktemp("prof")) as exporter:
        for _ in range(3):
            y = (x @ x).relu().sum(0)
            y.cpu()
            y.to("neuron:1").mul(2)
        torch.neuron.synchronize()
    with open(f"{exporter.last_export_dir}/trace.json") as f:
        return json.load(f)


def test_every_complete_event_is_kept_once(real_trace):
    p = build_profile(real_trace, "real")
    xs = [e for e in real_trace["traceEvents"] if e.get("ph") == "X"]
    assert p["events"] == len(xs)
    got = sorted((name, start + p["t0"], dur) for name, _, start, dur, _ in events_of(p))
    want = sorted((e["name"], e["ts"], e["dur"]) for e in xs)
    assert [g[0] for g in got] == [w[0] for w in want]
    # Times survive to the nanosecond (the trace's own resolution): starts and ends are each rounded
    # once, so a duration (their difference) is within one nanosecond.
    assert max(abs(g[1] - w[1]) for g, w in zip(got, want)) < 1.5e-3
    assert max(abs(g[2] - w[2]) for g, w in zip(got, want)) < 1.5e-3


def test_lanes_follow_the_system_timeline(real_trace):
    p = build_profile(real_trace, "real")
    groups = [lane["group"] for lane in p["lanes"]]
    assert groups == sorted(groups, key=["framework", "runtime", "hardware", "projected", "transfer", "memory"].index)
    labels = {lane["group"]: [] for lane in p["lanes"]}
    for lane in p["lanes"]:
        labels[lane["group"]].append(lane["label"])
    assert labels["hardware"] == ["NC0 hardware (kernel execution)", "NC1 hardware (kernel execution)"]
    assert "NC0 runtime stream 0" in labels["runtime"] and "NC1 runtime stream 0" in labels["runtime"]
    assert labels["projected"] == ["NC0 projected (trn2 LNC=2)", "NC1 projected (trn2 LNC=2)"]
    assert any("transfers" in label for label in labels["transfer"])
    assert [c["label"] for c in p["counters"]] == ["NC0 HBM", "NC1 HBM"]
    # Every event sits in the lane of its category.
    cat_group = {"cpu_op": "framework", "privateuse1_runtime": "runtime", "kernel": "hardware", "gpu_memcpy": "transfer"}
    c = columns(p)
    for i in range(p["events"]):
        cat = p["cats"][c["cat"][i]]
        if cat in cat_group:
            assert p["lanes"][c["lane"][i]]["group"] == cat_group[cat]


def _assert_rows_never_overlap(p):
    c = columns(p)
    rs = c["rowStart"]
    for lane in p["lanes"]:
        for row in range(lane["firstRow"], lane["firstRow"] + lane["rows"]):
            start = c["start"][rs[row]:rs[row + 1]]
            end = start + c["dur"][rs[row]:rs[row + 1]]
            assert (start[1:] >= end[:-1] - 1e-6).all(), "overlapping spans in one row"


def test_spans_a_nanosecond_apart_keep_apart_at_an_epoch_origin():
    # Kineto's times are microseconds since the epoch: as floats they step by a quarter of a microsecond, so
    # the second span (starting 50 ns before the first ends) looked as if it started after the first ended.
    t0 = 1_733_000_000_000_000.0
    events = [{"ph": "X", "name": name, "cat": "cpu_op", "pid": 1, "tid": 1, "ts": t0 + start, "dur": dur}
              for name, start, dur in (("first", 0.0, 0.3), ("second", 0.25, 0.1))]
    p = build_profile({"traceEvents": events}, "epoch")
    _assert_rows_never_overlap(p)
    assert p["lanes"][0]["rows"] == 2


def test_rows_are_sorted_and_never_overlap(real_trace):
    p = build_profile(real_trace, "real")
    _assert_rows_never_overlap(p)
    c = columns(p)
    rs = c["rowStart"]
    assert rs[0] == 0 and rs[-1] == p["events"] and len(rs) == sum(lane["rows"] for lane in p["lanes"]) + 1
    for lane_index, lane in enumerate(p["lanes"]):
        for row in range(lane["firstRow"], lane["firstRow"] + lane["rows"]):
            lo, hi = rs[row], rs[row + 1]
            assert (c["lane"][lo:hi] == lane_index).all()
            start, end = c["start"][lo:hi], c["start"][lo:hi] + c["dur"][lo:hi]
            assert (np.diff(start) >= 0).all()
            assert (start[1:] >= end[:-1] - 1e-6).all(), "overlapping spans in one row"
    # Nesting: an op in row r > 0 lies inside some op of row r - 1 of its lane.
    fw = p["lanes"][0]
    if fw["rows"] > 1:
        parent = slice(rs[fw["firstRow"]], rs[fw["firstRow"] + 1])
        child = slice(rs[fw["firstRow"] + 1], rs[fw["firstRow"] + 2])
        ps, pe = c["start"][parent], c["start"][parent] + c["dur"][parent]
        for s, d in zip(c["start"][child], c["dur"][child]):
            assert ((ps <= s + 1e-3) & (pe >= s + d - 1e-3)).any()


def test_flows_link_op_to_dispatch_to_kernel(real_trace):
    p = build_profile(real_trace, "real")
    c = columns(p)
    ev = events_of(p)
    assert p["flows"] == len(c["flowFrom"]) > 0
    assert (np.diff(c["flowFrom"].astype(np.int64)) >= 0).all(), "flows must be sorted by source for the page"
    kinds = set()
    for a, b in zip(c["flowFrom"], c["flowTo"]):
        ga, gb = (p["lanes"][c["lane"][i]]["group"] for i in (a, b))
        kinds.add((ga, gb))
        ida, idb = ev[a][4].get("External id"), ev[b][4].get("External id")
        assert ida == idb, (ev[a], ev[b])  # both ends belong to one launch
        if gb == "hardware":
            assert ev[b][0].startswith("neuron::") and ev[a][4]["op"].split("::")[-1] in ev[b][0]
    assert ("framework", "runtime") in kinds and ("runtime", "hardware") in kinds
    n_dispatch = sum(1 for e in real_trace["traceEvents"] if e.get("cat") == "privateuse1_runtime")
    assert sum(1 for k in zip(c["flowFrom"], c["flowTo"]) if p["lanes"][c["lane"][k[1]]]["group"] == "runtime") == n_dispatch


def test_counters_keep_every_sample(real_trace):
    p = build_profile(real_trace, "real")
    c = columns(p)
    samples = [e for e in real_trace["traceEvents"] if e.get("ph") == "C" and e["name"] == "NC0 HBM"]
    rec = p["counters"][0]
    assert rec["samples"] == len(samples) and rec["series"] == ["allocated MB", "reserved MB"]
    ts = c[rec["column"] + ".ts"]
    assert (np.diff(ts) >= 0).all()
    assert max(c[rec["column"] + ".v.allocated MB"]) == max(s["args"]["allocated MB"] for s in samples)


def _tiny(events):
    return {"traceEvents": events}


def test_chrome_flow_binding_rules():
    ev = [
        {"ph": "X", "cat": "cpu_op", "name": "outer", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
        {"ph": "X", "cat": "cpu_op", "name": "inner", "pid": 1, "tid": 1, "ts": 10, "dur": 20},
        {"ph": "X", "cat": "cpu_op", "name": "later", "pid": 1, "tid": 2, "ts": 200, "dur": 5},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 2, "tid": 0, "ts": 50, "dur": 5},
        # s inside inner binds to inner (innermost enclosing); f with bp=e binds to the enclosing k.
        {"ph": "s", "id": 1, "cat": "a", "pid": 1, "tid": 1, "ts": 15},
        {"ph": "f", "id": 1, "cat": "a", "pid": 2, "tid": 0, "ts": 52, "bp": "e"},
        # s in outer but past inner binds to outer; f without bp binds to the next slice ("later").
        {"ph": "s", "id": 2, "cat": "a", "pid": 1, "tid": 1, "ts": 40},
        {"ph": "f", "id": 2, "cat": "a", "pid": 1, "tid": 2, "ts": 150},
        # Same id, other category: a different flow, never finished.
        {"ph": "s", "id": 1, "cat": "b", "pid": 1, "tid": 1, "ts": 16},
        # Clock skew: the finish (on the device's shifted clock) comes 2 us before its start.
        {"ph": "X", "cat": "cpu_op", "name": "skewed op", "pid": 1, "tid": 3, "ts": 300, "dur": 10},
        {"ph": "X", "cat": "kernel", "name": "k2", "pid": 2, "tid": 0, "ts": 301, "dur": 5},
        {"ph": "f", "id": 4, "cat": "a", "pid": 2, "tid": 0, "ts": 301, "bp": "e"},
        {"ph": "s", "id": 4, "cat": "a", "pid": 1, "tid": 3, "ts": 303},
        # A finish without a start, and a start on a thread with no slices, are dropped.
        {"ph": "f", "id": 9, "cat": "a", "pid": 1, "tid": 1, "ts": 5, "bp": "e"},
        {"ph": "s", "id": 3, "cat": "a", "pid": 7, "tid": 7, "ts": 5},
    ]
    p = build_profile(_tiny(ev), "t")
    c = columns(p)
    names = [p["strings"][k] for k in c["name"]]
    pairs = sorted((names[a], names[b]) for a, b in zip(c["flowFrom"], c["flowTo"]))
    assert pairs == [("inner", "k"), ("outer", "later"), ("skewed op", "k2")]


def test_odd_events_are_skipped_or_normalised():
    ev = [
        {"ph": "X", "name": "no time", "pid": 1, "tid": 1},
        {"ph": "X", "name": "bad time", "pid": 1, "tid": 1, "ts": "soon", "dur": 1},
        {"ph": "X", "name": "negative", "pid": 1, "tid": 1, "ts": 5, "dur": -3},
        {"ph": "X", "name": 7, "cat": None, "pid": "Spans", "tid": "PyTorch Profiler", "ts": 0, "dur": 10},
        "not an event",
        {"ph": "C", "name": "NC0 HBM", "pid": 2, "ts": 3, "args": {"allocated MB": 1.0}},
        {"ph": "C", "name": "NC0 HBM", "pid": 2, "ts": 1, "args": {"allocated MB": 2.0, "reserved MB": 4.0}},
    ]
    p = build_profile(_tiny(ev), "t")
    assert p["events"] == 2
    got = {name: (start, dur, lane) for name, lane, start, dur, _ in events_of(p)}
    assert got["negative"][1] == 0.0
    assert got["7"][2] == "Spans / PyTorch Profiler"
    c = columns(p)
    rec = p["counters"][0]
    assert list(c[rec["column"] + ".ts"]) == [1.0, 3.0]  # sorted by time, relative to the trace's start
    assert list(c[rec["column"] + ".v.allocated MB"]) == [2.0, 1.0]
    assert list(c[rec["column"] + ".v.reserved MB"]) == [4.0, 4.0]  # a sample without it holds the value


def test_long_gaps_and_durations_escape_uint32():
    # 5 s and 10 s are more nanoseconds than uint32 holds: they go through the escape column.
    ev = [{"ph": "X", "cat": "kernel", "name": n, "pid": 2, "tid": 0, "ts": ts, "dur": d}
          for n, ts, d in (("a", 0.0, 1.5), ("b", 5e6, 1e7), ("c", 1.5e7 + 0.001, 0.002))]
    p = build_profile(_tiny(ev), "t")
    c = columns(p)
    assert list(c["startEscapes"]) == [5e9, 1e10 + 1] and list(c["durEscapes"]) == [1e10]
    assert [(n, s, d) for n, _, s, d, _ in events_of(p)] == [("a", 0.0, 1.5), ("b", 5e6, 1e7), ("c", 1.5e7 + 0.001, 0.002)]


def test_empty_and_bad_traces():
    p = build_profile(_tiny([]), "empty")
    assert p["events"] == 0 and p["lanes"] == [] and p["duration"] == 0
    assert list(columns(p)["rowStart"]) == [0]
    with pytest.raises(ValueError, match="no 'traceEvents' list"):
        build_profile({"events": []}, "x")
    with pytest.raises(ValueError, match="no 'traceEvents' list"):
        build_profile([], "x")
    with pytest.raises(ValueError, match="non-finite"):
        build_profile(_tiny([{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": math.inf, "dur": 1}]), "x")


def test_args_encoding_without_orjson(real_trace, tmp_path):
    """orjson only speeds the build up: without it the standard library writes the same args."""
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(real_trace))
    script = (
        "import sys, json; sys.modules['orjson'] = None\n"
        "from torchneuron_ext.profiler.html import model\n"
        "assert 'orjson' not in model._encode_args.__code__.co_names\n"
        f"print(json.dumps(model.build_profile(json.load(open({str(path)!r})), 'x')))\n")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    assert r.returncode == 0, r.stderr[-2000:]
    plain = json.loads(r.stdout)
    fast = build_profile(real_trace, "x")
    assert [e[4] for e in events_of(plain)] == [e[4] for e in events_of(fast)]


def test_plain_torch_export_gets_projected_lanes(tmp_path):
    # prof.export_chrome_trace (torch's own, without NeuronProfiler) writes no projected lanes: the
    # page adds them, so its measured/projected switch works on any neuron trace.
    from torchneuron_ext.profiler.html.page import profile_payload

    x = torch.randn(64, 64, device="neuron")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        (x @ x).relu()
    path = tmp_path / "plain.json"
    prof.export_chrome_trace(str(path))
    data = json.loads(path.read_text())
    assert not any(e.get("cat") == "neuron_projected" for e in data["traceEvents"])
    p = profile_payload(data, "plain")
    assert [lane["label"] for lane in p["lanes"] if lane["group"] == "projected"] == ["NC0 projected (trn2 LNC=2)"]
    assert not any(e.get("cat") == "neuron_projected" for e in data["traceEvents"])  # the caller's dict unchanged

"""NKI launches' instructions in torch.profiler's trace when asked (profiler/kernel_trace.py): lanes under the
device process, each launch's instructions from its device event's start, its arrows paired, its kernel view
in the HTML report; nothing kept when not asked or not profiling."""
from __future__ import annotations

import collections
import json
import os

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from tests.nki.test_kernel_trace import assert_perfetto_readable
from tests.nki.torch.kernels import add_kernel
from tests.profiler.conftest import neuron_profile
from torchneuron_ext.instrumentation import trace_schema as S
from torchneuron_ext.nki import trace as nki_trace
from torchneuron_ext.profiler import add_kernel_lanes, kernel_trace, nki_instructions
from torchneuron_ext.profiler.html.page import profile_payload


@pytest.fixture(autouse=True)
def _nothing_kept(monkeypatch):
    monkeypatch.delenv(kernel_trace.ENV, raising=False)
    kernel_trace.clear()
    yield
    kernel_trace.clear()


def _inputs():
    return torch.randn(256, 64, device="neuron"), torch.randn(256, 64, device="neuron")


def _exported(exporter) -> dict:
    with open(os.path.join(exporter.last_export_dir, "trace.json")) as f:
        return json.load(f)


def _of(t, cat, ph="X"):
    return [e for e in t["traceEvents"] if e.get("ph") == ph and e.get("cat") == cat]


def test_each_launch_gets_its_lanes_beside_its_device_event(tmp_path):
    a, b = _inputs()
    add_kernel[2](a, b)  # warm up outside the profile
    with nki_instructions(), neuron_profile(tmp_path) as exporter:
        for _ in range(2):
            torch.testing.assert_close(add_kernel[2](a, b), a + b)
    t = _exported(exporter)
    assert_perfetto_readable(t)
    devices = sorted((e for e in t["traceEvents"] if e.get("cat") == S.CAT_KERNEL
                      and e.get("name") == "neuron::nki::add_kernel"), key=lambda e: e["ts"])
    launches = sorted(_of(t, nki_trace.CAT_LAUNCH), key=lambda e: e["ts"])
    assert len(devices) == len(launches) == 2
    for device, launch in zip(devices, launches):
        assert launch["ts"] == device["ts"] and launch["pid"] == S.NEURON_PID
        assert launch["args"]["External id"] == device["args"]["External id"]
        # The projected makespan is the launch's model time on its device event.
        assert launch["args"]["makespan_us"] == pytest.approx(device["args"][S.MODEL_NS] / 1e3, abs=1e-3)
        mine = [e for e in _of(t, nki_trace.CAT_INSTRUCTION) if e["args"]["launch"] == launch["args"]["launch"]]
        # Two grid instances of load, load, add, store.
        assert collections.Counter(e["name"] for e in mine) == {"load": 4, "add": 2, "store": 2}
        assert min(e["ts"] for e in mine) == pytest.approx(launch["ts"])
        assert max(e["ts"] + e["dur"] for e in mine) == pytest.approx(launch["ts"] + launch["dur"])
    lanes = {e["tid"]: e["args"]["name"] for e in t["traceEvents"]
             if e.get("ph") == "M" and e.get("name") == "thread_name" and e.get("pid") == S.NEURON_PID
             and kernel_trace.TID_BASE <= e["tid"] < S.PROJECTED_TID_BASE}
    assert [lanes[k] for k in sorted(lanes)][:2] == ["NC0 NKI launch (projected)", "NC0 NKI Vector Engine (DVE)"]
    assert all(name.startswith("NC0 NKI ") for name in lanes.values())
    assert len(lanes) == len(set(lanes.values()))  # each lane named once, whatever the launches
    assert kernel_trace.kept_launches() == []  # placed: no longer kept


def test_the_report_of_the_exported_trace_has_the_kernel_view(tmp_path):
    a, b = _inputs()
    with nki_instructions(), neuron_profile(tmp_path) as exporter:
        for _ in range(3):
            add_kernel[2](a, b)
    p = profile_payload(os.path.join(exporter.last_export_dir, "trace.json"))
    (view,) = p["kernels"]
    assert view["kernel"] == "add_kernel" and view["launches"] == 3
    assert any(f["key"].startswith("nki_kernel_") and "add_kernel" in f["title"] for f in p["findings"])
    assert any(lane["label"] == "NC0 NKI DMA queue 0" and lane["group"] == "hardware" for lane in p["lanes"])


def test_the_environment_variable_asks_for_them(tmp_path, monkeypatch):
    a, b = _inputs()
    monkeypatch.setenv(kernel_trace.ENV, "1")
    with neuron_profile(tmp_path) as exporter:
        add_kernel[2](a, b)
    assert len(_of(_exported(exporter), nki_trace.CAT_LAUNCH)) == 1


def test_a_value_it_does_not_understand_is_an_error_naming_it(monkeypatch):
    a, b = _inputs()
    monkeypatch.setenv(kernel_trace.ENV, "maybe")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]):
        with pytest.raises(ValueError, match="TORCHNEURON_EXT_NKI_INSTRUCTIONS='maybe' is not understood: use 1"):
            add_kernel[2](a, b)


def test_not_asked_or_not_profiling_keeps_nothing(tmp_path):
    a, b = _inputs()
    with neuron_profile(tmp_path) as exporter:
        add_kernel[2](a, b)
    assert _of(_exported(exporter), nki_trace.CAT_INSTRUCTION) == []
    with nki_instructions():
        add_kernel[2](a, b)  # no profiler running
        add_kernel[2](a.cpu(), b.cpu())  # CPU tensors are not device launches
    assert kernel_trace.kept_launches() == []


def test_a_trace_exported_by_torch_gets_them_with_add_kernel_lanes(tmp_path):
    a, b = _inputs()
    with nki_instructions(), profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        add_kernel[2](a, b)
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    t = json.loads(path.read_text())
    assert add_kernel_lanes(t) == 1
    assert_perfetto_readable(t)
    (launch,) = _of(t, nki_trace.CAT_LAUNCH)
    (device,) = [e for e in t["traceEvents"] if e.get("name") == "neuron::nki::add_kernel" and e.get("cat") == S.CAT_KERNEL]
    assert launch["ts"] == device["ts"]
    assert add_kernel_lanes(t) == 0  # placed once


def test_a_kept_launch_starts_where_its_device_event_does(tmp_path):
    # The kernel lanes take the clocks' offset from one launch for all: it must be the same for every launch.
    a, b = _inputs()
    with nki_instructions(), profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        for _ in range(3):
            add_kernel[2](a, b)
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    devices = sorted((e for e in json.loads(path.read_text())["traceEvents"]
                      if e.get("name") == "neuron::nki::add_kernel" and e.get("cat") == S.CAT_KERNEL),
                     key=lambda e: e["ts"])
    kept = kernel_trace.kept_launches()
    assert len(devices) == len(kept) == 3
    offsets_us = [d["ts"] - k.start_ns / 1e3 for d, k in zip(devices, kept)]
    assert max(offsets_us) - min(offsets_us) < 2e-3  # equal but for the trace's float microseconds


def test_launches_of_an_earlier_unexported_session_are_not_placed(tmp_path):
    a, b = _inputs()
    with nki_instructions(), profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]):
        add_kernel[2](a, b)  # never exported
    assert len(kernel_trace.kept_launches()) == 1
    with nki_instructions(), neuron_profile(tmp_path) as exporter:
        add_kernel[2](a, b)
    assert len(_of(_exported(exporter), nki_trace.CAT_LAUNCH)) == 1
    assert kernel_trace.kept_launches() == []  # the stale one is dropped too


def test_launches_of_several_kernels_pair_with_their_own_device_events_in_order():
    """Synthetic launches on a trace of known clock (launch ns + 1 s): per kernel, latest launch with latest
    device event; a stale launch and one whose device event was dropped are not placed, only the stale one
    is dropped."""
    a, _ = _inputs()
    from tests.nki.test_kernel_trace import scale_rows
    from torchneuron_ext.nki import schedule
    with schedule.recording():
        scale_rows[2](a.cpu().numpy())
    sched = scale_rows.last_result.schedule
    t0 = 10**12
    launches = [kernel_trace.KeptLaunch("early", 0, t0 - 10**9, sched)]  # a second before the trace
    launches += [kernel_trace.KeptLaunch(name, 0, t0 + i * 100_000, sched)
                 for i, name in enumerate(["x", "y", "x", "y", "x"])]
    # The device events (1 s later on the trace clock) of all but the first "x" launch.
    events = [{"ph": "X", "cat": S.CAT_KERNEL, "name": f"neuron::nki::{k.kernel}", "pid": S.NEURON_PID, "tid": 0,
               "ts": k.start_ns / 1e3 + 1e6, "dur": 5.0, "args": {"External id": i}}
              for i, k in enumerate(launches) if i > 1]
    for k in launches:
        kernel_trace.keep_launch(k.kernel, k.device, k.start_ns, k.schedule)
    # The profile starts just before the launches (an op on the host), so the first "x" is not stale.
    t = {"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1,
                          "ts": t0 / 1e3 + 1e6 - 10.0, "dur": 1.0}] + events}
    assert add_kernel_lanes(t) == 4
    placed = sorted(_of(t, nki_trace.CAT_LAUNCH), key=lambda e: e["ts"])
    assert [(e["name"], e["args"]["External id"]) for e in placed] == [("y", 2), ("x", 3), ("y", 4), ("x", 5)]
    assert [(e["ts"], e["args"]["launch"]) for e in placed] == [(e["ts"], i) for i, e in enumerate(events)]
    assert_perfetto_readable(t)
    assert kernel_trace.kept_launches() == [launches[1]]  # unmatched, not stale: kept for a later export

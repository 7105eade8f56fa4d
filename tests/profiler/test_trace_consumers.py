"""Traces follow the Chrome trace event format and load in an independent consumer,
HolisticTraceAnalysis (HTA)."""
import json
import numbers

import pytest
import torch

from .conftest import neuron_profile


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    x = torch.randn(96, 96, device="neuron")
    with neuron_profile(tmp_path_factory.mktemp("prof"), profile_memory=True) as exporter:
        for _ in range(3):
            y = (x @ x).relu()
            y.cpu()
            x.to("neuron:1")
    return exporter.last_export_dir


def test_chrome_trace_event_format(exported):
    trace = json.load(open(f"{exported}/trace.json"))
    assert isinstance(trace["traceEvents"], list)
    required = {"X": ("name", "ts", "dur", "pid", "tid"), "C": ("name", "ts", "pid", "args"),
                "s": ("id", "ts", "pid", "tid"), "f": ("id", "ts", "pid", "tid"), "M": ("name", "pid", "args"),
                "i": ("name", "ts", "pid")}
    for e in trace["traceEvents"]:
        ph = e.get("ph")
        assert ph in required, e
        for field in required[ph]:
            assert field in e, (field, e)
        if ph == "X":
            assert isinstance(e["ts"], numbers.Number) and e["dur"] >= 0
        if ph == "C":
            assert all(isinstance(v, numbers.Number) for v in e["args"].values())
    copies = [e for e in trace["traceEvents"] if e.get("cat") == "gpu_memcpy"]
    assert {e["name"].split()[1] for e in copies} == {"DtoH", "DtoD"}


def test_trace_loads_in_holistic_trace_analysis(exported):
    hta = pytest.importorskip("hta.trace_analysis", reason="HolisticTraceAnalysis is installed by .ci/run")
    ta = hta.TraceAnalysis(trace_dir=exported)
    df = ta.t.get_trace(0)
    names = ta.t.symbol_table.get_sym_table()
    cats = {names[i] for i in df["cat"].unique()}
    assert {"cpu_op", "kernel", "gpu_memcpy", "privateuse1_runtime"} <= cats
    kernels = ta.get_gpu_kernel_breakdown(visualize=False)[0]
    assert kernels["sum"].sum() > 0
    temporal = ta.get_temporal_breakdown(visualize=False)
    assert float(temporal["compute_time_pctg"].iloc[0]) > 0

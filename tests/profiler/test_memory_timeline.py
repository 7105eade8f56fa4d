"""Device memory by category over time (profiler/memory_timeline.py): torch.profiler's memory profile read for
the neuron device, written into the exported trace and drawn by the HTML report's Memory tab."""
from __future__ import annotations

import json

import pytest
import torch
from expecttest import TestCase
from torch.profiler import ProfilerActivity, profile

import torchneuron_ext  # noqa: F401
from torchneuron_ext.profiler import memory_timelines
from torchneuron_ext.profiler.html import build_html
from torchneuron_ext.profiler.html.page import profile_payload

from .conftest import neuron_profile

RECORDING = {"profile_memory": True, "record_shapes": True, "with_stack": True}


def _training():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).to("neuron")
    opt = torch.optim.Adam(model.parameters())
    x, y = torch.randn(32, 64, device="neuron"), torch.randint(0, 10, (32,), device="neuron")

    def step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    step()  # Adam's state exists from here on
    return model, step


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    model, step = _training()
    with neuron_profile(tmp_path_factory.mktemp("memory"), **RECORDING) as exporter:
        step()
        step()
    with open(f"{exporter.last_export_dir}/trace.json") as f:
        return model, json.load(f), exporter


def test_categories_of_a_training_step(exported):
    model, trace, _ = exported
    (m,) = trace["neuron"]["memory_timeline"].values()
    assert m["device"] == 0 and m["categories"] == ["parameter", "optimizer_state", "input", "temporary", "activation",
                                                    "gradient", "autograd_detail", "unknown"]
    most = {c: max(row[k] for row in m["bytes"]) for k, c in enumerate(m["categories"])}
    params = sum(p.nbytes for p in model.parameters())
    assert most["parameter"] == params
    # Every parameter has its gradient (the loss's own gradient counts too); Adam keeps two moments per parameter.
    assert most["gradient"] >= params and most["optimizer_state"] == 2 * params
    assert most["activation"] > 0 and most["input"] > 0
    totals = [sum(row) for row in m["bytes"]]
    assert m["peak_bytes"] == max(totals) and m["peak_us"] == m["t_us"][totals.index(max(totals))]
    assert sum(m["peak_by_category"].values()) == m["peak_bytes"]
    assert m["t_us"] == sorted(m["t_us"])


def test_peak_is_the_profilers(tmp_path):
    # The same session read by torch's own export_memory_timeline (its JSON: times and sizes by category).
    _, step = _training()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1], **RECORDING) as prof:
        step()
    path = tmp_path / "timeline.json"
    prof.export_memory_timeline(str(path), device="neuron:0")
    times, sizes = json.loads(path.read_text())
    (m,) = memory_timelines(prof).values()
    assert m.peak_bytes == max(sum(row) for row in sizes) > 0
    assert len(m.t_us) == len(times)
    # The allocator counts whole blocks (sizes rounded up): never less than the tensors hold.
    assert torch.neuron.max_memory_allocated() >= m.peak_bytes


def test_the_report_draws_it(exported):
    _, trace, exporter = exported
    payload = profile_payload(trace, "step")
    (chart,) = payload["memoryCategories"]
    m = trace["neuron"]["memory_timeline"]["0"]
    assert chart["peak_bytes"] == m["peak_bytes"] and chart["bytes"] == m["bytes"]
    # On the page's clock: from its start, within the profile.
    assert chart["t_us"] == [t - payload["t0"] for t in m["t_us"]]
    assert 0 <= chart["peak_us"] <= payload["duration"]
    html = build_html([f"{exporter.last_export_dir}/trace.json"])
    assert '"memoryCategories":[{"device":0' in html and "memory by category" in html


def test_a_trace_without_it_has_no_chart():
    assert profile_payload({"traceEvents": []}, "empty")["memoryCategories"] == []


class TestErrors(TestCase):
    def test_a_session_that_did_not_record_what_it_needs(self):
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            torch.ones(4, device="neuron")
        with self.assertRaises(ValueError) as e:
            memory_timelines(prof)
        self.assertExpectedInline(str(e.exception), """the memory timeline by category needs a session with record_shapes=True, with_stack=True (torch.profiler.profile(..., profile_memory=True, record_shapes=True, with_stack=True))""")

    def test_a_session_still_running(self):
        with profile(activities=[ProfilerActivity.CPU], **RECORDING) as prof:
            with self.assertRaises(ValueError) as e:
                memory_timelines(prof)
        self.assertExpectedInline(str(e.exception), """the memory timeline is read from a finished session: call it after the profile stopped""")

"""One vocabulary for tiers and traces (torchneuron_ext/_trace_schema.py): the tier enumerator and the
Kineto plugin's names reach every reader from their one C++ definition."""
import json

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from torchneuron_ext import _C, costmodel
from torchneuron_ext.instrumentation import trace_schema as S
from torchneuron_ext.profiler import NeuronConfig, NeuronProfiler
from torchneuron_ext.profiler.html import model, page


def test_tiers_come_from_the_enumerator():
    assert S.TIERS == tuple(_C._tier_names())
    # The viewer's tier index: "" (none) then every tier, custom and collective included.
    assert model.TIERS == ("",) + S.TIERS and "custom" in model.TIERS


def test_every_tier_has_a_badge_colour():
    assert set(S.TIER_COLOURS) == set(S.TIERS)
    css = page.build_html([{"traceEvents": []}])
    for tier in S.TIERS:
        assert f".tier-{tier} {{" in css


def test_schema_is_the_plugins():
    schema = _C._trace_schema()
    assert S.KERNEL_PREFIX == schema["KERNEL_PREFIX"] == "neuron::"
    assert S.NEURON_PID == int(schema["NEURON_PID"]) == 0x4E43
    assert costmodel.op_name is S.op_name


@pytest.mark.parametrize("name,op", [("neuron::mul.Tensor", "aten::mul.Tensor"),
                                     ("neuron::compiled::graph_0", "compiled::graph_0"),
                                     ("nki::add", "nki::add")])
def test_op_name(name, op):
    assert S.op_name(name) == op


def test_copy_direction_and_hbm_counter():
    assert S.copy_direction("Memcpy HtoD (host -> neuron)") == "HtoD"
    assert S.copy_direction("neuron::mul") == "DtoD"
    assert S.hbm_counter_core(S.hbm_counter_name(3)) == 3
    assert S.hbm_counter_core("NC3 collectives") is None


def test_a_trace_speaks_the_schema(tmp_path):
    cfg = NeuronConfig(profile_output_dir=str(tmp_path))
    exporter = NeuronProfiler(cfg)
    x = torch.randn(32, 32, device="neuron")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1], experimental_config=cfg,
                 on_trace_ready=exporter.export_trace, profile_memory=True):
        (x @ x).cpu()
    events = json.load(open(f"{exporter.last_export_dir}/trace.json"))["traceEvents"]
    kernels = [e for e in events if e.get("cat") == S.CAT_KERNEL]
    assert any(S.op_name(e["name"]) == "aten::mm" for e in kernels)
    mm = next(e for e in kernels if S.op_name(e["name"]) == "aten::mm")
    for key in (S.DEVICE, S.STREAM, S.TIER, S.BYTES, S.BYTES_READ, S.BYTES_WRITTEN, S.FLOPS, S.ELEMENTS, S.DTYPE):
        assert key in mm["args"], key
    assert mm["args"][S.TIER] in S.TIERS and mm["pid"] == S.NEURON_PID
    copies = [e for e in events if e.get("cat") == S.CAT_MEMCPY]
    assert copies and all(e["name"] in S.COPY_NAMES for e in copies)
    assert {S.copy_direction(e["name"]) for e in copies} == {"DtoH"}
    runtime = {e["name"] for e in events if e.get("cat") == S.CAT_RUNTIME}
    assert runtime <= {S.RUNTIME_KERNEL, S.RUNTIME_COPY} and S.RUNTIME_KERNEL in runtime
    lanes = {e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"
             and e.get("pid") == S.NEURON_PID}
    assert "NC0" + S.LANE_HARDWARE in lanes and "NC0" + S.LANE_TRANSFERS in lanes
    assert any(S.hbm_counter_core(e.get("name", "")) == 0 for e in events if e.get("ph") == "C")

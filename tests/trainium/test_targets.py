"""One Trainium target record per generation and one reader of the environment: every user of the
target (cost model, NKI simulator, torch.neuron's device properties, torch_neuronx.utils) agrees with
it, including the two latent bugs where they did not (review 7.3, items 2 and 3)."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from torchneuron_ext import costmodel
from torchneuron_ext.instrumentation import trace_schema as S
from torchneuron_ext.nki import memory
from torchneuron_ext.torch_neuronx import utils as tnx_utils
from torchneuron_ext.trainium import targets

ENV = targets.ENVIRONMENT


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch):
    for var in ENV:
        monkeypatch.delenv(var, raising=False)


def test_every_generation_has_one_record():
    assert set(targets.TARGETS) == {"trn1", "inf2", "trn2", "trn3"}
    for name, t in targets.TARGETS.items():
        assert t.name == name and t.lnc == 1 and t.default_lnc in t.lnc_sizes
    assert [targets.TARGETS[n].generation for n in ("trn1", "inf2", "trn2", "trn3")] == [2, 2, 3, 4]
    assert targets.TARGETS["trn2"].core_type == "NeuronCore-v3" and targets.TARGETS["trn2"].capability == (3, 0)
    # inf2 is Trn1's NeuronCore-v2 in another instance: the same limits and rates.
    inf2, trn1 = targets.TARGETS["inf2"], targets.TARGETS["trn1"]
    assert {f: getattr(inf2, f) for f in ("sbuf_partition_bytes", "tensor_clock_hz", "hbm_bytes_per_s")} == \
        {f: getattr(trn1, f) for f in ("sbuf_partition_bytes", "tensor_clock_hz", "hbm_bytes_per_s")}
    assert inf2.instance_type != trn1.instance_type


def test_logical_core_scaling_round_trips():
    trn2 = targets.by_name("trn2")
    assert trn2.lnc == 2 and trn2.label == "trn2 LNC=2"
    assert trn2.physical_core() == targets.TARGETS["trn2"]
    assert trn2.physical_core().at_lnc(2) == trn2
    assert trn2.cores_per_instance * 2 == targets.TARGETS["trn2"].cores_per_instance
    with pytest.raises(ValueError, match="LNC=2 is not a logical-core size of trn1: use 1"):
        targets.by_name("trn1", 2)


@pytest.mark.parametrize("env,name,lnc", [
    ({}, "trn2", 2),
    ({"NKI_TARGET": "trn1"}, "trn1", 1),
    ({"NKI_TARGET": "inf2"}, "inf2", 1),
    ({"NEURON_PLATFORM_TARGET_OVERRIDE": "trn3"}, "trn3", 2),
    ({"NEURON_PLATFORM_TARGET_OVERRIDE": "trn3", "NKI_TARGET": "trn1"}, "trn1", 1),
    ({"NKI_TARGET": "trn1", "NEURON_EMU_TARGET": "trn3:lnc=1"}, "trn3", 1),
    ({"NKI_TARGET": "trn2:lnc=1"}, "trn2", 1),
])
def test_one_precedence_for_every_reader(monkeypatch, env, name, lnc):
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    t = targets.target_from_environment()
    assert (t.name, t.lnc) == (name, lnc)
    # The NKI simulator, torch_neuronx and torch.neuron read the same record.
    assert memory.default_target().name == name
    assert tnx_utils.get_platform_target() == name
    assert tnx_utils.get_lnc_setting() == str(t.default_lnc)
    assert torch.neuron.get_device_properties(0).name == t.instance_type
    # The cost model too (inf2 projected as trn1, whose core it has).
    assert costmodel.default_target().name == targets.PROJECTED_AS.get(name, name)


@pytest.mark.parametrize("var", ENV)
def test_one_error_message(monkeypatch, var):
    monkeypatch.setenv(var, "trn9")
    want = f"{var}='trn9': unknown Neuron platform target 'trn9': use one of trn1, inf2, trn2, trn3"
    for read in (targets.target_from_environment, memory.default_target, costmodel.default_target,
                 tnx_utils.get_platform_target, lambda: torch.neuron.get_device_properties(0)):
        with pytest.raises(ValueError) as e:
            read()
        assert str(e.value) == want


def test_device_properties_describe_the_configured_target(monkeypatch):
    p = torch.neuron.get_device_properties(0)
    assert (p.name, p.core_type, torch.neuron.get_device_capability()) == ("trn2.48xlarge", "NeuronCore-v3", (3, 0))
    monkeypatch.setenv("NKI_TARGET", "trn1")
    p = torch.neuron.get_device_properties(0)
    assert (p.name, p.core_type, (p.major, p.minor)) == ("trn1.32xlarge", "NeuronCore-v2", (2, 0))
    assert torch.neuron.get_device_capability() == (2, 0)


def test_nc_version_is_the_launch_targets(monkeypatch):
    # Latent bug 2: nisa.get_nc_version() read the environment's target, so a kernel launched for trn3
    # was told gen3 (trn2's) while its tile limits were trn3's.
    import torchneuron_ext.nki as nki
    import torchneuron_ext.nki.isa as nisa

    seen = []

    def kernel(a):
        seen.append(nisa.get_nc_version())
        return a

    for target in ("trn1", "inf2", "trn2", "trn3"):
        nki.jit(platform_target=target)(kernel)(np.zeros((2, 2), np.float32))
    assert seen == [nisa.nc_version.gen2, nisa.nc_version.gen2, nisa.nc_version.gen3, nisa.nc_version.gen4]
    monkeypatch.setenv("NKI_TARGET", "trn3")
    assert nisa.get_nc_version() == nisa.nc_version.gen4  # outside a launch: the configured target


def _nki_event(monkeypatch, tmp_path, env: dict[str, str]) -> tuple[dict, dict]:
    import torchneuron_ext.nki.legacy as lnki

    from tests.trainium.test_costmodel import _scale_tiles

    for var in ENV:
        monkeypatch.delenv(var, raising=False)
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    kernel = lnki.jit(_scale_tiles)
    x = torch.ones(512, 512, device="neuron")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        kernel(x)
    path = tmp_path / f"{len(list(tmp_path.iterdir()))}.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    (event,) = [e for e in trace["traceEvents"] if e.get("cat") == S.CAT_KERNEL and "nki::" in e["name"]]
    return trace, event


def test_nki_projection_is_one_generations(monkeypatch, tmp_path):
    # Latent bug 3: with NKI_TARGET=trn1 and NEURON_EMU_TARGET=trn3 the simulator timed the kernel's
    # instructions at trn1's rates and the profiler added trn3's launch. The one reader makes the
    # launch and its projection the same target: NEURON_EMU_TARGET's.
    _, trn1 = _nki_event(monkeypatch, tmp_path, {"NKI_TARGET": "trn1"})
    _, trn3 = _nki_event(monkeypatch, tmp_path, {"NKI_TARGET": "trn3"})
    assert trn1["args"][S.MODEL_NS] != trn3["args"][S.MODEL_NS]
    trace, both = _nki_event(monkeypatch, tmp_path, {"NKI_TARGET": "trn1", "NEURON_EMU_TARGET": "trn3"})
    assert both["args"][S.MODEL_NS] == trn3["args"][S.MODEL_NS]
    timeline = costmodel.project_trace(trace)
    (k,) = [k for k in timeline.kernels if k.tier == "nki"]
    assert timeline.target.label == "trn3 LNC=2"
    t = targets.by_name("trn3")
    assert abs(k.duration_us - (both["args"][S.MODEL_NS] / 1e3 + t.launch_s * 1e6)) < 1e-3


def test_the_records_and_formulas_need_only_the_standard_library():
    # The NKI simulator's numpy core and every layer above read them: loaded on their own, as a
    # package of their own, they must not pull in torch, numpy or the rest of torchneuron_ext.
    import os
    import subprocess
    import sys

    folder = os.path.dirname(targets.__file__)
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('trainium', {os.path.join(folder, '__init__.py')!r},"
        f" submodule_search_locations=[{folder!r}])\n"
        "m = importlib.util.module_from_spec(spec); sys.modules['trainium'] = m; spec.loader.exec_module(m)\n"
        "import trainium.projection as p\n"
        "assert abs(p.eager_kernel('aten::add.Tensor', 128, 64, 0, 16, 'Float', 'trn2').duration_s - 12.0003e-6) < 1e-9\n"
        "bad = sorted(n for n in sys.modules if n.split('.')[0] in ('torch', 'numpy', 'torchneuron_ext'))\n"
        "assert not bad, bad\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env={k: v for k, v in os.environ.items() if k not in ENV})
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("spec, lnc, release, label", [
    ("trn1:release=2.10", 1, (2, 10), "trn1 Neuron 2.10"),
    ("trn2:lnc=1:release=2.24", 1, (2, 24), "trn2 LNC=1 Neuron 2.24"),
    ("trn2:1", 1, (2, 32), "trn2 LNC=1"),
    ("inf2:release=2.18", 1, (2, 18), "trn1 Neuron 2.18"),  # inf2 is projected as trn1, at its release
])
def test_spec_carries_the_runtime_release(spec, lnc, release, label):
    from torchneuron_ext.trainium.projection import parse_target

    t = parse_target(spec)
    assert (t.lnc, t.runtime_release, t.label) == (lnc, release, label)


def test_spec_errors_say_what_to_write(monkeypatch):
    with pytest.raises(ValueError, match=r"unknown option 'rt'; use lnc=<1\|2> and release=<2.x>"):
        targets.from_spec("trn2:rt=2.24")
    monkeypatch.setenv("NEURON_EMU_TARGET", "trn1:release=new")
    with pytest.raises(ValueError, match=r"NEURON_EMU_TARGET='trn1:release=new': Neuron SDK release 'new' is not "
                                         r"major.minor: use e.g. '2.24'"):
        targets.target_from_environment()

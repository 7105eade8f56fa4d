"""The dry run (torchneuron_ext/profiler/dry_run.py): fake tensors recorded as a real run's kernels."""
from __future__ import annotations

import copy
import json
import os
import re

import pytest
import torch
from expecttest import TestCase

import torchneuron_ext  # noqa: F401
from torchneuron_ext import costmodel
from torchneuron_ext.profiler.dry_run import COMPOSITE, COPY, DryRunError, op_kind
from torchneuron_ext.profiler.projection import project_trace
from torchneuron_ext.profiler.trace_events import classify
from torchneuron_ext.trainium.projection import CONV_GROUPS_ARG, CONV_WEIGHT_ARG

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _mlp():
    torch.manual_seed(0)
    with torch.device("neuron"):
        m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 8))
    return m, torch.optim.AdamW(m.parameters())


def _mlp_step(mo) -> None:
    m, opt = mo
    x = torch.randn(4, 16, device="neuron")
    m(x).sum().backward()
    opt.step()
    opt.zero_grad()


def _conv():
    torch.manual_seed(0)
    with torch.device("neuron"):
        return torch.nn.Conv2d(3, 8, 3)


def _conv_step(m) -> None:
    m(torch.randn(2, 3, 16, 16, device="neuron")).sum().backward()


def _tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32)
    with torch.device("neuron"):
        model = LlamaForCausalLM(cfg)
    model.config._attn_implementation = "sdpa"
    return model, torch.optim.AdamW(model.parameters(), foreach=True)


def _llama_step(mo) -> None:
    model, opt = mo
    ids = torch.randint(0, 64, (2, 8), device="neuron")
    model(input_ids=ids, labels=ids).loss.backward()
    opt.step()
    opt.zero_grad()


def _real_trace(build, step, tmp_path) -> dict:
    from torch.profiler import ProfilerActivity

    from torchneuron_ext.profiler import NeuronConfig, NeuronProfiler

    state = build()
    cfg = NeuronConfig(profile_output_dir=str(tmp_path))
    exporter = NeuronProfiler(cfg)
    with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
                                experimental_config=cfg, on_trace_ready=exporter.export_trace):
        step(state)
    with open(os.path.join(exporter.last_export_dir, "trace.json")) as f:
        return json.load(f)


def _kernels(trace: dict) -> list[tuple]:
    return [(a.name, a.tier, a.bytes_read, a.bytes_written, a.elements, a.flops)
            for a in classify(trace).activities]


def _names(trace: dict) -> list[str]:
    """Kernel names, without the differences docs/cost_model.md ("Dry run") lists: autograd accumulates
    gradients in place (add_) only when it holds the one reference, which a fake tensor's Python object
    prevents; empty host->device copies (no bytes) of the real run."""
    return [a.name.replace("add_.Tensor", "add.Tensor") for a in classify(trace).activities
            if a.bytes_read or a.bytes_written or a.kind != "copy"]


PROGRAMS = {"mlp": (_mlp, _mlp_step), "conv": (_conv, _conv_step), "llama": (_tiny_llama, _llama_step)}


@pytest.mark.parametrize("program", list(PROGRAMS))
def test_dry_run_records_the_real_runs_kernels_and_projects_the_same_time(program, tmp_path):
    build, step = PROGRAMS[program]
    real = _real_trace(build, step, tmp_path)
    dry = costmodel.dry_run(step, setup=build)
    if program != "llama":
        assert _kernels(dry.trace) == _kernels(real)  # byte for byte
    else:
        assert _names(dry.trace) == _names(real)
    real_busy = project_trace(real).busy_us
    dry_busy = project_trace(dry.trace).busy_us
    assert real_busy > 0
    if program == "conv":
        # The dry run records the convolution's weight shape, which a real run's record lacks
        # (docs/cost_model.md, Formulas, Convolution: its geometry): the same records without it
        # project the same time; with it, the taps' lowering (3 channels x 9 taps) is charged.
        plain = copy.deepcopy(dry.trace)
        for e in plain["traceEvents"]:
            for key in (CONV_WEIGHT_ARG, CONV_GROUPS_ARG):
                (e.get("args") or {}).pop(key, None)
        assert dry_busy > real_busy
        dry_busy = project_trace(plain).busy_us
    assert abs(dry_busy - real_busy) <= 0.01 * real_busy


class TestMemory(TestCase):
    def test_verdict_names_what_dominates_the_peak(self):
        def build():
            with torch.device("neuron"):
                m = torch.nn.Linear(1024, 1024, bias=False)
            return m, torch.optim.Adam(m.parameters(), foreach=True)

        def step(mo):
            m, opt = mo
            m(torch.randn(8, 1024, device="neuron")).sum().backward()
            opt.step()

        r = costmodel.dry_run(step, setup=build, target="trn2")
        by = r.memory.by_category
        # 4 MiB of fp32 weights; Adam keeps two moments; the gradient is alive at the step.
        assert by["parameters"] == 4 * 2**20
        assert by["gradients"] == 4 * 2**20
        assert by["optimizer state"] >= 8 * 2**20
        self.assertExpectedInline(r.memory.verdict(), """\
peak HBM 0.02 GiB of 24 GiB per core (trn2 LNC=2): fits
dominated by optimizer state:
  parameters                  0.00 GiB
  gradients                   0.00 GiB
  optimizer state             0.01 GiB
  activations and other       0.00 GiB""")

    def test_does_not_fit_on_a_smaller_core(self):
        def step():
            # 20 GiB of bf16 on trn2 at LNC=1 (12 GiB per physical core).
            w = torch.empty(10 * 2**30 // 1, dtype=torch.bfloat16, device="neuron")
            return w + 1

        r = costmodel.dry_run(step, target="trn2:lnc=1")
        assert r.memory.capacity_bytes == 12 * 2**30
        assert not r.memory.fits
        assert "does not fit" in r.memory.verdict()
        assert r.memory.dominant == "activations and other"


def test_a_model_built_on_the_host_moves_to_the_device():
    # The commonest script: build on the CPU, then model.to("neuron") (and .half()). FakeTensorMode's weak
    # references make Module._apply's parameter swap fail without the dry run's own conversion.
    def step():
        m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
        m.to("neuron").half()
        assert all(p.device.type == "neuron" and p.dtype == torch.float16 for p in m.parameters())
        assert all(isinstance(p, torch.nn.Parameter) for p in m.parameters())
        assert [name for name, _ in m.named_parameters()] == ["0.weight", "0.bias", "2.weight", "2.bias"]
        m(torch.randn(2, 8, device="neuron", dtype=torch.float16)).sum().backward()
        return [p.grad is not None for p in m.parameters()]

    r = costmodel.dry_run(step)
    assert r.value == [True] * 4
    kinds = {e["name"] for e in r.trace["traceEvents"] if e.get("ph") == "X"}
    assert "neuron::addmm" in kinds and "Memcpy HtoD (host -> neuron)" in kinds


class TestErrors(TestCase):
    def test_item_names_what_to_do(self):
        def step():
            return torch.ones(3, device="neuron").sum().item()

        with self.assertRaisesRegex(DryRunError, r"aten::_local_scalar_dense reads a tensor's values.*is_dry_run"):
            costmodel.dry_run(step)

    def test_print_names_what_to_do(self):
        def step():
            print(torch.ones(3, device="neuron"))

        with self.assertRaisesRegex(DryRunError, r"printing a tensor reads a tensor's values"):
            costmodel.dry_run(step)

    def test_is_dry_run_only_inside(self):
        assert not costmodel.is_dry_run()
        assert costmodel.dry_run(costmodel.is_dry_run).value is True


def test_tracked_composites_are_decomposed():
    """Every operator tracked_composites.cpp registers for PrivateUse1 is run as its decomposition."""
    with open(os.path.join(ROOT, "csrc", "aten", "tracked_composites.cpp")) as f:
        src = f.read()
    block = src[src.index("TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)"):]
    names = re.findall(r'm\.impl\("([a-z_.]+)"', block[:block.index("}")])
    assert names
    for name in names:
        base, _, overload = name.partition(".")
        func = getattr(getattr(torch.ops.aten, base), overload or "default")
        # copy_ is a transfer (its direction from the devices), as the real run records it.
        assert op_kind(func) == (COPY if name == "copy_" else COMPOSITE), name


def test_report_and_viewer(tmp_path):
    r = costmodel.dry_run(_mlp_step, setup=_mlp)
    out = r.write(tmp_path)
    text = open(os.path.join(out, "summary.txt")).read()
    assert "dry run on trn2 LNC=2" in text and "projected on trn2 LNC=2" in text
    assert os.path.getsize(os.path.join(out, "report.html")) > 0
    trace = json.load(open(os.path.join(out, "trace.json")))
    assert any(e.get("cat") == "neuron_projected" for e in trace["traceEvents"])


def test_tensor_parallel_rank_with_its_collectives():
    """DTensor tensor parallel over a fake world of 4: one rank's local kernels and its collectives."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    def step():
        mesh = init_device_mesh("neuron", (4,))
        with torch.device("neuron"):
            m = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 64, bias=False))
        parallelize_module(m, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
        m(torch.randn(8, 64, device="neuron")).sum().backward()

    r = costmodel.dry_run(step, world_size=4)
    acts = classify(r.trace).activities
    addmm = [a for a in acts if a.name == "neuron::addmm"]
    # The column-parallel layer's local weight is a quarter: 64 x 64 fp32, plus x (8 x 64) and its bias shard.
    assert addmm[0].bytes_read == 64 * 64 * 4 + 8 * 64 * 4 + 64 * 4
    reduces = [a for a in acts if a.tier == "collective" and a.name == "neuron::allreduce"]
    assert reduces, [a.name for a in acts]
    timeline = project_trace(r.trace)
    collective = [k for k in timeline.kernels if k.name == "neuron::allreduce"][0]
    # Projected over the group's 4 ranks, as the cost model's collective formula says.
    expected = costmodel.collective("c10d::allreduce", 8 * 64 * 4, 8 * 64 * 4, 4, "trn2")
    assert collective.duration_us == pytest.approx(expected.duration_s * 1e6)
    assert not torch.distributed.is_initialized()  # the fake world is gone
    assert r.memory.by_category["parameters"] > 0  # DTensor parameters: their local shards' storages


def test_cli_project(tmp_path, capsys):
    from torchneuron_ext import cli

    script = tmp_path / "prog.py"
    script.write_text("import torch, torchneuron_ext\n"
                      "x = torch.randn(64, 64, device='neuron')\n"
                      "y = x @ x\n")
    out = tmp_path / "out"
    assert cli.main(["project", "--target", "trn3", "--out", str(out), "--", "python", str(script)]) == 0
    err = capsys.readouterr().err
    assert "dry run on trn3 LNC=2" in err and "aten::mm" in err
    trace = json.load(open(out / "trace.json"))
    assert [a.name for a in classify(trace).activities] == ["neuron::normal_", "neuron::mm"]


def test_cli_project_value_read(tmp_path, capsys):
    from torchneuron_ext import cli

    script = tmp_path / "prog.py"
    script.write_text("import torch, torchneuron_ext\n"
                      "if torch.ones(2, device='neuron').sum() > 1:\n"
                      "    pass\n")
    assert cli.main(["project", "--out", str(tmp_path / "out"), "--", "python", str(script)]) == 1
    assert "reads a tensor's values" in capsys.readouterr().err


def test_fsdp2_rank_gathers_and_scatters_over_its_group():
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    def step():
        mesh = init_device_mesh("neuron", (2,))
        with torch.device("neuron"):
            m = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 64))
        fully_shard(m, mesh=mesh)
        m(torch.randn(8, 64, device="neuron")).sum().backward()

    r = costmodel.dry_run(step, world_size=2)
    acts = classify(r.trace).activities
    params = (64 * 256 + 256 + 256 * 64 + 64) * 4
    gather = [a for a in acts if a.name == "neuron::allgather_into_tensor"]
    scatter = [a for a in acts if a.name == "neuron::reduce_scatter_tensor"]
    assert gather and scatter
    # One rank sends its half of the flat parameters and receives all of them; gradients the other way.
    assert (gather[0].bytes_read, gather[0].bytes_written) == (params // 2, params)
    assert (scatter[-1].bytes_read, scatter[-1].bytes_written) == (params, params // 2)
    events = r.trace["traceEvents"]
    assert events[gather[0].index]["args"]["group size"] == 2

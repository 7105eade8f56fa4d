"""The projected timeline (the cost model replaying a trace on a Trainium target): its clock, its
lanes in the Chrome trace, the report's projected verdict and the timing table's projected columns."""
import json
import os

import torch
from expecttest import TestCase
from torch.profiler import ProfilerActivity

from torchneuron_ext import costmodel
from torchneuron_ext.profiler import NeuronConfig, NeuronProfiler, OpStat, summarize_trace
from torchneuron_ext.profiler.timing import format_timing_table

MiB = 1 << 20
PID = 0x4E43


def _trace(kernels, host_gap_us):
    """One host op per kernel: the op's dispatch span holds its (emulated) kernel, then a host gap."""
    ev, t = [], 1000.0
    for name, tier, dur, read, written in kernels:
        ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::" + name, "ts": t, "dur": dur + 4, "pid": 1, "tid": 1})
        ev.append({"ph": "X", "cat": "privateuse1_runtime", "name": "nrt_execute", "ts": t + 1, "dur": dur + 2,
                   "pid": PID, "tid": 1, "args": {"op": "aten::" + name, "tier": tier}})
        ev.append({"ph": "X", "cat": "kernel", "name": "neuron::" + name, "ts": t + 2, "dur": dur, "pid": PID,
                   "tid": 0, "args": {"tier": tier, "device": 0, "stream": 0, "bytes read": read,
                                      "bytes written": written, "elements": written // 4, "dtype": "Float"}})
        t += dur + 4 + host_gap_us
    return {"traceEvents": ev}


def _lane_is_well_formed(test, timeline):
    by_lane = {}
    for k in timeline.kernels:
        test.assertGreaterEqual(k.start_us, k.dispatch_us - 1e-9, k.name)
        test.assertGreater(k.duration_us, 0.0)
        by_lane.setdefault((k.core, k.stream), []).append(k)
    for ks in by_lane.values():
        ks.sort(key=lambda k: k.start_us)
        for a, b in zip(ks, ks[1:]):
            test.assertLessEqual(a.start_us + a.duration_us, b.start_us + 1e-9, (a.name, b.name))


class TestProjectedTimeline(TestCase):
    def test_clock_takes_the_emulated_kernels_out(self):
        # Two 2048x2048 fp32 multiplies, each 1000 us on the host, 10 us of host work between them.
        big = ("mul.Tensor", "native", 1000.0, 32 * MiB, 16 * MiB)
        tl = costmodel.project_trace(_trace([big, big], host_gap_us=10.0), "trn2")
        a, b = tl.kernels
        # A: dispatched at 1002 (its measured start), 81.42 us on trn2 (docs/cost_model.md, case 2).
        self.assertAlmostEqual(a.dispatch_us, 1002.0)
        self.assertAlmostEqual(a.duration_us, 81.423, places=2)
        # B: measured at 2016, minus A's 1000 us = 1016; the device is still busy with A until 1083.42.
        self.assertAlmostEqual(b.dispatch_us, 1016.0)
        self.assertAlmostEqual(b.start_us, a.start_us + a.duration_us)
        self.assertEqual(tl.verdict, "device-bound")
        _lane_is_well_formed(self, tl)

    def test_verdicts(self):
        tiny = ("add.Tensor", "native", 20.0, 128, 64)
        big = ("mul.Tensor", "native", 1000.0, 32 * MiB, 16 * MiB)
        # Tiny ops dispatched faster than the 12 us launch: launches fill the device.
        self.assertEqual(costmodel.project_trace(_trace([tiny] * 20, host_gap_us=2.0), "trn2").verdict,
                         "launch-bound")
        # The same ops with 100 us of host work between them: the device waits.
        host = costmodel.project_trace(_trace([tiny] * 20, host_gap_us=100.0), "trn2")
        self.assertEqual(host.verdict, "host-bound")
        self.assertLess(host.busy_us / host.wall_us, 0.2)  # a sparse lane
        self.assertEqual(costmodel.project_trace(_trace([big] * 5, host_gap_us=10.0), "trn2").verdict,
                         "device-bound")
        self.assertEqual(costmodel.project_trace({"traceEvents": []}).verdict, "no device activity")

    def test_target_switch_moves_the_lane(self):
        big = ("mul.Tensor", "native", 1000.0, 32 * MiB, 16 * MiB)
        walls = [costmodel.project_trace(_trace([big] * 4, 10.0), t).wall_us for t in ("trn1", "trn2", "trn3")]
        self.assertGreater(walls[0], walls[1])
        self.assertGreater(walls[1], walls[2])

    def test_compiled_graph_is_one_launch(self):
        ev = [{"ph": "X", "cat": "cpu_op", "name": "Torch-Compiled Region", "ts": 1000.0, "dur": 520.0, "pid": 1,
               "tid": 1}]
        ev.append({"ph": "X", "cat": "kernel", "name": "neuron::compiled::graph_0", "ts": 1005.0, "dur": 500.0,
                   "pid": PID, "tid": 0, "args": {"tier": "compiled", "device": 0, "stream": 0}})
        for i, ts in enumerate((1010.0, 1200.0)):
            ev.append({"ph": "X", "cat": "kernel", "name": f"neuron::compiled::cpp_fused_{i}", "ts": ts,
                       "dur": 150.0, "pid": PID, "tid": 0,
                       "args": {"tier": "compiled", "device": 0, "stream": 0, "bytes read": 16 * MiB,
                                "bytes written": 16 * MiB}})
        tl = costmodel.project_trace({"traceEvents": ev}, "trn2")
        graph, k0, k1 = tl.kernels
        per_kernel = 32 * MiB / 725e9 * 1e6  # 46.28 us each, no launch of their own
        self.assertAlmostEqual(k0.duration_us, per_kernel, places=3)
        self.assertAlmostEqual(k0.start_us, graph.start_us + 12.0)
        self.assertAlmostEqual(k1.start_us, k0.start_us + k0.duration_us)
        self.assertAlmostEqual(graph.duration_us, 12.0 + 2 * per_kernel, places=3)
        self.assertEqual(tl.launch_us, 12.0)

    def test_lane_events_carry_the_model_inputs(self):
        big = ("mul.Tensor", "native", 1000.0, 32 * MiB, 16 * MiB)
        trace = _trace([big, big], 10.0)
        costmodel.add_projected_lanes(trace, "trn2")
        costmodel.add_projected_lanes(trace, "trn2")  # idempotent
        lane = [e for e in trace["traceEvents"] if e.get("cat") == "neuron_projected"]
        names = [e for e in trace["traceEvents"] if e.get("ph") == "M" and e["name"] == "thread_name"]
        self.assertEqual(len(lane), 2)
        self.assertEqual([e["args"]["name"] for e in names], ["NC0 projected (trn2 LNC=2)"])
        args = lane[0]["args"]
        self.assertEqual((args["engine"], args["bound"], args["bytes"], args["target"]),
                         ("dma", "memory", 48 * MiB, "trn2 LNC=2"))
        self.assertEqual(lane[0]["tid"], costmodel.PROJECTED_TID_BASE)  # no measured lane has it

    def test_streams_get_lanes_of_their_own(self):
        # Two multiplies on two streams of one core, dispatched 10 us apart: each stream is its own
        # queue, so they overlap on the projection, each on its own lane.
        trace = _trace([("mul.Tensor", "native", 5.0, 32 * MiB, 16 * MiB)] * 2, host_gap_us=1.0)
        kernels = [e for e in trace["traceEvents"] if e["cat"] == "kernel"]
        kernels[1]["args"]["stream"] = 7
        costmodel.add_projected_lanes(trace, "trn2")
        costmodel.add_projected_lanes(trace, "trn2")  # idempotent
        lane = [e for e in trace["traceEvents"] if e.get("cat") == "neuron_projected"]
        names = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "thread_name"}
        self.assertEqual(names, {costmodel.PROJECTED_TID_BASE: "NC0 projected (trn2 LNC=2)",
                                 costmodel.PROJECTED_STREAM_TID_BASE: "NC0 projected stream 7 (trn2 LNC=2)"})
        a, b = lane
        self.assertEqual((a["tid"], b["tid"]), (costmodel.PROJECTED_TID_BASE, costmodel.PROJECTED_STREAM_TID_BASE))
        self.assertLess(b["ts"], a["ts"] + a["dur"])  # they overlap in time, on different lanes

    def test_collectives_run_beside_compute(self):
        big = ("mul.Tensor", "native", 1000.0, 32 * MiB, 16 * MiB)
        trace = _trace([big, big], 10.0)
        trace["distributedInfo"] = {"rank": 0, "world_size": 2}
        trace["traceEvents"].append({"ph": "X", "cat": "kernel", "name": "neuron::c10d::allreduce", "ts": 1003.0,
                                     "dur": 900.0, "pid": PID, "tid": 62,
                                     "args": {"tier": "collective", "device": 0, "stream": 0,
                                              "bytes read": 64 * MiB, "bytes written": 64 * MiB}})
        tl = costmodel.add_projected_lanes(trace, "trn2")
        ar = next(k for k in tl.kernels if k.tier == "collective")
        first = tl.kernels[0]
        self.assertAlmostEqual(ar.duration_us, 626.888, places=2)  # docs/cost_model.md, case 5
        self.assertLess(ar.start_us, first.start_us + first.duration_us)  # overlaps the multiply
        names = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "thread_name"}
        self.assertEqual(names[costmodel.PROJECTED_TID_BASE + 1], "NC0 projected collectives (trn2 LNC=2)")

    def test_collective_projects_over_its_own_group(self):
        # A 2-rank subgroup of an 8-rank world: the record's group size, not the world's, is N.
        trace = {"distributedInfo": {"rank": 0, "world_size": 8}, "traceEvents": []}
        for i, group in enumerate((2, None)):
            args = {"tier": "collective", "device": 0, "stream": 0, "bytes read": 64 * MiB, "bytes written": 64 * MiB}
            if group:
                args["group size"] = group
            trace["traceEvents"].append({"ph": "X", "cat": "kernel", "name": "neuron::c10d::allreduce",
                                         "ts": 1000.0 + 1000 * i, "dur": 900.0, "pid": PID, "tid": 62, "args": args})
        sub, world = costmodel.project_trace(trace, "trn2").kernels
        self.assertAlmostEqual(sub.duration_us, 626.888, places=2)  # docs/cost_model.md, case 5
        # Without the field (older traces): the world, 2 x 7/8 of the buffer over one NeuronLink port and,
        # above 56 MiB, KangaRing's 2 x 8/2 steps, plus the collective floor ("Collectives: algorithms and
        # latency floor"; it was a ring's 14 steps at 320 GB/s).
        self.assertAlmostEqual(world.duration_us, (2 * 7 / 8 * 64 * MiB / 128e9 + 8 * 1.5e-6 + 99.6e-6) * 1e6,
                               places=3)


class TestTables(TestCase):
    def test_timing_table_projected_columns(self):
        rows = [OpStat("aten::mul.Tensor", "native", 10, 10, 10_000.0, 9_800.0, 10 * 32 * MiB, 10 * 16 * MiB, 0,
                       10 * 4 * MiB, "Float", 814.23),
                OpStat("aten::add.Tensor", "native", 5, 5, 50.0, 10.0, 5 * 128, 5 * 64, 0, 5 * 16, "Float", 60.0)]
        self.assertExpectedInline(format_timing_table(rows, costmodel.get_target("trn2")), """\
Operator                                  Tier       Calls  Host total  Host mean  Device total  Device mean  Projected  Proj mean     Bytes  GFLOP/s
-----------------------------------------------------------------------------------------------------------------------------------------------------
aten::mul.Tensor                          native        10    10.00 ms    1.00 ms       9.80 ms     980.0 us   814.2 us    81.4 us 480.0 MiB        -
aten::add.Tensor                          native         5     50.0 us    10.0 us       10.0 us       2.0 us    60.0 us    12.0 us     960 B        -
Host and Device: measured on this machine. Projected: cost model for trn2 LNC=2 (docs/cost_model.md), not a measurement.""")

    def test_report_projected_section(self):
        tiny = ("add.Tensor", "native", 20.0, 128, 64)
        big = ("mul.Tensor", "native", 1000.0, 32 * MiB, 16 * MiB)
        s = summarize_trace(_trace([big, tiny, big], host_gap_us=10.0), target="trn2")
        self.assertEqual(s.verdict, "device-bound")  # measured: the emulator's host computes the kernels
        p = s.projected
        self.assertEqual((p.target, p.launches, p.verdict), ("trn2 LNC=2", 3, "device-bound"))
        self.assertAlmostEqual(p.device_busy_us, 2 * 81.423 + 12.0, places=1)
        mul = next(r for r in s.ops if r.name == "aten::mul.Tensor")
        self.assertEqual(mul.bound, "memory")
        self.assertAlmostEqual(mul.projected_us, 2 * 81.423, places=2)
        self.assertIn("device-bound", json.dumps(s.to_dict()["projected"]))


def test_op_stats_project_collectives_over_the_world(monkeypatch):
    # An op_stats row sums an operator's calls over every group: projected over the world's ranks.
    row = OpStat("c10d::allreduce", "collective", 2, 2, 10.0, 1800.0, 2 * 64 * MiB, 2 * 64 * MiB, 0)
    monkeypatch.setenv("WORLD_SIZE", "2")
    got = costmodel.project_stats([row], "trn2")[("c10d::allreduce", "collective")]
    assert abs(got * 1e6 - 2 * 626.888) < 0.01  # docs/cost_model.md, case 5, twice
    monkeypatch.setenv("WORLD_SIZE", "1")  # one rank: an all-reduce moves nothing
    assert costmodel.project_stats([row], "trn2")[("c10d::allreduce", "collective")] == 0.0


def test_op_stats_project_copies_by_direction():
    from torchneuron_ext.profiler import op_stats, timing

    t = costmodel.get_target("trn2")
    with timing():
        x = torch.ones(1 << 20).to("neuron")  # 4 MiB host -> device
        y = torch.empty_like(x)
        y.copy_(x)  # device -> device
        x.cpu()  # device -> host
    s = next(s for s in op_stats(target=t) if s.name == "aten::_copy_from")
    assert (s.calls_timed, s.host_transfer_calls, s.host_transfer_read, s.host_transfer_written) == (3, 2, 8 * MiB,
                                                                                                     8 * MiB)
    pcie = costmodel.copy("HtoD", 4 * MiB, 4 * MiB, t).duration_s  # 1.3 us + 4 MiB / 16 GB/s = 263.4 us
    hbm = costmodel.copy("DtoD", 4 * MiB, 4 * MiB, t).duration_s  # 1.3 us + 8 MiB / 725 GB/s = 12.9 us
    assert abs(s.projected_total_us - (2 * pcie + hbm) * 1e6) < 1e-6


def test_exported_trace_has_a_projected_lane(tmp_path):
    x = torch.randn(256, 256, device="neuron")
    cfg = NeuronConfig(profile_output_dir=str(tmp_path))
    exporter = NeuronProfiler(cfg)
    with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
                                experimental_config=cfg, on_trace_ready=exporter.export_trace):
        for _ in range(3):
            y = torch.mm(x, x).relu()
        y.cpu()
    with open(os.path.join(exporter.last_export_dir, "trace.json")) as f:
        trace = json.load(f)
    kernels = [e for e in trace["traceEvents"] if e.get("cat") in ("kernel", "gpu_memcpy")]
    lane = [e for e in trace["traceEvents"] if e.get("cat") == "neuron_projected"]
    assert len(lane) == len(kernels) == 7
    mm = next(e for e in kernels if e["name"] == "neuron::mm")
    assert mm["args"]["dtype"] == "Float" and mm["args"]["elements"] == 256 * 256
    mm_proj = next(e for e in lane if e["name"] == "neuron::mm")
    assert mm_proj["args"]["flops"] == 2 * 256 ** 3 and mm_proj["args"]["bound"] == "launch"
    # The copy to the host: over PCIe (16 GB/s), no launch (a transfer is not a NEFF execution).
    dtoh = next(e for e in lane if e["name"].startswith("Memcpy DtoH"))
    assert (dtoh["args"]["engine"], dtoh["args"]["launch us"], dtoh["args"]["bytes"]) == ("pcie", 0.0, 256 * 256 * 4)
    assert abs(dtoh["dur"] - (1.3 + 256 * 256 * 4 / 16e3)) < 1e-3
    ends = {}
    for e in sorted(lane, key=lambda e: e["ts"]):
        key = (e["args"]["device"], e["args"]["stream"])
        assert e["ts"] >= e["args"]["dispatch ts"] - 1e-3
        assert e["ts"] >= ends.get(key, float("-inf")) - 1e-3
        ends[key] = e["ts"] + e["dur"]
    assert trace["neuron"]["summary"]["projected"]["verdict"] in ("host-bound", "launch-bound", "device-bound")


def test_op_stats_project_each_op_from_its_mean_call():
    from torchneuron_ext.profiler import op_stats, timing

    a = torch.randn(512, 512, device="neuron")
    with timing():
        for _ in range(4):
            torch.mul(a, a)
    s = next(s for s in op_stats(target="trn2") if s.name == "aten::mul.Tensor")
    assert (s.dtype, s.elements, s.calls_timed) == ("Float", 4 * 512 * 512, 4)
    one = costmodel.eager_kernel("aten::mul.Tensor", 2 * 512 * 512 * 4, 512 * 512 * 4, 0, 512 * 512, "Float", "trn2")
    assert abs(s.projected_total_us - 4 * one.duration_s * 1e6) < 1e-6
    assert abs(s.projected_mean_us - one.duration_s * 1e6) < 1e-6
    on_trn1 = next(s for s in op_stats(target="trn1") if s.name == "aten::mul.Tensor")
    assert on_trn1.projected_total_us > s.projected_total_us  # less HBM bandwidth per core


def test_nki_kernel_projects_its_instruction_estimate(tmp_path):
    import torchneuron_ext.nki.legacy as nki
    from tests.trainium.test_costmodel import _scale_tiles  # docs/cost_model.md's case 4

    scale_tiles = nki.jit(platform_target="trn2")(_scale_tiles)
    x = torch.ones(512, 512, device="neuron")
    scale_tiles(x)
    cfg = NeuronConfig(profile_output_dir=str(tmp_path))
    exporter = NeuronProfiler(cfg)
    with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
                                experimental_config=cfg, on_trace_ready=exporter.export_trace):
        scale_tiles(x)
    with open(os.path.join(exporter.last_export_dir, "trace.json")) as f:
        trace = json.load(f)
    (k,) = [e for e in trace["traceEvents"] if e.get("cat") == "neuron_projected" and e["name"].startswith("neuron::nki")]
    # docs/cost_model.md, case 4: a 15.09 us schedule of instructions (DMA-bound) plus one 12 us launch.
    assert abs(k["dur"] - 27.085) < 0.01 and k["args"]["bound"] == "memory"


def test_graph_recorded_with_its_kernels_bytes_is_not_counted_twice():
    # The graph's record sums its children's bytes and FLOPs, without dtypes (so alone its bf16 matmul
    # would project at the fp32 rate); its children (annotations) carry their own dtypes.
    n = 2048
    graph_args = {"tier": "compiled", "device": 0, "stream": 0, "bytes read": 32 * MiB + 3 * n * n * 2,
                  "flops": 2 * n ** 3}
    ev = [{"ph": "X", "cat": "kernel", "name": "neuron::compiled::graph_0", "ts": 1000.0, "dur": 900.0, "pid": PID,
           "tid": 0, "args": graph_args}]
    alone = costmodel.project_trace({"traceEvents": list(ev)}, "trn2").kernels[0]
    mm_s = 2 * n ** 3 / 157.2864e12
    assert abs(alone.duration_us - (12.0 + 4 * mm_s * 1e6)) < 1e-3
    ev.append({"ph": "X", "cat": "gpu_user_annotation", "name": "neuron::compiled::cpp_fused_0", "ts": 1010.0,
               "dur": 400.0, "pid": PID, "tid": 0,
               "args": {"tier": "compiled", "device": 0, "in": "compiled region", "bytes": 32 * MiB}})
    ev.append({"ph": "X", "cat": "gpu_user_annotation", "name": "neuron::mm", "ts": 1500.0, "dur": 300.0,
               "pid": PID, "tid": 0, "args": {"tier": "native", "device": 0, "in": "compiled region",
                                              "bytes": 3 * n * n * 2, "flops": 2 * n ** 3, "dtype": "BFloat16"}})
    graph, fused, mm = costmodel.project_trace({"traceEvents": ev}, "trn2").kernels
    fused_us = 32 * MiB / 725e9 * 1e6
    assert abs(fused.start_us - (graph.start_us + 12.0)) < 1e-6 and abs(fused.duration_us - fused_us) < 1e-6
    assert abs(mm.start_us - (fused.start_us + fused_us)) < 1e-6 and abs(mm.duration_us - mm_s * 1e6) < 1e-6
    assert abs(graph.duration_us - (12.0 + fused_us + mm_s * 1e6)) < 1e-6


def test_cli_report_follows_the_target(tmp_path):
    import subprocess
    import sys

    path = tmp_path / "trace.json"
    path.write_text(json.dumps(_trace([("mul.Tensor", "native", 1000.0, 32 * MiB, 16 * MiB)] * 3, 10.0)))

    def report(target):
        env = dict(os.environ, NEURON_EMU_TARGET=target)
        return subprocess.run([sys.executable, "-m", "torchneuron_ext.cli", "report", str(path)], env=env,
                              capture_output=True, text=True, timeout=300)

    r = report("trn3:lnc=1")
    assert r.returncode == 0, r.stderr
    assert "projected on trn3 LNC=1 (cost model" in r.stdout and "top ops by projected time on trn3 LNC=1" in r.stdout
    bad = report("trn7")
    assert bad.returncode != 0
    assert "NEURON_EMU_TARGET='trn7': unknown Neuron platform target 'trn7': use one of trn1, inf2, trn2, trn3" in bad.stderr

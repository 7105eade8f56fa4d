"""Reports from traces: the summary, the text a person reads, and the CLI."""
import json
import os
import subprocess
import sys
import textwrap

import pytest
from expecttest import TestCase

from torchneuron_ext.profiler import format_report, summarize_trace


def _synthetic_trace():
    ev = []
    t = 1000.0
    for i, (name, tier, dur) in enumerate([("neuron::mm", "native", 300.0), ("neuron::special_bessel_j0", "generic", 50.0),
                                           ("neuron::mm", "native", 300.0)]):
        ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::" + name[8:], "ts": t, "dur": dur + 40, "pid": 1, "tid": 1})
        ev.append({"ph": "X", "cat": "privateuse1_runtime", "name": "nrt_execute", "ts": t + 5, "dur": dur + 30,
                   "pid": 0x4E43, "tid": 1, "args": {"op": "aten::" + name[8:], "tier": tier}})
        ev.append({"ph": "X", "cat": "kernel", "name": name, "ts": t + 10, "dur": dur, "pid": 0x4E43, "tid": 0,
                   "args": {"tier": tier, "device": 0, "bytes": 4096}})
        t += dur + 500
    ev.append({"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (neuron -> host)", "ts": t, "dur": 20.0,
               "pid": 0x4E43, "tid": 63, "args": {"bytes written": 65536, "tier": "native"}})
    ev.append({"ph": "C", "name": "NC0 HBM", "ts": t, "pid": 0x4E43, "args": {"allocated MB": 2.0, "reserved MB": 4.0}})
    return {"traceEvents": ev}


class TestReport(TestCase):
    def test_summary_numbers(self):
        s = summarize_trace(_synthetic_trace())
        self.assertEqual(s.kernels, 4)
        self.assertAlmostEqual(s.device_busy_us, 670.0)
        self.assertAlmostEqual(s.wall_us, 2170.0)
        self.assertEqual(s.verdict, "host-bound")
        self.assertEqual(s.generic_ops, {"aten::special_bessel_j0": 1})
        self.assertEqual(s.transfers, {"DtoH": (1, 65536)})
        self.assertEqual(s.peak_hbm_bytes, {0: 2 * 2**20})

    def test_report_text(self):
        self.assertExpectedInline(format_report(summarize_trace(_synthetic_trace())), """\
neuron profile report
=====================
wall time            2.17 ms
device busy          670.0 us (30.9% of wall)
host dispatch        740.0 us
kernels              4 on core(s) 0
verdict              host-bound
  the device waits on the host between kernels: fuse ops (torch.compile, fused ops such as
  torch.rms_norm) or batch more work per op

projected on trn2 LNC=2 (cost model, docs/cost_model.md; not a measurement)
  device busy        41.4 us (2.8% of projected wall)
  wall               1.51 ms
  launches           3, 36.0 us of launch overhead
  verdict            host-bound
    on the target the device would idle between kernels: the host's own work per kernel is the
    cost; give each dispatch more work (bigger batches, fused ops, torch.compile)

top ops by device time (of 3; projected: the cost model's)
  op                                      tier      calls       host     device      bytes  projected  bound
  ----------------------------------------------------------------------------------------------------------
  aten::mm                                native        2   660.0 us   600.0 us    8.0 KiB    24.0 us  launch
  aten::special_bessel_j0                 generic       1    80.0 us    50.0 us    4.0 KiB    12.0 us  launch
  aten::_copy_from                        native        1     0.0 us    20.0 us   64.0 KiB     5.4 us  memory

top ops by projected time on trn2 LNC=2
  aten::mm                                    24.0 us  58.0%  launch
  aten::special_bessel_j0                     12.0 us  29.0%  launch
  aten::_copy_from                             5.4 us  13.0%  memory

generic-path ops (1 of 4 kernels ran a host kernel without a native one)
  aten::special_bessel_j0                      1 calls

transfers
  DtoH           1 copies     64.0 KiB

peak HBM allocated   NC0 2.0 MiB
""")

    def test_bad_inputs(self):
        with self.assertRaisesRegex(ValueError, "no 'traceEvents' list"):
            summarize_trace({"nothing": 1})
        with self.assertRaises(FileNotFoundError):
            summarize_trace("/nonexistent/trace.json")


def _cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "torchneuron_ext.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=300)


def test_cli_profile_then_report(tmp_path):
    script = tmp_path / "work.py"
    script.write_text(textwrap.dedent("""
        import sys, torch
        x = torch.randn(64, 64, device="neuron")
        for _ in range(int(sys.argv[1])):
            x = (x @ x).tanh()
        print("done", x.sum().item() == x.sum().item())
    """))
    r = _cli("profile", "--out", str(tmp_path / "out"), "--", "python", str(script), "3")
    assert r.returncode == 0, r.stderr
    assert "done True" in r.stdout
    assert "neuron profile report" in r.stderr and "aten::mm" in r.stderr
    # The session records what the memory by category needs: the trace has it and the report draws it.
    (folder,) = [d for d, _, fs in os.walk(tmp_path / "out") if "trace.json" in fs]
    with open(os.path.join(folder, "trace.json")) as f:
        timeline = json.load(f)["neuron"]["memory_timeline"]["0"]
    assert timeline["peak_bytes"] >= 64 * 64 * 4 and len(timeline["t_us"]) > 1
    with open(os.path.join(folder, "report.html")) as f:
        assert '"memoryCategories":[{"device":0' in f.read()
    rep = _cli("report", str(tmp_path / "out"))
    assert rep.returncode == 0, rep.stderr
    assert "verdict" in rep.stdout and "aten::tanh" in rep.stdout
    bad = _cli("report", str(tmp_path / "nothing-here"))
    assert bad.returncode == 2 and "torchneuron-ext report:" in bad.stderr
    missing = _cli("profile", "--", "python", str(tmp_path / "missing.py"))
    assert missing.returncode == 2 and "no such script" in missing.stderr


def test_demo_runs(tmp_path):
    r = _cli("demo", "--out", str(tmp_path), "--size", "256")
    assert r.returncode == 0, r.stderr
    assert "== comparison per call: measured on this host | projected on trn2 LNC=2" in r.stdout
    assert "Self NEURON" in r.stdout and "against naive, per call (device time: projected" in r.stdout
    assert "Reading the projection: on this host" in r.stdout
    traces = [os.path.join(d, f) for d, _, fs in os.walk(tmp_path) for f in fs if f == "trace.json"]
    assert len(traces) == 3
    assert "torch.compile fuses" in r.stdout


class TestDemoComparison(TestCase):
    def test_both_clocks_and_the_reading(self):
        from torchneuron_ext.profiler.demo import comparison
        from torchneuron_ext.profiler.report import OpRow, ProjectedSummary, TraceSummary

        MiB = 1 << 20

        def summary(kernels, nbytes, device_us, p_device_us, p_wall_us, verdict):
            # 5 iterations, one kernel per launch.
            return TraceSummary(wall_us=1.05 * device_us, device_busy_us=device_us, host_dispatch_us=device_us,
                                ops=[OpRow("aten::x", "native", 5 * kernels, device_us, device_us, 5 * nbytes)],
                                generic_ops={}, transfers={}, peak_hbm_bytes={}, kernels=5 * kernels, cores=[0],
                                projected=ProjectedSummary("trn2 LNC=2", p_wall_us, p_device_us, 5 * kernels * 12.0,
                                                           5 * kernels, verdict))

        results = {"naive": (7.35e-3, summary(6, 112 * MiB, 35000.0, 1170.0, 1580.0, "device-bound"), "n"),
                   "torch.rms_norm": (7.81e-3, summary(1, 32 * MiB, 37900.0, 291.5, 947.0, "host-bound"), "r"),
                   "torch.compile": (13.3e-3, summary(1, 32 * MiB, 64200.0, 291.5, 2040.0, "host-bound"), "c")}
        self.assertExpectedInline(comparison(results, 5), """\
== comparison per call: measured on this host | projected on trn2 LNC=2 (cost model, docs/cost_model.md) ==
variant          kernels launches      bytes  host ms device ms  wall ms | device ms  wall ms  verdict
naive                6.0      6.0  112.0 MiB     7.00      7.00     7.35 |     0.234    0.316  device-bound
                trace: n/trace.json
torch.rms_norm       1.0      1.0   32.0 MiB     7.58      7.58     7.81 |     0.058    0.189  host-bound
                trace: r/trace.json
torch.compile        1.0      1.0   32.0 MiB    12.84     12.84    13.30 |     0.058    0.408  host-bound
                trace: c/trace.json

torch.compile fuses the naive version into 1 device kernel per call (one launch of the compiled graph; its generated C++ kernels run inside it) instead of 6.

against naive, per call (device time: projected on the target, measured on this host):
  torch.rms_norm  saves 5 kernels, 5 launches, 80.0 MiB of traffic; device time projected 234.0 us -> 58.3 us (4.01x less), measured 7.00 ms -> 7.58 ms (1.08x more)
  torch.compile   saves 5 kernels, 5 launches, 80.0 MiB of traffic; device time projected 234.0 us -> 58.3 us (4.01x less), measured 7.00 ms -> 12.84 ms (1.83x more)

Reading the projection: on this host every variant is dominated by the host computing the kernels, so the
measured verdicts mostly describe the emulator. On trn2 LNC=2 the naive version would be device-bound: its 6
kernels move 112.0 MiB per call, 234 us of device time of which 31% is launch overhead (busy 74% of its
projected wall). torch.rms_norm needs 1 kernel and 32.0 MiB: 58 us of device time, so it would be host-bound:
the device would be busy only 31% of its 189 us projected wall per call, waiting for the host's own work
(Python, dispatch, the framework: measured here, profiler on, with the emulated kernels taken out).
torch.compile runs 1 kernel (one launch for the whole graph) and 32.0 MiB: 58 us of device time, so it would
be host-bound: the device would be busy only 14% of its 408 us projected wall per call, waiting for the host.
Fastest projected wall: torch.rms_norm (189 us against naive's 316 us). On the device the cost is bytes
through HBM and launches, so fewer kernels and fewer passes over memory are what count there; once a variant
is host-bound, what is left to save is the host's work per call.""")

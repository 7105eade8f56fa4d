"""The summary page's ranked findings: the text a person reads is pinned, the ranking follows the
time at stake."""
from expecttest import TestCase

from torchneuron_ext.profiler.html import find
from torchneuron_ext.profiler.report import OpRow, TraceSummary


def _summary(**kw):
    base = dict(wall_us=10_000.0, device_busy_us=2_000.0, host_dispatch_us=5_000.0, ops=[], generic_ops={},
                transfers={}, peak_hbm_bytes={0: 2**20}, kernels=0, cores=[0])
    base.update(kw)
    return TraceSummary(**base)


def _text(findings):
    return "\n".join(f"[{f.key}] {f.title}\n  {f.detail}\n  next: {f.advice}" for f in findings) + "\n"


class TestFindings(TestCase):
    def test_eager_host_bound_with_generic_ops_and_transfers(self):
        s = _summary(
            kernels=120,
            ops=[OpRow("aten::mul.Tensor", "native", 60, 2_400.0, 600.0, 1 << 20),
                 OpRow("aten::special_bessel_j0", "generic", 40, 1_800.0, 900.0, 1 << 18),
                 OpRow("aten::_copy_from", "native", 20, 0.0, 500.0, 1 << 22)],
            generic_ops={"aten::special_bessel_j0": 40},
            transfers={"DtoH": (15, 3 << 20), "HtoD": (5, 1 << 20)})
        self.assertExpectedInline(_text(find(s)), """\
[host_bound] Host-bound: the device idles 80% of the wall time
  Kernels kept the device busy 2.00 ms of 10.00 ms; 120 kernels averaged 16.7 us each, and the device waited for the host between them.
  next: Fewer, larger device operations: fuse ops (torch.compile(model, backend="neuron"), fused ops such as torch.rms_norm or scaled_dot_product_attention) or batch more work per call.
[small_kernels] 100% of kernels are shorter than 50 us
  120 kernels of 3 ops averaged under 50 us each; at that size launch cost rivals the work.
  next: Try torch.compile(model, backend="neuron") to fuse them, or larger batches.
[dispatch_overhead] Dispatch overhead is 2.70 ms, 1.80x the kernel time
  The runtime spent 5.00 ms in dispatch spans, of which 2.70 ms went to preparing launches rather than running kernels (22.5 us per kernel).
  next: Each eager op pays this once: torch.compile turns a sequence of ops into one launch.
[generic_path] 33% of kernels took the generic path
  40 of 120 kernels ran a host kernel through the boxed fallback, without a native kernel: aten::special_bessel_j0 (40). They took 1.80 ms.
  next: Find them with torchneuron_ext.get_fallback_ops() or warn_on_generic_path(); replace them with ops that have native kernels, or keep them out of hot loops.
[transfers] 20 transfers moved 4.0 MiB in 500.0 us
  Copies by direction: DtoH 15x 3.0 MiB, HtoD 5x 1.0 MiB; 25% of device busy time.
  next: Keep tensors on the device between steps; avoid .cpu(), .item() and printing device tensors inside loops; move inputs once, with non_blocking=True from pinned memory.
""")
        ranked = find(s)
        self.assertEqual([f.at_stake_us for f in ranked], sorted((f.at_stake_us for f in ranked), reverse=True))
        self.assertEqual(len(find(s, limit=2)), 2)

    def test_device_bound(self):
        s = _summary(wall_us=1_000.0, device_busy_us=900.0, host_dispatch_us=920.0, kernels=10,
                     ops=[OpRow("aten::mm", "native", 10, 920.0, 900.0, 1 << 20)])
        self.assertExpectedInline(_text(find(s)), """\
[device_bound] Device-bound: kernels fill 90% of the wall time
  Kernels kept the device busy 90% of 1.00 ms. The largest is aten::mm: 100% of device time over 10 calls.
  next: Speed up the top ops by device time: fewer passes over memory (fused or compiled kernels), lower precision (torch.autocast("neuron")), or less work.
[dispatch_overhead] Dispatch overhead is 20.0 us, 2.2% of the kernel time
  The runtime spent 920.0 us in dispatch spans, of which 20.0 us went to preparing launches rather than running kernels (2.0 us per kernel).
  next: Each eager op pays this once: torch.compile turns a sequence of ops into one launch.
""")

    def test_compiled_host_bound_points_at_graph_breaks(self):
        s = _summary(kernels=10, ops=[OpRow("compiled::graph_0", "compiled", 10, 2_000.0, 2_000.0, 0)])
        (first,) = [f for f in find(s) if f.key == "host_bound"]
        self.assertIn("graph_breaks", first.advice)
        self.assertNotIn("small_kernels", [f.key for f in find(s)])

    def test_no_device_activity(self):
        self.assertExpectedInline(_text(find(_summary(device_busy_us=0.0))), """\
[no_device_activity] No device activity was recorded
  The trace has no neuron kernels or transfers.
  next: Profile with activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1] and run work on device="neuron" inside the profiler.
""")


class TestProjectedFinding(TestCase):
    def test_projected_verdict_comes_second(self):
        from torchneuron_ext.profiler.report import ProjectedSummary

        s = _summary(kernels=12, device_busy_us=9_500.0,
                     ops=[OpRow("aten::mul.Tensor", "native", 12, 9_600.0, 9_500.0, 12 * 48 << 20, 977.1, "memory")],
                     projected=ProjectedSummary("trn2 LNC=2", 1_100.0, 977.1, 144.0, 12, "device-bound"))
        found = find(s)
        self.assertEqual([f.key for f in found][:2], ["device_bound", "projected_device_bound"])
        self.assertExpectedInline(_text(found[1:2]), """\
[projected_device_bound] Projected on trn2 LNC=2: device-bound (a model)
  The cost model (docs/cost_model.md) replays the trace on trn2 LNC=2: device busy 977.1 us of a projected 1.10 ms wall (89%), 12 launches costing 144.0 us. The largest is aten::mul.Tensor: 977.1 us projected, memory-bound (measured here: 9.50 ms).
  next: The kernels' own work would dominate: speed up the top ops by projected time (memory-bound: fewer passes over HBM; compute-bound: bf16 on the Tensor Engine).
""")

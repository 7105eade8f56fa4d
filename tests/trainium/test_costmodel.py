"""The cost model's arithmetic on the cases worked by hand in docs/cost_model.md, target selection
and its errors, and the direction each target switch moves the figures."""
import numpy as np
import pytest
from expecttest import TestCase

import torchneuron_ext.nki.legacy as nki
import torchneuron_ext.nki.legacy.isa as nisa
import torchneuron_ext.nki.legacy.language as nl

from torchneuron_ext import costmodel as cm
from torchneuron_ext.nki.cost_model import Costs
from torchneuron_ext.trainium import projection

MiB = 1 << 20


def _scale_tiles(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    ip, jf = nl.mgrid[0:128, 0:512]
    for i in nl.affine_range(4):
        t = nl.load(a[i * 128 + ip, jf])
        nl.store(out[i * 128 + ip, jf], value=nisa.tensor_scalar(t, op0=np.multiply, operand0=2.0))
    return out


def _mm(n, dtype, es, target, launch=True, dims=None):
    return cm.eager_kernel("aten::mm", 2 * n * n * es, n * n * es, 2 * n ** 3, n * n, dtype, target, launch=launch,
                           input_dims=dims)


def _mul(n, target, dtype="Float", es=4):
    return cm.eager_kernel("aten::mul.Tensor", 2 * n * n * es, n * n * es, 0, n * n, dtype, target)


class TestWorkedCases(TestCase):
    def test_bf16_matmul_at_the_tensor_engine_peak(self):
        # 8192 full 128x128x512 instructions of 512 cycles = the peak, plus the trn2 throttle ramp (0.75 us:
        # an eager NEFF starts on an idle Tensor Engine); the same with or without the operands' shapes.
        square = [[4096, 4096], [4096, 4096]]
        for dims in (None, square):
            p = _mm(4096, "BFloat16", 2, "trn2", dims=dims)
            self.assertEqual((p.engine, p.bound), ("tensor", "compute"))
            self.assertAlmostEqual(p.work_s * 1e6, 874.563, places=2)
            self.assertAlmostEqual(p.duration_s * 1e6, 886.563, places=2)
        self.assertAlmostEqual(_mm(4096, "Float", 4, "trn2", dims=square).work_s * 1e6, 3496.003, places=2)
        # trn1 documents no throttle.
        self.assertAlmostEqual(_mm(4096, "BFloat16", 2, "trn1", dims=square).work_s * 1e6, 1497.966, places=2)
        # Inside a compiled graph (no launch of its own) there is no ramp: the work is the peak's.
        self.assertAlmostEqual(_mm(4096, "BFloat16", 2, "trn2", launch=False).work_s * 1e6, 873.813, places=2)

    def test_fp32_elementwise_at_the_hbm_bound(self):
        p = _mul(2048, "trn2")
        self.assertEqual((p.engine, p.bound, p.bytes), ("dma", "memory", 48 * MiB))
        self.assertAlmostEqual(p.duration_s * 1e6, 81.423, places=2)
        self.assertAlmostEqual(_mul(2048, "trn2:lnc=1").duration_s * 1e6, 150.846, places=2)
        self.assertAlmostEqual(_mul(2048, "trn3").duration_s * 1e6, 59.663, places=2)
        # The Vector engine would take 17.07 us: not the bound.
        self.assertAlmostEqual(cm.vector_engine_s(2048 * 2048, "Float", cm.get_target("trn2")) * 1e6, 17.067,
                               places=2)

    def test_tiny_op_is_launch_bound(self):
        p = cm.eager_kernel("aten::add.Tensor", 128, 64, 0, 16, "Float", "trn2")
        self.assertEqual(p.bound, "launch")
        self.assertAlmostEqual(p.duration_s * 1e6, 12.0003, places=4)

    def test_nki_tile_loop(self):
        c = Costs("trn2")
        for _ in range(4):
            c.dma("load", 128 * 512 * 4, False, True)
            c.compute("vector", "tensor_scalar", 512)
            c.dma("store", 128 * 512 * 4, True, False)
        self.assertAlmostEqual(c.busy_s["dma"] * 1e6, 16.185, places=2)
        self.assertAlmostEqual(c.busy_s["vector"] * 1e6, 2.133, places=2)
        self.assertEqual(c.busiest_engine, "dma")
        # Costs called directly name no operands, so nothing ties the instructions: the 8 transfers alternate
        # between the two DMA queues and share the bandwidth (nki/schedule.py): the first 1.3 + 0.723 us,
        # the second's data after it (0.723), then 3 more pairs of 1.3 + 0.723 us = 8.816 us.
        self.assertAlmostEqual(c.estimated_latency_s * 1e6, 4 * 1.3 + 5 * 0.72316, places=3)
        p = cm.nki_kernel(c.estimated_latency_s, c.bytes_read, c.bytes_written, c.flops, "trn2")
        self.assertAlmostEqual(p.duration_s * 1e6, 20.816, places=2)

    def test_nki_tile_loop_through_the_simulator(self):
        # The same loop as a kernel: the simulator charges exactly the hand-worked instructions, and the
        # schedule orders them (docs/cost_model.md, worked case 4): the first iteration ends at 4.746 us,
        # each later one adds its load's data, the Vector instruction after its dependency latency, and the
        # store (3.446 us; the next load's fixed cost overlaps the store).
        k = nki.benchmark(warmup=1, iters=1, platform_target="trn2")(_scale_tiles)
        k(np.ones((512, 512), np.float32))
        c = k.benchmark_result.launch.costs
        self.assertEqual(dict(c.instructions), {"load": 4, "tensor_scalar": 4, "store": 4})
        self.assertAlmostEqual(c.busy_s["dma"] * 1e6, 16.185, places=2)
        self.assertAlmostEqual(k.benchmark_result.nc_latency.get_latency_percentile(50), 15.085, places=2)
        self.assertIn("projected 15.1 us on trn2 (cost model", k.benchmark_result.summary())

    def test_all_reduce(self):
        # Worked case 5: 64 MiB over 2 ranks on trn2 LNC=2 is above 56 MiB, so a Ring (KangaRing needs
        # 4 ranks or more): 2 steps x 1.5 us + 2(1/2) x 64 MiB over one NeuronLink port (128 GB/s), plus
        # the floor of one collective (99.6 us).
        p = cm.collective("c10d::allreduce", 64 * MiB, 64 * MiB, 2, "trn2")
        self.assertEqual((p.engine, p.bound), ("link", "memory"))
        self.assertAlmostEqual(p.duration_s * 1e6, 99.6 + 3 + 64 * MiB / 128e3, places=3)
        self.assertAlmostEqual(p.duration_s * 1e6, 626.888, places=2)
        # 128 ranks: 2 instances of 64 (LNC=2), hierarchical: intra-instance reduce-scatter (KangaRing:
        # 32 steps, 63/64 of 64 MiB), inter-instance all-reduce of 1 MiB (RDH over EFA: 2 steps x 15 us,
        # 1 MiB at 6.25 GB/s), intra-instance all-gather (as the reduce-scatter).
        beyond = cm.collective("c10d::allreduce", 64 * MiB, 64 * MiB, 128, "trn2")
        self.assertEqual(beyond.engine, "efa")
        intra = 32 * 1.5 + 63 / 64 * 64 * MiB / 128e3
        inter = 2 * 15 + MiB / 6.25e3
        self.assertAlmostEqual(beyond.duration_s * 1e6, 99.6 + 2 * intra + inter, places=3)
        self.assertAlmostEqual(beyond.duration_s * 1e3, 1.42556, places=4)
        self.assertEqual(cm.collective("c10d::allreduce", 64, 64, 1, "trn2").duration_s, 0.0)

    def test_small_all_reduce_64_ranks_in_an_instance(self):
        # A decode step's all-reduce of one token's hidden state (4096 bf16 = 8 KiB) over the 64 ranks of
        # a trn2 instance: below 1 MiB, Mesh: 2 steps (reduce-scatter, all-gather) x 1.5 us + 2(63/64) x
        # 8 KiB at 128 GB/s (Single-step Mesh, 1.5 + 63 x 8 KiB / 128 GB/s = 5.53 us, is slower), plus the
        # floor. The ring formula charged 126 steps: 189 us.
        p = cm.collective("c10d::allreduce", 8192, 8192, 64, "trn2")
        self.assertAlmostEqual(p.duration_s * 1e6, 99.6 + 3 + 2 * 63 / 64 * 8192 / 128e3, places=4)
        self.assertAlmostEqual(p.duration_s * 1e6, 102.726, places=2)
        stages = projection.collective_stages("c10d::allreduce", 8192, 8192, 64, "trn2")
        self.assertEqual([(s.algorithm, s.steps) for s in stages], [("mesh", 2)])
        # Two ranks and a tiny buffer: the Single-step Mesh (one step, the whole buffer to the peer).
        tiny = projection.collective_stages("c10d::allreduce", 1024, 1024, 2, "trn1")
        self.assertEqual([(s.algorithm, s.steps) for s in tiny], [("single-step mesh", 1)])
        # The documented choice by size: RDH from 1 MiB (log2 N steps per phase), KangaRing above 56 MiB.
        mid = projection.collective_stages("c10d::allgather_into_tensor", 4 * MiB // 64, 4 * MiB, 64, "trn2")
        self.assertEqual([(s.algorithm, s.steps) for s in mid], [("rdh", 6)])
        big = projection.collective_stages("c10d::allgather_into_tensor", 64 * MiB // 64, 64 * MiB, 64, "trn2")
        self.assertEqual([(s.algorithm, s.steps) for s in big], [("kangaring", 32)])

    def test_one_gib_two_ranks_trn1(self):
        # nccom-test's 1 GiB 2-rank all-reduce on trn1 took 18.93 ms: one NeuronLink-v2 port in one direction
        # (384 GB/s per chip over 4 ports x 2 directions = 48 GB/s), not the core's 192 GB/s share of the
        # chip total. Ring (above 56 MiB): 2 steps x 1.5 us + 1 GiB / 48 GB/s, plus trn1's floor (56.5 us).
        p = cm.collective("c10d::allreduce", 2 ** 30, 2 ** 30, 2, "trn1")
        self.assertAlmostEqual(p.duration_s * 1e6, 56.5 + 3 + 2 ** 30 / 48e3, places=3)
        self.assertAlmostEqual(p.duration_s * 1e3, 22.4291, places=3)
        self.assertAlmostEqual(p.duration_s / 18.93e-3, 1.18, places=2)

    def test_two_instances_of_32(self):
        # 64 ranks on trn1 (32 per instance): intra-instance reduce-scatter (Ring above 56 MiB: 31 steps,
        # 31/32 GiB at 48 GB/s), inter-instance all-reduce of 1/32 GiB between 2 ranks (RDH: 2 steps x 15 us
        # over EFA, 32 MiB at 3.125 GB/s), intra-instance all-gather, plus the floor once.
        p = cm.collective("c10d::allreduce", 2 ** 30, 2 ** 30, 64, "trn1")
        self.assertEqual(p.engine, "efa")
        intra = 31 * 1.5 + 31 / 32 * 2 ** 30 / 48e3
        inter = 2 * 15 + 2 ** 25 / 3.125e3
        self.assertAlmostEqual(p.duration_s * 1e6, 56.5 + 2 * intra + inter, places=3)
        self.assertAlmostEqual(p.duration_s * 1e3, 54.2581, places=3)
        # 8 bytes: Mesh inside each instance (1 step each way), Single-step Mesh between them (one 15 us step):
        # 56.5 + 1.5 + 15 + 1.5 = 74.5 us; the flat ring charged 126 EFA steps (1.89 ms).
        small = cm.collective("c10d::allreduce", 8, 8, 64, "trn1")
        self.assertAlmostEqual(small.duration_s * 1e6, 74.5, places=2)

    def test_ring_only_before_neuron_2_11(self):
        # Neuron 2.10's runtime had only the Ring (runtime 2.14.8, Neuron 2.11, added the first other algorithm):
        # nccom-test's 32-rank trn1 all-gather of 1 KiB is 31 steps x 1.5 us + 31/32 x 1 KiB at 48 GB/s plus the
        # floor: 56.5 + 46.5 + 0.0207 = 103.02 us (measured 151 us: 0.68). On the newest runtime, one Mesh step.
        old = cm.get_target("trn1").at_release("2.10")
        p = cm.collective("c10d::allgather_into_tensor", 32, 1024, 32, old)
        self.assertAlmostEqual(p.duration_s * 1e6, 56.5 + 31 * 1.5 + 31 / 32 * 1024 / 48e3, places=4)
        self.assertAlmostEqual(p.duration_s * 1e6, 103.021, places=3)
        stages = projection.collective_stages("c10d::allgather_into_tensor", 32, 1024, 32, old)
        self.assertEqual([(s.algorithm, s.steps, s.latency_s * 1e6) for s in stages], [("ring", 31, 46.5)])
        newest = projection.collective_stages("c10d::allgather_into_tensor", 32, 1024, 32, "trn1")
        self.assertEqual([(s.algorithm, s.steps) for s in newest], [("mesh", 1)])
        # The 2-rank all-reduce: the Ring's 2 steps where the newest runtime's Single-step Mesh takes one.
        two = cm.collective("c10d::allreduce", 1024, 1024, 2, old)
        self.assertAlmostEqual(two.duration_s * 1e6, 56.5 + 2 * 1.5 + 1024 / 48e3, places=4)

    def test_runtime_release_errors(self):
        t = cm.get_target("trn2")
        self.assertEqual(t.runtime_release, (2, 32))
        self.assertEqual(t.at_release((2, 28)).runtime_release, (2, 28))
        self.assertEqual(t.at_release("2.24.0").at_lnc(1).runtime_release, (2, 24))
        with self.assertRaises(ValueError) as e:
            t.at_release("two")
        self.assertExpectedInline(str(e.exception), """Neuron SDK release 'two' is not major.minor: use e.g. '2.24'""")
        with self.assertRaises(ValueError) as e:
            t.at_release("1.19")
        self.assertExpectedInline(str(e.exception), """Neuron SDK release '1.19': the model covers Neuron 2.x releases (e.g. '2.24')""")


class TestTensorEngineEfficiency(TestCase):
    """docs/cost_model.md, "Tensor Engine efficiency": a matmul is its nc_matmul instructions."""

    def test_one_full_tile(self):
        # 128x128 @ 128x512: one instruction of max(min(64, 128), 512) = 512 cycles: the peak.
        plan = cm.matmul_plan(128, 128, 512, "BFloat16", "trn1")
        self.assertEqual((plan.instructions, plan.cycles, plan.output_tiles), (1, 512, 1))
        self.assertAlmostEqual(plan.tensor_s * 1e9, 182.857, places=2)      # 512 / 2.8 GHz
        self.assertAlmostEqual(plan.efficiency, 1.0)
        # Its PSUM tile (512 fp32 per partition) is copied to SBUF by Vector: 512 cycles at 1.12 GHz.
        self.assertAlmostEqual(plan.eviction_s * 1e9, 457.143, places=2)
        # trn2 LNC=2: two physical cores share the work.
        self.assertAlmostEqual(cm.matmul_s(128, 128, 512, "BFloat16", "trn2") * 1e9, 106.667, places=2)

    def test_decode_gemv(self):
        # 1x4096 @ 4096x4096: the weight stationary (32 tiles of 128 columns), the vector moving (free 1):
        # 32 x 32 = 1024 instructions of max(min(64, 128), 1) = 64 cycles; the other mapping (x stationary,
        # 8 moving tiles of 512) would be 256 x 512 = 131072 cycles.
        plan = cm.matmul_plan(1, 4096, 4096, "BFloat16", "trn2")
        self.assertEqual((plan.stationary, plan.instructions, plan.cycles), ("rhs", 1024, 65536))
        self.assertAlmostEqual(plan.tensor_s * 1e6, 13.653, places=2)       # 65536 / (2.4 GHz x 2)
        self.assertAlmostEqual(plan.efficiency, 1 / 64)
        # As an eager kernel it streams its 32 MiB of weights: memory-bound, 33,570,816 B / 725 GB/s.
        p = cm.eager_kernel("aten::mm", 8192 + 32 * MiB, 8192, 2 * 4096 * 4096, 4096 * 4096, "BFloat16", "trn2",
                            input_dims=[[1, 4096], [4096, 4096]])
        self.assertEqual((p.engine, p.bound), ("dma", "memory"))
        self.assertAlmostEqual(p.duration_s * 1e6, 12 + 46.304, places=2)

    def test_square_gemm_and_fp32(self):
        plan = cm.matmul_plan(4096, 4096, 4096, "BFloat16", "trn2")
        self.assertEqual((plan.instructions, plan.cycles, plan.output_tiles), (8192, 4194304, 256))
        self.assertAlmostEqual(plan.tensor_s * 1e6, 873.813, places=2)
        # 256 evictions x 512 cycles by Vector and Scalar side by side (NeuronCore-v3): / ((0.96 + 1.2) GHz x 2)
        self.assertAlmostEqual(plan.eviction_s * 1e6, 30.341, places=2)
        fp32 = cm.matmul_plan(4096, 4096, 4096, "Float", "trn2")
        self.assertEqual(fp32.cycles, 4 * plan.cycles)
        self.assertAlmostEqual(fp32.efficiency, 0.25)
        fp8 = cm.matmul_plan(4096, 4096, 4096, "Float8_e4m3fn", "trn2")
        self.assertEqual(fp8.cycles, plan.cycles / 2)                     # double_row: K 256 per instruction

    def test_padding_and_fill(self):
        # 600^3: M in 4 tiles of 128 and one of 88, N in 512 + 88, K in 5 (the last 88 rows: padded).
        # 5 x (4 x 512 + 4 x 88 + 512 + 88) = 15000 cycles = 5.357 us on trn1, against 4.708 us of FLOPs.
        plan = cm.matmul_plan(600, 600, 600, "BFloat16", "trn1")
        self.assertEqual((plan.instructions, plan.cycles), (50, 15000))
        self.assertAlmostEqual(plan.tensor_s * 1e6, 5.357, places=2)
        self.assertAlmostEqual(plan.efficiency, 0.8789, places=3)
        # 100^3: one instruction of 100 cycles doing 100x100 of the 128x128 array's work.
        self.assertAlmostEqual(cm.matmul_plan(100, 100, 100, "BFloat16", "trn1").efficiency, 0.6104, places=3)
        # K = 32 uses a quarter of the PE rows.
        self.assertAlmostEqual(cm.matmul_plan(4096, 32, 4096, "BFloat16", "trn1").efficiency, 0.25)

    def test_throttle_ramp(self):
        t2 = cm.get_target("trn2")
        # From 50% to 100% over 3 us: the first 2.25 us of work take 3 us.
        self.assertAlmostEqual(cm.te_throttle_s(1e-3, t2) * 1e6, 0.75)
        self.assertAlmostEqual(cm.te_throttle_s(2.25e-6, t2) * 1e6, 0.75)
        # 1 us of work: 0.5 t + t^2 / 12 = 1 (us) -> t = 1.583 us.
        self.assertAlmostEqual(cm.te_throttle_s(1e-6, t2) * 1e6, 0.583, places=3)
        self.assertEqual(cm.te_throttle_s(1e-3, cm.get_target("trn1")), 0.0)

    def test_shapes_from_input_dims(self):
        self.assertEqual(cm.matmul_dims("aten::mm", [[8, 16], [16, 32]]), (1, 8, 16, 32))
        self.assertEqual(cm.matmul_dims("aten::addmm", [[32], [8, 16], [16, 32], [], []]), (1, 8, 16, 32))
        self.assertEqual(cm.matmul_dims("aten::bmm", [[4, 8, 16], [4, 16, 32]]), (4, 8, 16, 32))
        self.assertEqual(cm.matmul_dims("aten::baddbmm", [[4, 8, 32], [4, 8, 16], [4, 16, 32], [], []]),
                         (4, 8, 16, 32))
        self.assertEqual(cm.matmul_dims("aten::mv", [[8, 16], [16]]), (1, 8, 16, 1))
        self.assertEqual(cm.matmul_dims("aten::linear", [[2, 3, 16], [8, 16], [8]]), (1, 6, 16, 8))
        self.assertIsNone(cm.matmul_dims("aten::convolution", [[1, 3, 8, 8], [4, 3, 3, 3]]))
        self.assertIsNone(cm.matmul_dims("aten::mm", None))
        # Without shapes the kernel keeps the roofline: FLOPs at the peak.
        flops = 2 * 600 ** 3
        roof = cm.eager_kernel("aten::mm", 0, 0, flops, 0, "BFloat16", "trn1").work_s
        shaped = cm.eager_kernel("aten::mm", 0, 0, flops, 0, "BFloat16", "trn1",
                                 input_dims=[[600, 600], [600, 600]]).work_s
        self.assertAlmostEqual(roof * 1e6, 4.708, places=2)
        self.assertAlmostEqual(shaped * 1e6, 5.357, places=2)

    def test_attention_products(self):
        fwd = "aten::_scaled_dot_product_fused_attention_overrideable"
        q = [1, 2, 256, 64]
        self.assertEqual(cm.matmul_products(fwd, [q, q, q, [], [], []]), [(2, 256, 64, 256), (2, 256, 256, 64)])
        bwd = cm.matmul_products(fwd + "_backward", [q, q, q, q, [], [], q, [1, 2, 256]])
        self.assertEqual(bwd, [(2, 256, 64, 256), (2, 256, 256, 64), (2, 256, 256, 64), (2, 256, 256, 64)])
        # Forward on trn1, head dim 64: Q K^T is 2 instructions of 256 cycles per head (K = 64: half the PE
        # rows), P V 4 of 64 (moving free 64); 2 heads: 1536 cycles = 548.57 ns against 365.71 ns of FLOPs
        # (4 x 2 x 256 x 256 x 64); the PSUM evictions: 2 x (2 x 256 + 2 x 64) = 1280 Vector cycles.
        qk, pv = (cm.matmul_plan(m, k, n, "BFloat16", "trn1", b) for b, m, k, n in [(2, 256, 64, 256),
                                                                                (2, 256, 256, 64)])
        self.assertEqual((qk.cycles, pv.cycles, qk.eviction_cycles + pv.eviction_cycles), (1024, 512, 1280))
        self.assertAlmostEqual((qk.tensor_s + pv.tensor_s) * 1e9, 548.571, places=2)
        p = cm.eager_kernel(fwd, 0, 0, 4 * 2 * 256 * 256 * 64, 0, "BFloat16", "trn1", launch=False,
                            input_dims=[q, q, q, [], [], []])
        self.assertEqual(p.engine, "vector")
        self.assertAlmostEqual(p.work_s * 1e9, 1142.857, places=2)

    def test_trace_recorded_with_shapes(self):
        # torch.profiler(record_shapes=True): the framework op (cpu_op) carries "Input Dims" under the
        # correlation id its kernel shares; the replay uses them only when the op names agree.
        from torchneuron_ext.instrumentation import trace_schema as S

        def trace(op_name):
            kernel_args = {"tier": "native", "bytes read": 2 * 600 * 600 * 4, "bytes written": 600 * 600 * 4,
                           "bytes": 3 * 600 * 600 * 4, "flops": 2 * 600 ** 3, "elements": 600 * 600,
                           "dtype": "Float", "External id": 7}
            return {"traceEvents": [
                {"ph": "X", "cat": "cpu_op", "name": op_name, "pid": 1, "tid": 1, "ts": 0.0, "dur": 10.0,
                 "args": {"External id": 7, "Input Dims": [[600, 600], [600, 600]]}},
                {"ph": "X", "cat": "kernel", "name": "neuron::mm", "pid": S.NEURON_PID, "tid": 0, "ts": 1.0,
                 "dur": 5.0, "args": kernel_args}]}

        # FP32 600^3 on trn1: 4 x 15000 cycles = 21.43 us of Tensor Engine (the roofline: 18.83 us), above
        # its 4.32 MB at 272 GB/s (15.88 us): compute-bound either way.
        shaped = cm.eager_kernel("aten::mm", 2 * 600 * 600 * 4, 600 * 600 * 4, 2 * 600 ** 3, 600 * 600,
                                 "Float", "trn1", input_dims=[[600, 600], [600, 600]])
        roof = cm.eager_kernel("aten::mm", 2 * 600 * 600 * 4, 600 * 600 * 4, 2 * 600 ** 3, 600 * 600, "Float",
                               "trn1")
        self.assertAlmostEqual(shaped.work_s * 1e6, 21.429, places=2)
        self.assertAlmostEqual(roof.work_s * 1e6, 18.834, places=2)
        for op_name, want in (("aten::mm", shaped), ("aten::linear", roof)):
            k = cm.project_trace(trace(op_name), "trn1").kernels[0]
            self.assertAlmostEqual(k.duration_us, want.duration_s * 1e6, places=3)

    def test_dry_run_records_the_shapes(self):
        import torch

        def step():
            a = torch.empty(600, 600, dtype=torch.bfloat16, device="neuron")
            return a @ a

        r = cm.dry_run(step, target="trn1")
        mm = [e for e in r.trace["traceEvents"] if e.get("name") == "neuron::mm"]
        self.assertEqual(mm[0]["args"]["Input Dims"], [[600, 600], [600, 600]])
        nbytes = 3 * 600 * 600 * 2
        want = cm.eager_kernel("aten::mm", 2 * 600 * 600 * 2, 600 * 600 * 2, 2 * 600 ** 3, 600 * 600, "BFloat16",
                               "trn1", input_dims=[[600, 600], [600, 600]])
        self.assertEqual(want.bytes, nbytes)
        got = [k for k in r.projection.kernels if k.name == "neuron::mm"][0]
        self.assertAlmostEqual(got.duration_us, want.duration_s * 1e6, places=3)

    def test_convolution_lowered_onto_the_pe_array(self):
        # docs/cost_model.md, Worked cases 6: ResNet's stem, 3 -> 64 channels, 7x7, stride 2, 224x224 -> 112x112,
        # batch 1, bf16 on trn1. 3 input channels fill a 32-row quadrant: 4 taps per instruction, 13 per
        # 512-pixel tile (24 full tiles and one of 256), one column tile of 64: 13 x 12,544 = 163,072 cycles.
        t = cm.get_target("trn1")
        stem = cm.ConvGeometry(pixels=112 * 112, cin=3, taps=49, cout=64)
        self.assertAlmostEqual(cm.convolution_s(stem, "BFloat16", t) * 1e6, 58.240, places=2)
        flops = 2 * 112 * 112 * 147 * 64
        self.assertAlmostEqual(cm.tensor_engine_s(flops, "BFloat16", t) * 1e6, 2.573, places=2)  # 4.4% of it
        read, written = (3 * 224 * 224 + 64 * 147) * 2, 64 * 112 * 112 * 2
        p = cm.eager_kernel("aten::convolution_overrideable", read, written, flops, 64 * 112 * 112, "BFloat16", t,
                            conv_weight=(64, 3, 7, 7))
        self.assertEqual((p.engine, p.bound), ("tensor", "compute"))
        self.assertAlmostEqual(p.duration_s * 1e6, 70.240, places=2)
        # 64 -> 64 channels, 3x3 at 56x56: 2 taps per instruction (64-row halves), 5 per tile; 6 tiles of 512
        # pixels and one of 64; half the columns: 5 x 3,136 cycles = 5.600 us, 45% of the peak's 2.520 us.
        mid = cm.ConvGeometry(pixels=56 * 56, cin=64, taps=9, cout=64)
        self.assertAlmostEqual(cm.convolution_s(mid, "BFloat16", t) * 1e6, 5.600, places=2)
        # 512 -> 512, 3x3 at 7x7: 49 pixels under the 64-cycle floor: 4 x 36 x 64 cycles = 3.291 us.
        late = cm.ConvGeometry(pixels=49, cin=512, taps=9, cout=512)
        self.assertAlmostEqual(cm.convolution_s(late, "BFloat16", t) * 1e6, 3.291, places=2)
        # FP32 at a quarter rate; depthwise (one input channel per group) on the Vector engine: 9 passes.
        self.assertAlmostEqual(cm.convolution_s(late, "Float", t), 4 * cm.convolution_s(late, "BFloat16", t))
        dw = cm.ConvGeometry(pixels=56 * 56, cin=1, taps=9, cout=1, groups=64)
        self.assertAlmostEqual(cm.convolution_s(dw, "BFloat16", t),
                               cm.vector_engine_s(64 * 56 * 56, "BFloat16", t, passes=9))

    def test_convolution_psum_evictions(self):
        # A 1x1 convolution, 64 -> 256 channels over 8 x 56 x 56 = 25,088 pixels (ResNet-50's first expansion at
        # batch 8), bf16 on trn1: 49 tiles of 512 pixels x 2 column tiles, one instruction each (64 rows, one
        # tap: nothing to stack): 98 x 512 cycles / 2.8 GHz = 17.92 us of Tensor Engine; each output tile
        # evicted once at max(64, 512) cycles by the Vector engine: 98 x 512 / 1.12 GHz = 44.80 us, which binds
        # once the output stays on chip (a fused program: on_chip_bytes).
        t = cm.get_target("trn1")
        g = cm.ConvGeometry(pixels=25088, cin=64, taps=1, cout=256)
        self.assertAlmostEqual(cm.convolution_s(g, "BFloat16", t) * 1e6, 17.920, places=2)
        self.assertAlmostEqual(cm.convolution_eviction_s(g, t) * 1e6, 44.800, places=2)
        read, written = (64 * 25088 + 256 * 64) * 2, 256 * 25088 * 2
        flops = 2 * 25088 * 64 * 256
        eager = cm.eager_kernel("aten::convolution_overrideable", read, written, flops, 256 * 25088, "BFloat16", t,
                                conv_weight=(256, 64, 1, 1), launch=False)
        self.assertEqual(eager.engine, "dma")  # 16.09 MB / 272 GB/s = 59.15 us
        self.assertAlmostEqual(eager.work_s * 1e6, 59.151, places=2)
        fused = cm.eager_kernel("aten::convolution_overrideable", read, written, flops, 256 * 25088, "BFloat16", t,
                                conv_weight=(256, 64, 1, 1), launch=False, on_chip_bytes=written)
        self.assertEqual((fused.engine, fused.bound), ("vector", "compute"))
        self.assertAlmostEqual(fused.work_s * 1e6, 44.800, places=2)
        # On trn2 Vector and Scalar evict side by side (0.96 + 1.2 GHz), and LNC=2 splits the tiles.
        t2 = cm.get_target("trn2")
        self.assertAlmostEqual(cm.convolution_eviction_s(g, t2) * 1e6, 98 * 512 / 2.16e9 / 2 * 1e6, places=3)
        # A depthwise convolution runs on the Vector engine: nothing to evict.
        self.assertEqual(cm.convolution_eviction_s(cm.ConvGeometry(3136, 1, 9, 1, groups=64), t), 0.0)

    def test_out_variants_do_not_read_their_output(self):
        # Inductor's extern addmm in a compiled DistilBERT: 128 x 768 @ 768 x 768 bf16 plus a bias. The record
        # reads 1,574,400 B: the operands' 1,377,792 B and the out= tensor's 196,608 B, which the device writes only.
        self.assertEqual(cm.out_variant_bytes_read("neuron::addmm.out", 1574400, 196608), 1377792)
        self.assertEqual(cm.out_variant_bytes_read("aten::max.dim_max", 100, 10), 100)  # not an out= overload
        self.assertEqual(cm.out_variant_bytes_read("aten::add_.Tensor", 100, 50), 100)  # in place: it reads
        self.assertEqual(cm.out_variant_bytes_read("aten::cat.names_out", 100, 40), 60)
        t = cm.get_target("trn1")
        out = cm.eager_kernel("neuron::addmm.out", 1574400, 196608, 2 * 128 * 768 * 768, 589824, "BFloat16", t,
                              launch=False)
        plain = cm.eager_kernel("aten::addmm", 1377792, 196608, 2 * 128 * 768 * 768, 589824, "BFloat16", t,
                                launch=False)
        self.assertEqual(out.bytes, 1377792 + 196608)
        self.assertAlmostEqual(out.work_s, plain.work_s)  # 1,574,400 B / 272 GB/s = 5.788 us
        self.assertAlmostEqual(out.work_s * 1e6, 5.788, places=3)
        compiled = cm.compiled_kernel("neuron::addmm.out", 1574400, 196608, 2 * 128 * 768 * 768, 589824,
                                      "BFloat16", t)
        self.assertEqual(compiled.bytes, 1377792 + 196608)

    def test_convolution_geometry_from_a_record(self):
        # A real run's record has no shapes: K = FLOPs / (2 x outputs) is exact; the output channels are
        # found when the weight is the largest tensor (512 x 4608 elements here: Cout = 512, 49 pixels).
        late_flops = 2 * 49 * 512 * 4608
        g = cm.convolution_geometry((512 * 4608 + 512 * 49) * 2, 512 * 49 * 2, late_flops, 512 * 4608, "BFloat16")
        self.assertEqual(g, cm.ConvGeometry(pixels=49, cin=4608, taps=1, cout=512))
        # ... or when the input is (the weight and a bias are the rest): 16 -> 8 channels, 3x3, 32x32 -> 30x30.
        read = (16 * 32 * 32 + 8 * 144 + 8) * 4
        g = cm.convolution_geometry(read, 8 * 900 * 4, 2 * 900 * 144 * 8, 16 * 32 * 32, "Float")
        self.assertEqual(g, cm.ConvGeometry(pixels=900, cin=144, taps=1, cout=8))
        # The stem's output is its largest tensor: the channels are unknown, full columns are assumed.
        flops = 2 * 112 * 112 * 147 * 64
        g = cm.convolution_geometry((3 * 224 * 224 + 64 * 147) * 2, 64 * 112 * 112 * 2, flops, 64 * 112 * 112,
                                    "BFloat16")
        self.assertEqual(g, cm.ConvGeometry(pixels=6272, cin=147, taps=1, cout=128))
        # The backward keeps the dense peak.
        t = cm.get_target("trn1")
        bwd = cm.eager_kernel("aten::convolution_backward_overrideable", 0, 0, 2 * flops, 0, "BFloat16", t)
        self.assertAlmostEqual(bwd.work_s, cm.tensor_engine_s(2 * flops, "BFloat16", t))


class TestKinds(TestCase):
    def test_copies(self):
        h2d = cm.copy("HtoD", 0, 16 * MiB, "trn2")
        self.assertEqual((h2d.engine, h2d.launch_s), ("pcie", 0.0))
        self.assertAlmostEqual(h2d.duration_s * 1e6, 1.3 + 16 * MiB / 16e3, places=2)
        d2d = cm.copy("DtoD", 16 * MiB, 16 * MiB, "trn2")
        self.assertAlmostEqual(d2d.duration_s * 1e6, 1.3 + 32 * MiB / 725e3, places=2)

    def test_custom_op_on_gpsimd(self):
        # 2**24 fp32 elements over 8 cores x 16 lanes at 1.2 GHz x 2 (LNC=2) = 54.6 us of GpSimd, below
        # the 2 x 64 MiB / 725 GB/s = 185.13 us its bytes take: streaming custom ops are memory-bound.
        t = cm.get_target("trn2")
        self.assertAlmostEqual(cm.gpsimd_s(1 << 24, "Float", t) * 1e6, 54.613, places=2)
        p = cm.custom_kernel(64 * MiB, 64 * MiB, 1 << 24, "Float", t)
        self.assertEqual((p.engine, p.bound, p.launch_s), ("dma", "memory", 12e-6))
        self.assertAlmostEqual(p.work_s * 1e6, 185.128, places=2)
        # bf16 packs twice the lanes.
        self.assertAlmostEqual(cm.gpsimd_s(1 << 24, "BFloat16", t) * 2, cm.gpsimd_s(1 << 24, "Float", t))

    def test_engines_by_op(self):
        t = cm.get_target("trn2")
        n = 1 << 24
        self.assertEqual(cm.eager_kernel("aten::exp", 0, 0, 0, n, "Float", t).engine, "scalar")
        self.assertEqual(cm.eager_kernel("aten::_softmax", 0, 0, 0, n, "Float", t).engine, "vector")
        self.assertEqual(cm.eager_kernel("aten::sum.dim_IntList", 0, 0, 0, n, "Float", t).engine, "vector")
        # A backward kernel makes twice the passes of its forward.
        fwd = cm.eager_kernel("aten::gelu", 0, 0, 0, n, "Float", t)
        bwd = cm.eager_kernel("aten::gelu_backward", 0, 0, 0, n, "Float", t)
        self.assertAlmostEqual(bwd.work_s, 2 * fwd.work_s)

    def test_row_gather_moves_the_rows_not_the_table(self):
        # BERT-base's word embedding (30522 x 768 bf16, 46.9 MB) looked up for 128 tokens: the record reads the
        # table and the int64 ids; the DMA gathers 128 rows (196,608 B) and writes them: 393,216 B / 272 GB/s.
        t = cm.get_target("trn1")
        read, written = 30522 * 768 * 2 + 128 * 8, 128 * 768 * 2
        self.assertEqual(cm.row_gather_bytes(read, written), 393_216)
        p = cm.eager_kernel("aten::embedding", read, written, 0, 30522 * 768, "BFloat16", t)
        self.assertEqual((p.engine, p.bound), ("dma", "launch"))
        self.assertAlmostEqual(p.work_s * 1e6, 1.4457, places=3)
        # Its backward writes the whole table's gradient: unchanged.
        bwd = cm.eager_kernel("aten::embedding_dense_backward", written, read, 0, 30522 * 768, "BFloat16", t)
        self.assertGreater(bwd.work_s, 100 * p.work_s)

    def test_indexed_write_moves_the_touched_rows_not_the_destination(self):
        # Llama-3-70B's KV cache on one trn1 rank (1 K/V head, 4096 positions x 128 bf16 = 1 MiB): index_copy_
        # of the new position. The record reads the cache, the int64 position and the 256 B row and writes the
        # cache; the DMA reads the row and the index (264 B) and writes as many (the index counted as a row):
        # 528 B / 272 GB/s, 1.94 ns, where the whole record (2 MiB + 264 B) took 7.71 us.
        t = cm.get_target("trn1")
        cache, row, index = 4096 * 128 * 2, 128 * 2, 8
        read, written = cache + row + index, cache
        self.assertEqual(cm.indexed_write_bytes(read, written), 528)
        p = cm.eager_kernel("aten::index_copy_", read, written, 0, 4096 * 128, "BFloat16", t, launch=False)
        self.assertEqual((p.engine, p.bytes, p.elements), ("dma", 528, 132))
        self.assertAlmostEqual(p.work_s * 1e9, 528 / 272, places=3)
        for op in ("aten::index_put_", "aten::_index_put_impl_", "aten::scatter_.src", "aten::masked_scatter_"):
            self.assertEqual(cm.eager_kernel(op, read, written, 0, 4096 * 128, "BFloat16", t).bytes, 528, op)
        # Accumulating writes read the touched rows too: index_add_ of 3 fp32 rows of 64 into a 1000 x 64
        # table (768 B of rows, 24 B of indices): 792 B read, 792 B read again from the table, 792 B written.
        read, written = 1000 * 64 * 4 + 768 + 24, 1000 * 64 * 4
        for op in ("aten::index_add_", "aten::scatter_add_", "aten::scatter_reduce_.two", "aten::index_reduce_"):
            self.assertEqual(cm.eager_kernel(op, read, written, 0, 64000, "Float", t).bytes, 3 * 792, op)
        # Out of place, the result is a new tensor written whole: unchanged.
        whole = cm.eager_kernel("aten::index_copy", read, written, 0, 64000, "Float", t)
        self.assertEqual(whole.bytes, read + written)
        # Never more than the record: a source as large as the destination.
        self.assertEqual(cm.indexed_write_bytes(2 * 4096 + 8, 4096, accumulate=True), 2 * 4096 + 8 + 4096)

    def test_compiled_graph_pays_one_launch(self):
        graph = cm.project("compiled::graph_0", "compiled", target="trn2")
        kernel = cm.project("compiled::cpp_fused_mul_0", "compiled", 8 * MiB, 4 * MiB, target="trn2")
        self.assertEqual((graph.launch_s, graph.bound), (12e-6, "launch"))
        self.assertEqual(kernel.launch_s, 0.0)
        inside = cm.project("aten::mm", "native", 1, 1, 2 * 512 ** 3, 0, "BFloat16", "trn2", launch=False)
        self.assertEqual((inside.launch_s, inside.bound), (0.0, "compute"))


class TestTargets(TestCase):
    def test_switching_the_target_moves_the_figures(self):
        # Elementwise is HBM-bound: more bandwidth per core from trn1 to trn3, and LNC=2 doubles it.
        trn1, trn2, trn3 = (_mul(2048, t).work_s for t in ("trn1", "trn2", "trn3"))
        self.assertGreater(trn1, trn2)
        self.assertGreater(trn2, trn3)
        self.assertAlmostEqual(_mul(2048, "trn2:lnc=1").work_s, 2 * trn2)
        # Matmul: trn1's Tensor Engine clock is higher per core; FP8 doubles on trn2 only; FP32 is 4x slower.
        # (launch=False: without the trn2/trn3 throttle ramp, a constant that does not scale with the rate.)
        self.assertLess(_mm(2048, "BFloat16", 2, "trn1").work_s, _mm(2048, "BFloat16", 2, "trn2:lnc=1").work_s)
        mm = lambda dtype, es: _mm(2048, dtype, es, "trn2", launch=False).work_s  # noqa: E731
        self.assertAlmostEqual(mm("Float8_e4m3fn", 1) * 2, mm("BFloat16", 2))
        self.assertAlmostEqual(mm("Float", 4), 4 * mm("BFloat16", 2))
        # BF16 elementwise Vector work is 4x FP32's on trn2 (performance mode), 2x on trn3, equal on trn1.
        for name, ratio in (("trn1", 1), ("trn2", 4), ("trn3", 2)):
            t = cm.get_target(name)
            self.assertAlmostEqual(cm.vector_engine_s(1e6, "Float", t) / cm.vector_engine_s(1e6, "BFloat16", t), ratio)

    def test_selection_and_errors(self):
        self.assertEqual(cm.get_target("trn2").label, "trn2 LNC=2")
        self.assertEqual(cm.parse_target("trn3:lnc=1").label, "trn3 LNC=1")
        self.assertEqual(cm.get_target("inf2").name, "trn1")
        with self.assertRaises(ValueError) as ctx:
            cm.get_target("trn4")
        self.assertExpectedInline(str(ctx.exception), """unknown Neuron platform target 'trn4': use one of trn1, inf2, trn2, trn3""")
        with self.assertRaises(ValueError) as ctx:
            cm.get_target("trn1", lnc=2)
        self.assertExpectedInline(str(ctx.exception), """LNC=2 is not a logical-core size of trn1: use 1""")
        with self.assertRaises(ValueError) as ctx:
            cm.parse_target("trn2:lnc=two")
        self.assertExpectedInline(str(ctx.exception),
                                  """NEURON_EMU_TARGET='trn2:lnc=two': 'lnc=two' is not a logical-core size; use e.g. trn2:lnc=1""")


@pytest.mark.parametrize("env,label", [({}, "trn2 LNC=2"), ({"NKI_TARGET": "trn1"}, "trn1"),
                                       ({"NKI_TARGET": "trn1", "NEURON_EMU_TARGET": "trn3:lnc=1"}, "trn3 LNC=1"),
                                       # The NKI simulator's other variable, after NKI_TARGET as it reads them.
                                       ({"NEURON_PLATFORM_TARGET_OVERRIDE": "trn3"}, "trn3 LNC=2"),
                                       ({"NEURON_PLATFORM_TARGET_OVERRIDE": "trn3", "NKI_TARGET": "inf2"}, "trn1")])
def test_environment_chooses_the_target(monkeypatch, env, label):
    for var in ("NEURON_EMU_TARGET", "NKI_TARGET", "NEURON_PLATFORM_TARGET_OVERRIDE"):
        monkeypatch.delenv(var, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert cm.default_target().label == label


def test_bad_environment_names_the_variable(monkeypatch):
    monkeypatch.setenv("NEURON_EMU_TARGET", "trn9")
    with pytest.raises(ValueError, match=r"NEURON_EMU_TARGET='trn9': unknown Neuron platform target 'trn9': use one of "
                                         r"trn1, inf2, trn2, trn3"):
        cm.default_target()

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


def _mm(n, dtype, es, target):
    return cm.eager_kernel("aten::mm", 2 * n * n * es, n * n * es, 2 * n ** 3, n * n, dtype, target)


def _mul(n, target, dtype="Float", es=4):
    return cm.eager_kernel("aten::mul.Tensor", 2 * n * n * es, n * n * es, 0, n * n, dtype, target)


class TestWorkedCases(TestCase):
    def test_bf16_matmul_at_the_tensor_engine_peak(self):
        p = _mm(4096, "BFloat16", 2, "trn2")
        self.assertEqual((p.engine, p.bound), ("tensor", "compute"))
        self.assertAlmostEqual(p.work_s * 1e6, 873.813, places=2)
        self.assertAlmostEqual(p.duration_s * 1e6, 885.813, places=2)
        self.assertAlmostEqual(_mm(4096, "Float", 4, "trn2").work_s * 1e6, 3495.253, places=2)
        self.assertAlmostEqual(_mm(4096, "BFloat16", 2, "trn1").work_s * 1e6, 1497.966, places=2)

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
        p = cm.nki_kernel(c.estimated_latency_s, c.bytes_read, c.bytes_written, c.flops, "trn2")
        self.assertAlmostEqual(p.duration_s * 1e6, 28.185, places=2)

    def test_nki_tile_loop_through_the_simulator(self):
        # The same loop as a kernel: the simulator charges exactly the hand-worked instructions.
        k = nki.benchmark(warmup=1, iters=1, platform_target="trn2")(_scale_tiles)
        k(np.ones((512, 512), np.float32))
        c = k.benchmark_result.launch.costs
        self.assertEqual(dict(c.instructions), {"load": 4, "tensor_scalar": 4, "store": 4})
        self.assertAlmostEqual(k.benchmark_result.nc_latency.get_latency_percentile(50), 16.185, places=2)
        self.assertIn("projected 16.2 us on trn2 (cost model", k.benchmark_result.summary())

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
        self.assertLess(_mm(2048, "BFloat16", 2, "trn1").work_s, _mm(2048, "BFloat16", 2, "trn2:lnc=1").work_s)
        self.assertAlmostEqual(_mm(2048, "Float8_e4m3fn", 1, "trn2").work_s * 2, _mm(2048, "BFloat16", 2, "trn2").work_s)
        self.assertAlmostEqual(_mm(2048, "Float", 4, "trn2").work_s, 4 * _mm(2048, "BFloat16", 2, "trn2").work_s)
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

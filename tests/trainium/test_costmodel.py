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
        p = cm.collective("c10d::allreduce", 64 * MiB, 64 * MiB, 2, "trn2")
        self.assertEqual((p.engine, p.bound), ("link", "memory"))
        self.assertAlmostEqual(p.duration_s * 1e6, 212.715, places=2)
        beyond = cm.collective("c10d::allreduce", 64 * MiB, 64 * MiB, 128, "trn2")
        self.assertEqual(beyond.engine, "efa")
        self.assertAlmostEqual(beyond.duration_s * 1e3, 25.117, places=2)
        self.assertEqual(cm.collective("c10d::allreduce", 64, 64, 1, "trn2").duration_s, 0.0)

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

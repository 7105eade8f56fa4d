"""A dry run's program as one compiled NEFF (torchneuron_ext/profiler/fusion.py): the compiler's fusion."""
from __future__ import annotations

import torch
from expecttest import TestCase

import torchneuron_ext  # noqa: F401
from torchneuron_ext import costmodel as cm

T = "trn1"
A = 128 * 512 * 2  # one 128 x 512 bf16 activation


def _weights():
    with torch.device("neuron"):
        return (torch.zeros(128, 256, dtype=torch.bfloat16), torch.zeros(256, 512, dtype=torch.bfloat16),
                torch.zeros(512, 256, dtype=torch.bfloat16))


def _chain(xw, residual: bool = False):
    """mm, then three elementwise ops on its result (the compiler's epilogue), then a second mm."""
    x, w1, w2 = xw
    a = x @ w1
    d = torch.tanh(a * 2 + 1)
    out = d @ w2
    if residual:  # `a` read again after the second matmul: it must reach HBM
        return out, d + a
    return out


class TestCompiledProgram(TestCase):
    def test_an_elementwise_chain_stays_on_chip(self):
        r = cm.dry_run(_chain, setup=_weights, target=T)
        p = cm.compiled_program(r, T)
        names = [k.name for k in p.kernels]
        self.assertEqual(names, ["neuron::mm", "neuron::mul.Tensor", "neuron::add.Tensor", "neuron::tanh",
                                 "neuron::mm"])
        # Two regions: the first mm and its three elementwise followers, then the second mm (it reads `d`,
        # which a Tensor Engine kernel loads from HBM).
        self.assertEqual([k.region for k in p.kernels], [0, 0, 0, 0, 1])
        # On chip: `a` (written by the mm, read by mul), mul's and add's results: each written once and read
        # once inside the region. `d` is read by the second mm: it is written.
        self.assertEqual([k.bytes_kept_on_chip for k in p.kernels], [A, 2 * A, 2 * A, A, 0])
        self.assertEqual(p.bytes_kept_on_chip, 6 * A)
        t = cm.get_target(T)
        x, w1, w2 = 128 * 256 * 2, 256 * 512 * 2, 512 * 256 * 2
        want = [
            # The mm reads x and w1 only: 327,680 B / 272 GB/s = 1.205 us (its 2 instructions take 0.366 us,
            # its eviction 0.457 us).
            cm.eager_kernel("aten::mm", x + w1, A, 2 * 128 * 256 * 512, 128 * 512, "BFloat16", t, launch=False,
                            input_dims=[[128, 256], [256, 512]], on_chip_bytes=A),
            # mul and add move nothing: one Vector pass each over 65,536 elements, 0.457 us.
            cm.eager_kernel("aten::mul.Tensor", A, A, 0, 128 * 512, "BFloat16", t, launch=False,
                            on_chip_bytes=2 * A),
            cm.eager_kernel("aten::add.Tensor", A, A, 0, 128 * 512, "BFloat16", t, launch=False,
                            on_chip_bytes=2 * A),
            # tanh writes `d`: 131,072 B = 0.482 us against 0.366 us on the Scalar engine.
            cm.eager_kernel("aten::tanh", A, A, 0, 128 * 512, "BFloat16", t, launch=False, on_chip_bytes=A),
        ]
        for got, w in zip(p.kernels, want):
            self.assertAlmostEqual(got.projection.work_s, w.work_s, places=15)
        self.assertAlmostEqual(p.kernels[0].projection.work_s * 1e6, 1.2047, places=3)
        self.assertEqual(p.kernels[1].projection.engine, "vector")
        self.assertAlmostEqual(p.kernels[1].projection.work_s * 1e6, 0.4571, places=3)
        self.assertAlmostEqual(p.kernels[3].projection.work_s * 1e6, 0.4819, places=3)
        # The second mm reads d and w2 and writes the program's result (alive at the end: written).
        self.assertEqual(p.kernels[4].projection.bytes, A + w2 + 128 * 256 * 2)
        self.assertAlmostEqual(p.duration_s, t.launch_s + p.work_s)
        # Unfused, every value makes its round trip: the same as the trace replay's kernels back to back.
        replay = sum(k.projection.work_s for k in cm.project_trace(r.trace, T).kernels)
        self.assertAlmostEqual(p.unfused_work_s, replay, places=12)
        self.assertAlmostEqual(cm.compiled_program(r, T, fuse=False).work_s, replay, places=12)
        self.assertLess(p.work_s, p.unfused_work_s)

    def test_a_value_read_in_a_later_region_reaches_hbm(self):
        r = cm.dry_run(lambda xw: _chain(xw, residual=True), setup=_weights, target=T)
        p = cm.compiled_program(r, T)
        self.assertEqual([k.name for k in p.kernels][-1], "neuron::add.Tensor")
        # `a` is read by the final add too: the mm writes it and mul reads it from HBM; mul's and add's results
        # still stay on chip. The final add reads nothing the second mm's region wrote, so it starts a region
        # of its own and reads d and a from HBM.
        self.assertEqual([k.region for k in p.kernels], [0, 0, 0, 0, 1, 2])
        self.assertEqual([k.bytes_kept_on_chip for k in p.kernels], [0, A, 2 * A, A, 0, 0])

    def test_in_place_ops_and_live_results(self):
        # relu_ overwrites the add's result in place: the add's value is read only by relu_ (on chip), relu_'s
        # is the program's result (alive at the end: written).
        def f(xw):
            x, w1, _ = xw
            return (x @ w1 + 1).relu_()

        r = cm.dry_run(f, setup=_weights, target=T)
        p = cm.compiled_program(r, T)
        self.assertEqual([k.name for k in p.kernels], ["neuron::mm", "neuron::add.Tensor", "neuron::relu_"])
        self.assertEqual([k.bytes_kept_on_chip for k in p.kernels], [A, 2 * A, A])
        self.assertEqual(p.kernels[2].projection.bytes, A)  # relu_ writes the result once

    def test_copies_and_casts(self):
        # A cast inside the program is an elementwise instruction that fuses (here into the mm's epilogue);
        # a transfer from the host is a region of its own and is not fused.
        def f(xw):
            x, w1, _ = xw
            h = torch.zeros(128, 512, dtype=torch.float32).to("neuron")
            return (x @ w1).float() + h

        r = cm.dry_run(f, setup=_weights, target=T)
        p = cm.compiled_program(r, T)
        names = [k.name for k in p.kernels]
        self.assertEqual(names[-3:], ["neuron::mm", "Memcpy DtoD (neuron -> neuron)", "neuron::add.Tensor"])
        self.assertEqual(names[0], "Memcpy HtoD (host -> neuron)")
        self.assertEqual([k.region for k in p.kernels][-3:], [1, 1, 1])
        self.assertEqual([k.bytes_kept_on_chip for k in p.kernels][-3:], [A, A + 2 * A, 2 * A])

    def test_the_data_flow_matches_the_records(self):
        # Every kernel's storages read and written add up to the bytes its record reads and writes, and the
        # program's result is among the storages alive at the end.
        r = cm.dry_run(lambda xw: _chain(xw, residual=True), setup=_weights, target=T)
        kernels = [e for e in r.trace["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "kernel"]
        self.assertEqual(len(kernels), 6)
        for e in kernels:
            a = e["args"]
            self.assertEqual(sum(n for _, n in a["buffers read"]), a["bytes read"], e["name"])
            self.assertEqual(sum(n for _, n in a["buffers written"]), a["bytes written"], e["name"])
            self.assertTrue(all(serial > 0 for serial, _ in a["buffers read"] + a["buffers written"]))
        live = r.trace["neuron"]["dry_run"]["buffers live at end"]
        out_serials = [s for s, _ in kernels[-2]["args"]["buffers written"] + kernels[-1]["args"]["buffers written"]]
        self.assertTrue(set(out_serials) <= set(live))

    def test_needs_a_dry_runs_trace(self):
        with self.assertRaises(ValueError) as e:
            cm.compiled_program({"traceEvents": []}, T)
        self.assertExpectedInline(str(e.exception), """compiled_program needs a dry run's trace (costmodel.dry_run): this trace has no data flow (a real run's, or a dry run's from before the buffers were recorded); dry-run the program again""")

"""NKI 0.2 language surface the NKI Library relies on: nl.ndarray(address=...) manual placement and
nl.shared_identity_matrix in SBUF."""
from __future__ import annotations

import numpy as np
import pytest
from expecttest import TestCase

import torchneuron_ext.nki as nki
import torchneuron_ext.nki.isa as nisa
import torchneuron_ext.nki.language as nl
from torchneuron_ext.nki import NKIError

from .kernel_io import load, store

PSUM_BANK = 2048


def f32(*shape: int) -> np.ndarray:
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


def test_sbuf_tensors_at_one_address_share_memory() -> None:
    # Addresses are bytes in each partition: b starts 4 float32 into a, c is elsewhere.
    @nki.jit
    def k(x):
        a = nl.ndarray((8, 8), dtype=nl.float32, buffer=nl.sbuf, address=(0, 0))
        b = nl.ndarray((8, 4), dtype=nl.float32, buffer=nl.sbuf, address=(0, 16))
        c = nl.ndarray((8, 8), dtype=nl.float32, buffer=nl.sbuf, address=(0, 4096))
        nisa.dma_copy(dst=a, src=x)
        nisa.dma_copy(dst=c, src=x)
        nisa.memset(dst=b, value=0.0)
        return store(a), store(c)

    x = f32(8, 8)
    a, c = k(x)
    ref = x.copy()
    ref[:, 4:] = 0
    np.testing.assert_array_equal(a, ref)
    np.testing.assert_array_equal(c, x)


def test_sbuf_address_partition_offset() -> None:
    @nki.jit
    def k(x):
        whole = nl.ndarray((64, 4), dtype=nl.float32, buffer=nl.sbuf, address=(0, 0))
        upper = nl.ndarray((32, 4), dtype=nl.float32, buffer=nl.sbuf, address=(32, 0))
        nisa.dma_copy(dst=whole, src=x)
        return store(upper)

    x = f32(64, 4)
    np.testing.assert_array_equal(k(x), x[32:])


def test_psum_matmul_at_a_bank() -> None:
    @nki.jit
    def k(a, b):
        ta, tb = load(a), load(b)
        # Created before the loop: shared HBM tensors are the kernel's top level's (store() in the loop is not).
        outs = [nl.ndarray((a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm) for _ in range(2)]
        for i, bank in enumerate((2, 5)):
            acc = nl.ndarray((a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.psum,
                             address=(0, bank * PSUM_BANK))
            nisa.nc_matmul(dst=acc, stationary=ta, moving=tb)
            res = nl.ndarray(acc.shape, dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res, src=acc)
            nisa.dma_copy(dst=outs[i], src=res)
        return outs

    a, b = f32(32, 16), f32(32, 24)
    for out in k(a, b):
        np.testing.assert_allclose(out, a.T @ b, rtol=1e-5, atol=1e-5)


def test_shared_identity_matrix_is_in_sbuf() -> None:
    @nki.jit
    def k(x):
        ident = nl.shared_identity_matrix(16, dtype=nl.float32)
        assert ident.buffer is nl.sbuf
        # The identity as stationary operand of a matmul gives x back: I.T @ x == x.
        tx = load(x)
        acc = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=acc, stationary=ident, moving=tx)
        res = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=acc)
        into = nl.ndarray((8, 8), dtype=nl.bfloat16, buffer=nl.sbuf)
        same = nl.shared_identity_matrix(8, dtype=nl.bfloat16, dst=into)
        assert same is into
        return store(res), store(ident), store(into)

    x = f32(16, 8)
    res, ident, into = k(x)
    np.testing.assert_array_equal(res, x)
    np.testing.assert_array_equal(ident, np.eye(16, dtype=np.float32))
    np.testing.assert_array_equal(into.astype(np.float32), np.eye(8, dtype=np.float32))


def _run(body) -> None:
    @nki.jit
    def k(x):
        body()
        return store(nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf, address=(0, 0)))

    k(np.zeros((1, 1), np.float32))


class TestAddressErrors(TestCase):
    def _msg(self, body, exc=NKIError) -> str:
        with pytest.raises(exc) as e:
            _run(body)
        return str(e.value).split("\n")[0]

    def test_psum_tile_straddles_two_banks(self) -> None:
        self.assertExpectedInline(self._msg(lambda: nl.ndarray((4, 512), nl.float32, buffer=nl.psum,
                                                                address=(0, 1024))), """block () of a tensor allocated with address=(0, 1024): 2048 bytes per partition at byte 1024 do not fit one PSUM bank of 2048 bytes (a physical PSUM tile cannot span banks) [err_size_of_dimension_exceed_arch_limit]""")

    def test_psum_past_the_partition(self) -> None:
        self.assertExpectedInline(self._msg(lambda: nl.ndarray((4, 1024), nl.float32, buffer=nl.psum,
                                                                address=(0, 7 * PSUM_BANK))), """block () of a tensor allocated with address=(0, 14336): 4096 bytes per partition at byte 0 do not fit one PSUM bank of 2048 bytes (a physical PSUM tile cannot span banks) [err_size_of_dimension_exceed_arch_limit]""")

    def test_sbuf_out_of_range(self) -> None:
        msg = self._msg(lambda: nl.ndarray((4, 4), nl.float32, buffer=nl.sbuf, address=(0, -16)))
        self.assertIn("bytes [-16, 0) of each partition are outside", msg)
        self.assertIn("[err_sbuf_capacity_exceeded]", msg)

    def test_bad_start_partition(self) -> None:
        self.assertExpectedInline(self._msg(lambda: nl.ndarray((64, 4), nl.float32, buffer=nl.sbuf,
                                                                address=(32, 0))), """block () of a tensor allocated with address=(32, 0): a tile of 64 partitions must start at partition 0 or 64, got 32 [err_invalid_start_partition]""")

    def test_address_in_hbm(self) -> None:
        self.assertExpectedInline(self._msg(lambda: nl.ndarray((4, 4), nl.float32, buffer=nl.hbm,
                                                                address=(0, 0)), TypeError), """address= places SBUF and PSUM tensors; private_hbm tensors have no such address""")

    def test_address_not_a_pair(self) -> None:
        self.assertExpectedInline(self._msg(lambda: nl.ndarray((4, 4), nl.float32, address=(0, 1.5)),
                                            TypeError), """address= is (partition_offset, byte_offset), two integers, got (0, 1.5)""")

    def test_identity_errors(self) -> None:
        self.assertExpectedInline(self._msg(lambda: nl.shared_identity_matrix(0), TypeError), """\
nl.shared_identity_matrix: n must be a positive integer, got 0""")
        self.assertExpectedInline(self._msg(
            lambda: nl.shared_identity_matrix(4, dst=nl.ndarray((4, 8), nl.float32)), TypeError), """\
nl.shared_identity_matrix: dst= must be an (4, 4) SBUF tensor, got (4, 8) in sbuf""")


def test_integer_indexing_keeps_on_chip_tiles_two_dimensional() -> None:
    # AWS's language guide: the partition dimension stays (size 1); a free-dim integer drops its axis unless
    # that would leave fewer than 2 dimensions, then the last one stays at size 1. HBM drops as numpy does.
    @nki.jit
    def k(x):
        t = load(x)
        h = nl.ndarray((2, 16, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        shapes = [t[0, 0, 5].shape, t[:, 1].shape, t[:, 1, 5].shape, t[3].shape, t[:, :, 2].shape,
                  h[0].shape, h[1, 2, 3].shape, h[1, 2].shape]
        col = t[:, 1, 5]
        nisa.dma_copy(dst=h[0, :, 0:1], src=col)
        nisa.dma_copy(dst=h[1, :, :], src=t[:, 2])
        return h, shapes

    x = f32(16, 4, 8)
    h, shapes = k(x)
    assert [tuple(s) for s in shapes] == [(1, 1), (16, 8), (16, 1), (1, 4, 8), (16, 4), (16, 8), (1,), (8,)]
    np.testing.assert_array_equal(h[0][:, 0], x[:, 1, 5])
    np.testing.assert_array_equal(h[1], x[:, 2])


# --- nki.compiler.frontend: a checking run, no MLIR ---------------------------------------------------------

def _double(x):
    t = load(x)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
    return store(t)


def _broken(x):
    t = nl.ndarray((256, 4), dtype=x.dtype, buffer=nl.sbuf)  # more partitions than the hardware has
    return store(t)


class TestFrontend(TestCase):
    def test_compile_runs_the_kernel_once(self) -> None:
        from torchneuron_ext.nki.frontend import ParserFrontend
        x = f32(8, 4)
        result = ParserFrontend().compile(nki.jit(_double), inputs={"x": x}, target="trn2", lnc=1,
                                          output_names=["out"])
        self.assertEqual((result.kernel_name, result.target, result.lnc), ("_double", "trn2", 1))
        np.testing.assert_allclose(result.outputs[0], 2 * x)
        with pytest.raises(nki.NKIUnsupportedError) as e:
            result.module
        self.assertExpectedInline(str(e.value), """\
nki.compiler.frontend: no MLIR module for _double: the torchneuron_ext NKI simulator runs kernels instead of lowering them, so it has no MLIR to print or compile to a NEFF""")

    def test_compile_rejects_what_the_simulator_rejects(self) -> None:
        from torchneuron_ext.nki.frontend import ParserFrontend, TracerFrontend
        with pytest.raises(NKIError, match="exceeds architecture limitation of 128"):
            ParserFrontend().compile(_broken, inputs={"x": f32(8, 4)}, target="gen3")
        with pytest.raises(ValueError) as e:
            TracerFrontend().compile(_double, inputs={"x": f32(8, 4)}, target="trn2", output_names=["a", "b"])
        self.assertExpectedInline(str(e.value), """\
nki.compiler.frontend: _double returns 1 output(s), but 2 output names were given: ['a', 'b']""")
        with pytest.raises(ValueError) as e:
            ParserFrontend().compile(_double, inputs={"x": f32(8, 4)}, target="trn9")
        self.assertExpectedInline(str(e.value), """\
nki.compiler.frontend: unknown target 'trn9' (known: trn1, inf2, trn2, trn3)""")

    def test_dump_python_ast(self) -> None:
        import tempfile
        from torchneuron_ext.nki.frontend import ParserFrontend
        with tempfile.TemporaryDirectory() as tmp:
            ParserFrontend().compile(_double, inputs={"x": f32(8, 4)}, target="trn2", artifacts_dir=tmp,
                                     dump_python_ast=True)
            with open(f"{tmp}/_double.python_ast.txt") as f:
                self.assertIn("FunctionDef(\n      name='_double'", f.read())
        with pytest.raises(ValueError, match="writes into artifacts_dir"):
            ParserFrontend().compile(_double, inputs={"x": f32(8, 4)}, target="trn2", dump_python_ast=True)

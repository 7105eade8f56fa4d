"""nc_matmul widens a bf16 SBUF operand once while the core's SBUF is unchanged (engines/operands.py, widened):
what it multiplies is always what the SBUF holds at the instruction, whatever wrote it in between."""
from __future__ import annotations

import ml_dtypes
import numpy as np

import torchneuron_ext.nki as nki
import torchneuron_ext.nki.isa as nisa
import torchneuron_ext.nki.language as nl
from torchneuron_ext.nki import runtime
from torchneuron_ext.nki.engines import operands

BF16 = ml_dtypes.bfloat16


def _bf16(*shape: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(BF16)


def _product(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    return w.astype(np.float32).T @ x.astype(np.float32)


def _store_products(accs: list, width: int):
    """The PSUM products, copied out through SBUF into a new (len(accs), 128, width) output (allocated after
    the products, so no SBUF allocation comes between them)."""
    out = nl.ndarray((len(accs), 128, width), dtype=nl.float32, buffer=nl.shared_hbm)
    res = nl.ndarray((len(accs), 128, width), dtype=nl.float32, buffer=nl.sbuf)
    for step, acc in enumerate(accs):
        nisa.tensor_copy(dst=res[step], src=acc)
        nisa.dma_copy(dst=out[step], src=res[step])
    return out


@nki.jit
def one_moving_tile_changed_between_products(w, x):
    """out[0] = w0.T @ x, out[1] = w1.T @ x (x widened once), then x doubled in place by the Vector engine,
    out[2] = w0.T @ (2x)."""
    xs = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=xs, src=x)
    ws = nl.ndarray((128, 2, 128), dtype=w.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=ws, src=w)
    accs = [nl.ndarray((128, x.shape[1]), dtype=nl.float32, buffer=nl.psum) for _ in range(3)]
    for step, (i, scale) in enumerate(((0, None), (1, None), (0, 2.0))):
        if scale is not None:  # the one SBUF change between the second product and the third
            nisa.tensor_scalar(dst=xs, data=xs, op0=nl.multiply, operand0=scale)
        nisa.nc_matmul(dst=accs[step], stationary=ws[:, i, :], moving=xs)
    return _store_products(accs, x.shape[1])


def test_a_moving_tile_written_in_place_is_widened_again() -> None:
    w, x = _bf16(128, 2, 128, seed=0), _bf16(128, 64, seed=1)
    got = one_moving_tile_changed_between_products(w, x)
    np.testing.assert_allclose(got[0], _product(w[:, 0, :], x), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(got[1], _product(w[:, 1, :], x), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(got[2], _product(w[:, 0, :], 2 * x.astype(np.float32)), rtol=1e-5, atol=1e-4)


@nki.jit
def product_through_an_alias(w, x, y):
    """x placed at an address, multiplied twice; y stored over the same bytes through another tensor at that
    address; the first tensor multiplied again: it holds y now."""
    ws = nl.ndarray(w.shape, dtype=w.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=ws, src=w)
    xs = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf, address=(0, 65536))
    alias = nl.ndarray(y.shape, dtype=y.dtype, buffer=nl.sbuf, address=(0, 65536))
    nisa.dma_copy(dst=xs, src=x)
    accs = [nl.ndarray((128, x.shape[1]), dtype=nl.float32, buffer=nl.psum) for _ in range(3)]
    for step in range(3):  # x is kept once widened twice
        if step == 2:  # the one SBUF change between the products
            nisa.dma_copy(dst=alias, src=y)
        nisa.nc_matmul(dst=accs[step], stationary=ws, moving=xs)
    return _store_products(accs, x.shape[1])


def test_a_write_through_another_tensor_on_the_same_bytes_is_seen() -> None:
    w, x, y = _bf16(128, 128, seed=2), _bf16(128, 64, seed=3), _bf16(128, 64, seed=4)
    got = product_through_an_alias(w, x, y)
    np.testing.assert_allclose(got[1], _product(w, x), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(got[2], _product(w, y), rtol=1e-5, atol=1e-4)


def test_a_widened_operand_is_kept_while_sbuf_is_unchanged(monkeypatch) -> None:
    widened: list = []
    real = operands._widen

    def counting(v, out=None):
        if isinstance(v, np.ndarray) and v.dtype == BF16:
            widened.append(v.shape)
        return real(v, out)

    monkeypatch.setattr(operands, "_widen", counting)

    @nki.jit
    def k(w, x):
        out = nl.ndarray((128, x.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
        xs = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=xs, src=x)
        ws = nl.ndarray((128, 4, 128), dtype=w.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ws, src=w)
        for i in range(4):  # PSUM allocations and writes between the products leave SBUF as it was
            acc = nl.ndarray((128, x.shape[1]), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=acc, stationary=ws[:, i, :], moving=xs)
        res = nl.ndarray((128, x.shape[1]), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=acc)
        nisa.dma_copy(dst=out, src=res)
        return out

    w, x = _bf16(128, 4, 128, seed=5), _bf16(128, 32, seed=6)
    np.testing.assert_allclose(k(w, x), _product(w[:, 3, :], x), rtol=1e-5, atol=1e-4)
    assert widened.count((128, 32)) == 2    # the moving tile: kept once it is widened a second time
    assert widened.count((128, 128)) == 4   # each stationary slice once


def test_sbuf_epoch_moves_with_sbuf_writes_and_allocations_only() -> None:
    launch = runtime.Launch("k", lambda: None, (), "new", runtime.default_target())
    with runtime.active(launch):
        before = launch.sbuf_epoch
        t = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
        assert launch.sbuf_epoch > before
        before = launch.sbuf_epoch
        t.read()
        p = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.psum)
        after_alloc = launch.sbuf_epoch
        assert after_alloc == before
        p.write(np.zeros((128, 8), np.float32))
        assert launch.sbuf_epoch == after_alloc
        t.write(np.ones((128, 8), np.float32))
        assert launch.sbuf_epoch == after_alloc + 1

"""nc_matmul's products run on a worker thread per core (engines/products.py, csrc/nki/product_queue.cpp): the
values are numpy's bit for bit, and nothing reads PSUM, or reuses an operand's array, before the products it
depends on are done.

The kernel-level tests put a queue in the native one's place that computes nothing until it is waited for: a
missing wait then shows as a wrong value every time, not only when the worker happens to be slow."""
from __future__ import annotations

import ctypes

import ml_dtypes
import numpy as np
import pytest

import torchneuron_ext.nki as nki
import torchneuron_ext.nki.isa as nisa
import torchneuron_ext.nki.language as nl
from torchneuron_ext.nki.engines import products

BF16 = ml_dtypes.bfloat16

pytestmark = pytest.mark.skipif(products.numpy_sgemm() is None, reason="numpy's BLAS has no CBLAS sgemm to call")


def _floats(address: int, count: int) -> np.ndarray:
    return np.ctypeslib.as_array((ctypes.c_float * count).from_address(address))


class LazyQueue:
    """_NKIProductQueue's interface; a product is computed (with numpy) only when a wait reaches it."""

    def __init__(self) -> None:
        self.queued: list = []
        self.completed_count = 0
        self.waits: list = []  # the tickets waited for

    def submit(self, a, b, target, k, m, n, ld, accumulate) -> int:  # noqa: ANN001
        self.queued.append((a, b, target, k, m, n, ld, accumulate))
        return len(self.queued)

    def wait(self, ticket: int) -> None:
        self.waits.append(ticket)
        while self.completed_count < ticket:
            a, b, target, k, m, n, ld, accumulate = self.queued[self.completed_count]
            x = _floats(a, k * m).reshape(k, m)
            y = _floats(b, k * n).reshape(k, n)
            rows = np.lib.stride_tricks.as_strided(_floats(target, (m - 1) * ld + n), (m, n), (4 * ld, 4))
            product = x.T @ y
            rows[...] = rows + product if accumulate else product
            self.completed_count += 1

    def completed(self) -> int:
        return self.completed_count


@pytest.fixture
def lazy(monkeypatch: pytest.MonkeyPatch) -> list:
    """Every core's queue is a LazyQueue (the list collects them)."""
    made: list = []

    def make() -> LazyQueue:
        made.append(LazyQueue())
        return made[-1]

    monkeypatch.setattr(products.Products, "make_queue", staticmethod(make))
    monkeypatch.delenv("TORCHNEURON_EXT_NKI_ASYNC_PRODUCTS", raising=False)
    return made


def _bf16(*shape: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(BF16)


def _f32(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float32)


# -- the native queue ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("k,m,n", [(128, 128, 512), (128, 128, 128), (64, 32, 100), (7, 3, 5), (128, 2, 2), (1, 4, 6)])
@pytest.mark.parametrize("accumulate", [False, True])
def test_the_native_queue_gives_numpy_products_bit_for_bit(k: int, m: int, n: int, accumulate: bool) -> None:
    rng = np.random.default_rng(k * m + n)
    a = rng.standard_normal((k, m)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    wide = rng.standard_normal((m, n + 9)).astype(np.float32)  # the target: rows n + 9 floats apart
    wide[0, :3] = (np.nan, np.inf, -0.0)
    expected = wide.copy()
    expected[:, :n] = np.add(expected[:, :n], a.T @ b) if accumulate else a.T @ b
    queue = products.Products()
    queue.submit(a, b, wide[:, :n], accumulate)
    queue.drain()
    assert not queue.pending
    np.testing.assert_array_equal(wide.view(np.uint32), expected.view(np.uint32))


def test_products_run_in_the_order_they_were_queued() -> None:
    rng = np.random.default_rng(1)
    acc = np.zeros((128, 256), np.float32)
    expected = acc.copy()
    queue = products.Products()
    for step in range(12):
        a = rng.standard_normal((128, 128)).astype(np.float32)
        b = rng.standard_normal((128, 256)).astype(np.float32)
        expected = a.T @ b if step == 0 else np.add(expected, a.T @ b)
        queue.submit(a, b, acc, accumulate=step > 0)
    queue.drain()
    np.testing.assert_array_equal(acc, expected)


def test_a_bad_shape_is_refused_by_the_native_queue() -> None:
    from torchneuron_ext import _C
    address, int64 = products.numpy_sgemm()
    queue = _C._NKIProductQueue(address, int64)
    with pytest.raises(ValueError, match="bad shape"):
        queue.submit(0, 0, 0, 128, 128, 512, 100, False)  # rows 100 floats apart cannot hold 512
    with pytest.raises(ValueError, match="needs the address"):
        _C._NKIProductQueue(0, True)


def test_target_rows_takes_only_views_the_worker_can_write() -> None:
    psum = np.zeros((128, 2, 512), np.float32)
    assert products.target_rows(psum[:, 0, :], 128, 512).strides == (4096, 4)
    assert products.target_rows(psum[:, :, :256], 128, 512) is None   # two pieces per row
    assert products.target_rows(psum[:, 0, ::2], 128, 256) is None    # elements apart
    assert products.target_rows(psum.astype(BF16)[:, 0, :], 128, 512) is None


# -- operand arrays --------------------------------------------------------------------------------------------

def test_an_operand_array_is_reused_only_once_its_product_is_done(lazy: list) -> None:
    queue = products.Products()
    fake = lazy[-1]
    target = np.zeros((128, 8), np.float32)
    seen = []
    for step in range(2 * products.SLOTS):
        a, b = queue.slot("stationary", (128, 128)), queue.slot("moving", (128, 8))
        a[...], b[...] = step, 1.0
        if step >= products.SLOTS:  # this slot's last product is done by now, and not one more
            assert fake.completed_count == step - products.SLOTS + 1
        assert all(a is not s for s in seen[-(products.SLOTS - 1):])
        seen.append(a)
        queue.submit(a, b, target, accumulate=True)
    assert fake.completed_count == products.SLOTS
    queue.drain()
    assert fake.completed_count == 2 * products.SLOTS


# -- kernels ---------------------------------------------------------------------------------------------------

def _copied_out(acc):  # noqa: ANN001, ANN202
    """A PSUM tile copied out through SBUF into a new HBM tensor."""
    res = nl.ndarray(acc.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    out = nl.ndarray(acc.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=res)
    return out


@nki.jit
def k_tiles_then_copy(w, x):
    """out = sum over K tiles t of w[:, t].T @ x[:, t], accumulated in PSUM, then copied out."""
    kt = w.shape[1]
    ws = nl.ndarray(w.shape, dtype=w.dtype, buffer=nl.sbuf)
    xs = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=ws, src=w)
    nisa.dma_copy(dst=xs, src=x)
    acc = nl.ndarray((128, x.shape[2]), dtype=nl.float32, buffer=nl.psum)
    for t in nl.sequential_range(kt):
        nisa.nc_matmul(dst=acc, stationary=ws[:, t, :], moving=xs[:, t, :])
    return _copied_out(acc)


def test_psum_is_read_only_after_its_products(lazy: list) -> None:
    w, x = _bf16(128, 6, 128, seed=0), _bf16(128, 6, 256, seed=1)
    got = k_tiles_then_copy(w, x)
    expected = sum(_f32(w[:, t]).T @ _f32(x[:, t]) for t in range(6))
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-3)
    assert len(lazy) == 1 and len(lazy[0].queued) == 6 and lazy[0].completed_count == 6
    # The matmuls' own records of their PSUM wait for nothing: products 1 and 2 are waited for only as their
    # operand arrays come round again, and all six when the copy reads PSUM.
    assert lazy[0].waits == [1, 2, 6]


@nki.jit
def many_tiles_then_copies(w, x):
    """out[j] = w[:, j].T @ x[:, j] for j < J, each into a PSUM tile of its own, all issued before any copy:
    more products than the queue has operand arrays."""
    nj = w.shape[1]
    ws = nl.ndarray(w.shape, dtype=w.dtype, buffer=nl.sbuf)
    xs = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=ws, src=w)
    nisa.dma_copy(dst=xs, src=x)
    accs = [nl.ndarray((128, x.shape[2]), dtype=nl.float32, buffer=nl.psum) for _ in range(nj)]
    for j in range(nj):
        nisa.nc_matmul(dst=accs[j], stationary=ws[:, j, :], moving=xs[:, j, :])
    out = nl.ndarray((nj, 128, x.shape[2]), dtype=nl.float32, buffer=nl.shared_hbm)
    res = nl.ndarray((nj, 128, x.shape[2]), dtype=nl.float32, buffer=nl.sbuf)
    for j in range(nj):
        nisa.tensor_copy(dst=res[j], src=accs[j])
        nisa.dma_copy(dst=out[j], src=res[j])
    return out


def test_each_product_multiplies_its_own_operands(lazy: list) -> None:
    nj = products.SLOTS + 3
    w, x = _bf16(128, nj, 128, seed=2), _bf16(128, nj, 64, seed=3)
    got = many_tiles_then_copies(w, x)
    for j in range(nj):
        np.testing.assert_allclose(got[j], _f32(w[:, j]).T @ _f32(x[:, j]), rtol=1e-5, atol=1e-3)


@nki.jit
def fp32_operand_overwritten_after_its_product(w, x):
    """out[0] = w.T @ x; then x is overwritten in SBUF (2x) and out[1] = w.T @ (2x): an fp32 operand is the SBUF
    itself, so the queue must have its own copy."""
    ws = nl.ndarray(w.shape, dtype=w.dtype, buffer=nl.sbuf)
    xs = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=ws, src=w)
    nisa.dma_copy(dst=xs, src=x)
    accs = [nl.ndarray((128, x.shape[1]), dtype=nl.float32, buffer=nl.psum) for _ in range(2)]
    nisa.nc_matmul(dst=accs[0], stationary=ws, moving=xs)
    nisa.tensor_scalar(dst=xs, data=xs, op0=nl.multiply, operand0=2.0)
    nisa.nc_matmul(dst=accs[1], stationary=ws, moving=xs)
    out = nl.ndarray((2, 128, x.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    res = nl.ndarray((2, 128, x.shape[1]), dtype=nl.float32, buffer=nl.sbuf)
    for j in range(2):
        nisa.tensor_copy(dst=res[j], src=accs[j])
        nisa.dma_copy(dst=out[j], src=res[j])
    return out


def test_an_fp32_operand_written_after_its_product_is_multiplied_as_it_was(lazy: list) -> None:
    rng = np.random.default_rng(4)
    w = rng.standard_normal((128, 128)).astype(np.float32)
    x = rng.standard_normal((128, 64)).astype(np.float32)
    got = fp32_operand_overwritten_after_its_product(w, x)
    np.testing.assert_allclose(got[0], w.T @ x, rtol=1e-5, atol=1e-3)
    np.testing.assert_allclose(got[1], w.T @ (2 * x), rtol=1e-5, atol=1e-3)


@nki.jit
def products_then_failure(w, x):
    ws = nl.ndarray(w.shape, dtype=w.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=ws, src=w)
    xs = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=xs, src=x)
    acc = nl.ndarray((128, x.shape[1]), dtype=nl.float32, buffer=nl.psum)
    for _ in nl.sequential_range(3):
        nisa.nc_matmul(dst=acc, stationary=ws, moving=xs)
    raise ValueError("the kernel's own error")


def test_a_kernel_failing_with_products_queued_leaves_them_done(lazy: list) -> None:
    w, x = _bf16(128, 128, seed=5), _bf16(128, 32, seed=6)
    with pytest.raises(ValueError, match="the kernel's own error"):
        products_then_failure(w, x)
    assert lazy[0].completed_count == 3  # drained as the instance ended
    got = k_tiles_then_copy(_bf16(128, 2, 128, seed=7), _bf16(128, 2, 64, seed=8))  # the next launch runs
    assert got.shape == (128, 64)


def test_switched_off_every_product_is_computed_on_the_core(lazy: list, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHNEURON_EXT_NKI_ASYNC_PRODUCTS", "0")
    w, x = _bf16(128, 3, 128, seed=9), _bf16(128, 3, 64, seed=10)
    got = k_tiles_then_copy(w, x)
    assert not lazy
    monkeypatch.setenv("TORCHNEURON_EXT_NKI_ASYNC_PRODUCTS", "1")
    queued = k_tiles_then_copy(w, x)
    assert len(lazy) == 1
    np.testing.assert_array_equal(got.view(np.uint32), queued.view(np.uint32))


@nki.jit
def psum_read_through_another_tile_at_its_address(w, x):
    """A product into a PSUM tile at a fixed address, read out through a second tile placed at that address
    (uninitialised memory keeps what it held, as on the device)."""
    ws = nl.ndarray(w.shape, dtype=w.dtype, buffer=nl.sbuf)
    xs = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=ws, src=w)
    nisa.dma_copy(dst=xs, src=x)
    first = nl.ndarray((128, x.shape[1]), dtype=nl.float32, buffer=nl.psum, address=(0, 0))
    nisa.nc_matmul(dst=first, stationary=ws, moving=xs)
    again = nl.ndarray((128, x.shape[1]), dtype=nl.float32, buffer=nl.psum, address=(0, 0))
    return _copied_out(again)


def test_psum_read_through_another_tile_waits_for_the_products_into_it(lazy: list) -> None:
    w, x = _bf16(128, 128, seed=11), _bf16(128, 32, seed=12)
    got = psum_read_through_another_tile_at_its_address(w, x)
    assert len(lazy[0].queued) == 1
    np.testing.assert_allclose(got, _f32(w).T @ _f32(x), rtol=1e-5, atol=1e-3)

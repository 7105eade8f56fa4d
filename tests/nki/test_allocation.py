"""Automatic allocation of SBUF and PSUM (NKI 0.2+ ``nl.ndarray(..., buffer=nl.sbuf/psum)``).

AWS: live data over an on-chip memory's capacity is spilled by the compiler to the next tier (memory
hierarchy overview), so only a single tile larger than the memory is an error; a PSUM tile may span banks
(the Vector/Scalar engines read up to 4K fp32 of PSUM per partition; NKI 0.1 kept a tile in one bank)."""
from __future__ import annotations

import numpy as np
import pytest
from expecttest import TestCase

import torchneuron_ext.nki as nki
import torchneuron_ext.nki.isa as nisa
import torchneuron_ext.nki.language as nl
from torchneuron_ext.nki import NKIError


@nki.jit
def _rotate_wide(rot, data):
    """A (128, 1024) fp32 PSUM tile filled by two bank-sized matmuls and evicted by one copy (the NKI
    Library's rotational top-k does this)."""
    k, n = data.shape
    out = nl.ndarray((k, n), dtype=nl.float32, buffer=nl.shared_hbm)
    r = nl.ndarray(rot.shape, dtype=rot.dtype, buffer=nl.sbuf)
    d = nl.ndarray(data.shape, dtype=data.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=r, src=rot)
    nisa.dma_copy(dst=d, src=data)
    acc = nl.ndarray((k, n), dtype=nl.float32, buffer=nl.psum)  # 4 KiB per partition: two banks
    fmax = nl.tile_size.gemm_moving_fmax
    for i in range(n // fmax):
        nisa.nc_matmul(acc[:, i * fmax:(i + 1) * fmax], r, d[:, i * fmax:(i + 1) * fmax])
    res = nl.ndarray((k, n), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)  # one read over both banks
    nisa.dma_copy(dst=out, src=res)
    return out


def test_psum_tile_spans_banks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NKI_TARGET", "trn2")
    rng = np.random.default_rng(0)
    rot = rng.standard_normal((128, 128)).astype(np.float32)
    data = rng.standard_normal((128, 1024)).astype(np.float32)
    np.testing.assert_allclose(_rotate_wide(rot, data), rot.T @ data, rtol=1e-4, atol=1e-3)


def _straddle(start: int):
    @nki.jit
    def k(a):
        s = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
        m = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(s, 1.0)
        nisa.memset(m, 1.0)
        acc = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(acc[:, start:start + 512], s, m)
        return a
    return k


class TestMatmulInAWideTile(TestCase):
    """The tile may span banks; one matmul's output may not, before NeuronCore-v4."""

    def test_slice_across_banks_is_rejected_on_trn2(self) -> None:
        a = np.zeros((2, 2), np.float32)
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("NKI_TARGET", "trn2")
            _straddle(512)(a)  # the second bank
            with self.assertRaises(NKIError) as info:
                _straddle(256)(a)
        self.assertEqual(info.exception.code, "err_size_of_dimension_exceed_arch_limit")
        self.assertExpectedInline(str(info.exception).splitlines()[0], """\
'nc_matmul' writes bytes [1024, 3072) of each partition of a PSUM tile (128, 1024): a matmul writes one PSUM bank of 2048 bytes, and this slice crosses from bank 0 into bank 1 of the tile; start its slices at multiples of 512 fp32 [err_size_of_dimension_exceed_arch_limit]""")

    def test_trn3_matmul_spans_banks(self) -> None:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("NKI_TARGET", "trn3")
            _straddle(256)(np.zeros((2, 2), np.float32))


def _two_tiles(partitions: int):
    @nki.jit
    def k(a):
        # 120,000 bytes per partition each: two do not fit one 224 KiB partition, but two 64-partition
        # tiles fit side by side (partitions 0-63 and 64-127)
        x = nl.ndarray((partitions, 30_000), dtype=nl.float32, buffer=nl.sbuf)
        y = nl.ndarray((partitions, 30_000), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(x, 1.0)
        nisa.memset(y, 2.0)
        s = nl.ndarray((partitions, 30_000), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=s, data1=x, data2=y, op=nl.add)
        return a
    return k


def test_sbuf_is_counted_per_partition(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NKI_TARGET", "trn2")
    a = np.zeros((2, 2), np.float32)
    half = _two_tiles(64)
    half(a)
    assert half.last_result.costs.spill_bytes["sbuf"] == 0
    full = _two_tiles(128)
    full(a)
    # x and y (240,000 > 229,376 bytes), then s while both are read: everything over capacity is spilled
    assert full.last_result.costs.spill_bytes["sbuf"] == (240_000 - 229_376 + 120_000) * 128


def test_spills_cost_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each spilled byte is saved to HBM and reloaded: the estimate grows with the spill, it is not free.
    monkeypatch.setenv("NKI_TARGET", "trn2")
    a = np.zeros((2, 2), np.float32)
    half, full = _two_tiles(64), _two_tiles(128)
    half(a)
    full(a)
    dma_half = half.last_result.costs.busy_s["dma"]
    dma_full = full.last_result.costs.busy_s["dma"]
    assert dma_full > dma_half


class TestTooLargeForTheMemory(TestCase):
    """Spilling cannot help a tile larger than the memory itself."""

    def test_sbuf_tile_over_a_partition(self) -> None:
        @nki.jit
        def k(a):
            t = nl.ndarray((128, 60_000), dtype=nl.float32, buffer=nl.sbuf)
            return a

        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("NKI_TARGET", "trn2")
            with self.assertRaises(NKIError) as info:
                k(np.zeros((2, 2), np.float32))
        self.assertEqual(info.exception.code, "err_sbuf_capacity_exceeded")
        self.assertExpectedInline(str(info.exception).splitlines()[0], """\
SBUF tile (128, 60000) float32 needs 240000 bytes per partition; trn2 SBUF has 229376 per partition [err_sbuf_capacity_exceeded]""")

    def test_psum_tile_over_psum(self) -> None:
        @nki.jit
        def k(a):
            t = nl.ndarray((128, 4097), dtype=nl.float32, buffer=nl.psum)
            return a

        with self.assertRaises(NKIError) as info:
            k(np.zeros((2, 2), np.float32))
        self.assertEqual(info.exception.code, "err_psum_capacity_exceeded")
        self.assertExpectedInline(str(info.exception).splitlines()[0], """\
PSUM tensor (128, 4097) needs 16388 bytes per partition; PSUM has 16384 (8 banks of 2 KiB) [err_psum_capacity_exceeded]""")


# Fresh tiles are filled through an integer view for ml_dtypes' dtypes (runtime._fill_value): the bits must be
# those numpy's own fill makes, for the uninitialised marks (NaN, 4) and for nl.full's values.
@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3", "float8_e4m3fn", "float8_e5m2", "float16", "float32",
                                   "int8", "uint16"])
@pytest.mark.parametrize("fill", ["uninit", 0.1, -3, 1e6])
def test_fills_give_numpy_fill_bits(dtype: str, fill: object) -> None:
    import ml_dtypes

    from torchneuron_ext.nki import dtypes as nki_dtypes
    from torchneuron_ext.nki.runtime import _fill

    dt = np.dtype(getattr(ml_dtypes, dtype, None) or dtype)
    got = np.zeros((4, 6), dtype=dt)[:, 1:5]  # a strided view, as a tile's may be
    expected = np.zeros((4, 4), dtype=dt)
    with np.errstate(all="ignore"):
        try:
            expected.fill(fill if fill != "uninit" else np.nan if nki_dtypes.is_float(dt) else 4)
        except OverflowError:  # numpy refuses the value for this dtype: so does the fill
            with pytest.raises(OverflowError):
                _fill(got, fill)
            return
        _fill(got, fill)
    bits = np.uint8 if dt.itemsize == 1 else np.uint16 if dt.itemsize == 2 else np.uint32
    np.testing.assert_array_equal(got.view(bits), expected.view(bits))


def test_fill_patterns_are_kept_per_value_bits() -> None:
    # runtime._fill_value keeps each (dtype, value)'s bit pattern: values that compare equal but differ in
    # bits (0.0 and -0.0, NaNs with other payloads) and equal values of other types must not share one.
    import ml_dtypes

    from torchneuron_ext.nki.runtime import _fill_value

    payload = np.frombuffer(np.uint64(0x7FF8_0000_0000_1234).tobytes(), np.float64)[0].item()
    for dt in (np.dtype(ml_dtypes.bfloat16), np.dtype(ml_dtypes.float8_e5m2), np.dtype(np.float16)):
        bits = np.uint8 if dt.itemsize == 1 else np.uint16
        for value in (0.0, -0.0, 0.0, -0.0, float("nan"), -float("nan"), payload, True, 1, 1.0, np.nan):
            got, expected = np.empty((2, 3), dt), np.empty((2, 3), dt)
            with np.errstate(all="ignore"):
                _fill_value(got, value)
                expected.fill(value)
            np.testing.assert_array_equal(got.view(bits), expected.view(bits), err_msg=f"{dt} {value!r}")


def test_dropped_tiles_give_their_bytes_back(monkeypatch: pytest.MonkeyPatch) -> None:
    # The live-bytes bound (runtime.Launch._account) takes a tile's bytes back when the kernel drops it: ten
    # 120,000-byte-per-partition tiles made one after another never hold more than two tiles' bytes.
    from torchneuron_ext.nki import runtime
    from torchneuron_ext.nki.memory import sbuf

    monkeypatch.setenv("NKI_TARGET", "trn2")
    live = []

    @nki.jit
    def k(a):
        for _ in range(10):
            t = nl.ndarray((128, 30_000), dtype=nl.float32, buffer=nl.sbuf)
            nisa.memset(t, 1.0)
            live.append(runtime.current()._live[sbuf])
            del t
        return a

    k(np.zeros((2, 2), np.float32))
    assert max(live) == 120_000 * 128 and len(live) == 10
    assert k.last_result.costs.spill_bytes["sbuf"] == 0

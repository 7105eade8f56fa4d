"""The native float32 <-> bfloat16 loops (csrc/nki/float_conversions.cpp, registered by nki/torch/native_casts.py)
give ml_dtypes' bits, and the core's float_bits uses them for the layouts they take."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from torchneuron_ext.nki import float_bits
from torchneuron_ext.nki.torch import native_casts as native

BF16 = np.dtype(ml_dtypes.bfloat16)


def _random_bits(shape: tuple, seed: int = 0) -> np.ndarray:
    bits = np.random.default_rng(seed).integers(0, 2 ** 32, size=shape, dtype=np.uint64).astype(np.uint32)
    # ties to even both ways, the largest finite bf16 and the first value past it, NaNs with payloads and signs
    specials = [0x3F808000, 0x3F818000, 0x7F7F7FFF, 0x7F7F8000, 0x7F800001, 0xFFC00001, 0x7FFFFFFF, 0x00000001,
                0x80008000, 0x7F800000, 0xFF800000, 0x00008000, 0x80000000]
    bits.reshape(-1)[:len(specials)] = specials
    return bits.view(np.float32)


def _layouts(x: np.ndarray) -> list:
    return [x, x[:, 3:200], x[::3, :], x[2:5], x.reshape(4, -1, x.shape[1])[:, :, 7:]]


def test_registered() -> None:
    assert float_bits._bf16_narrow is native.narrow and float_bits.bf16_widen is native.widen


@pytest.mark.parametrize("layout", range(5))
def test_narrowing_is_ml_dtypes_bit_for_bit(layout: int, monkeypatch: pytest.MonkeyPatch) -> None:
    values = _layouts(_random_bits((96, 256)))[layout]
    with np.errstate(invalid="ignore"):
        expected = values.astype(ml_dtypes.bfloat16)
    out = np.empty(values.shape, np.uint16)
    assert native.narrow(values, out)
    np.testing.assert_array_equal(out, expected.view(np.uint16))

    def numpy_passes(*args):
        raise AssertionError("numpy's passes for a layout the native loop takes")

    monkeypatch.setattr(float_bits, "_f32_to_bf16_bits", numpy_passes)
    got = float_bits.from_float32(values, BF16)
    assert got.dtype == BF16 and got.shape == values.shape
    np.testing.assert_array_equal(got.view(np.uint16), expected.view(np.uint16))


def test_widening_every_pattern_in_every_layout() -> None:
    patterns = np.arange(65536, dtype=np.uint16).view(ml_dtypes.bfloat16).reshape(256, 256)
    for values in _layouts(patterns):
        expected = values.view(np.uint16).astype(np.uint32) << 16
        np.testing.assert_array_equal(float_bits.to_float32(values).view(np.uint32), expected)
        out = np.full(values.shape, -1.0, np.float32)
        assert native.widen(values, out)
        np.testing.assert_array_equal(out.view(np.uint32), expected)


def test_layouts_it_cannot_take_are_left_to_numpy() -> None:
    x = _random_bits((8, 16))
    out = np.zeros((16, 8), np.uint16)
    assert not native.narrow(x.T, out)           # columns: elements not contiguous
    y = _random_bits((4, 6, 16))[:, 1:, 2:]      # rows, but no single step between them
    assert not native.narrow(y, np.zeros(y.shape, np.uint16))
    assert not native.narrow(x, np.zeros((8, 16), np.int16))   # not a bit-pattern destination
    assert not native.widen(x, np.zeros((8, 16), np.float32))  # not bfloat16
    assert (out == 0).all()
    with np.errstate(invalid="ignore"):
        for values in (x.T, x[:, ::-1], x[:, ::2], y):
            np.testing.assert_array_equal(float_bits.from_float32(values, BF16).view(np.uint16),
                                          values.astype(ml_dtypes.bfloat16).view(np.uint16))


def test_has_nan_by_the_bits() -> None:
    patterns = np.arange(65536, dtype=np.uint16).view(ml_dtypes.bfloat16)
    nan = np.isnan(patterns.astype(np.float32))
    assert float_bits.has_nan(patterns) and not float_bits.has_nan(patterns[~nan]) and not float_bits.has_nan(
        patterns[:0])
    finite = patterns[~nan][:1000].reshape(40, 25)
    for i in np.flatnonzero(nan)[::97]:
        one = finite.copy()
        one[7, 3] = patterns[i]
        assert float_bits.has_nan(one) and float_bits.has_nan(one.T)


BYTE_FLOATS = [ml_dtypes.float8_e4m3, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, ml_dtypes.float8_e8m0fnu,
               ml_dtypes.float4_e2m1fn]


@pytest.mark.parametrize("source", BYTE_FLOATS, ids=lambda d: np.dtype(d).name)
def test_8_bit_floats_through_the_native_lookup_are_astype(source: type) -> None:
    assert float_bits._byte_lookup is native.byte_lookup
    patterns = np.arange(256, dtype=np.uint8).view(source).reshape(16, 16)
    for target in (np.float32, ml_dtypes.bfloat16, np.float16):
        table = float_bits._fp8_table(np.dtype(source), np.dtype(target))
        for values in (patterns, patterns[:, 3:], patterns[::2], np.tile(patterns, (3, 5))[1:, 2:]):
            with np.errstate(all="ignore"):
                expected = values.astype(target)
            out = np.empty(values.shape, table.dtype)
            assert native.byte_lookup(table, values, out)
            np.testing.assert_array_equal(out.view(np.uint8), np.ascontiguousarray(expected).view(np.uint8))
            got = float_bits.from_float32(values, np.dtype(target))
            np.testing.assert_array_equal(np.ascontiguousarray(got).view(np.uint8),
                                          np.ascontiguousarray(expected).view(np.uint8))
        # columns are not rows of contiguous bytes: numpy's take, the same values
        assert not native.byte_lookup(table, patterns.T, np.empty((16, 16), table.dtype))
        with np.errstate(all="ignore"):
            np.testing.assert_array_equal(
                np.ascontiguousarray(float_bits.from_float32(patterns.T, np.dtype(target))).view(np.uint8),
                np.ascontiguousarray(patterns.T.astype(target)).view(np.uint8))

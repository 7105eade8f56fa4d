"""The vectorised narrow-float conversions (nki/float_bits.py) give ml_dtypes' results bit for bit."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from torchneuron_ext.nki import dtypes
from torchneuron_ext.nki.float_bits import from_float32, to_float32

NARROW = [ml_dtypes.bfloat16, ml_dtypes.float8_e4m3, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2,
          ml_dtypes.float8_e8m0fnu]


@pytest.mark.parametrize("dtype", NARROW + [np.float16], ids=lambda d: np.dtype(d).name)
def test_to_float32_every_pattern(dtype: type) -> None:
    width = np.dtype(dtype).itemsize * 8
    patterns = np.arange(2 ** width, dtype=np.uint16 if width == 16 else np.uint8).view(dtype).reshape(-1, 16)
    got = to_float32(patterns)
    assert got.dtype == np.float32 and got.shape == patterns.shape
    np.testing.assert_array_equal(got.view(np.uint32), patterns.astype(np.float32).view(np.uint32))


def test_to_float32_of_a_strided_float16_view() -> None:
    x = np.random.default_rng(0).standard_normal((8, 64)).astype(np.float16)
    x[0, 0], x[1, 2] = np.nan, -np.inf
    view = x[::2, 1::3]
    np.testing.assert_array_equal(to_float32(view).view(np.uint32), view.astype(np.float32).view(np.uint32))


def test_from_float32_bfloat16_rounding_and_specials() -> None:
    rng = np.random.default_rng(1)
    random_bits = rng.integers(0, 2 ** 32, size=1 << 20, dtype=np.uint64).astype(np.uint32).view(np.float32)
    # ties to even both ways, the largest finite bf16 and the first value that rounds past it, NaNs of both signs
    specials = np.array([0x3F808000, 0x3F818000, 0x7F7F7FFF, 0x7F7F8000, 0x7F800001, 0xFFC00001, 0x00000001,
                         0x80008000, 0x7F800000, 0xFF800000], dtype=np.uint32).view(np.float32)
    values = np.concatenate([random_bits, specials]).reshape(-1, 2)[:, ::-1]  # a strided view, as tiles are
    with np.errstate(invalid="ignore"):
        expected = values.astype(ml_dtypes.bfloat16)
    got = from_float32(values, np.dtype(ml_dtypes.bfloat16))
    assert got.dtype == np.dtype(ml_dtypes.bfloat16) and got.shape == values.shape
    np.testing.assert_array_equal(got.view(np.uint16), expected.view(np.uint16))


def test_cast_uses_the_same_rounding() -> None:
    x = np.array([[1.00390625, 1.01171875, -3.0e38, np.inf]], dtype=np.float32)
    np.testing.assert_array_equal(dtypes.cast(x, dtypes.bfloat16).view(np.uint16),
                                  x.astype(ml_dtypes.bfloat16).view(np.uint16))
    with np.errstate(over="ignore"):
        assert dtypes.cast(x, dtypes.float16).dtype == np.float16  # other dtypes: numpy's astype


FP8 = [ml_dtypes.float8_e4m3, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, ml_dtypes.float8_e8m0fnu]


@pytest.mark.parametrize("target", [ml_dtypes.bfloat16, np.float32, np.float16, ml_dtypes.float8_e5m2, np.bool_],
                         ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("dtype", FP8, ids=lambda d: np.dtype(d).name)
def test_from_fp8_lookup_is_astype_for_every_pattern(dtype: type, target: type) -> None:
    """The fp8 lookup (an fp8 -> bf16 weight upcast's fast path) against ml_dtypes' per-element astype, NaNs
    and infinities included, through a strided view as tiles are."""
    patterns = np.arange(512, dtype=np.uint16).astype(np.uint8).view(dtype).reshape(16, 32)[:, ::2]
    with np.errstate(all="ignore"):
        expected = patterns.astype(target)
    got = from_float32(patterns, np.dtype(target))
    assert got.dtype == expected.dtype and got.shape == expected.shape == (16, 16)
    np.testing.assert_array_equal(got.view(np.uint8), expected.view(np.uint8))
    assert dtypes.cast(patterns, np.dtype(target)).tobytes() == expected.tobytes()

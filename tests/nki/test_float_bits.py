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


def _bf16_of_float64_cases() -> np.ndarray:
    rng = np.random.default_rng(2)
    random_bits = rng.integers(0, 2 ** 64, size=1 << 18, dtype=np.uint64).view(np.float64)  # every exponent
    # magnitudes around bfloat16's range, its subnormals and below, both signs
    scaled = np.ldexp(rng.random(1 << 18) + 1, rng.integers(-160, 130, size=1 << 18)) * rng.choice([-1, 1], 1 << 18)
    # exact ties between neighbouring bfloat16 values, and a hair either side of them
    low = rng.integers(0, 0x7F7F, size=1 << 16, dtype=np.uint16).view(ml_dtypes.bfloat16).astype(np.float64)
    high = (low.astype(ml_dtypes.bfloat16).view(np.uint16) + 1).view(ml_dtypes.bfloat16).astype(np.float64)
    ties = (low + high) / 2
    specials = np.array([1 + 2 ** -8 + 2 ** -30, -(1 + 2 ** -8 + 2 ** -30), np.nan, -np.nan, np.inf, -np.inf, 0.0,
                         -0.0, 1e-300, -1e-300, 3.4e38, 3.3895e38, 1.7e308, 2.0 ** -133, 2.0 ** -134,
                         3 * 2.0 ** -135, 2.0 ** -149, 2.0 ** -150, 2.0 ** -151])
    return np.concatenate([random_bits, scaled, ties, np.nextafter(ties, np.inf), np.nextafter(ties, -np.inf),
                           specials])


def test_from_float64_to_bfloat16_rounds_once_as_ml_dtypes() -> None:
    """A float64 rounds straight to bfloat16 (through float32 it could round twice: 1 + 2**-8 + 2**-30 is a
    float32 tie that then rounds to 1.0, where ml_dtypes gives 1 + 2**-7)."""
    values = _bf16_of_float64_cases()
    with np.errstate(all="ignore"):
        expected = values.astype(ml_dtypes.bfloat16)
    got = from_float32(values, np.dtype(ml_dtypes.bfloat16))
    assert got.dtype == np.dtype(ml_dtypes.bfloat16) and got.shape == values.shape
    np.testing.assert_array_equal(got.view(np.uint16), expected.view(np.uint16))
    assert got[-19].view(np.uint16) == np.array(1 + 2 ** -7, dtype=ml_dtypes.bfloat16).view(np.uint16)


@pytest.mark.parametrize("source", [np.float64, np.float32], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("layout", ["contiguous", "strided"])
def test_large_casts_to_bfloat16_in_blocks(source: type, layout: str) -> None:
    """Arrays larger than one block (the harness's KV caches) are cast block by block: the same bits as one
    cast, whether the array is contiguous or a strided view, and NaNs in any block."""
    rng = np.random.default_rng(3)
    values = (rng.standard_normal((700, 300)) * 1e3).astype(source)
    values[::97, ::31] = np.nan
    if layout == "strided":
        values = values[::2, ::-1]
    with np.errstate(invalid="ignore"):
        expected = values.astype(ml_dtypes.bfloat16)
    got = from_float32(values, np.dtype(ml_dtypes.bfloat16))
    assert got.shape == values.shape and got.flags.c_contiguous
    np.testing.assert_array_equal(got.view(np.uint16), expected.view(np.uint16))

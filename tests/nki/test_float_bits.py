"""The vectorised narrow-float conversions (nki/float_bits.py) give ml_dtypes' results bit for bit."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from torchneuron_ext.nki import dtypes, float_bits
from torchneuron_ext.nki.float_bits import from_float32, to_float32

NARROW = [ml_dtypes.bfloat16, ml_dtypes.float8_e4m3, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2,
          ml_dtypes.float8_e8m0fnu, ml_dtypes.float4_e2m1fn]


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


FP8 = [ml_dtypes.float8_e4m3, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, ml_dtypes.float8_e8m0fnu,
       ml_dtypes.float4_e2m1fn]


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


@pytest.mark.parametrize("target", [ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("source", [np.float64, np.float32], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("layout", ["contiguous", "strided"])
def test_large_casts_in_blocks(source: type, layout: str, target: type) -> None:
    """Arrays larger than one block (the harness's KV caches) are cast block by block: the same bits as one
    cast, whether the array is contiguous or a strided view, and NaNs in any block."""
    rng = np.random.default_rng(3)
    scale = 1e3 if target == ml_dtypes.bfloat16 else 1e2
    values = (rng.standard_normal((700, 300)) * scale).astype(source)
    values[::97, ::31] = np.nan
    if layout == "strided":
        values = values[::2, ::-1]
    with np.errstate(invalid="ignore"):
        expected = values.astype(target)
    got = from_float32(values, np.dtype(target))
    assert got.shape == values.shape and got.flags.c_contiguous and got.dtype == np.dtype(target)
    bits = np.dtype(f"u{np.dtype(target).itemsize}")
    np.testing.assert_array_equal(got.view(bits), expected.view(bits))


# -- narrowing into the 8-bit floats: float32 by a 16-bit lookup plus a sticky bit, bf16/fp16 by a lookup ----------

def _astype_bits(values: np.ndarray, dtype: type) -> np.ndarray:
    with np.errstate(all="ignore"):
        return values.astype(dtype).view(np.uint8)


def _assert_narrows_as_ml_dtypes(values: np.ndarray, dtype: type) -> None:
    got = from_float32(values, np.dtype(dtype))
    assert got.dtype == np.dtype(dtype) and got.shape == values.shape
    expected = _astype_bits(values, dtype)
    wrong = np.flatnonzero(got.view(np.uint8) != expected)
    assert not wrong.size, (f"{wrong.size} of {values.size} differ, first: {values.reshape(-1)[wrong[0]]!r} -> "
                            f"{got.view(np.uint8).reshape(-1)[wrong[0]]:#04x}, ml_dtypes {expected.reshape(-1)[wrong[0]]:#04x}")


def _rounding_boundaries(dtype: type) -> np.ndarray:
    """Every midpoint between neighbouring finite values of ``dtype`` (both signs, the subnormals' and zero's
    included) and the overflow midpoint above the largest one: float32 values where a cast changes its mind."""
    with np.errstate(all="ignore"):
        finite = np.arange(256, dtype=np.uint8).view(dtype).astype(np.float64)
    finite = np.unique(finite[np.isfinite(finite)])
    mids = (finite[1:] + finite[:-1]) / 2
    top = finite[-1] + (finite[-1] - finite[-2]) / 2  # half a step past the largest finite value
    mids = np.concatenate([mids, [top, -top]])
    assert np.array_equal(mids.astype(np.float32).astype(np.float64), mids)  # all exact in float32
    return mids.astype(np.float32)


def _near(points: np.ndarray, steps: int) -> np.ndarray:
    """``points`` and the float32 values up to ``steps`` ulps either side of each."""
    out, up, down = [points], points, points
    for _ in range(steps):
        up, down = np.nextafter(up, np.float32(np.inf)), np.nextafter(down, np.float32(-np.inf))
        out += [up, down]
    return np.concatenate(out)


F32_SPECIALS = np.array([0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7F80FFFF,
                         0x7FBFFFFF, 0x7FC0FFFF, 0xFFFFFFFF, 0x7F810000, 0x00000000, 0x80000000, 0x00000001,
                         0x80000001, 0x007FFFFF, 0x00800000, 0x7F7FFFFF, 0xFF7FFFFF], dtype=np.uint32)


@pytest.mark.parametrize("dtype", FP8, ids=lambda d: np.dtype(d).name)
def test_float32_into_8_bit_floats_every_bf16_pattern_and_random_bits(dtype: type) -> None:
    """Every float32 whose lower half is zero (each bfloat16 widened), and 4 M random float32 bit patterns:
    every exponent, NaN payloads and subnormals, through a strided view as tiles are."""
    widened = np.left_shift(np.arange(65536, dtype=np.uint32), 16).view(np.float32)
    _assert_narrows_as_ml_dtypes(widened, dtype)
    rng = np.random.default_rng(4)
    random_bits = rng.integers(0, 2 ** 32, size=1 << 22, dtype=np.uint64).astype(np.uint32).view(np.float32)
    _assert_narrows_as_ml_dtypes(random_bits.reshape(1024, -1)[:, ::-2], dtype)
    _assert_narrows_as_ml_dtypes(random_bits, dtype)


@pytest.mark.parametrize("dtype", FP8, ids=lambda d: np.dtype(d).name)
def test_float32_into_8_bit_floats_at_every_rounding_boundary(dtype: type) -> None:
    """Ties round to even and a hair past a tie rounds away: each midpoint exactly, 1-3 ulps either side (the
    ulp above a midpoint differs from it only in the lower 16 bits, the sticky bit's case), the overflow
    midpoint above the largest finite value (saturation, NaN or infinity per dtype), and the specials:
    infinities, NaNs of both signs with payloads in either half, zeros, float32's subnormals and extremes."""
    mids = _rounding_boundaries(dtype)
    values = np.concatenate([_near(mids, 3), F32_SPECIALS.view(np.float32)])
    _assert_narrows_as_ml_dtypes(values, dtype)
    # The sticky bit is what decides these: without it a value 1 ulp above a tie would round as the tie does.
    # (ml_dtypes rounds e8m0's ties up: the tie itself is the boundary, and its sticky case is zero, a NaN in e8m0,
    # against the float32 subnormals below 2**-133, which become 2**-127: the random bits have those.)
    with np.errstate(all="ignore"):
        tie, above = _astype_bits(mids, dtype), _astype_bits(np.nextafter(mids, np.float32(np.inf)), dtype)
    assert (tie != above).any() == (dtype != ml_dtypes.float8_e8m0fnu)


@pytest.mark.parametrize("dtype", FP8, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("source", [ml_dtypes.bfloat16, np.float16], ids=lambda d: np.dtype(d).name)
def test_16_bit_floats_into_8_bit_floats_every_pattern(source: type, dtype: type) -> None:
    """Every bfloat16 and float16 pattern (NaNs, infinities, subnormals), contiguous and strided."""
    patterns = np.arange(65536, dtype=np.uint16).view(source)
    _assert_narrows_as_ml_dtypes(patterns, dtype)
    _assert_narrows_as_ml_dtypes(patterns.reshape(256, 256)[::-1, ::3], dtype)


@pytest.mark.parametrize("dtype", FP8, ids=lambda d: np.dtype(d).name)
def test_float64_into_8_bit_floats_rounds_once(dtype: type) -> None:
    """A float64 rounds straight into the 8-bit float, as ml_dtypes does: each float32 rounding boundary
    nudged by float64 ulps (a value just above a tie that float32 would round onto the tie), random bits of
    every exponent, magnitudes around the dtype's range, and specials beyond float32's range."""
    rng = np.random.default_rng(5)
    mids = _rounding_boundaries(dtype).astype(np.float64)
    nudged = [mids]
    for scale in (2.0 ** -30, 2.0 ** -52):
        nudged += [mids * (1 + scale), mids * (1 - scale)]
    info = ml_dtypes.finfo(dtype)
    scaled = np.ldexp(rng.random(1 << 16) + 0.5, rng.integers(int(info.minexp) - 6, int(info.maxexp) + 3, 1 << 16))
    random_bits = rng.integers(0, 2 ** 64, size=1 << 16, dtype=np.uint64).view(np.float64)
    specials = np.array([1e-300, -1e-300, 1.7e308, -1.7e308, 3.5e38, 2.0 ** -149, 2.0 ** -150, 2.0 ** -127,
                         1.5 * 2.0 ** -127, np.inf, -np.inf, np.nan, -np.nan, 0.0, -0.0])
    values = np.concatenate(nudged + [scaled, -scaled, random_bits, specials])
    _assert_narrows_as_ml_dtypes(values, dtype)


def test_float64_into_fp8_is_not_through_float32() -> None:
    """1 + 2**-4 + 2**-30 is a hair above e4m3fn's tie between 1 and 1.125: float32 rounds it onto the tie,
    which then goes to 1.0; once, it is 1.125."""
    value = np.array([1 + 2 ** -4 + 2 ** -30])
    got = from_float32(value, np.dtype(ml_dtypes.float8_e4m3fn))
    assert got.astype(np.float64)[0] == 1.125 == value.astype(ml_dtypes.float8_e4m3fn).astype(np.float64)[0]
    assert value.astype(np.float32).astype(ml_dtypes.float8_e4m3fn).astype(np.float64)[0] == 1.0


def test_narrowing_call_sites_use_the_vectorised_cast(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engines' casts, the host casts (nl.static_cast, neuron_dtypes.static_cast, host_cast, packing into
    MX dtypes) and QuantizeMX narrow through float_bits, with ml_dtypes' bits."""
    from torchneuron_ext.compat import neuron_dtypes
    from torchneuron_ext.nki import _lang
    from torchneuron_ext.nki.engines import mx

    calls = []
    real = float_bits.from_float32

    def spy(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
        calls.append(np.dtype(dtype))
        return real(values, dtype)

    monkeypatch.setattr(float_bits, "from_float32", spy)
    x = np.random.default_rng(6).standard_normal((16, 8)).astype(np.float32) * 100
    e4m3fn, e5m2 = np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2)
    casts = {"dtypes.cast": dtypes.cast(x, e4m3fn), "nl.static_cast": _lang.static_cast(x, e4m3fn),
             "neuron_dtypes.static_cast": neuron_dtypes.static_cast(x, e4m3fn),
             "host_cast": dtypes.host_cast(x, e4m3fn)}
    for where, got in casts.items():
        assert got.tobytes() == x.astype(e4m3fn).tobytes(), where
    assert calls == [e4m3fn] * len(casts)
    packed = dtypes.pack_x4(x, dtypes.float8_e5m2_x4)
    assert packed.tobytes() == x.astype(e5m2).tobytes() and calls[-1] == e5m2
    calls.clear()
    elements, _ = mx.quantize(x, e4m3fn)
    assert calls == [e4m3fn] and elements.dtype == e4m3fn


def test_from_float32_float16_is_numpys_bit_for_bit() -> None:
    # Large arrays go through torch (F16C), registered by the torch integration: every float16 value, its float32 neighbours and the midpoints
    # between float16 values (ties to even), random float32 bits (overflow, subnormals), a strided view, and
    # arrays with quiet and signalling NaNs (numpy's own path: F16C would quiet the signalling ones).
    h = np.arange(65536, dtype=np.uint16).view(np.float16)
    h = h[np.isfinite(h)].astype(np.float32)
    mids = (h[:-1] + h[1:]) / 2
    values = np.concatenate([h, np.nextafter(h, np.inf), np.nextafter(h, -np.inf), mids[np.isfinite(mids)]])
    bits = np.random.default_rng(1).integers(0, 2**32, size=200_000, dtype=np.uint64).astype(np.uint32)
    rand = bits.view(np.float32)
    rand = rand[~np.isnan(rand)]
    nans = np.random.default_rng(2).standard_normal(8192).astype(np.float32)
    nans.view(np.uint32)[:4] = (0x7F800001, 0xFF800123, 0x7FC00000, 0x7FA00000)
    strided = np.random.default_rng(3).standard_normal((128, 256)).astype(np.float32)[:, ::2] * 7e4
    assert float_bits._f16_narrow is not None and float_bits.f16_widen is not None
    for x in (values, rand, nans, strided):
        with np.errstate(all="ignore"):
            expected = x.astype(np.float16)
            got = from_float32(x, np.dtype(np.float16))
        assert got.dtype == np.float16 and got.shape == x.shape
        np.testing.assert_array_equal(got.view(np.uint16), expected.view(np.uint16))

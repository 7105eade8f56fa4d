"""MX (microscaling): the packed x4 dtypes, their host packing, quantize_mx and nc_matmul_mx."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from torchneuron_ext.nki import dtypes as dt
import torchneuron_ext.nki.language as nl

X4 = [(nl.float8_e4m3fn_x4, ml_dtypes.float8_e4m3fn, 4), (nl.float8_e5m2_x4, ml_dtypes.float8_e5m2, 4),
      (nl.float4_e2m1fn_x4, ml_dtypes.float4_e2m1fn, 2)]


def test_x4_dtypes_are_distinct_sized_dtypes() -> None:
    assert [np.dtype(d).itemsize for d, _, _ in X4] == [4, 4, 2]
    assert len({nl.float8_e4m3fn_x4, nl.float8_e5m2_x4, nl.float4_e2m1fn_x4, nl.uint32, nl.uint16}) == 5
    assert [dt.name(d) for d, _, _ in X4] == ["float8_e4m3fn_x4", "float8_e5m2_x4", "float4_e2m1fn_x4"]
    assert dt.as_dtype("float8_e5m2_x4") == nl.float8_e5m2_x4
    assert nl.float8_e8m0fnu == np.dtype(ml_dtypes.float8_e8m0fnu)


@pytest.mark.parametrize("x4,elem,size", X4)
def test_pack_unpack_round_trip(x4: np.dtype, elem: type, size: int) -> None:
    rng = np.random.default_rng(0)
    # Values the element dtype holds exactly, so packing loses nothing.
    values = rng.uniform(-6, 6, (3, 16)).astype(elem)
    packed = dt.pack_x4(values.astype(np.float32), x4)
    assert packed.shape == (3, 4) and packed.dtype == x4
    np.testing.assert_array_equal(dt.unpack_x4(packed).astype(np.float32), values.astype(np.float32))


@pytest.mark.parametrize("x4,elem,size", X4)
def test_packing_order_is_least_significant_first(x4: np.dtype, elem: type, size: int) -> None:
    values = np.array([[0.5, 1.0, 1.5, 2.0]], np.float32)
    raw = int(dt.pack_x4(values, x4).view(dt.x4_word(x4))[0, 0])
    bits = values.astype(elem).view(np.uint8).astype(np.int64)
    width = 8 * size // 4
    assert raw == sum(int(b) << (width * i) for i, b in enumerate(bits[0]))
    # Raw words from the host (uint32/uint16 tensors) unpack when the packed dtype is named.
    np.testing.assert_array_equal(dt.unpack_x4(np.array([[raw]], dt.x4_word(x4)), x4).astype(np.float32), values)


def test_pack_errors() -> None:
    with pytest.raises(ValueError, match="last axis of shape \\(2, 6\\) is not a multiple of 4"):
        dt.pack_x4(np.zeros((2, 6), np.float32), nl.float8_e4m3fn_x4)
    with pytest.raises(TypeError, match="bfloat16 is not a packed MX dtype"):
        dt.pack_x4(np.zeros((2, 4), np.float32), nl.bfloat16)
    with pytest.raises(TypeError, match="unpacking float8_e5m2_x4 takes 4-byte elements, got uint16"):
        dt.unpack_x4(np.zeros((2, 4), np.uint16), nl.float8_e5m2_x4)

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


# -- quantize_mx / nc_matmul_mx -------------------------------------------------------------------------------

import expecttest  # noqa: E402

import torchneuron_ext.nki as nki  # noqa: E402
import torchneuron_ext.nki.isa as nisa  # noqa: E402
from torchneuron_ext.nki import NKIError  # noqa: E402

EMAX = {ml_dtypes.float8_e4m3fn: 8, ml_dtypes.float8_e5m2: 15, ml_dtypes.float4_e2m1fn: 2}


def ref_quantize(x: np.ndarray, elem: type) -> "tuple[np.ndarray, np.ndarray]":
    """AWS's QuantizeMX (NKI ISA reference): per 8-partition x 4-element group, X = 2**(floor(log2(amax)) -
    (Emax - 1)), 2**-127 for an all-zero group; elements x / X rounded to nearest even."""
    p, f = x.shape
    data = np.empty((p, f), elem)
    scale = np.empty((p // 8, f // 4), np.uint8)
    for g in range(p // 8):
        for c in range(f // 4):
            block = x[8 * g:8 * g + 8, 4 * c:4 * c + 4].astype(np.float64)
            amax = np.abs(block).max()
            e = -127 if amax == 0 else int(np.floor(np.log2(amax))) - (EMAX[elem] - 1)
            scale[g, c] = e + 127
            data[8 * g:8 * g + 8, 4 * c:4 * c + 4] = (block / 2.0 ** e).astype(np.float32).astype(elem)
    return data, scale


def ref_dequantize(data: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """[P, F] element values times their group's 2**(scale - 127)."""
    factor = np.repeat(np.repeat(2.0 ** (scale.astype(np.float64) - 127), 8, axis=0), 4, axis=1)
    return data.astype(np.float64) * factor


def spread(scale: np.ndarray, rows: int, offset: int = 0) -> np.ndarray:
    """Group scales [P // 8, C] in the SBUF quadrant layout: quadrant q's 4 scales on its partitions
    offset..offset+3."""
    out = np.zeros((rows, scale.shape[1]), np.uint8)
    for g in range(scale.shape[0]):
        out[32 * (g // 4) + offset + g % 4] = scale[g]
    return out


def bf16(rng: np.random.Generator, shape: tuple, scale_range: float = 3.0) -> np.ndarray:
    # Magnitudes over many binades, so groups get different scales; some all-zero groups.
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-scale_range, scale_range + 1, shape))
    x[:8, :4] = 0
    return x.astype(ml_dtypes.bfloat16)


@nki.jit(platform_target="trn3")
def quantize_kernel(src, out_data, out_scale):
    p, f = src.shape
    s = nl.ndarray((p, f), dtype=src.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=src)
    q = nl.ndarray((p, f // 4), dtype=out_data.dtype, buffer=nl.sbuf)
    sc = nl.ndarray(out_scale.shape, dtype=out_scale.dtype, buffer=nl.sbuf)
    nisa.memset(dst=sc, value=0)
    nisa.quantize_mx(dst=q, src=s, dst_scale=sc)
    nisa.dma_copy(dst=out_data, src=q)
    nisa.dma_copy(dst=out_scale, src=sc)
    return out_data, out_scale


@pytest.mark.parametrize("p,f", [(32, 4), (32, 64), (64, 32), (128, 512)])
@pytest.mark.parametrize("x4", [nl.float8_e4m3fn_x4, nl.float8_e5m2_x4])
@pytest.mark.parametrize("src_dtype", [ml_dtypes.bfloat16, np.float16])
def test_quantize_mx_matches_reference(p: int, f: int, x4: np.dtype, src_dtype: type) -> None:
    rng = np.random.default_rng(p + f)
    x = bf16(rng, (p, f)).astype(src_dtype)
    elem = dt.x4_element(x4).type
    rows = p // 8 if p <= 32 else p
    data, scale = quantize_kernel(x, np.zeros((p, f // 4), x4), np.zeros((rows, f // 4), np.uint8))
    ref_data, ref_scale = ref_quantize(x.astype(np.float32), elem)
    np.testing.assert_array_equal(dt.unpack_x4(data).view(np.uint8), ref_data.view(np.uint8))
    np.testing.assert_array_equal(scale, spread(ref_scale, rows))
    # The round trip loses at most half an element ulp of each group's scale.
    mant = {ml_dtypes.float8_e4m3fn: 3, ml_dtypes.float8_e5m2: 2}[elem]
    back = ref_dequantize(dt.unpack_x4(data), ref_scale)
    tol = np.repeat(np.repeat(2.0 ** (ref_scale.astype(np.float64) - 127), 8, 0), 4, 1) * 2.0 ** (EMAX[elem] - mant)
    assert (np.abs(back - x.astype(np.float64)) <= tol / 2 + 1e-45).all()


def test_quantize_mx_largest_value_keeps_headroom() -> None:
    # The doubled block scale: a group's largest magnitude lands in [2**(Emax-1), 2**Emax), never saturating.
    x = np.zeros((32, 4), ml_dtypes.bfloat16)
    x[0, 0] = 960.0  # 960 / 4 = 240 = 1.875 * 2**7: exact in e4m3fn
    x[3, 2] = -0.5
    data, scale = quantize_kernel(x, np.zeros((32, 1), nl.float8_e4m3fn_x4), np.zeros((4, 1), np.uint8))
    vals = dt.unpack_x4(data).astype(np.float32)
    assert int(scale[0, 0]) == 127 + 9 - 7  # floor(log2(960)) = 9, Emax - 1 = 7
    assert vals[0, 0] == 960.0 / 4 and vals[3, 2] == -0.5 / 4
    assert int(scale[1, 0]) == 0 and not vals[8:].any()  # all-zero groups: scale 2**-127


@nki.jit(platform_target="trn3")
def packed_scales_kernel(a, b, out_scale):
    pa, fa = a.shape
    pb, fb = b.shape
    sa = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=sa, src=a)
    sb = nl.ndarray(b.shape, dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=sb, src=b)
    qa = nl.ndarray((pa, fa // 4), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
    qb = nl.ndarray((pb, fb // 4), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
    packed = nl.ndarray(out_scale.shape, dtype=nl.float8_e8m0fnu, buffer=nl.sbuf)
    nisa.memset(dst=packed.view(nl.uint8), value=7)
    nisa.quantize_mx(dst=qa, src=sa, dst_scale=packed[0:, :fa // 4])
    nisa.quantize_mx(dst=qb, src=sb, dst_scale=packed[4:, :])
    nisa.dma_copy(dst=out_scale, src=packed.view(nl.uint8))
    return out_scale


def test_quantize_mx_packs_two_scale_tiles_in_one() -> None:
    rng = np.random.default_rng(1)
    a, b = bf16(rng, (128, 64)), bf16(rng, (128, 256))
    got = packed_scales_kernel(a, b, np.zeros((128, 64), np.uint8))
    want = np.full((128, 64), 7, np.uint8)
    _, scale_a = ref_quantize(a.astype(np.float32), ml_dtypes.float8_e4m3fn)
    _, scale_b = ref_quantize(b.astype(np.float32), ml_dtypes.float8_e4m3fn)
    for g in range(16):
        want[32 * (g // 4) + g % 4, :16] = scale_a[g]
        want[32 * (g // 4) + 4 + g % 4, :] = scale_b[g]
    np.testing.assert_array_equal(got, want)


@nki.jit(platform_target="trn3")
def matmul_mx_kernel(st, st_scale, mv, mv_scale, out, accumulate_twice):
    k, m = st.shape
    _, n = mv.shape
    tiles = []
    for t in (st, st_scale, mv, mv_scale):
        s = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=s, src=t)
        tiles.append(s)
    r = nl.ndarray((m, n), dtype=out.dtype, buffer=nl.psum)
    for _ in range(2 if accumulate_twice else 1):
        nisa.nc_matmul_mx(dst=r, stationary=tiles[0], moving=tiles[2], stationary_scale=tiles[1],
                          moving_scale=tiles[3])
    o = nl.ndarray((m, n), dtype=out.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=o, src=r)
    nisa.dma_copy(dst=out, src=o)
    return out


def mx_operand(rng: np.random.Generator, k: int, cols: int, x4: np.dtype) -> "tuple[np.ndarray, ...]":
    """Random MX data [k, cols] x4, its group scales [k // 8, cols] and its dequantized values [k, cols, 4]."""
    elem = dt.x4_element(x4).type
    limit = float(ml_dtypes.finfo(elem).max)
    vals = rng.uniform(-limit, limit, (k, cols * 4)).astype(elem)
    scale = rng.integers(120, 134, (k // 8, cols)).astype(np.uint8)
    # One scale per x4 column is one per 4 unquantized columns: ref_dequantize's groups.
    deq = ref_dequantize(vals, scale)
    return dt.pack_x4(vals, x4), scale, deq.reshape(k, cols, 4)


@pytest.mark.parametrize("k,m,n", [(32, 8, 16), (64, 128, 96), (128, 128, 512)])
@pytest.mark.parametrize("st_x4,mv_x4", [(nl.float8_e4m3fn_x4, nl.float8_e5m2_x4),
                                          (nl.float4_e2m1fn_x4, nl.float8_e4m3fn_x4),
                                          (nl.float4_e2m1fn_x4, nl.float4_e2m1fn_x4)])
def test_nc_matmul_mx_is_dequantize_then_matmul(k: int, m: int, n: int, st_x4: np.dtype, mv_x4: np.dtype) -> None:
    rng = np.random.default_rng(k * m + n)
    st, st_s, st_deq = mx_operand(rng, k, m, st_x4)
    mv, mv_s, mv_deq = mx_operand(rng, k, n, mv_x4)
    rows = k // 8 if k <= 32 else k
    ref = np.einsum("kiq,kjq->ij", st_deq, mv_deq)
    out = matmul_mx_kernel(st, spread(st_s, rows), mv, spread(mv_s, rows), np.zeros((m, n), np.float32), False)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6 * np.abs(ref).max())
    twice = matmul_mx_kernel(st, spread(st_s, rows), mv, spread(mv_s, rows), np.zeros((m, n), np.float32), True)
    np.testing.assert_allclose(twice, 2 * ref, rtol=1e-5, atol=2e-6 * np.abs(ref).max())
    as_bf16 = matmul_mx_kernel(st, spread(st_s, rows), mv, spread(mv_s, rows),
                               np.zeros((m, n), ml_dtypes.bfloat16), False)
    np.testing.assert_array_equal(as_bf16, out.astype(ml_dtypes.bfloat16))


def test_quantize_then_matmul_approximates_the_product() -> None:
    rng = np.random.default_rng(3)
    a, b = bf16(rng, (128, 512), 0), bf16(rng, (128, 2048), 0)
    da, sa = ref_quantize(a.astype(np.float32), ml_dtypes.float8_e4m3fn)
    db, sb = ref_quantize(b.astype(np.float32), ml_dtypes.float8_e4m3fn)
    out = matmul_mx_kernel(dt.pack_x4(da, nl.float8_e4m3fn_x4), spread(sa, 128), dt.pack_x4(db, nl.float8_e4m3fn_x4),
                           spread(sb, 128), np.zeros((128, 512), np.float32), False)
    exact = np.einsum("kiq,kjq->ij", a.astype(np.float64).reshape(128, 128, 4), b.astype(np.float64).reshape(128, 512, 4))
    # fp8 e4m3 keeps 3 mantissa bits: each product is within ~2**-3 relative; the sums average that down.
    assert np.abs(out - exact).max() < 0.05 * np.abs(exact).max()
    assert matmul_mx_kernel.last_result.costs.instructions["nc_matmul_mx"] == 1

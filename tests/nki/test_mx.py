"""MX (microscaling): the packed x4 dtypes, their host packing, quantize_mx and nc_matmul_mx."""
from __future__ import annotations

from typing import Any

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


# -- errors ---------------------------------------------------------------------------------------------------

def _quantize_error(src_shape: tuple, src_dtype: Any, dst_dtype: Any, scale_shape: tuple, scale_dtype: Any = nl.uint8,
                    scale_start: int = 0, target: str = "trn3") -> str:
    @nki.jit(platform_target=target)
    def k(a):
        p, f = src_shape
        s = nl.ndarray(src_shape, dtype=src_dtype, buffer=nl.sbuf)
        q = nl.ndarray((p, max(f // 4, 1)), dtype=dst_dtype, buffer=nl.sbuf)
        sc = nl.ndarray((scale_shape[0] + scale_start, scale_shape[1]), dtype=scale_dtype, buffer=nl.sbuf)
        nisa.quantize_mx(dst=q, src=s, dst_scale=sc[scale_start:, :])
        return a

    with pytest.raises(NKIError) as info:
        k(np.zeros((2, 2), np.float32))
    return str(info.value).splitlines()[0]


def _matmul_error(st_shape: tuple, mv_shape: tuple, st_scale: tuple, mv_scale: tuple, dst_shape: tuple, *,
                  st_dtype: Any = nl.float8_e4m3fn_x4, dst_dtype: Any = nl.float32, dst_buffer: Any = nl.psum,
                  **kw: Any) -> str:
    @nki.jit(platform_target="trn3")
    def k(a):
        st = nl.ndarray(st_shape, dtype=st_dtype, buffer=nl.sbuf)
        mv = nl.ndarray(mv_shape, dtype=nl.float8_e5m2_x4, buffer=nl.sbuf)
        ss = nl.ndarray(st_scale, dtype=nl.uint8, buffer=nl.sbuf)
        ms = nl.ndarray(mv_scale, dtype=nl.uint8, buffer=nl.sbuf)
        r = nl.ndarray(dst_shape, dtype=dst_dtype, buffer=dst_buffer)
        nisa.nc_matmul_mx(dst=r, stationary=st, moving=mv, stationary_scale=ss, moving_scale=ms, **kw)
        return a

    with pytest.raises(NKIError) as info:
        k(np.zeros((2, 2), np.float32))
    return str(info.value).splitlines()[0]


class TestMxErrors(expecttest.TestCase):
    def test_quantize_mx_errors(self) -> None:
        bf, e4 = nl.bfloat16, nl.float8_e4m3fn_x4
        self.assertExpectedInline(_quantize_error((32, 16), nl.float32, e4, (4, 4)), """\
'quantize_mx': src must be float16 or bfloat16, got float32 [err_unsupported_dtype]""")
        self.assertExpectedInline(_quantize_error((32, 16), bf, nl.float4_e2m1fn_x4, (4, 4)), """\
'quantize_mx': dst must be float8_e4m3fn_x4 or float8_e5m2_x4, got float4_e2m1fn_x4; QuantizeMX does not produce fp4 [err_unsupported_dtype]""")
        self.assertExpectedInline(_quantize_error((48, 16), bf, e4, (48, 4)), """\
'quantize_mx': the partition size of src must be a multiple of 32 (whole SBUF quadrants) and at most 128, got (48, 16) [err_num_partition_mismatch]""")
        self.assertExpectedInline(_quantize_error((32, 18), bf, e4, (4, 4)), """\
'quantize_mx': the free size of src (32, 18) must be a multiple of 4 [err_shape_mismatch]""")
        self.assertExpectedInline(_quantize_error((128, 16), bf, e4, (16, 4)), """\
'quantize_mx': dst_scale (16, 4) has 16 partitions but needs 100: the scales of a 128-partition dst stay in the SBUF quadrant of their group, 4 partitions at the start of each of its 4 quadrants, so allocate the scale tile with the data's partitions [err_num_partition_mismatch]""")
        self.assertExpectedInline(_quantize_error((32, 16), bf, e4, (4, 4), scale_start=2), """\
'quantize_mx': dst_scale starts on partition 2 of its SBUF quadrant; scale tiles start at offset 0, 4, 8 or 12 within a quadrant [err_invalid_start_partition]""")
        self.assertExpectedInline(_quantize_error((32, 16), bf, e4, (4, 8)), """\
'quantize_mx': dst_scale (4, 8) needs 4 elements per partition, one per x4 column of dst [err_shape_mismatch]""")
        self.assertExpectedInline(_quantize_error((32, 16), bf, e4, (4, 4), scale_dtype=nl.bfloat16), """\
'quantize_mx': dst_scale must be float8_e8m0fnu or uint8 (E8M0 exponents), got bfloat16 [err_unsupported_dtype]""")
        self.assertExpectedInline(_quantize_error((32, 16), bf, e4, (4, 4), target="trn2"), """\
'quantize_mx' needs NeuronCore-v4 (trn3) or later; the target is trn2 [err_unsupported_instruction]""")

    def test_nc_matmul_mx_errors(self) -> None:
        self.assertExpectedInline(_matmul_error((32, 8), (32, 16), (4, 8), (4, 16), (8, 16), st_dtype=nl.bfloat16), """\
'nc_matmul_mx': stationary must be float8_e5m2_x4, float8_e4m3fn_x4 or float4_e2m1fn_x4, got bfloat16 [err_unsupported_dtype]""")
        self.assertExpectedInline(_matmul_error((32, 8), (64, 16), (4, 8), (64, 16), (8, 16)), """\
number of partitions (dimension 0 size of a tile) mismatch in parameters (stationary[32, 8], moving[64, 16]) of 'nc_matmul_mx': the contraction runs over the partition dimension of both [err_num_partition_mismatch]""")
        self.assertExpectedInline(_matmul_error((64, 8), (64, 16), (8, 8), (64, 16), (8, 16)), """\
'nc_matmul_mx': stationary_scale (8, 8) has 8 partitions but needs 36: the scales of a 64-partition stationary stay in the SBUF quadrant of their group, 4 partitions at the start of each of its 2 quadrants, so allocate the scale tile with the data's partitions [err_num_partition_mismatch]""")
        self.assertExpectedInline(_matmul_error((32, 8), (32, 16), (4, 8), (4, 16), (8, 16), dst_buffer=nl.sbuf), """\
Expected operand 'dst' of 'nc_matmul_mx' to be in address space 'psum', but got 'sbuf' instead: the Tensor engine writes only to PSUM [err_unsupported_memory]""")
        self.assertExpectedInline(_matmul_error((32, 8), (32, 16), (4, 8), (4, 16), (8, 16), dst_dtype=nl.float16), """\
'nc_matmul_mx': dst must be float32 or bfloat16, got float16 [err_unsupported_dtype]""")
        self.assertExpectedInline(_matmul_error((32, 7), (32, 16), (4, 7), (4, 16), (7, 16)), """\
'nc_matmul_mx': the stationary free size must be even and at most 128, got 7 [err_size_of_dimension_exceed_arch_limit]""")
        self.assertExpectedInline(_matmul_error((32, 8), (32, 16), (4, 8), (4, 16), (16, 8)), """\
'nc_matmul_mx' produces (8, 16) but dst is (16, 8) [err_shape_mismatch]""")
        self.assertExpectedInline(_matmul_error((64, 8), (64, 16), (64, 8), (64, 16), (8, 16), tile_position=(0, 0),
                                                tile_size=(32, 128)), """\
'nc_matmul_mx': the stationary tile's 64 partitions exceed the row tile size 32 [err_invalid_pe_tiling]""")
        self.assertExpectedInline(_matmul_error((32, 8), (32, 16), (4, 8), (4, 16), (8, 16), tile_position=(0, 32),
                                                tile_size=(32, 128)), """\
'nc_matmul_mx' tiles the PE array by rows only: tile_size (rows, 128) with rows 32, 64 or 128 and tile_position (start_row, 0) with start_row a multiple of rows; got tile_position (0, 32) and tile_size (32, 128) [err_invalid_pe_tiling]""")


def test_nc_matmul_mx_row_tiles_compute_the_same() -> None:
    rng = np.random.default_rng(5)
    st, st_s, st_deq = mx_operand(rng, 32, 16, nl.float8_e4m3fn_x4)
    mv, mv_s, mv_deq = mx_operand(rng, 32, 64, nl.float8_e4m3fn_x4)

    @nki.jit(platform_target="trn3")
    def k(st, st_s, mv, mv_s, out):
        tiles = []
        for t in (st, st_s, mv, mv_s):
            s = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=s, src=t)
            tiles.append(s)
        r = nl.ndarray(out.shape, dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul_mx(dst=r, stationary=tiles[0], moving=tiles[2], stationary_scale=tiles[1],
                          moving_scale=tiles[3], tile_position=(96, 0), tile_size=(32, 128))
        o = nl.ndarray(out.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=o, src=r)
        nisa.dma_copy(dst=out, src=o)
        return out

    out = k(st, st_s, mv, mv_s, np.zeros((16, 64), np.float32))
    ref = np.einsum("kiq,kjq->ij", st_deq, mv_deq)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6 * np.abs(ref).max())


def _packed_operand_error(body: Any) -> str:
    @nki.jit(platform_target="trn3")
    def k(a):
        x = nl.ndarray((32, 4), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        nisa.dma_copy(dst=x, src=a)
        body(x)
        return a

    with pytest.raises(NKIError) as info:
        k(dt.pack_x4(np.ones((32, 16), np.float32), nl.float8_e4m3fn_x4))
    return str(info.value).splitlines()[0]


class TestPackedDataIsNotComputedOn(expecttest.TestCase):
    # numpy would read the raw words as numbers: every engine path refuses instead.
    def test_engines_refuse_packed_operands(self) -> None:
        def add(x: Any) -> None:
            y = nl.ndarray((32, 4), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=y, data1=x, data2=x, op=nl.add)

        def to_bf16(x: Any) -> None:
            nisa.tensor_copy(dst=nl.ndarray((32, 4), dtype=nl.bfloat16, buffer=nl.sbuf), src=x)

        def memset_one(x: Any) -> None:
            nisa.memset(dst=x, value=1)

        self.assertExpectedInline(_packed_operand_error(add), """\
an engine operand of dtype float8_e4m3fn_x4: a packed MX element holds four fp8/fp4 values and no engine computes on it; nisa.quantize_mx writes it, nisa.nc_matmul_mx reads it, and DMA or a copy into the same dtype moves it unchanged [err_unsupported_dtype]""")
        self.assertExpectedInline(_packed_operand_error(to_bf16), """\
cannot convert from float8_e4m3fn_x4: a packed MX element holds four fp8/fp4 values and no engine computes on it; nisa.quantize_mx writes it, nisa.nc_matmul_mx reads it, and DMA or a copy into the same dtype moves it unchanged [err_unsupported_dtype]""")
        self.assertExpectedInline(_packed_operand_error(memset_one), """\
cannot convert to float8_e4m3fn_x4: a packed MX element holds four fp8/fp4 values and no engine computes on it; nisa.quantize_mx writes it, nisa.nc_matmul_mx reads it, and DMA or a copy into the same dtype moves it unchanged [err_unsupported_dtype]""")


def test_packed_data_moves_unchanged_and_memsets_to_zero() -> None:
    @nki.jit(platform_target="trn3")
    def k(a, out, zeros):
        x = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x, src=a)
        y = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=y, src=x)
        nisa.dma_copy(dst=out, src=y.view(nl.uint32))
        nisa.memset(dst=x, value=0)
        nisa.dma_copy(dst=zeros, src=x)
        return out, zeros

    a = dt.pack_x4(np.random.default_rng(0).uniform(-448, 448, (32, 64)).astype(np.float32), nl.float8_e4m3fn_x4)
    out, zeros = k(a, np.zeros((32, 16), np.uint32), np.ones((32, 16), np.uint32).view(nl.float8_e4m3fn_x4))
    np.testing.assert_array_equal(out, a.view(np.uint32))
    assert not zeros.view(np.uint32).any()


def test_host_cast_packs_and_unpacks() -> None:
    x = np.array([[0.5, -1.0, 1.5, 4.0, 3.0, -6.0, 0.0, 2.0]], np.float32)
    packed = dt.host_cast(x, nl.float4_e2m1fn_x4)
    assert packed.dtype == nl.float4_e2m1fn_x4 and packed.shape == (1, 2)
    np.testing.assert_array_equal(dt.host_cast(packed, np.float32), x)
    np.testing.assert_array_equal(dt.host_cast(x, nl.bfloat16), x.astype(ml_dtypes.bfloat16))


def test_cost_model_counts_mx_instructions() -> None:
    @nki.jit(platform_target="trn3")
    def k(a, st, st_s):
        s = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=s, src=a)
        q = nl.ndarray((128, 512), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        sc = nl.ndarray((128, 512), dtype=nl.uint8, buffer=nl.sbuf)
        nisa.quantize_mx(dst=q, src=s, dst_scale=sc)
        sst = nl.ndarray(st.shape, dtype=st.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=sst, src=st)
        sss = nl.ndarray(st_s.shape, dtype=st_s.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=sss, src=st_s)
        r = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul_mx(dst=r, stationary=sst, moving=q, stationary_scale=sss, moving_scale=sc)
        return a

    rng = np.random.default_rng(2)
    st, st_s, _ = mx_operand(rng, 128, 128, nl.float4_e2m1fn_x4)
    k(bf16(rng, (128, 2048)), st, spread(st_s, 128))
    costs = k.last_result.costs
    hw = costs.hw
    assert costs.instructions["quantize_mx"] == 1 and costs.instructions["nc_matmul_mx"] == 1
    # Four source elements per partition per cycle: 2048 elements are 512 cycles.
    assert costs.busy_s["vector"] == pytest.approx(max(hw.nki_min_ii_cycles, 512) / hw.vector_clock_hz)
    # A [128, 128] x4 stationary against a [128, 512] x4 moving: a bf16 matmul's 512 cycles for 4x the work.
    assert costs.busy_s["tensor"] == pytest.approx(512 / hw.tensor_clock_hz)
    assert costs.flops == 2 * 512 * 128 * 512


@nki.jit(platform_target="trn3")
def padded_down_proj_kernel(inter, weight, weight_scale, out, clear_padding):
    # AWS's MX down projection (NKI Library, mlp_tkg/down_projection_mx_shard_H.py) in small: the activation
    # fills only I // 4 of the 128 partitions it quantizes, and the weight rows past them are zeros with
    # zero scales ("so the garbage does not matter").
    p_i, f = inter.shape
    act = nl.ndarray((128, f), dtype=nl.bfloat16, buffer=nl.sbuf)
    if clear_padding:
        nisa.memset(dst=act, value=0.0)
    nisa.dma_copy(dst=act[:p_i, :], src=inter)
    q = nl.ndarray((128, f // 4), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
    qs = nl.ndarray((128, f // 4), dtype=nl.uint8, buffer=nl.sbuf)
    nisa.quantize_mx(dst=q, src=act, dst_scale=qs)
    w = nl.ndarray(weight.shape, dtype=weight.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=w, src=weight)
    ws = nl.ndarray(weight_scale.shape, dtype=weight_scale.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=ws, src=weight_scale)
    r = nl.ndarray(out.shape, dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul_mx(dst=r, stationary=q, moving=w, stationary_scale=qs, moving_scale=ws)
    o = nl.ndarray(out.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=o, src=r)
    nisa.dma_copy(dst=out, src=o)
    return out


def test_matmul_over_never_written_partitions_is_nan_despite_zero_weights() -> None:
    # Why the NKI Library's selective-expert MX MoE tests (I = 192, 384) fail in simulation: the sentinel NaN of
    # never-written SBUF (AWS's simulator guide: "NaN for floating-point types") quantizes to NaN, and NaN times
    # a zero weight is NaN in the Tensor engine (AWS's Trainium2 architecture guide: NaN/Inf "propagate through
    # the accumulation chain"). Every output sums over those partitions, so every output is NaN, as in AWS's
    # simulator; on hardware the leftover values are finite and the zero weights cancel them.
    rng = np.random.default_rng(7)
    p_i, f, n = 96, 16, 64
    inter = bf16(rng, (p_i, f), 1)
    w_vals, w_scale, _ = mx_operand(rng, 128, n, nl.float4_e2m1fn_x4)
    w_elems = dt.unpack_x4(w_vals).astype(np.float32)
    w_elems[p_i:] = 0
    w_scale[p_i // 8:] = 0
    weight, scale = dt.pack_x4(w_elems, nl.float4_e2m1fn_x4), spread(w_scale, 128)

    out = padded_down_proj_kernel(inter, weight, scale, np.zeros((f // 4, n), np.float32), False)
    assert np.isnan(out).all()

    cleared = padded_down_proj_kernel(inter, weight, scale, np.zeros((f // 4, n), np.float32), True)
    act = np.zeros((128, f), np.float32)
    act[:p_i] = inter.astype(np.float32)
    a_data, a_scale = ref_quantize(act, ml_dtypes.float8_e4m3fn)
    a_deq = ref_dequantize(a_data, a_scale).reshape(128, f // 4, 4)
    w_deq = ref_dequantize(w_elems.astype(ml_dtypes.float4_e2m1fn), w_scale).reshape(128, n, 4)
    ref = np.einsum("kiq,kjq->ij", a_deq, w_deq)
    np.testing.assert_allclose(cleared, ref, rtol=1e-5, atol=1e-6 * np.abs(ref).max())

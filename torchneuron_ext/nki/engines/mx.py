"""MX (OCP microscaling) on NeuronCore-v4: the Vector engine's QuantizeMX and the Tensor engine's MX matmul.

Numerics and layout are AWS's (NKI ISA reference for quantize_mx / nc_matmul_mx, the Trainium3 architecture
guide and the "MXFP Matrix Multiplication" deep-dive):

- A scaling group is 32 values: 8 partitions x 4 consecutive free elements of the unquantized tile. The 4
  free elements become one packed x4 element, so a [P, F] source gives [P, F/4] data and one scale per
  (8 partitions, 1 x4 column).
- A scale is an E8M0 byte (float8_e8m0fnu, or uint8 holding the same bits): 2**(byte - 127); 0xFF is NaN.
- Scales live in the SBUF quadrant their group came from: the 4 groups of quadrant q (partitions 32q..32q+31)
  have their scales on partitions 32q+o .. 32q+o+3 of the scale tile, where o (0, 4, 8 or 12) is the scale
  tile's start partition within its quadrant, which lets four tensors' scales share one tile.
- QuantizeMX's block scale is 2**(floor(log2(amax)) - (Emax - 1)), twice the OCP sample algorithm's, so the
  largest value of a group never saturates; an all-zero group gets 2**-127 (byte 0). AWS gives no rule for a
  group holding a NaN or an infinity: it gets the E8M0 NaN (0xFF), which makes the whole block NaN (OCP).
- The MX matmul dequantizes both operands with their scales and contracts over the partitions and the 4
  values inside each x4 element, accumulating in fp32 (dst fp32 or bf16, in PSUM). A NaN operand reaches
  every output it is contracted into, zero weights included, as AWS documents for the Tensor engine.
"""
from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np

from .. import dtypes, float_bits, runtime
from ..data_address import data_address
from ..errors import fail
from ..memory import psum
from ..tensor import NKITensor
from .operands import check_tile, free_size

QUADRANT = 32          # SBUF partitions per quadrant
GROUP_PARTITIONS = 8   # partitions of one scaling group (times 4 free elements: 32 values)
SCALES_PER_QUADRANT = QUADRANT // GROUP_PARTITIONS
SCALE_OFFSETS = (0, 4, 8, 12)  # where in its quadrant a scale tile may start
E8M0_BIAS = 127
E8M0_NAN = 0xFF

# The largest unbiased exponent of each element type (AWS's E_max; 448 = 1.75 * 2**8, 57344 = 1.75 * 2**15).
_EMAX = {dtypes.float8_e4m3fn: 8, dtypes.float8_e5m2: 15, dtypes.float4_e2m1fn: 2}
_SCALE_DTYPES = (dtypes.uint8, dtypes.float8_e8m0fnu)
# QuantizeMX's block scale over the OCP sample algorithm's 2**(floor(log2(amax)) - Emax), in powers of two:
# AWS's ISA reference (quantize_mx, 2026) documents a scale twice as large. AWS's NKI Library goldens
# (mx_utils.quantize_mx_golden) use the OCP scale with saturation: 0 here reproduces them bit for bit.
SCALE_HEADROOM_EXP = 1


def require_v4(api: str) -> None:
    target = runtime.current().target
    if target.generation < 4:
        fail("err_unsupported_instruction",
             f"'{api}' needs NeuronCore-v4 (trn3) or later; the target is {target.name}")


def scale_rows(partitions: int) -> np.ndarray:
    """The scale tile's rows (relative to its start) holding the scales of a data tile of ``partitions``
    partitions, one per 8-partition group, in group order."""
    groups = np.arange(partitions // GROUP_PARTITIONS)
    return QUADRANT * (groups // SCALES_PER_QUADRANT) + groups % SCALES_PER_QUADRANT


def scale_partitions_needed(partitions: int) -> int:
    return int(scale_rows(partitions)[-1]) + 1


def start_partition(t: NKITensor) -> Optional[int]:
    """The partition of its allocation a tile view starts on (None when indexed by tiles: not a slice)."""
    if t.index is not None:
        return None
    base = t.storage.array
    offset = data_address(t.arr) - data_address(base)
    return offset // base.strides[0] if base.strides[0] else 0


def check_data_partitions(api: str, arg: str, t: NKITensor) -> int:
    p = t.shape[0]
    if p % QUADRANT or p > runtime.current().target.num_partitions:
        fail("err_num_partition_mismatch",
             f"'{api}': the partition size of {arg} must be a multiple of {QUADRANT} (whole SBUF quadrants) and at "
             f"most {runtime.current().target.num_partitions}, got {t.shape}")
    return p


def check_scale_tile(api: str, arg: str, scale: NKITensor, data_arg: str, data_partitions: int,
                     columns: int) -> None:
    """A scale tile of ``api`` for a data tile of ``data_partitions`` partitions and ``columns`` x4 columns."""
    check_tile(scale, api, arg, allow_psum=False)
    if scale.dtype not in _SCALE_DTYPES:
        fail("err_unsupported_dtype", f"'{api}': {arg} must be float8_e8m0fnu or uint8 (E8M0 exponents), got "
                                      f"{dtypes.name(scale.dtype)}")
    need = scale_partitions_needed(data_partitions)
    if scale.shape[0] < need:
        spread = "" if data_partitions <= QUADRANT else (
            f": the scales of a {data_partitions}-partition {data_arg} stay in the SBUF quadrant of their group, "
            f"{SCALES_PER_QUADRANT} partitions at the start of each of its {data_partitions // QUADRANT} quadrants, "
            f"so allocate the scale tile with the data's partitions")
        fail("err_num_partition_mismatch",
             f"'{api}': {arg} {scale.shape} has {scale.shape[0]} partitions but needs {need}{spread}")
    start = start_partition(scale)
    if start is not None and start % QUADRANT not in SCALE_OFFSETS:
        fail("err_invalid_start_partition",
             f"'{api}': {arg} starts on partition {start % QUADRANT} of its SBUF quadrant; scale tiles start at "
             f"offset 0, 4, 8 or 12 within a quadrant")
    if free_size(scale.shape) != columns:
        fail("err_shape_mismatch", f"'{api}': {arg} {scale.shape} needs {columns} elements per partition, one per "
                                   f"x4 column of {data_arg}")


def read_scales(scale: NKITensor, data_partitions: int) -> np.ndarray:
    """The E8M0 bytes of a scale tile, one row per 8-partition group: [data_partitions // 8, columns]."""
    raw = np.ascontiguousarray(scale.read()).view(np.uint8).reshape(scale.shape[0], -1)
    return raw[scale_rows(data_partitions)]


def write_scales(scale: NKITensor, data_partitions: int, scale_bytes: np.ndarray) -> None:
    """Write each quadrant's group scales on its first partitions (from the tile's start); the rest of the
    tile keeps its contents, as other tensors' scales may share it."""
    per_q = SCALES_PER_QUADRANT
    for q in range(math.ceil(data_partitions / QUADRANT)):
        rows = scale_bytes[q * per_q:(q + 1) * per_q]
        view = scale[q * QUADRANT:q * QUADRANT + len(rows)]
        view.write(rows.reshape(view.shape).view(scale.dtype))


def scale_values(scale_bytes: np.ndarray) -> np.ndarray:
    """E8M0 bytes as the fp32 factors they encode (NaN for 0xFF; byte 0 is 2**-127, an fp32 subnormal)."""
    b = scale_bytes.astype(np.int32)
    return np.where(b == E8M0_NAN, np.float32(np.nan),
                    np.ldexp(np.float32(1), b - E8M0_BIAS).astype(np.float32))


def quantize(values: np.ndarray, element: np.dtype) -> "tuple[np.ndarray, np.ndarray]":
    """QuantizeMX of an fp32 [P, F] tile (P a multiple of 8, F of 4): the elements [P, F] in ``element`` and
    the E8M0 scale bytes [P // 8, F // 4]."""
    p, f = values.shape
    groups = values.reshape(p // GROUP_PARTITIONS, GROUP_PARTITIONS, f // dtypes.X4_PACK, dtypes.X4_PACK)
    with np.errstate(invalid="ignore"):
        amax = np.abs(groups).max(axis=(1, 3))
    _, exp = np.frexp(amax)  # amax = m * 2**exp, m in [0.5, 1): floor(log2(amax)) = exp - 1
    byte = (exp - 1) - _EMAX[element] + SCALE_HEADROOM_EXP + E8M0_BIAS
    byte = np.where(amax == 0, 0, np.clip(byte, 0, E8M0_NAN - 1))
    byte = np.where(np.isfinite(amax), byte, E8M0_NAN).astype(np.uint8)
    factor = np.repeat(np.repeat(scale_values(byte), GROUP_PARTITIONS, axis=0), dtypes.X4_PACK, axis=1)
    limit = float(dtypes.finfo(element).max)
    with np.errstate(invalid="ignore", over="ignore"):
        scaled = values.astype(np.float32) / factor
    # With the doubled scale every finite group fits the element range; with OCP's the largest values saturate.
    elements = float_bits.from_float32(np.clip(scaled, -limit, limit), element)
    return elements, byte


def dequantize(packed: np.ndarray, x4: np.dtype, scale_bytes: np.ndarray) -> np.ndarray:
    """fp32 values of MX data [P, C] (x4) with its group scales [P // 8, C]: shape [P, C, 4]."""
    p, c = packed.shape
    vals = float_bits.to_float32(dtypes.unpack_x4(packed, x4)).reshape(p, c, dtypes.X4_PACK)
    factor = np.repeat(scale_values(scale_bytes), GROUP_PARTITIONS, axis=0)[:, :, None]
    with np.errstate(invalid="ignore", over="ignore"):
        return vals * factor


def quantize_mx(dst: NKITensor, src: NKITensor, dst_scale: NKITensor, api: str = "quantize_mx") -> None:
    """nisa.quantize_mx on the Vector engine: fp16/bf16 ``src`` [P, F] -> fp8 x4 ``dst`` [P, F/4] and its
    scales in ``dst_scale`` (quadrant layout, see the module docstring)."""
    require_v4(api)
    for arg, t in (("src", src), ("dst", dst)):
        check_tile(t, api, arg, allow_psum=False)
    if src.dtype not in (dtypes.float16, dtypes.bfloat16):
        fail("err_unsupported_dtype", f"'{api}': src must be float16 or bfloat16, got {dtypes.name(src.dtype)}")
    if dst.dtype not in (dtypes.float8_e4m3fn_x4, dtypes.float8_e5m2_x4):
        extra = "; QuantizeMX does not produce fp4" if dst.dtype == dtypes.float4_e2m1fn_x4 else ""
        fail("err_unsupported_dtype",
             f"'{api}': dst must be float8_e4m3fn_x4 or float8_e5m2_x4, got {dtypes.name(dst.dtype)}{extra}")
    p = check_data_partitions(api, "src", src)
    f = free_size(src.shape)
    if f % dtypes.X4_PACK:
        fail("err_shape_mismatch", f"'{api}': the free size of src {src.shape} must be a multiple of 4")
    if dst.shape[0] != p or free_size(dst.shape) != f // dtypes.X4_PACK:
        fail("err_shape_mismatch", f"'{api}': dst {dst.shape} must have src's {p} partitions and a quarter of its "
                                   f"{f} elements per partition ({f // dtypes.X4_PACK})")
    check_scale_tile(api, "dst_scale", dst_scale, "dst", p, f // dtypes.X4_PACK)
    element = dtypes.x4_element(dst.dtype)
    elements, scale_bytes = quantize(np.asarray(src.read(), np.float32).reshape(p, f), element)
    # QuantizeMX handles four source elements per partition per cycle (4x Vector performance mode).
    runtime.current().costs.compute("vector", api, f // dtypes.X4_PACK)
    dst.write(dtypes.pack_x4(elements, dst.dtype).reshape(dst.shape))
    write_scales(dst_scale, p, scale_bytes)


def _check_pe_tiling(api: str, k: int, tile_position: Any, tile_size: Any) -> None:
    """Row tiling only: tile_size (rows, 128) with rows 32, 64 or 128; tile_position (start_row, 0)."""
    if (tile_position is None or tile_position == ()) != (tile_size is None or tile_size == ()):
        fail("err_invalid_pe_tiling", f"'{api}': tile_position and tile_size must be given together")
    if tile_position is None or tile_position == ():
        return
    pe = runtime.current().target.pe_array
    pos, size = tuple(int(v) for v in tile_position), tuple(int(v) for v in tile_size)
    if len(pos) != 2 or len(size) != 2 or size[1] != pe or pos[1] != 0 or size[0] not in (32, 64, pe) \
            or pos[0] % size[0] or pos[0] + size[0] > pe:
        fail("err_invalid_pe_tiling",
             f"'{api}' tiles the PE array by rows only: tile_size (rows, {pe}) with rows 32, 64 or {pe} and "
             f"tile_position (start_row, 0) with start_row a multiple of rows; got tile_position {pos} and "
             f"tile_size {size}")
    if k > size[0]:
        fail("err_invalid_pe_tiling", f"'{api}': the stationary tile's {k} partitions exceed the row tile size "
                                      f"{size[0]}")


def matmul_mx(dst: NKITensor, stationary: NKITensor, moving: NKITensor, stationary_scale: NKITensor,
              moving_scale: NKITensor, *, tile_position: Any = None, tile_size: Any = None,
              accumulate: Optional[bool] = None, api: str = "nc_matmul_mx") -> None:
    """nisa.nc_matmul_mx: dst[m, n] (+)= sum over partitions k and x4 lanes j of
    deq(stationary)[k, m, j] * deq(moving)[k, n, j], in fp32, into PSUM."""
    require_v4(api)
    target = runtime.current().target
    for arg, t in (("stationary", stationary), ("moving", moving)):
        check_tile(t, api, arg, allow_psum=False)
        if not dtypes.is_x4(t.dtype):
            fail("err_unsupported_dtype", f"'{api}': {arg} must be float8_e5m2_x4, float8_e4m3fn_x4 or "
                                          f"float4_e2m1fn_x4, got {dtypes.name(t.dtype)}")
    if not isinstance(dst, NKITensor) or dst.buffer is not psum:
        where = dst.buffer.name if isinstance(dst, NKITensor) else type(dst).__name__
        fail("err_unsupported_memory", f"Expected operand 'dst' of '{api}' to be in address space 'psum', but got "
                                       f"'{where}' instead: the Tensor engine writes only to PSUM")
    if dst.dtype not in (dtypes.float32, dtypes.bfloat16):
        fail("err_unsupported_dtype", f"'{api}': dst must be float32 or bfloat16, got {dtypes.name(dst.dtype)}")
    k = check_data_partitions(api, "stationary", stationary)
    if moving.shape[0] != k:
        fail("err_num_partition_mismatch",
             f"number of partitions (dimension 0 size of a tile) mismatch in parameters "
             f"(stationary{list(stationary.shape)}, moving{list(moving.shape)}) of '{api}': the contraction runs "
             f"over the partition dimension of both")
    m, n = free_size(stationary.shape), free_size(moving.shape)
    if m % 2 or m > target.gemm_stationary_fmax:
        fail("err_size_of_dimension_exceed_arch_limit",
             f"'{api}': the stationary free size must be even and at most {target.gemm_stationary_fmax}, got {m}")
    n_max = 8 * 2048 // dst.itemsize  # the whole PSUM: 8 banks of 2 KiB per partition
    if n > n_max:
        fail("err_size_of_dimension_exceed_arch_limit",
             f"'{api}': moving free size {n} exceeds {n_max} for a {dtypes.name(dst.dtype)} dst")
    if dst.shape[0] != m or free_size(dst.shape) != n:
        fail("err_shape_mismatch", f"'{api}' produces ({m}, {n}) but dst is {dst.shape}")
    check_scale_tile(api, "stationary_scale", stationary_scale, "stationary", k, m)
    check_scale_tile(api, "moving_scale", moving_scale, "moving", k, n)
    _check_pe_tiling(api, k, tile_position, tile_size)

    a = dequantize(np.asarray(stationary.read()).reshape(k, m), stationary.dtype,
                   read_scales(stationary_scale, k))
    b = dequantize(np.asarray(moving.read()).reshape(k, n), moving.dtype, read_scales(moving_scale, k))
    lanes = k * dtypes.X4_PACK
    result = a.transpose(0, 2, 1).reshape(lanes, m).T @ b.transpose(0, 2, 1).reshape(lanes, n)
    runtime.current().costs.matmul(api, lanes, m, n, False)
    _accumulate(dst, result.reshape(dst.shape), accumulate)


def _accumulate(dst: NKITensor, result: np.ndarray, accumulate: Optional[bool]) -> None:
    """PSUM's rule for matmul results: overwrite or add (fp32, then cast), by default per location on whether
    it was written since the last non-accumulating write."""
    started = dst.storage.started_flags(dst)
    flags = np.asarray(started[...])
    if accumulate is None:
        new = np.where(flags, np.asarray(dst.read(), np.float32) + result, result) if flags.any() else result
    elif accumulate:
        new = np.asarray(dst.read(), np.float32) + result
    else:
        new = result
    dst.write(dtypes.cast(np.asarray(new, dtype=np.float32), dst.dtype))
    started[...] = True


__all__ = ["QUADRANT", "SCALE_OFFSETS", "dequantize", "matmul_mx", "quantize", "quantize_mx", "scale_rows"]

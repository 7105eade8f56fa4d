"""The Tensor engine: matmul into PSUM (with its accumulate-on-later-writes rule and performance hints)
and the transpose through the PE array (the Vector engine's 32x32 transpose shares the code)."""
from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from .. import dtypes, float_bits, runtime
from ..data_address import data_address
from ..errors import fail, NKIUnsupportedError
from ..rules import allocation as _alloc_rules
from ..rules import instructions as _instr
from ..indexing import as_mask
from ..memory import psum, sbuf
from ..tensor import NKITensor
from . import products as _products
from .operands import (charge, check_tile, fp32, free_size, mask_for, new_tile, result_dtype, scratch, store_into,
                       widened)

# Products of at least this many multiply-adds (about 90 us of single-thread sgemm on the development VM; a
# (128, 128) x (128, 256) bf16 matmul) are long enough to lend to the other LNC=2 core (CoreGroup.announce).
OVERLAP_MIN_MACS = 1 << 22


_PERF_MODES = {None: 1, "none": 1, "double_row_gen3": 2}


# nc_matmul's tile_position and tile_size place the matmul on the PE array in steps of 32 rows and columns
# (the NKI ISA reference, nc_matmul): the same on every generation so far.
PE_TILE_GRANULE = 32

# An instruction reads each partition's elements through an access pattern of up to four dimensions (AWS's
# access-pattern deep dive, "Hardware Capability"); nc_matmul's free sizes are the flattened free dimensions
# ("the free dimension size", ISA reference), so the current dialect takes views such as (128, 1, 128).
MATMUL_MAX_FREE_DIMS = 4


def matmul_hints(stationary: NKITensor, moving: NKITensor, *, is_stationary_onezero: bool = False,
                 is_moving_onezero: bool = False, is_transpose: bool = False, tile_position: Sequence[int] = (),
                 tile_size: Sequence[int] = (), api: str = "nc_matmul") -> None:
    """The performance hints of nc_matmul, held to what they promise: an operand said to hold only ones and
    zeros, or (is_transpose) a moving identity matrix, must; PE tiling must be a valid placement."""
    for flag, name, t in ((is_stationary_onezero, "is_stationary_onezero", stationary),
                          (is_moving_onezero, "is_moving_onezero", moving)):
        if flag and isinstance(t, NKITensor):
            v = fp32(np.asarray(t.read()))
            if not np.isin(v, (0.0, 1.0)).all():
                fail("err_onezero_hint_violated",
                     f"'{api}' was told {name}=True but that operand holds values other than 0 and 1")
    if is_transpose and isinstance(moving, NKITensor):
        v = fp32(np.asarray(moving.read())).reshape(moving.shape[0], -1)
        if v.shape[0] != v.shape[1] or not np.array_equal(v, np.eye(v.shape[0], dtype=np.float32)):
            fail("err_is_transpose_needs_identity",
                 f"'{api}' with is_transpose=True transposes stationary through a moving identity matrix, but "
                 f"moving {moving.shape} is not an identity matrix")
    if bool(tile_position) != bool(tile_size):
        fail("err_invalid_pe_tiling", f"'{api}': tile_position and tile_size must be given together")
    if tile_position:
        pe = runtime.current().target.pe_array
        pos, size = tuple(int(v) for v in tile_position), tuple(int(v) for v in tile_size)
        if len(pos) != 2 or len(size) != 2 or any(v % PE_TILE_GRANULE for v in pos + size) \
                or any(v <= 0 for v in size) \
                or any(p + z > pe for p, z in zip(pos, size)):
            fail("err_invalid_pe_tiling", f"'{api}': tile_position {pos} and tile_size {size} must be (row, column) "
                                          f"multiples of {PE_TILE_GRANULE} inside the {pe}x{pe} PE array")
        if size[0] < stationary.shape[0] or size[1] < free_size(stationary.shape):
            fail("err_invalid_pe_tiling", f"'{api}': tile_size {size} is smaller than the stationary tile "
                                          f"{stationary.shape}")


def matmul(stationary: NKITensor, moving: NKITensor, *, dst: Optional[NKITensor] = None,
           accumulate: Optional[bool] = None, api: str = "nc_matmul", allow_psum_operands: bool = False,
           perf_mode: Any = None, mask: Any = None, is_transpose: bool = False,
           max_free_dims: int = 1) -> Optional[NKITensor]:
    """``stationary.T @ moving`` on the Tensor engine, in fp32, into PSUM. ``is_transpose`` (NeuronCore-v3+) is
    the bit-accurate transpose mode, whose PSUM result keeps the data's dtype. ``perf_mode="double_row_gen3"``
    (trn2+, fp8): operands (K, 2, M) and (K, 2, N) contract over both K and the pair of rows.
    ``max_free_dims``: how many free dimensions an operand may have (flattened into M or N); the legacy
    dialect's instructions take 2-D tiles, the current one's nc_matmul up to ``MATMUL_MAX_FREE_DIMS``."""
    check_tile(stationary, api, "stationary", allow_psum=allow_psum_operands)
    check_tile(moving, api, "moving", allow_psum=allow_psum_operands)
    target = runtime.current().target
    rows = _PERF_MODES.get(perf_mode)
    if rows is None:
        raise NKIUnsupportedError(f"nc_matmul perf_mode={perf_mode!r} is not modelled by the simulator (it models "
                                  f"{', '.join(repr(m) for m in _PERF_MODES if m)})")
    if rows == 2:
        if target.name in ("trn1", "inf2"):
            fail("err_unsupported_perf_mode", f"'{api}' perf_mode={perf_mode!r} needs NeuronCore-v3 (trn2) or "
                                              f"later; the target is {target.name}")
        fp8 = (dtypes.float8_e4m3, dtypes.float8_e5m2, dtypes.float8_e4m3fn)
        if stationary.dtype not in fp8 or moving.dtype not in fp8:
            fail("err_unsupported_dtype", f"'{api}' perf_mode={perf_mode!r} takes fp8 operands, got "
                                          f"{dtypes.name(stationary.dtype)} and {dtypes.name(moving.dtype)}")
        if stationary.ndim != 3 or moving.ndim != 3 or stationary.shape[1] != 2 or moving.shape[1] != 2:
            fail("err_shape_mismatch", f"'{api}' perf_mode={perf_mode!r} takes (K, 2, M) and (K, 2, N) operands, "
                                       f"got {stationary.shape} and {moving.shape}")
        k, m = stationary.shape[0], stationary.shape[-1]
        k2, n = moving.shape[0], moving.shape[-1]
    elif stationary.ndim - 1 > max_free_dims or moving.ndim - 1 > max_free_dims:
        wanted = "2-D tiles" if max_free_dims == 1 else f"tiles of at most {max_free_dims} free dimensions"
        fail("err_exceed_max_supported_dimension",
             f"'{api}' takes {wanted}, got stationary {stationary.shape} and moving {moving.shape}")
    else:
        k, m = stationary.shape[0], free_size(stationary.shape)
        k2, n = moving.shape[0], free_size(moving.shape)
    if k != k2:
        fail("err_num_partition_mismatch",
             f"number of partitions (dimension 0 size of a tile) mismatch in parameters "
             f"(stationary{list(stationary.shape)}, moving{list(moving.shape)}) of '{api}': the contraction runs "
             f"over the partition dimension of both")
    if m > target.gemm_stationary_fmax:
        fail("err_size_of_dimension_exceed_arch_limit",
             f"stationary free size {m} of '{api}' exceeds architecture limitation of {target.gemm_stationary_fmax}")
    if n > target.gemm_moving_fmax:
        fail("err_size_of_dimension_exceed_arch_limit",
             f"moving free size {n} of '{api}' exceeds architecture limitation of {target.gemm_moving_fmax}")
    f32 = {dtypes.float32}
    if (stationary.dtype in f32) != (moving.dtype in f32):
        other = moving.dtype if stationary.dtype in f32 else stationary.dtype
        fail("err_unsupported_dtype_combination",
             f"'{api}' cannot mix fp32 with {dtypes.name(other)}: cast both operands to the same precision class")
    a, b = np.asarray(stationary.read()), np.asarray(moving.read())
    launch = runtime.current()
    queue = _queue(launch) if dst is not None and mask is None and m > 1 and n > 1 else None
    if queue is None:
        # The widening and the product touch only this core's arrays and release the GIL: the other core of
        # an LNC=2 launch may run its turn meanwhile (the product is a third of a bf16 matmul's time). A small
        # product is over before the other core has its turn, which then only adds a hand-off of the GIL
        # (AWS's moe_tkg, a few tokens wide, ran 15% slower with every matmul announced).
        if k * rows * m * n >= OVERLAP_MIN_MACS:
            launch.announce_next()
        a = widened(stationary, a, "stationary").reshape(k * rows, m)
        b = widened(moving, b, "moving").reshape(k * rows, n)
        result = _product(a, b)
    else:
        # Widened into arrays the queue keeps until the product is done; the product itself comes at the end
        # (queued, or here when the store cannot be queued).
        a = widened(stationary, a, "stationary", out=queue.slot("stationary", a.shape)).reshape(k * rows, m)
        b = widened(moving, b, "moving", out=queue.slot("moving", b.shape)).reshape(k * rows, n)
        result = None
    launch.costs.matmul(api, k * rows, m, n, stationary.dtype in f32)
    if dst is None:
        out = new_tile((m, n), dtypes.float32, psum)
        mm = as_mask(mask)
        if mm is not None:  # legacy mask=: only the masked-in outputs are computed
            valid = mask_for(mm, (m, n))
            result = np.where(valid, result, np.float32(np.nan))
            out._valid = valid
        out.write(result)
        return out
    if dst.buffer is not psum:
        fail("err_unsupported_memory",
             f"Expected operand 'dst' of '{api}' to be in address space 'psum', but got a tile in "
             f"'{dst.buffer.name}' instead: the Tensor engine writes only to PSUM")
    if dst.shape[0] != m or free_size(dst.shape) != n or dst.ndim - 1 > max(max_free_dims, 1):
        fail("err_shape_mismatch", f"'{api}' produces ({m}, {n}) but dst is {dst.shape}")
    bit_accurate = is_transpose and target.generation >= 3 and dst.dtype == stationary.dtype
    if dst.dtype != dtypes.float32 and not (target.psum_bf16 and dst.dtype == dtypes.bfloat16) and not bit_accurate:
        fail("err_unsupported_dtype", f"'{api}' writes fp32 to PSUM; dst has dtype {dtypes.name(dst.dtype)}")
    _alloc_rules.check_matmul_dst_bank(dst, target, api)
    storage = dst.storage
    view = _view_key(dst)
    started = storage.started_flags(dst) if view is None else None
    all_started = False
    if accumulate is None and view is not None and view in storage.started_views:
        accumulate = all_started = True  # found all started before, and nothing cleared them since
    if accumulate is None:
        # Usually the whole region is fresh (first K tile) or started (the rest): skip the select. all() first:
        # later K tiles outnumber first ones, and each reduction over the strided flags costs a tile's pass.
        if started is None:
            started = storage.started_flags(dst)
        flags = np.asarray(started[...])
        if flags.all():
            accumulate = all_started = True
            if view is not None:
                storage.started_views.add(view)
        elif not flags.any():
            accumulate = False
    rows_out = None
    if result is None:
        rows_out = _queued_target(dst, m, n) if accumulate is not None and not _same_data(a, b) else None
        if rows_out is None:
            result = _product(a, b)
    if rows_out is not None:
        # The records of the read and the write below, in the same order; the values come from the queue,
        # behind every product queued before into this PSUM.
        queue.own_access = True
        try:
            if accumulate:
                dst.read()
            dst.note_write(defined=all_started)
        finally:
            queue.own_access = False
        queue.submit(a, b, rows_out, accumulate)
        if not all_started:
            (started if started is not None else storage.started_flags(dst))[...] = True
        return None
    result = result.reshape(dst.shape)
    if accumulate is None:
        new = np.where(flags, fp32(np.asarray(dst.read())) + result, result)
    elif accumulate:
        # Into the product itself (a fresh array), PSUM's value first as before: NaN payloads follow the
        # first operand. Saves a (128, 512) allocation per later K tile.
        new = np.add(fp32(np.asarray(dst.read())), result, out=result)
    else:
        new = result
    # Every started position is marked written already (a matmul's write marked it; only an allocation
    # clears either flag): a pass over each flag set per later K tile is a seventh of a bf16 matmul's time.
    dst.write(dtypes.cast(np.asarray(new, dtype=np.float32), dst.dtype), defined=all_started)
    if not all_started:
        (started if started is not None else storage.started_flags(dst))[...] = True
    return None


def _product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a.T @ b`` into this core's scratch array: every use copies the product out (into PSUM or a tile)."""
    return np.matmul(a.T, b, out=scratch("product", (a.shape[1], b.shape[1]), np.float32))


def _same_data(a: np.ndarray, b: np.ndarray) -> bool:
    # numpy multiplies an array by its own transpose with syrk, not gemm (other roundings): leave it to numpy.
    return data_address(a) == data_address(b)


def _queue(launch: Any) -> Optional[_products.Products]:
    """This core's queue of products (engines/products.py), made at its first matmul; None when disabled."""
    queue = launch.products
    if queue is None and _products.enabled():
        queue = launch.products = _products.Products()
    return queue


def _queued_target(dst: NKITensor, m: int, n: int) -> Optional[np.ndarray]:
    """dst's fp32 PSUM elements as (m, n) rows the product queue writes, or None (the product is then computed
    here): a dynamic or indexed view, or another dtype (products.target_rows)."""
    if dst._dyn is not None:
        return None
    if dst.index is None:
        arr = dst.arr
    elif dst._fast_slices() is not None:
        arr = dst.arr[dst._slices]
    else:
        return None
    return _products.target_rows(arr, m, n)


def _view_key(t: NKITensor) -> Optional[tuple]:
    """What identifies the PSUM elements of a plain view (address, shape, strides, dtype); None for an indexed
    or dynamic one."""
    if t.index is not None or t._dyn is not None:
        return None
    arr = t.arr
    return data_address(arr), arr.shape, arr.strides, arr.dtype


def transpose(data: NKITensor, *, engine: str = "tensor", dst: Optional[NKITensor] = None,
              api: str = "nc_transpose", dtype: Any = None, mask: Any = None,
              psum_result: bool = True) -> Optional[NKITensor]:
    """Swap the partition and free axes (extra free axes flattened first). A legacy ``mask=`` is over the
    input's positions; the result holds the transposed positions it covers. ``psum_result``: a new
    Tensor-engine result is an fp32 PSUM tile (the instruction), else an SBUF tile of ``dtype``."""
    check_tile(data, api, "data")
    _instr.check_transpose(data, dst, engine, api, runtime.current())
    shape = data.shape
    p, f = shape[0], free_size(shape)
    target = runtime.current().target
    limit = target.vector_transpose_max if engine == "vector" else target.pe_array
    if p > limit or f > limit:
        fail("err_size_of_dimension_exceed_arch_limit",
             f"'{api}' on the {engine} engine takes at most {limit}x{limit}, got ({p}, {f})")
    vals = np.asarray(data.read()).reshape(p, f).T
    if engine == "vector":
        charge("vector", api, (f, p))
        buffer = sbuf
    else:
        runtime.current().costs.matmul(api, p, p, f, data.dtype == dtypes.float32)
        buffer = psum
    out_dtype = result_dtype(dtype, data.dtype)
    if dst is None:
        to_psum = buffer is psum and psum_result
        out = new_tile((f, p), dtypes.float32 if to_psum else out_dtype, psum if to_psum else sbuf)
        mm = as_mask(mask)
        if mm is not None:
            valid = np.broadcast_to(mask_for(mm, shape), shape).reshape(p, f).T
            vals = np.where(valid, fp32(vals), np.float32(np.nan))
            out._valid = valid
        out.write(dtypes.cast(fp32(vals), out.dtype))
        return out
    if dst.dtype == vals.dtype == dtypes.bfloat16 and not float_bits.has_nan(vals):
        # Widening then narrowing gives the same bits but for a NaN's payload (made canonical): the bits move as
        # they are, half the bytes of the fp32 detour and none of its conversions (a sixth of AWS's MoE shard-on-H).
        store_into(dst, vals, api)
        return None
    store_into(dst, fp32(vals), api)
    return None

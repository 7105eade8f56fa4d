"""The DMA engine: loads, stores, dma_copy (indirect, read-modify-write, out-of-bounds skip), atomic
read-modify-write into HBM, and DMA transposes. Charged to the cost model's ``dma`` engine."""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from .. import dtypes, runtime
from ..errors import fail
from ..indexing import as_mask
from ..memory import psum
from ..rules import allocation as _alloc_rules
from ..tensor import NKITensor
from .elementwise import BINARY, op_name
from .operands import check_tile, fp32, larger_than, mask_for, new_tile, quiet, result_dtype, store_into, value_of


def load(src: NKITensor, *, mask: Any = None, dtype: Any = None, dst: Optional[NKITensor] = None,
         api: str = "load") -> Optional[NKITensor]:
    if not isinstance(src, NKITensor):
        raise TypeError(f"'{api}' needs an HBM tensor (a kernel argument or nl.ndarray in HBM), got "
                        f"{type(src).__name__}")
    if not src.buffer.is_hbm:
        fail("err_unsupported_memory",
             f"Expected operand 'src' of '{api}' to be in address space 'hbm', but got a tile in "
             f"'{src.buffer.name}' instead")
    _alloc_rules.check_indirect_axis(runtime.current(), src, api)
    m = as_mask(mask)
    vals = src.read(m)
    out_dtype = result_dtype(dtype, src.dtype)
    runtime.current().costs.dma(api, vals.size * src.itemsize, False, True)
    if dst is None:
        shape = tuple(vals.shape)
        if len(shape) < 2:
            # A 1-D (or scalar) HBM access loads onto partitions: x[0:128] of a vector is a (128, 1) tile.
            shape = (shape[0] if shape else 1, 1)
            vals = np.reshape(vals, shape)
        pmax = runtime.current().target.num_partitions
        if shape[0] > pmax:
            fail("err_num_partition_exceed_arch_limit",
                 f"Size of partition dimension {shape[0]} exceeds architecture limitation of {pmax}.")
        out = new_tile(shape, out_dtype)
        v = dtypes.cast(vals, out_dtype)
        if m is not None:
            mm = mask_for(m, shape)
            if mm is not None and dtypes.is_float(out_dtype):
                v = np.where(mm, v, np.array(np.nan, dtype=np.float32).astype(out_dtype))
        out.write(v)
        return out
    store_into(dst, vals, api, m)
    return None


def store(dst: NKITensor, value: Any, *, mask: Any = None, api: str = "store") -> None:
    if not isinstance(dst, NKITensor) or not dst.buffer.is_hbm:
        where = dst.buffer.name if isinstance(dst, NKITensor) else type(dst).__name__
        fail("err_unsupported_memory",
             f"Expected operand 'dst' of '{api}' to be in address space 'hbm', but got a tile in '{where}' instead")
    _alloc_rules.check_indirect_axis(runtime.current(), dst, api)
    m = as_mask(mask)
    if isinstance(value, NKITensor):
        check_tile(value, api, "value")
    vals = value_of(value, m)
    if larger_than(np.shape(vals), dst.shape):
        fail("err_store_dst_shape_smaller_than_other_shape",
             f"'{api}' of a value of shape {tuple(np.shape(vals))} into a destination of shape {dst.shape}")
    runtime.current().costs.dma(api, int(np.prod(dst.shape)) * dst.itemsize, True, False)
    dst.write(dtypes.cast(np.asarray(vals), dst.dtype), None if m is None else mask_for(m, dst.shape))


def _oob_skip(oob_mode: Any) -> bool:
    """``oob_mode``: nisa.oob_mode.error (the default: an out-of-bounds indirect index is an error) or skip."""
    if oob_mode is None:
        return False
    name = getattr(oob_mode, "name", oob_mode)
    if name not in ("error", "skip"):
        raise ValueError(f"oob_mode must be nisa.oob_mode.error or nisa.oob_mode.skip, got {oob_mode!r}")
    return name == "skip"


def dma_copy(dst: NKITensor, src: NKITensor, *, mask: Any = None, dst_rmw_op: Any = None, oob_mode: Any = None,
             api: str = "dma_copy") -> None:
    """A DMA from ``src`` to ``dst``, either side possibly indexed by tiles (indirect DMA). ``dst_rmw_op``
    combines with what ``dst`` holds (np.add accumulates, repeated indices included); with
    ``oob_mode=skip`` out-of-bounds indirect positions are not transferred."""
    for name, t in (("dst", dst), ("src", src)):
        if not isinstance(t, NKITensor):
            raise TypeError(f"'{api}' operand '{name}' must be an NKI tensor, got {type(t).__name__}")
    skip = _oob_skip(oob_mode)
    m = as_mask(mask)
    vals, read = src.read_valid(m, skip)
    if int(np.prod(np.shape(vals))) != int(np.prod(dst.shape)):
        fail("err_shape_mismatch", f"{api} from {src.shape} to {dst.shape}: element counts differ")
    if np.shape(vals) != dst.shape:
        try:
            np.broadcast_shapes(np.shape(vals), dst.shape)
        except ValueError:
            vals = np.reshape(vals, dst.shape)
    wmask = None if m is None else mask_for(m, dst.shape)
    if read is not None:  # positions whose source was skipped keep what dst holds
        r = np.broadcast_to(read.reshape(read.shape + (1,) * (len(src.shape) - read.ndim)), src.shape)
        r = r.reshape(dst.shape)
        wmask = r if wmask is None else wmask & r
    runtime.current().costs.dma(api, int(np.prod(dst.shape)) * dst.itemsize, dst.buffer.is_hbm,
                                src.buffer.is_hbm)
    if dst_rmw_op is None:
        store_into(dst, np.asarray(vals), api, wmask, skip=skip)
        return
    rmw = BINARY[op_name(dst_rmw_op)]
    if dst.buffer is psum:
        dst.storage.started_flags(dst)[...] = False
    with quiet():
        dst.write(fp32(np.asarray(vals)), wmask, skip=skip, rmw=rmw)


def atomic_rmw(dst: NKITensor, value: Any, op: Any, *, mask: Any = None) -> None:
    if not isinstance(dst, NKITensor) or not dst.buffer.is_hbm:
        fail("err_unsupported_memory", "Expected operand 'dst' of 'atomic_rmw' to be in address space 'hbm'")
    if not isinstance(value, NKITensor):
        value = np.broadcast_to(np.float32(value), dst.shape)
        src = None
    else:
        check_tile(value, "atomic_rmw", "value")
        src = value
    m = as_mask(mask)
    vals = fp32(np.asarray(src.read(m) if src is not None else value))
    if int(np.prod(np.shape(vals))) != int(np.prod(dst.shape)):
        fail("err_shape_mismatch", f"atomic_rmw of a {tuple(np.shape(vals))} value into {dst.shape}")
    runtime.current().costs.dma("atomic_rmw", int(np.prod(dst.shape)) * dst.itemsize, True, True)
    with quiet():
        dst.write(np.reshape(vals, dst.shape), None if m is None else mask_for(m, dst.shape),
                  rmw=BINARY[op_name(op)])


_DMA_TRANSPOSE_AXES = {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}


def dma_transpose(src: NKITensor, *, axes: Any = None, dtype: Any = None, mask: Any = None,
                  dst: Optional[NKITensor] = None) -> Optional[NKITensor]:
    """A transpose done by the DMA engine, from HBM or SBUF into a new SBUF tile: (1, 0) for 2-D,
    (2, 1, 0) for 3-D, (3, 1, 2, 0) for 4-D (the only permutations the engine does)."""
    api = "dma_transpose"
    if not isinstance(src, NKITensor):
        raise TypeError(f"'{api}' needs an NKI tensor, got {type(src).__name__}")
    _alloc_rules.check_no_indirect(runtime.current(), src, api)
    if src.buffer is psum:
        fail("err_unsupported_memory", f"Expected operand 'src' of '{api}' to be in 'hbm' or 'sbuf', but got a "
                                       f"tile in 'psum' instead")
    default = _DMA_TRANSPOSE_AXES.get(src.ndim)
    if default is None:
        fail("err_exceed_max_supported_dimension", f"'{api}' takes 2-D to 4-D tensors, got {src.shape}")
    axes = default if axes is None else tuple(int(a) for a in axes)
    if axes != default:
        fail("err_unsupported_axis", f"'{api}' of a {src.ndim}-D tensor permutes axes {default}, got {axes}")
    m = as_mask(mask)
    vals = np.transpose(np.asarray(src.read(m)), axes)
    runtime.current().costs.dma(api, vals.size * src.itemsize, False, src.buffer.is_hbm)
    out_dtype = result_dtype(dtype, src.dtype)
    if dst is None:
        pmax = runtime.current().target.num_partitions
        if vals.shape[0] > pmax:
            fail("err_num_partition_exceed_arch_limit",
                 f"Size of partition dimension {vals.shape[0]} exceeds architecture limitation of {pmax}. "
                 f"('{api}' puts axis {axes[0]} of {src.shape} on the partitions)")
        out = new_tile(vals.shape, out_dtype)
        out.write(dtypes.cast(vals, out_dtype))
        return out
    store_into(dst, vals, api)
    return None

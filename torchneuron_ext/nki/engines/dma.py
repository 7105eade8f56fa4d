"""The DMA engine: loads, stores, dma_copy (indirect, read-modify-write, out-of-bounds skip), atomic
read-modify-write into HBM, DMA transposes (direct and gathered) and dma_compute (the DMA's fp32 sum of
sources). Charged to the cost model's ``dma`` engine."""
from __future__ import annotations

import math
from typing import Any, Optional, Sequence

import numpy as np

from .. import dtypes, runtime
from .. import schedule as _schedule
from ..errors import NKIUnsupportedError, fail
from .._isa_common import check_dge_mode
from ..indexing import TileIndex, as_mask
from ..memory import psum, sbuf
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
    runtime.current().costs.dma(api, vals.size * src.itemsize, False, True, queue=queue_of(src))
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
    runtime.current().costs.dma(api, int(np.prod(dst.shape)) * dst.itemsize, True, False, queue=queue_of(dst))
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
             api: str = "dma_copy", dge_mode: Any = None, engine: Any = None) -> None:
    """A DMA from ``src`` to ``dst``, either side possibly indexed by tiles (indirect DMA). ``dst_rmw_op``
    combines with what ``dst`` holds (np.add accumulates, repeated indices included); with
    ``oob_mode=skip`` out-of-bounds indirect positions are not transferred. ``dge_mode`` and ``engine``
    (checked by the caller) choose the transfer's DMA queue (queue_of)."""
    for name, t in (("dst", dst), ("src", src)):
        if not isinstance(t, NKITensor):
            raise TypeError(f"'{api}' operand '{name}' must be an NKI tensor, got {type(t).__name__}")
    skip = _oob_skip(oob_mode)
    m = as_mask(mask)
    vals, read = src.read_valid(m, skip)
    count = int(math.prod(dst.shape))  # math.prod: 0.1 us against np.prod's 3 (every DMA asks)
    if int(math.prod(np.shape(vals))) != count:
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
    runtime.current().costs.dma(api, count * dst.itemsize, dst.buffer.is_hbm,
                                src.buffer.is_hbm, queue=queue_of(dst, src, dge_mode=dge_mode, engine=engine))
    if dst_rmw_op is None:
        vals = np.asarray(vals)
        if vals.dtype != dst.dtype:  # the DMA converts through fp32 (int32 beyond 2**24 rounds)
            vals = fp32(vals)
        store_into(dst, vals, api, wmask, skip=skip)
        return
    rmw = BINARY[op_name(dst_rmw_op)]
    if dst.buffer is psum:
        dst.storage.clear_started(dst)
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
    runtime.current().costs.dma("atomic_rmw", int(np.prod(dst.shape)) * dst.itemsize, True, True,
                                queue=queue_of(dst, src) if src is not None else queue_of(dst))
    with quiet():
        dst.write(np.reshape(vals, dst.shape), None if m is None else mask_for(m, dst.shape),
                  rmw=BINARY[op_name(op)])


_DMA_TRANSPOSE_AXES = {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}


def _mode(value: Any) -> Optional[str]:
    """An enum member's name (``nisa.dge_mode.hwdge`` -> "hwdge"), or a raw value's (3 -> "none"); None for
    the default."""
    value = check_dge_mode(value)
    return None if value is None or value.name == "unknown" else value.name


def addressing(t: NKITensor) -> Optional[str]:
    """How a DMA operand's addresses depend on run-time values: "vector" (a tile of indices, one per row:
    ``.ap(vector_offset=)``, ``vector_select``, a legacy tile index), "scalar" (one register or (1, 1) tile
    moves the whole view: ``.ap(scalar_offset=)``, ``nl.ds(register, n)``) or None (static)."""
    if t.is_indirect():
        return t._dyn[1].kind
    if t.index is not None and any(isinstance(a, TileIndex) for a in t.index):
        return "vector"
    return None


def queue_of(*operands: NKITensor, dge_mode: Any = None, engine: Any = None) -> Optional[str]:
    """The DMA queue of a transfer of ``operands`` (nki/schedule.py's dma_queue): the one its trigger
    ``engine`` names, GpSimd's for software DGE (``dge_mode=swdge``, or an operand indexed by a tile of
    indices, for which the compiler picks it); None (alternating queues) where the kernel does not say."""
    gathered = False
    for t in operands:
        if (t._dyn is not None or t.index is not None) and addressing(t) == "vector":
            gathered = True
            break
    trigger = None if engine is None or engine.name == "unknown" else engine.name
    return _schedule.dma_queue(trigger, _mode(dge_mode), gathered)


def _needs_gen3(api: str, what: str) -> None:
    target = runtime.current().target
    if target.generation < 3:
        fail("err_unsupported_dge_mode", f"'{api}' with {what} needs NeuronCore-v3 (trn2) or newer; the target is "
                                         f"{target.name} (NeuronCore-v{target.generation})")


def check_dma_copy_modes(api: str, dst: NKITensor, src: NKITensor, dge_mode: Any) -> None:
    """``dge_mode`` of a DMA copy (AWS's DGE reference): hardware DGE exists from NeuronCore-v3 on; a gather
    or scatter through a tile of indices is generated by software DGE only, so it takes ``unknown`` (the
    compiler then picks swdge) or ``swdge``. The mode changes no data."""
    mode = _mode(dge_mode)
    if mode == "hwdge":
        _needs_gen3(api, "dge_mode=hwdge")
    if mode in ("hwdge", "none"):
        for name, t in (("dst", dst), ("src", src)):
            if addressing(t) == "vector":
                fail("err_unsupported_dge_mode", f"'{api}' with dge_mode={mode}: operand '{name}' is indexed by a "
                                                 f"tile of indices (a gather or scatter), which only software DGE "
                                                 f"generates; use dge_mode=swdge or leave it unknown")


def _check_gather_transpose(api: str, src: NKITensor) -> None:
    """The software DGE's gather transpose (AWS's nki.isa.dma_transpose, "DMA Indirect Transpose
    Constraints"): ``dst = src[indices].T`` from HBM, 2-byte, at most 128 columns, rows a multiple of 16,
    a 4-D source with a unit dimension 1 or 2, indices a 2-D tile of 16 to 128 rows (a multiple of 16)."""
    _needs_gen3(api, "an indirect (gather) source")
    if (not src.buffer.is_hbm or src.itemsize != 2 or src.shape[-1] > 128 or src.shape[0] % 16
            or (src.ndim == 4 and 1 not in (src.shape[1], src.shape[2]))):
        fail("err_unsupported_dma_transpose", f"'{api}' of a gathered src needs it in HBM, 2-byte, with "
                                              f"src.shape[0] a multiple of 16, src.shape[-1] <= 128 and (4-D) "
                                              f"src.shape[1] or src.shape[2] equal to 1; got {src.shape} "
                                              f"{dtypes.name(src.dtype)} in {src.buffer.name}")
    if src.is_indirect():
        idx = src._dyn[1].source
        ishape = tuple(getattr(idx, "shape", ()))
        if (len(ishape) != 2 or not 16 <= ishape[0] <= 128 or ishape[0] % 16
                or (ishape[1] > 1 and ishape[0] != 128)):
            fail("err_unsupported_dma_transpose", f"'{api}' of a gathered src takes a 2-D tile of indices with 16 "
                                                  f"to 128 rows, a multiple of 16 (exactly 128 when it has more "
                                                  f"than one column); got indices of shape {ishape}")


def _check_transpose_modes(api: str, src: NKITensor, dge_mode: Any, skip: bool) -> None:
    """The DMA engine's transpose paths and the modes each takes (AWS's DGE reference, "How .ap() affects
    DGE mode"): a static source takes none, hwdge or the compiler's choice; a source moved by a run-time
    scalar offset takes any mode; a gathered source (a tile of indices) is the software DGE's gather
    transpose and takes unknown or swdge."""
    mode = _mode(dge_mode)
    kind = addressing(src)
    if skip and kind != "vector":
        fail("err_invalid_oob_mode", f"'{api}' oob_mode=skip applies to an indirectly indexed src (a gather); "
                                     f"src {src.shape} is a static access")
    if kind == "vector":
        if mode in ("hwdge", "none"):
            fail("err_unsupported_dge_mode", f"'{api}' of a src indexed by a tile of indices is the software DGE's "
                                             f"gather transpose: dge_mode={mode} cannot generate it; use "
                                             f"dge_mode=swdge or leave it unknown")
        _check_gather_transpose(api, src)
        return
    if mode == "swdge" and kind is None:
        fail("err_unsupported_dge_mode", f"'{api}' with dge_mode=swdge needs a src addressed at run time (a tile "
                                         f"of indices or a scalar offset); a static src takes dge_mode=hwdge, none "
                                         f"or unknown")
    if mode == "hwdge":
        _needs_gen3(api, "dge_mode=hwdge")
        p, last = src.shape[0], src.shape[-1]
        if src.ndim == 2:
            ok_p = p == 16
            rule = "src.shape[0] == 16"
        else:
            ok_p = p in (1, 2, 4, 8, 16) and (p * src.shape[-2]) % 16 == 0
            rule = "src.shape[0] in {1, 2, 4, 8, 16} and src.shape[0] * src.shape[-2] a multiple of 16"
        if not ok_p or last > 128 or src.itemsize != 2:
            fail("err_unsupported_dma_transpose", f"'{api}' with dge_mode=hwdge needs {rule}, src.shape[-1] <= 128 "
                                                  f"and a 2-byte dtype; got src {src.shape} "
                                                  f"{dtypes.name(src.dtype)}")


def dma_transpose(src: NKITensor, *, axes: Any = None, dtype: Any = None, mask: Any = None,
                  dst: Optional[NKITensor] = None, dge_mode: Any = None, oob_mode: Any = None) -> Optional[NKITensor]:
    """A transpose done by the DMA engine, from HBM or SBUF into SBUF: (1, 0) for 2-D, (2, 1, 0) for 3-D,
    (3, 1, 2, 0) for 4-D (the only permutations the engine does). A tile-indexed source is a gather, whose
    out-of-bounds rows ``oob_mode=skip`` leaves untransferred."""
    api = "dma_transpose"
    if not isinstance(src, NKITensor):
        raise TypeError(f"'{api}' needs an NKI tensor, got {type(src).__name__}")
    # A gathered source is the software DGE's transpose (Neuron 2.28+); without it, the error page's rule.
    if _mode(dge_mode) != "swdge":
        _alloc_rules.check_no_indirect(runtime.current(), src, api)
    if src.buffer is psum:
        fail("err_unsupported_memory", f"Expected operand 'src' of '{api}' to be in 'hbm' or 'sbuf', but got a "
                                       f"tile in 'psum' instead")
    if dst is not None and dst.buffer is not sbuf:
        fail("err_unsupported_memory", f"Expected operand 'dst' of '{api}' to be in 'sbuf', but got a tile in "
                                       f"'{dst.buffer.name}' instead")
    default = _DMA_TRANSPOSE_AXES.get(src.ndim)
    if default is None:
        fail("err_exceed_max_supported_dimension", f"'{api}' takes 2-D to 4-D tensors, got {src.shape}")
    axes = default if axes is None else tuple(int(a) for a in axes)
    if axes != default:
        fail("err_unsupported_axis", f"'{api}' of a {src.ndim}-D tensor permutes axes {default}, got {axes}")
    skip = _oob_skip(oob_mode)
    _check_transpose_modes(api, src, dge_mode, skip)
    m = as_mask(mask)
    vals, read = src.read_valid(m, skip)
    vals = np.transpose(np.asarray(vals), axes)
    runtime.current().costs.dma(api, vals.size * src.itemsize, False, src.buffer.is_hbm,
                                queue=queue_of(src, dge_mode=dge_mode))
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
    if int(np.prod(vals.shape)) != int(np.prod(dst.shape)):
        fail("err_shape_mismatch", f"'{api}' of src {src.shape} gives {vals.shape}; dst {dst.shape} holds "
                                   f"{int(np.prod(dst.shape))} elements")
    wmask = None
    if read is not None:  # rows the gather skipped keep what dst holds
        r = np.broadcast_to(read.reshape(read.shape + (1,) * (src.ndim - read.ndim)), src.shape)
        wmask = np.transpose(r, axes).reshape(dst.shape)
    store_into(dst, vals.reshape(dst.shape) if vals.shape != dst.shape else vals, api, wmask)
    return None


MAX_DMA_COMPUTE_SOURCES = 16


def dma_compute(dst: NKITensor, srcs: Sequence[NKITensor], reduce_op: Any, *, scales: Any = None,
                oob_mode: Any = None, unique_indices: bool = True, api: str = "dma_compute") -> None:
    """``dst = srcs[0] * scales[0] + srcs[1] * scales[1] + ...`` computed by the DMA engine in fp32. A
    tile-indexed operand makes it a read-modify-write gather or scatter (``dst[idx] += src``), whose
    out-of-bounds positions ``oob_mode=skip`` leaves untouched."""
    if not isinstance(dst, NKITensor):
        raise TypeError(f"'{api}' operand 'dst' must be an NKI tensor, got {type(dst).__name__}")
    if isinstance(srcs, NKITensor) or not isinstance(srcs, (list, tuple)):
        raise TypeError(f"'{api}' takes srcs as a list of NKI tensors, got {type(srcs).__name__}")
    srcs = list(srcs)
    if not 1 <= len(srcs) <= MAX_DMA_COMPUTE_SOURCES:
        fail("err_dma_compute_num_srcs", f"'{api}' takes 1 to {MAX_DMA_COMPUTE_SOURCES} source tensors, got "
                                         f"{len(srcs)}")
    op = op_name(reduce_op)
    if op != "add":
        fail("err_unsupported_dma_compute_op", f"'{api}' supports reduce_op=nl.add only, got {op}")
    if scales is not None:
        scales = list(scales)
        if len(scales) != len(srcs):
            fail("err_dma_compute_num_scales", f"'{api}' takes one scale per source: {len(srcs)} srcs, "
                                               f"{len(scales)} scales")
        if any(isinstance(v, NKITensor) or float(v) != 1.0 for v in scales):
            fail("err_unsupported_dma_compute_scale", f"'{api}' supports scales of 1.0 only, got {scales}")
    skip = _oob_skip(oob_mode)
    for name, t in [("dst", dst)] + [(f"srcs[{i}]", s) for i, s in enumerate(srcs)]:
        if not isinstance(t, NKITensor):
            raise TypeError(f"'{api}' operand '{name}' must be an NKI tensor, got {type(t).__name__}")
        if t.buffer is psum:
            fail("err_unsupported_memory", f"Expected operand '{name}' of '{api}' to be in 'hbm' or 'sbuf', but "
                                           f"got a tile in 'psum' instead")
    indirect = dst.index is not None or any(s.index is not None for s in srcs)
    if indirect and not unique_indices:
        raise NKIUnsupportedError(f"'{api}' with unique_indices=False (repeated scatter indices) is not supported "
                                  f"by the DMA engine's read-modify-write")
    n = int(np.prod(dst.shape))
    total = np.zeros(dst.shape, np.float32)
    wmask = None
    nbytes = 0
    for i, s in enumerate(srcs):
        vals, read = s.read_valid(None, skip)
        if int(np.prod(np.shape(vals))) != n:
            fail("err_shape_mismatch", f"'{api}' srcs[{i}] {s.shape} and dst {dst.shape}: element counts differ")
        with quiet():
            total += fp32(np.asarray(vals)).reshape(dst.shape)
        nbytes += n * s.itemsize
        if read is not None:
            r = np.broadcast_to(read.reshape(read.shape + (1,) * (s.ndim - read.ndim)), s.shape).reshape(dst.shape)
            wmask = r if wmask is None else wmask & r
    runtime.current().costs.dma(api, nbytes, dst.buffer.is_hbm, any(s.buffer.is_hbm for s in srcs),
                                queue=queue_of(dst, *srcs))
    store_into(dst, total, api, wmask, skip=skip)


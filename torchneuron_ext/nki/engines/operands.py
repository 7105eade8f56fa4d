"""What every engine instruction shares: operand checks, reading operands, and writing results.

An instruction checks its tiles (check_tile), reads them as fp32 or integer arrays (value_of, fp32),
charges its engine (charge) and writes the result into ``dst`` or a new SBUF tile (emit, store_into),
honouring a legacy ``mask=`` on the way.
"""
from __future__ import annotations

import math
import threading
from typing import Any, Optional, Sequence

import numpy as np

from .. import dtypes, float_bits, runtime
from ..data_address import data_address
from ..errors import NKIError, fail
from ..memory import Buffer, psum, sbuf
from ..tensor import _mask_to, _schedule_access, NKITensor


def quiet() -> Any:  # masked-out and uninitialised (NaN) lanes go through exp, rsqrt...
    return np.errstate(all="ignore")


def check_tile(x: Any, api: str, arg: str, *, allow_psum: bool = True, allow_hbm: bool = False) -> NKITensor:
    """An on-chip tile operand: partition dimension first, rank >= 2, at most the target's partitions."""
    if not isinstance(x, NKITensor):
        raise TypeError(f"operand '{arg}' of '{api}' must be an NKI tile, got {type(x).__name__}")
    buf = x.buffer
    if buf.is_hbm and not allow_hbm:
        fail("err_unsupported_memory",
             f"Expected operand '{arg}' of '{api}' to be in address space 'sbuf'{' or psum' if allow_psum else ''}, "
             f"but got a tile in 'hbm' instead; load it first (nl.load / nisa.dma_copy)")
    if buf is psum and not allow_psum:
        fail("err_unsupported_memory",
             f"Expected operand '{arg}' of '{api}' to be in address space 'sbuf', but got a tile in 'psum' instead; "
             f"copy it to SBUF first (nl.copy / nisa.tensor_copy)")
    if buf.on_chip:
        if x.par_axis != 0:
            fail("err_failed_to_infer_tile_from_local_tensor",
                 f"operand '{arg}' of '{api}' is a tensor with block dimensions {x.shape}; index its block "
                 f"dimensions (t[b]) to get a tile")
        if x.ndim < 2:
            fail("err_insufficient_rank",
                 f"Insufficient rank: operand '{arg}' of '{api}' has shape {x.shape}; tiles need a partition "
                 f"and at least one free dimension, e.g. ({x.shape[0] if x.shape else 1}, 1)")
        pmax = runtime.current().target.num_partitions
        if x.shape[0] > pmax:
            fail("err_num_partition_exceed_arch_limit",
                 f"Size of partition dimension {x.shape[0]} exceeds architecture limitation of {pmax}. "
                 f"(operand '{arg}' of '{api}')")
    return x


def value_of(x: Any, mask: Optional[np.ndarray] = None) -> Any:
    if isinstance(x, NKITensor):
        return x.read(None if mask is None else mask_for(mask, x.shape))
    return x


def as_shape(x: NKITensor, shape: tuple) -> Any:
    """An operand an instruction reads with another shape of the same elements (a (P, a, b) tile read as
    (P, a * b)): a view when its access pattern allows one, else its values (an instruction's operand access
    pattern may be any stride, a view's ``reshape`` may not)."""
    if x.index is not None and x._dyn is None:
        return x
    try:
        return x.reshape(shape)
    except NKIError as e:
        if e.code != "err_invalid_reshape":
            raise
        return np.asarray(x.read()).reshape(shape)


def mask_for(mask: np.ndarray, shape: tuple) -> Optional[np.ndarray]:
    try:
        return _mask_to(mask, shape)
    except ValueError:
        return None


def dtype_of(x: Any) -> np.dtype:
    if isinstance(x, NKITensor):
        return x.dtype
    if isinstance(x, np.ndarray):
        return x.dtype
    if isinstance(x, np.generic):
        return x.dtype
    return dtypes.weak_scalar_dtype(x)


def result_dtype(dtype: Any, default: Any) -> np.dtype:
    """An instruction's ``dtype=`` if given, else its default: a dtype, or a function computing one (for
    defaults that promote the operands, which need not be worked out when the caller chose)."""
    if dtype is not None:
        return dtypes.as_dtype(dtype)
    return default() if callable(default) else default


def shape_of(x: Any) -> tuple:
    return x.shape if isinstance(x, (NKITensor, np.ndarray)) else ()


def fp32(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        if v.dtype.names is not None:  # packed MX data: numpy would read its raw words as numbers
            dtypes.refuse_packed(v.dtype, "an engine operand of dtype")
        return float_bits.to_float32(v) if v.dtype != np.float32 else v
    if isinstance(v, np.generic):
        return np.float32(v)
    return v


# How many bytes of widened SBUF operands a core keeps (a (128, 512) bf16 view is 256 KiB widened); when
# full, the cache starts over. AWS's MoE kernels come back to each of the 24 moving tiles of an H=3072 block
# once per stationary column tile. Only a view widened a second time is kept: holding on to views used once
# (most stationary tiles) kept fresh arrays out of the allocator's warm memory: launches ran up to 10% slower.
_WIDENED_BYTES = 64 << 20
_WIDENED_SEEN = 4096


class _Widened:
    """One core's widened SBUF operands (widened): kept ones by view, views widened once, for one SBUF state."""
    __slots__ = ("epoch", "kept", "seen", "bytes")

    def __init__(self) -> None:
        self.epoch, self.kept, self.seen, self.bytes = -1, {}, set(), 0

    def get(self, values: np.ndarray, epoch: int, out: np.ndarray) -> np.ndarray:
        if self.epoch != epoch:
            self.kept.clear()
            self.seen.clear()
            self.epoch, self.bytes = epoch, 0
        key = (data_address(values), values.shape, values.strides, values.dtype)
        wide = self.kept.get(key)
        if wide is not None:
            return wide
        if key not in self.seen:
            if len(self.seen) >= _WIDENED_SEEN:
                self.seen.clear()
            self.seen.add(key)
            return _widen(values, out)
        wide = _widen(values)
        if self.bytes + wide.nbytes > _WIDENED_BYTES:
            self.kept.clear()
            self.bytes = 0
        self.kept[key] = wide
        self.bytes += wide.nbytes
        return wide


def _widen(values: np.ndarray, out: Optional[np.ndarray] = None) -> np.ndarray:
    """``fp32(values)`` for a matmul's operand, into ``out`` if given. float16 goes through the CPU's F16C when
    the torch integration registered it (float_bits.register_float16_conversions), 2-3x faster than the lookup
    of ``float_bits.to_float32`` on the strided views of AWS's moe_tkg; unlike numpy it quiets a signalling
    NaN, which the product's arithmetic does anyway, so only operands of nc_matmul may be widened here."""
    dtype = values.dtype
    if dtype == dtypes.bfloat16:
        return float_bits.bf16_to_float32(values, out)
    if dtype == np.float16 and float_bits.f16_widen is not None:
        wide = float_bits.f16_widen(values, out)
        if wide is not None:
            return wide
    return fp32(values)


def widened(t: NKITensor, values: np.ndarray, role: str, out: Optional[np.ndarray] = None) -> np.ndarray:
    """``fp32(values)`` for ``values``, what ``t.read()`` returned, as nc_matmul's operand ``role``. A plain view
    of an SBUF tile widened a second time while the core's SBUF is unchanged (Launch.sbuf_epoch) is kept until
    that changes: AWS's MoE kernels multiply one moving tile by each stationary tile in turn, and widening it
    again was a fifth of their launches. Anything else goes into ``out`` (a float32 array of values' shape)
    or, without it, this thread's scratch array for ``role`` (widening into fresh memory took several times
    as long as into memory the core just used), unless its dtype makes a fresh array anyway. So the result is
    ``out``, the scratch array, or an array nobody writes. Do not write into it."""
    if values.dtype == np.float32:
        if out is None:
            return values
        np.copyto(out, values)
        return out
    if out is None:
        out = scratch(role, values.shape, np.float32)
    if t.index is not None or t.storage.buffer is not sbuf:
        return _widen(values, out)
    launch = runtime.current()
    if launch.widened is None:
        launch.widened = _Widened()
    return launch.widened.get(values, launch.sbuf_epoch, out)


_SCRATCH = threading.local()
_SCRATCH_BYTES = 64 << 20


def scratch(name: str, shape: tuple, dtype: Any) -> np.ndarray:
    """A working array of this thread for an instruction's temporaries that never leave the instruction (not a
    result a tile adopts), reused from call to call: fresh memory costs a page fault per 4 KiB page, which on
    the shared VM is about 15 us of system time (a (128, 4096) fp32 temporary: 4-8 ms, several times the
    arithmetic of max8 or nc_match_replace8 over it). Its contents are whatever the last use left."""
    cache = getattr(_SCRATCH, "arrays", None)
    if cache is None:
        cache = _SCRATCH.arrays = {}
    key = (name, tuple(shape), np.dtype(dtype))
    arr = cache.get(key)
    if arr is None:
        if sum(a.nbytes for a in cache.values()) > _SCRATCH_BYTES:
            cache.clear()
        arr = cache[key] = np.empty(shape, dtype=dtype)
    return arr


def new_tile(shape: tuple, dtype: np.dtype, buffer: Buffer = sbuf, adopt: Optional[np.ndarray] = None
             ) -> NKITensor:
    storage = runtime.current().allocate(shape, dtype, buffer, fill=None, adopt=adopt)
    if adopt is not None:
        # The instruction's result, taken over rather than written: its schedule still has to see the write,
        # or the tile's consumers would not wait for it.
        _schedule_access(storage, storage.array, True)
    return NKITensor(storage, storage.array)


def free_size(shape: tuple) -> int:
    return int(math.prod(shape[1:])) if len(shape) > 1 else 1


def require_generation(api: str, generation: int, where: str = "") -> None:
    """Instructions AWS documents for NeuronCore-v``generation`` and later (``where``: e.g. " on the GpSimd
    engine", when only that form is newer)."""
    target = runtime.current().target
    if target.generation < generation:
        fail("err_unsupported_instruction", f"'{api}'{where} needs NeuronCore-v{generation} or later; the target is "
                                            f"{target.name} (NeuronCore-v{target.generation})")


def charge(engine: str, name: str, shape: tuple) -> None:
    runtime.current().costs.compute(engine, name, free_size(shape))


def emit(result: np.ndarray, dtype: np.dtype, dst: Optional[NKITensor], mask: Optional[np.ndarray],
          api: str, fresh: bool = False) -> Optional[NKITensor]:
    """Write an engine result into ``dst`` or a new SBUF tile, casting to the output dtype.

    ``fresh``: the caller computed ``result`` into a new array that nothing else references, so the new
    tile can take it over instead of copying it (a copy per instruction is a third of a small op's time).
    """
    if dst is None:
        vals = dtypes.cast(result, dtype)
        if mask is not None:
            m = mask_for(mask, result.shape)
            if m is not None:
                fill = np.nan if dtypes.is_float(dtype) else 0
                vals = np.where(m, vals, np.array(fill).astype(dtype))
                fresh = True
        if fresh and vals.shape == result.shape and vals.dtype == dtype and vals.flags.c_contiguous \
                and vals.flags.writeable and vals.base is None:
            out = new_tile(result.shape, dtype, adopt=vals)
        else:
            out = new_tile(result.shape, dtype)
            out.write(vals)
        if mask is not None:
            out._valid = mask_for(mask, result.shape)
        return out
    check_tile(dst, api, "dst")
    store_into(dst, result, api, mask)
    return None


def store_into(dst: NKITensor, values: np.ndarray, api: str, mask: Optional[np.ndarray] = None,
               skip: bool = False) -> None:
    if larger_than(values.shape, dst.shape):
        fail("err_store_dst_shape_smaller_than_other_shape",
             f"'{api}' writes a result of shape {tuple(values.shape)} into a destination of shape {dst.shape}")
    vals = dtypes.cast(np.asarray(values), dst.dtype)
    if vals.shape != dst.shape:
        try:
            np.broadcast_shapes(vals.shape, dst.shape)
        except ValueError:
            if vals.size != int(math.prod(dst.shape)):
                fail("err_shape_mismatch", f"'{api}' produces a result of shape {tuple(vals.shape)} that does "
                                           f"not fit a destination of shape {dst.shape}")
            vals = vals.reshape(dst.shape)
    if dst._dyn is not None:
        dst._refresh()  # a dynamic view: its flags are those of the elements its offsets pick now
    if dst.buffer is psum:
        dst.storage.clear_started(dst)
    dst.write(vals, None if mask is None else mask_for(mask, dst.shape), skip=skip)


def fit_mask(valid: np.ndarray, shape: tuple) -> np.ndarray:
    """A result's computed positions as seen by the destination it is written to (same element count)."""
    try:
        return np.broadcast_to(valid, shape)
    except ValueError:
        return valid.reshape(shape)


def broadcast_shape(shapes: Sequence[tuple]) -> tuple:
    """np.broadcast_shapes, with a fast path for the usual case of equal shapes and scalars."""
    first = None
    for s in shapes:
        if not s:
            continue
        if first is None:
            first = s
        elif s != first:
            return np.broadcast_shapes(*shapes)
    return () if first is None else tuple(first)


def larger_than(src: tuple, dst: tuple) -> bool:
    """Whether a value of shape ``src`` cannot fit ``dst``: more elements, or a longer axis (right-aligned)."""
    if tuple(src) == tuple(dst):
        return False
    if int(math.prod(src)) > int(math.prod(dst)):
        return True
    return any(s > d for s, d in zip(src[::-1], dst[::-1])) and len(src) >= len(dst) and all(
        s == d or s == 1 or d == 1 for s, d in zip(src[::-1], dst[::-1]))


def per_partition(x: Any, data: NKITensor, api: str, arg: str) -> Any:
    """A scalar, or a (P, 1) tile/vector broadcast along the free axes."""
    if x is None:
        return None
    if isinstance(x, NKITensor):
        check_tile(x, api, arg)
        v = fp32(np.asarray(x.read()))
        if x.shape[0] != data.shape[0] or free_size(x.shape) != 1:
            fail("err_num_partition_mismatch",
                 f"operand '{arg}' of '{api}' must be a scalar or a ({data.shape[0]}, 1) tile, got {x.shape}")
        return v.reshape((data.shape[0],) + (1,) * (data.ndim - 1))
    return np.float32(x) if not isinstance(x, np.ndarray) else fp32(x)


def same_partitions(api: str, a: "tuple[str, NKITensor]", b: "tuple[str, NKITensor]") -> None:
    """nisa operands must have equal partitions and equal elements per partition."""
    (na, ta), (nb, tb) = a, b
    if ta.shape[0] != tb.shape[0] or free_size(ta.shape) != free_size(tb.shape):
        fail("err_num_partition_mismatch",
             f"number of partitions (dimension 0 size of a tile) mismatch in parameters ({na}{list(ta.shape)}, "
             f"{nb}{list(tb.shape)}) of '{api}'")


def operand_pair(api: str, a: "tuple[str, NKITensor]", b: "tuple[str, NKITensor]") -> None:
    """Two tiles a Vector-engine instruction reads side by side: tiles of the same partitions, at most
    one of them in PSUM (the toolchain rejects two PSUM operands)."""
    (na, ta), (nb, tb) = a, b
    check_tile(ta, api, na)
    check_tile(tb, api, nb)
    same_partitions(api, a, b)
    if ta.buffer is psum and tb.buffer is psum:
        fail("err_unsupported_memory", f"'{api}': {na} and {nb} cannot both be in PSUM; copy one to SBUF first")


def check_reduce_res(reduce_res: NKITensor, partitions: int, api: str, float_only: bool = False) -> None:
    """A fused reduction's ``reduce_res``: one value per partition, (P, 1), a float tile where the engine
    writes float."""
    check_tile(reduce_res, api, "reduce_res")
    if reduce_res.shape[0] != partitions or free_size(reduce_res.shape) != 1:
        fail("err_num_partition_mismatch", f"'{api}': reduce_res must be ({partitions}, 1), got {reduce_res.shape}")
    if float_only and not dtypes.is_float(reduce_res.dtype):
        fail("err_unsupported_dtype", f"'{api}': reduce_res must be a float tile, got {dtypes.name(reduce_res.dtype)}")

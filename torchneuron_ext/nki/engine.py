"""The compute engines: every nl.* and nisa.* operation of both dialects ends here.

Engines read their operands, compute in fp32 (integer ops in int64, bit-exact), and cast to the
output dtype. Each function validates what the hardware requires of its operands (memory kind,
partition count, shape limits) and charges the instruction to an engine in the launch's cost model.
Functions take an optional ``dst``: the new dialect writes into it, the legacy one gets a new tile.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Optional, Sequence

import numpy as np

from . import dtypes, runtime
from .errors import fail
from .indexing import as_mask
from .memory import Buffer, psum, sbuf
from .tensor import NKITensor, _mask_to

def _quiet() -> Any:  # masked-out and uninitialised (NaN) lanes go through exp, rsqrt...
    return np.errstate(all="ignore")

# ---------------------------------------------------------------------------------------------------------
# operands
# ---------------------------------------------------------------------------------------------------------


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
        return x.read(None if mask is None else _mask_for(mask, x.shape))
    return x


def _mask_for(mask: np.ndarray, shape: tuple) -> Optional[np.ndarray]:
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


def _fp32(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return v.astype(np.float32, copy=False) if v.dtype != np.float32 else v
    if isinstance(v, np.generic):
        return np.float32(v)
    return v


def new_tile(shape: tuple, dtype: np.dtype, buffer: Buffer = sbuf, adopt: Optional[np.ndarray] = None
             ) -> NKITensor:
    storage = runtime.current().allocate(shape, dtype, buffer, fill=None, adopt=adopt)
    return NKITensor(storage, storage.array)


def _free(shape: tuple) -> int:
    return int(math.prod(shape[1:])) if len(shape) > 1 else 1


def _charge(engine: str, name: str, shape: tuple) -> None:
    runtime.current().costs.compute(engine, name, _free(shape))


def _emit(result: np.ndarray, dtype: np.dtype, dst: Optional[NKITensor], mask: Optional[np.ndarray],
          api: str, fresh: bool = False) -> Optional[NKITensor]:
    """Write an engine result into ``dst`` or a new SBUF tile, casting to the output dtype.

    ``fresh``: the caller computed ``result`` into a new array that nothing else references, so the new
    tile can take it over instead of copying it (a copy per instruction is a third of a small op's time).
    """
    if dst is None:
        vals = dtypes.cast(result, dtype)
        if mask is not None:
            m = _mask_for(mask, result.shape)
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
            out._valid = _mask_for(mask, result.shape)
        return out
    check_tile(dst, api, "dst")
    store_into(dst, result, api, mask)
    return None


def store_into(dst: NKITensor, values: np.ndarray, api: str, mask: Optional[np.ndarray] = None,
               skip: bool = False) -> None:
    if _larger_than(values.shape, dst.shape):
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
    if dst.buffer is psum:
        dst.storage.started_flags(dst)[...] = False
    dst.write(vals, None if mask is None else _mask_for(mask, dst.shape), skip=skip)


def _fit_mask(valid: np.ndarray, shape: tuple) -> np.ndarray:
    """A result's computed positions as seen by the destination it is written to (same element count)."""
    try:
        return np.broadcast_to(valid, shape)
    except ValueError:
        return valid.reshape(shape)


def _broadcast_shape(shapes: Sequence[tuple]) -> tuple:
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


def _larger_than(src: tuple, dst: tuple) -> bool:
    """Whether a value of shape ``src`` cannot fit ``dst``: more elements, or a longer axis (right-aligned)."""
    if tuple(src) == tuple(dst):
        return False
    if int(math.prod(src)) > int(math.prod(dst)):
        return True
    return any(s > d for s, d in zip(src[::-1], dst[::-1])) and len(src) >= len(dst) and all(
        s == d or s == 1 or d == 1 for s, d in zip(src[::-1], dst[::-1]))


# ---------------------------------------------------------------------------------------------------------
# elementwise
# ---------------------------------------------------------------------------------------------------------

_erf_f64 = np.frompyfunc(math.erf, 1, 1)


def _erf(x: np.ndarray) -> np.ndarray:
    # math.erf in float64, rounded once to float32: within one ulp of torch.special.erf (which the core may
    # not import) and as fast as it on a tile.
    return np.asarray(_erf_f64(np.asarray(x, dtype=np.float64)), dtype=np.float64).astype(np.float32)


def _sigmoid(x: Any) -> Any:
    return 1.0 / (1.0 + np.exp(-x))


def _gelu(x: Any) -> Any:
    return 0.5 * x * (1.0 + _erf(x / np.float32(math.sqrt(2.0))))


def _gelu_tanh(x: Any) -> Any:
    return 0.5 * x * (1.0 + np.tanh(np.float32(math.sqrt(2.0 / math.pi)) * (x + 0.044715 * x ** 3)))


def _gelu_dx(x: Any) -> Any:
    return 0.5 * (1.0 + _erf(x / np.float32(math.sqrt(2.0)))) + x * np.exp(-0.5 * x * x) / np.float32(
        math.sqrt(2.0 * math.pi))


def _softplus(x: Any) -> Any:
    return np.logaddexp(np.float32(0), x)


UNARY: dict[str, tuple[str, Callable]] = {
    # name: (engine, fp32 function)
    "exp": ("scalar", np.exp), "log": ("scalar", np.log), "sqrt": ("scalar", np.sqrt),
    "rsqrt": ("scalar", lambda x: 1.0 / np.sqrt(x)), "reciprocal": ("vector", lambda x: 1.0 / x),
    "tanh": ("scalar", np.tanh), "sigmoid": ("scalar", _sigmoid), "relu": ("scalar", lambda x: np.maximum(x, 0)),
    "gelu": ("scalar", _gelu), "gelu_apprx_tanh": ("scalar", _gelu_tanh),
    "gelu_apprx_sigmoid": ("scalar", lambda x: x * _sigmoid(1.702 * x)), "gelu_dx": ("scalar", _gelu_dx),
    "silu": ("scalar", lambda x: x * _sigmoid(x)),
    "silu_dx": ("scalar", lambda x: _sigmoid(x) * (1 + x * (1 - _sigmoid(x)))),
    "softplus": ("scalar", _softplus), "mish": ("scalar", lambda x: x * np.tanh(_softplus(x))),
    "erf": ("scalar", _erf), "erf_dx": ("scalar", lambda x: 2.0 / np.sqrt(np.pi) * np.exp(-x * x)),
    "sin": ("scalar", np.sin), "cos": ("scalar", np.cos), "tan": ("scalar", np.tan),
    "arctan": ("scalar", np.arctan), "sign": ("vector", np.sign), "abs": ("vector", np.abs),
    "square": ("scalar", np.square), "negative": ("vector", np.negative), "ceil": ("vector", np.ceil),
    "floor": ("vector", np.floor), "trunc": ("vector", np.trunc), "copy": ("vector", lambda x: x),
    "identity": ("scalar", lambda x: x),
}
INT_UNARY = {"logical_not": np.logical_not, "invert": np.invert}

BINARY: dict[str, Callable] = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
    "maximum": np.maximum, "minimum": np.minimum, "power": np.power, "fmod": np.fmod, "mod": np.mod,
    "equal": np.equal, "not_equal": np.not_equal, "less": np.less, "less_equal": np.less_equal,
    "greater": np.greater, "greater_equal": np.greater_equal,
    "logical_and": np.logical_and, "logical_or": np.logical_or, "logical_xor": np.logical_xor,
}
INT_BINARY: dict[str, Callable] = {
    "bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor,
    "left_shift": np.left_shift, "right_shift": np.right_shift,
}
_PREDICATES = {"equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
               "logical_and", "logical_or", "logical_xor", "logical_not"}

_UFUNC_NAMES = {
    np.add: "add", np.subtract: "subtract", np.multiply: "multiply", np.divide: "divide",
    np.maximum: "maximum", np.minimum: "minimum", np.power: "power", np.fmod: "fmod", np.mod: "mod",
    np.equal: "equal", np.not_equal: "not_equal", np.less: "less", np.less_equal: "less_equal",
    np.greater: "greater", np.greater_equal: "greater_equal", np.logical_and: "logical_and",
    np.logical_or: "logical_or", np.logical_xor: "logical_xor", np.bitwise_and: "bitwise_and",
    np.bitwise_or: "bitwise_or", np.bitwise_xor: "bitwise_xor", np.left_shift: "left_shift",
    np.right_shift: "right_shift", np.amax: "maximum", np.amin: "minimum", np.max: "maximum",
    np.min: "minimum", np.sum: "add", np.prod: "multiply", np.exp: "exp", np.tanh: "tanh",
    np.sqrt: "sqrt", np.abs: "abs", np.negative: "negative", np.square: "square", np.log: "log",
    np.reciprocal: "reciprocal", np.sin: "sin", np.cos: "cos", np.sign: "sign",
}


def op_name(op: Any) -> str:
    """The engine op of ``op``: an nl.* function, a numpy ufunc, or a name."""
    if isinstance(op, str):
        name = op
    else:
        name = getattr(op, "_nki_op", None) or _UFUNC_NAMES.get(op)
    if name is None:
        fail("err_unsupported_op", f"{op!r} is not an operator the engines support (use nl.add, nl.multiply, "
                                   f"nl.maximum, np.add, ...)")
    return name


def elementwise(op: str, inputs: Sequence[Any], *, dtype: Any = None, mask: Any = None,
                dst: Optional[NKITensor] = None, operator_overload: bool = False, api: Optional[str] = None,
                engine: Optional[str] = None) -> Optional[NKITensor]:
    api = api or op
    m = as_mask(mask)
    tiles = [x for x in inputs if isinstance(x, NKITensor)]
    if not tiles:
        raise TypeError(f"'{api}' needs at least one tile operand")
    for i, x in enumerate(inputs):
        if isinstance(x, NKITensor):
            check_tile(x, api, f"x{i}" if len(inputs) > 1 else "x")
    shapes = [shape_of(x) for x in inputs]
    try:
        out_shape = _broadcast_shape(shapes)
    except ValueError:
        fail("err_shape_mismatch", f"operands of '{api}' have shapes {shapes} that do not broadcast")
    if operator_overload and len(tiles) == 2 and tiles[0].shape[0] != tiles[1].shape[0]:
        fail("err_num_partition_mismatch",
             f"operator '{api}' on tiles with {tiles[0].shape[0]} and {tiles[1].shape[0]} partitions: operators do "
             f"not broadcast the partition dimension; use nl.{api}(a, b) or b.broadcast_to({out_shape})")
    out_dtype = result_dtype(dtype, lambda: dtypes.bool_ if op in _PREDICATES else
                             dtypes.promote(*(dtype_of(x) for x in inputs)))
    vals = [value_of(x, m) for x in inputs]
    with _quiet():
        if op in INT_BINARY or op in INT_UNARY:
            for x in inputs:
                if dtypes.is_float(dtype_of(x)):
                    fail("err_unsupported_dtype", f"'{api}' is a bitvec operation and needs integer operands, got "
                                                  f"{dtypes.name(dtype_of(x))}")
            fn = INT_BINARY.get(op) or INT_UNARY[op]
            result = fn(*[np.asarray(v).astype(np.int64) for v in vals])
        elif op in BINARY:
            a, b = (_fp32(v) for v in vals)
            result = np.asarray(BINARY[op](a, b), dtype=np.float32 if op not in _PREDICATES else None)
            if op in ("divide", "mod", "fmod") and not dtypes.is_float(out_dtype):
                result = np.trunc(result) if op == "divide" else result
        elif op in UNARY:
            result = np.asarray(UNARY[op][1](_fp32(vals[0])), dtype=np.float32)
        else:
            fail("err_unsupported_op", f"unknown engine operation '{op}'")
    # Every engine function returns a new array, except the identities, which return their input.
    fresh = op not in ("copy", "identity")
    if result.shape != out_shape:
        result = np.broadcast_to(result, out_shape)
        fresh = False
    _charge(engine or (UNARY[op][0] if op in UNARY else "vector"), api, out_shape)
    return _emit(result, out_dtype, dst, m, api, fresh=fresh)


def accumulate(ref: NKITensor, op: str, other: Any) -> None:
    """``t += x`` (and -=, *=, /=): an engine op whose destination is ``t``; PSUM accumulates in fp32."""
    if ref.buffer.is_hbm:
        fail("err_unsupported_memory", f"in-place '{op}' on an HBM tensor: compute on tiles, then nl.store")
    valid = other._valid if isinstance(other, NKITensor) else None
    fresh = _fresh_result(other)
    o = _fp32(value_of(other))
    if isinstance(o, np.ndarray) and o.shape != ref.shape and o.size == int(np.prod(ref.shape)):
        o = o.reshape(ref.shape)  # the same elements laid out as the target (e.g. (P, F) into (P, 1, F))
    try:
        with _quiet():
            result = BINARY[op](_fp32(ref.read()), o)
            if op == "add" and ref.buffer is psum and ref.index is None and ref.storage.psum_defined is not None:
                # `psum += nisa.nc_matmul(...)` into PSUM nothing has written since it was allocated starts the
                # accumulation there, as the toolchain does (AWS's allocated kernels accumulate into
                # nl.ndarray PSUM without zeroing it).
                defined = ref.storage.flags(ref.arr, "defined")
                if not defined.all():
                    result = np.where(defined, result, np.broadcast_to(o, np.shape(result)))
    except ValueError:
        fail("err_shape_mismatch", f"in-place '{op}' of a {np.shape(o)} value into a {ref.shape} tile")
    if _larger_than(np.shape(result), ref.shape):
        fail("err_store_dst_shape_smaller_than_other_shape",
             f"in-place '{op}' of a {np.shape(result)} value into a {ref.shape} tile")
    if fresh is None:
        _charge("vector", op, ref.shape)
    if valid is not None:
        valid = _fit_mask(valid, ref.shape)
    ref.write(dtypes.cast(np.asarray(result, dtype=np.float32), ref.dtype), valid)
    if fresh is not None:
        fresh[0] = None  # the instruction accumulated into ref directly (see _fresh_result)


def _fresh_result(value: Any) -> Optional[list]:
    """The live-range record of ``value`` if it is the result of the instruction just executed and nothing
    has read it yet: in ``t[...] = nisa.op(...)`` or ``psum += nisa.nc_matmul(...)`` the toolchain has the
    instruction write into ``t`` directly, so that result never occupies memory of its own."""
    if not isinstance(value, NKITensor):
        return None
    rec = value.storage.live
    if isinstance(rec, list) and rec[0] is not None and rec[0] == rec[1] == rec[4].clock:
        return rec
    return None


def assign(dst: NKITensor, value: Any) -> None:
    """``t[idx] = value``: a copy with a cast to ``t``'s dtype; the value may broadcast up, not down. A value
    the previous instruction just produced is that instruction's output written into ``t`` (no copy)."""
    fresh = _fresh_result(value) if not dst.buffer.is_hbm else None
    vals = value_of(value)
    shape = np.shape(vals)
    if _larger_than(shape, dst.shape):
        fail("err_store_dst_shape_smaller_than_other_shape",
             f"cannot assign a value of shape {tuple(shape)} to a destination of shape {dst.shape}")
    try:
        np.broadcast_shapes(shape, dst.shape)
    except ValueError:
        if int(math.prod(shape)) != int(math.prod(dst.shape)):
            fail("err_shape_mismatch", f"cannot assign a value of shape {tuple(shape)} to {dst.shape}")
        vals = np.reshape(vals, dst.shape)
    if dst.buffer.is_hbm or (isinstance(value, NKITensor) and value.buffer.is_hbm):
        runtime.current().costs.dma("assign", int(np.prod(dst.shape)) * dst.itemsize,
                                    dst.buffer.is_hbm, isinstance(value, NKITensor) and value.buffer.is_hbm)
    elif fresh is None:
        _charge("vector", "tensor_copy", dst.shape)
    valid = value._valid if isinstance(value, NKITensor) else None
    store_into(dst, vals if isinstance(vals, np.ndarray) else np.asarray(vals), "assign",
               None if valid is None else _fit_mask(valid, dst.shape))
    if fresh is not None:
        fresh[0] = None  # no memory of its own (a later read would start its range there)
        if dst.storage.live is not None:
            dst._touch(reading=False)


# ---------------------------------------------------------------------------------------------------------
# data movement
# ---------------------------------------------------------------------------------------------------------

def load(src: NKITensor, *, mask: Any = None, dtype: Any = None, dst: Optional[NKITensor] = None,
         api: str = "load") -> Optional[NKITensor]:
    if not isinstance(src, NKITensor):
        raise TypeError(f"'{api}' needs an HBM tensor (a kernel argument or nl.ndarray in HBM), got "
                        f"{type(src).__name__}")
    if not src.buffer.is_hbm:
        fail("err_unsupported_memory",
             f"Expected operand 'src' of '{api}' to be in address space 'hbm', but got a tile in "
             f"'{src.buffer.name}' instead")
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
            mm = _mask_for(m, shape)
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
    m = as_mask(mask)
    if isinstance(value, NKITensor):
        check_tile(value, api, "value")
    vals = value_of(value, m)
    if _larger_than(np.shape(vals), dst.shape):
        fail("err_store_dst_shape_smaller_than_other_shape",
             f"'{api}' of a value of shape {tuple(np.shape(vals))} into a destination of shape {dst.shape}")
    runtime.current().costs.dma(api, int(np.prod(dst.shape)) * dst.itemsize, True, False)
    dst.write(dtypes.cast(np.asarray(vals), dst.dtype), None if m is None else _mask_for(m, dst.shape))


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
    wmask = None if m is None else _mask_for(m, dst.shape)
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
    with _quiet():
        dst.write(_fp32(np.asarray(vals)), wmask, skip=skip, rmw=rmw)


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
    vals = _fp32(np.asarray(src.read(m) if src is not None else value))
    if int(np.prod(np.shape(vals))) != int(np.prod(dst.shape)):
        fail("err_shape_mismatch", f"atomic_rmw of a {tuple(np.shape(vals))} value into {dst.shape}")
    runtime.current().costs.dma("atomic_rmw", int(np.prod(dst.shape)) * dst.itemsize, True, True)
    with _quiet():
        dst.write(np.reshape(vals, dst.shape), None if m is None else _mask_for(m, dst.shape),
                  rmw=BINARY[op_name(op)])


def copy(src: NKITensor, *, dtype: Any = None, mask: Any = None, dst: Optional[NKITensor] = None,
         api: str = "copy", engine: str = "vector") -> Optional[NKITensor]:
    check_tile(src, api, "src")
    m = as_mask(mask)
    out_dtype = result_dtype(dtype, src.dtype)
    _charge(engine if engine != "unknown" else "vector", api, src.shape)
    vals = src.read(m)
    return _emit(np.asarray(vals), out_dtype if dst is None else dst.dtype, dst, m, api)


def broadcast_to(src: NKITensor, shape: tuple, *, dst: Optional[NKITensor] = None) -> Optional[NKITensor]:
    check_tile(src, "broadcast_to", "src")
    try:
        vals = np.broadcast_to(src.read(), shape)
    except ValueError:
        fail("err_shape_mismatch", f"cannot broadcast a tile of shape {src.shape} to {shape}: only dimensions of "
                                   f"size 1 broadcast")
    _charge("vector", "broadcast_to", shape)
    return _emit(np.array(vals), src.dtype, dst, None, "broadcast_to")


def expand_dims(src: NKITensor, axis: int) -> NKITensor:
    check_tile(src, "expand_dims", "data")
    axis = axis if axis >= 0 else src.ndim + 1 + axis
    if axis < src.ndim:
        fail("err_unsupported_axis", f"expand_dims can only add trailing axes (axis >= {src.ndim}), got {axis}")
    return NKITensor(src.storage, np.expand_dims(src.read(), axis), None, 0) if src.index is None else \
        _emit(np.expand_dims(np.array(src.read()), axis), src.dtype, None, None, "expand_dims")


# ---------------------------------------------------------------------------------------------------------
# reductions
# ---------------------------------------------------------------------------------------------------------

_REDUCE = {"add": (np.sum, 0.0), "maximum": (np.max, -np.inf), "minimum": (np.min, np.inf),
           "multiply": (np.prod, 1.0), "mean": (None, 0.0), "var": (None, 0.0),
           "logical_and": (np.all, True), "logical_or": (np.any, False),
           "bitwise_and": (np.bitwise_and.reduce, -1), "bitwise_or": (np.bitwise_or.reduce, 0),
           "bitwise_xor": (np.bitwise_xor.reduce, 0)}


def _axes(axis: Any, ndim: int, api: str) -> tuple:
    given = tuple(int(a) for a in (axis if isinstance(axis, (tuple, list)) else (axis,)))
    if not given or any(not -ndim <= a < ndim for a in given):
        fail("err_unsupported_reduce_axis", f"'{api}' got axis={axis} for a {ndim}-d tile")
    axes = tuple(sorted(set(a % ndim for a in given)))
    if 0 in axes:
        fail("err_unsupported_reduce_axis",
             f"'{api}' cannot reduce the partition axis (axis 0): engines reduce free axes only; transpose the "
             f"tile or use nisa.tensor_partition_reduce")
    # Any set of free axes: the engines walk the free dimensions with an access pattern, so e.g. axis=[2, 4]
    # of a pooling window is one instruction (the average_pool2d tutorial does this).
    return axes


def reduce(op: str, data: NKITensor, axis: Any, *, dtype: Any = None, mask: Any = None, keepdims: bool = False,
           negate: bool = False, dst: Optional[NKITensor] = None, api: Optional[str] = None) -> Optional[NKITensor]:
    api = api or op
    check_tile(data, api, "data")
    axes = _axes(axis, data.ndim, api)
    m = as_mask(mask)
    vals = value_of(data, m)
    mm = None if m is None else _mask_for(m, data.shape)
    integer = op.startswith("bitwise") or op.startswith("logical")
    with _quiet():
        x = np.asarray(vals).astype(np.int64) if integer else _fp32(np.asarray(vals))
        if op in ("mean", "var"):
            if mm is not None:
                count = mm.sum(axis=axes, keepdims=True)
                xs = np.where(mm, x, 0)
            else:
                count = np.float32(math.prod(data.shape[a] for a in axes))
                xs = x
            mean = xs.sum(axis=axes, keepdims=True, dtype=np.float32) / count
            if op == "mean":
                result = mean
            else:
                dev = np.where(mm, x - mean, 0) if mm is not None else x - mean
                result = (dev * dev).sum(axis=axes, keepdims=True, dtype=np.float32) / count
        else:
            fn, identity = _REDUCE[op]
            if mm is not None:
                x = np.where(mm, x, np.array(identity).astype(x.dtype))
            result = fn(x, axis=axes, keepdims=True)
        if negate:
            result = -result
    if dst is not None:
        if int(np.prod(dst.shape)) != int(np.prod(result.shape)):
            fail("err_shape_mismatch",
                 f"'{api}' produces {int(np.prod(result.shape)) // data.shape[0]} elements per partition but dst "
                 f"{dst.shape} holds {int(np.prod(dst.shape)) // max(dst.shape[0], 1)}")
        result = result.reshape(dst.shape)
    elif not keepdims:
        result = result.reshape(tuple(s for i, s in enumerate(result.shape) if i not in axes))
        if result.ndim < 2:
            result = result.reshape(data.shape[0], 1)  # tiles are 2-D: the partition dimension stays
    in_dtype = data.dtype
    out_dtype = result_dtype(dtype, dtypes.float32 if op in ("mean", "var") and not dtypes.is_float(in_dtype)
                             else in_dtype)
    _charge("vector", api, data.shape)
    return _emit(np.asarray(result), out_dtype if dst is None else dst.dtype, dst, None, api)


def partition_reduce(op: str, data: NKITensor, *, dtype: Any = None, dst: Optional[NKITensor] = None
                     ) -> Optional[NKITensor]:
    check_tile(data, "tensor_partition_reduce", "data", allow_psum=False)
    fn, _ = _REDUCE[op]
    with _quiet():
        result = fn(_fp32(np.asarray(data.read())), axis=0, keepdims=True)
    runtime.current().costs.compute("gpsimd", "tensor_partition_reduce", _free(data.shape) * data.shape[0])
    return _emit(np.asarray(result), result_dtype(dtype, data.dtype), dst, None,
                 "tensor_partition_reduce")


# ---------------------------------------------------------------------------------------------------------
# Tensor engine
# ---------------------------------------------------------------------------------------------------------

_PERF_MODES = {None: 1, "none": 1, "double_row_gen3": 2}

# nc_matmul's tile_position and tile_size place the matmul on the PE array in steps of 32 rows and columns
# (the NKI ISA reference, nc_matmul): the same on every generation so far.
PE_TILE_GRANULE = 32


def matmul_hints(stationary: NKITensor, moving: NKITensor, *, is_stationary_onezero: bool = False,
                 is_moving_onezero: bool = False, is_transpose: bool = False, tile_position: Sequence[int] = (),
                 tile_size: Sequence[int] = (), api: str = "nc_matmul") -> None:
    """The performance hints of nc_matmul, held to what they promise: an operand said to hold only ones and
    zeros, or (is_transpose) a moving identity matrix, must; PE tiling must be a valid placement."""
    for flag, name, t in ((is_stationary_onezero, "is_stationary_onezero", stationary),
                          (is_moving_onezero, "is_moving_onezero", moving)):
        if flag and isinstance(t, NKITensor):
            v = _fp32(np.asarray(t.read()))
            if not np.isin(v, (0.0, 1.0)).all():
                fail("err_onezero_hint_violated",
                     f"'{api}' was told {name}=True but that operand holds values other than 0 and 1")
    if is_transpose and isinstance(moving, NKITensor):
        v = _fp32(np.asarray(moving.read())).reshape(moving.shape[0], -1)
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
        if size[0] < stationary.shape[0] or size[1] < _free(stationary.shape):
            fail("err_invalid_pe_tiling", f"'{api}': tile_size {size} is smaller than the stationary tile "
                                          f"{stationary.shape}")


def matmul(stationary: NKITensor, moving: NKITensor, *, dst: Optional[NKITensor] = None,
           accumulate: Optional[bool] = None, api: str = "nc_matmul", allow_psum_operands: bool = False,
           perf_mode: Any = None, mask: Any = None) -> Optional[NKITensor]:
    """``stationary.T @ moving`` on the Tensor engine, in fp32, into PSUM. ``perf_mode="double_row_gen3"``
    (trn2+, fp8): operands (K, 2, M) and (K, 2, N) contract over both K and the pair of rows."""
    check_tile(stationary, api, "stationary", allow_psum=allow_psum_operands)
    check_tile(moving, api, "moving", allow_psum=allow_psum_operands)
    target = runtime.current().target
    rows = _PERF_MODES.get(perf_mode)
    if rows is None:
        from .errors import NKIUnsupportedError
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
    elif stationary.ndim != 2 or moving.ndim != 2:
        fail("err_exceed_max_supported_dimension",
             f"'{api}' takes 2-D tiles, got stationary {stationary.shape} and moving {moving.shape}")
    k, m = stationary.shape[0], stationary.shape[-1]
    k2, n = moving.shape[0], moving.shape[-1]
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
        fail("err_unsupported_dtype_combination",
             f"'{api}' cannot mix fp32 with {dtypes.name(moving.dtype if stationary.dtype in f32 else stationary.dtype)}: "
             f"cast both operands to the same precision class")
    a = _fp32(np.asarray(stationary.read())).reshape(k * rows, m)
    b = _fp32(np.asarray(moving.read())).reshape(k * rows, n)
    result = a.T @ b
    runtime.current().costs.matmul(api, k * rows, m, n, stationary.dtype in f32)
    if dst is None:
        out = new_tile((m, n), dtypes.float32, psum)
        mm = as_mask(mask)
        if mm is not None:  # legacy mask=: only the masked-in outputs are computed
            valid = _mask_for(mm, (m, n))
            result = np.where(valid, result, np.float32(np.nan))
            out._valid = valid
        out.write(result)
        return out
    if dst.buffer is not psum:
        fail("err_unsupported_memory",
             f"Expected operand 'dst' of '{api}' to be in address space 'psum', but got a tile in "
             f"'{dst.buffer.name}' instead: the Tensor engine writes only to PSUM")
    if dst.shape != (m, n):
        fail("err_shape_mismatch", f"'{api}' produces ({m}, {n}) but dst is {dst.shape}")
    if dst.dtype != dtypes.float32 and not (target.psum_bf16 and dst.dtype == dtypes.bfloat16):
        fail("err_unsupported_dtype", f"'{api}' writes fp32 to PSUM; dst has dtype {dtypes.name(dst.dtype)}")
    started = dst.storage.started_flags(dst)
    if accumulate is None:
        # Usually the whole region is fresh (first K tile) or started (the rest): skip the select.
        flags = np.asarray(started[...])
        if not flags.any():
            accumulate = False
        elif flags.all():
            accumulate = True
    if accumulate is None:
        new = np.where(flags, _fp32(np.asarray(dst.read())) + result, result)
    elif accumulate:
        new = _fp32(np.asarray(dst.read())) + result
    else:
        new = result
    dst.write(dtypes.cast(np.asarray(new, dtype=np.float32), dst.dtype))
    started[...] = True
    return None


def transpose(data: NKITensor, *, engine: str = "tensor", dst: Optional[NKITensor] = None,
              api: str = "nc_transpose", dtype: Any = None, mask: Any = None,
              psum_result: bool = True) -> Optional[NKITensor]:
    """Swap the partition and free axes (extra free axes flattened first). A legacy ``mask=`` is over the
    input's positions; the result holds the transposed positions it covers. ``psum_result``: a new
    Tensor-engine result is an fp32 PSUM tile (the instruction), else an SBUF tile of ``dtype``."""
    check_tile(data, api, "data")
    shape = data.shape
    p, f = shape[0], _free(shape)
    target = runtime.current().target
    limit = target.vector_transpose_max if engine == "vector" else target.pe_array
    if p > limit or f > limit:
        fail("err_size_of_dimension_exceed_arch_limit",
             f"'{api}' on the {engine} engine takes at most {limit}x{limit}, got ({p}, {f})")
    vals = np.asarray(data.read()).reshape(p, f).T
    if engine == "vector":
        _charge("vector", api, (f, p))
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
            valid = np.broadcast_to(_mask_for(mm, shape), shape).reshape(p, f).T
            vals = np.where(valid, _fp32(vals), np.float32(np.nan))
            out._valid = valid
        out.write(dtypes.cast(_fp32(vals), out.dtype))
        return out
    store_into(dst, _fp32(vals), api)
    return None


# ---------------------------------------------------------------------------------------------------------
# fused engine instructions
# ---------------------------------------------------------------------------------------------------------

def _per_partition(x: Any, data: NKITensor, api: str, arg: str) -> Any:
    """A scalar, or a (P, 1) tile/vector broadcast along the free axes."""
    if x is None:
        return None
    if isinstance(x, NKITensor):
        check_tile(x, api, arg)
        v = _fp32(np.asarray(x.read()))
        if x.shape[0] != data.shape[0] or _free(x.shape) != 1:
            fail("err_num_partition_mismatch",
                 f"operand '{arg}' of '{api}' must be a scalar or a ({data.shape[0]}, 1) tile, got {x.shape}")
        return v.reshape((data.shape[0],) + (1,) * (data.ndim - 1))
    return np.float32(x) if not isinstance(x, np.ndarray) else _fp32(x)


def activation(op: Any, data: NKITensor, *, bias: Any = None, scale: Any = 1.0, reduce_op: Any = None,
               reduce_res: Optional[NKITensor] = None, reduce_cmd: Any = None, dtype: Any = None, mask: Any = None,
               dst: Optional[NKITensor] = None, api: str = "activation") -> Optional[NKITensor]:
    check_tile(data, api, "data")
    name = op_name(op)
    if name not in UNARY:
        fail("err_unsupported_activation", f"'{name}' is not an activation function of the Scalar engine")
    x = _fp32(np.asarray(data.read()))
    with _quiet():
        s = _per_partition(scale, data, api, "scale")
        y = x if not isinstance(s, np.ndarray) and s == 1 else x * s  # scale=1.0 is the common case
        b = _per_partition(bias, data, api, "bias")
        if b is not None:
            y = y + b
        result = np.asarray(UNARY[name][1](y), dtype=np.float32)
    if reduce_res is not None:
        check_tile(reduce_res, api, "reduce_res")
        rname = op_name(reduce_op) if reduce_op is not None else "add"
        if rname != "add":
            fail("err_unsupported_op", f"'{api}' reduces with add only, got {rname}")
        red = result.reshape(result.shape[0], -1).sum(axis=1, keepdims=True, dtype=np.float32)
        cmd = getattr(reduce_cmd, "name", reduce_cmd)
        if cmd in ("reduce", "accumulate"):
            red = red + _fp32(np.asarray(reduce_res.read())).reshape(red.shape)
        store_into(reduce_res, red.reshape(reduce_res.shape), api)
    _charge("scalar", api, data.shape)
    out_dtype = result_dtype(dtype, data.dtype)
    return _emit(result, out_dtype, dst, as_mask(mask), api)


def _same_partitions(api: str, a: "tuple[str, NKITensor]", b: "tuple[str, NKITensor]") -> None:
    """nisa operands must have equal partitions and equal elements per partition."""
    (na, ta), (nb, tb) = a, b
    if ta.shape[0] != tb.shape[0] or _free(ta.shape) != _free(tb.shape):
        fail("err_num_partition_mismatch",
             f"number of partitions (dimension 0 size of a tile) mismatch in parameters ({na}{list(ta.shape)}, "
             f"{nb}{list(tb.shape)}) of '{api}'")


def tensor_tensor(data1: NKITensor, data2: NKITensor, op: Any, *, dtype: Any = None, mask: Any = None,
                  dst: Optional[NKITensor] = None, engine: str = "vector") -> Optional[NKITensor]:
    api = "tensor_tensor"
    check_tile(data1, api, "data1")
    check_tile(data2, api, "data2")
    _same_partitions(api, ("data1", data1), ("data2", data2))
    if data1.buffer is psum and data2.buffer is psum:
        fail("err_unsupported_memory", f"'{api}' cannot read both operands from PSUM; copy one to SBUF first")
    name = op_name(op)
    if (name == "power" or engine == "gpsimd") and psum in (data1.buffer, data2.buffer):
        fail("err_unsupported_memory", f"'{api}' with {name} runs on GpSimd, which cannot access PSUM")
    d2 = data2 if data2.shape == data1.shape else data2.reshape(data1.shape) if data2.index is None else data2
    return elementwise(name, (data1, d2), dtype=dtype, mask=mask, dst=dst, api=api,
                       engine="gpsimd" if name == "power" else "vector")


def tensor_scalar(data: NKITensor, op0: Any, operand0: Any, reverse0: bool = False, op1: Any = None,
                  operand1: Any = None, reverse1: bool = False, *, dtype: Any = None, mask: Any = None,
                  dst: Optional[NKITensor] = None, engine: str = "vector") -> Optional[NKITensor]:
    api = "tensor_scalar"
    check_tile(data, api, "data")
    m = as_mask(mask)
    x = _fp32(np.asarray(data.read(m))) if dtypes.is_float(data.dtype) else np.asarray(data.read(m))
    in_dtypes = [data.dtype]
    with _quiet():
        for op, operand, rev, arg in ((op0, operand0, reverse0, "operand0"), (op1, operand1, reverse1, "operand1")):
            if op is None:
                continue
            name = op_name(op)
            v = _per_partition(operand, data, api, arg)
            in_dtypes.append(dtype_of(operand))
            fn = BINARY.get(name) or INT_BINARY[name]
            if name in INT_BINARY:
                x = fn(np.asarray(x).astype(np.int64), np.asarray(v).astype(np.int64))
            else:
                x = fn(v, _fp32(x)) if rev else fn(_fp32(x), v)
    _charge("vector", api, data.shape)
    out_dtype = result_dtype(dtype, data.dtype)
    return _emit(np.asarray(x), out_dtype, dst, m, api)


def iota_expr(expr: Any, dtype: Any) -> NKITensor:
    vals = np.asarray(expr)
    if vals.ndim < 2:
        fail("err_insufficient_rank", "nisa.iota needs a 2-D index expression, e.g. nl.arange(128)[:, None]")
    _charge("gpsimd", "iota", vals.shape)
    return _emit(vals, dtypes.as_dtype(dtype), None, None, "iota")


def iota_pattern(dst: NKITensor, pattern: Sequence[Sequence[int]], offset: int = 0,
                 channel_multiplier: int = 0) -> None:
    check_tile(dst, "iota", "dst")
    vals = affine_pattern_values(dst.shape[0], pattern, offset, channel_multiplier)
    _charge("gpsimd", "iota", dst.shape)
    store_into(dst, vals.reshape(dst.shape), "iota")


def memset(shape: tuple, value: Any, dtype: Any, *, dst: Optional[NKITensor] = None,
           buffer: Buffer = sbuf) -> Optional[NKITensor]:
    if dst is None:
        out = new_tile(tuple(shape), dtypes.as_dtype(dtype), buffer)
        out.write(np.array(value).astype(out.dtype))
        _charge("vector", "memset", out.shape)
        return out
    check_tile(dst, "memset", "dst")
    _charge("vector", "memset", dst.shape)
    store_into(dst, np.array(value), "memset")
    return None


def bn_stats(data: NKITensor, *, mask: Any = None, dtype: Any = None, dst: Optional[NKITensor] = None
             ) -> Optional[NKITensor]:
    api = "bn_stats"
    check_tile(data, api, "data")
    fmax = runtime.current().target.bn_stats_fmax
    if _free(data.shape) > fmax:
        fail("err_size_of_dimension_exceed_arch_limit",
             f"free size {_free(data.shape)} of 'bn_stats' exceeds architecture limitation of {fmax} "
             f"(nl.tile_size.bn_stats_fmax): split the free axis and aggregate with bn_aggr")
    m = as_mask(mask)
    p = data.shape[0]
    x = _fp32(np.asarray(data.read(m))).reshape(p, -1)
    valid = np.ones_like(x, dtype=bool) if m is None else np.asarray(_mask_for(m, data.shape)).reshape(p, -1)
    out = np.zeros((p, 6), dtype=np.float32)
    with _quiet():
        for half, sl in ((0, slice(0, None, 2)), (1, slice(1, None, 2))):
            xv, vv = x[:, sl], valid[:, sl]
            count = vv.sum(axis=1).astype(np.float32)
            mean = np.where(vv, xv, 0).sum(axis=1, dtype=np.float32) / np.maximum(count, 1)
            m2 = np.where(vv, (xv - mean[:, None]) ** 2, 0).sum(axis=1, dtype=np.float32)
            out[:, 3 * half:3 * half + 3] = np.stack([count, mean, m2], axis=1)
    _charge("vector", api, data.shape)
    return _emit(out, result_dtype(dtype, dtypes.float32), dst, None, api)


def bn_aggr(data: NKITensor, *, dtype: Any = None, dst: Optional[NKITensor] = None) -> Optional[NKITensor]:
    api = "bn_aggr"
    check_tile(data, api, "data")
    p = data.shape[0]
    x = _fp32(np.asarray(data.read())).reshape(p, -1)
    if x.shape[1] % 3:
        fail("err_shape_mismatch", f"'bn_aggr' takes bn_stats results ((P, 6k)), got {data.shape}")
    g = x.reshape(p, -1, 3)
    count, mean, m2 = g[..., 0], g[..., 1], g[..., 2]
    with _quiet():
        total = count.sum(axis=1)
        mu = (count * mean).sum(axis=1) / np.maximum(total, 1)
        var = (m2 + count * (mean - mu[:, None]) ** 2).sum(axis=1) / np.maximum(total, 1)
    _charge("vector", api, data.shape)
    return _emit(np.stack([mu, var], axis=1).astype(np.float32),
                 result_dtype(dtype, dtypes.float32), dst, None, api)


def where(cond: Any, x: Any, y: Any, *, dtype: Any = None, mask: Any = None,
          dst: Optional[NKITensor] = None) -> Optional[NKITensor]:
    tiles = [t for t in (cond, x, y) if isinstance(t, NKITensor)]
    for t in tiles:
        check_tile(t, "where", "operand")
    m = as_mask(mask)
    c = np.asarray(value_of(cond, m)).astype(bool)
    with _quiet():
        result = np.where(c, _fp32(value_of(x, m)), _fp32(value_of(y, m))).astype(np.float32)
    out_dtype = result_dtype(dtype, lambda: dtypes.promote(dtype_of(x), dtype_of(y)))
    _charge("vector", "where", result.shape)
    return _emit(result, out_dtype, dst, m, "where")


# ---------------------------------------------------------------------------------------------------------
# selection, scans and top-8
# ---------------------------------------------------------------------------------------------------------

def affine_select(on_true: NKITensor, on_false_value: Any, predicate: np.ndarray, *, dtype: Any = None,
                  dst: Optional[NKITensor] = None, mask: Any = None) -> Optional[NKITensor]:
    """``on_true`` where the affine predicate holds, ``on_false_value`` elsewhere (GpSimd)."""
    api = "affine_select"
    check_tile(on_true, api, "on_true_tile")  # PSUM too: the causal mask is applied to the scores in PSUM
    try:
        pred = np.broadcast_to(np.asarray(predicate, dtype=bool), on_true.shape)
    except ValueError:
        fail("err_shape_mismatch", f"the predicate of '{api}' (shape {np.shape(predicate)}) does not cover the "
                                   f"tile {on_true.shape}")
    with _quiet():
        result = np.where(pred, _fp32(np.asarray(on_true.read())), np.float32(on_false_value))
    _charge("gpsimd", api, on_true.shape)
    return _emit(result, result_dtype(dtype, on_true.dtype), dst, as_mask(mask), api)


def affine_pattern_values(partitions: int, pattern: Sequence[Sequence[int]], offset: int,
                          channel_multiplier: int) -> np.ndarray:
    """offset + p * channel_multiplier + sum(step_i * idx_i): the affine expression of iota/affine_select."""
    sizes = [int(n) for _, n in pattern]
    vals = np.full((partitions,) + tuple(sizes), int(offset), dtype=np.int64)
    vals += (np.arange(partitions) * int(channel_multiplier)).reshape((partitions,) + (1,) * len(sizes))
    for j, (step, num) in enumerate(pattern):
        shape = [1] * (len(sizes) + 1)
        shape[j + 1] = int(num)
        vals += (np.arange(int(num)) * int(step)).reshape(shape)
    return vals.reshape(partitions, -1)


def scalar_tensor_tensor(data: NKITensor, op0: Any, operand0: Any, op1: Any, operand1: NKITensor, *,
                         reverse0: bool = False, reverse1: bool = False, dtype: Any = None, mask: Any = None,
                         dst: Optional[NKITensor] = None) -> Optional[NKITensor]:
    """``(data op0 operand0) op1 operand1``: a scalar (or (P, 1)) then a tile, in one Vector instruction."""
    api = "scalar_tensor_tensor"
    check_tile(data, api, "data")
    check_tile(operand1, api, "operand1")
    _same_partitions(api, ("data", data), ("operand1", operand1))
    a = _per_partition(operand0, data, api, "operand0")
    x = _fp32(np.asarray(data.read()))
    t = _fp32(np.asarray(operand1.read())).reshape(x.shape)
    with _quiet():
        f0, f1 = BINARY[op_name(op0)], BINARY[op_name(op1)]
        y = f0(a, x) if reverse0 else f0(x, a)
        y = f1(t, y) if reverse1 else f1(y, t)
    _charge("vector", api, data.shape)
    out_dtype = result_dtype(dtype, lambda: dtypes.promote(data.dtype, operand1.dtype))
    return _emit(np.asarray(y, dtype=np.float32), out_dtype, dst, as_mask(mask), api)


def tensor_tensor_scan(data0: NKITensor, data1: NKITensor, initial: Any, op0: Any, op1: Any, *,
                       reverse0: bool = False, reverse1: bool = False, dtype: Any = None,
                       dst: Optional[NKITensor] = None) -> Optional[NKITensor]:
    """out[:, i] = (out[:, i-1] op0 data0[:, i]) op1 data1[:, i], with out[:, -1] = initial (a recurrence)."""
    api = "tensor_tensor_scan"
    check_tile(data0, api, "data0")
    check_tile(data1, api, "data1")
    if data0.shape != data1.shape:
        fail("err_shape_mismatch", f"'{api}' needs data0 and data1 of one shape, got {data0.shape} and {data1.shape}")
    p = data0.shape[0]
    a = _fp32(np.asarray(data0.read())).reshape(p, -1)
    b = _fp32(np.asarray(data1.read())).reshape(p, -1)
    prev = np.broadcast_to(_per_partition(initial, data0, api, "initial"), (p, 1)).reshape(p).astype(np.float32)
    f0, f1 = BINARY[op_name(op0)], BINARY[op_name(op1)]
    out = np.empty_like(a)
    with _quiet():
        for i in range(a.shape[1]):
            y = f0(a[:, i], prev) if reverse0 else f0(prev, a[:, i])
            prev = f1(b[:, i], y) if reverse1 else f1(y, b[:, i])
            out[:, i] = prev
    _charge("vector", api, data0.shape)
    return _emit(out.reshape(data0.shape), result_dtype(dtype, data0.dtype), dst,
                 None, api)


# The Vector engine's top-k instructions (max8, nc_find_index8, nc_match_replace8) work on 8 values per
# partition, over at most 16384 elements (the NKI ISA reference).
TOP_K = 8
TOP_K_MAX_FREE = 16384


def max8(src: NKITensor, *, dtype: Any = None, dst: Optional[NKITensor] = None) -> Optional[NKITensor]:
    """The 8 largest values of each partition, in descending order: (P, 8)."""
    api = "max8"
    check_tile(src, api, "src")
    p = src.shape[0]
    x = _fp32(np.asarray(src.read())).reshape(p, -1)
    if x.shape[1] < TOP_K or x.shape[1] > TOP_K_MAX_FREE:
        fail("err_size_of_dimension_exceed_arch_limit", f"'{api}' takes {TOP_K} to {TOP_K_MAX_FREE} elements per "
                                                        f"partition, got "
                                                        f"{x.shape[1]}")
    top = -np.sort(-x, axis=1)[:, :TOP_K]
    _charge("vector", api, src.shape)
    return _emit(top, result_dtype(dtype, src.dtype), dst, None, api)


def find_index8(data: NKITensor, vals: NKITensor, *, dtype: Any = None,
                dst: Optional[NKITensor] = None) -> Optional[NKITensor]:
    """For each partition, the index of the first element equal to each of the 8 values in ``vals``."""
    api = "nc_find_index8"
    check_tile(data, api, "data")
    check_tile(vals, api, "vals")
    p = data.shape[0]
    x = _fp32(np.asarray(data.read())).reshape(p, -1)
    v = _fp32(np.asarray(vals.read())).reshape(p, -1)[:, :8]
    eq = x[:, None, :] == v[:, :, None]
    idx = np.where(eq.any(axis=2), eq.argmax(axis=2), np.iinfo(np.uint32).max).astype(np.int64)
    _charge("vector", api, data.shape)
    return _emit(idx, result_dtype(dtype, dtypes.uint32), dst, None, api)


# ---------------------------------------------------------------------------------------------------------
# fused reductions, DMA transposes, predicated copies, random numbers
# ---------------------------------------------------------------------------------------------------------

_REDUCE_OPS = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply, "maximum": np.maximum,
               "minimum": np.minimum}


def _reduce_free(values: np.ndarray, op: Any, api: str) -> np.ndarray:
    """Reduce every free axis of ``values`` with ``op`` (nl.add, nl.max, ...): (P, 1)."""
    name = op_name(op)
    if name not in _REDUCE_OPS:
        fail("err_unsupported_op", f"'{api}' reduces with add, subtract, multiply, max or min, got {name}")
    flat = values.reshape(values.shape[0], -1)
    return _REDUCE_OPS[name].reduce(flat, axis=1, keepdims=True).astype(np.float32)


def tensor_scalar_reduce(data: NKITensor, op0: Any, operand0: Any, reduce_op: Any, reduce_res: NKITensor, *,
                         reverse0: bool = False, dtype: Any = None, mask: Any = None,
                         dst: Optional[NKITensor] = None) -> Optional[NKITensor]:
    """``data op0 operand0``, and its reduction over all free axes into ``reduce_res`` (P, 1)."""
    api = "tensor_scalar_reduce"
    check_tile(data, api, "data")
    check_tile(reduce_res, api, "reduce_res")
    if reduce_res.shape[0] != data.shape[0] or _free(reduce_res.shape) != 1:
        fail("err_num_partition_mismatch", f"'{api}': reduce_res must be ({data.shape[0]}, 1), got {reduce_res.shape}")
    name = op_name(op0)
    if name in INT_BINARY:
        fail("err_unsupported_op", f"'{api}' takes an arithmetic op0, not the bitvec operation {name}")
    m = as_mask(mask)
    x = _fp32(np.asarray(data.read(m)))
    v = _per_partition(operand0, data, api, "operand0")
    with _quiet():
        fn = BINARY[name] if name in BINARY else UNARY[name][1]
        y = (fn(v, x) if reverse0 else fn(x, v)) if name in BINARY else fn(x)
        y = np.asarray(y, dtype=np.float32)
        red = _reduce_free(y, reduce_op, api)
    store_into(reduce_res, red.reshape(reduce_res.shape), api)
    _charge("vector", api, data.shape)
    return _emit(y, result_dtype(dtype, data.dtype), dst, m, api)


_DMA_TRANSPOSE_AXES = {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}


def dma_transpose(src: NKITensor, *, axes: Any = None, dtype: Any = None, mask: Any = None,
                  dst: Optional[NKITensor] = None) -> Optional[NKITensor]:
    """A transpose done by the DMA engine, from HBM or SBUF into a new SBUF tile: (1, 0) for 2-D,
    (2, 1, 0) for 3-D, (3, 1, 2, 0) for 4-D (the only permutations the engine does)."""
    api = "dma_transpose"
    if not isinstance(src, NKITensor):
        raise TypeError(f"'{api}' needs an NKI tensor, got {type(src).__name__}")
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


def dropout(data: NKITensor, prob: Any, *, dtype: Any = None, mask: Any = None,
            dst: Optional[NKITensor] = None, api: str = "dropout") -> Optional[NKITensor]:
    """Zero each element with probability ``prob`` (a scalar or one per partition), drawing from the
    launch's random number generator (nl.random_seed sets it)."""
    check_tile(data, api, "data")
    m = as_mask(mask)
    x = np.asarray(data.read(m))
    p = _per_partition(prob, data, api, "prob")
    keep = runtime.current().random().random(x.shape, dtype=np.float32) >= p
    _charge("vector", api, data.shape)
    out_dtype = result_dtype(dtype, data.dtype)
    return _emit(np.where(keep, _fp32(x), np.float32(0)), out_dtype, dst, m, api)


def random_seed(seed: Any) -> None:
    """``nl.random_seed``: the same seed gives the same random numbers (rand, dropout) afterwards."""
    if isinstance(seed, NKITensor):
        v = np.asarray(seed.read()).reshape(-1)
        if v.size < 1:
            fail("err_shape_mismatch", "nl.random_seed needs a seed tile with one element")
        seed = v[0]
    runtime.current().seed_random(int(np.int64(seed)) & 0xFFFFFFFF)


def tensor_copy_predicated(src: Any, dst: NKITensor, predicate: NKITensor, *, reverse_pred: bool = False,
                           mask: Any = None) -> None:
    """``dst = src`` where ``predicate`` (uint) is nonzero (zero with ``reverse_pred``); dst keeps the rest."""
    api = "tensor_copy_predicated"
    check_tile(dst, api, "dst")
    check_tile(predicate, api, "predicate")
    if isinstance(src, NKITensor):
        check_tile(src, api, "src")
        _same_partitions(api, ("src", src), ("dst", dst))
        if src.buffer is psum and predicate.buffer is psum:
            fail("err_unsupported_memory", f"'{api}': src and predicate cannot both be in PSUM")
    _same_partitions(api, ("predicate", predicate), ("dst", dst))
    if predicate.dtype not in (dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.bool_):
        fail("err_unsupported_dtype", f"'{api}': predicate must be uint8, uint16 or uint32, got "
                                      f"{dtypes.name(predicate.dtype)}")
    pred = np.asarray(predicate.read()).reshape(dst.shape) != 0
    if reverse_pred:
        pred = ~pred
    m = as_mask(mask)
    if m is not None:
        pred = pred & _mask_for(m, dst.shape)
    vals = np.asarray(src.read()).reshape(dst.shape) if isinstance(src, NKITensor) else np.asarray(src)
    _charge("vector", api, dst.shape)
    dst.write(dtypes.cast(np.broadcast_to(vals, dst.shape), dst.dtype), pred)


def loop_reduce(x: NKITensor, op: Any, loop_indices: Any, *, dtype: Any = None, mask: Any = None) -> NKITensor:
    """``dst[...] = nl.loop_reduce(x, op, loop_indices=[i])`` accumulates ``x`` into ``dst`` over the loop:
    the first iteration (every index 0) writes x, later ones write op(dst, x). Returns x as a tile that
    carries the reduction for the assignment (NKITensor.__setitem__)."""
    name = op_name(op)
    if name not in _REDUCE_OPS:
        fail("err_unsupported_op", f"'loop_reduce' reduces with add, subtract, multiply, max or min, got {name}")
    indices = loop_indices if isinstance(loop_indices, (list, tuple)) else (loop_indices,)
    first = all(int(i) == 0 for i in indices)
    out = copy(x, dtype=dtype, mask=mask, api="loop_reduce")
    out._reduce_into = None if first else name
    return out


# ---------------------------------------------------------------------------------------------------------
# selections with a running max, partition shuffles, top-8 replacement, segment bounds
# ---------------------------------------------------------------------------------------------------------

def _vector_accumulate(result: np.ndarray, reduce_cmd: Any, reduce_op: Any, reduce_res: Optional[NKITensor],
                       api: str) -> None:
    """The Vector engine's per-partition max accumulators: reset_reduce starts them over from this result,
    reduce folds this result in, idle leaves them; ``reduce_res`` receives their value."""
    if reduce_op is not None and op_name(reduce_op) != "maximum":
        fail("err_unsupported_op", f"'{api}' reduces with max only, got {op_name(reduce_op)}")
    cmd = getattr(reduce_cmd, "name", reduce_cmd) or "idle"
    launch = runtime.current()
    acc = getattr(launch, "vector_accumulators", None)
    block_max = result.reshape(result.shape[0], -1).max(axis=1, keepdims=True).astype(np.float32)
    if cmd in ("reset_reduce", "reset"):
        acc = block_max if cmd == "reset_reduce" else np.full_like(block_max, -np.inf)
    elif cmd == "reduce":
        acc = block_max if acc is None or acc.shape != block_max.shape else np.maximum(acc, block_max)
    elif cmd != "idle":
        raise ValueError(f"'{api}': reduce_cmd must be a nisa.reduce_cmd, got {reduce_cmd!r}")
    launch.vector_accumulators = acc
    if reduce_res is not None:
        check_tile(reduce_res, api, "reduce_res")
        if acc is None:
            acc = block_max
        store_into(reduce_res, acc.reshape(reduce_res.shape), api)


def select_reduce(predicate: NKITensor, on_true: NKITensor, on_false: Any, *, dst: Optional[NKITensor] = None,
                  reduce_res: Optional[NKITensor] = None, reduce_cmd: Any = None, reduce_op: Any = None,
                  reverse_pred: bool = False, dtype: Any = None, mask: Any = None) -> Optional[NKITensor]:
    """``where(predicate, on_true, on_false)`` (on_false a scalar or (P, 1)), with an optional running max."""
    api = "select_reduce"
    check_tile(on_true, api, "on_true")
    check_tile(predicate, api, "predicate")
    _same_partitions(api, ("on_true", on_true), ("predicate", predicate))
    if on_true.buffer is psum and predicate.buffer is psum:
        fail("err_unsupported_memory", f"'{api}': on_true and predicate cannot both be in PSUM")
    if dtypes.is_float(predicate.dtype):
        fail("err_unsupported_dtype", f"'{api}': predicate must hold integers, got {dtypes.name(predicate.dtype)}")
    pred = np.asarray(predicate.read()).reshape(on_true.shape) != 0
    if reverse_pred:
        pred = ~pred
    f = _per_partition(on_false, on_true, api, "on_false")
    result = np.where(pred, _fp32(np.asarray(on_true.read())), f).astype(np.float32)
    _vector_accumulate(result, reduce_cmd, reduce_op, reduce_res, api)
    _charge("vector", api, on_true.shape)
    out_dtype = result_dtype(dtype, dst.dtype if dst is not None else on_true.dtype)
    return _emit(result, out_dtype, dst, as_mask(mask), api)


def range_select(on_true: NKITensor, comp_op0: Any, comp_op1: Any, bound0: Any, bound1: Any, *,
                 reduce_cmd: Any = None, reduce_res: Optional[NKITensor] = None, reduce_op: Any = None,
                 range_start: Any = 0, on_false_value: Any = None, dtype: Any = None, mask: Any = None,
                 dst: Optional[NKITensor] = None) -> Optional[NKITensor]:
    """Keep the elements whose free index + range_start satisfies both comparisons with the per-partition
    bounds, ``on_false_value`` elsewhere; with an optional running max (NeuronCore-v3+)."""
    api = "range_select"
    check_tile(on_true, api, "on_true_tile")
    if runtime.current().target.name in ("trn1", "inf2"):
        fail("err_unsupported_instruction", f"'{api}' needs NeuronCore-v3 (trn2) or later")
    names = {"equal", "less", "less_equal", "greater", "greater_equal"}
    ops = [op_name(comp_op0), op_name(comp_op1)]
    if any(o not in names for o in ops):
        fail("err_unsupported_op", f"'{api}' compares with equal, less, less_equal, greater or greater_equal, "
                                   f"got {ops}")
    p = on_true.shape[0]
    idx = (np.arange(_free(on_true.shape), dtype=np.float32) + np.float32(range_start)).reshape(1, -1)
    b0 = _per_partition(bound0, on_true, api, "bound0")
    b1 = _per_partition(bound1, on_true, api, "bound1")
    b0 = np.asarray(b0, np.float32).reshape(p, 1) if np.ndim(b0) else b0
    b1 = np.asarray(b1, np.float32).reshape(p, 1) if np.ndim(b1) else b1
    keep = BINARY[ops[0]](idx, b0) & BINARY[ops[1]](idx, b1)
    fill = np.float32(np.finfo(np.float32).min if on_false_value is None else on_false_value)
    x = _fp32(np.asarray(on_true.read())).reshape(p, -1)
    result = np.where(keep, x, fill).astype(np.float32).reshape(on_true.shape)
    _vector_accumulate(result, reduce_cmd, reduce_op, reduce_res, api)
    _charge("vector", api, on_true.shape)
    out_dtype = result_dtype(dtype, dst.dtype if dst is not None else on_true.dtype)
    return _emit(result, out_dtype, dst, as_mask(mask), api)


# nc_stream_shuffle moves data between the partitions of one quadrant of 32, and a mask entry of 255 leaves
# its destination partition alone (the NKI ISA reference, nc_stream_shuffle).
SHUFFLE_QUADRANT = 32
SHUFFLE_SKIP = 255


def stream_shuffle(src: NKITensor, dst: NKITensor, shuffle_mask: Sequence[Any], *, mask: Any = None) -> None:
    """Within each quadrant of 32 partitions, dst partition i takes src partition shuffle_mask[i]
    (255: left unchanged)."""
    api = "nc_stream_shuffle"
    check_tile(src, api, "src")
    check_tile(dst, api, "dst")
    if src.dtype != dst.dtype:
        fail("err_unsupported_dtype", f"'{api}': dst must have src's dtype ({dtypes.name(src.dtype)}), got "
                                      f"{dtypes.name(dst.dtype)}")
    if _free(src.shape) != _free(dst.shape):
        fail("err_shape_mismatch", f"'{api}': src {src.shape} and dst {dst.shape} differ in elements per partition")
    sm = [int(v) for v in shuffle_mask]
    if len(sm) != SHUFFLE_QUADRANT or any(not (0 <= v < SHUFFLE_QUADRANT or v == SHUFFLE_SKIP) for v in sm):
        fail("err_invalid_shuffle_mask", f"'{api}': shuffle_mask is {SHUFFLE_QUADRANT} source partitions in "
                                         f"0..{SHUFFLE_QUADRANT - 1} (or {SHUFFLE_SKIP}), got {sm}")
    x = np.asarray(src.read()).reshape(src.shape[0], -1)
    out = np.array(np.asarray(dst.read()).reshape(dst.shape[0], -1))
    written = np.zeros(out.shape[0], dtype=bool)
    for q in range(0, dst.shape[0], SHUFFLE_QUADRANT):
        for i, s in enumerate(sm):
            if s != SHUFFLE_SKIP and q + i < out.shape[0] and q + s < x.shape[0]:
                out[q + i] = x[q + s]
                written[q + i] = True
    m = as_mask(mask)
    valid = np.broadcast_to(written[:, None], out.shape).reshape(dst.shape)
    if m is not None:
        valid = valid & _mask_for(m, dst.shape)
    _charge("vector", api, dst.shape)
    dst.write(out.reshape(dst.shape), valid)


def match_replace8(data: NKITensor, vals: NKITensor, imm: Any, *, dst_idx: Optional[NKITensor] = None,
                   mask: Any = None, dtype: Any = None, dst: Optional[NKITensor] = None) -> Optional[NKITensor]:
    """Replace, per partition, the first occurrence of each of the 8 values in ``vals`` by ``imm``; their
    indices go to ``dst_idx`` when given."""
    api = "nc_match_replace8"
    check_tile(data, api, "data")
    check_tile(vals, api, "vals")
    p = data.shape[0]
    x = _fp32(np.asarray(data.read())).reshape(p, -1).copy()
    v = _fp32(np.asarray(vals.read())).reshape(p, -1)
    if v.shape[1] != TOP_K:
        fail("err_shape_mismatch", f"'{api}': vals must hold {TOP_K} values per partition, got {v.shape[1]}")
    if x.shape[1] > TOP_K_MAX_FREE:
        fail("err_size_of_dimension_exceed_arch_limit", f"'{api}' takes at most {TOP_K_MAX_FREE} elements per "
                                                        f"partition")
    m = as_mask(mask)
    allowed = np.ones_like(x, dtype=bool) if m is None else np.broadcast_to(
        _mask_for(m, data.shape), data.shape).reshape(p, -1)
    idx = np.zeros((p, TOP_K), dtype=np.int64)
    for r in range(p):
        for j in range(TOP_K):
            hits = np.flatnonzero((x[r] == v[r, j]) & allowed[r])
            if hits.size:
                idx[r, j] = hits[0]
                x[r, hits[0]] = np.float32(imm)
    if dst_idx is not None:
        check_tile(dst_idx, api, "dst_idx")
        store_into(dst_idx, idx.reshape(dst_idx.shape), api)
    _charge("vector", api, data.shape)
    out_dtype = result_dtype(dtype, data.dtype)
    return _emit(x.reshape(data.shape), out_dtype, dst, None, api)


def sequence_bounds(segment_ids: NKITensor, *, dtype: Any = None, dst: Optional[NKITensor] = None
                    ) -> Optional[NKITensor]:
    """For each element of a (1, n) tile of segment ids, its segment's [start, end); padding (id 0) gets
    [n, -1]. The result is (1, 2, n)."""
    api = "sequence_bounds"
    check_tile(segment_ids, api, "segment_ids")
    if segment_ids.shape[0] != 1:
        fail("err_num_partition_mismatch", f"'{api}' takes one partition, got {segment_ids.shape}")
    s = np.asarray(segment_ids.read()).reshape(-1)
    n = s.size
    start, end = np.empty(n, np.int64), np.empty(n, np.int64)
    for i in range(n):
        start[i] = n if s[i] == 0 else (start[i - 1] if i and s[i] == s[i - 1] else i)
    for i in range(n - 1, -1, -1):
        end[i] = -1 if s[i] == 0 else (end[i + 1] if i < n - 1 and s[i] == s[i + 1] else i + 1)
    _charge("gpsimd", api, segment_ids.shape)
    out_dtype = result_dtype(dtype, segment_ids.dtype)
    return _emit(np.stack([start, end])[None].astype(np.float32), out_dtype, dst, None, api)


# The GpSimd engine is 8 cores, each wired to 16 contiguous partitions of the 128 (the NKI ISA reference,
# local_gather); the count is the same on every generation modelled.
GPSIMD_PARTITIONS_PER_CORE = 16


def local_gather(src: NKITensor, index: NKITensor, num_elem_per_idx: int = 1,
                 num_valid_indices: Optional[int] = None, *, mask: Any = None) -> NKITensor:
    """GpSimd gather within each core's 16 partitions: the core's index slice, flattened partition-first,
    gives element offsets into each partition's free data; ``num_elem_per_idx`` contiguous elements are
    read from each. Result (P, num_valid_indices, num_elem_per_idx) in src's dtype."""
    api = "local_gather"
    check_tile(src, api, "src_buffer", allow_psum=False)
    check_tile(index, api, "index", allow_psum=False)
    if mask is not None and as_mask(mask) is not None:
        from .errors import NKIUnsupportedError
        raise NKIUnsupportedError("nki.isa.local_gather(mask=...) is not modelled by the simulator")
    if dtypes.is_float(index.dtype):
        fail("err_unsupported_dtype", f"'{api}': indices must be integers, got {dtypes.name(index.dtype)}")
    p, g = src.shape[0], GPSIMD_PARTITIONS_PER_CORE
    if index.shape[0] != p or p % g:
        fail("err_num_partition_mismatch", f"'{api}': src_buffer and index need the same multiple of {g} "
                                           f"partitions, got {src.shape} and {index.shape}")
    flat = np.asarray(src.read()).reshape(p, -1)
    idx = np.asarray(index.read()).astype(np.int64).reshape(p, -1)
    per_core = idx.shape[1] * g
    nvi = int(num_valid_indices) if num_valid_indices else per_core
    n = int(num_elem_per_idx)
    if not 0 < nvi <= per_core or n < 1:
        fail("err_shape_mismatch", f"'{api}': num_valid_indices must be in 1..{per_core} and num_elem_per_idx "
                                   f"positive, got {num_valid_indices} and {num_elem_per_idx}")
    out = np.empty((p, nvi, n), dtype=src.dtype)
    for c in range(p // g):
        offsets = idx[c * g:(c + 1) * g].flatten(order="F")[:nvi]
        if offsets.size and (offsets.min() < 0 or offsets.max() + n > flat.shape[1]):
            fail("err_tensor_access_out_of_bound",
                 f"'{api}': index range [{offsets.min()}, {offsets.max() + n - 1}] exceed the {flat.shape[1]} "
                 f"elements of a partition")
        out[c * g:(c + 1) * g] = flat[c * g:(c + 1) * g][:, offsets[:, None] + np.arange(n)]
    _charge("gpsimd", api, (p, nvi * n))
    return _emit(out, src.dtype, None, None, api)

"""Elementwise operations, the engines' operator tables, and assignment into tiles.

The op tables (UNARY with each op's engine, BINARY, the integer ops) are what nl.* functions, tile
operators (installed on NKITensor by engines/operators.py) and the instructions' ``op=`` name. Also the
Vector engine's copies, broadcasts and predicated copies, and ``t[...] = v`` / ``t += x``.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Optional, Sequence

import numpy as np

from .. import dtypes, runtime
from ..errors import fail
from ..indexing import as_mask
from ..memory import psum
from ..rules import allocation as _alloc_rules
from ..rules import dependencies as _deps
from ..rules import instructions as _instr
from ..tensor import NKITensor
from .operands import (broadcast_shape, charge, check_tile, dtype_of, emit, fit_mask, fp32, larger_than, mask_for,
                       quiet, result_dtype, same_partitions, shape_of, store_into, value_of)


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
    # d/dx x*sigmoid(1.702x) = s(X) * (1 + X * s(-X)), X = 1.702x: no cancellation for large |x|.
    "gelu_apprx_sigmoid_dx": ("scalar", lambda x: _sigmoid(1.702 * x) * (1 + 1.702 * x * _sigmoid(-1.702 * x))),
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
    "abs_max": lambda x, y: np.maximum(np.abs(x), np.abs(y)), "abs_min": lambda x, y: np.minimum(np.abs(x), np.abs(y)),
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
        out_shape = broadcast_shape(shapes)
    except ValueError:
        fail("err_shape_mismatch", f"operands of '{api}' have shapes {shapes} that do not broadcast")
    if operator_overload and len(tiles) == 2 and tiles[0].shape[0] != tiles[1].shape[0]:
        fail("err_num_partition_mismatch",
             f"operator '{api}' on tiles with {tiles[0].shape[0]} and {tiles[1].shape[0]} partitions: operators do "
             f"not broadcast the partition dimension; use nl.{api}(a, b) or b.broadcast_to({out_shape})")
    out_dtype = result_dtype(dtype, lambda: dtypes.bool_ if op in _PREDICATES else
                             dtypes.promote(*(dtype_of(x) for x in inputs)))
    vals = [value_of(x, m) for x in inputs]
    with quiet():
        if op in INT_BINARY or op in INT_UNARY:
            for x in inputs:
                if dtypes.is_float(dtype_of(x)):
                    fail("err_unsupported_dtype", f"'{api}' is a bitvec operation and needs integer operands, got "
                                                  f"{dtypes.name(dtype_of(x))}")
            fn = INT_BINARY.get(op) or INT_UNARY[op]
            result = fn(*[np.asarray(v).astype(np.int64) for v in vals])
        elif op in BINARY:
            a, b = (fp32(v) for v in vals)
            result = np.asarray(BINARY[op](a, b), dtype=np.float32 if op not in _PREDICATES else None)
            if op in ("divide", "mod", "fmod") and not dtypes.is_float(out_dtype):
                result = np.trunc(result) if op == "divide" else result
        elif op in UNARY:
            result = np.asarray(UNARY[op][1](fp32(vals[0])), dtype=np.float32)
        else:
            fail("err_unsupported_op", f"unknown engine operation '{op}'")
    # Every engine function returns a new array, except the identities, which return their input.
    fresh = op not in ("copy", "identity")
    if result.shape != out_shape:
        result = np.broadcast_to(result, out_shape)
        fresh = False
    charge(engine or (UNARY[op][0] if op in UNARY else "vector"), api, out_shape)
    return emit(result, out_dtype, dst, m, api, fresh=fresh)


def accumulate(ref: NKITensor, op: str, other: Any) -> None:
    """``t += x`` (and -=, *=, /=): an engine op whose destination is ``t``; PSUM accumulates in fp32."""
    if ref.buffer.is_hbm:
        fail("err_unsupported_memory", f"in-place '{op}' on an HBM tensor: compute on tiles, then nl.store")
    _deps.reduction_target(ref)  # an associative reduction is no affine_range dependency
    valid = other._valid if isinstance(other, NKITensor) else None
    fresh = _fresh_result(other)
    o = fp32(value_of(other))
    if isinstance(o, np.ndarray) and o.shape != ref.shape and o.size == int(np.prod(ref.shape)):
        o = o.reshape(ref.shape)  # the same elements laid out as the target (e.g. (P, F) into (P, 1, F))
    try:
        with quiet():
            result = BINARY[op](fp32(ref.read()), o)
            if op == "add" and ref.buffer is psum and ref.index is None and ref.storage.psum_defined is not None:
                # `psum += nisa.nc_matmul(...)` into PSUM nothing has written since it was allocated starts the
                # accumulation there, as the toolchain does (AWS's allocated kernels accumulate into
                # nl.ndarray PSUM without zeroing it).
                defined = ref.storage.flags(ref.arr, "defined")
                if not defined.all():
                    result = np.where(defined, result, np.broadcast_to(o, np.shape(result)))
    except ValueError:
        fail("err_shape_mismatch", f"in-place '{op}' of a {np.shape(o)} value into a {ref.shape} tile")
    if larger_than(np.shape(result), ref.shape):
        fail("err_store_dst_shape_smaller_than_other_shape",
             f"in-place '{op}' of a {np.shape(result)} value into a {ref.shape} tile")
    if fresh is None:
        charge("vector", op, ref.shape)
    if valid is not None:
        valid = fit_mask(valid, ref.shape)
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
    _alloc_rules.check_assignment_source(runtime.current(), value)
    fresh = _fresh_result(value) if not dst.buffer.is_hbm else None
    vals = value_of(value)
    shape = np.shape(vals)
    if larger_than(shape, dst.shape):
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
        charge("vector", "tensor_copy", dst.shape)
    valid = value._valid if isinstance(value, NKITensor) else None
    store_into(dst, vals if isinstance(vals, np.ndarray) else np.asarray(vals), "assign",
               None if valid is None else fit_mask(valid, dst.shape))
    if fresh is not None:
        fresh[0] = None  # no memory of its own (a later read would start its range there)
        if dst.storage.live is not None:
            dst._touch(reading=False)


def copy(src: NKITensor, *, dtype: Any = None, mask: Any = None, dst: Optional[NKITensor] = None,
         api: str = "copy", engine: str = "vector") -> Optional[NKITensor]:
    check_tile(src, api, "src")
    _instr.check_engine_memory(engine, api, src=src, dst=dst)
    m = as_mask(mask)
    out_dtype = result_dtype(dtype, src.dtype)
    charge(engine if engine != "unknown" else "vector", api, src.shape)
    vals = src.read(m)
    return emit(np.asarray(vals), out_dtype if dst is None else dst.dtype, dst, m, api)


def broadcast_to(src: NKITensor, shape: tuple, *, dst: Optional[NKITensor] = None) -> Optional[NKITensor]:
    check_tile(src, "broadcast_to", "src")
    try:
        vals = np.broadcast_to(src.read(), shape)
    except ValueError:
        fail("err_shape_mismatch", f"cannot broadcast a tile of shape {src.shape} to {shape}: only dimensions of "
                                   f"size 1 broadcast")
    charge("vector", "broadcast_to", shape)
    return emit(np.array(vals), src.dtype, dst, None, "broadcast_to")


def expand_dims(src: NKITensor, axis: int) -> NKITensor:
    check_tile(src, "expand_dims", "data")
    axis = axis if axis >= 0 else src.ndim + 1 + axis
    if axis < src.ndim:
        fail("err_unsupported_axis", f"expand_dims can only add trailing axes (axis >= {src.ndim}), got {axis}")
    return NKITensor(src.storage, np.expand_dims(src.read(), axis), None, 0) if src.index is None else \
        emit(np.expand_dims(np.array(src.read()), axis), src.dtype, None, None, "expand_dims")


def where(cond: Any, x: Any, y: Any, *, dtype: Any = None, mask: Any = None,
          dst: Optional[NKITensor] = None) -> Optional[NKITensor]:
    tiles = [t for t in (cond, x, y) if isinstance(t, NKITensor)]
    for t in tiles:
        check_tile(t, "where", "operand")
    m = as_mask(mask)
    c = np.asarray(value_of(cond, m)).astype(bool)
    with quiet():
        result = np.where(c, fp32(value_of(x, m)), fp32(value_of(y, m))).astype(np.float32)
    out_dtype = result_dtype(dtype, lambda: dtypes.promote(dtype_of(x), dtype_of(y)))
    charge("vector", "where", result.shape)
    return emit(result, out_dtype, dst, m, "where")


def tensor_copy_predicated(src: Any, dst: NKITensor, predicate: NKITensor, *, reverse_pred: bool = False,
                           mask: Any = None) -> None:
    """``dst = src`` where ``predicate`` (uint) is nonzero (zero with ``reverse_pred``); dst keeps the rest."""
    api = "tensor_copy_predicated"
    check_tile(dst, api, "dst")
    check_tile(predicate, api, "predicate")
    if isinstance(src, NKITensor):
        check_tile(src, api, "src")
        same_partitions(api, ("src", src), ("dst", dst))
        if src.buffer is psum and predicate.buffer is psum:
            fail("err_unsupported_memory", f"'{api}': src and predicate cannot both be in PSUM")
    same_partitions(api, ("predicate", predicate), ("dst", dst))
    if predicate.dtype not in (dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.bool_):
        fail("err_unsupported_dtype", f"'{api}': predicate must be uint8, uint16 or uint32, got "
                                      f"{dtypes.name(predicate.dtype)}")
    pred = np.asarray(predicate.read()).reshape(dst.shape) != 0
    if reverse_pred:
        pred = ~pred
    m = as_mask(mask)
    if m is not None:
        pred = pred & mask_for(m, dst.shape)
    vals = np.asarray(src.read()).reshape(dst.shape) if isinstance(src, NKITensor) else np.asarray(src)
    charge("vector", api, dst.shape)
    dst.write(dtypes.cast(np.broadcast_to(vals, dst.shape), dst.dtype), pred)

"""The Vector engine's arithmetic: tensor-tensor and tensor-scalar operations, free-axis reductions
(with fused variants and the accumulation registers), batch-norm statistics, scans and running
(cumulative) reductions, exponentials, memset, and the random numbers of dropout."""
from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np

from .. import dtypes, runtime
from ..errors import fail
from ..indexing import as_mask
from ..memory import Buffer, psum, sbuf
from ..rules import instructions as _instr
from ..tensor import NKITensor
from . import accumulator
from .elementwise import BINARY, INT_BINARY, UNARY, copy, elementwise, op_name
from .operands import as_shape, check_reduce_res
from .operands import (charge, check_tile, dtype_of, emit, fp32, free_size, mask_for, new_tile, operand_pair,
                       per_partition, quiet, require_generation, result_dtype, same_partitions, store_into,
                       value_of)


def dropout(data: NKITensor, prob: Any, *, dtype: Any = None, mask: Any = None,
            dst: Optional[NKITensor] = None, api: str = "dropout") -> Optional[NKITensor]:
    """Zero each element with probability ``prob`` (a scalar or one per partition), drawing from the
    launch's random number generator (nl.random_seed sets it)."""
    check_tile(data, api, "data")
    m = as_mask(mask)
    x = np.asarray(data.read(m))
    p = per_partition(prob, data, api, "prob")
    keep = runtime.current().random().random(x.shape, dtype=np.float32) >= p
    charge("vector", api, data.shape)
    out_dtype = result_dtype(dtype, data.dtype)
    return emit(np.where(keep, fp32(x), np.float32(0)), out_dtype, dst, m, api)


def random_seed(seed: Any) -> None:
    """``nl.random_seed``: the same seed gives the same random numbers (rand, dropout) afterwards."""
    if isinstance(seed, NKITensor):
        v = np.asarray(seed.read()).reshape(-1)
        if v.size < 1:
            fail("err_shape_mismatch", "nl.random_seed needs a seed tile with one element")
        seed = v[0]
    runtime.current().seed_random(int(np.int64(seed)) & 0xFFFFFFFF)


REDUCTIONS = {"add": (np.sum, 0.0), "maximum": (np.max, -np.inf), "minimum": (np.min, np.inf),
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
    mm = None if m is None else mask_for(m, data.shape)
    integer = op.startswith("bitwise") or op.startswith("logical")
    with quiet():
        x = np.asarray(vals).astype(np.int64) if integer else fp32(np.asarray(vals))
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
            fn, identity = REDUCTIONS[op]
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
    charge("vector", api, data.shape)
    return emit(np.asarray(result), out_dtype if dst is None else dst.dtype, dst, None, api)


def tensor_tensor(data1: NKITensor, data2: NKITensor, op: Any, *, dtype: Any = None, mask: Any = None,
                  dst: Optional[NKITensor] = None, engine: str = "vector") -> Optional[NKITensor]:
    api = "tensor_tensor"
    operand_pair(api, ("data1", data1), ("data2", data2))
    _instr.check_engine_memory(engine, api, dst=dst)
    name = op_name(op)
    if (name == "power" or engine == "gpsimd") and psum in (data1.buffer, data2.buffer):
        fail("err_unsupported_memory", f"'{api}' with {name} runs on GpSimd, which cannot access PSUM")
    d2 = data2 if data2.shape == data1.shape else as_shape(data2, data1.shape)
    return elementwise(name, (data1, d2), dtype=dtype, mask=mask, dst=dst, api=api,
                       engine="gpsimd" if name == "power" else "vector")


def tensor_scalar(data: NKITensor, op0: Any, operand0: Any, reverse0: bool = False, op1: Any = None,
                  operand1: Any = None, reverse1: bool = False, *, dtype: Any = None, mask: Any = None,
                  dst: Optional[NKITensor] = None, engine: str = "vector") -> Optional[NKITensor]:
    api = "tensor_scalar"
    check_tile(data, api, "data")
    _instr.check_engine_memory(engine, api, data=data, dst=dst)
    m = as_mask(mask)
    x = fp32(np.asarray(data.read(m))) if dtypes.is_float(data.dtype) else np.asarray(data.read(m))
    in_dtypes = [data.dtype]
    with quiet():
        for op, operand, rev, arg in ((op0, operand0, reverse0, "operand0"), (op1, operand1, reverse1, "operand1")):
            if op is None:
                continue
            name = op_name(op)
            v = per_partition(operand, data, api, arg)
            in_dtypes.append(dtype_of(operand))
            fn = BINARY.get(name) or INT_BINARY[name]
            if name in INT_BINARY:
                x = fn(np.asarray(x).astype(np.int64), np.asarray(v).astype(np.int64))
            else:
                x = fn(v, fp32(x)) if rev else fn(fp32(x), v)
    charge("vector", api, data.shape)
    out_dtype = result_dtype(dtype, data.dtype)
    return emit(np.asarray(x), out_dtype, dst, m, api)


def memset(shape: tuple, value: Any, dtype: Any, *, dst: Optional[NKITensor] = None,
           buffer: Buffer = sbuf) -> Optional[NKITensor]:
    if dst is None:
        out = new_tile(tuple(shape), dtypes.as_dtype(dtype), buffer)
        out.write(np.array(value).astype(out.dtype))
        charge("vector", "memset", out.shape)
        return out
    check_tile(dst, "memset", "dst")
    charge("vector", "memset", dst.shape)
    store_into(dst, np.array(value), "memset")
    return None


def bn_stats(data: NKITensor, *, mask: Any = None, dtype: Any = None, dst: Optional[NKITensor] = None
             ) -> Optional[NKITensor]:
    api = "bn_stats"
    check_tile(data, api, "data")
    fmax = runtime.current().target.bn_stats_fmax
    if free_size(data.shape) > fmax:
        fail("err_size_of_dimension_exceed_arch_limit",
             f"free size {free_size(data.shape)} of 'bn_stats' exceeds architecture limitation of {fmax} "
             f"(nl.tile_size.bn_stats_fmax): split the free axis and aggregate with bn_aggr")
    m = as_mask(mask)
    p = data.shape[0]
    x = fp32(np.asarray(data.read(m))).reshape(p, -1)
    valid = np.ones_like(x, dtype=bool) if m is None else np.asarray(mask_for(m, data.shape)).reshape(p, -1)
    out = np.zeros((p, 6), dtype=np.float32)
    with quiet():
        for half, sl in ((0, slice(0, None, 2)), (1, slice(1, None, 2))):
            xv, vv = x[:, sl], valid[:, sl]
            count = vv.sum(axis=1).astype(np.float32)
            mean = np.where(vv, xv, 0).sum(axis=1, dtype=np.float32) / np.maximum(count, 1)
            m2 = np.where(vv, (xv - mean[:, None]) ** 2, 0).sum(axis=1, dtype=np.float32)
            out[:, 3 * half:3 * half + 3] = np.stack([count, mean, m2], axis=1)
    charge("vector", api, data.shape)
    return emit(out, result_dtype(dtype, dtypes.float32), dst, None, api)


def bn_aggr(data: NKITensor, *, dtype: Any = None, dst: Optional[NKITensor] = None) -> Optional[NKITensor]:
    api = "bn_aggr"
    check_tile(data, api, "data")
    p = data.shape[0]
    x = fp32(np.asarray(data.read())).reshape(p, -1)
    if x.shape[1] % 3:
        fail("err_shape_mismatch", f"'bn_aggr' takes bn_stats results ((P, 6k)), got {data.shape}")
    g = x.reshape(p, -1, 3)
    count, mean, m2 = g[..., 0], g[..., 1], g[..., 2]
    with quiet():
        total = count.sum(axis=1)
        mu = (count * mean).sum(axis=1) / np.maximum(total, 1)
        var = (m2 + count * (mean - mu[:, None]) ** 2).sum(axis=1) / np.maximum(total, 1)
    charge("vector", api, data.shape)
    return emit(np.stack([mu, var], axis=1).astype(np.float32),
                 result_dtype(dtype, dtypes.float32), dst, None, api)


def scalar_tensor_tensor(data: NKITensor, op0: Any, operand0: Any, op1: Any, operand1: NKITensor, *,
                         reverse0: bool = False, reverse1: bool = False, dtype: Any = None, mask: Any = None,
                         dst: Optional[NKITensor] = None) -> Optional[NKITensor]:
    """``(data op0 operand0) op1 operand1``: a scalar (or (P, 1)) then a tile, in one Vector instruction."""
    api = "scalar_tensor_tensor"
    check_tile(data, api, "data")
    check_tile(operand1, api, "operand1")
    same_partitions(api, ("data", data), ("operand1", operand1))
    a = per_partition(operand0, data, api, "operand0")
    x = fp32(np.asarray(data.read()))
    t = fp32(np.asarray(operand1.read())).reshape(x.shape)
    with quiet():
        f0, f1 = BINARY[op_name(op0)], BINARY[op_name(op1)]
        y = f0(a, x) if reverse0 else f0(x, a)
        y = f1(t, y) if reverse1 else f1(y, t)
    charge("vector", api, data.shape)
    out_dtype = result_dtype(dtype, lambda: dtypes.promote(data.dtype, operand1.dtype))
    return emit(np.asarray(y, dtype=np.float32), out_dtype, dst, as_mask(mask), api)


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
    a = fp32(np.asarray(data0.read())).reshape(p, -1)
    b = fp32(np.asarray(data1.read())).reshape(p, -1)
    prev = np.broadcast_to(per_partition(initial, data0, api, "initial"), (p, 1)).reshape(p).astype(np.float32)
    f0, f1 = BINARY[op_name(op0)], BINARY[op_name(op1)]
    out = np.empty_like(a)
    with quiet():
        for i in range(a.shape[1]):
            y = f0(a[:, i], prev) if reverse0 else f0(prev, a[:, i])
            prev = f1(b[:, i], y) if reverse1 else f1(y, b[:, i])
            out[:, i] = prev
    charge("vector", api, data0.shape)
    return emit(out.reshape(data0.shape), result_dtype(dtype, data0.dtype), dst,
                 None, api)


_REDUCE_OPS = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply, "maximum": np.maximum,
               "minimum": np.minimum}


def _tensor_scalar_op(x: np.ndarray, op0: Any, operand0: Any, reverse0: bool, data: NKITensor,
                      api: str) -> np.ndarray:
    """``x op0 operand0`` (or reversed) in fp32 for an arithmetic ``op0``; a unary op0 ignores its operand."""
    name = op_name(op0)
    if name in INT_BINARY:
        fail("err_unsupported_op", f"'{api}' takes an arithmetic op0, not the bitvec operation {name}")
    if name not in BINARY and name not in UNARY:
        fail("err_unsupported_op", f"'{api}' takes an arithmetic op0, got {name}")
    with quiet():
        if name in BINARY:
            v = per_partition(operand0, data, api, "operand0")
            y = BINARY[name](v, x) if reverse0 else BINARY[name](x, v)
        else:
            # AWS: operand0 "must be None or 0 when op0 is a unary operator (e.g., nl.abs)".
            if operand0 is not None and (isinstance(operand0, NKITensor) or float(operand0) != 0.0):
                fail("err_invalid_argument", f"'{api}': operand0 must be None or 0 with the unary op0 {name}, got "
                                             f"{operand0!r}")
            y = UNARY[name][1](x)
    return np.asarray(y, dtype=np.float32)


def tensor_scalar_reduce(data: NKITensor, op0: Any, operand0: Any, reduce_op: Any,
                         reduce_res: Optional[NKITensor], *, reverse0: bool = False, reduce_cmd: Any = None,
                         reduce_init: Any = None, reduce_res_negate: bool = False, dtype: Any = None,
                         mask: Any = None, dst: Optional[NKITensor] = None) -> Optional[NKITensor]:
    """``data op0 operand0``, and its reduction over all free axes folded into the Vector engine's
    accumulation registers by ``reduce_cmd`` (reset_reduce when None); ``reduce_res`` (P, 1) receives the
    registers, negated with ``reduce_res_negate`` (the registers keep their sign)."""
    api = "tensor_scalar_reduce"
    check_tile(data, api, "data")
    if reduce_res is not None:
        check_reduce_res(reduce_res, data.shape[0], api)
    red_op = accumulator.fold_name(reduce_op, ("add", "subtract", "multiply", "maximum", "minimum"), api)
    cmd = accumulator.command_name(reduce_cmd if reduce_cmd is not None else "reset_reduce", api)
    if cmd not in ("reset_reduce", "reduce", "load_reduce"):
        fail("err_unsupported_op", f"'{api}' takes reduce_cmd reset_reduce, reduce or load_reduce, got {cmd}")
    if reduce_init is not None and cmd != "load_reduce":
        fail("err_invalid_argument", f"'{api}': reduce_init is only read with reduce_cmd=load_reduce, got {cmd}")
    m = as_mask(mask)
    x = fp32(np.asarray(data.read(m)))
    y = _tensor_scalar_op(x, op0, operand0, reverse0, data, api)
    init = None if reduce_init is None else per_partition(reduce_init, data, api, "reduce_init")
    acc = accumulator.accumulate("vector", api, y, red_op, cmd, init)
    charge("vector", api, data.shape)  # before any write: the schedule gives writes to the last counted one
    if reduce_res is not None:
        store_into(reduce_res, (-acc if reduce_res_negate else acc).reshape(reduce_res.shape), api)
    return emit(y, result_dtype(dtype, data.dtype), dst, m, api)


# tensor_scalar_cumulative's documented dtypes: 32-bit integers are an ISA limitation.
_CUMULATIVE_DTYPES = ("bfloat16", "float16", "float32", "float8_e4m3", "float8_e5m2", "uint8", "uint16", "int8",
                      "int16")


def tensor_scalar_cumulative(src: NKITensor, op0: Any, op1: Any, imm0: Any, imm1: Any = None, *,
                             reduce_cmd: Any = None, dst: NKITensor) -> None:
    """A running ``op1`` over each partition's elements of ``src op0 imm0``: reg = op1(op0(x[i], imm0), reg),
    dst[i] = reg, with reg started by ``reduce_cmd`` (reset_reduce: op1's identity; load_reduce: imm1;
    reduce: the registers). The final reg stays in the Vector engine's registers."""
    api = "tensor_scalar_cumulative"
    check_tile(src, api, "src")
    check_tile(dst, api, "dst")
    same_partitions(api, ("src", src), ("dst", dst))
    for arg, t in (("src", src), ("dst", dst)):
        if dtypes.name(t.dtype) not in _CUMULATIVE_DTYPES:
            fail("err_unsupported_dtype", f"'{api}': {arg} must be one of {', '.join(_CUMULATIVE_DTYPES)}, got "
                                          f"{dtypes.name(t.dtype)}")
    fold = accumulator.fold_name(op1, ("add", "subtract", "multiply", "maximum", "minimum"), api)
    cmd = accumulator.command_name(reduce_cmd if reduce_cmd is not None else "reset_reduce", api)
    if cmd not in ("reset_reduce", "reduce", "load_reduce"):
        fail("err_unsupported_op", f"'{api}' takes reduce_cmd reset_reduce, reduce or load_reduce, got {cmd}")
    if cmd == "load_reduce" and imm1 is None:
        fail("err_missing_argument", f"'{api}' with reduce_cmd=load_reduce needs imm1, the accumulator's start")
    p = src.shape[0]
    x = _tensor_scalar_op(fp32(np.asarray(src.read())), op0, imm0, False, src, api).reshape(p, -1)
    init = None if imm1 is None else per_partition(imm1, src, api, "imm1")
    reg = accumulator.start("vector", cmd, fold, p, init).reshape(p)
    fn = accumulator.FOLDS[fold][0]
    out = np.empty_like(x)
    with quiet():
        if fold == "add":
            out = np.cumsum(x, axis=1, dtype=np.float32) + reg[:, None]
        elif fold in ("maximum", "minimum"):
            out = fn.accumulate(np.concatenate([reg[:, None], x], axis=1), axis=1)[:, 1:]
        else:  # the order matters (subtract) or rounding would differ from a sequential product
            for i in range(x.shape[1]):
                reg = fn(x[:, i], reg)
                out[:, i] = reg
    out = np.asarray(out, dtype=np.float32)
    if out.shape[1]:
        accumulator.set_registers("vector", out[:, -1])
    charge("vector", api, src.shape)
    store_into(dst, out.reshape(dst.shape), api)


def exponential(src: NKITensor, *, max_value: Any = 0.0, reduce_res: Optional[NKITensor] = None,
                reduce_cmd: Any = None, reduce_init: Any = 0.0, dst: NKITensor) -> None:
    """dst = exp(src - max_value) (max_value a scalar or one per partition); with a reduce_cmd other than
    idle, the sum of the results is folded into the Vector engine's registers and ``reduce_res`` (P, 1)
    receives them."""
    api = "exponential"
    require_generation(api, 4)
    check_tile(src, api, "src")
    check_tile(dst, api, "dst")
    same_partitions(api, ("src", src), ("dst", dst))
    cmd = accumulator.command_name(reduce_cmd if reduce_cmd is not None else "idle", api)
    if cmd == "reset":
        fail("err_unsupported_op", f"'{api}' takes reduce_cmd idle, reset_reduce, reduce or load_reduce")
    init_given = isinstance(reduce_init, NKITensor) or float(reduce_init) != 0.0
    if init_given and cmd != "load_reduce":
        fail("err_invalid_argument", f"'{api}': reduce_init is only read with reduce_cmd=load_reduce, got {cmd}")
    x = fp32(np.asarray(src.read()))
    shift = per_partition(max_value, src, api, "max_value")
    with quiet():
        y = np.exp(x - shift, dtype=np.float32)
    if cmd != "idle":
        init = per_partition(reduce_init, src, api, "reduce_init") if cmd == "load_reduce" else None
        acc = accumulator.accumulate("vector", api, y, "add", cmd, init)
    else:
        acc = accumulator.read("vector", src.shape[0])
    if reduce_res is not None:
        check_reduce_res(reduce_res, src.shape[0], api, float_only=True)
    charge("vector", api, src.shape)  # before any write: the schedule gives writes to the last counted one
    if reduce_res is not None:
        store_into(reduce_res, acc.reshape(reduce_res.shape), api)
    store_into(dst, y.reshape(dst.shape), api)


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

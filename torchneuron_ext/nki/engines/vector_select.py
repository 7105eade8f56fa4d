"""The Vector engine's selections and data-dependent moves: selections with a running reduction
(select_reduce, range_select), the top-8 instructions and partition shuffles within a quadrant."""
from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from .. import dtypes
from ..errors import fail
from ..indexing import as_mask
from ..tensor import NKITensor
from . import accumulator
from .elementwise import BINARY, op_name
from .operands import check_reduce_res
from .operands import (charge, check_tile, emit, fp32, free_size, mask_for, operand_pair, per_partition,
                       require_generation, result_dtype, same_partitions, scratch, store_into)


# The Vector engine's top-k instructions (max8, nc_find_index8, nc_match_replace8) work on 8 values per
# partition, over at most 16384 elements (the NKI ISA reference).
TOP_K = 8


TOP_K_MAX_FREE = 16384


def max8(src: NKITensor, *, dtype: Any = None, dst: Optional[NKITensor] = None) -> Optional[NKITensor]:
    """The 8 largest values of each partition, in descending order: (P, 8)."""
    api = "max8"
    check_tile(src, api, "src")
    p = src.shape[0]
    x = fp32(np.asarray(src.read())).reshape(p, -1)
    if x.shape[1] < TOP_K or x.shape[1] > TOP_K_MAX_FREE:
        fail("err_size_of_dimension_exceed_arch_limit", f"'{api}' takes {TOP_K} to {TOP_K_MAX_FREE} elements per "
                                                        f"partition, got "
                                                        f"{x.shape[1]}")
    top = _top8(x)
    charge("vector", api, src.shape)
    return emit(top, result_dtype(dtype, src.dtype), dst, None, api)


def _top8(x: np.ndarray) -> np.ndarray:
    """Each row's 8 largest values, descending, NaN last: the first 8 of the descending sort. A partition
    selects them in linear time (the NKI Library's top-k calls max8 K/8 times per row of thousands); only
    where ties of values that differ in bits (signed zeros, NaNs) reach the 8 is the full sort's pick kept."""
    if x.shape[1] > TOP_K:
        neg = np.negative(x, out=scratch("max8", x.shape, x.dtype))
        neg.partition(TOP_K - 1, axis=1)  # in place: np.partition's copy is fresh pages, slower than the selection
        top = -np.sort(neg[:, :TOP_K], axis=1)
        if not ((top == 0) | np.isnan(top)).any():
            return top
    return -np.sort(-x, axis=1)[:, :TOP_K]


def find_index8(data: NKITensor, vals: NKITensor, *, dtype: Any = None,
                dst: Optional[NKITensor] = None) -> Optional[NKITensor]:
    """For each partition, the index of the first element equal to each of the 8 values in ``vals``."""
    api = "nc_find_index8"
    check_tile(data, api, "data")
    check_tile(vals, api, "vals")
    p = data.shape[0]
    x = fp32(np.asarray(data.read())).reshape(p, -1)
    v = fp32(np.asarray(vals.read())).reshape(p, -1)[:, :8]
    eq = x[:, None, :] == v[:, :, None]
    idx = np.where(eq.any(axis=2), eq.argmax(axis=2), np.iinfo(np.uint32).max).astype(np.int64)
    charge("vector", api, data.shape)
    return emit(idx, result_dtype(dtype, dtypes.uint32), dst, None, api)


def _running_max(result: np.ndarray, reduce_cmd: Any, reduce_op: Any, reduce_res: Optional[NKITensor],
                 api: str) -> None:
    """Fold each partition's max of ``result`` into the Vector engine's registers as ``reduce_cmd`` says
    (engines/accumulator.py); ``reduce_res`` receives the registers."""
    if reduce_op is not None:
        accumulator.fold_name(reduce_op, ("maximum",), api)
    cmd = accumulator.command_name(reduce_cmd, api)
    if cmd == "idle" and reduce_res is None:
        return
    acc = accumulator.accumulate("vector", api, result, "maximum", cmd)
    if reduce_res is not None:
        check_reduce_res(reduce_res, result.shape[0], api, float_only=True)
        store_into(reduce_res, acc.reshape(reduce_res.shape), api)


# select_reduce's documented dtypes: on_true may not be a 32-bit integer or tf32; predicate is a narrow integer.
_SELECT_REFUSED = ("tfloat32", "int32", "uint32")


_PREDICATE_DTYPES = ("int8", "uint8", "int16", "uint16", "bool")


def select_reduce(predicate: NKITensor, on_true: NKITensor, on_false: Any, *, dst: Optional[NKITensor] = None,
                  reduce_res: Optional[NKITensor] = None, reduce_cmd: Any = None, reduce_op: Any = None,
                  reverse_pred: bool = False, dtype: Any = None, mask: Any = None) -> Optional[NKITensor]:
    """``where(predicate, on_true, on_false)`` (on_false a scalar or (P, 1)), with the Vector engine's running
    max. ``reduce_cmd`` None (the legacy dialect's default) folds when ``reduce_res`` is given, as reset_reduce."""
    api = "select_reduce"
    operand_pair(api, ("on_true", on_true), ("predicate", predicate))
    if dtypes.name(predicate.dtype) not in _PREDICATE_DTYPES:
        fail("err_unsupported_dtype", f"'{api}': predicate must be int8, uint8, int16 or uint16, got "
                                      f"{dtypes.name(predicate.dtype)}")
    if dtypes.name(on_true.dtype) in _SELECT_REFUSED:
        fail("err_unsupported_dtype", f"'{api}': on_true cannot be {dtypes.name(on_true.dtype)} (tfloat32, int32 "
                                      f"and uint32 are not supported)")
    if dst is not None:
        same_partitions(api, ("on_true", on_true), ("dst", dst))
    pred = np.asarray(predicate.read()).reshape(on_true.shape) != 0
    if reverse_pred:
        pred = ~pred
    f = per_partition(on_false, on_true, api, "on_false")
    result = np.where(pred, fp32(np.asarray(on_true.read())), f).astype(np.float32)
    cmd = reduce_cmd if reduce_cmd is not None else ("reset_reduce" if reduce_res is not None else "idle")
    charge("vector", api, on_true.shape)  # before any write: the schedule gives writes to the last counted one
    _running_max(result, cmd, reduce_op, reduce_res, api)
    out_dtype = result_dtype(dtype, dst.dtype if dst is not None else on_true.dtype)
    return emit(result if dst is None else result.reshape(dst.shape), out_dtype, dst, as_mask(mask), api)


def range_select(on_true: NKITensor, comp_op0: Any, comp_op1: Any, bound0: Any, bound1: Any, *,
                 reduce_cmd: Any = None, reduce_res: Optional[NKITensor] = None, reduce_op: Any = None,
                 range_start: Any = 0, on_false_value: Any = None, dtype: Any = None, mask: Any = None,
                 dst: Optional[NKITensor] = None) -> Optional[NKITensor]:
    """Keep the elements whose free index + range_start satisfies both comparisons with the per-partition
    bounds, ``on_false_value`` (fp32's lowest by default) elsewhere; the max of the result is folded into the
    Vector engine's registers (``reduce_cmd``, reset_reduce by default). NeuronCore-v3+."""
    api = "range_select"
    check_tile(on_true, api, "on_true_tile")
    require_generation(api, 3)
    if not dtypes.is_float(on_true.dtype):
        fail("err_unsupported_dtype", f"'{api}': on_true_tile must be a float tile, got {dtypes.name(on_true.dtype)}")
    names = {"equal", "less", "less_equal", "greater", "greater_equal"}
    ops = [op_name(comp_op0), op_name(comp_op1)]
    if any(o not in names for o in ops):
        fail("err_unsupported_op", f"'{api}' compares with equal, less, less_equal, greater or greater_equal, "
                                   f"got {ops}")
    if dst is not None:
        same_partitions(api, ("on_true_tile", on_true), ("dst", dst))
    p = on_true.shape[0]
    idx = (np.arange(free_size(on_true.shape), dtype=np.float32) + np.float32(range_start)).reshape(1, -1)
    b0 = per_partition(bound0, on_true, api, "bound0")
    b1 = per_partition(bound1, on_true, api, "bound1")
    b0 = np.asarray(b0, np.float32).reshape(p, 1) if np.ndim(b0) else b0
    b1 = np.asarray(b1, np.float32).reshape(p, 1) if np.ndim(b1) else b1
    keep = BINARY[ops[0]](idx, b0) & BINARY[ops[1]](idx, b1)
    fill = np.float32(np.finfo(np.float32).min if on_false_value is None else on_false_value)
    x = fp32(np.asarray(on_true.read())).reshape(p, -1)
    result = np.where(keep, x, fill).astype(np.float32).reshape(on_true.shape)
    charge("vector", api, on_true.shape)  # before any write: the schedule gives writes to the last counted one
    _running_max(result, reduce_cmd if reduce_cmd is not None else "reset_reduce", reduce_op, reduce_res, api)
    out_dtype = result_dtype(dtype, dst.dtype if dst is not None else on_true.dtype)
    return emit(result if dst is None else result.reshape(dst.shape), out_dtype, dst, as_mask(mask), api)


def match_replace8(data: NKITensor, vals: NKITensor, imm: Any, *, dst_idx: Optional[NKITensor] = None,
                   mask: Any = None, dtype: Any = None, dst: Optional[NKITensor] = None) -> Optional[NKITensor]:
    """Replace, per partition, the first occurrence of each of the 8 values in ``vals`` by ``imm``; their
    indices go to ``dst_idx`` when given."""
    api = "nc_match_replace8"
    check_tile(data, api, "data")
    check_tile(vals, api, "vals")
    p = data.shape[0]
    src = fp32(np.asarray(data.read())).reshape(p, -1)
    x = scratch("nc_match_replace8", src.shape, np.float32)  # the working copy: emit copies it out
    np.copyto(x, src)
    v = fp32(np.asarray(vals.read())).reshape(p, -1)
    if v.shape[1] != TOP_K:
        fail("err_shape_mismatch", f"'{api}': vals must hold {TOP_K} values per partition, got {v.shape[1]}")
    if x.shape[1] > TOP_K_MAX_FREE:
        fail("err_size_of_dimension_exceed_arch_limit", f"'{api}' takes at most {TOP_K_MAX_FREE} elements per "
                                                        f"partition")
    m = as_mask(mask)
    allowed = None if m is None else np.broadcast_to(mask_for(m, data.shape), data.shape).reshape(p, -1)
    # AWS's reference: vals are matched from the last to the first, each taking the first position not yet
    # replaced, so duplicate vals pair with their matches in descending order across dst_idx. A value that
    # matches nothing leaves the all-ones sentinel nc_find_index8 documents.
    idx = np.full((p, TOP_K), np.iinfo(np.uint32).max, dtype=np.int64)
    _match_replace(x, v, np.float32(imm), allowed, idx)
    if dst_idx is not None:
        check_tile(dst_idx, api, "dst_idx")
    charge("vector", api, data.shape)  # before any write: the schedule gives writes to the last counted one
    if dst_idx is not None:
        store_into(dst_idx, idx.reshape(dst_idx.shape), api)
    out_dtype = result_dtype(dtype, data.dtype)
    return emit(x.reshape(data.shape), out_dtype, dst, None, api)


def _match_replace(x: np.ndarray, v: np.ndarray, imm: np.float32, allowed: Optional[np.ndarray],
                   idx: np.ndarray) -> None:
    """nc_match_replace8 on (P, F) ``x`` in place, the matched positions into ``idx`` (P, 8).

    Only elements at least the row's smallest val can match (a NaN matches nothing), and when the vals are
    the row's top 8 (max8's output, as in the NKI Library's top-k) those are about 8 a row: the matching then
    runs on them alone instead of 8 passes over the row. Many candidates: the 8 passes."""
    with np.errstate(invalid="ignore"):
        low = np.fmin.reduce(v, axis=1)[:, None]
        candidates = x >= low
    if allowed is not None:
        candidates &= allowed
    # Flat positions, row-major (each row's candidates in column order): numpy's 2-D nonzero is 80x slower.
    flat = np.flatnonzero(candidates)
    if flat.size > 2 * TOP_K * x.shape[0] or not x.flags.c_contiguous:
        rows = np.arange(x.shape[0])
        for j in range(TOP_K - 1, -1, -1):  # all partitions at once, one of the 8 values at a time
            hits = x == v[:, j:j + 1]
            if allowed is not None:
                hits &= allowed
            found = hits.any(axis=1)
            first = hits.argmax(axis=1)
            idx[found, j] = first[found]
            x[rows[found], first[found]] = imm
        return
    r, c = np.divmod(flat, x.shape[1])
    values = x.reshape(-1)[flat]
    for j in range(TOP_K - 1, -1, -1):
        hit = np.flatnonzero(values == v[r, j])
        if not hit.size:
            continue
        first = hit[np.unique(r[hit], return_index=True)[1]]  # each row's first hit
        idx[r[first], j] = c[first]
        values[first] = imm
    x.reshape(-1)[flat] = values


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
    if free_size(src.shape) != free_size(dst.shape):
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
        valid = valid & mask_for(m, dst.shape)
    charge("vector", api, dst.shape)
    dst.write(out.reshape(dst.shape), valid)

"""The Vector engine's selections and data-dependent moves: selections with a running reduction
(select_reduce, range_select), the top-8 instructions and partition shuffles within a quadrant."""
from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from .. import dtypes, runtime
from ..errors import fail
from ..indexing import as_mask
from ..tensor import NKITensor
from .elementwise import BINARY, op_name
from .operands import (charge, check_tile, emit, fp32, free_size, mask_for, operand_pair, per_partition, result_dtype,
                       store_into)


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
    top = -np.sort(-x, axis=1)[:, :TOP_K]
    charge("vector", api, src.shape)
    return emit(top, result_dtype(dtype, src.dtype), dst, None, api)


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
    operand_pair(api, ("on_true", on_true), ("predicate", predicate))
    if dtypes.is_float(predicate.dtype):
        fail("err_unsupported_dtype", f"'{api}': predicate must hold integers, got {dtypes.name(predicate.dtype)}")
    pred = np.asarray(predicate.read()).reshape(on_true.shape) != 0
    if reverse_pred:
        pred = ~pred
    f = per_partition(on_false, on_true, api, "on_false")
    result = np.where(pred, fp32(np.asarray(on_true.read())), f).astype(np.float32)
    _vector_accumulate(result, reduce_cmd, reduce_op, reduce_res, api)
    charge("vector", api, on_true.shape)
    out_dtype = result_dtype(dtype, dst.dtype if dst is not None else on_true.dtype)
    return emit(result, out_dtype, dst, as_mask(mask), api)


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
    idx = (np.arange(free_size(on_true.shape), dtype=np.float32) + np.float32(range_start)).reshape(1, -1)
    b0 = per_partition(bound0, on_true, api, "bound0")
    b1 = per_partition(bound1, on_true, api, "bound1")
    b0 = np.asarray(b0, np.float32).reshape(p, 1) if np.ndim(b0) else b0
    b1 = np.asarray(b1, np.float32).reshape(p, 1) if np.ndim(b1) else b1
    keep = BINARY[ops[0]](idx, b0) & BINARY[ops[1]](idx, b1)
    fill = np.float32(np.finfo(np.float32).min if on_false_value is None else on_false_value)
    x = fp32(np.asarray(on_true.read())).reshape(p, -1)
    result = np.where(keep, x, fill).astype(np.float32).reshape(on_true.shape)
    _vector_accumulate(result, reduce_cmd, reduce_op, reduce_res, api)
    charge("vector", api, on_true.shape)
    out_dtype = result_dtype(dtype, dst.dtype if dst is not None else on_true.dtype)
    return emit(result, out_dtype, dst, as_mask(mask), api)


def match_replace8(data: NKITensor, vals: NKITensor, imm: Any, *, dst_idx: Optional[NKITensor] = None,
                   mask: Any = None, dtype: Any = None, dst: Optional[NKITensor] = None) -> Optional[NKITensor]:
    """Replace, per partition, the first occurrence of each of the 8 values in ``vals`` by ``imm``; their
    indices go to ``dst_idx`` when given."""
    api = "nc_match_replace8"
    check_tile(data, api, "data")
    check_tile(vals, api, "vals")
    p = data.shape[0]
    x = fp32(np.asarray(data.read())).reshape(p, -1).copy()
    v = fp32(np.asarray(vals.read())).reshape(p, -1)
    if v.shape[1] != TOP_K:
        fail("err_shape_mismatch", f"'{api}': vals must hold {TOP_K} values per partition, got {v.shape[1]}")
    if x.shape[1] > TOP_K_MAX_FREE:
        fail("err_size_of_dimension_exceed_arch_limit", f"'{api}' takes at most {TOP_K_MAX_FREE} elements per "
                                                        f"partition")
    m = as_mask(mask)
    allowed = np.ones_like(x, dtype=bool) if m is None else np.broadcast_to(
        mask_for(m, data.shape), data.shape).reshape(p, -1)
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
    charge("vector", api, data.shape)
    out_dtype = result_dtype(dtype, data.dtype)
    return emit(x.reshape(data.shape), out_dtype, dst, None, api)


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

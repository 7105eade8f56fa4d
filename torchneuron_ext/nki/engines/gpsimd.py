"""The GpSimd engine: cross-partition work (partition reductions, per-core gathers), iota and affine
patterns (iota, affine_select) and segment bounds."""
from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from .. import dtypes, runtime
from ..errors import fail, NKIUnsupportedError
from ..indexing import as_mask
from ..tensor import NKITensor
from .operands import charge, check_tile, emit, fp32, free_size, quiet, result_dtype, store_into
from .vector import REDUCTIONS


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
    with quiet():
        result = np.where(pred, fp32(np.asarray(on_true.read())), np.float32(on_false_value))
    charge("gpsimd", api, on_true.shape)
    return emit(result, result_dtype(dtype, on_true.dtype), dst, as_mask(mask), api)


def partition_reduce(op: str, data: NKITensor, *, dtype: Any = None, dst: Optional[NKITensor] = None
                     ) -> Optional[NKITensor]:
    check_tile(data, "tensor_partition_reduce", "data", allow_psum=False)
    fn, _ = REDUCTIONS[op]
    with quiet():
        result = fn(fp32(np.asarray(data.read())), axis=0, keepdims=True)
    runtime.current().costs.compute("gpsimd", "tensor_partition_reduce", free_size(data.shape) * data.shape[0])
    return emit(np.asarray(result), result_dtype(dtype, data.dtype), dst, None,
                 "tensor_partition_reduce")


def iota_expr(expr: Any, dtype: Any) -> NKITensor:
    vals = np.asarray(expr)
    if vals.ndim < 2:
        fail("err_insufficient_rank", "nisa.iota needs a 2-D index expression, e.g. nl.arange(128)[:, None]")
    charge("gpsimd", "iota", vals.shape)
    return emit(vals, dtypes.as_dtype(dtype), None, None, "iota")


def iota_pattern(dst: NKITensor, pattern: Sequence[Sequence[int]], offset: int = 0,
                 channel_multiplier: int = 0) -> None:
    check_tile(dst, "iota", "dst")
    vals = affine_pattern_values(dst.shape[0], pattern, offset, channel_multiplier)
    charge("gpsimd", "iota", dst.shape)
    store_into(dst, vals.reshape(dst.shape), "iota")


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
    charge("gpsimd", api, segment_ids.shape)
    out_dtype = result_dtype(dtype, segment_ids.dtype)
    return emit(np.stack([start, end])[None].astype(np.float32), out_dtype, dst, None, api)


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
    charge("gpsimd", api, (p, nvi * n))
    return emit(out, src.dtype, None, None, api)

"""The GpSimd engine: cross-partition work (partition reductions, per-core gathers), gathers within a
partition (nc_n_gather), iota and affine patterns (iota, affine_select), segment bounds, nonzero
positions and the 16-partition top-k (topk)."""
from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from .. import dtypes, runtime
from ..errors import fail, NKIUnsupportedError
from ..indexing import as_mask
from ..tensor import NKITensor
from .operands import (charge, check_tile, emit, fp32, free_size, quiet, require_generation, result_dtype,
                       store_into)
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
    fn = np.mean if op == "mean" else REDUCTIONS.get(op, (None,))[0]
    if fn is None:
        fail("err_unsupported_op", f"'tensor_partition_reduce' reduces with add, average, max, min, multiply and "
                                   f"the bitwise and logical operators, not {op}")
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
    for arg, t in (("segment_ids", segment_ids), ("dst", dst)):
        if t is not None and t.dtype not in (dtypes.float32, dtypes.int32):
            fail("err_unsupported_dtype", f"'{api}': {arg} must be float32 or int32, got {dtypes.name(t.dtype)}")
    s = np.asarray(segment_ids.read()).reshape(-1)
    if (s < 0).any():
        fail("err_invalid_argument", f"'{api}': segment ids must be non-negative, got {s.min()}")
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


# local_gather's limits (the NKI ISA reference): contiguous elements per index, and indices per core.
LOCAL_GATHER_ELEMENTS = (1, 2, 4, 8, 16, 32)


LOCAL_GATHER_MAX_INDICES = 4096


def local_gather(src: NKITensor, index: NKITensor, num_elem_per_idx: int = 1,
                 num_valid_indices: Optional[int] = None, *, mask: Any = None,
                 dst: Optional[NKITensor] = None) -> Optional[NKITensor]:
    """GpSimd gather within each core's 16 partitions: the core's index slice, flattened partition-first,
    gives element offsets into each partition's free data; ``num_elem_per_idx`` contiguous elements are
    read from each. Result (P, num_valid_indices, num_elem_per_idx) in src's dtype."""
    api = "local_gather"
    check_tile(src, api, "src_buffer", allow_psum=False)
    check_tile(index, api, "index", allow_psum=False)
    if mask is not None and as_mask(mask) is not None:
        raise NKIUnsupportedError("nki.isa.local_gather(mask=...) is not modelled by the simulator")
    if index.dtype != dtypes.uint16:
        fail("err_unsupported_dtype", f"'{api}': indices must be uint16, got {dtypes.name(index.dtype)}")
    p, g = src.shape[0], GPSIMD_PARTITIONS_PER_CORE
    if index.shape[0] != p or p % g:
        fail("err_num_partition_mismatch", f"'{api}': src_buffer and index need the same multiple of {g} "
                                           f"partitions, got {src.shape} and {index.shape}")
    flat = np.asarray(src.read()).reshape(p, -1)
    idx = np.asarray(index.read()).astype(np.int64).reshape(p, -1)
    per_core = idx.shape[1] * g
    nvi = int(num_valid_indices) if num_valid_indices else per_core
    n = int(num_elem_per_idx)
    if n not in LOCAL_GATHER_ELEMENTS:
        fail("err_invalid_argument", f"'{api}': num_elem_per_idx must be one of {list(LOCAL_GATHER_ELEMENTS)}, "
                                     f"got {num_elem_per_idx}")
    if not 0 < nvi <= min(per_core, LOCAL_GATHER_MAX_INDICES):
        fail("err_size_of_dimension_exceed_arch_limit",
             f"'{api}': num_valid_indices must be in 1..{min(per_core, LOCAL_GATHER_MAX_INDICES)} (the index "
             f"slice of a core holds {per_core}; a core gathers at most {LOCAL_GATHER_MAX_INDICES}), got "
             f"{num_valid_indices}")
    out = np.empty((p, nvi, n), dtype=src.dtype)
    for c in range(p // g):
        offsets = idx[c * g:(c + 1) * g].flatten(order="F")[:nvi]
        if offsets.size and (offsets.min() < 0 or offsets.max() + n > flat.shape[1]):
            fail("err_tensor_access_out_of_bound",
                 f"'{api}': index range [{offsets.min()}, {offsets.max() + n - 1}] exceed the {flat.shape[1]} "
                 f"elements of a partition")
        out[c * g:(c + 1) * g] = flat[c * g:(c + 1) * g][:, offsets[:, None] + np.arange(n)]
    charge("gpsimd", api, (p, nvi * n))
    if dst is not None:
        _same_dtype(api, "src_buffer", src, dst)
        check_tile(dst, api, "dst", allow_psum=False)
        if dst.shape[0] != p or free_size(dst.shape) != nvi * n:
            fail("err_shape_mismatch", f"'{api}' gathers ({p}, {nvi}, {n}) elements; dst is {dst.shape}")
        store_into(dst, out.reshape(dst.shape), api)
        return None
    return emit(out, src.dtype, None, None, api)


def _same_dtype(api: str, arg: str, src: NKITensor, dst: NKITensor) -> None:
    if src.dtype != dst.dtype:
        fail("err_unsupported_dtype", f"'{api}' copies without a cast: dst must have {arg}'s dtype "
                                      f"({dtypes.name(src.dtype)}), got {dtypes.name(dst.dtype)}")


def n_gather(data: NKITensor, indices: NKITensor, *, dst: NKITensor, api: str = "nc_n_gather") -> None:
    """``nc_n_gather`` (and ``nl.gather_flattened``, its predecessor): in each partition, dst[p, j] =
    data[p, flat][indices[p, j]] (the free axes of data flattened); indices uint32, every tile in SBUF, no
    cast."""
    check_tile(data, api, "data", allow_psum=False)
    check_tile(indices, api, "indices", allow_psum=False)
    check_tile(dst, api, "dst", allow_psum=False)
    _same_dtype(api, "data", data, dst)
    if indices.dtype != dtypes.uint32:
        fail("err_unsupported_dtype", f"'{api}': indices must be uint32, got {dtypes.name(indices.dtype)}")
    p = data.shape[0]
    if indices.shape[0] != p or dst.shape[0] != p:
        fail("err_num_partition_mismatch", f"'{api}': data, indices and dst need the same partitions, got "
                                           f"{data.shape}, {indices.shape} and {dst.shape}")
    if free_size(indices.shape) != free_size(dst.shape):
        fail("err_shape_mismatch", f"'{api}': dst {dst.shape} must hold as many elements per partition as "
                                   f"indices {indices.shape}")
    flat = np.asarray(data.read()).reshape(p, -1)
    idx = np.asarray(indices.read()).astype(np.int64).reshape(p, -1)
    if idx.size and (idx.min() < 0 or idx.max() >= flat.shape[1]):
        fail("err_tensor_access_out_of_bound", f"'{api}': indices range [{idx.min()}, {idx.max()}] outside the "
                                               f"{flat.shape[1]} elements of a partition of data")
    out = np.take_along_axis(flat, idx, axis=1)
    # The ISA runs one instruction group per 512 elements of a partition (the "n" of the name).
    runtime.current().costs.compute("gpsimd", api, free_size(dst.shape) + free_size(data.shape))
    store_into(dst, out.reshape(dst.shape), api)


def nonzero_with_count(src: NKITensor, *, index_offset: int = 0, padding_val: int = -1, dst: NKITensor) -> None:
    """On partitions 0, 16, ..., 112 (each GpSimd core's first): the positions of the nonzero elements
    (+ index_offset), then padding_val, then their count, in T + 1 elements. Other partitions of dst are
    left alone. NeuronCore-v3+."""
    api = "nonzero_with_count"
    require_generation(api, 3)
    check_tile(src, api, "src", allow_psum=False)
    check_tile(dst, api, "dst", allow_psum=False)
    if src.dtype not in (dtypes.float32, dtypes.int32):
        fail("err_unsupported_dtype", f"'{api}': src must be float32 or int32, got {dtypes.name(src.dtype)}")
    if dst.dtype != dtypes.int32:
        fail("err_unsupported_dtype", f"'{api}': dst must be int32, got {dtypes.name(dst.dtype)}")
    for name, v in (("index_offset", index_offset), ("padding_val", padding_val)):
        if not isinstance(v, (int, np.integer)) or not -2 ** 31 <= int(v) < 2 ** 31:
            raise TypeError(f"'{api}': {name} must be an int32, got {v!r}")
    p, t = src.shape[0], free_size(src.shape)
    if dst.shape[0] != p:
        fail("err_num_partition_mismatch", f"'{api}': src {src.shape} and dst {dst.shape} differ in partitions")
    if free_size(dst.shape) != t + 1:
        fail("err_shape_mismatch", f"'{api}': dst must hold one element more than src per partition ({t + 1}), "
                                   f"got {free_size(dst.shape)}")
    x = np.asarray(src.read()).reshape(p, t)
    out = np.asarray(dst.read()).reshape(p, t + 1).astype(np.int64)
    rows = np.zeros(p, dtype=bool)
    for r in range(0, p, GPSIMD_PARTITIONS_PER_CORE):
        hits = np.flatnonzero(x[r] != 0)
        out[r, :] = int(padding_val)
        out[r, :hits.size] = hits + int(index_offset)
        out[r, t] = hits.size
        rows[r] = True
    charge("gpsimd", api, src.shape)
    dst.write(out.reshape(dst.shape).astype(np.int32), np.broadcast_to(rows.reshape((p,) + (1,) * (dst.ndim - 1)),
                                                                       dst.shape))


# nisa.topk runs one top-k per group of this many partitions (AWS's "16-partition snake").
TOPK_GROUP = 16


def topk(src: NKITensor, n: int, *, val_dst: NKITensor, idx_dst: NKITensor) -> None:
    """``nisa.topk``: one top-K per group of 16 partitions. Snake position ``s < n`` of group ``g`` is
    ``src[16g + s % 16, s // 16]``; the K largest (K = val_dst's free size) are written in ascending order,
    rank ``j`` (0 the smallest kept) at ``[16g + j % 16, j // 16]`` of val_dst (the value) and idx_dst (its
    snake position, uint32); the rest of both is left alone. Equal values rank by snake position (the lower
    is kept first); NaN ranks below every number. Cost: 4n + K GpSimd cycles (AWS's estimate)."""
    api = "topk"
    for arg, t in (("src", src), ("val_dst", val_dst), ("idx_dst", idx_dst)):
        check_tile(t, api, arg, allow_psum=False)
    for arg, t, want in (("src", src, dtypes.bfloat16), ("val_dst", val_dst, dtypes.bfloat16),
                         ("idx_dst", idx_dst, dtypes.uint32)):
        if t.dtype != want:
            fail("err_unsupported_dtype", f"'{api}': {arg} must be {dtypes.name(want)}, got {dtypes.name(t.dtype)}")
    p = src.shape[0]
    if val_dst.shape[0] != p or idx_dst.shape[0] != p:
        fail("err_num_partition_mismatch", f"'{api}': src, val_dst and idx_dst need the same partitions, got "
                                           f"{src.shape}, {val_dst.shape} and {idx_dst.shape}")
    if p % TOPK_GROUP:
        fail("err_num_partition_mismatch", f"'{api}': the partition dimension must be a multiple of {TOPK_GROUP} "
                                           f"(one snake per {TOPK_GROUP} partitions), got {p}")
    if val_dst.shape != idx_dst.shape or val_dst.ndim != 2:
        fail("err_shape_mismatch", f"'{api}': val_dst and idx_dst have the shape [par_dim, k], got {val_dst.shape} "
                                   f"and {idx_dst.shape}")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 8 <= int(n) < 65536:
        fail("err_invalid_argument", f"'{api}': n must be an integer with 8 <= n < 65536, got {n!r}")
    n, k = int(n), int(val_dst.shape[1])
    if not 1 <= k < 32768 or k > n:
        fail("err_invalid_argument", f"'{api}': K (val_dst's free size) must satisfy 1 <= K < 32768 and K <= n "
                                     f"({n}), got {k}")
    columns = free_size(src.shape)
    if columns < -(-n // TOPK_GROUP):
        fail("err_shape_mismatch", f"'{api}': src {src.shape} holds {columns} columns, but a snake of {n} elements "
                                   f"needs ceil(n / {TOPK_GROUP}) = {-(-n // TOPK_GROUP)}")
    groups = p // TOPK_GROUP
    data = fp32(np.asarray(src.read())).reshape(groups, TOPK_GROUP, columns)
    # Snake position s = partition-in-group + 16 * column: read column-major within each group.
    snake = data.transpose(0, 2, 1).reshape(groups, -1)[:, :n]
    pos = np.broadcast_to(np.arange(n), snake.shape)
    with quiet():
        key = np.where(np.isnan(snake), -np.inf, snake)
        nan_last = np.isnan(snake)
    # Descending by value, NaN after every number, ties by ascending snake position; keep K, then ascend.
    order = np.lexsort((pos, nan_last, -key), axis=-1)[:, :k][:, ::-1]
    vals = np.take_along_axis(snake, order, axis=-1)
    rank = np.arange(k)
    rows = (np.arange(groups)[:, None] * TOPK_GROUP + rank % TOPK_GROUP).reshape(-1)
    cols = np.broadcast_to(rank // TOPK_GROUP, (groups, k)).reshape(-1)
    # Counted before its writes: the schedule gives reads and writes after the count to this instruction.
    runtime.current().costs.cycles("gpsimd", api, 4 * n + k)
    for dst, values in ((val_dst, vals), (idx_dst, order)):
        current = np.array(dst.read(), copy=True).reshape(p, -1)
        current[rows, cols] = dtypes.cast(values.reshape(-1), dst.dtype)
        store_into(dst, current.reshape(dst.shape), api)

"""``neuronxcc.nki.isa``, the legacy dialect: instructions return new tiles and take ``mask=``.

Every keyword an instruction accepts is either honoured or refused by name: there is no catch-all, so a
misspelt or unmodelled keyword is a TypeError naming it, and an accepted option the simulator does not
model for that instruction (``mask=`` where masking is not implemented) raises NKIUnsupportedError.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

from ... import dtypes as _dtypes
from ... import engines as _eng
from ..._isa_common import check_dge_mode as _check_dge_mode
from ..._isa_common import unmodelled_instructions as _unmodelled_instructions
from ..._isa_common import (activation_engine, dge_mode, engine, engine_name, get_nc_version, gpsimd_engine,  # noqa
                           nc_version, oob_mode, reduce_cmd, scalar_engine, tensor_engine, unknown_engine,
                           vector_engine)
from ...errors import NKIUnsupportedError
from ...indexing import as_mask
from ...tensor import NKITensor


def _no_mask(api: str, mask: Any) -> None:
    """Instructions whose masking the simulator does not model: an always-true mask is fine, others are not."""
    if mask is not None and as_mask(mask) is not None:
        raise NKIUnsupportedError(f"nki.isa.{api}(mask=...) is not modelled by the simulator: apply the mask to "
                                  f"the instruction's inputs or outputs (e.g. with nl.where or a masked store)")


def nc_matmul(stationary: NKITensor, moving: NKITensor, *, is_stationary_onezero: bool = False,
              is_moving_onezero: bool = False, is_transpose: bool = False, tile_position: Sequence[int] = (),
              tile_size: Sequence[int] = (), perf_mode: Any = None, mask: Any = None) -> NKITensor:
    """stationary.T @ moving as a new fp32 PSUM tile; accumulate with ``psum[...] += nisa.nc_matmul(...)``.
    The hints are checked (an operand said to be 0/1 must be; is_transpose needs an identity moving).
    ``mask=`` computes only the masked-in outputs (a false predicate skips the instruction's effect). An
    operand in PSUM (e.g. a Tensor-engine nc_transpose result) is accepted: the legacy toolchain copies it
    to SBUF first, as AWS's flash-attention backward relies on."""
    _eng.matmul_hints(stationary, moving, is_stationary_onezero=is_stationary_onezero,
                      is_moving_onezero=is_moving_onezero, is_transpose=is_transpose, tile_position=tile_position,
                      tile_size=tile_size)
    return _eng.matmul(stationary, moving, perf_mode=perf_mode, mask=mask, allow_psum_operands=True)


def nc_transpose(data: NKITensor, *, engine: Any = None, mask: Any = None, dtype: Any = None) -> NKITensor:
    return _eng.transpose(data, engine=engine_name(engine, "tensor"), dtype=dtype, mask=mask)


def activation(op: Any, data: NKITensor, *, bias: Any = None, scale: Any = 1.0, reduce_op: Any = None,
               reduce_res: Optional[NKITensor] = None, reduce_cmd: Any = None, dtype: Any = None,
               mask: Any = None) -> NKITensor:
    return _eng.activation(op, data, bias=bias, scale=scale, reduce_op=reduce_op, reduce_res=reduce_res,
                           reduce_cmd=reduce_cmd, dtype=dtype, mask=mask)


def activation_reduce(op: Any, data: NKITensor, *, reduce_op: Any, reduce_res: NKITensor, bias: Any = None,
                      scale: Any = 1.0, dtype: Any = None, mask: Any = None) -> NKITensor:
    return _eng.activation(op, data, bias=bias, scale=scale, reduce_op=reduce_op, reduce_res=reduce_res,
                           dtype=dtype, mask=mask, api="activation_reduce")


def tensor_tensor(data1: NKITensor, data2: NKITensor, op: Any, *, dtype: Any = None, mask: Any = None,
                  engine: Any = None) -> NKITensor:
    return _eng.tensor_tensor(data1, data2, op, dtype=dtype, mask=mask, engine=engine_name(engine))


def tensor_scalar(data: NKITensor, op0: Any, operand0: Any, reverse0: bool = False, op1: Any = None,
                  operand1: Any = None, reverse1: bool = False, *, dtype: Any = None, mask: Any = None,
                  engine: Any = None) -> NKITensor:
    return _eng.tensor_scalar(data, op0, operand0, reverse0, op1, operand1, reverse1, dtype=dtype, mask=mask,
                              engine=engine_name(engine))


def tensor_scalar_reduce(*, data: NKITensor, op0: Any, operand0: Any, reduce_op: Any, reduce_res: NKITensor,
                         reverse0: bool = False, dtype: Any = None, mask: Any = None) -> NKITensor:
    """``data op0 operand0`` as a new tile, and its reduction over the free axes into ``reduce_res``."""
    return _eng.tensor_scalar_reduce(data, op0, operand0, reduce_op, reduce_res, reverse0=reverse0, dtype=dtype,
                                     mask=mask)


def tensor_reduce(op: Any, data: NKITensor, axis: Any, *, negate: bool = False, keepdims: bool = False,
                  dtype: Any = None, mask: Any = None) -> NKITensor:
    return _eng.reduce(_eng.op_name(op), data, axis, negate=negate, keepdims=keepdims, dtype=dtype, mask=mask,
                       api="tensor_reduce")


def tensor_partition_reduce(op: Any, data: NKITensor, *, dtype: Any = None, mask: Any = None) -> NKITensor:
    _no_mask("tensor_partition_reduce", mask)
    return _eng.partition_reduce(_eng.op_name(op), data, dtype=dtype)


def tensor_copy(src: NKITensor, *, dtype: Any = None, mask: Any = None, engine: Any = None) -> NKITensor:
    return _eng.copy(src, dtype=dtype, mask=mask, api="tensor_copy", engine=engine_name(engine))


def tensor_copy_dynamic_src(src: NKITensor, *, dtype: Any = None, mask: Any = None, engine: Any = None
                            ) -> NKITensor:
    """A copy of a tile read at a dynamic (tile-valued) offset: ``src[ix, offsets[0, i] + iy]``."""
    return _eng.copy(src, dtype=dtype, mask=mask, api="tensor_copy_dynamic_src", engine=engine_name(engine))


def tensor_copy_predicated(*, src: Any, dst: NKITensor, predicate: NKITensor, reverse_pred: bool = False,
                           dtype: Any = None, mask: Any = None) -> NKITensor:
    """``dst = src`` where ``predicate`` is nonzero; the rest of ``dst`` is unchanged. Returns ``dst``."""
    if dtype is not None and _dtypes.as_dtype(dtype) != dst.dtype:
        raise NKIUnsupportedError("nki.isa.tensor_copy_predicated(dtype=...) other than dst's dtype is not modelled")
    _eng.tensor_copy_predicated(src, dst, predicate, reverse_pred=reverse_pred, mask=mask)
    return dst


def reciprocal(data: NKITensor, *, dtype: Any = None, mask: Any = None) -> NKITensor:
    return _eng.elementwise("reciprocal", (data,), dtype=dtype, mask=mask, api="reciprocal")


def memset(shape: Sequence[int], value: Any, dtype: Any, *, mask: Any = None, engine: Any = None) -> NKITensor:
    _no_mask("memset", mask)
    return _eng.memset(tuple(shape), value, dtype)


def iota(expr: Any, dtype: Any, *, mask: Any = None) -> NKITensor:
    _no_mask("iota", mask)
    return _eng.iota_expr(expr, dtype)


def dropout(data: NKITensor, prob: Any, *, dtype: Any = None, mask: Any = None) -> NKITensor:
    """Zero each element with probability ``prob`` (scalar or (P, 1)); nl.random_seed makes it repeatable."""
    return _eng.dropout(data, prob, dtype=dtype, mask=mask)


def bn_stats(data: NKITensor, *, dtype: Any = None, mask: Any = None) -> NKITensor:
    return _eng.bn_stats(data, mask=mask, dtype=dtype)


def bn_aggr(data: NKITensor, *, dtype: Any = None, mask: Any = None) -> NKITensor:
    _no_mask("bn_aggr", mask)
    return _eng.bn_aggr(data, dtype=dtype)


def dma_copy(*, dst: NKITensor, src: NKITensor, mask: Any = None, dst_rmw_op: Any = None, oob_mode: Any = None,
             dge_mode: Any = None) -> None:
    """A DMA; either side may be indexed by tiles (indirect). ``oob_mode=nisa.oob_mode.skip`` leaves
    out-of-bounds indirect positions alone; ``dst_rmw_op=np.add`` accumulates into ``dst``."""
    _check_dge_mode(dge_mode)
    _eng.dma_copy(dst, src, mask=mask, dst_rmw_op=dst_rmw_op, oob_mode=oob_mode, dge_mode=dge_mode)


def dma_transpose(src: NKITensor, *, axes: Any = None, mask: Any = None, dtype: Any = None,
                  dge_mode: Any = None) -> NKITensor:
    """A transposed copy by the DMA engine (HBM or SBUF source, SBUF result)."""
    _check_dge_mode(dge_mode)
    return _eng.dma_transpose(src, axes=axes, dtype=dtype, mask=mask, dge_mode=dge_mode)


def affine_select(pred: Any, on_true_tile: NKITensor, on_false_value: Any, *, dtype: Any = None,
                  mask: Any = None) -> NKITensor:
    """``pred`` is an affine comparison of arange indices, e.g. ``i_q >= i_k`` for a causal mask."""
    return _eng.affine_select(on_true_tile, on_false_value, pred, dtype=dtype, mask=mask)


def scalar_tensor_tensor(*, data: NKITensor, op0: Any, operand0: Any, op1: Any, operand1: NKITensor,
                         reverse0: bool = False, reverse1: bool = False, dtype: Any = None,
                         mask: Any = None) -> NKITensor:
    return _eng.scalar_tensor_tensor(data, op0, operand0, op1, operand1, reverse0=reverse0, reverse1=reverse1,
                                     dtype=dtype, mask=mask)


def tensor_tensor_scan(data0: NKITensor, data1: NKITensor, initial: Any, op0: Any, op1: Any,
                       reverse0: bool = False, reverse1: bool = False, *, dtype: Any = None,
                       mask: Any = None) -> NKITensor:
    _no_mask("tensor_tensor_scan", mask)
    return _eng.tensor_tensor_scan(data0, data1, initial, op0, op1, reverse0=reverse0, reverse1=reverse1,
                                   dtype=dtype)


def tensor_scalar_cumulative(*, src: NKITensor, dst: NKITensor, op0: Any, op1: Any, imm0: Any, imm1: Any = None,
                             reduce_cmd: Any = reduce_cmd.reset_reduce, mask: Any = None) -> None:
    """AWS's 2.26+ SDK examples call it in this dialect too, writing into ``dst`` (the scan along each
    partition: dst[i] = reg = op1(src[i] op0 imm0, reg), reg started by reduce_cmd)."""
    _no_mask("tensor_scalar_cumulative", mask)
    _eng.check_tile(dst, "tensor_scalar_cumulative", "dst")
    _eng.tensor_scalar_cumulative(src, op0, op1, imm0, imm1, reduce_cmd=reduce_cmd, dst=dst)


def max8(*, src: NKITensor, dtype: Any = None, mask: Any = None) -> NKITensor:
    _no_mask("max8", mask)
    return _eng.max8(src, dtype=dtype)


def nc_find_index8(*, data: NKITensor, vals: NKITensor, dtype: Any = None, mask: Any = None) -> NKITensor:
    _no_mask("nc_find_index8", mask)
    return _eng.find_index8(data, vals, dtype=dtype)


def select_reduce(*, dst: NKITensor, predicate: NKITensor, on_true: NKITensor, on_false: Any,
                  reduce_res: Optional[NKITensor] = None, reduce_cmd: Any = None, reduce_op: Any = None,
                  reverse_pred: bool = False, mask: Any = None, dtype: Any = None) -> None:
    """``dst = where(predicate, on_true, on_false)``, with the Vector engine's running max (reduce_cmd)."""
    _eng.select_reduce(predicate, on_true, on_false, dst=dst, reduce_res=reduce_res, reduce_cmd=reduce_cmd,
                       reduce_op=reduce_op, reverse_pred=reverse_pred, dtype=dtype, mask=mask)


def range_select(*, on_true_tile: NKITensor, comp_op0: Any, comp_op1: Any, bound0: Any, bound1: Any,
                 reduce_cmd: Any = None, reduce_res: Optional[NKITensor] = None, reduce_op: Any = None,
                 range_start: Any = 0, on_false_value: Any = None, mask: Any = None, dtype: Any = None
                 ) -> NKITensor:
    """The elements whose free index + range_start lies within the bounds; ``on_false_value`` elsewhere."""
    return _eng.range_select(on_true_tile, comp_op0, comp_op1, bound0, bound1, reduce_cmd=reduce_cmd,
                             reduce_res=reduce_res, reduce_op=reduce_op, range_start=range_start,
                             on_false_value=on_false_value, dtype=dtype, mask=mask)


def nc_stream_shuffle(src: NKITensor, dst: NKITensor, shuffle_mask: Sequence[Any], *, dtype: Any = None,
                      mask: Any = None) -> None:
    """Cross-partition moves within each 32-partition quadrant: dst[i] = src[shuffle_mask[i]]."""
    if dtype is not None and _dtypes.as_dtype(dtype) != dst.dtype:
        raise NKIUnsupportedError("nki.isa.nc_stream_shuffle(dtype=...) other than dst's dtype is not modelled")
    _eng.stream_shuffle(src, dst, shuffle_mask, mask=mask)


def nc_match_replace8(*, data: NKITensor, vals: NKITensor, imm: Any, dst_idx: Optional[NKITensor] = None,
                      mask: Any = None, dtype: Any = None) -> NKITensor:
    """``data`` with the first occurrence of each of the 8 ``vals`` replaced by ``imm`` (indices to dst_idx)."""
    return _eng.match_replace8(data, vals, imm, dst_idx=dst_idx, mask=mask, dtype=dtype)


def sequence_bounds(*, segment_ids: NKITensor, dtype: Any = None) -> NKITensor:
    """Each element's segment [start, end) of a (1, n) tile of segment ids (0 is padding)."""
    return _eng.sequence_bounds(segment_ids, dtype=dtype)


def local_gather(src_buffer: NKITensor, index: NKITensor, num_elem_per_idx: int = 1,
                 num_valid_indices: Optional[int] = None, *, mask: Any = None) -> NKITensor:
    """GpSimd gather inside each 16-partition core: (P, num_valid_indices, num_elem_per_idx)."""
    return _eng.local_gather(src_buffer, index, num_elem_per_idx, num_valid_indices, mask=mask)


__getattr__ = _unmodelled_instructions(__name__)

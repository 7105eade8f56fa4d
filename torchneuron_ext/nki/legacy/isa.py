"""``neuronxcc.nki.isa``, the legacy dialect: instructions return new tiles and take ``mask=``."""
from __future__ import annotations

from typing import Any, Optional, Sequence

from .. import engine as _eng
from .._isa_common import unsupported_instruction as _unsupported_instruction
from .._isa_common import (activation_engine, dge_mode, engine, engine_name, get_nc_version, gpsimd_engine,  # noqa
                           nc_version, oob_mode, reduce_cmd, scalar_engine, tensor_engine, unknown_engine,
                           vector_engine)
from ..memory import sbuf
from ..tensor import NKITensor


def nc_matmul(stationary: NKITensor, moving: NKITensor, *, is_stationary_onezero: bool = False,
              is_moving_onezero: bool = False, is_transpose: bool = False, tile_position: Sequence[int] = (),
              tile_size: Sequence[int] = (), perf_mode: Any = None, mask: Any = None, **_: Any) -> NKITensor:
    """stationary.T @ moving as a new fp32 PSUM tile; accumulate with ``psum[...] += nisa.nc_matmul(...)``."""
    return _eng.matmul(stationary, moving)


def nc_transpose(data: NKITensor, *, engine: Any = None, mask: Any = None, dtype: Any = None,
                 **_: Any) -> NKITensor:
    return _eng.transpose(data, engine=engine_name(engine, "tensor"), dtype=dtype)


def activation(op: Any, data: NKITensor, *, bias: Any = None, scale: Any = 1.0, reduce_op: Any = None,
               reduce_res: Optional[NKITensor] = None, reduce_cmd: Any = None, dtype: Any = None,
               mask: Any = None, **_: Any) -> NKITensor:
    return _eng.activation(op, data, bias=bias, scale=scale, reduce_op=reduce_op, reduce_res=reduce_res,
                           reduce_cmd=reduce_cmd, dtype=dtype, mask=mask)


def activation_reduce(op: Any, data: NKITensor, *, reduce_op: Any, reduce_res: NKITensor, bias: Any = None,
                      scale: Any = 1.0, dtype: Any = None, mask: Any = None, **_: Any) -> NKITensor:
    return _eng.activation(op, data, bias=bias, scale=scale, reduce_op=reduce_op, reduce_res=reduce_res,
                           dtype=dtype, mask=mask, api="activation_reduce")


def tensor_tensor(data1: NKITensor, data2: NKITensor, op: Any, *, dtype: Any = None, mask: Any = None,
                  engine: Any = None, **_: Any) -> NKITensor:
    return _eng.tensor_tensor(data1, data2, op, dtype=dtype, mask=mask, engine=engine_name(engine))


def tensor_scalar(data: NKITensor, op0: Any, operand0: Any, reverse0: bool = False, op1: Any = None,
                  operand1: Any = None, reverse1: bool = False, *, dtype: Any = None, mask: Any = None,
                  engine: Any = None, **_: Any) -> NKITensor:
    return _eng.tensor_scalar(data, op0, operand0, reverse0, op1, operand1, reverse1, dtype=dtype, mask=mask,
                              engine=engine_name(engine))


def tensor_reduce(op: Any, data: NKITensor, axis: Any, *, negate: bool = False, keepdims: bool = False,
                  dtype: Any = None, mask: Any = None, **_: Any) -> NKITensor:
    return _eng.reduce(_eng.op_name(op), data, axis, negate=negate, keepdims=keepdims, dtype=dtype, mask=mask,
                       api="tensor_reduce")


def tensor_partition_reduce(op: Any, data: NKITensor, *, dtype: Any = None, mask: Any = None,
                            **_: Any) -> NKITensor:
    return _eng.partition_reduce(_eng.op_name(op), data, dtype=dtype)


def tensor_copy(src: NKITensor, *, dtype: Any = None, mask: Any = None, engine: Any = None,
                **_: Any) -> NKITensor:
    return _eng.copy(src, dtype=dtype, mask=mask, api="tensor_copy", engine=engine_name(engine))


def reciprocal(data: NKITensor, *, dtype: Any = None, mask: Any = None, **_: Any) -> NKITensor:
    return _eng.elementwise("reciprocal", (data,), dtype=dtype, mask=mask, api="reciprocal")


def memset(shape: Sequence[int], value: Any, dtype: Any, *, mask: Any = None, engine: Any = None,
           **_: Any) -> NKITensor:
    return _eng.memset(tuple(shape), value, dtype)


def iota(expr: Any, dtype: Any, *, mask: Any = None, **_: Any) -> NKITensor:
    return _eng.iota_expr(expr, dtype)


def bn_stats(data: NKITensor, *, dtype: Any = None, mask: Any = None, **_: Any) -> NKITensor:
    return _eng.bn_stats(data, mask=mask, dtype=dtype)


def bn_aggr(data: NKITensor, *, dtype: Any = None, mask: Any = None, **_: Any) -> NKITensor:
    return _eng.bn_aggr(data, dtype=dtype)


def dma_copy(*, dst: NKITensor, src: NKITensor, mask: Any = None, dst_rmw_op: Any = None, oob_mode: Any = None,
             dge_mode: Any = None, **_: Any) -> None:
    _eng.dma_copy(dst, src, mask=mask, dst_rmw_op=dst_rmw_op)


def affine_select(pred: Any, on_true_tile: NKITensor, on_false_value: Any, *, dtype: Any = None, mask: Any = None,
                  **_: Any) -> NKITensor:
    """``pred`` is an affine comparison of arange indices, e.g. ``i_q >= i_k`` for a causal mask."""
    return _eng.affine_select(on_true_tile, on_false_value, pred, dtype=dtype, mask=mask)


def scalar_tensor_tensor(*, data: NKITensor, op0: Any, operand0: Any, op1: Any, operand1: NKITensor,
                         reverse0: bool = False, reverse1: bool = False, dtype: Any = None, mask: Any = None,
                         **_: Any) -> NKITensor:
    return _eng.scalar_tensor_tensor(data, op0, operand0, op1, operand1, reverse0=reverse0, reverse1=reverse1,
                                     dtype=dtype, mask=mask)


def tensor_tensor_scan(data0: NKITensor, data1: NKITensor, initial: Any, op0: Any, op1: Any,
                       reverse0: bool = False, reverse1: bool = False, *, dtype: Any = None, mask: Any = None,
                       **_: Any) -> NKITensor:
    return _eng.tensor_tensor_scan(data0, data1, initial, op0, op1, reverse0=reverse0, reverse1=reverse1,
                                   dtype=dtype)


def max8(*, src: NKITensor, dtype: Any = None, mask: Any = None, **_: Any) -> NKITensor:
    return _eng.max8(src, dtype=dtype)


def nc_find_index8(*, data: NKITensor, vals: NKITensor, dtype: Any = None, mask: Any = None,
                   **_: Any) -> NKITensor:
    return _eng.find_index8(data, vals, dtype=dtype)


__getattr__ = _unsupported_instruction  # the instructions the simulator does not model

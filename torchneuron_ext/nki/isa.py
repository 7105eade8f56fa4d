"""``nki.isa`` of the new dialect (NKI 0.2+): every instruction writes into ``dst``, its first argument."""
from __future__ import annotations

from typing import Any, Optional, Sequence

from . import engines as _eng
from ._isa_common import check_dge_mode as _isa_dge
from ._isa_common import unsupported_instruction as _unsupported_instruction
from ._isa_common import (activation_engine, dge_mode, engine, engine_name, get_nc_version, gpsimd_engine,  # noqa
                          nc_version, oob_mode, reduce_cmd, scalar_engine, tensor_engine, unknown_engine,
                          vector_engine)
from .errors import fail
from .memory import psum
from .tensor import NKITensor


def nc_matmul(dst: NKITensor, stationary: NKITensor, moving: NKITensor, is_stationary_onezero: bool = False,
              is_moving_onezero: bool = False, is_transpose: bool = False, tile_position: Sequence[int] = (),
              tile_size: Sequence[int] = (), perf_mode: Any = None, accumulate: Optional[bool] = None,
              **_: Any) -> None:
    """dst = stationary.T @ moving; the first write to a PSUM location overwrites, later ones accumulate."""
    _eng.matmul(stationary, moving, dst=dst, accumulate=accumulate, perf_mode=perf_mode)


def nc_transpose(dst: NKITensor, data: NKITensor, engine: Any = None, **_: Any) -> None:
    _eng.transpose(data, dst=dst, engine=engine_name(engine, "tensor"))


def activation(dst: NKITensor, op: Any, data: NKITensor, bias: Any = None, scale: Any = 1.0,
               reduce_op: Any = None, reduce_res: Optional[NKITensor] = None, reduce_cmd: Any = None,
               **_: Any) -> None:
    _eng.activation(op, data, bias=bias, scale=scale, reduce_op=reduce_op, reduce_res=reduce_res,
                    reduce_cmd=reduce_cmd, dst=dst)


def activation_reduce(dst: NKITensor, op: Any, data: NKITensor, reduce_op: Any, reduce_res: NKITensor,
                      bias: Any = None, scale: Any = 1.0, **_: Any) -> None:
    _eng.activation(op, data, bias=bias, scale=scale, reduce_op=reduce_op, reduce_res=reduce_res, dst=dst,
                    api="activation_reduce")


def tensor_tensor(dst: NKITensor, data1: NKITensor, data2: NKITensor, op: Any, engine: Any = None,
                  **_: Any) -> None:
    _eng.tensor_tensor(data1, data2, op, dst=dst, engine=engine_name(engine))


def tensor_scalar(dst: NKITensor, data: NKITensor, op0: Any, operand0: Any, reverse0: bool = False,
                  op1: Any = None, operand1: Any = None, reverse1: bool = False, engine: Any = None,
                  **_: Any) -> None:
    _eng.tensor_scalar(data, op0, operand0, reverse0, op1, operand1, reverse1, dst=dst,
                       engine=engine_name(engine))


def tensor_reduce(dst: NKITensor, op: Any, data: NKITensor, axis: Any, negate: bool = False,
                  keepdims: bool = False, **_: Any) -> None:
    _eng.reduce(_eng.op_name(op), data, axis, negate=negate, keepdims=keepdims, dst=dst, api="tensor_reduce")


def tensor_partition_reduce(dst: NKITensor, op: Any, data: NKITensor, **_: Any) -> None:
    _eng.partition_reduce(_eng.op_name(op), data, dst=dst)


def tensor_copy(dst: NKITensor, src: NKITensor, engine: Any = None, **_: Any) -> None:
    _eng.copy(src, dst=dst, api="tensor_copy", engine=engine_name(engine))


def reciprocal(dst: NKITensor, data: NKITensor, **_: Any) -> None:
    _eng.elementwise("reciprocal", (data,), dst=dst, api="reciprocal")


def exponential(dst: NKITensor, data: NKITensor, **_: Any) -> None:
    _eng.elementwise("exp", (data,), dst=dst, api="exponential")


def memset(dst: NKITensor, value: Any, engine: Any = None, **_: Any) -> None:
    _eng.memset(dst.shape, value, dst.dtype, dst=dst)


def iota(dst: NKITensor, pattern: Sequence[Sequence[int]], offset: int = 0, channel_multiplier: int = 0,
         **_: Any) -> None:
    _eng.iota_pattern(dst, pattern, offset, channel_multiplier)


def bn_stats(dst: NKITensor, data: NKITensor, **_: Any) -> None:
    _eng.bn_stats(data, dst=dst)


def bn_aggr(dst: NKITensor, data: NKITensor, **_: Any) -> None:
    _eng.bn_aggr(data, dst=dst)


def dma_copy(dst: NKITensor, src: NKITensor, dst_rmw_op: Any = None, oob_mode: Any = None, dge_mode: Any = None,
             **_: Any) -> None:
    _isa_dge(dge_mode)
    # NKI 0.2+ refuses a PSUM source; the legacy dialect's toolchain accepts one.
    if isinstance(src, NKITensor) and isinstance(dst, NKITensor) and src.buffer is psum:
        fail("err_unsupported_memory", "Expected operand 'src' of 'dma_copy' to be in 'hbm' or 'sbuf', but got a "
                                       "tile in 'psum' instead; copy PSUM to SBUF with nisa.tensor_copy")
    _eng.dma_copy(dst, src, dst_rmw_op=dst_rmw_op, oob_mode=oob_mode)


def affine_select(dst: NKITensor, pattern: Sequence[Sequence[int]], offset: int, channel_multiplier: int,
                  on_true_tile: NKITensor, on_false_value: Any, cmp_op: Any = None, **_: Any) -> None:
    """dst = on_true_tile where cmp_op(offset + p * channel_multiplier + pattern . idx, 0), else on_false_value."""
    import numpy as np
    values = _eng.affine_pattern_values(dst.shape[0], pattern, offset, channel_multiplier)
    op = _eng.BINARY[_eng.op_name(cmp_op if cmp_op is not None else "equal")]
    pred = op(values, 0).reshape(dst.shape)
    _eng.affine_select(on_true_tile, on_false_value, np.asarray(pred), dst=dst)


def scalar_tensor_tensor(dst: NKITensor, data: NKITensor, op0: Any, operand0: Any, op1: Any, operand1: NKITensor,
                         reverse0: bool = False, reverse1: bool = False, **_: Any) -> None:
    _eng.scalar_tensor_tensor(data, op0, operand0, op1, operand1, reverse0=reverse0, reverse1=reverse1, dst=dst)


def tensor_tensor_scan(dst: NKITensor, data0: NKITensor, data1: NKITensor, initial: Any, op0: Any, op1: Any,
                       reverse0: bool = False, reverse1: bool = False, **_: Any) -> None:
    _eng.tensor_tensor_scan(data0, data1, initial, op0, op1, reverse0=reverse0, reverse1=reverse1, dst=dst)


def max8(dst: NKITensor, src: NKITensor, **_: Any) -> None:
    _eng.max8(src, dst=dst)


def nc_find_index8(dst: NKITensor, data: NKITensor, vals: NKITensor, **_: Any) -> None:
    _eng.find_index8(data, vals, dst=dst)


__getattr__ = _unsupported_instruction  # the instructions the simulator does not model

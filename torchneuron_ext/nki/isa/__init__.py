"""``nki.isa`` of the new dialect (NKI 0.2+): every instruction writes into ``dst``, its first argument.

Every keyword an instruction accepts is either honoured or refused by name: there is no catch-all, so a
misspelt keyword, or one of the legacy dialect's (``mask=``, ``dtype=``: here the destination's dtype is the
result's), is a TypeError naming it. A keyword AWS's instruction takes that the simulator does not model
raises NKIUnsupportedError when it is given a value other than its default. ``name=`` labels the
instruction in AWS's profiles and changes nothing that runs, so it is accepted everywhere.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from .. import dtypes as _dtypes
from .. import engines as _eng
from .. import runtime as _runtime
from .._isa_common import reduce_cmd as _reduce_cmd
from .._isa_common import unmodelled_instructions as _unmodelled_instructions
from .._isa_common import (activation_engine, dge_mode, engine, engine_name, get_nc_version, gpsimd_engine,  # noqa
                          nc_version, oob_mode, reduce_cmd, scalar_engine, tensor_engine, unknown_engine,
                          vector_engine)
from .._isa_common import (NkiInstruction, NkiValidationError, dma_engine, get_nc_sub_version,  # noqa
                          matmul_perf_mode, perf_mode_name)
from ..errors import NKIUnsupportedError, fail
from ..engines.operands import free_size as _free_size
from ..memory import psum
from ..tensor import NKITensor
from .indirect import accepts_indirection as _indirection
from .indirect import check_matmul as _check_matmul


def _refuse(api: str, **options: Any) -> None:
    """Options AWS's ``api`` takes that the simulator does not model: each is refused by name unless left at
    its default (passed here as None)."""
    for key, value in options.items():
        if value is not None:
            raise NKIUnsupportedError(f"nki.isa.{api}({key}=...) is not modelled by the simulator; leave it at "
                                      f"its default")


@_indirection(("dst", "stationary", "moving"), ("tensor",), "stationary", group=32, check=_check_matmul)
def nc_matmul(dst: NKITensor, stationary: NKITensor, moving: NKITensor, is_stationary_onezero: bool = False,
              is_moving_onezero: bool = False, is_transpose: bool = False, accumulate: Optional[bool] = None,
              tile_position: Sequence[int] = (), tile_size: Sequence[int] = (), perf_mode: Any = None,
              name: Optional[str] = None) -> None:
    """dst = stationary.T @ moving; the first write to a PSUM location overwrites, later ones accumulate.
    The hints are held to what they promise, as in the legacy dialect (an operand said to be 0/1 must be;
    is_transpose needs an identity moving; PE tiling must be a valid placement)."""
    _eng.matmul_hints(stationary, moving, is_stationary_onezero=is_stationary_onezero,
                      is_moving_onezero=is_moving_onezero, is_transpose=is_transpose, tile_position=tile_position,
                      tile_size=tile_size)
    _eng.matmul(stationary, moving, dst=dst, accumulate=accumulate, perf_mode=perf_mode_name(perf_mode),
                is_transpose=is_transpose, max_free_dims=_eng.tensor_engine.MATMUL_MAX_FREE_DIMS)


def nc_transpose(dst: NKITensor, data: NKITensor, engine: Any = None, name: Optional[str] = None) -> None:
    _eng.transpose(data, dst=dst, engine=_transpose_engine(engine, dst, data))


def _transpose_engine(engine: Any, dst: NKITensor, data: NKITensor) -> str:
    """AWS: with no engine, "Neuron Compiler will automatically select an engine based on the input shape". Only
    the Vector engine reaches SBUF on the write side or PSUM on the read side, and only up to its transpose
    block (32x32), so a tile that fits and needs either memory goes there; every other one is the Tensor
    engine's, whose memory rules then apply."""
    if engine is not None and engine is not unknown_engine:
        return engine_name(engine)
    limit = _runtime.current().target.vector_transpose_max
    fits = data.shape[0] <= limit and _free_size(data.shape) <= limit
    if fits and (getattr(dst, "buffer", None) is not psum or getattr(data, "buffer", None) is psum):
        return "vector"
    return "tensor"


@_indirection(("dst", "data"), ("scalar",), "data")
def activation(dst: NKITensor, op: Any, data: NKITensor, bias: Any = None, scale: Any = 1.0,
               reduce_op: Any = None, reduce_res: Optional[NKITensor] = None, reduce_cmd: Any = _reduce_cmd.idle,
               engine: Any = None, name: Optional[str] = None) -> None:
    # NeuronCore-v4 can run activation on the GpSimd engine; the simulator models the Scalar engine's.
    _refuse("activation", engine=None if engine_name(engine, "scalar") == "scalar" else engine)
    _eng.activation(op, data, bias=bias, scale=scale, reduce_op=reduce_op, reduce_res=reduce_res,
                    reduce_cmd=reduce_cmd, dst=dst)


@_indirection(("dst", "data"), ("scalar",), "data")
def activation_reduce(dst: NKITensor, op: Any, data: NKITensor, reduce_op: Any, reduce_res: NKITensor,
                      bias: Any = None, scale: Any = 1.0, name: Optional[str] = None) -> None:
    _eng.activation(op, data, bias=bias, scale=scale, reduce_op=reduce_op, reduce_res=reduce_res, dst=dst,
                    api="activation_reduce")


@_indirection(("dst", "data1"), ("vector", "gpsimd"), "data1")
def tensor_tensor(dst: NKITensor, data1: NKITensor, data2: NKITensor, op: Any, engine: Any = None,
                  name: Optional[str] = None) -> None:
    _eng.tensor_tensor(data1, data2, op, dst=dst, engine=engine_name(engine))


@_indirection(("dst", "data"), ("vector", "scalar", "gpsimd"), "data")
def tensor_scalar(dst: NKITensor, data: NKITensor, op0: Any, operand0: Any, reverse0: bool = False,
                  op1: Any = None, operand1: Any = None, reverse1: bool = False, engine: Any = None,
                  name: Optional[str] = None) -> None:
    _eng.tensor_scalar(data, op0, operand0, reverse0, op1, operand1, reverse1, dst=dst,
                       engine=engine_name(engine))


@_indirection(("dst", "data"), ("vector",), "data")
def tensor_reduce(dst: NKITensor, op: Any, data: NKITensor, axis: Any, negate: bool = False,
                  keepdims: bool = False, name: Optional[str] = None) -> None:
    _eng.reduce(_eng.op_name(op), data, axis, negate=negate, keepdims=keepdims, dst=dst, api="tensor_reduce")


def tensor_partition_reduce(dst: NKITensor, op: Any, data: NKITensor, name: Optional[str] = None) -> None:
    _eng.partition_reduce(_eng.op_name(op), data, dst=dst)


@_indirection(("dst", "src"), ("vector", "scalar"), "src")
def tensor_copy(dst: NKITensor, src: NKITensor, engine: Any = None, name: Optional[str] = None) -> None:
    _eng.copy(src, dst=dst, api="tensor_copy", engine=engine_name(engine))


def reciprocal(dst: NKITensor, data: NKITensor, name: Optional[str] = None) -> None:
    _eng.elementwise("reciprocal", (data,), dst=dst, api="reciprocal")


@_indirection(("dst", "src"), ("vector",), "src")
def exponential(dst: NKITensor, src: NKITensor, max_value: Any = 0.0, reduce_res: Optional[NKITensor] = None,
                reduce_cmd: Any = _reduce_cmd.idle, reduce_init: Any = 0.0, name: Optional[str] = None) -> None:
    """dst = exp(src - max_value) on the Vector engine (NeuronCore-v4+), the sum folded into the engine's
    accumulation registers by reduce_cmd and read into reduce_res."""
    _eng.exponential(src, max_value=max_value, reduce_res=reduce_res, reduce_cmd=reduce_cmd, reduce_init=reduce_init,
                     dst=dst)


def memset(dst: NKITensor, value: Any, engine: Any = None, name: Optional[str] = None) -> None:
    # engine= picks Vector or GpSimd for speed only; the values written are the same.
    _eng.memset(dst.shape, value, dst.dtype, dst=dst)


def iota(dst: NKITensor, pattern: Sequence[Sequence[int]], offset: int = 0, channel_multiplier: int = 0,
         name: Optional[str] = None) -> None:
    _eng.iota_pattern(dst, pattern, offset, channel_multiplier)


def bn_stats(dst: NKITensor, data: NKITensor, name: Optional[str] = None) -> None:
    _eng.bn_stats(data, dst=dst)


def bn_aggr(dst: NKITensor, data: NKITensor, name: Optional[str] = None) -> None:
    _eng.bn_aggr(data, dst=dst)


def affine_select(dst: NKITensor, pattern: Sequence[Sequence[int]], channel_multiplier: int,
                  on_true_tile: NKITensor, on_false_value: Any, cmp_op: Any = None, offset: int = 0,
                  name: Optional[str] = None) -> None:
    """dst = on_true_tile where cmp_op(offset + p * channel_multiplier + pattern . idx, 0), else on_false_value."""
    values = _eng.affine_pattern_values(dst.shape[0], pattern, offset, channel_multiplier)
    op = _eng.BINARY[_eng.op_name(cmp_op if cmp_op is not None else "equal")]
    pred = op(values, 0).reshape(dst.shape)
    _eng.affine_select(on_true_tile, on_false_value, np.asarray(pred), dst=dst)


def scalar_tensor_tensor(dst: NKITensor, data: NKITensor, op0: Any, operand0: Any, op1: Any, operand1: NKITensor,
                         reverse0: bool = False, reverse1: bool = False, reduce_cmd: Any = None,
                         reduce_op: Any = None, reduce_res: Optional[NKITensor] = None,
                         name: Optional[str] = None, dtype: Any = None) -> None:
    # Neuron 2.33 adds a fused reduction of the result; the simulator models the two operators alone.
    _refuse("scalar_tensor_tensor", reduce_cmd=reduce_cmd, reduce_op=None if reduce_op is Ellipsis else reduce_op,
            reduce_res=reduce_res)
    # AWS's NKI Library passes dtype= (the destination's); another dtype would be a cast the ISA cannot do.
    if dtype is not None and _dtypes.as_dtype(dtype) != dst.dtype:
        raise NKIUnsupportedError(f"nki.isa.scalar_tensor_tensor(dtype=...) must be dst's dtype ({dst.dtype}), "
                                  f"got {dtype!r}")
    _eng.scalar_tensor_tensor(data, op0, operand0, op1, operand1, reverse0=reverse0, reverse1=reverse1, dst=dst)


def tensor_tensor_scan(dst: NKITensor, data0: NKITensor, data1: NKITensor, initial: Any, op0: Any, op1: Any,
                       reverse0: bool = False, reverse1: bool = False, name: Optional[str] = None) -> None:
    _eng.tensor_tensor_scan(data0, data1, initial, op0, op1, reverse0=reverse0, reverse1=reverse1, dst=dst)


def max8(dst: NKITensor, src: NKITensor, name: Optional[str] = None) -> None:
    _eng.max8(src, dst=dst)


def nc_find_index8(dst: NKITensor, data: NKITensor, vals: NKITensor, name: Optional[str] = None) -> None:
    _eng.find_index8(data, vals, dst=dst)


__getattr__ = _unmodelled_instructions(__name__)
from .cross_core import *  # noqa
from .registers import *  # noqa
from .mx import *  # noqa
from .vector_ops import *  # noqa
from .dma_ops import *  # noqa

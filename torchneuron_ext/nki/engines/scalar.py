"""The Scalar (activation) engine: an activation function with scale, bias and a fused free-axis sum."""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from .. import runtime
from ..errors import fail
from ..rules import instructions as _instr
from ..indexing import as_mask
from ..tensor import NKITensor
from .elementwise import UNARY, op_name
from .operands import charge, check_tile, emit, fp32, per_partition, quiet, result_dtype, store_into


def activation(op: Any, data: NKITensor, *, bias: Any = None, scale: Any = 1.0, reduce_op: Any = None,
               reduce_res: Optional[NKITensor] = None, reduce_cmd: Any = None, dtype: Any = None, mask: Any = None,
               dst: Optional[NKITensor] = None, api: str = "activation") -> Optional[NKITensor]:
    check_tile(data, api, "data")
    _instr.check_activation(data, bias, scale, api, runtime.current())
    name = op_name(op)
    if name not in UNARY:
        fail("err_unsupported_activation", f"'{name}' is not an activation function of the Scalar engine")
    x = fp32(np.asarray(data.read()))
    with quiet():
        s = per_partition(scale, data, api, "scale")
        y = x if not isinstance(s, np.ndarray) and s == 1 else x * s  # scale=1.0 is the common case
        b = per_partition(bias, data, api, "bias")
        if b is not None:
            y = y + b
        result = np.asarray(UNARY[name][1](y), dtype=np.float32)
    if reduce_res is not None:
        check_tile(reduce_res, api, "reduce_res")
        rname = op_name(reduce_op) if reduce_op is not None else "add"
        if rname != "add":
            fail("err_unsupported_op", f"'{api}' reduces with add only, got {rname}")
        red = result.reshape(result.shape[0], -1).sum(axis=1, keepdims=True, dtype=np.float32)
        cmd = getattr(reduce_cmd, "name", reduce_cmd)
        if cmd in ("reduce", "accumulate"):
            red = red + fp32(np.asarray(reduce_res.read())).reshape(red.shape)
        store_into(reduce_res, red.reshape(reduce_res.shape), api)
    charge("scalar", api, data.shape)
    out_dtype = result_dtype(dtype, data.dtype)
    return emit(result, out_dtype, dst, as_mask(mask), api)

"""The Scalar (activation) engine: an activation function after a scale and bias (activation) or a
two-operator tensor-scalar stage (activate2), with a fused free-axis reduction into the engine's
accumulation registers (engines/accumulator.py)."""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from .. import runtime
from ..errors import fail
from ..rules import instructions as _instr
from ..indexing import as_mask
from ..tensor import NKITensor
from . import accumulator
from .elementwise import BINARY, UNARY, op_name
from .operands import check_reduce_res
from .operands import (charge, check_tile, emit, fp32, per_partition, quiet, require_generation,
                       result_dtype, same_partitions, store_into)


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
    charge("scalar", api, data.shape)  # before any write: the schedule gives writes to the last counted one
    _fold(result, reduce_op, reduce_res, reduce_cmd, ("add",), api)
    out_dtype = result_dtype(dtype, data.dtype)
    return emit(result, out_dtype, dst, as_mask(mask), api)


def _fold(result: np.ndarray, reduce_op: Any, reduce_res: Optional[NKITensor], reduce_cmd: Any,
          allowed: "tuple[str, ...]", api: str) -> None:
    """The Scalar engine's registers after this instruction (``reduce_cmd``: None, the legacy dialect's and
    activation_reduce's default, reduces afresh when ``reduce_res`` is given), read into ``reduce_res``."""
    cmd = accumulator.command_name(reduce_cmd if reduce_cmd is not None else
                                   ("reset_reduce" if reduce_res is not None else "idle"), api)
    if cmd == "load_reduce":
        fail("err_unsupported_op", f"'{api}' takes reduce_cmd idle, reset, reduce or reset_reduce, got load_reduce")
    if cmd == "idle" and reduce_res is None:
        return
    fold = accumulator.fold_name(reduce_op if reduce_op is not None else "add", allowed, api)
    acc = accumulator.accumulate("scalar", api, result, fold, cmd)
    if reduce_res is not None:
        check_reduce_res(reduce_res, result.shape[0], api)
        store_into(reduce_res, acc.reshape(reduce_res.shape), api)


# activate2's tensor-scalar stage: the (op0, op1) pairs AWS's ISA reference lists.
ACTIVATE2_STAGES = {("multiply", "add"), ("multiply", "subtract"), ("multiply", "bypass"), ("add", "bypass"),
                    ("subtract", "bypass"), ("bypass", "bypass")}


def _prelu(x: np.ndarray, alpha: Any) -> np.ndarray:
    return np.where(x >= 0, x, x * alpha)


def activate2(op: Any, data: NKITensor, imm0: Any, imm1: Any, op0: Any, op1: Any, *, relu_param: Any = 0.0,
              reverse0: bool = False, reverse1: bool = False, reduce_op: Any = None,
              reduce_res: Optional[NKITensor] = None, reduce_cmd: Any = None, dst: NKITensor) -> None:
    """dst = op((data op0 imm0) op1 imm1) on the Scalar engine (NeuronCore-v4+), ``nl.bypass`` skipping a
    stage; ``relu_param`` is nl.prelu's slope; the results are folded into the engine's registers by
    ``reduce_cmd`` (add, max, min, abs_max or abs_min)."""
    api = "activate2"
    require_generation(api, 4)
    check_tile(data, api, "data")
    check_tile(dst, api, "dst")
    same_partitions(api, ("data", data), ("dst", dst))
    name = op_name(op)
    if name not in UNARY and name != "prelu":
        fail("err_unsupported_activation", f"'{name}' is not an activation function of the Scalar engine")
    stage = (op_name(op0) if op0 is not None else "bypass", op_name(op1) if op1 is not None else "bypass")
    if stage not in ACTIVATE2_STAGES:
        fail("err_unsupported_op", f"'{api}': (op0, op1) must be one of "
                                   f"{sorted(ACTIVATE2_STAGES)}, got {stage}")
    if (reverse0 and stage[0] == "bypass") or (reverse1 and stage[1] == "bypass"):
        fail("err_invalid_argument", f"'{api}': reverse0 needs op0 and reverse1 needs op1 (not nl.bypass)")
    for arg, imm in (("imm0", imm0), ("imm1", imm1)):
        if isinstance(imm, NKITensor) and imm.dtype != np.float32 and stage[arg == "imm1"] != "bypass":
            fail("err_unsupported_dtype", f"'{api}': {arg} must be float32, got {imm.dtype}")
    x = fp32(np.asarray(data.read()))
    with quiet():
        for fname, imm, rev, arg in ((stage[0], imm0, reverse0, "imm0"), (stage[1], imm1, reverse1, "imm1")):
            if fname == "bypass":
                continue
            v = per_partition(imm, data, api, arg)
            x = BINARY[fname](v, x) if rev else BINARY[fname](x, v)
        if name == "prelu":
            result = _prelu(x, per_partition(relu_param, data, api, "relu_param"))
        else:
            result = UNARY[name][1](x)
        result = np.asarray(result, dtype=np.float32)
    charge("scalar", api, data.shape)  # before any write: the schedule gives writes to the last counted one
    _fold(result, reduce_op, reduce_res, reduce_cmd if reduce_cmd is not None else "idle",
          ("add", "maximum", "minimum", "abs_max", "abs_min"), api)
    store_into(dst, result.reshape(dst.shape), api)

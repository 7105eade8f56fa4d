"""The per-lane accumulation registers of the Vector and Scalar engines, driven by ``nisa.reduce_cmd``.

AWS's ISA reference: the Vector engine's registers are shared by ``exponential``, ``range_select``,
``select_reduce``, ``tensor_scalar_reduce`` and ``tensor_scalar_cumulative``; the Scalar engine's by
``activation`` and ``activate2``. One fp32 value per lane (partition). The commands:

- ``reset``: set to the reduction's identity, reduce nothing;
- ``reset_reduce``: set to the identity, then fold this instruction's results in;
- ``reduce``: fold this instruction's results into what the registers hold;
- ``load_reduce``: load an initial value (a scalar or one per partition), then fold the results in;
- ``idle``: leave the registers alone.

The registers belong to one instance of a launch (each core of an LNC=2 launch has its own engines). Their
value before any command set them, or after an engine that AWS says may clobber them ran idle, is
undefined on the device: reading them then gives NaN here, the simulator's mark of uninitialised data.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np

from .. import runtime
from ..errors import fail
from .elementwise import op_name
from .operands import quiet

# The reductions the registers can perform: (fold of two arrays, identity).
FOLDS: "dict[str, tuple[Callable[[np.ndarray, np.ndarray], np.ndarray], float]]" = {
    "add": (np.add, 0.0),
    "subtract": (np.subtract, 0.0),
    "multiply": (np.multiply, 1.0),
    "maximum": (np.maximum, -np.inf),
    "minimum": (np.minimum, np.inf),
    "abs_max": (lambda a, b: np.maximum(np.abs(a), np.abs(b)), 0.0),
    "abs_min": (lambda a, b: np.minimum(np.abs(a), np.abs(b)), np.inf),
}

COMMANDS = ("idle", "reset", "reduce", "reset_reduce", "load_reduce")


def command_name(reduce_cmd: Any, api: str) -> str:
    name = getattr(reduce_cmd, "name", reduce_cmd)
    if name not in COMMANDS:
        raise ValueError(f"'{api}': reduce_cmd must be a nisa.reduce_cmd ({', '.join(COMMANDS)}), got "
                         f"{reduce_cmd!r}")
    return name


def fold_name(op: Any, allowed: "tuple[str, ...]", api: str) -> str:
    name = op_name(op)
    if name not in allowed:
        fail("err_unsupported_op", f"'{api}' reduces with {', '.join(allowed)}, got {name}")
    return name


def reduce_rows(values: np.ndarray, op: str) -> np.ndarray:
    """Each partition's elements folded with ``op``: (P, 1) fp32."""
    flat = np.asarray(values, dtype=np.float32).reshape(values.shape[0], -1)
    fn, identity = FOLDS[op]
    with quiet():
        if op in ("abs_max", "abs_min"):
            red = (np.max if op == "abs_max" else np.min)(np.abs(flat), axis=1, keepdims=True)
        elif flat.shape[1] == 0:
            red = np.full((flat.shape[0], 1), identity)
        else:
            red = fn.reduce(flat, axis=1, keepdims=True)
    return np.asarray(red, dtype=np.float32)


def _registers(engine: str) -> "dict[int, np.ndarray]":
    launch = runtime.current()
    banks = getattr(launch, "_engine_accumulators", None)
    if banks is None:
        banks = launch._engine_accumulators = {}
    return banks.setdefault((engine, launch.instance_index), {})


def read(engine: str, partitions: int) -> np.ndarray:
    """The registers of the first ``partitions`` lanes, (P, 1); NaN where no command has set them."""
    regs = _registers(engine).get("value")
    out = np.full((partitions, 1), np.nan, dtype=np.float32)
    if regs is not None:
        n = min(partitions, regs.shape[0])
        out[:n] = regs[:n]
    return out


def _store(engine: str, value: np.ndarray) -> None:
    bank = _registers(engine)
    old = bank.get("value")
    p = value.shape[0]
    if old is None or old.shape[0] < p:
        grown = np.full((max(p, 0 if old is None else old.shape[0]), 1), np.nan, dtype=np.float32)
        if old is not None:
            grown[:old.shape[0]] = old
        old = grown
    old = old.copy()
    old[:p] = value
    bank["value"] = old


def start(engine: str, cmd: str, op: str, partitions: int, init: Optional[np.ndarray] = None) -> Optional[np.ndarray]:
    """The registers' value before this instruction's elements are folded in, after ``cmd``'s reset or load:
    None for ``idle`` (the instruction does not accumulate)."""
    if cmd == "idle":
        return None
    if cmd in ("reset", "reset_reduce"):
        return np.full((partitions, 1), FOLDS[op][1], dtype=np.float32)
    if cmd == "load_reduce":
        return np.broadcast_to(np.asarray(init, dtype=np.float32).reshape(-1, 1) if np.ndim(init) else
                               np.float32(init), (partitions, 1)).astype(np.float32)
    return read(engine, partitions)


def accumulate(engine: str, api: str, values: np.ndarray, op: str, cmd: str,
               init: Optional[np.ndarray] = None) -> np.ndarray:
    """Apply ``cmd`` with this instruction's ``values`` (P, ...) and return the registers' new value (P, 1)."""
    p = values.shape[0]
    if cmd == "load_reduce" and init is None:
        fail("err_missing_argument", f"'{api}' with reduce_cmd=load_reduce needs the initial value (reduce_init)")
    acc = start(engine, cmd, op, p, init)
    if acc is None:
        return read(engine, p)
    if cmd != "reset":
        with quiet():
            acc = np.asarray(FOLDS[op][0](acc, reduce_rows(values, op)), dtype=np.float32)
    _store(engine, acc)
    return acc


def set_registers(engine: str, value: np.ndarray) -> None:
    """Leave ``value`` (P, 1) in the registers: instructions that run their own scan over the elements
    (tensor_scalar_cumulative) end with the scan's last value there."""
    _store(engine, np.asarray(value, dtype=np.float32).reshape(-1, 1))

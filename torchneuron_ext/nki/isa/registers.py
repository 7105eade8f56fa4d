"""Engine-sequencer registers: ``nisa.VirtualRegister``, ``register_alloc``, ``register_move``,
``register_load``, ``register_store``.

A register holds one 32-bit integer. Kernels load it from a one-element tensor, use it as a dynamic offset
(``.ap(scalar_offset=reg)``) or as the bound or condition of a loop run on the device
(``nl.dynamic_range``, ``nl.fori_loop``, ``nl.while_loop``, ``while reg:``). The simulator runs the kernel as
Python, so a register's value is simply read when it is used. As in AWS's tracer, a register is not a
Python integer: ``int(reg)``, ``range(reg)`` and arithmetic on it are refused (its value is not known while
the compiler builds the kernel); ``while reg:`` reads it as the device loop condition.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from .. import dtypes
from ..errors import fail
from ..tensor import NKITensor

__all__ = ["VirtualRegister", "register_alloc", "register_move", "register_load", "register_store"]

_INT32_MIN, _INT32_MAX = -(2 ** 31), 2 ** 31 - 1


def _wrap32(value: int) -> int:
    """The value as a 32-bit register holds it (two's complement)."""
    return int(np.array(value, dtype=np.int64).astype(np.uint32).astype(np.int32))


class VirtualRegister:
    """A register of an engine sequencer, holding an int32 (None until first written)."""

    __slots__ = ("_value", "_frozen")

    def __init__(self, state: Optional[int] = None, frozen: bool = False) -> None:
        self._value = None if state is None else _wrap32(_immediate(state, "VirtualRegister(state)"))
        # AWS marks the registers the compiler owns (a loop's induction register) frozen. Writing one is
        # allowed and changes nothing for the loop, which hands each iteration a fresh register.
        self._frozen = frozen

    def read_register(self, api: str = "a register") -> int:
        """The value as an instruction reads it now."""
        if self._value is None:
            fail("err_uninitialized_register",
                 f"{api} reads a register that was never written: initialise it with nisa.register_alloc(value), "
                 f"register_move or register_load")
        return self._value

    def _write(self, value: int) -> None:
        self._value = _wrap32(value)

    def __bool__(self) -> bool:
        # `while reg:` is the device loop on a register condition (AWS's parser frontend): non-zero continues.
        return self.read_register("while reg:") != 0

    def __int__(self) -> int:
        raise TypeError(_NOT_AN_INT.format(what="int(reg)"))

    def __index__(self) -> int:
        raise TypeError(_NOT_AN_INT.format(what="using a register as a Python integer (range(reg), t[reg])"))

    def __repr__(self) -> str:
        return f"VirtualRegister({'uninitialized' if self._value is None else self._value})"


_NOT_AN_INT = ("{what}: a VirtualRegister's value is only known on the device; use it as a loop bound "
               "(nl.dynamic_range, nl.fori_loop), a loop condition (nl.while_loop) or a dynamic offset "
               "(.ap(scalar_offset=reg)), or store it to a tensor with nisa.register_store")


def _immediate(value: Any, api: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{api}: a register holds an integer immediate, got {value!r}")
    if not _INT32_MIN <= int(value) <= 2 ** 32 - 1:
        fail("err_register_value_out_of_range", f"{api}: {int(value)} does not fit a 32-bit register")
    return int(value)


def _register(x: Any, api: str, arg: str) -> VirtualRegister:
    if not isinstance(x, VirtualRegister):
        raise TypeError(f"'{arg}' of nki.isa.{api} must be a VirtualRegister (nisa.register_alloc()), got "
                        f"{type(x).__name__}")
    return x


def _scalar_tensor(t: Any, api: str, arg: str) -> NKITensor:
    """A one-element tensor of at most 32-bit integers, in HBM or SBUF."""
    if not isinstance(t, NKITensor):
        raise TypeError(f"'{arg}' of nki.isa.{api} must be an NKI tensor, got {type(t).__name__}")
    if t.size != 1 or t.ndim > 2:
        fail("err_shape_mismatch", f"'{arg}' of nki.isa.{api} must hold exactly one element (shape [1] or [1, 1]), "
                                   f"got shape {t.shape}")
    if t.buffer.name == "psum":
        fail("err_unsupported_memory", f"'{arg}' of nki.isa.{api} must be in HBM or SBUF, not PSUM")
    if not np.issubdtype(t.dtype, np.integer) or t.dtype.itemsize > 4:
        fail("err_unsupported_dtype", f"'{arg}' of nki.isa.{api} must hold an integer of up to 32 bits, got "
                                      f"{dtypes.name(t.dtype)}")
    return t


def register_alloc(x: Any = None) -> VirtualRegister:
    """A new register, uninitialised (``None``), holding the immediate ``x``, or loaded from ``x`` when it is
    a one-element integer tensor (AWS's library kernels allocate registers that way:
    ``nisa.register_alloc(decision_sb[0, 0])``)."""
    if isinstance(x, NKITensor):
        reg = VirtualRegister()
        register_load(reg, x)
        return reg
    return VirtualRegister(None if x is None else _immediate(x, "nki.isa.register_alloc"))


def register_move(dst: VirtualRegister, src: Any) -> None:
    """``dst`` takes an immediate integer or another register's value."""
    _register(dst, "register_move", "dst")
    if isinstance(src, VirtualRegister):
        dst._write(src.read_register("nki.isa.register_move"))
    else:
        dst._write(_immediate(src, "nki.isa.register_move"))


def register_load(dst: VirtualRegister, src: NKITensor) -> None:
    """``dst`` takes the value of a one-element integer tensor (HBM or SBUF)."""
    _register(dst, "register_load", "dst")
    _scalar_tensor(src, "register_load", "src")
    dst._write(int(np.asarray(src.read()).reshape(-1)[0]))


def register_store(dst: NKITensor, src: VirtualRegister) -> None:
    """The register's value written into a one-element integer tensor (HBM or SBUF)."""
    _scalar_tensor(dst, "register_store", "dst")
    _register(src, "register_store", "src")
    value = np.array(src.read_register("nki.isa.register_store"), dtype=np.int64).astype(dst.dtype)
    dst.write(value.reshape((1,) * dst.ndim))

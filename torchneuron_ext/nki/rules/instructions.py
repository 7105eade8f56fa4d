"""Per-instruction dtype and memory rules of AWS's ISA reference, judged before the engine computes.

- ``activation`` / ``activation_reduce``: ``scale`` is a scalar or a (P, 1) vector spanning the partitions
  (``err_activation_scale_scalar_or_vector``) of dtype float32 (``err_activation_scale_invalid_type``);
  ``bias`` is a vector of float32, float16 or bfloat16 in NKI 0.1 (``err_activation_bias_invalid_type``;
  NKI 0.2 allows any dtype but tfloat32, which the simulator holds as float32).
- ``nc_transpose`` (NKI 0.2's, with ``dst``): on the Tensor engine it reads SBUF and writes PSUM, and on
  either engine ``dst`` has the dtype of ``data`` (a transpose moves elements, it does not convert them).
- GpSimd cannot access PSUM (``tensor_copy``, ``tensor_scalar``, ``tensor_tensor`` with
  ``engine=nisa.gpsimd_engine``): ``err_unsupported_memory``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtypes
from ..errors import fail
from ..memory import psum, sbuf
from . import allocation as _allocation

__all__ = ["check_activation", "check_transpose", "check_engine_memory"]

_LEGACY_BIAS_DTYPES = (dtypes.float32, dtypes.float16, dtypes.bfloat16)


def _is_tile(x: Any) -> bool:
    return hasattr(x, "storage") and hasattr(x, "shape")


def check_activation(data: Any, bias: Any, scale: Any, api: str, launch: Any) -> None:
    dialect = launch.dialect
    _allocation.check_allocated_activation(launch, bias, api)
    if _is_tile(scale):
        p = data.shape[0] if _is_tile(data) and data.shape else None
        free = int(np.prod(scale.shape[1:])) if len(scale.shape) > 1 else 1
        if free != 1 or (p is not None and scale.shape[0] != p):
            fail("err_activation_scale_scalar_or_vector",
                 f"Scale parameter of {api} must be either a scalar value or a 1D vector spanning the partition "
                 f"dimension ({p}, 1), got a tile of shape {tuple(scale.shape)}")
        if scale.dtype != dtypes.float32:
            fail("err_activation_scale_invalid_type",
                 f"Scale parameter of {api} must be a scalar or vector of type float32, got "
                 f"{dtypes.name(scale.dtype)}")
    if _is_tile(bias):
        if dialect == "legacy":
            if bias.dtype not in _LEGACY_BIAS_DTYPES:
                fail("err_activation_bias_invalid_type",
                     f"Bias parameter of {api} must be a vector of type float32, float16, or bfloat16, got "
                     f"{dtypes.name(bias.dtype)}")
        # NKI 0.2 refuses only tfloat32, which the simulator stores as float32 and cannot tell apart.


def check_transpose(data: Any, dst: Any, engine: str, api: str, launch: Any) -> None:
    """NKI 0.2's ``nc_transpose(dst, data)``; the legacy form returns its result and has no ``dst``."""
    if api == "nc_transpose":
        _allocation.check_allocated_transpose(launch, engine, api)
    if dst is None or api != "nc_transpose" or not _is_tile(data):
        return
    if engine != "vector":
        if data.buffer is not sbuf:
            fail("err_unsupported_memory",
                 f"Expected operand 'data' of '{api}' to be in address space 'sbuf', but got a tile in "
                 f"'{data.buffer.name}' instead: the Tensor engine transposes from SBUF into PSUM (the Vector "
                 f"engine reads either)")
        if dst.buffer is not psum:
            fail("err_unsupported_memory",
                 f"Expected operand 'dst' of '{api}' to be in address space 'psum', but got a tile in "
                 f"'{dst.buffer.name}' instead: the Tensor engine writes its transpose to PSUM")
    if dst.dtype != data.dtype:
        fail("err_unsupported_dtype",
             f"'{api}' writes the elements of 'data' unchanged: dst must have data's dtype "
             f"{dtypes.name(data.dtype)}, got {dtypes.name(dst.dtype)} (copy with a cast afterwards)")


def check_engine_memory(engine: str, api: str, **tiles: Any) -> None:
    """The memories an instruction's engine can reach: GpSimd has no access to PSUM."""
    if engine != "gpsimd":
        return
    for arg, tile in tiles.items():
        if _is_tile(tile) and tile.buffer is psum:
            fail("err_unsupported_memory",
                 f"Expected operand '{arg}' of '{api}' to be in address space 'sbuf', but got a tile in 'psum' "
                 f"instead: the GpSimd engine cannot access PSUM (choose the Vector or Scalar engine)")

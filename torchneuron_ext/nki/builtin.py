"""``nki.builtin``: the toolchain's built-in helpers that AWS's simulator harness makes a global name.

AWS's harness sets ``builtins.builtin`` to its simulator's ``nki.builtin`` module, and NKI Library kernels
of the 2025-12 to 2026-02 releases call ``builtin.lang.shared_constant(...)`` and
``builtin.lang.identity(n, dtype)`` without importing anything: a constant the compiler places in
shared HBM once, from a host array or from an ``.npy`` file the kernel's configuration wrote (the rotational
top-k kernel saves its permutation matrices that way). ``shared_constant`` is ``nl.shared_constant``;
``identity`` is the host array it is given, so ``shared_constant(identity(n))`` is in shared HBM, unlike
``nl.shared_identity_matrix``, which AWS documents in SBUF.
"""
from __future__ import annotations

import os
import types
from typing import Any, Union

import numpy as np

from . import _lang
from . import dtypes as _dtypes
from .tensor import NKITensor

__all__ = ["lang"]


def shared_constant(constant: Union[np.ndarray, str, "os.PathLike[str]", Any], dtype: Any = None) -> NKITensor:
    """A shared-HBM tensor holding ``constant``: an array (anything numpy converts) or the path of an ``.npy``
    file, which the compiler reads at compile time (``nl.shared_constant``)."""
    return _lang.shared_constant(constant, dtype)


def identity(n: int, dtype: Any = _dtypes.float32) -> np.ndarray:
    """The host ``n`` x ``n`` identity matrix of ``dtype``, the usual argument of ``shared_constant``."""
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 1:
        raise ValueError(f"builtin.lang.identity takes a positive matrix size, got {n!r}")
    return np.eye(int(n), dtype=_dtypes.as_dtype(dtype))


lang = types.SimpleNamespace(shared_constant=shared_constant, identity=identity)
"""``builtin.lang``: the language built-ins kernels reach through the ``builtin`` global."""

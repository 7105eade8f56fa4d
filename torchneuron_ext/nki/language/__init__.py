"""``nki.language`` of the new dialect (NKI 0.2+): slicing and ``nl.ds`` only, no arange/mgrid/mask."""
from __future__ import annotations

from typing import Any

from .._lang import *  # noqa: F401,F403
from .._lang import (abs, all, max, min, sum, par_dim, tile, fori_loop, while_loop, dynamic_range,  # noqa: F401
                    bitwise_not)
from .._lang import _sbuf_identity_matrix as shared_identity_matrix  # noqa: F401 (SBUF in NKI 0.2+)

_LEGACY_ONLY = {"arange", "mgrid"}


def __getattr__(name: str) -> Any:
    if name in _LEGACY_ONLY:
        raise AttributeError(
            f"nl.{name} belongs to the legacy NKI dialect (neuronxcc.nki); in NKI 0.2+ index with slices and nl.ds, "
            f"or import torchneuron_ext.nki.legacy.language")
    from .._lang import unmodelled
    return unmodelled("nki.language", name)

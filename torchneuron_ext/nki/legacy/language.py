"""``neuronxcc.nki.language``, the legacy dialect: adds nl.arange, nl.mgrid and masks to the shared API."""
from __future__ import annotations

from .._lang import *  # noqa: F401,F403
from .._lang import (abs, all, max, min, sum, par_dim, tile, fori_loop, while_loop, dynamic_range,  # noqa: F401
                     bitwise_not)
from ..indexing import arange, mgrid  # noqa: F401


def __getattr__(name: str):
    from .._lang import unmodelled
    return unmodelled("neuronxcc.nki.language", name)

"""``neuronxcc.nki.language``, the legacy dialect: adds nl.arange, nl.mgrid and masks to the shared API."""
from __future__ import annotations

from .._lang import *  # noqa: F401,F403
from .._lang import (abs, all, max, min, sum, par_dim, tile, fori_loop, while_loop, dynamic_range,  # noqa: F401
                     bitwise_not)
from ..indexing import arange, mgrid  # noqa: F401

# The shared implementation's own imports came with the star import; they are not AWS's names, and
# feature detection (hasattr(nl, name)) sees AWS's surface.
for _name in ("np", "math", "os", "fail", "as_mask", "DynSlice", "NKIUnsupportedError", "UNMODELLED",
              "unmodelled", "Any", "Callable", "Iterator", "Optional", "Sequence", "annotations"):
    globals().pop(_name, None)
del _name


def __getattr__(name: str):
    from .._lang import unmodelled
    return unmodelled("neuronxcc.nki.language", name)

"""The address of an array's first element, read cheaply.

numpy says it through ``arr.__array_interface__["data"][0]``, which builds a dict of six entries (the dtype's
``descr`` list among them) to answer: about 3 us per call with numpy 2.4 on the development VM, more than all
the rest of the schedule's element box of a view (nki/schedule.py's ``box_of``, two or three per instruction).
The address is the first field of numpy's array object after Python's object header (``PyArrayObject_fields.data``,
what the C API's ``PyArray_DATA`` reads), so it is read there instead through ctypes, in about 0.13 us.

That layout is checked once, at import, against ``__array_interface__`` on contiguous, sliced, transposed,
reversed and empty arrays; where it disagrees, or ctypes is missing, ``data_address`` is ``__array_interface__``.
Anything not an ndarray (or subclass, which keeps the layout) goes through ``__array_interface__`` too.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np


def interface_address(arr: Any) -> int:
    """The data address as numpy's array interface gives it (any object exporting one)."""
    return arr.__array_interface__["data"][0]


def _field_reader(header: int = object.__basicsize__) -> "Callable[[Any], int] | None":
    """A reader of the data field at ``id(arr) + header`` (by default the object header's size: ob_refcnt and
    ob_type, more in a debug or free-threaded build), if it agrees with ``__array_interface__`` on every probe;
    else None."""
    try:
        import ctypes
    except ImportError:  # an interpreter built without ctypes
        return None
    read = ctypes.c_void_p.from_address
    ndarray = np.ndarray

    def address(arr: Any) -> int:
        if isinstance(arr, ndarray):
            return read(id(arr) + header).value or 0  # None for a NULL pointer
        return arr.__array_interface__["data"][0]

    probe = np.arange(24, dtype=np.float32).reshape(4, 6)
    probes = (probe, probe[1:], probe[:, 2:], probe[1:3, 3:5], probe.T, probe[::-1, ::-2], probe[2:2],
              probe.view(np.uint8)[:, 3:], np.zeros(0))
    if all(address(a) == interface_address(a) for a in probes):
        return address
    return None


data_address: "Callable[[Any], int]" = _field_reader() or interface_address

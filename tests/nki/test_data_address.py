"""nki/data_address.py: the data address read from numpy's array object equals numpy's array interface."""
from __future__ import annotations

import ml_dtypes
import numpy as np

from torchneuron_ext.nki import data_address as da


class _Sub(np.ndarray):
    pass


class _Exporter:
    """Not an ndarray: only its array interface says where its data is."""

    def __init__(self, arr: np.ndarray) -> None:
        self.__array_interface__ = arr.__array_interface__


def _views() -> list:
    a = np.arange(8 * 16 * 4, dtype=np.float32).reshape(8, 16, 4)
    b = np.zeros((128, 512), ml_dtypes.bfloat16)
    return [a, a[3:], a[:, 5:9], a[2, 3, 1:], a[::-1], a[:, ::-3, 2], a.T, a[1:1], a.view(np.uint8)[:, :, 7:],
            np.lib.stride_tricks.as_strided(a, (4, 4), (0, 4)), b[:, 64:128], b[17:, ::2], np.float32(3.0) * a[0],
            a[4:].view(_Sub), np.empty(0), np.zeros(()), a[0, 0, 0:1]]


def test_the_field_is_the_array_interfaces_address():
    assert da.data_address is not da.interface_address  # this CPython and numpy: the field is read
    for v in _views():
        assert da.data_address(v) == v.__array_interface__["data"][0], (v.shape, v.strides)


def test_the_offsets_of_views_are_byte_offsets():
    a = np.zeros((8, 16), np.float32)
    assert da.data_address(a[3:, 5:]) - da.data_address(a) == 3 * 64 + 5 * 4


def test_objects_that_only_export_an_interface_are_asked_for_it():
    a = np.zeros((4, 4), np.float32)[1:]
    assert da.data_address(_Exporter(a)) == a.__array_interface__["data"][0]


def test_a_layout_that_disagrees_with_the_interface_is_not_used():
    # One word past the field: the probes catch it, and the array interface is used instead.
    assert da._field_reader(object.__basicsize__ + 8) is None
    assert da._field_reader(object.__basicsize__) is not None

"""The engine's shape fast paths agree with numpy's general rules (they replace them on the hot path)."""
from __future__ import annotations

import numpy as np
import pytest

from torchneuron_ext.nki.engine import _broadcast_shape, _larger_than

SHAPES = [[(128, 8), (128, 8)], [(128, 8), ()], [(), ()], [(), (4, 1)], [(128, 8), (128, 1)], [(1, 8), (128, 1)],
          [(128, 8), (), (128, 8)], [(4, 2, 3), (4, 1, 3)], [(128, 8), (64, 8)], [(2, 3), (3, 2)]]


@pytest.mark.parametrize("shapes", SHAPES, ids=str)
def test_broadcast_shape_matches_numpy(shapes: list) -> None:
    try:
        expected = np.broadcast_shapes(*shapes)
    except ValueError:
        with pytest.raises(ValueError):
            _broadcast_shape(shapes)
        return
    assert _broadcast_shape(shapes) == expected


@pytest.mark.parametrize("src, dst, larger", [((128, 8), (128, 8), False), ((128, 1), (128, 8), False),
                                              ((128, 8), (128, 1), True), ((4, 6), (6, 4), False),
                                              ((256, 8), (128, 8), True), ((), (1, 1), False)])
def test_larger_than(src: tuple, dst: tuple, larger: bool) -> None:
    assert _larger_than(src, dst) is larger

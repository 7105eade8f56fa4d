"""Shared pieces of the NKI tests: the example kernels (examples/nki) and argument conversions."""
from __future__ import annotations

import os
import sys
from typing import Any

import numpy as np
import pytest
import torch

# The kernel tests exercise the example scripts' kernels, so the examples stay correct.
EXAMPLES = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "examples", "nki")
if os.path.abspath(EXAMPLES) not in sys.path:
    sys.path.insert(0, os.path.abspath(EXAMPLES))

from _check import as_torch  # noqa: E402


def to_kind(t: torch.Tensor, kind: str) -> Any:
    """The tensor as a kernel argument of the given kind: numpy array, CPU tensor or neuron tensor."""
    if kind == "numpy":
        from torchneuron_ext.nki.interop import tensor_view
        return tensor_view(t.contiguous()).copy()
    if kind == "neuron":
        return t.to("neuron")
    return t


def assert_result(got: Any, expected: torch.Tensor, kind: str, *, atol: float, rtol: float) -> None:
    """The kernel returned the caller's kind of tensor, with the right shape, dtype and values."""
    if kind == "numpy":
        assert isinstance(got, np.ndarray), type(got)
    else:
        assert isinstance(got, torch.Tensor) and got.device.type == ("neuron" if kind == "neuron" else "cpu")
    g = as_torch(got)
    assert g.dtype == expected.dtype and g.shape == expected.shape, (g.dtype, g.shape, expected.dtype,
                                                                      expected.shape)
    torch.testing.assert_close(g.float(), expected.float(), atol=atol, rtol=rtol)


@pytest.fixture(params=["numpy", "cpu", "neuron"])
def kind(request: pytest.FixtureRequest) -> str:
    return request.param

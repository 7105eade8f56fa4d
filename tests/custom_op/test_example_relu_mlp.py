"""examples/custom_op_relu: the ReLU custom ops in an MLP, trained on neuron, eager and compiled."""
from __future__ import annotations

import importlib
import os
import sys

import torch

from .conftest import EXAMPLE


def test_trains_like_torch_relu_eager_and_compiled(builds, relu_library):
    sys.path.insert(0, EXAMPLE)
    try:
        train = importlib.import_module("train")
    finally:
        sys.path.remove(EXAMPLE)
    runs = train.compare(steps=30, compile=True, build_directory=builds.arguments("relu")["build_directory"])
    custom, reference, compiled = (runs[k].losses for k in ("custom ops", "torch.relu", "custom ops, compiled"))
    assert custom[-1] < 0.5 * custom[0]  # it learns
    torch.testing.assert_close(custom, reference, rtol=0, atol=1e-6)  # the same numbers as torch.relu
    torch.testing.assert_close(compiled, custom, rtol=0, atol=1e-4)


def test_custom_op_gradients_match_torch_relu(relu_library):
    sys.path.insert(0, EXAMPLE)
    try:
        my_ops = importlib.import_module("my_ops")
    finally:
        sys.path.remove(EXAMPLE)
    x = torch.randn(16, 120, device="neuron", requires_grad=True)
    y = torch.randn(16, 120, device="neuron")
    (my_ops.Relu.apply(x) * y).sum().backward()
    expected = torch.where(x.detach().cpu() > 0, y.cpu(), torch.zeros(()))
    assert torch.equal(x.grad.cpu(), expected)
    assert os.path.basename(relu_library.path) == "librelu.so"

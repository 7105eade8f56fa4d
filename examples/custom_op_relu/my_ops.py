"""The ReLU custom ops as a differentiable function.

`load()` builds librelu.so from relu.cpp (kernels) and shape.cpp (shape functions and
NEURON_LIBRARY) the first time, and loads it; later calls and other processes reuse the build.
After that, torch.ops.my_ops.relu_forward / relu_backward are operators like any other: they
run on neuron and CPU tensors, under FakeTensor and torch.compile, and show in the profiler.
"""
from __future__ import annotations

import os

import torch

from torchneuron_ext import custom_op

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_BUILD_DIRECTORY = os.path.join(HERE, "build")


def load(build_directory: str = DEFAULT_BUILD_DIRECTORY, verbose: bool = False) -> custom_op.CustomOpLibrary:
    """Builds librelu.so into `build_directory` unless it is up to date, and loads it."""
    return custom_op.load(name="relu", compute_srcs=[os.path.join(HERE, "relu.cpp")],
                          shape_srcs=[os.path.join(HERE, "shape.cpp")], build_directory=build_directory,
                          verbose=verbose)


class Relu(torch.autograd.Function):
    """ReLU whose forward and backward are the custom ops."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return torch.ops.my_ops.relu_forward(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        return torch.ops.my_ops.relu_backward(grad, x)

"""What every example script does after running its kernels: compare with torch and say so."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch


def as_torch(x: Any) -> torch.Tensor:
    """A CPU tensor of a kernel result (numpy, CPU or neuron tensor), for comparison with torch."""
    if isinstance(x, torch.Tensor):
        return x.cpu()
    from torchneuron_ext.nki.interop import numpy_to_cpu_tensor
    return numpy_to_cpu_tensor(np.ascontiguousarray(x)).clone()


def check(name: str, got: Any, expected: torch.Tensor, *, atol: float = 1e-5, rtol: float = 1e-5) -> float:
    """Assert that a kernel's result matches torch's; returns (and prints) the max abs difference."""
    g = as_torch(got).to(torch.float32)
    e = expected.detach().cpu().to(torch.float32)
    torch.testing.assert_close(g, e, atol=atol, rtol=rtol, msg=lambda m: f"{name} differs from torch:\n{m}")
    diff = (g - e).abs().max().item() if g.numel() else 0.0
    print(f"{name:<44} matches torch (max abs diff {diff:.2e})")
    return diff


def device_from_args(description: str) -> str:
    """``--device cpu|neuron``: where the example's tensors live (the kernels take either)."""
    import argparse
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--device", choices=["cpu", "neuron"], default="cpu",
                        help="run the kernels on CPU tensors (default) or on neuron device tensors")
    device = parser.parse_args().device
    if device == "neuron":
        import torchneuron_ext  # noqa: F401  (registers the neuron device)
    return device


def on_device(device: str) -> Callable[..., tuple]:
    """``on(a, b, ...)``: the tensors moved to ``device`` (CPU tensors stay as they are)."""
    def on(*tensors: torch.Tensor) -> tuple:
        return tuple(t.to(device) for t in tensors)
    return on

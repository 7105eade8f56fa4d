"""What every example script does after running its kernels: compare with torch and say so."""
from __future__ import annotations

from typing import Any

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

"""torch.compile on neuron: Dynamo and AOTAutograd capture the graph, Inductor generates host C++
kernels that run on neuron device memory (which is host memory), and every call of a compiled
graph and of each generated kernel is timed and traced as a device kernel of the "compiled" tier.

`torch.compile(fn, backend="neuron")` uses the backend registered here (entry point
`torch_dynamo_backends`); the default `torch.compile(fn)` works on neuron tensors too. Importing
Dynamo costs over a second, so nothing here is imported by `import torch`: the registrations run
when Dynamo or Inductor is first imported (see `_hooks.py`).
"""
from .backend import neuron_backend
from .metrics import get_metrics, graph_breaks, reset_metrics

__all__ = ["get_metrics", "graph_breaks", "neuron_backend", "register", "reset_metrics"]


def register() -> None:
    """Register the neuron device with Dynamo and Inductor (idempotent)."""
    from .registration import register_all

    register_all()

"""``torch_neuronx.distributed.utils``: the public helpers (``get_free_port``, ``get_reduce_type``).

TorchNeuron's other functions here split all-gathers and reduce-scatters into buckets and interleave
chunks for its XLA collective lowering (``get_reduce_scatter_inputs_outputs``, ``_calculate_chunking_params``,
``_execute_with_xla_op_check``, ...). The emulator's collectives run unsplit in gloo, so they are not
provided: reading them raises AttributeError.
"""
from __future__ import annotations

import socket
from typing import Any

import torch.distributed as dist

__all__ = ["get_free_port", "get_reduce_type"]


def get_free_port() -> str:
    """A TCP port free on this host right now, as a string (for MASTER_PORT)."""
    with socket.socket() as sock:
        sock.bind(("", 0))
        return str(sock.getsockname()[1])


_REDUCE_NAMES = {
    dist.ReduceOp.SUM: "SUM", dist.ReduceOp.PRODUCT: "PRODUCT", dist.ReduceOp.MIN: "MIN",
    dist.ReduceOp.MAX: "MAX", dist.ReduceOp.BAND: "BAND", dist.ReduceOp.BOR: "BOR",
    dist.ReduceOp.BXOR: "BXOR", dist.ReduceOp.AVG: "AVG", dist.ReduceOp.PREMUL_SUM: "PREMUL_SUM",
}


def get_reduce_type(reduce_op: Any) -> str:
    """The name of a ``dist.ReduceOp`` ("SUM", "MAX", ...); ValueError for anything else."""
    for op, name in _REDUCE_NAMES.items():
        if reduce_op == op:
            return name
    raise ValueError(f"Unsupported reduce operation: {reduce_op}")


def __getattr__(name: str) -> Any:
    raise AttributeError(
        f"module 'torch_neuronx.distributed.utils' has no attribute '{name}': TorchNeuron's bucketing and chunking helpers for its "
        f"XLA collective lowering are not part of the emulated neuron device (collectives run unsplit in gloo "
        f"on zero-copy views); see docs/torch_neuronx.md")

"""torch.distributed on the neuron device: the ``"neuron"`` c10d backend.

``import torch`` registers it (through the package's autoload), so
``dist.init_process_group(backend="neuron")`` works as on Trainium. Collectives
run in gloo, torch's TCP transport, on zero-copy host views of device memory;
see docs/distributed.md.
"""
from __future__ import annotations

from .backend import BACKEND_NAME, NeuronOptions, ProcessGroupNeuron, checks_enabled_by_default, register
from .rank_device import number_from_environment, select_rank_core, setup_rank_device

__all__ = ["BACKEND_NAME", "NeuronOptions", "ProcessGroupNeuron", "checks_enabled_by_default", "install", "register",
           "select_rank_core", "setup_rank_device"]


def install() -> None:
    """Run at package import: pin a torchrun worker to its rank's core (neuron:LOCAL_RANK), register the backend."""
    select_rank_core()
    number_from_environment()
    register()

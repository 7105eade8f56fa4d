"""``torch_neuronx.distributed``: torch.distributed's ``"neuron"`` backend.

As in TorchNeuron, ``dist.init_process_group(backend="neuron")`` gives every collective on neuron
tensors, and under torchrun each rank sees its own NeuronCore (``NEURON_RT_VISIBLE_CORES`` from
``LOCAL_RANK``). The backend is torchneuron_ext.distributed's (registered by ``import torch``; see
docs/distributed.md): collectives run in gloo on zero-copy views of device memory, where TorchNeuron
lowers them through XLA to NRT collectives. ``backend`` and ``utils`` keep TorchNeuron's module names.
"""
from torchneuron_ext.distributed import BACKEND_NAME, ProcessGroupNeuron

from . import backend, utils

__all__ = ["BACKEND_NAME", "ProcessGroupNeuron", "backend", "utils"]

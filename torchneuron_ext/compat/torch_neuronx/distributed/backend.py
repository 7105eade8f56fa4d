"""``torch_neuronx.distributed.backend``: the process group class and its registration.

TorchNeuron's private helpers of this module (NRT rendezvous, ``_set_rt_visible_cores``,
``_set_root_comm_id``, the XLA collective ops such as ``all_reduce_op``, ``_ret_work``) belong to its
NRT/XLA implementation and are not part of the emulated device: reading them raises AttributeError.
"""
from __future__ import annotations

from typing import Any

from torchneuron_ext.distributed import BACKEND_NAME, ProcessGroupNeuron
from torchneuron_ext.distributed import register as _register

from .._scope import attribute_error as _attribute_error

__all__ = ["BACKEND_NAME", "ProcessGroupNeuron"]


def _register_neuron_backend() -> None:
    """Register the ``"neuron"`` c10d backend (done by ``import torch`` already; idempotent)."""
    _register()


def __getattr__(name: str) -> Any:
    err = _attribute_error("torch_neuronx.distributed.backend", name)
    raise AttributeError(f"{err}: TorchNeuron's NRT/XLA collective implementation is not part of the emulated "
                         f"neuron device (collectives run in gloo on zero-copy views, see docs/distributed.md)")

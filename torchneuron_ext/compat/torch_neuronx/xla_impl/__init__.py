"""``torch_neuronx.xla_impl``: of the XLA-era namespace only ``custom_op`` (Neuron's custom C++ operators,
``torchneuron_ext.custom_op``, see docs/custom_ops.md) exists on the emulated device."""
from __future__ import annotations

import importlib
from types import ModuleType


def __getattr__(name: str) -> ModuleType:
    # `from torch_neuronx.xla_impl import custom_op` (AWS's custom-op scripts) looks for an attribute
    # first; imported lazily, because the custom-op workflow loads the C++ build tooling.
    if name == "custom_op":
        return importlib.import_module("torchneuron_ext.custom_op")
    raise AttributeError(f"torch_neuronx.xla_impl has no {name!r} on the emulated device: of the XLA-era "
                         "namespace only custom_op exists here (docs/torch_neuronx.md)")

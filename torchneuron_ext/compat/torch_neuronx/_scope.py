"""What of TorchNeuron's package is deliberately absent, and the errors that say so.

TorchNeuron lowers every eager op and compiled graph through torch-mlir / JAX / an XLA builder to
StableHLO, compiles it with neuronx-cc into a NEFF, caches NEFFs and runs them on NRT. Those internal
classes and modules have no counterpart in an emulator that runs ATen's host kernels, so importing or
reading them raises an error that names the limitation instead of a bare "No module named".
"""
from __future__ import annotations

from typing import Optional

# Submodules of torch_neuronx (first component after "torch_neuronx.") that are out of scope, and why.
OUT_OF_SCOPE_MODULES: dict[str, str] = {
    "python_ops": "TorchNeuron's per-op lowerings (torch-mlir, JAX and XLA-builder kernels to StableHLO/NEFF)",
    "kernels": "TorchNeuron's XLA/StableHLO kernel classes and the neuronx-cc wrapper",
    "xla_builder": "TorchNeuron's XLA builder lowering",
    "neuron_dynamo_backend": "TorchNeuron's torch.compile lowering (FX to StableHLO, neuronx-cc, NEFF executor); "
                             "torch.compile(backend=\"neuron\") is torchneuron_ext.compiler here",
    "nki_kernel": "TorchNeuron's NKI kernel compilation to NEFF; NKI kernels run in torchneuron_ext.nki's simulator",
    "type_converter_base": "TorchNeuron's dtype converters for its MLIR/XLA lowerings",
    "cache": "TorchNeuron's NEFF caches",
    "metrics": "TorchNeuron's runtime counters (NEFF compilation cache hits, NRT executions); "
               "use torchneuron_ext.get_op_counts() and torchneuron_ext.profiler.op_stats()",
    "protos": "TorchNeuron's NRT profile protobufs",
    "csrc": "TorchNeuron's C++ sources",
    "_C": "TorchNeuron's C++ extension (NRT bindings, NEFF compilation cache statistics, NRT copies and barriers)",
    "_build_config": "TorchNeuron's build-time defaults",
}

# Attributes of the torch_neuronx module that are out of scope, and why.
OUT_OF_SCOPE_ATTRIBUTES: dict[str, str] = {
    "_C": "TorchNeuron's C++ extension: NRT bindings, NEFF compilation cache statistics, NRT barriers; the "
          "emulator's runtime is torchneuron_ext._C, with other functions",
    **{name: why for name, why in OUT_OF_SCOPE_MODULES.items() if name not in ("csrc", "_build_config")},
}

# Every out-of-scope error's message contains this (the test-suite plugin reports such tests as skipped).
MARKER = "not part of the emulated neuron device"
_SEE = "see docs/torch_neuronx.md for what torchneuron_ext provides of torch_neuronx"


def module_error(name: str) -> Optional[ModuleNotFoundError]:
    """The error for importing ``name`` (a torch_neuronx submodule), or None if it is in scope."""
    parts = name.split(".")
    if len(parts) < 2 or parts[0] != "torch_neuronx" or parts[1] not in OUT_OF_SCOPE_MODULES:
        return None
    return ModuleNotFoundError(
        f"No module named '{name}' ({OUT_OF_SCOPE_MODULES[parts[1]]}): {MARKER} (torchneuron_ext runs ATen's "
        f"host kernels; there is no neuronx-cc, StableHLO or NEFF); {_SEE}", name=name)


def missing_module_error(name: str) -> ModuleNotFoundError:
    """The error for a torch_neuronx submodule that torchneuron_ext does not know of."""
    return module_error(name) or ModuleNotFoundError(
        f"No module named '{name}': torchneuron_ext's torch_neuronx has no such module; {_SEE}", name=name)


def attribute_error(module: str, name: str) -> AttributeError:
    why = OUT_OF_SCOPE_ATTRIBUTES.get(name) if module == "torch_neuronx" else None
    if why is not None:
        return AttributeError(f"module '{module}' has no attribute '{name}' ({why}): {MARKER}; {_SEE}")
    return AttributeError(f"module '{module}' has no attribute '{name}' (torchneuron_ext's stand-in); {_SEE}")

"""``torch_neuronx.profiling``: TorchNeuron's module of profiling names
(``from torch_neuronx.profiling import NeuronConfig, ProfileMode, NeuronProfiler``), over torchneuron_ext.profiler.

``torchneuron_ext.profiling`` (the README's import) is this module under its former name."""
from ...profiler.config import NeuronConfig, NeuronProfiler, ProfileMode

__all__ = ["NeuronConfig", "NeuronProfiler", "ProfileMode"]

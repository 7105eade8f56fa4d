"""`torchneuron_ext.profiling`: TorchNeuron's module name for its profiling API
(`from torch_neuronx.profiling import NeuronConfig, ProfileMode, NeuronProfiler`)."""
from .profiler.config import NeuronConfig, NeuronProfiler, ProfileMode

__all__ = ["NeuronConfig", "NeuronProfiler", "ProfileMode"]

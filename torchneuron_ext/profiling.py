"""Former path of TorchNeuron's profiling names (the README's import), now
torchneuron_ext.compat.torch_neuronx.profiling: importing it gives that module itself."""
from torchneuron_ext.compat import aliases as _aliases

_aliases.rename(__name__)

"""Former path of TorchNeuron's surface, now torchneuron_ext.compat.torch_neuronx.

Importing it (or any ``torchneuron_ext.torch_neuronx.X``) gives the module at the new path itself, not a copy.
"""
from torchneuron_ext.compat import aliases as _aliases

_aliases.rename(__name__)

"""``torch_neuronx.nki_hop``: NKI kernels as PyTorch operators (``nki_op``, ``wrap_nki``).

TorchNeuron lowers the kernel call to a ``nki_kernel_wrapper`` higher-order operator compiled into the
NEFF; here the kernel runs in torchneuron_ext.nki's simulator (see docs/nki.md).
"""
from torchneuron_ext import nki_op, wrap_nki  # the package root's public names (loaded on first use)

__all__ = ["nki_op", "wrap_nki"]

"""Everything that imitates another product: AWS's module names and APIs over the emulator.

- ``aliases``: the one import finder (``neuronxcc.nki``, ``nki``, ``torch_neuronx`` when not installed,
  and this package's former module paths);
- ``startup``: the interpreter start-up hook (.pth) for ``TORCHNEURON_EXT_NKI_COMPAT=1``;
- ``__main__``: ``python -m torchneuron_ext.compat script.py | -m module | --install-hook``;
- ``torch_neuronx/``: TorchNeuron's public Python surface (docs/torch_neuronx.md);
- ``testing/``: the pytest plugin and runner for TorchNeuron's own test suite.

Nothing outside this folder imports it, except the package root (which installs the aliases when the
environment asks) and the stubs left at former paths. Importing this package imports nothing else.
"""

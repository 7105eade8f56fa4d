"""Former path of the TorchNeuron-suite plugin and runner, now torchneuron_ext.compat.testing.

``pytest -p torchneuron_ext.testing.torchneuron_suite`` and ``python -m torchneuron_ext.testing.run_suite``
keep working: every ``torchneuron_ext.testing.X`` is the module at the new path itself, not a copy.
"""
from torchneuron_ext.compat import aliases as _aliases

_aliases.rename(__name__)

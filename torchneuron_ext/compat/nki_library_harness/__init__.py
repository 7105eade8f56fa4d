"""Stand-ins for the harness files AWS's public NKI Library tree imports but does not ship.

``test/utils/core_lock_client.py`` imports ``test.utils.scripts.remote_lock_scripts`` (the helper it copies
to Trainium hosts to lock NeuronCores) and ``test/utils/test_orchestrator.py`` imports
``test.utils.perf_analysis_private`` (AWS's profile analysis). Both are imported by the harness's conftest,
so without them nothing is collected, and neither is used in simulation mode. The plugin
(compat/nki_library.py) supplies these modules under those names only where the checkout lacks the files:
the data types the harness needs at import time, honestly, and an error naming the missing hardware path
for anything that would need a Trainium host.
"""
from __future__ import annotations

__all__ = ["HardwarePathUnavailable", "MODULES"]


class HardwarePathUnavailable(RuntimeError):
    """A hardware-only path of AWS's harness (remote hosts, device profiles) was used under the simulator."""


# The module names AWS's harness imports -> the stand-in (None: an empty package).
MODULES: dict = {
    "test.utils.scripts": None,
    "test.utils.scripts.remote_lock_scripts": "torchneuron_ext.compat.nki_library_harness.remote_lock_scripts",
    "test.utils.perf_analysis_private": "torchneuron_ext.compat.nki_library_harness.perf_analysis_private",
}

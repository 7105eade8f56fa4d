import os
import subprocess
import sys
import textwrap

import pytest
import torch

import torchneuron_ext  # noqa: F401  (registers the device even without the entry point)


@pytest.fixture(autouse=True)
def _restore_current_device():
    yield
    torch.neuron.set_device(0)


@pytest.fixture
def fresh_op_counters():
    """Empty per-operator counters and timing for the test, and timing emptied after it (tests that read
    op_stats() or the op tracking counts of their own calls: `pytestmark = pytest.mark.usefixtures(...)`)."""
    from torchneuron_ext.profiler import reset_timing

    reset_timing()
    torchneuron_ext.clear_op_tracking()
    yield
    reset_timing()


def run_python(code: str, env: dict | None = None, timeout: int = 120) -> subprocess.CompletedProcess:
    """Run `code` in a fresh interpreter (for import-time and environment behaviour)."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("NEURON_RT_", "NEURON_EMU_"))}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True, text=True, env=full_env, timeout=timeout,
    )

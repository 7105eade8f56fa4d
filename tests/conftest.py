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


def run_python(code: str, env: dict | None = None, timeout: int = 120) -> subprocess.CompletedProcess:
    """Run `code` in a fresh interpreter (for import-time and environment behaviour)."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("NEURON_RT_", "NEURON_EMU_"))}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True, text=True, env=full_env, timeout=timeout,
    )

"""The simulator sets glibc's malloc thresholds once, at its first launch, unless told not to
(nki/host_memory.py). Each case runs in a fresh interpreter: the thresholds are the process's."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from torchneuron_ext.nki import host_memory

SCRIPT = textwrap.dedent("""
    import ctypes, numpy as np
    import torchneuron_ext.nki as nki
    import torchneuron_ext.nki.isa as nisa
    import torchneuron_ext.nki.language as nl
    from torchneuron_ext.nki import host_memory

    calls = []
    real = host_memory._tune
    host_memory._tune = lambda: calls.append(1) or real()

    @nki.jit
    def k(a):
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    assert (k(a) == a).all() and (k(a) == a).all()
    print(len(calls), host_memory.keep_freed_memory())
""")


def _run(env: dict) -> str:
    full = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != host_memory.ENV}
    full.update(env)
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=full, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_set_once_at_the_first_launch_and_left_alone_when_told() -> None:
    assert _run({}) == "1 True"
    assert _run({host_memory.ENV: "0"}) == "1 False"
    assert _run({"MALLOC_TRIM_THRESHOLD_": str(1 << 20)}) == "1 False"

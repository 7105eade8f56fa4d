"""An ``@nki.jit`` kernel in a test module is not collected as a pytest test, whatever its name: its
parameters are the kernel's inputs (AWS's SDK names a kernel ``test_nl_broadcast`` beside the TestCase
that calls it)."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

MODULE = textwrap.dedent('''
    import unittest

    import numpy as np
    import torchneuron_ext.nki.legacy as nki
    import torchneuron_ext.nki.legacy.language as nl


    @nki.jit(mode="simulation")
    def test_broadcast_kernel(in_tensor):
        out = nl.ndarray([128, in_tensor.shape[1]], in_tensor.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.broadcast_to(nl.load(in_tensor), shape=(128, in_tensor.shape[1])))
        return out


    class TestBroadcast(unittest.TestCase):
        def test_broadcast(self):
            src = np.arange(64, dtype=np.float32).reshape(1, 64)
            np.testing.assert_array_equal(test_broadcast_kernel(src), np.repeat(src, 128, axis=0))
''')


def test_a_kernel_named_test_is_not_a_test(tmp_path: Path) -> None:
    (tmp_path / "test_sdk_style.py").write_text(MODULE)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout and "error" not in done.stdout.lower(), done.stdout

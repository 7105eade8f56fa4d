"""The NKI simulator's core runs with numpy alone: torch cannot be imported, yet kernels of both dialects
launch on numpy arrays. A subprocess makes ``import torch`` fail and registers a bare namespace for the
``torchneuron_ext`` package, so that neither the package's ``__init__`` (which loads torch and the
extension) nor anything that needs torch can run."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir))

_SCRIPT = textwrap.dedent(r"""
    import os, sys, types
    sys.modules["torch"] = None  # `import torch` raises ImportError
    package = types.ModuleType("torchneuron_ext")
    package.__path__ = [os.path.join(sys.argv[1], "torchneuron_ext")]
    sys.modules["torchneuron_ext"] = package

    import numpy as np
    import torchneuron_ext.nki as nki
    import torchneuron_ext.nki.isa as nisa
    import torchneuron_ext.nki.language as nl
    from torchneuron_ext.nki import legacy
    from torchneuron_ext.nki.legacy import language as lnl

    @nki.jit
    def add(a, b):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        for i in range(a.shape[1] // 256):
            x = nl.ndarray((128, 256), dtype=a.dtype, buffer=nl.sbuf)
            y = nl.ndarray((128, 256), dtype=a.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=x, src=a[:, i * 256:(i + 1) * 256])
            nisa.dma_copy(dst=y, src=b[:, i * 256:(i + 1) * 256])
            z = nl.ndarray((128, 256), dtype=a.dtype, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=z, data1=x, data2=y, op=nl.add)
            nisa.dma_copy(dst=out[:, i * 256:(i + 1) * 256], src=z)
        return out

    @nki.jit
    def matmul(lhs_t, rhs):
        out = nl.ndarray((lhs_t.shape[1], rhs.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
        a = nl.ndarray(lhs_t.shape, dtype=lhs_t.dtype, buffer=nl.sbuf)
        b = nl.ndarray(rhs.shape, dtype=rhs.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=lhs_t)
        nisa.dma_copy(dst=b, src=rhs)
        acc = nl.ndarray((lhs_t.shape[1], rhs.shape[1]), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=acc, stationary=a, moving=b)
        res = nl.ndarray(acc.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=acc)
        nisa.dma_copy(dst=out, src=res)
        return out

    @legacy.jit
    def legacy_gelu(a):
        out = lnl.ndarray(a.shape, dtype=a.dtype, buffer=lnl.shared_hbm)
        lnl.store(out, lnl.gelu(lnl.load(a)))
        return out

    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((128, 512), dtype=np.float32) for _ in range(2))
    np.testing.assert_allclose(add(a, b), a + b, rtol=0, atol=0)
    lhs_t, rhs = rng.standard_normal((128, 64), dtype=np.float32), rng.standard_normal((128, 256), dtype=np.float32)
    np.testing.assert_allclose(matmul(lhs_t, rhs), lhs_t.T @ rhs, rtol=1e-4, atol=1e-4)
    import math
    x = rng.standard_normal((128, 64), dtype=np.float32)
    expected = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x.ravel().tolist()]).reshape(x.shape)
    np.testing.assert_allclose(legacy_gelu(x), expected, rtol=1e-6, atol=1e-6)
    assert sys.modules["torch"] is None and not hasattr(nki, "torch")  # the integration did not load
    print("numpy-only core: ok")
""")


def test_core_runs_kernels_on_numpy_arrays_without_torch():
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-c", _SCRIPT, ROOT], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "numpy-only core: ok" in proc.stdout

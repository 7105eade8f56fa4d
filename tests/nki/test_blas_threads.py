"""A launch runs numpy's BLAS on one thread and restores the caller's setting afterwards."""
from __future__ import annotations

import numpy as np
import pytest

import torchneuron_ext.nki.legacy as nki
import torchneuron_ext.nki.legacy.language as nl

threadpoolctl = pytest.importorskip("threadpoolctl")


def _blas_threads() -> list:
    return [lib["num_threads"] for lib in threadpoolctl.threadpool_info() if lib["user_api"] == "blas"]


def test_launch_limits_blas_to_one_thread_and_restores_it() -> None:
    seen = []

    @nki.jit
    def k(a):
        seen.extend(_blas_threads())
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(a))
        return out

    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        before = _blas_threads()
        k(np.ones((2, 2), np.float32))
        after = _blas_threads()
    assert before and set(before) == {2}
    assert seen and set(seen) == {1}
    assert after == before


def test_limit_is_restored_when_the_kernel_fails() -> None:
    @nki.jit
    def bad(a):
        raise RuntimeError("kernel bug")

    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        with pytest.raises(RuntimeError, match="kernel bug"):
            bad(np.ones((2, 2), np.float32))
        assert set(_blas_threads()) == {2}

"""The rest of nki.language public kernels touch: dtype aliases and their limits, finfo/iinfo."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import torchneuron_ext.nki.language as new_nl
import torchneuron_ext.nki.legacy as nki
import torchneuron_ext.nki.legacy.language as nl


def test_dtype_aliases_are_their_dtypes() -> None:
    assert nl.fp32 == nl.float32 and nl.bf16 == nl.bfloat16 and nl.fp16 == nl.float16
    assert np.dtype(np.float32) == nl.fp32
    assert np.zeros(2, dtype=nl.fp32).dtype == np.float32
    assert new_nl.fp32 == np.float32


def test_limits() -> None:
    assert nl.fp32.min == np.finfo(np.float32).min
    assert nl.finfo(nl.bfloat16).max == ml_dtypes.finfo(ml_dtypes.bfloat16).max
    assert nl.finfo(nl.float8_e4m3).max == 240
    assert nl.iinfo(nl.int8).min == -128
    with pytest.raises(TypeError, match="use nl.iinfo"):
        nl.finfo(nl.int32)
    with pytest.raises(TypeError, match="use nl.finfo"):
        nl.iinfo(nl.float32)


def test_alias_as_kernel_dtype() -> None:
    # The flash-attention reference fills its running max with nl.fp32.min.
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=nl.fp32, buffer=nl.shared_hbm)
        m = nl.full(a.shape, fill_value=nl.fp32.min, dtype=nl.fp32)
        nl.store(out, nl.maximum(m, nl.load(a)))
        return out

    a = np.full((4, 4), -np.inf, np.float32)
    np.testing.assert_array_equal(k(a), np.full((4, 4), np.finfo(np.float32).min))


def test_unmodelled_names_say_so() -> None:
    from torchneuron_ext.nki import NKIUnsupportedError
    with pytest.raises(NKIUnsupportedError, match="nl.gather_flattened is not modelled"):
        new_nl.gather_flattened
    with pytest.raises(AttributeError, match="has no attribute 'fp33'"):
        nl.fp33

"""The simulator's error classes (nki/errors.py): each rule keeps its toolchain code and kernel line, and is
also the built-in Python error its kind of mistake is, so code written against AWS's simulator catches it."""
from __future__ import annotations

import pickle

import numpy as np
import pytest
from expecttest import TestCase

import torchneuron_ext.nki.legacy as lnki
import torchneuron_ext.nki.legacy.isa as lisa
import torchneuron_ext.nki.legacy.language as lnl
from torchneuron_ext.nki import NKIError
from torchneuron_ext.nki.errors import NKIIndexError


def f32(*shape: int) -> np.ndarray:
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


@lnki.jit
def gather_rows(table, step):
    # AWS's indirect-load example shape: row indices 0, step, 2 * step, ... of a (128, F) table.
    out = lnl.ndarray((64, table.shape[1]), dtype=table.dtype, buffer=lnl.shared_hbm)
    ix, iy = lnl.mgrid[0:64, 0:table.shape[1]]
    idx = lisa.iota(step * lnl.arange(64)[:, None], dtype=np.int32)
    rows = lisa.memset(shape=(64, table.shape[1]), value=-1, dtype=table.dtype)
    lisa.dma_copy(src=table[idx, iy], dst=rows[ix, iy], oob_mode=lisa.oob_mode.error)
    lnl.store(out, rows)
    return out


class TestOutOfBoundsIsAnIndexError(TestCase):
    def test_out_of_bounds_gather_is_an_index_error_with_code_and_line(self):
        with pytest.raises(IndexError) as info:  # as AWS's simulator's numpy IndexError is caught
            gather_rows(f32(128, 16), 3)
        err = info.value
        assert isinstance(err, NKIError) and type(err) is NKIIndexError
        line = err.lineno - gather_rows.func.__code__.co_firstlineno
        self.assertExpectedInline(f"{err.code} at def+{line}: {err.source_line.strip()}\n{err.message}", """\
err_tensor_access_out_of_bound at def+7: lisa.dma_copy(src=table[idx, iy], dst=rows[ix, iy], oob_mode=lisa.oob_mode.error)
index range [0, 189] exceed dimension size of 128; if only part of the tile is in bounds, pass mask= (for example mask=(i * 128 + i_p < 128))""")

    def test_legal_twin_stays_in_bounds(self):
        table = f32(128, 16)
        np.testing.assert_array_equal(gather_rows(table, 2), table[0:128:2])

    def test_the_class_survives_pickling_and_other_rules_are_not_index_errors(self):
        with pytest.raises(IndexError) as info:
            gather_rows(f32(128, 16), 3)
        again = pickle.loads(pickle.dumps(info.value))
        assert type(again) is NKIIndexError and again.code == "err_tensor_access_out_of_bound"

        @lnki.jit
        def too_many_partitions(a):
            lnl.load(a)
            return a

        with pytest.raises(NKIError) as other:
            too_many_partitions(f32(256, 4))
        assert other.value.code == "err_num_partition_exceed_arch_limit"
        assert not isinstance(other.value, IndexError)

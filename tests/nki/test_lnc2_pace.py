"""The two cores of an LNC=2 launch keep pace, instruction by instruction (nki/cores.py, CoreGroup.pace):
what one core's shared-HBM writes leave of the other's is the same on every run, and as on the device's
cores, which run the same kernel at one clock."""
from __future__ import annotations

import threading
from typing import Any

import numpy as np

import torchneuron_ext.nki as nki
import torchneuron_ext.nki.isa as nisa
import torchneuron_ext.nki.language as nl
from torchneuron_ext.nki.cores import CoreGroup


@nki.jit
def zero_then_store_my_rows(a):
    """AWS's cascaded-max test kernel in small: every core zeroes the whole shared output, then stores its
    half of the rows. In step, both zeroings precede both stores."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    i = nl.program_id(0)
    half = a.shape[0] // 2
    zero = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.memset(zero, 0)
    nisa.dma_copy(dst=out, src=zero)
    mine = nl.ndarray((half, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=mine, src=a[i * half:(i + 1) * half, :])
    nisa.tensor_scalar(dst=mine, data=mine, op0=nl.multiply, operand0=2.0)
    nisa.dma_copy(dst=out[i * half:(i + 1) * half, :], src=mine)
    return out


def test_both_cores_zero_the_output_before_either_stores() -> None:
    a = np.random.default_rng(0).standard_normal((64, 32)).astype(np.float32)
    for _ in range(5):  # free-running threads got this wrong on most runs; in step it is never wrong
        np.testing.assert_array_equal(zero_then_store_my_rows[2](a), 2 * a)


@nki.jit
def uneven_work(a):
    """Core 0 runs many more instructions than core 1 before its store: the short core finishes and the
    long one goes on alone (a finished core holds nobody back)."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    i = nl.program_id(0)
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    for _ in range(40 if i == 0 else 1):
        nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)
    half = a.shape[0] // 2
    nisa.dma_copy(dst=out[i * half:(i + 1) * half, :], src=t[i * half:(i + 1) * half, :])
    return out


def test_a_core_with_more_instructions_runs_on_after_the_other_finishes() -> None:
    a = np.zeros((8, 4), np.float32)
    got = uneven_work[2](a)
    np.testing.assert_array_equal(got[:4], 40.0)
    np.testing.assert_array_equal(got[4:], 1.0)


def test_pace_orders_the_kth_instructions_of_all_cores_before_any_k_plus_first() -> None:
    group = CoreGroup(3, "k")
    log: list = []
    lock = threading.Lock()

    def body(core: int) -> Any:
        for clock in range(1, 6):
            group.pace(core, clock)
            with lock:
                log.append((clock, core))

    group.run(body)
    assert log == sorted(log)  # every core's k-th before any (k+1)-th, lower core first at equal k

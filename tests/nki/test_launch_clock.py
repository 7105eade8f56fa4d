# nki.kernel.launch_clock: the wall and CPU seconds of every top-level launch, summed (what the NKI Library
# runner subtracts from a test's time to split it into the simulator's share and the harness's).
from __future__ import annotations

import time

import numpy as np

import torchneuron_ext.nki as nki
import torchneuron_ext.nki.isa as nisa
import torchneuron_ext.nki.language as nl
from torchneuron_ext.nki.kernel import launch_clock

from .kernel_io import load, store


@nki.jit
def _scale(x, factor: float):
    t = load(x)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=factor)
    return store(t)


@nki.jit
def _scale_twice_inline(x):
    # a kernel called from a kernel runs inside the caller's launch: one launch, not three
    return _scale(_scale(x, 2.0), 3.0)


@nki.jit
def _sleepy(x):
    time.sleep(0.05)  # wall time that is not CPU time
    return _scale(x, 1.0)


def _delta(before: tuple) -> tuple:
    return tuple(b - a for a, b in zip(before, launch_clock.reading()))


def test_counts_each_top_level_launch_once() -> None:
    x = np.ones((128, 16), np.float32)
    before = launch_clock.reading()
    np.testing.assert_array_equal(nki.simulate(_scale_twice_inline)(x), 6 * x)
    launches, wall, cpu = _delta(before)
    assert launches == 1 and wall > 0 and cpu > 0


def test_wall_includes_waits_cpu_does_not() -> None:
    x = np.ones((128, 16), np.float32)
    before = launch_clock.reading()
    nki.simulate(_sleepy)(x)
    launches, wall, cpu = _delta(before)
    assert launches == 1 and wall >= 0.05 and cpu < wall


def test_launch_ranks_is_one_launch_of_all_ranks() -> None:
    x = np.ones((128, 16), np.float32)
    before = launch_clock.reading()
    outs = nki.launch_ranks(nki.jit(_scale.func), [(x, 2.0), (x, 4.0)])
    np.testing.assert_array_equal(outs[1], 4 * x)
    assert _delta(before)[0] == 1


def test_a_failing_launch_is_still_timed() -> None:
    before = launch_clock.reading()
    try:
        nki.simulate(_scale)(np.ones((128, 16), np.float32))  # factor missing: the binding fails
    except TypeError:
        pass
    else:
        raise AssertionError("expected a TypeError for the missing argument")
    assert _delta(before)[0] == 1

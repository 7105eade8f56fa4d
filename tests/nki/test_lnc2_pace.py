"""The two cores of an LNC=2 launch keep pace where it shows (nki/cores.py, CoreGroup.advance and .sync): their
shared-HBM effects take place in the order of the instructions' numbers, so what one core's writes leave of
the other's is the same on every run, and as on the device's cores, which run the same kernel at one clock."""
from __future__ import annotations

import threading
import time
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import torchneuron_ext.nki as nki
import torchneuron_ext.nki.isa as nisa
import torchneuron_ext.nki.language as nl
from torchneuron_ext.nki import cores, runtime
from torchneuron_ext.nki.engines import products
from torchneuron_ext.nki.cores import CoreGroup, Headroom


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
def read_what_the_other_core_wrote(a, core0_fillers: int):
    """Both cores zero a shared buffer (instruction 2), core 1 stores 7s into it at its instruction 4, and core 0
    copies it out with its instruction 3 + core0_fillers: a read goes after core 1's write exactly when it is
    for a later instruction, (5, core 0) > (4, core 1) > (4, core 0)."""
    shape = a.shape
    out = nl.ndarray((2,) + shape, dtype=a.dtype, buffer=nl.shared_hbm)
    raced = nl.ndarray(shape, dtype=a.dtype, buffer=nl.shared_hbm)
    i = nl.program_id(0)
    t = nl.ndarray(shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.memset(t, 0)                                  # 1
    nisa.dma_copy(dst=raced, src=t)                    # 2
    if i == 1:
        nisa.memset(t, 7)                              # 3
        nisa.dma_copy(dst=raced, src=t)                # 4
    else:
        for _ in range(core0_fillers):
            nisa.memset(t, 1)                          # 3, 4, ...
    r = nl.ndarray(shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=r, src=raced)
    nisa.dma_copy(dst=out[i], src=r)
    return out


@pytest.mark.parametrize("fillers, seen", [(1, 0.0), (2, 7.0)])
def test_a_read_sees_the_writes_of_earlier_instructions_only(fillers: int, seen: float) -> None:
    a = np.zeros((4, 8), np.float32)
    for _ in range(10):
        got = read_what_the_other_core_wrote[2](a, fillers)
        np.testing.assert_array_equal(got[0], seen)
        np.testing.assert_array_equal(got[1], 7.0)


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


class _WakeCheckedCondition(threading.Condition):
    """A condition whose waits must end by a wake-up: one that times out was lost."""

    def wait(self, timeout: Any = None) -> bool:
        if not super().wait(timeout):
            raise AssertionError(f"a core waited {timeout} s without being woken")
        return True


def _group(count: int) -> CoreGroup:
    group = CoreGroup(count, "k")
    group._cond = _WakeCheckedCondition()
    group.POLL_S = 10.0
    return group


def _touches_shared(core: int, clock: int) -> bool:
    return clock % (core + 2) == 0 or clock in (7, 8)


def test_shared_accesses_follow_the_instruction_order_of_all_cores() -> None:
    group = _group(3)
    log: list = []
    lock = threading.Lock()

    def body(core: int) -> Any:
        for clock in range(1, 200):
            group.advance(core, clock)
            # The cores touch shared memory at different instructions and run freely in between.
            if _touches_shared(core, clock):
                group.sync(core, clock)
                with lock:
                    log.append((clock, core))

    group.run(body)
    assert log == sorted(log)  # core c's k-th before core c''s k'-th when (k, c) < (k', c')
    assert len(log) == sum(_touches_shared(c, k) for c in range(3) for k in range(1, 200))


def test_one_core_runs_at_a_time_between_its_waits() -> None:
    group = _group(2)
    running = [0]
    most = [0]
    lock = threading.Lock()

    def body(core: int) -> Any:
        for clock in range(1, 300):
            group.advance(core, clock)
            with lock:
                running[0] += 1
                most[0] = max(most[0], running[0])
            time.sleep(0)  # lets another thread take the GIL, were it not waiting for the turn
            with lock:
                running[0] -= 1
            if clock % 7 == 0:
                group.sync(core, clock)

    group.run(body)
    assert most[0] == 1
    assert not any(group._holding)


def test_a_core_waits_only_for_cores_behind_it_and_not_for_finished_or_waiting_ones() -> None:
    group = _group(3)
    group.advance(0, 5)
    group.advance(1, 9)
    group._done[2] = True
    group.sync(0, 5)  # core 1 is past it; core 2 (at 0) is behind, but finished
    group.advance(0, 12)
    group._waits[1] = object()  # core 1 waits at a meeting point: it cannot move until core 0 does
    group.sync(0, 12)


def test_a_read_is_placed_at_the_instruction_it_is_for() -> None:
    """Core 0 reads for its instruction 2 while still at 1, core 1 writes at its 1: the write goes first,
    (1, core 1) < (2, core 0), whichever thread runs first, and neither waits for the other for ever."""
    for _ in range(20):
        group = _group(2)
        log: list = []

        def body(core: int) -> Any:
            group.advance(core, 1)
            group.sync(core, 2 if core == 0 else 1)
            log.append("read" if core == 0 else "write")

        group.run(body)
        assert log == ["write", "read"]
        assert group._clocks == [2, 1]


def test_announce_lets_a_waiting_core_go_on_and_keeps_the_order() -> None:
    group = _group(2)
    group.headroom = Headroom("1")
    log: list = []
    lock = threading.Lock()
    turn_taken = threading.Event()

    def body(core: int) -> Any:
        for clock in range(1, 6):
            group.advance(core, clock)
            group.sync(core, clock)
            with lock:
                log.append((clock, core))
            if core == 1 and clock == 1:
                turn_taken.set()
            if core == 0 and clock == 1:
                # As nc_matmul's product: core 0 computes while core 1 takes its first turn. Without the
                # announcement core 1 could not go on before core 0 reached clock 2, and this would time out.
                group.announce(0, 2)
                assert turn_taken.wait(timeout=10)

    group.run(body)
    assert log == sorted(log)


def test_announce_is_nothing_without_headroom() -> None:
    group = CoreGroup(2, "k")
    group.headroom = Headroom("0")
    group.announce(0, 3)
    assert group._clocks == [0, 0]
    group.headroom = Headroom("1")
    group.announce(0, 3)
    group.announce(0, 2)  # never back
    assert group._clocks == [3, 0]


@nki.jit
def matmuls_between_shared_stores(w, x, block: int = 512):
    """Each core zeroes the shared output, accumulates 2 K tiles of bf16 matmuls per block of ``block``
    columns in PSUM, and stores its block's rows; the zeroing and the stores are shared-HBM writes between the
    matmuls. (128, 128) x (128, 512) products are large enough to be announced (OVERLAP_MIN_MACS)."""
    width = x.shape[2]
    out = nl.ndarray((2 * 128, width), dtype=nl.float32, buffer=nl.shared_hbm)
    i = nl.program_id(0)
    zero = nl.ndarray((128, width), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(zero, 0)
    nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=zero)
    nisa.dma_copy(dst=out[(1 - i) * 128:(2 - i) * 128, :], src=zero)
    wt = nl.ndarray((128, 2, 128), dtype=w.dtype, buffer=nl.sbuf)
    xt = nl.ndarray((128, 2, width), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=wt, src=w[i])
    nisa.dma_copy(dst=xt, src=x)
    for b in range(width // block):
        acc = nl.ndarray((128, block), dtype=nl.float32, buffer=nl.psum)
        for k in range(2):
            nisa.nc_matmul(dst=acc, stationary=wt[:, k, :], moving=xt[:, k, b * block:(b + 1) * block])
        res = nl.ndarray((128, block), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=acc)
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, b * block:(b + 1) * block], src=res)
    return out


@pytest.mark.parametrize("overlap", ["0", "1"])
def test_matmuls_give_the_same_bits_with_and_without_announcing(monkeypatch: pytest.MonkeyPatch,
                                                                 overlap: str) -> None:
    monkeypatch.setenv(cores.OVERLAP_ENV, overlap)
    rng = np.random.default_rng(3)
    w = rng.standard_normal((2, 128, 2, 128)).astype(ml_dtypes.bfloat16)
    x = rng.standard_normal((128, 2, 1024)).astype(ml_dtypes.bfloat16)
    got = matmuls_between_shared_stores[2](w, x)
    w32, x32 = w.astype(np.float32), x.astype(np.float32)
    for core in range(2):
        want = sum(w32[core][:, k, :].T @ x32[:, k, :] for k in range(2))
        np.testing.assert_allclose(got[core * 128:(core + 1) * 128], want, rtol=1e-5, atol=1e-4)
    # The same bits either way: the product's order of summation and the stores' order are unchanged.
    monkeypatch.setenv(cores.OVERLAP_ENV, "1" if overlap == "0" else "0")
    np.testing.assert_array_equal(matmuls_between_shared_stores[2](w, x), got)


def test_only_products_worth_a_hand_off_are_announced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cores.OVERLAP_ENV, "1")
    monkeypatch.setenv(products.ENV, "0")  # products computed on the core's own thread
    announced = []
    real = runtime.Launch.announce_next
    monkeypatch.setattr(runtime.Launch, "announce_next", lambda self: (announced.append(1), real(self))[1])
    rng = np.random.default_rng(4)
    w = rng.standard_normal((2, 128, 2, 128)).astype(ml_dtypes.bfloat16)
    x = rng.standard_normal((128, 2, 1024)).astype(ml_dtypes.bfloat16)
    matmuls_between_shared_stores[2](w, x, block=512)  # 128 x 128 x 512: 8 Mi multiply-adds
    assert len(announced) == 2 * 2 * 2  # cores x blocks x K tiles
    announced.clear()
    matmuls_between_shared_stores[2](w, x, block=128)  # 2 Mi: over before the other core would run
    assert not announced
    monkeypatch.setenv(products.ENV, "1")
    if products.enabled():  # queued products leave the core's thread free: none is announced
        matmuls_between_shared_stores[2](w, x, block=512)
        assert not announced


def test_overlap_setting_is_checked() -> None:
    with pytest.raises(ValueError, match="must be auto, 0 or 1"):
        Headroom.from_env("yes")


def _headroom_after(busy_fraction: float, own_cpus: float) -> bool:
    """Headroom's verdict on two CPUs busy ``busy_fraction`` of a second, this process using ``own_cpus``."""
    h = Headroom("auto")
    h._cpus = [0, 1]
    h.update(10.0, 5.0, (1000, 2000))
    idle = round(200 * (1.0 - busy_fraction))  # 100 ticks a second per CPU
    h.update(11.0, 5.0 + own_cpus, (1000 + idle, 2200))
    return h._spare


def test_headroom_wants_most_of_a_cpu_free_of_other_processes() -> None:
    assert _headroom_after(busy_fraction=0.5, own_cpus=1.0)        # only this process: a CPU free
    assert _headroom_after(busy_fraction=0.9, own_cpus=1.6)        # its two cores overlapping, others idle
    assert not _headroom_after(busy_fraction=1.0, own_cpus=1.0)    # another process holds the other CPU
    assert not _headroom_after(busy_fraction=0.75, own_cpus=1.0)   # half a CPU taken by others
    h = Headroom("auto")
    h._cpus = [0, 1]
    h.update(10.0, 5.0, None)  # /proc/stat unreadable: never
    assert not h._spare


def test_announcing_is_auto_unless_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(cores.OVERLAP_ENV, raising=False)
    group = CoreGroup(2, "k")
    assert group.headroom.mode == "auto"
    group.announce(0, 3)  # the first probe only takes a sample: no CPU is known to be free yet
    assert group._clocks == [0, 0]
    monkeypatch.setenv(cores.OVERLAP_ENV, "0")
    group = CoreGroup(2, "k")
    assert not group.headroom.spare()
    group.announce(0, 3)
    assert group._clocks == [0, 0]

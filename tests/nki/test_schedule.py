"""The schedule model of an NKI launch (nki/schedule.py): hand-worked schedules, stalls on one tile against
independent work, PSUM accumulation, HBM dependencies, DMA queues, the cores' meeting points, records."""
from __future__ import annotations

import contextlib

import numpy as np
import pytest

import torchneuron_ext.nki as nki
import torchneuron_ext.nki.isa as nisa
import torchneuron_ext.nki.language as nl
from torchneuron_ext.nki import schedule
from torchneuron_ext.nki.cost_model import Costs, hardware
from torchneuron_ext.nki.schedule import box_of, latency_table

HW = hardware("trn2")
LAT = latency_table("trn2")
US = 1e-6


def _dma_s(nbytes: int) -> float:
    return HW.dma_fixed_s + nbytes / HW.memory_bytes_per_s


@nki.jit(platform_target="trn2")
def scale(a):
    """load -> Vector -> store: three instructions, each waiting on the one before."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    u = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=u, data=t, op0=nl.multiply, operand0=2.0)
    nisa.dma_copy(dst=out, src=u)
    return out


def test_hand_worked_load_compute_store():
    a = np.arange(128 * 512, dtype=np.float32).reshape(128, 512)
    with schedule.recording():
        np.testing.assert_array_equal(scale(a), 2 * a)
    s = scale.last_result.schedule
    load, vec, store = s.instructions
    # The load: 1.3 us fixed + 256 KiB at 362.5 GB/s = 2.02316 us on the first DMA queue.
    assert (load.queue, load.opcode, load.start_s) == ("dma:0", "dma_copy", 0.0)
    assert load.end_s == pytest.approx(_dma_s(a.nbytes)) and load.end_s / US == pytest.approx(2.02316, abs=1e-5)
    # The Vector instruction waits for the load's tile and pays the dependency latency (160 Vector cycles at
    # 0.96 GHz = 0.16667 us), then runs max(64, 512) cycles = 0.53333 us.
    assert vec.deps == (0,) and vec.critical_dep == 0
    assert vec.start_s / US == pytest.approx(2.02316 + 0.16667, abs=1e-5)
    assert vec.end_s / US == pytest.approx(2.02316 + 0.16667 + 0.53333, abs=1e-5)
    assert vec.wait_s == pytest.approx(vec.start_s)
    # The store, on the second queue, starts as the Vector result is there (its fixed cost holds the wait).
    assert (store.queue, store.deps) == ("dma:1", (1,))
    assert store.start_s == pytest.approx(vec.end_s)
    assert store.end_s / US == pytest.approx(2.72316 + 2.02316, abs=1e-5)
    assert s.makespan_s == pytest.approx(store.end_s)
    assert scale.last_result.estimated_latency_us == pytest.approx(store.end_s / US)
    assert [i.index for i in s.critical_path()] == [0, 1, 2]
    assert [(o.role, o.memory, o.shape, o.dtype) for o in vec.operands] == [
        ("in", "sbuf", (128, 512), "float32"), ("out", "sbuf", (128, 512), "float32")]
    assert load.file == __file__ and load.line > 0


def _vector_s(n: int) -> float:
    return max(HW.nki_min_ii_cycles, n) / HW.vector_clock_hz


def _scalar_s(n: int) -> float:
    return max(HW.nki_min_ii_cycles, n) / HW.scalar_clock_hz


@nki.jit(platform_target="trn2")
def one_tile_chain(a):
    """Every instruction reads and writes the same tile: nothing can overlap."""
    t = nl.ndarray((128, 256), dtype=np.float32, buffer=nl.sbuf)
    for _ in range(3):
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
        nisa.activation(dst=t, op=nl.copy, data=t)
    return a


@nki.jit(platform_target="trn2")
def independent_twin(a):
    """The same instructions on tiles of their own: the Vector and Scalar engines overlap."""
    t = nl.ndarray((128, 256), dtype=np.float32, buffer=nl.sbuf)
    for _ in range(3):
        u = nl.ndarray((128, 256), dtype=np.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=u, data=t, op0=nl.multiply, operand0=2.0)
        v = nl.ndarray((128, 256), dtype=np.float32, buffer=nl.sbuf)
        nisa.activation(dst=v, op=nl.copy, data=t)
    return a


def test_a_kernel_serialised_on_one_tile_shows_the_stall():
    a = np.zeros((1, 1), np.float32)
    with schedule.recording():
        one_tile_chain(a)
        independent_twin(a)
    chain, twin = one_tile_chain.last_result, independent_twin.last_result
    assert chain.costs.serial_latency_s == pytest.approx(twin.costs.serial_latency_s)
    serial = chain.costs.serial_latency_s
    assert serial == pytest.approx(3 * (_vector_s(256) + _scalar_s(256)))
    # The chain: the serial sum plus, for every instruction after the first, its engine's dependency latency.
    waits = 3 * LAT.dependency_s["scalar"] + 2 * LAT.dependency_s["vector"]
    assert chain.schedule.makespan_s == pytest.approx(serial + waits)
    assert [i.deps for i in chain.schedule.instructions] == [(), (0,), (1,), (2,), (3,), (4,)]
    assert all(i.wait_s > 0 for i in chain.schedule.instructions[1:])
    assert len(chain.schedule.critical_path()) == 6
    # The twin: the busiest engine's total (Vector, the slower clock).
    assert twin.schedule.makespan_s == pytest.approx(max(twin.costs.busy_s.values()))
    assert twin.schedule.makespan_s == pytest.approx(3 * _vector_s(256))
    assert all(i.deps == () and i.wait_s == 0 for i in twin.schedule.instructions)


@nki.jit(platform_target="trn2")
def accumulate(lhsT, rhs):
    """nl.zeros in PSUM, four matmuls accumulating into it, one copy out, one store."""
    out = nl.ndarray((128, 512), dtype=np.float32, buffer=nl.shared_hbm)
    a = [nl.ndarray((128, 128), dtype=lhsT.dtype, buffer=nl.sbuf) for _ in range(4)]
    b = [nl.ndarray((128, 512), dtype=rhs.dtype, buffer=nl.sbuf) for _ in range(4)]
    for k in range(4):
        nisa.dma_copy(dst=a[k], src=lhsT[k * 128:(k + 1) * 128, :])
        nisa.dma_copy(dst=b[k], src=rhs[k * 128:(k + 1) * 128, :])
    acc = nl.zeros((128, 512), dtype=np.float32, buffer=nl.psum)
    for k in range(4):
        nisa.nc_matmul(dst=acc, stationary=a[k], moving=b[k], accumulate=True)
    res = nl.ndarray((128, 512), dtype=np.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    nisa.dma_copy(dst=out, src=res)
    return out


def test_matmuls_into_one_psum_tile_accumulate_without_stalls():
    rng = np.random.default_rng(0)
    lhsT = rng.standard_normal((512, 128)).astype(np.float32)
    rhs = rng.standard_normal((512, 512)).astype(np.float32)
    with schedule.recording():
        out = accumulate(lhsT, rhs)
    np.testing.assert_allclose(out, lhsT.T @ rhs, rtol=1e-4, atol=1e-3)
    s = accumulate.last_result.schedule
    mm = [i for i in s.instructions if i.opcode == "nc_matmul"]
    memset = next(i for i in s.instructions if i.opcode == "memset")
    # The first matmul waits for its operands' loads (k = 0: instructions 0 and 1), not for the memset:
    # the accumulation group's first matmul overwrites.
    assert memset.index not in mm[0].deps
    assert mm[0].start_s == pytest.approx(max(s.instructions[0].end_s, s.instructions[1].end_s)
                                          + LAT.dependency_s["tensor"])
    # Each later matmul depends on the one before (the PSUM tile) and on its loads; in order on the Tensor
    # Engine the accumulation costs nothing beyond the wait for the loads.
    for prev, cur in zip(mm, mm[1:]):
        assert prev.index in cur.deps
        loads = [s.instructions[2 * (cur.index - mm[0].index)], s.instructions[2 * (cur.index - mm[0].index) + 1]]
        assert cur.start_s == pytest.approx(max(prev.end_s, max(x.end_s for x in loads)
                                                + LAT.dependency_s["tensor"]))
    copy = next(i for i in s.instructions if i.opcode == "tensor_copy")
    assert copy.critical_dep == mm[-1].index
    assert copy.start_s == pytest.approx(mm[-1].end_s + LAT.dependency_s["vector"])


@nki.jit(platform_target="trn2")
def through_hbm(a):
    """A DMA into the output, then a DMA out of it: the second waits for the first (HBM counts too)."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=out, src=a)
    nisa.dma_copy(dst=t, src=out)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_hbm_tensors_carry_dependencies():
    a = np.ones((128, 64), np.float32)
    with schedule.recording():
        np.testing.assert_array_equal(through_hbm(a), a)
    first, second, third = through_hbm.last_result.schedule.instructions
    assert second.deps == (0,) and second.start_s == pytest.approx(first.end_s)
    assert third.deps == (0, 1) and third.start_s == pytest.approx(second.end_s)


@nki.jit(platform_target="trn2")
def two_loads(a, b):
    """Two independent loads: their fixed costs overlap on two DMA queues, their bytes share the bandwidth."""
    ta = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    tb = nl.ndarray(b.shape, dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=ta, src=a)
    nisa.dma_copy(dst=tb, src=b)
    return a


def test_independent_transfers_overlap_their_fixed_cost():
    a = np.ones((128, 512), np.float32)
    with schedule.recording():
        two_loads(a, a)
    s = two_loads.last_result.schedule
    first, second = s.instructions
    assert (first.queue, second.queue) == ("dma:0", "dma:1") and first.start_s == second.start_s == 0.0
    data = a.nbytes / HW.memory_bytes_per_s
    assert first.end_s == pytest.approx(HW.dma_fixed_s + data)
    assert second.end_s == pytest.approx(HW.dma_fixed_s + 2 * data)
    assert s.makespan_s / US == pytest.approx(1.3 + 2 * 0.72316, abs=1e-5)
    assert two_loads.last_result.costs.serial_latency_s == pytest.approx(2 * (HW.dma_fixed_s + data))


@nki.jit(platform_target="trn2")
def column_blocks(a):
    """Stores into disjoint column blocks of one output, then a load of the first block again."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a[:, 0:64])
    nisa.dma_copy(dst=out[:, 0:64], src=t)
    nisa.dma_copy(dst=out[:, 64:128], src=t)
    back = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=back, src=out[:, 0:64])
    return out


def test_dependencies_follow_the_element_box_not_the_whole_tensor():
    a = np.arange(128 * 128, dtype=np.float32).reshape(128, 128)
    with schedule.recording():
        out = column_blocks(a)
    np.testing.assert_array_equal(out[:, :64], a[:, :64])
    load, store0, store1, back = column_blocks.last_result.schedule.instructions
    assert store0.deps == (0,) and store1.deps == (0,)  # disjoint blocks of `out`: no write-after-write
    assert back.deps == (1,)                            # reads the block store0 wrote, not store1's


def test_box_of_views():
    base = np.zeros((8, 16), np.float32)
    assert box_of(base, base[2:4, 3:9]) == (2, 3, 3, 8)
    assert box_of(base, base[:, ::2]) == (0, 7, 0, 14)
    cube = np.zeros((4, 8, 16), np.float32)
    assert box_of(cube, cube[1, 2:4, :]) == (1, 1, 2, 3, 0, 15)
    assert box_of(base, base.reshape(16, 8)[3:5]) is None            # a reshape across rows: the whole
    assert box_of(base, base[::-1]) is None                          # negative stride: the whole allocation


def test_records_are_kept_only_when_asked():
    a = np.ones((128, 512), np.float32)
    scale(a)
    s = scale.last_result.schedule
    assert s.instructions == [] and s.instruction_count == 3 and s.critical_path() == []
    assert s.makespan_s / US == pytest.approx(4.74632, abs=1e-5)
    with schedule.recording():
        scale(a)
    assert len(scale.last_result.schedule.instructions) == 3


def test_records_are_the_instructions_their_init_would_make():
    # instructions() fills each record's __dict__ without ScheduledInstruction.__init__ (its cost at 100k
    # records): every field, in order, equal to what __init__ makes of them, spills' records included.
    import dataclasses

    a = np.zeros((2, 2), np.float32)
    kernel = _spill_then_work(128, 1)
    with schedule.recording():
        kernel(a)
    records = kernel.last_result.schedule.instructions
    names = [f.name for f in dataclasses.fields(schedule.ScheduledInstruction)]
    assert any(r.queue == "dma:spill" for r in records) and any(r.operands for r in records)
    for r in records:
        assert list(vars(r)) == names
        made = schedule.ScheduledInstruction(**vars(r))
        assert made == r and hash(made) == hash(r) and repr(made) == repr(r)
        with pytest.raises(dataclasses.FrozenInstanceError):
            r.start_s = 0.0


def test_disabled_falls_back_to_the_busiest_engine():
    a = np.ones((128, 512), np.float32)
    with schedule.disabled():
        scale(a)
    c = scale.last_result.costs
    assert c.estimated_latency_s == pytest.approx(max(c.busy_s.values()))
    assert c.estimated_latency_s == pytest.approx(2 * _dma_s(a.nbytes))


@nki.jit(platform_target="trn2")
def uneven_then_barrier(a):
    """Core 1 does more work before the barrier; after it, both cores go on from the later arrival."""
    shared = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    i = nl.program_id(0)
    t = nl.ndarray((64, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a[i * 64:(i + 1) * 64, :])
    if i == 1:
        for _ in range(4):
            nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=1.0)
    nisa.dma_copy(dst=shared[i * 64:(i + 1) * 64, :], src=t)
    nisa.core_barrier(shared, (0, 1))
    nisa.dma_copy(dst=t, src=shared[(1 - i) * 64:(2 - i) * 64, :])
    return shared


def test_the_cores_schedules_meet_at_a_barrier():
    a = np.ones((128, 512), np.float32)
    with schedule.recording():
        uneven_then_barrier[2](a)
    s = uneven_then_barrier.last_result.schedule
    by_core = {c: [i for i in s.instructions if i.core == c] for c in (0, 1)}
    arrival = {c: max(i.end_s for i in by_core[c] if i.opcode != "core_barrier"
                      and i.index < next(j.index for j in by_core[c] if j.opcode == "core_barrier"))
               for c in (0, 1)}
    assert arrival[1] > arrival[0]
    for c in (0, 1):
        barrier = next(i for i in by_core[c] if i.opcode == "core_barrier")
        after = [i for i in by_core[c] if i.index > barrier.index]
        assert after and all(i.start_s >= arrival[1] for i in after)
    assert s.makespan_s == pytest.approx(max(i.end_s for i in s.instructions))


def test_costs_used_directly_have_no_dependencies():
    # Costs without a kernel (the validation rows' single instructions): nothing ties the transfers, so
    # they alternate between the two queues and share the bandwidth. Queue 0: fixed, data (0 - 2.02 us);
    # queue 1: fixed, then its data after queue 0's (2.02 - 2.75); queue 0 again: fixed from 2.02, data
    # 3.32 - 4.05; queue 1: fixed from 2.75, data after that (4.05 - 4.77): 2 fixed costs + 3 data phases.
    c = Costs("trn2")
    for _ in range(4):
        c.dma("load", 128 * 512 * 4, False, True)
    data = 128 * 512 * 4 / HW.memory_bytes_per_s
    assert c.estimated_latency_s == pytest.approx(2 * HW.dma_fixed_s + 3 * data)
    assert c.estimated_latency_s / US == pytest.approx(4.76947, abs=1e-5)
    assert c.busy_s["dma"] == pytest.approx(4 * (HW.dma_fixed_s + data))  # the engine's work, not overlapped


def test_latency_table_per_target():
    for name in ("trn1", "trn2", "trn3"):
        t = latency_table(name)
        hw = hardware(name)
        assert t.dma_queues == 2 and t.dma_fixed_s == hw.dma_fixed_s
        assert t.dependency_s["vector"] == pytest.approx(160 / hw.vector_clock_hz)
        assert t.dependency_s["dma"] == 0.0 and set(t.sources) >= {"dma_queues", "dependency_cycles"}


@nki.jit(platform_target="trn2")
def placed_loads(a, first, second):
    """Two independent loads, each placed on the queue its trigger engine names (None: the compiler's)."""
    ta = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    tb = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    for t, trigger in ((ta, first), (tb, second)):
        if trigger is None:
            nisa.dma_copy(dst=t, src=a)
        else:
            nisa.dma_copy(dst=t, src=a, dge_mode=nisa.dge_mode.hwdge, engine=getattr(nisa.engine, trigger))
    return a


def test_dma_copy_engine_places_the_transfer_on_its_trigger_engines_queue():
    a = np.ones((128, 512), np.float32)
    data = a.nbytes / HW.memory_bytes_per_s
    with schedule.recording():
        placed_loads(a, "sync", "sync")
    first, second = placed_loads.last_result.schedule.instructions
    # One queue runs its transfers in order (nki-dma-overview.rst): the second pays its fixed cost after the
    # first ends, although nothing else ties them.
    assert (first.queue, second.queue) == ("dma:0", "dma:0") and second.deps == ()
    assert second.start_s == pytest.approx(first.end_s) == pytest.approx(HW.dma_fixed_s + data)
    with schedule.recording():
        placed_loads(a, "scalar", "sync")
    first, second = placed_loads.last_result.schedule.instructions
    assert (first.queue, second.queue) == ("dma:1", "dma:0") and first.start_s == second.start_s == 0.0
    # Where the kernel does not say, the transfers alternate: after one placed on SyncE's queue, ScalarE's.
    with schedule.recording():
        placed_loads(a, "sync", None)
    assert [i.queue for i in placed_loads.last_result.schedule.instructions] == ["dma:0", "dma:1"]
    with schedule.recording():
        placed_loads(a, None, None)
    assert [i.queue for i in placed_loads.last_result.schedule.instructions] == ["dma:0", "dma:1"]


def _index_tile(values):
    t = nl.ndarray((len(values), 1), dtype=nl.int32, buffer=nl.sbuf)
    for p, v in enumerate(values):
        nisa.memset(dst=t[p:p + 1, 0:1], value=v)
    return t


@nki.jit(platform_target="trn2")
def gather_and_swdge(a):
    """A gather through a tile of indices (software DGE, the compiler's only choice) and a static copy
    forced to software DGE: both on GpSimd's queue; a static copy left to the compiler alternates."""
    rows = _index_tile([3, 0, 2])
    g = nl.ndarray((3, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=g, src=a.ap(pattern=[[a.shape[1], 3], [1, a.shape[1]]], offset=0, vector_offset=rows,
                                  indirect_dim=0))
    s = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=a, dge_mode=nisa.dge_mode.swdge)
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    out = nl.ndarray(g.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=g)
    return out


def test_software_dge_transfers_go_to_gpsimds_queue():
    a = np.arange(4 * 16, dtype=np.float32).reshape(4, 16)
    with schedule.recording():
        np.testing.assert_array_equal(gather_and_swdge(a), a[[3, 0, 2]])
    dmas = [i for i in gather_and_swdge.last_result.schedule.instructions if i.engine == "dma"]
    assert [i.queue for i in dmas] == ["dma:2", "dma:2", "dma:0", "dma:1"]
    assert dmas[1].start_s == pytest.approx(dmas[0].end_s)  # in order on GpSimd's queue


def test_dma_queue_of_trigger_and_mode():
    assert schedule.dma_queue() is None and schedule.dma_queue(dge="hwdge") is None
    assert schedule.dma_queue("sync", "hwdge") == "dma:0" and schedule.dma_queue("scalar", "hwdge") == "dma:1"
    assert schedule.dma_queue(dge="swdge") == schedule.dma_queue(gathered=True) == "dma:2"
    with pytest.raises(ValueError, match="sync, scalar or gpsimd engine's sequencer, got 'tensor'"):
        schedule.dma_queue("tensor")


def test_a_meeting_records_the_other_cores_arrival_and_the_critical_path_crosses_cores():
    a = np.ones((128, 512), np.float32)
    with schedule.recording():
        uneven_then_barrier[2](a)
    s = uneven_then_barrier.last_result.schedule
    by_core = {c: [i for i in s.instructions if i.core == c] for c in (0, 1)}
    barrier = {c: next(i for i in by_core[c] if i.opcode == "core_barrier") for c in (0, 1)}
    last = {c: max((i for i in by_core[c] if i.index < barrier[c].index), key=lambda i: i.end_s) for c in (0, 1)}
    # Core 1 arrives last (its Vector work): core 0's barrier waited on core 1's store, which set its start.
    assert (1, last[1].index) in barrier[0].deps and last[0].index in barrier[0].deps
    assert barrier[0].critical_dep == (1, last[1].index)
    assert barrier[1].critical_dep == last[1].index
    assert barrier[0].start_s == pytest.approx(last[1].end_s)
    # The chain that sets the makespan: core 1's load, Vector work and store, then the barrier and the load
    # after it on whichever core ends last.
    path = s.critical_path()
    assert [(i.core, i.opcode) for i in path[:6]] == [(1, "dma_copy")] + [(1, "tensor_scalar")] * 4 + [(1, "dma_copy")]
    assert path[6].opcode == "core_barrier" and path[-1].end_s == pytest.approx(s.makespan_s)


def _spill_then_work(partitions: int, steps: int):
    @nki.jit(platform_target="trn2")
    def k(a):
        # x and y (120,000 bytes per partition each) do not fit one partition with s beside them at 128
        # partitions: the compiler spills where s is written; the Vector work after it lasts longer than the
        # spill and reload transfers.
        x = nl.ndarray((partitions, 30_000), dtype=nl.float32, buffer=nl.sbuf)
        y = nl.ndarray((partitions, 30_000), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(x, 1.0)
        nisa.memset(y, 2.0)
        s = nl.ndarray((partitions, 30_000), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=s, data1=x, data2=y, op=nl.add)
        for _ in range(steps):
            nisa.tensor_scalar(dst=s, data=s, op0=nl.multiply, operand0=1.0)
        return a
    return k


def test_spills_are_placed_where_they_occur_and_overlap_the_work_after_them():
    a = np.zeros((2, 2), np.float32)
    fits, spills = _spill_then_work(64, 4), _spill_then_work(128, 4)
    fits(a)
    with schedule.recording():
        spills(a)
    c = spills.last_result.costs
    first, second = (240_000 - 229_376) * 128, 120_000 * 128  # y's memset, then s's write: over capacity
    assert c.spill_bytes["sbuf"] == first + second and fits.last_result.costs.spill_bytes["sbuf"] == 0
    s = spills.last_result.schedule
    moved = [i for i in s.instructions if i.queue == "dma:spill"]
    assert [(i.opcode, i.nbytes) for i in moved] == [("spill", first), ("reload", first), ("spill", second),
                                                     ("reload", second)]
    assert s.instruction_count == 7  # the kernel's instructions; the compiler's transfers are not counted
    memset_y, add = s.instructions[1], s.instructions[2]
    # Each save starts where the instruction that overflowed SBUF starts, its reload right behind it.
    assert moved[0].start_s == pytest.approx(memset_y.start_s) and moved[2].start_s == pytest.approx(add.start_s)
    assert [i.end_s - i.start_s for i in moved] == pytest.approx([_dma_s(first)] * 2 + [_dma_s(second)] * 2)
    assert moved[1].start_s == pytest.approx(moved[0].end_s) and moved[3].start_s == pytest.approx(moved[2].end_s)
    # Four Vector passes over (128, 30000) after the add (4 x 31.4 us) outlast the transfers: the spills cost
    # no time. Before they were scheduled, their 97.4 us were added to the makespan.
    assert c.spill_s / US == pytest.approx(97.4476, abs=1e-4)
    assert spills.last_result.costs.estimated_latency_s == pytest.approx(fits.last_result.costs.estimated_latency_s)
    # With no work after it, the last reload ends the kernel: 150.0 us against 93.9 us without the spills.
    short, fits_short = _spill_then_work(128, 0), _spill_then_work(64, 0)
    short(a)
    fits_short(a)
    assert fits_short.last_result.costs.estimated_latency_s / US == pytest.approx(93.9167, abs=1e-4)
    assert short.last_result.costs.estimated_latency_s / US == pytest.approx(62.6667 + 2 * _dma_s(second) / US, abs=1e-4)


@nki.jit(platform_target="trn2")
def filled_operands(b, psum_value):
    """A matmul whose stationary tile is an SBUF nl.full and whose PSUM tile is nl.full(psum_value)."""
    st = nl.full((128, 128), 1.0, dtype=np.float32, buffer=nl.sbuf)
    mv = nl.ndarray(b.shape, dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=mv, src=b)
    acc = nl.full((128, 512), psum_value, dtype=np.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=st, moving=mv)
    return b


def test_only_zeros_in_psum_start_an_accumulation_group_without_a_wait():
    b = np.ones((128, 512), np.float32)
    with schedule.recording():
        filled_operands(b, 0.0)
    fill_st, load, fill_acc, mm = filled_operands.last_result.schedule.instructions
    assert (fill_st.opcode, fill_acc.opcode, mm.opcode) == ("memset", "memset", "nc_matmul")
    # The SBUF fill is the matmul's operand: it waits for it. The PSUM zeros are the group's start, which
    # the matmul's overwrite replaces: no wait.
    assert fill_st.index in mm.deps and fill_acc.index not in mm.deps
    with schedule.recording():
        filled_operands(b, 2.0)
    fill_st, load, fill_acc, mm = filled_operands.last_result.schedule.instructions
    assert fill_acc.index in mm.deps  # a PSUM tile of 2.0 is data the matmul accumulates onto


@nki.jit(platform_target="trn2")
def reductions_into_registers(a):
    """Instructions that write a second result (reduce_res) besides dst: both writes are theirs."""
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    u = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf, name="u")
    r = nl.ndarray((a.shape[0], 1), dtype=np.float32, buffer=nl.sbuf, name="r")
    nisa.activation(dst=u, op=nl.exp, data=t, reduce_op=nl.add, reduce_res=r, reduce_cmd=nisa.reduce_cmd.reset_reduce)
    v = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf, name="v")
    q = nl.ndarray((a.shape[0], 1), dtype=np.float32, buffer=nl.sbuf, name="q")
    nisa.tensor_scalar_reduce(dst=v, data=u, op0=nl.multiply, operand0=2.0, reduce_op=nl.add, reduce_res=q)
    return a


def test_an_instructions_writes_are_its_own_not_the_instruction_before():
    # The schedule gives an instruction the reads before its count and the writes after it (and the reads a
    # write follows before the next count: copies, assignments of a fresh result); an engine that wrote
    # reduce_res before counting gave that write to the instruction before (activation's to the load).
    a = np.ones((128, 64), np.float32)
    with schedule.recording():
        reductions_into_registers(a)
    load, act, tsr = reductions_into_registers.last_result.schedule.instructions
    outs = {i.opcode: sorted(o.name for o in i.operands if o.role == "out") for i in (load, act, tsr)}
    assert outs == {"dma_copy": [""], "activation": ["r", "u"], "tensor_scalar_reduce": ["q", "v"]}
    assert act.deps == (0,) and tsr.deps == (1,)


def _matmul_burst(target: str, n: int, gap_after: int = -1):
    @nki.jit(platform_target=target)
    def k(st, mv):
        """``n`` matmuls streaming into one PSUM tile; after matmul ``gap_after``, a chain of Scalar work
        whose result the next matmul reads holds the Tensor Engine idle."""
        s = nl.ndarray(st.shape, dtype=st.dtype, buffer=nl.sbuf)
        m = nl.ndarray(mv.shape, dtype=mv.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=s, src=st)
        nisa.dma_copy(dst=m, src=mv)
        acc = nl.ndarray((128, 512), dtype=np.float32, buffer=nl.psum)
        for i in range(n):
            nisa.nc_matmul(dst=acc, stationary=s, moving=m, accumulate=i > 0)
            if i == gap_after:
                for _ in range(8):
                    nisa.activation(dst=m, op=nl.copy, data=m)
        return st
    return k


def _ramp_end(x0: float, work: float, ramp: float = 3e-6, floor: float = 0.5) -> float:
    """Where in a burst an instruction started at x0 ends, with the rate floor + (1 - floor) x / ramp rising
    to 1 at ramp: the work done by x, integrated by hand, solved by bisection (the schedule solves the
    quadratic)."""
    def done(x: float) -> float:
        r = min(x, ramp)
        return floor * r + (1 - floor) * r * r / (2 * ramp) + max(x - ramp, 0.0)

    lo, hi = x0, x0 + 2 * work / floor
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if done(mid) - done(x0) < work else (lo, mid)
    return hi


def test_tensor_engine_warms_up_on_trn2_and_re_engages_after_an_idle_gap():
    st = np.ones((128, 128), nl.bfloat16)
    mv = np.ones((128, 512), nl.bfloat16)
    hw = hardware("trn2")
    full = 512 / hw.tensor_clock_hz  # max(min(64, 128), 512) cycles at full rate
    lat = latency_table("trn2")
    assert (lat.te_ramp_s, lat.te_ramp_floor) == (3e-6, 0.5) and "te_ramp_s" in lat.sources
    k = _matmul_burst("trn2", 40)
    with schedule.recording():
        k(st, mv)
    mm = [i for i in k.last_result.schedule.instructions if i.opcode == "nc_matmul"]
    burst = mm[0].start_s
    # The first runs at about half rate; back to back, each ends where the ramp's integral reaches its work.
    assert mm[0].duration_s == pytest.approx(_ramp_end(0.0, full), rel=1e-4) and mm[0].duration_s > 1.8 * full
    for j, ins in enumerate(mm):
        assert ins.end_s - burst == pytest.approx(_ramp_end(0.0, (j + 1) * full), rel=1e-4)
    # Past the ramp (3 us), full rate: the ramp cost 0.75 us (a quarter of 3 us) in all.
    assert mm[-1].duration_s == pytest.approx(full)
    assert mm[-1].end_s - burst == pytest.approx(40 * full + 0.75e-6, rel=1e-6)
    # An idle gap of more than 3 us (Scalar work the next matmul waits for) re-engages the limit.
    k2 = _matmul_burst("trn2", 40, gap_after=34)
    with schedule.recording():
        k2(st, mv)
    mm2 = [i for i in k2.last_result.schedule.instructions if i.opcode == "nc_matmul"]
    assert mm2[35].start_s - mm2[34].end_s > 3e-6
    assert mm2[34].duration_s == pytest.approx(full)
    assert mm2[35].duration_s == pytest.approx(_ramp_end(0.0, full), rel=1e-4)
    # NeuronCore-v2 documents no such limit: every matmul at full rate.
    k1 = _matmul_burst("trn1", 3)
    with schedule.recording():
        k1(st, mv)
    assert latency_table("trn1").te_ramp_s == 0.0
    assert [i.duration_s for i in k1.last_result.schedule.instructions if i.opcode == "nc_matmul"] == \
        pytest.approx([512 / hardware("trn1").tensor_clock_hz] * 3)


def _reference_box(base: np.ndarray, arr: np.ndarray):
    """box_of's definition, element by element: each of the view's dimensions steps along the first of the
    allocation's dimensions whose stride divides its own; the first element's index is its byte offset divided
    by the allocation's strides in turn."""
    bstrides, bshape = base.strides, base.shape
    off = arr.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    if off < 0 or not bstrides or any(s <= 0 for s in bstrides):
        return None
    lo = []
    for s in bstrides:
        q, off = divmod(off, s)
        lo.append(q)
    if off:
        return None
    hi = list(lo)
    for size, t in zip(arr.shape, arr.strides):
        if size > 1 and t != 0:
            d = next((d for d, s in enumerate(bstrides) if t >= s and t % s == 0), None)
            if d is None:
                return None
            hi[d] += (size - 1) * (t // bstrides[d])
    if any(h >= n for h, n in zip(hi, bshape)):
        return None
    return tuple(v for pair in zip(lo, hi) for v in pair)


def test_box_of_matches_its_definition_over_random_views():
    rng = np.random.default_rng(7)
    bases = [np.zeros((4, 8, 16), np.float32), np.zeros((16, 6), np.int16), np.zeros((3, 4, 5, 6), np.uint8),
             np.zeros((8, 16), np.float32)[:, 2:10], np.zeros((6, 4, 10), np.float32).transpose(1, 0, 2)]
    checked = boxed = 0
    for base in bases:
        for _ in range(400):
            key = []
            for n in base.shape:
                lo = int(rng.integers(0, n))
                kind = rng.integers(0, 4)
                key.append(lo if kind == 0 else slice(lo, int(rng.integers(lo, n + 1)), int(rng.integers(1, 3))))
            view = base[tuple(key)]
            if rng.integers(0, 4) == 0 and view.ndim >= 2:
                view = view.swapaxes(0, 1)
            if rng.integers(0, 6) == 0:
                view = view.reshape(-1) if view.flags.c_contiguous else view
            if view.size == 0:
                continue  # an empty view: the 2-D fast path bounds it otherwise than the loops (no element either way)
            got = box_of(base, view)
            assert got == _reference_box(base, view), (base.shape, base.strides, view.shape, view.strides)
            assert box_of(base, view) == got  # a second time, through the cache of view steps
            checked += 1
            boxed += got is not None
    assert boxed > checked // 2 and checked - boxed > 20  # both outcomes are exercised


@nki.jit(platform_target="trn2")
def tiled_pipeline(a, w):
    """Blocks of ``a`` through shared SBUF tiles (column slices read and written in turn, so boxes overlap in
    part), matmuls accumulating into a zero-filled PSUM tile, stores into HBM blocks read back: dependencies
    that wait, and many accesses long done by the time their allocation is touched again."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.sbuf)
    u = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.sbuf)
    wt = nl.ndarray((128, 128), dtype=w.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=wt, src=w)
    for r in range(3):
        for j in range(8):
            cols = slice(j * 64, (j + 1) * 64)
            nisa.dma_copy(dst=t[:, cols], src=a[:, r * 512 + j * 64:r * 512 + (j + 1) * 64])
            nisa.tensor_scalar(dst=u[:, cols], data=t[:, cols], op0=nl.multiply, operand0=2.0)
            nisa.activation(dst=t[:, j * 64 + 32:(j + 1) * 64], op=nl.copy, data=u[:, cols][:, 16:48], bias=None,
                            scale=1.0)
        acc = nl.zeros((128, 512), dtype=np.float32, buffer=nl.psum)
        for k in range(2):
            nisa.nc_matmul(dst=acc, stationary=wt, moving=t, accumulate=True)
        nisa.tensor_copy(dst=u, src=acc)
        nisa.dma_copy(dst=out[:, r * 512:(r + 1) * 512], src=u)
        nisa.dma_copy(dst=t[:, :256], src=out[:, r * 512 + 128:r * 512 + 384])
    return out


@pytest.mark.parametrize("target", ["trn1", "trn2"])
def test_a_schedule_without_records_times_every_instruction_as_with_them(target):
    # Without records the schedule skips the accesses that cannot delay an instruction (_ready); with them it
    # lists every dependency. The times must not differ: makespan, last instruction, each queue's busy time.
    rng = np.random.default_rng(3)
    a = rng.standard_normal((128, 1536)).astype(np.float32)
    w = rng.standard_normal((128, 128)).astype(np.float32)
    kernel = nki.jit(tiled_pipeline.func, platform_target=target)
    results = []
    for ctx in (schedule.recording, contextlib.nullcontext):
        with ctx():
            out = kernel(a, w)
        kernel.last_result.costs.finish()  # the last instruction is placed when the launch's costs are read
        s = kernel.last_result.costs.scheduler
        results.append((out, s.makespan_s, s.last_index, dict(s.queue_free), dict(s.queue_busy), s.bandwidth_free))
        if ctx is schedule.recording:
            records = kernel.last_result.schedule.instructions
    recorded, plain = results
    np.testing.assert_array_equal(recorded[0], plain[0])
    assert recorded[1:] == plain[1:]
    assert plain[1] == max(i.end_s for i in records)
    assert sum(i.wait_s > 0 for i in records) > 20  # dependencies do hold instructions back


def test_the_start_without_records_is_the_start_with_them_for_random_accesses():
    # _ready (no records) against _dependencies (records) on random in-flight accesses: ends around the
    # instruction's queue time, within and past the dependency latency, partial and whole boxes, zero fills,
    # several queues, and region bounds at or above their entries' ends.
    rng = np.random.default_rng(11)
    queues = ["tensor", "vector", "dma:0"]
    lat = 0.25

    def box():
        if rng.integers(0, 5) == 0:
            return None
        r0, c0 = (int(v) for v in rng.integers(0, 8, 2))
        return (r0, r0 + int(rng.integers(0, 4)), c0, c0 + int(rng.integers(0, 4)))

    def region(free):
        reg = schedule._Region(None)
        for lst, bound in (("writers", "writers_end"), ("readers", "readers_end")):
            entries = [[box(), free + float(rng.uniform(-2 * lat, lat)), i, queues[rng.integers(0, 3)],
                        lst == "writers" and bool(rng.integers(0, 2))] for i in range(int(rng.integers(0, 5)))]
            setattr(reg, lst, entries)
            if entries:
                setattr(reg, bound, max(e[1] for e in entries) + float(rng.choice([0.0, 0.0, rng.uniform(0, lat)])))
        return reg

    raised = skipped = 0
    for _ in range(3000):
        free = float(rng.uniform(0, 4))
        queue = queues[rng.integers(0, 3)]
        tensor = queue == "tensor"
        reads = [(region(free), box(), None) for _ in range(int(rng.integers(0, 3)))]
        writes = [(region(free), box(), None) for _ in range(int(rng.integers(0, 3)))]
        expected = schedule._dependencies(reads, writes, queue, lat, tensor, free)[0]
        assert schedule._ready(reads, writes, queue, lat, tensor, free) == expected
        raised += expected > free
        skipped += expected == free and any(r.writers for r, _, _ in reads + writes)
    assert raised > 1000 and skipped > 300  # both outcomes, many times


def test_arrivals_at_the_same_time_set_the_same_critical_dependency_in_any_order():
    # Symmetric cores reach a meeting at the same time; which thread got there first must not decide the
    # exchange's critical dependency (it is this core's own last instruction).
    crits = set()
    for order in (1, -1):
        s = schedule.Scheduler("trn2", record=True, core=0)
        s.issue("vector", "tensor_scalar", 1e-6)
        arrivals = [s.arrival(), (s.makespan_s, 1, 0)][::order]
        s.meet(arrivals)
        s.issue("collective", "core_barrier", 1e-6)
        s.finish()
        barrier = s.instructions()[-1]
        assert sorted(barrier.deps, key=schedule._dep_order) == [0, (1, 0)]
        crits.add(barrier.critical_dep)
    assert crits == {0}

# LNC=2 launches as two concurrently running cores: nisa.core_barrier, nisa.sendrecv and nki.collectives
# between them, against numpy; deadlocks and failures on one core; the one-core path unchanged.
from __future__ import annotations

import re
import threading
import time

import numpy as np
import pytest
from expecttest import TestCase

import torchneuron_ext.nki as nki
import torchneuron_ext.nki.collectives as ncc
import torchneuron_ext.nki.isa as nisa
import torchneuron_ext.nki.language as nl
from torchneuron_ext.nki import NKIError
from torchneuron_ext.nki.collectives import ReplicaGroup
from torchneuron_ext.nki.cores import DeadlockError
from torchneuron_ext.trainium import projection, targets

RG = ReplicaGroup([[0, 1]])
rng = np.random.default_rng(0)


def per_rank(shape, dtype=np.float32, ranks=2):
    return rng.standard_normal((ranks,) + shape).astype(dtype)


def on_ranks(kernel, x, *more):
    """Run ``kernel`` on one rank per leading index of ``x`` (rank r gets x[r]), as AWS's tests do."""
    return nki.launch_ranks(kernel, [(x[r],) + tuple(m[r] for m in more) for r in range(len(x))])


def hbm_collective(call, dst_shape):
    """A kernel in AWS's style: copy the rank's input into an HBM src, run ``call`` into an HBM dst,
    return a copy of dst."""

    @nki.jit
    def kernel(x):
        src = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm, name="src")
        dst = nl.ndarray(dst_shape, dtype=x.dtype, buffer=nl.shared_hbm, name="dst")
        out = nl.ndarray(dst_shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=src, src=x)
        call(src, dst)
        nisa.dma_copy(dst=out, src=dst)
        return out

    return kernel


# ------------------------------------------------------------------ cross-core instructions


@nki.jit
def swap_halves(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    i = nl.program_id(0)
    mine = nl.ndarray((64, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    theirs = nl.ndarray((64, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=mine, src=a[i * 64:(i + 1) * 64, :])
    nisa.sendrecv(src=mine, dst=theirs, send_to_rank=1 - i, recv_from_rank=1 - i, pipe_id=0)
    nisa.dma_copy(dst=out[i * 64:(i + 1) * 64, :], src=theirs)
    return out


def test_sendrecv_exchanges_the_cores_tiles():
    a = rng.standard_normal((128, 32)).astype(np.float32)
    out = swap_halves[2](a)
    np.testing.assert_array_equal(out, np.concatenate([a[64:], a[:64]]))
    assert swap_halves.last_result.costs.instructions["sendrecv"] == 2


@nki.jit
def barrier_then_read_other_half(a):
    shared = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    i = nl.program_id(0)
    t = nl.ndarray((64, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    if i == 1:
        time.sleep(0.05)  # core 1 writes late: without the barrier core 0 would read NaN
    nisa.dma_copy(dst=t, src=a[i * 64:(i + 1) * 64, :])
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
    nisa.dma_copy(dst=shared[i * 64:(i + 1) * 64, :], src=t)
    nisa.core_barrier(shared, (0, 1))
    o = 1 - i
    nisa.dma_copy(dst=t, src=shared[o * 64:(o + 1) * 64, :])
    nisa.dma_copy(dst=out[o * 64:(o + 1) * 64, :], src=t)
    return out


def test_core_barrier_makes_the_other_cores_writes_visible():
    a = rng.standard_normal((128, 16)).astype(np.float32)
    np.testing.assert_array_equal(barrier_then_read_other_half[2](a), 2 * a)
    assert barrier_then_read_other_half.last_result.costs.instructions["core_barrier"] == 2


@nki.jit
def count_steps_in_step(a):
    # AWS's moe_cte (bwmm_shard_on_I.py) advances a per-core SBUF block counter and barriers on it, so that
    # neither core starts the next block before the other has finished this one.
    out = nl.ndarray((2, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    i = nl.program_id(0)
    step = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=step, value=0.0)
    for _ in nl.sequential_range(3):
        if i == 1:
            time.sleep(0.01)
        nisa.tensor_scalar(dst=step, data=step, op0=nl.add, operand0=1.0)
        nisa.core_barrier(step, (0, 1))
    nisa.dma_copy(dst=out[i:i + 1, 0:1], src=step)
    return out


def test_core_barrier_on_a_cores_own_sbuf_tile():
    # data names what the barrier orders; AWS's library passes SBUF as well as the documented shared HBM.
    np.testing.assert_array_equal(count_steps_in_step[2](np.zeros((1, 1), np.float32)), [[3.0], [3.0]])
    assert count_steps_in_step.last_result.costs.instructions["core_barrier"] == 6


@nki.jit
def two_pipes(a):
    out = nl.ndarray((2, 2) + a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    i = nl.program_id(0)
    x = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    y = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
    nisa.tensor_scalar(dst=x, data=x, op0=nl.add, operand0=float(1 + i))
    for pipe in (0, 1, 0):
        nisa.tensor_scalar(dst=x, data=x, op0=nl.multiply, operand0=2.0)
        nisa.sendrecv(src=x, dst=y, send_to_rank=1 - i, recv_from_rank=1 - i, pipe_id=pipe)
        if pipe == 1:
            nisa.dma_copy(dst=out[i, 0], src=y)
    nisa.dma_copy(dst=out[i, 1], src=y)
    return out


def test_sendrecv_pairs_the_kth_send_of_each_pipe():
    a = rng.standard_normal((4, 8)).astype(np.float32)
    out = two_pipes[2](a)
    for i in range(2):
        sent = a + (2 - i)  # what the other core started from
        np.testing.assert_allclose(out[i, 0], sent * 4, rtol=1e-6)   # pipe 1: its second send
        np.testing.assert_allclose(out[i, 1], sent * 8, rtol=1e-6)   # pipe 0 again: its third


# ------------------------------------------------------------------ collectives


def test_all_reduce_add_and_maximum():
    x = per_rank((4, 8))
    for op, ref in ((nl.add, x.sum(0)), (nl.maximum, x.max(0)), (nl.minimum, x.min(0))):
        k = hbm_collective(lambda s, d: ncc.all_reduce(srcs=[s], dsts=[d], replica_group=RG, op=op), (4, 8))
        out = on_ranks(k, x)
        np.testing.assert_allclose(out[0], ref, rtol=1e-6)
        np.testing.assert_allclose(out[1], ref, rtol=1e-6)


def test_all_reduce_coalesced_hbm_and_costs():
    @nki.jit
    def k(x, y):
        s0 = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.hbm)
        s1 = nl.ndarray(y.shape, dtype=y.dtype, buffer=nl.hbm)
        out0 = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        out1 = nl.ndarray(y.shape, dtype=y.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=s0, src=x)
        nisa.dma_copy(dst=s1, src=y)
        ncc.all_reduce(srcs=[s0, s1], dsts=[out0, out1], replica_group=RG, op=nl.add)
        return out0, out1

    x, y = per_rank((4, 8)), per_rank((2, 16))
    (a0, b0), (a1, b1) = on_ranks(k, x, y)
    np.testing.assert_allclose(a1, x.sum(0), rtol=1e-6)
    np.testing.assert_allclose(b0, y.sum(0), rtol=1e-6)
    costs = k.last_result.costs
    assert costs.instructions["all_reduce"] == 1 and len(k.last_rank_results) == 2
    hw = targets.by_name("trn2").physical_core()
    nbytes = (4 * 8 + 2 * 16) * 4
    expected = projection.collective("all_reduce", nbytes, nbytes, 2, hw).work_s
    assert costs.busy_s["collective"] == pytest.approx(expected)
    # The cost model's collective (docs/cost_model.md, "Collectives: algorithms and latency floor"): a
    # 256-byte all-reduce of 2 ranks is a Single-step Mesh (each rank sends its whole buffer to the other
    # in one step: faster than Mesh's two steps below 1 MiB), over one NeuronLink port, plus the floor of
    # one collective. It used to be the ring's 2 steps at the core's share of the chip's NeuronLink.
    assert expected == pytest.approx(hw.collective_floor_s + hw.link_hop_s + nbytes / hw.link_port_bytes_per_s)


def test_all_gather_hbm_dim0_and_sbuf_dim1():
    x = per_rank((4, 8))
    k = hbm_collective(lambda s, d: ncc.all_gather(srcs=[s], dsts=[d], replica_group=RG, collective_dim=0), (8, 8))
    for out in on_ranks(k, x):
        np.testing.assert_array_equal(out, np.concatenate([x[0], x[1]], axis=0))

    @nki.jit
    def sb(x):
        s = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        d = nl.ndarray((x.shape[0], 2 * x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        out = nl.ndarray((x.shape[0], 2 * x.shape[1]), dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=s, src=x)
        ncc.all_gather(srcs=[s], dsts=[d], replica_group=RG, collective_dim=1)
        nisa.dma_copy(dst=out, src=d)
        return out

    out = on_ranks(sb, x)
    np.testing.assert_array_equal(out[1], np.concatenate([x[0], x[1]], axis=1))


def test_reduce_scatter_and_all_to_all():
    x = per_rank((8, 4))
    k = hbm_collective(lambda s, d: ncc.reduce_scatter(srcs=[s], dsts=[d], replica_group=RG, collective_dim=0,
                                                       op=nl.add), (4, 4))
    out = on_ranks(k, x)
    total = x.sum(0)
    np.testing.assert_allclose(out[0], total[:4], rtol=1e-6)
    np.testing.assert_allclose(out[1], total[4:], rtol=1e-6)

    k = hbm_collective(lambda s, d: ncc.all_to_all(srcs=[s], dsts=[d], replica_group=RG, collective_dim=0), (8, 4))
    out = on_ranks(k, x)
    np.testing.assert_array_equal(out[0], np.concatenate([x[0][:4], x[1][:4]]))
    np.testing.assert_array_equal(out[1], np.concatenate([x[0][4:], x[1][4:]]))


def test_groups_of_a_replica_group_run_apart():
    x = per_rank((2, 4), ranks=4)
    groups = ReplicaGroup([[0, 2], [3, 1]])
    k = hbm_collective(lambda s, d: ncc.all_gather(srcs=[s], dsts=[d], replica_group=groups, collective_dim=0),
                       (4, 4))
    out = on_ranks(k, x)
    np.testing.assert_array_equal(out[0], np.concatenate([x[0], x[2]]))
    np.testing.assert_array_equal(out[2], np.concatenate([x[0], x[2]]))
    np.testing.assert_array_equal(out[1], np.concatenate([x[3], x[1]]))   # in the group's order


@nki.jit
def gather_tiles_lnc2(x):
    """AWS's tiled SBUF all-gather pattern: under LNC=2 each core gathers its own row tile across ranks."""
    rows, cols = x.shape
    c = nl.program_id(0)
    half = rows // 2
    out = nl.ndarray((rows, 2 * cols), dtype=x.dtype, buffer=nl.shared_hbm)
    src = nl.ndarray((half, cols), dtype=x.dtype, buffer=nl.sbuf)
    dst = nl.ndarray((half, 2 * cols), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=src, src=x[c * half:(c + 1) * half, :])
    ncc.all_gather(srcs=[src], dsts=[dst], replica_group=RG, collective_dim=1)
    nisa.dma_copy(dst=out[c * half:(c + 1) * half, :], src=dst)
    return out


def test_each_core_of_an_lnc2_rank_meets_the_same_core_of_the_other_ranks():
    x = per_rank((8, 4))
    out = on_ranks(gather_tiles_lnc2[2], x)
    for r in range(2):
        np.testing.assert_array_equal(out[r], np.concatenate([x[0], x[1]], axis=1))
    assert gather_tiles_lnc2.last_result.costs.instructions["all_gather"] == 2   # one per core


def _with_metadata(call):
    @nki.jit
    def kernel(x, meta):
        src = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.hbm)
        dst = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.hbm)
        m = nl.ndarray(meta.shape, dtype=meta.dtype, buffer=nl.hbm)
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        out_meta = nl.ndarray(meta.shape, dtype=meta.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=src, src=x)
        nisa.dma_copy(dst=m, src=meta)
        nisa.dma_copy(dst=dst, src=x)  # dst starts as this rank's x: what the collective leaves shows
        call(src, dst, m)
        nisa.dma_copy(dst=out, src=dst)
        nisa.dma_copy(dst=out_meta, src=m)
        return out, out_meta

    return kernel


def test_all_gather_v_places_each_ranks_chunk_in_its_slot():
    x = per_rank((16,))
    # rank 0 sends 3 elements from element 2, rank 1 sends 5 from element 0 (rows 0/1: first column read)
    meta = np.array([[[3, 0], [2, 0], [0, 0]], [[5, 0], [0, 0], [0, 0]]], dtype=np.uint32)
    k = _with_metadata(lambda s, d, m: ncc.all_gather_v(srcs=[s], dsts=[d], replica_group=RG, metadata_tensor=m))
    for r, (out, out_meta) in enumerate(on_ranks(k, x, meta)):
        expect = x[r].copy()
        expect[0:3] = x[0][2:5]
        expect[8:13] = x[1][0:5]
        np.testing.assert_array_equal(out, expect)
        np.testing.assert_array_equal(out_meta[2], [3, 5])   # row 2: what each rank sent here


def test_all_to_all_v_sends_each_rank_its_counts():
    x = per_rank((16,))
    # rank r row 0: send_counts per destination, row 1: send_displs per destination
    meta = np.array([[[2, 3], [0, 4], [0, 0]], [[1, 6], [7, 1], [0, 0]]], dtype=np.uint32)
    k = _with_metadata(lambda s, d, m: ncc.all_to_all_v(srcs=[s], dsts=[d], replica_group=RG, metadata_tensor=m))
    (o0, m0), (o1, m1) = on_ranks(k, x, meta)
    e0, e1 = x[0].copy(), x[1].copy()
    e0[0:2], e0[8:9] = x[0][0:2], x[1][7:8]
    e1[0:3], e1[8:14] = x[0][4:7], x[1][1:7]
    np.testing.assert_array_equal(o0, e0)
    np.testing.assert_array_equal(o1, e1)
    np.testing.assert_array_equal(m0[2], [2, 1])
    np.testing.assert_array_equal(m1[2], [3, 6])


def test_collective_permute_and_the_ring():
    x = per_rank((4, 4), ranks=3)
    k = hbm_collective(lambda s, d: ncc.collective_permute(srcs=[s], dsts=[d],
                                                           source_target_pairs=[(0, 1), (1, 2), (2, 0)]), (4, 4))
    out = on_ranks(k, x)
    for r in range(3):
        np.testing.assert_array_equal(out[r], x[(r - 1) % 3])

    ring3 = ReplicaGroup([[0, 1, 2]])

    def ring(s, d):
        ncc.collective_permute_implicit(srcs_by_channel=[[s]], dsts_by_channel=[[d]], replica_group=ring3)

    out = on_ranks(hbm_collective(ring, (4, 4)), x)
    np.testing.assert_array_equal(out[0], x[2])
    np.testing.assert_array_equal(out[2], x[1])

    def ring_reduce(s, d):
        ncc.collective_permute_implicit_reduce(srcs0_by_channel=[[s]], srcs1_by_channel=[[s]],
                                               dsts_by_channel=[[d]], replica_group=ring3, op=nl.add)

    out = on_ranks(hbm_collective(ring_reduce, (4, 4)), x)
    np.testing.assert_allclose(out[1], 2 * x[0], rtol=1e-6)


def test_rank_ids():
    ring3 = ReplicaGroup([[0, 1, 2]])

    # The ids are registers (AWS: known at run time only): read them with register_store, index with them as
    # dynamic offsets.
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape[1:], dtype=x.dtype, buffer=nl.shared_hbm)
        ids = nl.ndarray((1, 4), dtype=nl.int32, buffer=nl.shared_hbm)
        r = ncc.rank_id()
        nisa.register_store(ids[0:1, 0:1], r)
        for i in range(3):
            nisa.register_store(ids[0:1, i + 1:i + 2],
                                ncc.collective_permute_implicit_current_processing_rank_id(i, ring3))
        nisa.dma_copy(dst=out, src=x.ap(pattern=[[4, 4], [1, 4]], scalar_offset=r, indirect_dim=0))
        return out, ids

    x = per_rank((4, 4), ranks=3)
    outs = nki.launch_ranks(k, [{"x": x}] * 3)
    for r in range(3):
        np.testing.assert_array_equal(outs[r][0], x[r])
        np.testing.assert_array_equal(outs[r][1], [[r, r, (r - 1) % 3, (r - 2) % 3]])

    @nki.jit
    def alone(x):
        out = nl.ndarray(x.shape[1:], dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=x.select(0, ncc.rank_id()))
        return out

    np.testing.assert_array_equal(alone[2](x), x[0])   # a launch on its own is rank 0, both cores

    @nki.jit
    def single(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        ncc.all_reduce(srcs=[x], dsts=[out], replica_group=ReplicaGroup([[0]]), op=nl.add)
        return out

    np.testing.assert_array_equal(single[2](x[0]), x[0])  # a group of one rank: both cores alone


# ------------------------------------------------------------------ errors


class TestMessages(TestCase):
    def _message(self, kernel, *args) -> str:
        with self.assertRaises(NKIError) as cm:
            kernel(*args)
        return re.sub(r"\.py:\d+", ".py:N", cm.exception.message)

    def test_deadlock_at_a_barrier_the_other_core_never_reaches(self):
        @nki.jit
        def k(a):
            out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
            if nl.program_id(0) == 0:
                nisa.core_barrier(out, (0, 1))
            return out

        t0 = time.monotonic()
        with self.assertRaises(DeadlockError) as cm:
            k[2](np.zeros((4, 4), np.float32))
        assert time.monotonic() - t0 < 5
        self.assertExpectedInline(re.sub(r"\.py:\d+", ".py:N", cm.exception.message), """\
deadlock between the cores of kernel k: core 0 waits in nisa.core_barrier(cores=(0, 1)) at test_collectives.py:N for core 1; core 1 finished the kernel (on the device the kernel would hang)""")
        assert cm.exception.code == "deadlock" and "core_barrier(out, (0, 1))" in str(cm.exception)

    def test_deadlock_between_different_instructions(self):
        @nki.jit
        def k(a):
            out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
            t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=a)
            if nl.program_id(0) == 0:
                nisa.sendrecv(src=t, dst=t, send_to_rank=1, recv_from_rank=1, pipe_id=3)
            else:
                nisa.core_barrier(out, (0, 1))
            return out

        self.assertExpectedInline(self._message(k[2], np.zeros((4, 4), np.float32)), """\
deadlock between the cores of kernel k: core 0 waits in nisa.sendrecv(send_to_rank=1, recv_from_rank=1, pipe_id=3) at test_collectives.py:N for core 1; core 1 waits in nisa.core_barrier(cores=(0, 1)) at test_collectives.py:N for core 0 (on the device the kernel would hang)""")

    def test_replica_group_naming_ranks_that_do_not_run(self):
        @nki.jit
        def k(x):
            out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
            ncc.all_reduce(srcs=[x], dsts=[out], replica_group=ReplicaGroup([[0, 1, 2, 3]]), op=nl.add)
            return out

        x = np.zeros((4, 4), np.float32)
        with self.assertRaises(NKIError) as cm:
            nki.launch_ranks(k[2], [(x,), (x,)])
        self.assertExpectedInline(cm.exception.message, """\
ncc.all_reduce: replica group [0, 1, 2, 3] names rank 2, but the kernel runs on 2 ranks (0..1)""")
        self.assertExpectedInline(self._message(k[2], x), """\
ncc.all_reduce: replica group [0, 1, 2, 3] names rank 1, but the kernel runs on 1 rank (0..0): a launch is one rank (a logical core); nki.launch_ranks runs several""")

    def test_deadlock_between_ranks(self):
        @nki.jit
        def k(x, join):
            out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
            if join:  # rank 1 is given False (a rank id is a register: no Python branch on it)
                ncc.all_reduce(srcs=[x], dsts=[out], replica_group=ReplicaGroup([[0, 1, 2]]), op=nl.add)
            return out

        x = np.zeros((4, 4), np.float32)
        with self.assertRaises(DeadlockError) as cm:
            nki.launch_ranks(k, [(x, True), (x, False), (x, True)])
        self.assertExpectedInline(re.sub(r"\.py:\d+", ".py:N", cm.exception.message), """deadlock between the ranks of kernel k: rank 0 waits in ncc.all_reduce(replica group [0, 1, 2]) at test_collectives.py:N for rank 1; rank 1 finished the kernel; rank 2 waits in ncc.all_reduce(replica group [0, 1, 2]) at test_collectives.py:N for rank 1 (on the device the kernel would hang)""")

    def test_cross_core_instruction_rules(self):
        @nki.jit(platform_target="trn1")
        def old(a):
            t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
            nisa.sendrecv(src=t, dst=t, send_to_rank=0, recv_from_rank=0, pipe_id=0)
            return a

        self.assertExpectedInline(self._message(old, np.zeros((4, 4), np.float32)), """\
nisa.sendrecv is available on NeuronCore-v3 or newer; the launch's target trn1 is NeuronCore-v2""")

        @nki.jit
        def big(a):
            t = nl.ndarray((4, 512), dtype=nl.float32, buffer=nl.sbuf)
            nisa.sendrecv(src=t, dst=t, send_to_rank=1, recv_from_rank=1, pipe_id=0,
                          dma_engine=nisa.dma_engine.gpsimd_dma)
            return a

        self.assertExpectedInline(self._message(big[2], np.zeros((4, 4), np.float32)), """\
nisa.sendrecv: dma_engine=gpsimd_dma moves at most 1024 bytes per partition of 32-bit data, got 2048""")

        @nki.jit
        def untensored_barrier(a):
            nisa.core_barrier(1.0, (0, 1))
            return a

        with pytest.raises(TypeError) as info:
            untensored_barrier[2](np.zeros((4, 4), np.float32))
        self.assertExpectedInline(str(info.value), """\
nisa.core_barrier: data must be a tensor (the data the cores synchronize on), got float""")

    def test_replica_group_rules(self):
        with pytest.raises(ValueError, match="must not overlap"):
            ReplicaGroup([[0, 1], [1]])
        with pytest.raises(TypeError, match="list of lists"):
            ReplicaGroup([0, 1])


def test_an_error_on_one_core_stops_the_other_and_is_raised_once():
    reached = []

    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        if nl.program_id(0) == 1:
            raise ValueError("core 1 failed")
        for _ in range(100000):  # core 0 would run long: it stops at its next instruction instead
            nisa.dma_copy(dst=t, src=a)
        reached.append(True)
        return out

    t0 = time.monotonic()
    with pytest.raises(ValueError, match="core 1 failed") as info:
        k[2](np.zeros((4, 4), np.float32))
    assert time.monotonic() - t0 < 10 and not reached
    assert info.value.__context__ is None or not isinstance(info.value.__context__, ValueError)


def test_one_core_launches_stay_on_the_callers_thread():
    threads = []

    @nki.jit
    def k(a):
        threads.append(threading.current_thread())
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=a)
        return out

    a = np.ones((4, 4), np.float32)
    k(a)
    k[1](a)
    assert threads == [threading.main_thread()] * 2
    threads.clear()
    k[2](a)
    assert len(set(threads)) == 2 and threading.main_thread() not in threads


def test_concurrent_cores_are_timed_as_running_side_by_side():
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        for _ in range(4 if nl.program_id(0) == 0 else 1):
            nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)
        nisa.dma_copy(dst=out, src=t)
        return out

    a = np.ones((128, 512), np.float32)
    k(a)
    one = k.last_result.costs
    k[2](a)
    two = k.last_result.costs
    assert two.busy_s["vector"] == pytest.approx(one.busy_s["vector"])   # the slower core's, not the sum
    assert two.instructions["tensor_scalar"] == 5


def test_sendrecv_stays_within_its_rank():
    x = per_rank((128, 8))
    outs = on_ranks(swap_halves[2], x)
    for r in range(2):
        np.testing.assert_array_equal(outs[r], np.concatenate([x[r][64:], x[r][:64]]))


def test_a_barrier_of_one_core():
    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=a)
        nisa.core_barrier(out, (0,))   # AWS's kernels at LNC=1
        nisa.core_barrier(out, (0))    # and (bwmm_shard_on_I.py) as the bare index 0
        return out

    a = np.ones((4, 4), np.float32)
    np.testing.assert_array_equal(k(a), a)
    with pytest.raises(NKIError, match=r"core 1 runs a barrier of cores \(0,\) that it is not one of"):
        k[2](a)


def test_launch_ranks_arguments():
    @nki.jit
    def k(x, scale=1.0):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=scale)
        nisa.dma_copy(dst=out, src=t)
        return out

    x = per_rank((4, 4))
    outs = nki.launch_ranks(k, [{"x": x[0], "scale": 2.0}, (x[1],)])
    np.testing.assert_allclose(outs[0], 2 * x[0])
    np.testing.assert_array_equal(outs[1], x[1])
    with pytest.raises(ValueError, match="one set of arguments per rank"):
        nki.launch_ranks(k, [])
    from torchneuron_ext.nki import legacy
    with pytest.raises(ValueError, match="legacy SPMD grids have no ranks"):
        nki.launch_ranks(legacy.jit(lambda x: x), [(x[0],)])


def test_replica_group_is_a_constant_argument():
    assert ReplicaGroup([[0, 1]]) == ReplicaGroup([[0, 1]])
    assert hash(ReplicaGroup([[0, 1]])) == hash(ReplicaGroup([(0, 1)]))
    assert ReplicaGroup([[0, 1]]) != ReplicaGroup([[1, 0]])

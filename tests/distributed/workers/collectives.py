"""Worker: every collective on neuron tensors, checked against CPU arithmetic."""
from __future__ import annotations

import os

import torch
import torch.distributed as dist

from tests.distributed.launcher import Checks, write_result

DEV = torch.device("neuron")


def data(rank: int, shape: tuple[int, ...] = (3, 4), dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Rank-specific values every rank can recompute for the reference."""
    g = torch.Generator().manual_seed(100 + rank)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(1, 9, shape, generator=g, dtype=dtype)


def equal(actual: torch.Tensor, expected: torch.Tensor) -> None:
    assert actual.device.type == "neuron", f"result on {actual.device}, expected a neuron tensor"
    torch.testing.assert_close(actual.cpu(), expected, rtol=1e-5, atol=1e-5)


def main() -> None:
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group(os.environ.get("TNX_BACKEND", "neuron"))
    c = Checks()
    everyone = [data(r) for r in range(world)]

    def device_per_rank() -> None:
        assert os.environ["NEURON_RT_VISIBLE_CORES"] == str(rank), os.environ.get("NEURON_RT_VISIBLE_CORES")
        # TorchNeuron's numbering: the node's process count, and this rank's core as neuron:LOCAL_RANK.
        assert torch.neuron.device_count() == world, torch.neuron.device_count()
        assert DEV.index is None and torch.neuron.current_device() == rank
        props = torch.neuron.get_device_properties()
        assert f"physical_core_id={rank}" in repr(props), repr(props)

    def backend_names() -> None:
        assert dist.get_backend() == os.environ.get("TNX_BACKEND", "neuron"), dist.get_backend()
        assert dist.Backend.default_device_backend_map["neuron"] == "neuron"

    def all_reduce_ops() -> None:
        ops = {dist.ReduceOp.SUM: lambda s: s.sum(0), dist.ReduceOp.PRODUCT: lambda s: s.prod(0),
               dist.ReduceOp.MIN: lambda s: s.min(0).values, dist.ReduceOp.MAX: lambda s: s.max(0).values,
               dist.ReduceOp.AVG: lambda s: s.mean(0)}
        for op, ref in ops.items():
            t = data(rank).to(DEV)
            dist.all_reduce(t, op=op)
            equal(t, ref(torch.stack(everyone)))
        for op, ref in {dist.ReduceOp.BAND: torch.bitwise_and, dist.ReduceOp.BOR: torch.bitwise_or,
                        dist.ReduceOp.BXOR: torch.bitwise_xor}.items():
            ints = [data(r, dtype=torch.int32) for r in range(world)]
            t = ints[rank].to(DEV)
            dist.all_reduce(t, op=op)
            expected = ints[0]
            for x in ints[1:]:
                expected = ref(expected, x)
            equal(t, expected)
        t = data(rank).to(DEV)
        dist.all_reduce(t, op=dist._make_nccl_premul_sum(0.5))
        equal(t, torch.stack(everyone).sum(0) * 0.5)
        ints = [data(r, dtype=torch.int64) for r in range(world)]
        t = ints[rank].to(DEV)
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        equal(t, torch.stack(ints).sum(0).div(world, rounding_mode="trunc"))

    def all_reduce_dtypes() -> None:
        for dtype in (torch.float16, torch.bfloat16, torch.float64, torch.int8, torch.uint8):
            xs = [data(r, dtype=dtype) for r in range(world)]
            t = xs[rank].to(DEV)
            dist.all_reduce(t)
            equal(t, torch.stack(xs).sum(0).to(dtype))

    def functional_coalesced_average() -> None:
        # Waited once per output, as compiled graphs and DTensor do: a second wait must not undo AVG's division.
        import torch.distributed._functional_collectives  # noqa: F401  (registers the functional ops)
        fc = torch.ops._c10d_functional
        xs = [[data(r, (world * 2, 4)), data(r, (world * 3, 4))] for r in range(world)]
        for op, ref in (("avg", lambda s: s.mean(0)), ("sum", lambda s: s.sum(0)), ("max", lambda s: s.max(0).values)):
            outs = fc.reduce_scatter_tensor_coalesced([t.to(DEV) for t in xs[rank]], op, world,
                                                     dist.group.WORLD.group_name)
            for o in outs:
                fc.wait_tensor(o)
            for i, (o, rows) in enumerate(zip(outs, (2, 3))):
                whole = ref(torch.stack([x[i] for x in xs]))
                equal(o, whole[rank * rows:(rank + 1) * rows])

    def async_work_and_future() -> None:
        t = data(rank).to(DEV)
        work = dist.all_reduce(t, op=dist.ReduceOp.AVG, async_op=True)
        fut = work.get_future()
        value = fut.wait()
        assert isinstance(value, list) and value[0].device.type == "neuron", value
        assert work.wait() is True and work.is_completed() and work.is_success()
        equal(t, torch.stack(everyone).mean(0))
        equal(value[0], torch.stack(everyone).mean(0))
        chained = dist.all_reduce(data(rank).to(DEV), async_op=True).get_future().then(lambda f: f.value()[0] * 2)
        equal(chained.wait(), torch.stack(everyone).sum(0) * 2)

    def dropped_async_work_keeps_tensors() -> None:
        # The caller keeps nothing but the result's future: the device memory
        # must stay valid until the transport is done.
        fut = dist.all_reduce(data(rank, (1 << 16,)).to(DEV), async_op=True).get_future()
        torch.neuron.empty_cache()
        junk = [torch.full((1 << 16,), 7.0, device=DEV) for _ in range(4)]
        equal(fut.wait()[0], sum(data(r, (1 << 16,)) for r in range(world)))
        del junk

    def all_gather_forms() -> None:
        outs = [torch.empty(3, 4, device=DEV) for _ in range(world)]
        dist.all_gather(outs, data(rank).to(DEV))
        for r in range(world):
            equal(outs[r], everyone[r])
        flat = torch.empty(world * 3, 4, device=DEV)
        dist.all_gather_into_tensor(flat, data(rank).to(DEV))
        equal(flat, torch.cat(everyone))
        stacked = torch.empty(world, 3, 4, device=DEV)
        dist.all_gather_into_tensor(stacked, data(rank).to(DEV), async_op=True).wait()  # NCCL-style stacked output
        equal(stacked, torch.stack(everyone))

    def reduce_scatter_forms() -> None:
        inputs = [data(rank, (2, 4)) + i for i in range(world)]
        out = torch.empty(2, 4, device=DEV)
        dist.reduce_scatter(out, [x.to(DEV) for x in inputs])
        equal(out, sum(data(r, (2, 4)) + rank for r in range(world)))
        big = data(rank, (world * 2, 4))
        out = torch.empty(2, 4, device=DEV)
        dist.reduce_scatter_tensor(out, big.to(DEV), op=dist.ReduceOp.AVG)
        ref = torch.stack([data(r, (world * 2, 4)) for r in range(world)]).mean(0)
        equal(out, ref[rank * 2:(rank + 1) * 2])
        out = torch.empty(2, 4, device=DEV)
        dist.reduce_scatter_tensor(out, big.to(DEV), op=dist._make_nccl_premul_sum(2.0), async_op=True).wait()
        equal(out, ref[rank * 2:(rank + 1) * 2] * world * 2.0)
        equal(big.to(DEV), big)  # the input is left alone by the pre-multiplication
        # TorchNeuron's single-input form: one tensor holding every rank's block, split along the one
        # dimension where its shape differs from the output's (shorter shape padded with leading 1s).
        for full, out_shape, dim in [((world * 2, 3), (2, 3), 0), ((2, world * 3, 4), (2, 3, 4), 1),
                                     ((1, world * 5), (5,), 1)]:
            out = torch.empty(out_shape, device=DEV)
            dist.reduce_scatter(out, [data(rank, full).to(DEV)])
            total = sum(data(r, full) for r in range(world))
            equal(out, total.narrow(dim, rank * total.size(dim) // world, total.size(dim) // world).reshape(out_shape))
        strided = data(rank, (4, world * 2)).to(DEV).t()  # non-contiguous, split along dim 0
        out = torch.empty(2, 4, device=DEV)
        dist.reduce_scatter(out, [strided], op=dist.ReduceOp.MAX)
        equal(out, torch.stack([data(r, (4, world * 2)).t() for r in range(world)]).max(0).values[rank * 2:rank * 2 + 2])

    def broadcast_reduce_gather_scatter() -> None:
        for root in range(world):
            t = data(rank).to(DEV)
            dist.broadcast(t, src=root)
            equal(t, everyone[root])
            t = data(rank).to(DEV)
            dist.reduce(t, dst=root, op=dist.ReduceOp.MAX)
            if rank == root:
                equal(t, torch.stack(everyone).max(0).values)
            else:
                equal(t, everyone[rank])  # as on NCCL: gloo would have used it as scratch
            t = data(rank).to(DEV)
            dist.reduce(t, dst=root, op=dist._make_nccl_premul_sum(2.0))
            equal(t, torch.stack(everyone).sum(0) * 2.0 if rank == root else everyone[rank])
            gathered = [torch.empty(3, 4, device=DEV) for _ in range(world)] if rank == root else None
            dist.gather(data(rank).to(DEV), gathered, dst=root)
            if rank == root:
                for r in range(world):
                    equal(gathered[r], everyone[r])
            out = torch.empty(3, 4, device=DEV)
            pieces = [everyone[r].to(DEV) + 10 * root for r in range(world)] if rank == root else None
            dist.scatter(out, pieces, src=root)
            equal(out, everyone[rank] + 10 * root)

    def all_to_all_uneven() -> None:
        # rank r sends (p + r + 1) rows to peer p.
        send = [p + rank + 1 for p in range(world)]
        recv = [rank + p + 1 for p in range(world)]
        inp = torch.cat([torch.full((send[p], 2), float(100 * rank + p)) for p in range(world)])
        out = torch.empty(sum(recv), 2, device=DEV)
        dist.all_to_all_single(out, inp.to(DEV), output_split_sizes=recv, input_split_sizes=send)
        expected = torch.cat([torch.full((recv[p], 2), float(100 * p + rank)) for p in range(world)])
        equal(out, expected)
        outs = [torch.empty(recv[p], 2, device=DEV) for p in range(world)]
        ins = [torch.full((send[p], 2), float(100 * rank + p), device=DEV) for p in range(world)]
        dist.all_to_all(outs, ins)
        for p in range(world):
            equal(outs[p], torch.full((recv[p], 2), float(100 * p + rank)))
        even_out = torch.empty(world * 2, device=DEV)
        dist.all_to_all_single(even_out, torch.arange(world * 2.0, device=DEV) + 10 * rank, async_op=True).wait()
        equal(even_out, torch.cat([torch.arange(rank * 2.0, rank * 2.0 + 2) + 10 * p for p in range(world)]))

    def point_to_point() -> None:
        peer = 1 - rank
        if rank == 0:
            dist.send(data(0).to(DEV), dst=peer)
            t = torch.empty(3, 4, device=DEV)
            dist.recv(t, src=peer)
            equal(t, everyone[1])
        else:
            t = torch.empty(3, 4, device=DEV)
            dist.recv(t, src=peer)
            equal(t, everyone[0])
            dist.send(data(1).to(DEV), dst=peer)
        # Both post the receive first: only non-blocking sends make this work.
        got = torch.empty(5, device=DEV)
        r = dist.irecv(got, src=peer)
        s = dist.isend(torch.full((5,), float(rank), device=DEV), dst=peer)
        s.wait()
        r.wait()
        equal(got, torch.full((5,), float(peer)))
        got2 = torch.empty(5, device=DEV)
        works = dist.batch_isend_irecv([dist.P2POp(dist.isend, torch.full((5,), rank + 0.5, device=DEV), peer),
                                        dist.P2POp(dist.irecv, got2, peer)])
        for w in works:
            w.wait()
        equal(got2, torch.full((5,), peer + 0.5))
        # A receive from whoever sends first reports the sender.
        if rank == 0:
            anyone = torch.empty(2, device=DEV)
            assert dist.recv(anyone) == 1
            equal(anyone, torch.full((2,), 42.0))
        else:
            dist.send(torch.full((2,), 42.0, device=DEV), dst=0)

    def coalesced_forms() -> None:
        ts = [data(rank, (2,)).to(DEV), data(rank, (3, 3)).to(DEV)]
        dist.all_reduce_coalesced(ts)
        equal(ts[0], sum(data(r, (2,)) for r in range(world)))
        equal(ts[1], sum(data(r, (3, 3)) for r in range(world)))
        outs = [torch.empty(world * 2, device=DEV), torch.empty(world * 3, device=DEV)]
        with dist._coalescing_manager(async_ops=True) as cm:
            dist.all_gather_into_tensor(outs[0], data(rank, (2,)).to(DEV))
            dist.all_gather_into_tensor(outs[1], data(rank, (3,)).to(DEV))
        cm.wait()
        equal(outs[0], torch.cat([data(r, (2,)) for r in range(world)]))
        equal(outs[1], torch.cat([data(r, (3,)) for r in range(world)]))
        rs = [torch.empty(2, device=DEV), torch.empty(1, device=DEV)]
        with dist._coalescing_manager():
            dist.reduce_scatter_tensor(rs[0], data(rank, (world * 2,)).to(DEV))
            dist.reduce_scatter_tensor(rs[1], data(rank, (world,)).to(DEV))
        equal(rs[0], sum(data(r, (world * 2,)) for r in range(world))[rank * 2:rank * 2 + 2])
        equal(rs[1], sum(data(r, (world,)) for r in range(world))[rank:rank + 1])

    def subgroups() -> None:
        pair = dist.new_group([0, 1])
        t = data(rank).to(DEV)
        dist.all_reduce(t, group=pair)
        equal(t, torch.stack(everyone).sum(0))
        singles = [dist.new_group([r]) for r in range(world)]
        t = data(rank).to(DEV)
        dist.all_reduce(t, group=singles[rank])
        equal(t, everyone[rank])
        assert dist.get_backend(pair) == dist.get_backend()

    def cpu_tensors_and_objects() -> None:
        if dist.get_backend() == "neuron":
            t = data(rank)
            dist.all_reduce(t)
            torch.testing.assert_close(t, torch.stack(everyone).sum(0))
        objs = [None] * world
        dist.all_gather_object(objs, {"rank": rank})
        assert objs == [{"rank": r} for r in range(world)], objs

    def barrier_and_views() -> None:
        dist.barrier()
        base = torch.zeros(4, 6, device=DEV)
        part = base[1:3]  # a contiguous view with a storage offset
        part.fill_(rank + 1.0)
        dist.all_reduce(part)
        expected = torch.zeros(4, 6)
        expected[1:3] = sum(r + 1.0 for r in range(world))
        equal(base, expected)

    def profiler_lane_and_timing() -> None:
        import json

        from torch.profiler import ProfilerActivity, profile

        import torchneuron_ext.profiler as tp
        x = data(rank, (256, 256)).to(DEV)
        with tp.timing():
            dist.all_reduce(x)
            dist.all_gather_into_tensor(torch.empty(world * 256, 256, device=DEV), x, async_op=True).wait()
            stats = {s.name: s for s in tp.op_stats()}
        assert stats["c10d::allreduce"].tier == "collective", stats["c10d::allreduce"]
        assert stats["c10d::allreduce"].device_total_us > 0
        assert stats["c10d::allgather_into_tensor"].bytes_written == world * 256 * 256 * 4
        assert "c10d::allreduce" in tp.timing_table()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
            y = x @ x
            dist.all_reduce(y)
            dist.all_reduce(y, async_op=True).wait()
        path = os.path.join(os.environ["TNX_RESULT_DIR"], f"trace{rank}.json")
        prof.export_chrome_trace(path)
        events = json.load(open(path))["traceEvents"]
        lanes = {e["tid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
        coll = [e for e in events if e.get("cat") == "kernel" and e["name"] == "neuron::c10d::allreduce"]
        assert len(coll) == 2, [e["name"] for e in events if e.get("cat") == "kernel"]
        # Lanes are named by device index: this rank's core is neuron:{rank}.
        assert {lanes[e["tid"]] for e in coll} == {f"NC{rank} collectives"}, {lanes.get(e["tid"]) for e in coll}
        assert all(e["args"]["tier"] == "collective" and e["args"]["bytes"] == 2 * 256 * 256 * 4 for e in coll)
        mm = next(e for e in events if e.get("cat") == "kernel" and e["name"] == "neuron::mm")
        assert lanes[mm["tid"]] == f"NC{rank} hardware (kernel execution)", lanes[mm["tid"]]
        rows = {e.key: e for e in prof.key_averages()}
        assert rows["neuron::c10d::allreduce"].self_device_time_total > 0, list(rows)
        # The cost model's N is each collective's own group: the world's 2 ranks, a 1-rank subgroup's 1.
        from torchneuron_ext import costmodel
        single = [dist.new_group([r]) for r in range(world)][rank]
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
            dist.all_reduce(x)
            dist.all_reduce(x, group=single)
        prof.export_chrome_trace(path)
        trace = json.load(open(path))
        # A trace lists its events in no particular order: in the order they ran.
        coll = sorted((e for e in trace["traceEvents"] if e.get("cat") == "kernel"
                       and e["name"] == "neuron::c10d::allreduce"), key=lambda e: e["ts"])
        assert [e["args"]["group size"] for e in coll] == [world, 1], [e["args"] for e in coll]
        projected = sorted((k for k in costmodel.project_trace(trace, "trn2").kernels if k.tier == "collective"),
                           key=lambda k: k.dispatch_us)
        want = costmodel.collective("c10d::allreduce", 256 * 256 * 4, 256 * 256 * 4, world, "trn2").duration_s
        assert abs(projected[0].duration_us - want * 1e6) < 1e-6 and projected[1].duration_us == 0.0, projected
        # op_stats rows sum every group's calls: projected over the world's ranks (not as one rank's).
        assert stats["c10d::allreduce"].projected_total_us > 0, stats["c10d::allreduce"]

    for name, fn in list(locals().items()):
        if callable(fn) and name not in ("c",) and fn.__code__.co_argcount == 0 and name != "main":
            if name == "device_per_rank" and os.environ.get("TNX_SKIP_DEVICE_CHECK"):
                continue
            c.run(name, fn)
    # Disagreeing ranks, last: every error must leave the group in step (checked by test_faults).
    from tests.distributed.workers.faults import mismatch
    results = dict(c.results)
    results.update({f"mismatch.{k}": v for k, v in mismatch(rank).items()})
    dist.destroy_process_group()
    write_result(results)


if __name__ == "__main__":
    main()
